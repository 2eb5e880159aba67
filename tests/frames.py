"""Build DataFrames from reference records and read them back, for comparing the two paths."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from pyspark.sql import DataFrame, Row, SparkSession

from statemachines import schemas as s
from statemachines.layout import (
    to_compact,
    to_public_partitions,
    to_public_replicas,
    topic_dictionary,
)
from statemachines.partition_states import PartitionState
from statemachines.reference import Partition
from statemachines.replica_states import ReplicaState


def public_rows(parts: Iterable[Partition]) -> list[tuple]:
    return [
        (
            p.topic,
            p.partition,
            list(p.replicas),
            list(p.adding_replicas),
            list(p.removing_replicas),
            list(p.isr),
            p.leader,
            p.leader_epoch,
            p.zk_version,
            p.controller_epoch,
            p.state.name,
        )
        for p in parts
    ]


def compact_frame(
    spark: SparkSession,
    parts: Sequence[Partition],
    replica_states: Mapping[tuple[str, int, int], ReplicaState] | None = None,
    w: int | None = None,
) -> tuple[DataFrame, DataFrame]:
    """(compact table, topics table) for reference partitions."""
    public = spark.createDataFrame(public_rows(parts), s.PARTITIONS_SCHEMA)
    topics = topic_dictionary(public)
    replicas = None
    if replica_states is not None:
        replicas = spark.createDataFrame(
            [(t, p, b, st.name) for (t, p, b), st in replica_states.items()], s.REPLICAS_SCHEMA
        )
    width = w or max(len(p.replicas) for p in parts)
    return to_compact(public, topics, width, replicas), topics


def read_partitions(compact: DataFrame, topics: DataFrame) -> dict[tuple[str, int], Partition]:
    out = {}
    for r in to_public_partitions(compact, topics).collect():
        out[(r.topic, r.partition)] = Partition(
            topic=r.topic,
            partition=r.partition,
            replicas=tuple(r.replicas),
            isr=tuple(r.isr),
            leader=r.leader,
            leader_epoch=r.leader_epoch,
            zk_version=r.zk_version,
            controller_epoch=r.controller_epoch,
            state=PartitionState[r.state],
            adding_replicas=tuple(r.adding_replicas),
            removing_replicas=tuple(r.removing_replicas),
        )
    return out


def read_replica_states(
    compact: DataFrame, topics: DataFrame
) -> dict[tuple[str, int, int], ReplicaState]:
    return {
        (r.topic, r.partition, r.broker): ReplicaState[r.state]
        for r in to_public_replicas(compact, topics).collect()
    }


def keyed(rows: Iterable[Row], topics: DataFrame) -> set[tuple]:
    names = {r.topic_index: r.topic for r in topics.collect()}
    return {(names[r.topic_index], r.partition) for r in rows}
