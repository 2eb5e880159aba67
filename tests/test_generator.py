"""Synthetic cluster generator: shape, reproducibility, Kafka placement and rack guarantees."""

from __future__ import annotations

from collections import Counter

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from statemachines.assignment import (
    AdminOperationError,
    BrokerMetadata,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    assign_replicas_to_brokers,
)
from statemachines.generator import (
    SyntheticCluster,
    generate_cluster,
    synthetic_brokers,
    topic_draws,
)
from statemachines.partition_states import PartitionState
from statemachines.replica_states import ReplicaState
from statemachines.schemas import (
    PARTITIONS_SCHEMA,
    REPLICAS_SCHEMA,
    TOPICS_SCHEMA,
    check_partitions,
    check_replicas,
    check_schema,
)
from tests.strategies import ScriptedRandom


def _placements(cluster: SyntheticCluster) -> dict[tuple[str, int], list[int]]:
    return {(r.topic, r.partition): list(r.replicas) for r in cluster.partitions.collect()}


def test_brokers_are_numbered_from_zero_with_round_robin_racks() -> None:
    assert synthetic_brokers(4, 3) == (
        BrokerMetadata(0, "rack-0"),
        BrokerMetadata(1, "rack-1"),
        BrokerMetadata(2, "rack-2"),
        BrokerMetadata(3, "rack-0"),
    )
    assert synthetic_brokers(2, 0) == (BrokerMetadata(0), BrokerMetadata(1))


def test_generated_tables_match_the_model_schemas_without_running_a_job(
    spark: SparkSession,
) -> None:
    group = "generator-no-job"
    spark.sparkContext.setJobGroup(group, "generate_cluster must stay lazy")
    try:
        for racks in (0, 3):
            cluster = generate_cluster(spark, 6, racks, 3, 4, 3)
            check_partitions(cluster.partitions)
            check_replicas(cluster.replicas)
            check_schema(cluster.topics, TOPICS_SCHEMA, "topics")
            assert cluster.partitions.columns == PARTITIONS_SCHEMA.fieldNames()
            assert cluster.replicas.columns == REPLICAS_SCHEMA.fieldNames()
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    assert list(spark.sparkContext.statusTracker().getJobIdsForGroup(group)) == []


@pytest.mark.parametrize("racks", [0, 3])
def test_each_topic_is_placed_as_kafka_places_it_with_the_drawn_start_and_shift(
    spark: SparkSession, racks: int
) -> None:
    brokers, topics, partitions, rf, seed = 7, 6, 17, 3, 42
    cluster = generate_cluster(spark, brokers, racks, topics, partitions, rf, seed=seed)
    draws = (
        spark.range(topics)
        .select(
            F.col("id"),
            *[c.alias(f"d{i}") for i, c in enumerate(topic_draws(seed, F.col("id"), brokers))],
        )
        .collect()
    )
    placements = _placements(cluster)
    assert len(placements) == topics * partitions
    for row in draws:
        expected = assign_replicas_to_brokers(
            cluster.brokers, partitions, rf, rng=ScriptedRandom(row.d0, row.d1)
        )
        actual = {p: placements[(f"topic-{row.id}", p)] for p in range(partitions)}
        assert actual == expected, f"topic-{row.id} start={row.d0} shift={row.d1}"


def test_partition_fields_are_those_of_a_fresh_online_partition(spark: SparkSession) -> None:
    cluster = generate_cluster(spark, 5, 2, 4, 6, 3, seed=3, controller_epoch=7, topic_prefix="t")
    rows = cluster.partitions.collect()
    assert {r.topic for r in rows} == {"t0", "t1", "t2", "t3"}
    assert sorted(tuple(r) for r in cluster.topics.collect()) == [(i, f"t{i}") for i in range(4)]
    for r in rows:
        assert r.leader == r.replicas[0]
        assert r.isr == r.replicas
        assert (r.adding_replicas, r.removing_replicas) == ([], [])
        assert (r.leader_epoch, r.zk_version, r.controller_epoch) == (0, 0, 7)
        assert r.state == PartitionState.OnlinePartition.name
        assert len(set(r.replicas)) == 3
    replica_rows = cluster.replicas.collect()
    assert {r.state for r in replica_rows} == {ReplicaState.OnlineReplica.name}
    assert Counter((r.topic, r.partition, r.broker) for r in replica_rows) == Counter(
        (r.topic, r.partition, b) for r in rows for b in r.replicas
    )


def test_same_seed_reproduces_the_cluster_and_another_seed_changes_it(
    spark: SparkSession,
) -> None:
    first = _placements(generate_cluster(spark, 9, 3, 8, 5, 3, seed=11))
    again = _placements(generate_cluster(spark, 9, 3, 8, 5, 3, seed=11))
    other = _placements(generate_cluster(spark, 9, 3, 8, 5, 3, seed=12))
    assert first == again
    assert first.keys() == other.keys()
    assert first != other


@pytest.mark.parametrize(("racks", "rf"), [(3, 4), (3, 3), (4, 2)])
def test_rack_aware_generation_spreads_replicas_over_racks(
    spark: SparkSession, racks: int, rf: int
) -> None:
    cluster = generate_cluster(spark, 10, racks, 12, 10, rf, seed=5)
    rack_of = {b.id: b.rack for b in cluster.brokers}
    for replicas in _placements(cluster).values():
        used = Counter(rack_of[b] for b in replicas)
        assert len(set(replicas)) == rf
        if rf >= racks:
            assert len(used) == racks, replicas
        else:
            assert max(used.values()) == 1, replicas


def test_impossible_clusters_are_rejected_with_kafkas_errors(spark: SparkSession) -> None:
    with pytest.raises(InvalidReplicationFactorError, match="larger than available brokers"):
        generate_cluster(spark, 3, 0, 1, 1, 4)
    with pytest.raises(InvalidPartitionsError):
        generate_cluster(spark, 3, 0, 1, 0, 1)
    with pytest.raises(AdminOperationError, match="racks"):
        generate_cluster(spark, 3, 4, 1, 1, 1)
    with pytest.raises(AdminOperationError, match="at least one broker"):
        generate_cluster(spark, 0, 0, 1, 1, 1)
