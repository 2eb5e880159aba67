"""A reassignment plan and what the table says about it (spec §10, KIP-455).

A plan is a DataFrame of (topic_index, partition, target array<int>); a null target cancels.
``validate_reassignments`` gives Kafka's per-partition error codes (§10.4) and what the driver
needs to plan the start (``handlers.reassignment.start_reassignment``); ``list_reassignments``
answers ListPartitionReassignments; ``ongoing_plan`` is what a new controller resumes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from statemachines import schemas as s
from statemachines.brokers import BrokerSet
from statemachines.columns import any_of, being_reassigned, bit, in_topics, present

TARGET = "target"
ERROR = "error"
REPLICAS_LIST = "replicas"
ADDING_LIST = "adding_replicas"
REMOVING_LIST = "removing_replicas"

NONE = "NONE"
INVALID_REPLICA_ASSIGNMENT = "INVALID_REPLICA_ASSIGNMENT"
NO_REASSIGNMENT_IN_PROGRESS = "NO_REASSIGNMENT_IN_PROGRESS"
UNKNOWN_TOPIC_OR_PARTITION = "UNKNOWN_TOPIC_OR_PARTITION"
UNKNOWN_SERVER_ERROR = "UNKNOWN_SERVER_ERROR"

WIDTH_NEEDED = "width_needed"
REASSIGNING = "reassigning"
COMPLETES = "completes"

KEY = [s.TOPIC_INDEX, s.PARTITION]


def replica_at(k: int) -> Column:
    return F.col(s.replica_col(k))


def occupied(k: int) -> Column:
    """Position ``k`` holds a replica."""
    return replica_at(k) != s.EMPTY_SLOT


def listed(w: int, keep: Callable[[int], Column]) -> Column:
    """The replicas at positions where ``keep(k)``, in position order, as array<int>."""
    return F.array_compact(
        F.array(*[F.when(occupied(k) & keep(k), replica_at(k)) for k in range(w)])
    )


def targets_any(brokers: BrokerSet, w: int) -> Column:
    """The partition is being reassigned and its target replicas (those not being removed)
    include one of ``brokers``: what a broker startup resumes (§8.1 step 6)."""
    removing = F.col(s.REMOVING_MASK)
    targets = [brokers.contains(F.col(s.replica_col(k))) & ~bit(removing, k) for k in range(w)]
    return being_reassigned() & any_of(targets)


def list_reassignments(partitions: DataFrame) -> DataFrame:
    """``ListPartitionReassignments``: (key, replicas, adding, removing) of reassigning rows."""
    w = s.width(s.check_compact(partitions))
    return partitions.where(being_reassigned()).select(
        *KEY,
        listed(w, lambda k: F.lit(True)).alias(REPLICAS_LIST),
        listed(w, lambda k: bit(F.col(s.ADDING_MASK), k)).alias(ADDING_LIST),
        listed(w, lambda k: bit(F.col(s.REMOVING_MASK), k)).alias(REMOVING_LIST),
    )


def validate_reassignments(
    partitions: DataFrame,
    plan: DataFrame,
    live: BrokerSet,
    deleting: Sequence[int] = (),
    api: bool = True,
) -> DataFrame:
    """§10.4: the plan's rows with ``error`` (Kafka's error name; ``NONE`` = accepted).

    ``live`` are live brokers, not shutting down. ``api=False`` is the ZK path (no replica
    checks). Only rows with ``NONE`` may be passed on to ``start_reassignment``.
    ``reassigning`` tells whether the row would replace or cancel a reassignment in flight;
    ``completes`` whether it may complete at once (phase B: its TRS is ORS, or in the ISR).
    """
    w = s.width(s.check_compact(partitions))
    known = partitions.select(
        *KEY,
        F.lit(True).alias("_known"),
        being_reassigned().alias("_being"),
        listed(w, lambda k: ~bit(F.col(s.ADDING_MASK), k)).alias("_ors"),
        listed(w, lambda k: F.lit(True)).alias("_cur"),
        present([F.col(s.isr_col(k)) for k in range(w)]).alias("_isr"),
    )
    df = plan.join(known, KEY, "left")
    t = F.col(TARGET)
    ors = F.coalesce(F.col("_ors"), F.array().cast("array<int>"))
    # reassignTo(target).adding = distinct(target) − ORS; each must be a live broker.
    adding = F.array_except(t, ors)
    live_ids = F.array(*[F.lit(b) for b in sorted(live.ids)]).cast("array<int>")
    not_live = F.size(F.array_except(adding, live_ids))
    invalid = (
        (F.size(t) == 0)
        | (F.size(F.array_distinct(t)) != F.size(t))
        | (F.array_min(t) < 0)
        | (not_live > 0)
    )
    unknown = F.col("_known").isNull()
    if deleting:
        unknown = unknown | in_topics(deleting)
    error = F.when(
        t.isNull() & ~F.coalesce(F.col("_being"), F.lit(False)), NO_REASSIGNMENT_IN_PROGRESS
    )
    if api:
        error = F.when(t.isNotNull() & invalid, INVALID_REPLICA_ASSIGNMENT).otherwise(error)
    error = F.coalesce(error, F.when(unknown, UNKNOWN_TOPIC_OR_PARTITION), F.lit(NONE))
    # The table width the reassignment needs: RS plus replicas of a reassignment it replaces.
    cur = F.coalesce(F.col("_cur"), F.array().cast("array<int>"))
    needed = F.size(F.array_union(F.coalesce(t, ors), cur))
    # Phase B at once: nothing to add or remove (a cancel, a reorder), or every target in sync.
    isr = F.coalesce(F.col("_isr"), F.array().cast("array<int>"))
    same = (F.size(F.array_except(t, ors)) == 0) & (F.size(F.array_except(ors, t)) == 0)
    completes = t.isNull() | same | (F.size(F.array_except(t, isr)) == 0)
    return df.select(
        *[F.col(c) for c in plan.columns],
        error.alias(ERROR),
        needed.alias(WIDTH_NEEDED),
        F.coalesce(F.col("_being"), F.lit(False)).alias(REASSIGNING),
        completes.alias(COMPLETES),
    )


def ongoing_plan(partitions: DataFrame) -> DataFrame:
    """(key, target) of every reassignment in flight, TRS in RS order: what a new controller
    resumes with ``onPartitionReassignment`` (§3.3)."""
    w = s.width(s.check_compact(partitions))
    trs = listed(w, lambda k: ~bit(F.col(s.REMOVING_MASK), k))
    return partitions.where(being_reassigned()).select(*KEY, trs.alias(TARGET))
