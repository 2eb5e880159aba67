"""Conversions between the public tables and the compact working layout (see ``schemas``).

The public shape is what users, files and ZooKeeper see: topic names, replica lists as arrays,
one replicas row per (partition, broker). The compact shape is what the controller caches and
transforms. Both directions are lazy.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from statemachines import schemas as s
from statemachines.columns import mask_of, present
from statemachines.partition_states import PartitionState
from statemachines.replica_states import ReplicaState
from statemachines.states import state_code_column, state_name_column

_STATES = "_replica_states"


def topic_dictionary(partitions: DataFrame) -> DataFrame:
    """(topic_index, topic) for every topic of a public partitions table, indexed by name order."""
    topics = partitions.select(s.TOPIC).distinct()
    # One partition for the window is fine: there is one row per topic, not per partition.
    index = F.row_number().over(Window.orderBy(s.TOPIC)) - 1
    return topics.select(index.cast("int").alias(s.TOPIC_INDEX), F.col(s.TOPIC))


def _slot(arr: Column, k: int) -> Column:
    return F.coalesce(F.get(arr, k), F.lit(s.EMPTY_SLOT))


def to_compact(
    partitions: DataFrame,
    topics: DataFrame,
    w: int,
    replicas: DataFrame | None = None,
    default_replica_state: ReplicaState = ReplicaState.OnlineReplica,
) -> DataFrame:
    """The compact table of width ``w`` for a public partitions table (and optional replicas table).

    Replica lists longer than ``w`` do not fit: validate first (``validation.model_violations``
    with ``max_width=w``). Replicas without a row in ``replicas`` get ``default_replica_state``.
    """
    if not 1 <= w <= s.MAX_WIDTH:
        raise ValueError(f"width must be between 1 and {s.MAX_WIDTH}, got {w}")
    s.check_partitions(partitions)
    df = partitions.join(F.broadcast(topics), s.TOPIC, "inner")
    if replicas is not None:
        s.check_replicas(replicas)
        states = replicas.groupBy(s.TOPIC, s.PARTITION).agg(
            F.map_from_entries(
                F.collect_list(F.struct(s.BROKER, state_code_column(F.col(s.STATE), ReplicaState)))
            ).alias(_STATES)
        )
        df = df.join(states, [s.TOPIC, s.PARTITION], "left")
    reps = F.col(s.REPLICAS)

    def replica_state(k: int) -> Column:
        default = F.lit(int(default_replica_state)).cast("byte")
        if replicas is None:
            found = default
        else:
            found = F.coalesce(F.try_element_at(F.col(_STATES), F.get(reps, k)), default)
        absent = F.lit(int(ReplicaState.NonExistentReplica)).cast("byte")
        return F.when(F.get(reps, k).isNull(), absent).otherwise(found).cast("byte")

    def position_mask(listed: str) -> Column:
        return mask_of([F.array_contains(F.col(listed), _slot(reps, k)) for k in range(w)])

    return df.select(
        F.col(s.TOPIC_INDEX),
        F.col(s.PARTITION),
        *(_slot(reps, k).alias(s.replica_col(k)) for k in range(w)),
        *(_slot(F.col(s.ISR), k).alias(s.isr_col(k)) for k in range(w)),
        *(replica_state(k).alias(s.replica_state_col(k)) for k in range(w)),
        position_mask(s.ADDING_REPLICAS).alias(s.ADDING_MASK),
        position_mask(s.REMOVING_REPLICAS).alias(s.REMOVING_MASK),
        F.col(s.LEADER),
        F.col(s.LEADER_EPOCH),
        F.col(s.ZK_VERSION),
        F.col(s.CONTROLLER_EPOCH),
        state_code_column(F.col(s.STATE), PartitionState).alias(s.STATE_CODE),
    )


def to_public_partitions(
    compact: DataFrame, topics: DataFrame, extra: tuple[str, ...] = ()
) -> DataFrame:
    """The public partitions table (PARTITIONS_SCHEMA column order) of a compact table.

    ``extra`` columns of ``compact`` are carried after the model's columns.
    """
    w = s.width(compact)
    reps = [F.col(s.replica_col(k)) for k in range(w)]

    def listed(mask: str) -> Column:
        return F.array_compact(
            F.array(
                *[F.when(F.col(mask).bitwiseAND(F.lit(1 << k)) != 0, r) for k, r in enumerate(reps)]
            )
        )

    df = compact.join(F.broadcast(topics), s.TOPIC_INDEX, "inner")
    return df.select(
        F.col(s.TOPIC),
        F.col(s.PARTITION),
        present(reps).alias(s.REPLICAS),
        listed(s.ADDING_MASK).alias(s.ADDING_REPLICAS),
        listed(s.REMOVING_MASK).alias(s.REMOVING_REPLICAS),
        present([F.col(s.isr_col(k)) for k in range(w)]).alias(s.ISR),
        F.col(s.LEADER),
        F.col(s.LEADER_EPOCH),
        F.col(s.ZK_VERSION),
        F.col(s.CONTROLLER_EPOCH),
        state_name_column(F.col(s.STATE_CODE), PartitionState).alias(s.STATE),
        *extra,
    )


def to_public_replicas(compact: DataFrame, topics: DataFrame) -> DataFrame:
    """The public replicas table: one row per (partition, assigned broker) with its state name."""
    w = s.width(compact)
    entries = F.array(
        *[
            F.struct(
                F.col(s.replica_col(k)).alias(s.BROKER), F.col(s.replica_state_col(k)).alias("code")
            )
            for k in range(w)
        ]
    )
    exploded = compact.select(s.TOPIC_INDEX, s.PARTITION, F.explode(entries).alias("e")).where(
        F.col("e." + s.BROKER) != s.EMPTY_SLOT
    )
    return exploded.join(F.broadcast(topics), s.TOPIC_INDEX, "inner").select(
        F.col(s.TOPIC),
        F.col(s.PARTITION),
        F.col("e." + s.BROKER).alias(s.BROKER),
        state_name_column(F.col("e.code"), ReplicaState).alias(s.STATE),
    )


def widen(df: DataFrame, w: int) -> DataFrame:
    """``df`` (compact) at width ``w``: new positions are empty (EMPTY_SLOT, NonExistentReplica).

    Extra (caller) columns follow the compact ones unchanged. A table already at least ``w``
    wide is returned as is; narrowing is never done (it could drop replicas).
    """
    current = s.width(df)
    if w <= current:
        return df
    if w > s.MAX_WIDTH:
        raise ValueError(f"width {w} exceeds {s.MAX_WIDTH}: position masks are ints")
    absent = F.lit(int(ReplicaState.NonExistentReplica)).cast("byte")
    added: dict[str, Column] = {}
    for k in range(current, w):
        added[s.replica_col(k)] = F.lit(s.EMPTY_SLOT)
        added[s.isr_col(k)] = F.lit(s.EMPTY_SLOT)
        added[s.replica_state_col(k)] = absent
    model = set(s.compact_columns(current))
    extra = [c for c in df.columns if c not in model]
    return df.withColumns(added).select(*s.compact_columns(w), *extra)
