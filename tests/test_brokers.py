"""BrokerSet membership Columns agree with Python sets in every representation."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from statemachines.brokers import BrokerSet, ClusterView

PROBES = [-1, 0, 1, 5, 63, 64, 65, 127, 128, 500, 1023, 1024, 5000, 2_000_000]


@settings(max_examples=6, deadline=None)
@given(
    st.lists(
        st.frozensets(st.integers(0, 1100), max_size=300)
        | st.frozensets(st.integers(0, 3_000_000), max_size=20),
        min_size=1,
        max_size=8,
    )
)
def test_membership_matches_python_sets(spark: SparkSession, sets: list[frozenset[int]]) -> None:
    probes = sorted(set(PROBES) | {b for ids in sets for b in list(ids)[:20]})
    df = spark.createDataFrame([(b,) for b in probes], "b int")
    cols = [BrokerSet(ids).contains(F.col("b")).alias(f"s{i}") for i, ids in enumerate(sets)]
    for row in df.select("b", *cols).collect():
        for i, ids in enumerate(sets):
            assert row[f"s{i}"] == (row.b in ids), (row.b, i)


def test_view_rejects_a_broker_both_live_and_shutting_down() -> None:
    try:
        ClusterView(BrokerSet.of([1, 2]), BrokerSet.of([2]))
    except ValueError as err:
        assert "both live and shutting down" in str(err)
    else:
        raise AssertionError("expected a ValueError")
