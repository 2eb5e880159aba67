"""Public ⇄ compact conversion: a round trip loses nothing, including replica states and masks."""

from __future__ import annotations

from pyspark.sql import SparkSession

from statemachines import schemas as s
from statemachines.generator import generate_cluster
from statemachines.layout import (
    to_compact,
    to_public_partitions,
    to_public_replicas,
    topic_dictionary,
)

ROWS = [
    ("orders", 0, [4, 5, 6, 1, 2, 3], [4, 5, 6], [1, 2, 3], [1, 2, 3, 4], 1, 7, 9, 2, "OnlinePartition"),
    ("orders", 1, [2, 3], [], [], [3], -1, 2, 2, 1, "OfflinePartition"),
    ("audit", 0, [3], [], [], [], -1, 0, -1, 0, "NewPartition"),
]  # fmt: skip
REPLICAS = [
    ("orders", 1, 2, "OfflineReplica"),
    ("orders", 0, 1, "ReplicaDeletionIneligible"),
    ("audit", 0, 3, "NewReplica"),
]


def _sorted(rows: list) -> list:
    return sorted(tuple(r) for r in rows)


def test_round_trip_keeps_every_field(spark: SparkSession) -> None:
    public = spark.createDataFrame(ROWS, s.PARTITIONS_SCHEMA)
    replicas = spark.createDataFrame(REPLICAS, s.REPLICAS_SCHEMA)
    topics = topic_dictionary(public)
    compact = to_compact(public, topics, 6, replicas)
    s.check_compact(compact)
    assert s.width(compact) == 6
    back = to_public_partitions(compact, topics).collect()
    assert _sorted(back) == _sorted(ROWS)
    states = {
        (r.topic, r.partition, r.broker): r.state
        for r in to_public_replicas(compact, topics).collect()
    }
    assert states[("orders", 1, 2)] == "OfflineReplica"
    assert states[("orders", 0, 1)] == "ReplicaDeletionIneligible"
    assert states[("orders", 1, 3)] == "OnlineReplica"  # no row: the default state
    assert len(states) == 6 + 2 + 1


def test_generated_cluster_converts_with_its_topic_table(spark: SparkSession) -> None:
    cluster = generate_cluster(
        spark, brokers=6, racks=3, topics=4, partitions_per_topic=5, replication_factor=3, seed=3
    )
    compact = to_compact(cluster.partitions, cluster.topics, 3, cluster.replicas)
    back = to_public_partitions(compact, cluster.topics)
    assert _sorted(back.collect()) == _sorted(cluster.partitions.collect())
