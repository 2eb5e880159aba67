"""Kafka's replica assignment: spec §9.3 examples, validation, rack modes, Spark == oracle."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import reduce

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, StringType, StructField, StructType

from statemachines.assignment import (
    REPLICA_SHIFT,
    START_INDEX,
    AdminOperationError,
    BrokerMetadata,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    RackAwareMode,
    assign_replicas_to_brokers,
    get_broker_metadatas,
    rack_alternated_brokers,
    rack_aware_lookup,
    with_assigned_replicas,
)
from statemachines.schemas import PARTITION, TOPIC
from tests.strategies import ScriptedRandom

RACKS_A = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
RACKS_B = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}


@dataclass(frozen=True)
class Example:
    """One verified row of spec §9.3's table."""

    brokers: list[tuple[int, str | None]]
    n_partitions: int
    rf: int
    fixed_start: int
    start_pid: int
    expected: dict[int, list[int]]


SPEC_EXAMPLES = {
    "unaware-5-brokers": Example(
        [(b, None) for b in range(5)],
        10,
        3,
        0,
        -1,
        {
            0: [0, 1, 2],
            1: [1, 2, 3],
            2: [2, 3, 4],
            3: [3, 4, 0],
            4: [4, 0, 1],
            5: [0, 2, 3],
            6: [1, 3, 4],
            7: [2, 4, 0],
            8: [3, 0, 1],
            9: [4, 1, 2],
        },
    ),
    "unaware-ids-1-3": Example(
        [(1, None), (2, None), (3, None)],
        5,
        2,
        1,
        -1,
        {0: [2, 1], 1: [3, 2], 2: [1, 3], 3: [2, 3], 4: [3, 1]},
    ),
    "aware-racks-a": Example(
        list(RACKS_A.items()),
        7,
        3,
        0,
        0,
        {
            0: [0, 3, 1],
            1: [3, 1, 5],
            2: [1, 5, 4],
            3: [5, 4, 2],
            4: [4, 2, 0],
            5: [2, 0, 3],
            6: [0, 4, 2],
        },
    ),
    "aware-racks-b": Example(
        list(RACKS_B.items()),
        6,
        3,
        2,
        0,
        {0: [3, 2, 0], 1: [5, 4, 1], 2: [2, 0, 3], 3: [4, 1, 5], 4: [0, 3, 2], 5: [1, 5, 4]},
    ),
    "add-partitions-rf4": Example(
        [(b, None) for b in range(4)],
        6,
        4,
        2,
        1,
        {
            1: [3, 2, 0, 1],
            2: [0, 3, 1, 2],
            3: [1, 0, 2, 3],
            4: [2, 3, 0, 1],
            5: [3, 0, 1, 2],
            6: [0, 1, 2, 3],
        },
    ),
    "add-partitions-rf2": Example(
        [(b, None) for b in range(4)], 2, 2, 1, 1, {1: [2, 0], 2: [3, 1]}
    ),
}

_INPUT_SCHEMA = StructType(
    [
        StructField(TOPIC, StringType(), nullable=False),
        StructField(PARTITION, IntegerType(), nullable=False),
        StructField(START_INDEX, IntegerType(), nullable=False),
        StructField(REPLICA_SHIFT, IntegerType(), nullable=False),
        StructField("start_pid", IntegerType(), nullable=False),
    ]
)


@dataclass(frozen=True)
class TopicDraws:
    """One topic's inputs: Kafka's draws (equal when ``fixed``), first partition id, count."""

    name: str
    start: int
    shift: int
    fixed: bool
    start_pid: int
    n_partitions: int

    def oracle(self, brokers: list[tuple[int, str | None]], rf: int) -> dict[int, list[int]]:
        if self.fixed:
            return assign_replicas_to_brokers(
                brokers, self.n_partitions, rf, self.start, self.start_pid
            )
        rng = ScriptedRandom(self.start, self.shift)
        return assign_replicas_to_brokers(
            brokers, self.n_partitions, rf, start_partition_id=self.start_pid, rng=rng
        )

    def rows(self) -> list[tuple[str, int, int, int, int]]:
        first = max(0, self.start_pid)
        return [
            (self.name, pid, self.start, self.shift, self.start_pid)
            for pid in range(first, first + self.n_partitions)
        ]


def _input_frame(spark: SparkSession, rows: list[tuple[str, int, int, int, int]]) -> DataFrame:
    # From Arrow the rows are a local relation: no job just to read the test's inputs.
    columns = list(zip(*rows, strict=True))
    arrow = pa.table(
        {
            field.name: pa.array(values, pa.string() if i == 0 else pa.int32())
            for i, (field, values) in enumerate(zip(_INPUT_SCHEMA.fields, columns, strict=True))
        }
    )
    return spark.createDataFrame(arrow, _INPUT_SCHEMA)


# A cluster (brokers in order), a replication factor and the topics to place on it.
Scenario = tuple[list[tuple[int, str | None]], int, list[TopicDraws]]


def _spark_assign(
    spark: SparkSession,
    clusters: list[Scenario],
) -> dict[str, dict[int, list[int]]]:
    """Run every scenario through ``with_assigned_replicas`` in one union, collected once."""
    frames: list[DataFrame] = []
    for brokers, rf, topics in clusters:
        df = _input_frame(spark, [r for t in topics for r in t.rows()])
        frames.append(
            with_assigned_replicas(df, brokers, rf, start_partition_id=df["start_pid"]).select(
                TOPIC, PARTITION, "replicas"
            )
        )
    out: dict[str, dict[int, list[int]]] = {}
    for row in reduce(DataFrame.unionAll, frames).collect():
        out.setdefault(row.topic, {})[row.partition] = list(row.replicas)
    return out


@pytest.mark.parametrize("name", SPEC_EXAMPLES)
def test_spec_example_pure(name: str) -> None:
    ex = SPEC_EXAMPLES[name]
    result = assign_replicas_to_brokers(
        ex.brokers, ex.n_partitions, ex.rf, ex.fixed_start, ex.start_pid
    )
    assert result == ex.expected
    assert list(result) == sorted(ex.expected)  # partition ids in creation order


def test_spec_examples_spark(spark: SparkSession) -> None:
    clusters = [
        (ex.brokers, ex.rf, [TopicDraws(name, ex.fixed_start, ex.fixed_start, True,
                                        ex.start_pid, ex.n_partitions)])
        for name, ex in SPEC_EXAMPLES.items()
    ]  # fmt: skip
    assert _spark_assign(spark, clusters) == {n: ex.expected for n, ex in SPEC_EXAMPLES.items()}


def test_spark_takes_literal_draws_and_replaces_an_existing_replicas_column(
    spark: SparkSession,
) -> None:
    ex = SPEC_EXAMPLES["add-partitions-rf4"]
    df = spark.range(1, 7).select(
        F.col("id").cast("int").alias(PARTITION), F.array(F.lit(-1)).alias("replicas")
    )
    out = with_assigned_replicas(
        df, ex.brokers, ex.rf, start_index=2, shift=2, start_partition_id=1
    )
    assert out.columns == [PARTITION, "replicas"]
    assert {r.partition: list(r.replicas) for r in out.collect()} == ex.expected


def test_rack_alternated_list_interleaves_racks_in_name_order() -> None:
    assert rack_alternated_brokers(RACKS_A) == [0, 3, 1, 5, 4, 2]
    assert rack_alternated_brokers(RACKS_B) == [0, 1, 3, 5, 2, 4]
    # Uneven racks: the big rack's leftovers come last; "r10" sorts before "r2".
    assert rack_alternated_brokers({5: "r2", 1: "r10", 7: "r10", 3: "r10", 2: "r2"}) == [
        1, 2, 3, 5, 7,
    ]  # fmt: skip


def test_draws_are_start_then_shift() -> None:
    brokers = [(b, None) for b in range(5)]
    # start 2 puts partition 0's leader on broker 2; shift 0 puts its follower right after it.
    assert assign_replicas_to_brokers(brokers, 1, 2, rng=ScriptedRandom(2, 0)) == {0: [2, 3]}
    assert assign_replicas_to_brokers(brokers, 1, 2, rng=ScriptedRandom(0, 2)) == {0: [0, 3]}


def test_rack_unaware_depends_on_broker_order_rack_aware_does_not() -> None:
    unaware = assign_replicas_to_brokers([(b, None) for b in [0, 5, 1, 4, 2, 3]], 6, 2, 0)
    assert unaware[0] == [0, 5]
    aware = assign_replicas_to_brokers(list(RACKS_A.items()), 7, 3, 0, 0)
    shuffled = list(reversed(RACKS_A.items()))
    assert assign_replicas_to_brokers(shuffled, 7, 3, 0, 0) == aware


@pytest.mark.parametrize(
    ("brokers", "n_partitions", "rf", "error", "match"),
    [
        ([0, 1], 0, 1, InvalidPartitionsError, "partitions must be larger than 0"),
        ([0, 1], 1, 0, InvalidReplicationFactorError, "must be larger than 0"),
        ([0, 1], 1, 3, InvalidReplicationFactorError, "larger than available brokers: 2"),
        ([(0, "a"), (1, None)], 1, 1, AdminOperationError, r"Not all brokers .*no rack: \[1\]"),
        ([0, 1, 0], 1, 1, AdminOperationError, r"Duplicate broker ids \[0\]"),
    ],
)
def test_invalid_requests_raise_kafkas_errors(
    brokers: list[int | tuple[int, str | None]],
    n_partitions: int,
    rf: int,
    error: type[Exception],
    match: str,
) -> None:
    with pytest.raises(error, match=match):
        assign_replicas_to_brokers(brokers, n_partitions, rf, 0)


def test_spark_assignment_validates_before_building(spark: SparkSession) -> None:
    df = _input_frame(spark, [("t", 0, 0, 0, -1)])
    with pytest.raises(InvalidReplicationFactorError):
        with_assigned_replicas(df, [0, 1], 3)
    with pytest.raises(AdminOperationError):
        with_assigned_replicas(df, [(0, "a"), (1, None)], 1)


def test_rack_aware_modes() -> None:
    mixed = [(2, "a"), (0, None), (1, "b")]
    with pytest.raises(AdminOperationError, match="RackAwareMode"):
        get_broker_metadatas(mixed)
    no_racks = [BrokerMetadata(0), BrokerMetadata(1), BrokerMetadata(2)]
    assert get_broker_metadatas(mixed, RackAwareMode.SAFE) == no_racks
    assert get_broker_metadatas(mixed, RackAwareMode.DISABLED) == no_racks
    racked = [(2, "a"), (0, "b"), (1, "b")]
    expected = [BrokerMetadata(0, "b"), BrokerMetadata(1, "b"), BrokerMetadata(2, "a")]
    assert get_broker_metadatas(racked) == expected
    assert get_broker_metadatas(racked, RackAwareMode.SAFE) == expected
    assert get_broker_metadatas(racked, RackAwareMode.DISABLED) == no_racks


def test_single_broker_cluster(spark: SparkSession) -> None:
    for brokers in ([7], [(7, "r")]):
        assert assign_replicas_to_brokers(brokers, 3, 1, 0) == {0: [7], 1: [7], 2: [7]}
        with pytest.raises(InvalidReplicationFactorError):
            assign_replicas_to_brokers(brokers, 1, 2)
    assert rack_aware_lookup([(7, "r")], 1) == {(0, 0): [7]}
    draws = [TopicDraws(f"t{i}", i, i, True, -1, 3) for i in range(2)]
    clusters = [([(7, None)], 1, draws[:1]), ([(7, "r")], 1, draws[1:])]
    assert _spark_assign(spark, clusters) == {
        "t0": {0: [7], 1: [7], 2: [7]},
        "t1": {0: [7], 1: [7], 2: [7]},
    }


def test_lookup_table_covers_every_key() -> None:
    table = rack_aware_lookup(list(RACKS_A.items()), 3)
    assert set(table) == {(f, s) for f in range(6) for s in range(5)}
    assert table[(0, 0)] == [0, 3, 1]  # spec example: fixed_start 0, partition 0


_RACK_NAMES = ["r0", "r1", "r2", "r10", "a"]


@st.composite
def broker_lists(draw: st.DrawFn) -> list[tuple[int, str | None]]:
    ids = draw(st.lists(st.integers(0, 60), min_size=1, max_size=9, unique=True))
    if draw(st.booleans()):
        return [(b, None) for b in ids]
    return [(b, draw(st.sampled_from(_RACK_NAMES))) for b in ids]


@st.composite
def random_clusters(draw: st.DrawFn, tag: str) -> Scenario:
    brokers = draw(broker_lists())
    n = len(brokers)
    rf = draw(st.integers(1, n))
    topics = []
    for i in range(draw(st.integers(1, 3))):
        if draw(st.booleans()):
            start = shift = draw(st.integers(0, 2 * n))
            fixed = True
        else:
            start, shift, fixed = draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1)), False
        start_pid = draw(st.integers(-1, 3 * n))
        count = draw(st.integers(1, 3 * n + 2))
        topics.append(TopicDraws(f"{tag}-{i}", start, shift, fixed, start_pid, count))
    return brokers, rf, topics


@settings(max_examples=60, deadline=None)
@given(scenario=random_clusters("t"))
def test_pure_placement_invariants(
    scenario: Scenario,
) -> None:
    brokers, rf, topics = scenario
    rack_of = dict(brokers)
    aware = all(r is not None for r in rack_of.values())
    for topic in topics:
        result = topic.oracle(brokers, rf)
        first_pid = max(0, topic.start_pid)
        assert list(result) == list(range(first_pid, first_pid + topic.n_partitions))
        for replicas in result.values():
            assert len(replicas) == rf and len(set(replicas)) == rf
            if aware:
                used = Counter(rack_of[b] for b in replicas)
                if rf >= len(set(rack_of.values())):
                    assert len(used) == len(set(rack_of.values()))
                else:
                    assert max(used.values()) == 1


# Several clusters per example, unioned into one DataFrame: a Spark job per example, not per cluster.
batches = st.integers(1, 4).flatmap(
    lambda k: st.tuples(*[random_clusters(f"s{i}") for i in range(k)])
)


# No shrinking: every shrink step is a Spark job; test_pure_placement_invariants shrinks cheaply.
@settings(
    max_examples=6,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow],
)
@given(batch=batches)
def test_spark_matches_oracle_on_random_clusters(
    spark: SparkSession, batch: tuple[Scenario, ...]
) -> None:
    expected = {t.name: t.oracle(b, rf) for b, rf, topics in batch for t in topics}
    assert _spark_assign(spark, list(batch)) == expected
