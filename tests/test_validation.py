"""The model validator: each kind of bad row is found, counted, and nothing is repaired."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from spark_app.validate import (
    ClusterModelError,
    find_row_violations,
    find_violations,
    validate_partitions,
)
from statemachines import reference_validation
from statemachines import schemas as s
from statemachines.validation import FIXES, model_violations

GOOD = ("t", 0, [1, 2, 3], [], [], [1, 2], 1, 3, 4, 1, "OnlinePartition")

# kind -> a row that breaks exactly that rule (positions follow PARTITIONS_SCHEMA)
BAD = {
    "empty_replicas": ("t", 1, [], [], [], [], -1, 0, 0, 1, "OfflinePartition"),
    "duplicate_replicas": ("t", 2, [1, 1, 2], [], [], [1], 1, 0, 0, 1, "OnlinePartition"),
    "negative_broker_id": ("t", 3, [1, -4], [], [], [1], 1, 0, 0, 1, "OnlinePartition"),
    "unknown_broker_id": ("t", 4, [1, 9], [], [], [1], 1, 0, 0, 1, "OnlinePartition"),
    "isr_not_subset_of_replicas": ("t", 5, [1, 2], [], [], [1, 3], 1, 0, 0, 1, "OnlinePartition"),
    "duplicate_isr": ("t", 6, [1, 2], [], [], [1, 1], 1, 0, 0, 1, "OnlinePartition"),
    "leader_not_in_replicas": ("t", 7, [1, 2], [], [], [1], 3, 0, 0, 1, "OnlinePartition"),
    "adding_or_removing_not_in_replicas": (
        "t",
        8,
        [1, 2],
        [3],
        [],
        [1],
        1,
        0,
        0,
        1,
        "OnlinePartition",
    ),
    "negative_epoch": ("t", 9, [1, 2], [], [], [1], 1, -1, 0, 1, "OnlinePartition"),
    "bad_zk_version": ("t", 10, [1, 2], [], [], [1], 1, 0, -2, 1, "OnlinePartition"),
    "unknown_state": ("t", 11, [1, 2], [], [], [1], 1, 0, 0, 1, "OnlinePartitions"),
    "replica_set_too_wide": ("t", 12, [1, 2, 3, 5], [], [], [1], 1, 0, 0, 1, "OnlinePartition"),
    "duplicate_partition": ("u", 0, [1], [], [], [1], 1, 0, 0, 1, "OnlinePartition"),
}
KNOWN = [1, 2, 3, 5]


def test_every_kind_has_a_fix_and_a_case() -> None:
    assert set(BAD) == set(FIXES)


def test_each_bad_row_is_found_with_exactly_its_kind(spark: SparkSession) -> None:
    rows = [GOOD, *BAD.values(), BAD["duplicate_partition"]]
    df = spark.createDataFrame(rows, s.PARTITIONS_SCHEMA)
    found = {
        (r.topic, r.partition): set(r.violations) for r in model_violations(df, KNOWN, 3).collect()
    }
    expected = {(row[0], row[1]): {kind} for kind, row in BAD.items()}
    assert found == expected


def test_validate_raises_one_error_with_counts_and_first_rows(spark: SparkSession) -> None:
    rows = [GOOD, *BAD.values()]
    df = spark.createDataFrame(rows, s.PARTITIONS_SCHEMA)
    with pytest.raises(ClusterModelError) as info:
        validate_partitions(df, KNOWN, 3)
    err = info.value
    assert err.counts == {kind: 1 for kind in BAD if kind != "duplicate_partition"}
    assert [(t, p) for t, p, _ in err.examples][:3] == [("t", 1), ("t", 2), ("t", 3)]
    assert (
        "isr_not_subset_of_replicas: 1 partition(s) — ISR members must be assigned replicas"
        in str(err)
    )
    assert "t-5: isr_not_subset_of_replicas" in str(err)


def test_validate_shows_at_most_twenty_rows_but_counts_all(spark: SparkSession) -> None:
    rows = [("t", p, [], [], [], [], -1, 0, 0, 1, "OfflinePartition") for p in range(50)]
    with pytest.raises(ClusterModelError) as info:
        validate_partitions(spark.createDataFrame(rows, s.PARTITIONS_SCHEMA))
    assert info.value.counts == {"empty_replicas": 50}
    assert len(info.value.examples) == 20


def test_valid_table_passes(spark: SparkSession) -> None:
    validate_partitions(spark.createDataFrame([GOOD], s.PARTITIONS_SCHEMA), KNOWN, 3)


_ids = st.integers(-2, 6)
_rows = st.tuples(
    st.sampled_from(["t", "u"]),
    st.integers(0, 2),
    st.lists(_ids, max_size=4),
    st.lists(_ids, max_size=2),
    st.lists(_ids, max_size=2),
    st.lists(_ids, max_size=4),
    _ids,
    st.integers(-1, 2),
    st.integers(-3, 2),
    st.integers(-1, 2),
    st.sampled_from(["OnlinePartition", "OfflinePartition", "NewPartition", "Online"]),
)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_rows, max_size=8), st.booleans())
def test_driver_rows_get_the_same_violations(spark: SparkSession, rows: list, known: bool) -> None:
    """The plain-Python checks (``reference_validation``) against the Spark ones."""
    known_brokers = KNOWN if known else None
    df = spark.createDataFrame(rows, s.PARTITIONS_SCHEMA)
    want = sorted(
        (r.topic, r.partition, list(r.violations))
        for r in model_violations(df, known_brokers, 3).collect()
    )
    dicts = [dict(zip(s.PARTITIONS_SCHEMA.names, r, strict=True)) for r in rows]
    assert reference_validation.model_violations(dicts, known_brokers, 3) == want
    assert find_violations(df, known_brokers, 3) == find_row_violations(dicts, known_brokers, 3)
