"""Topic creation and partition addition (spec §9.1–§9.3) as bulk transforms.

``new_partition_rows`` builds the compact rows of a created topic or of added partitions, as the
controller first sees them after ``TopicChange`` / ``PartitionModifications``: no recorded state
(NonExistentPartition, every replica NonExistentReplica) and no state znode. ``add_partition_rows``
puts them into the current generation, widening whichever side is narrower. Then
``on_new_partition_creation`` runs Kafka's four steps over the selected rows:

    partitions → NewPartition; replicas → NewReplica; partitions → OnlinePartition (initialise
    leader and ISR, "No assigned replica is alive" leaves it New); replicas → OnlineReplica.

The result carries per-partition counters ``initialized`` / ``init_failed`` for the commit job.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from controller.handlers.tracked import tracked
from statemachines import schemas as s
from statemachines.assignment import BrokerLike, as_broker_metadata, with_assigned_replicas
from statemachines.brokers import ClusterView
from statemachines.layout import widen
from statemachines.local_rows import local_frame
from statemachines.partition_states import OUTCOME, Outcome, PartitionState
from statemachines.partition_states import handle_state_changes as partition_changes
from statemachines.replica_states import ReplicaState
from statemachines.replica_states import handle_state_changes as replica_changes

INITIALIZED = "initialized"
INIT_FAILED = "init_failed"
_NEW = "_new_partition"


def _non_existent_replica() -> Column:
    return F.lit(int(ReplicaState.NonExistentReplica)).cast("byte")


def add_partition_rows(partitions: DataFrame, new_rows: DataFrame) -> DataFrame:
    """The current generation plus ``new_rows`` (both compact), at the larger of the two widths."""
    w = max(s.width(partitions), s.width(new_rows))
    cols = s.compact_columns(w)
    # The new rows have no ``_prev``: the commit sees them as created.
    return (
        widen(partitions, w)
        .select(*cols, *tracked(partitions))
        .unionByName(widen(new_rows, w).select(*cols), allowMissingColumns=True)
    )


def _kafka_draws(n: int, fixed_start: int, rng: random.Random | None) -> tuple[int, int]:
    """Kafka's (start index, initial shift): both ``fixed_start`` if given, else two draws."""
    if fixed_start >= 0:
        return fixed_start, fixed_start
    rng = rng if rng is not None else random.Random()
    start = rng.randrange(n)
    return start, rng.randrange(n)


def new_partition_rows(
    spark: SparkSession,
    topic_index: int,
    n_partitions: int,
    replication_factor: int,
    brokers: Sequence[BrokerLike],
    width: int,
    assignment: Mapping[int, Sequence[int]] | None = None,
    start_partition_id: int = 0,
    fixed_start: int = -1,
    rng: random.Random | None = None,
) -> DataFrame:
    """Compact rows (NonExistentPartition, replicas NonExistentReplica) for new partitions.

    With ``assignment`` (partition id → replicas, as read from ``/brokers/topics/<t>``) those
    rows are built from it; ``n_partitions``/``replication_factor``/``brokers`` are then unused.
    Otherwise partitions ``start_partition_id .. +n_partitions-1`` are placed by Kafka's
    ``assignReplicasToBrokers`` over ``brokers`` (pass them sorted by id, as the admin client
    does); for additions give ``start_partition_id`` = current count and ``fixed_start`` =
    §9.2's index. The width is ``max(width, replication factor)``. No job runs.
    """
    if assignment is not None:
        return assigned_partition_rows(spark, {topic_index: assignment}, width)
    else:
        metas = as_broker_metadata(brokers)
        start, shift = _kafka_draws(len(metas), fixed_start, rng)
        w = max(width, replication_factor)
        first = max(0, start_partition_id)
        ids = spark.range(first, first + n_partitions).select(
            F.col("id").cast("int").alias(s.PARTITION)
        )
        placed = with_assigned_replicas(
            ids,
            metas,
            replication_factor,
            start_index=start,
            shift=shift,
            start_partition_id=start_partition_id,
        )
        base = placed.select(
            F.lit(topic_index).alias(s.TOPIC_INDEX),
            F.col(s.PARTITION),
            *(
                F.coalesce(F.get(F.col(s.REPLICAS), k), F.lit(s.EMPTY_SLOT)).alias(s.replica_col(k))
                for k in range(w)
            ),
        )
    return _unrecorded(base, w)


def _unrecorded(base: DataFrame, w: int) -> DataFrame:
    """(topic_index, partition, replica_k) rows as compact rows with no recorded state yet:
    Kafka's "no state" reads as NonExistent, and there is no state znode."""
    return base.select(
        F.col(s.TOPIC_INDEX).cast("int").alias(s.TOPIC_INDEX),
        F.col(s.PARTITION).cast("int").alias(s.PARTITION),
        *(F.col(s.replica_col(k)).cast("int").alias(s.replica_col(k)) for k in range(w)),
        *(F.lit(s.EMPTY_SLOT).alias(s.isr_col(k)) for k in range(w)),
        *(_non_existent_replica().alias(s.replica_state_col(k)) for k in range(w)),
        F.lit(0).alias(s.ADDING_MASK),
        F.lit(0).alias(s.REMOVING_MASK),
        F.lit(s.NO_LEADER).alias(s.LEADER),
        F.lit(s.NO_EPOCH).alias(s.LEADER_EPOCH),
        F.lit(s.NO_ZK_VERSION).alias(s.ZK_VERSION),
        F.lit(s.NO_EPOCH).alias(s.CONTROLLER_EPOCH),
        F.lit(int(PartitionState.NonExistentPartition)).cast("byte").alias(s.STATE_CODE),
    )


def assigned_partition_rows(
    spark: SparkSession, assignments: Mapping[int, Mapping[int, Sequence[int]]], width: int
) -> DataFrame:
    """Compact rows of new partitions of several topics (topic index → partition → replicas), as
    read from their topic znodes: one small DataFrame however many topics. No job runs."""
    rf = max((len(r) for a in assignments.values() for r in a.values()), default=1)
    w = max(width, rf)
    rows = [
        (t, pid, *reps, *[s.EMPTY_SLOT] * (w - len(reps)))
        for t, assignment in sorted(assignments.items())
        for pid, reps in sorted(assignment.items())
    ]
    schema = ", ".join(
        [f"{s.TOPIC_INDEX} int", f"{s.PARTITION} int"]
        + [f"{s.replica_col(k)} int" for k in range(w)]
    )
    return _unrecorded(local_frame(spark, rows, schema), w)


def _selected_new(df: DataFrame, selection: Column | DataFrame) -> DataFrame:
    """Stage ``_new_partition``: a predicate, or a DataFrame of (topic_index, partition) keys."""
    if isinstance(selection, Column):
        return df.withColumn(_NEW, F.coalesce(selection, F.lit(False)))
    keys = selection.select(s.TOPIC_INDEX, s.PARTITION).distinct().withColumn(_NEW, F.lit(True))
    joined = df.join(F.broadcast(keys), [s.TOPIC_INDEX, s.PARTITION], "left")
    return joined.withColumn(_NEW, F.coalesce(F.col(_NEW), F.lit(False)))


def on_new_partition_creation(
    partitions_with_new_rows: DataFrame, new_selection: Column | DataFrame, view: ClusterView
) -> DataFrame:
    """§9.1 controller side for the selected (new) partitions; the rest pass through.

    Returns the next compact table with ``initialized`` (1: leader and ISR written, state znode
    created, LeaderAndIsr isNew to the ISR) and ``init_failed`` (1: no live replica, stays New).
    Replicas on dead brokers are marked OnlineReplica too, as Kafka does.
    """
    s.check_compact(partitions_with_new_rows)
    w = s.width(partitions_with_new_rows)
    table = partitions_with_new_rows
    df = _selected_new(table.select(*s.compact_columns(w), *tracked(table)), new_selection)
    new = F.col(_NEW)
    df = partition_changes(df, new, PartitionState.NewPartition).outcomes
    cols = [*s.compact_columns(w), *tracked(df), _NEW]
    df = df.select(*cols)
    df = replica_changes(df, lambda _b, _k: new, ReplicaState.NewReplica).outcomes.select(*cols)
    online = partition_changes(df, new, PartitionState.OnlinePartition, view).outcomes
    counted = online.select(
        *cols,
        (F.col(OUTCOME) == int(Outcome.LEADERSHIP_WRITTEN)).cast("int").alias(INITIALIZED),
        (F.col(OUTCOME) == int(Outcome.FAILED)).cast("int").alias(INIT_FAILED),
    )
    done = replica_changes(counted, lambda _b, _k: new, ReplicaState.OnlineReplica).outcomes
    return done.select(*s.compact_columns(w), *tracked(done), INITIALIZED, INIT_FAILED)
