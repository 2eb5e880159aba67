"""The controller gauges of spec §16.1, and the event totals a commit computes beside them.

Their aggregate Columns are built once per key (``lru_cache``): an event's are otherwise about
1,000 JVM calls. What changes between events, the view's brokers, reaches them as columns
(``ClusterView.as_columns``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from controller.commit.diff import CHANGE, CREATED, KEY, REPLACED, UNCHANGED, stale_rows
from statemachines import schemas as s
from statemachines.brokers import BrokerView
from statemachines.columns import (
    any_of,
    being_reassigned,
    count_of,
    has_leadership,
    in_list,
    in_topics,
)
from statemachines.partition_states import PartitionState
from statemachines.rebalance import preferred_replica_imbalance
from statemachines.replica_states import ReplicaState
from statemachines.state_change_errors import ERRORS, error_count


@dataclass(frozen=True)
class Gauges:
    """The controller gauges of spec §16.1 computed over one generation.

    ``under_replicated_partitions`` is the cluster-wide sum of Kafka's broker gauge (led
    partitions whose ISR is smaller than the replica set without adding replicas);
    ``lagging_followers`` counts partitions with a live follower outside the ISR, which the
    emulated brokers bring back (``emulation.catch_up_ms``).
    """

    global_partition_count: int
    offline_partitions_count: int
    preferred_replica_imbalance_count: int
    global_topic_count: int
    topics_to_delete_count: int = 0
    replicas_to_delete_count: int = 0
    topics_ineligible_to_delete_count: int = 0
    replicas_ineligible_to_delete_count: int = 0
    under_replicated_partitions: int = 0
    reassigning_partitions: int = 0
    lagging_followers: int = 0
    counters: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(
        cls, row: Mapping[str, Any], counters: Sequence[str], topics: int, to_delete: int,
        ineligible: int,
    ) -> Gauges:  # fmt: skip
        """From a commit's aggregates (``GAUGES``, ``counters``) and the driver's topic counts."""
        return cls(
            global_partition_count=int(row["with_leadership"] or 0),
            offline_partitions_count=int(row["offline"] or 0),
            preferred_replica_imbalance_count=int(row["imbalance"] or 0),
            global_topic_count=topics,
            topics_to_delete_count=to_delete,
            replicas_to_delete_count=int(row["ReplicasToDeleteCount"] or 0),
            topics_ineligible_to_delete_count=ineligible,
            replicas_ineligible_to_delete_count=int(row["ReplicasIneligibleToDeleteCount"] or 0),
            under_replicated_partitions=int(row["urp"] or 0),
            reassigning_partitions=int(row["reassigning"] or 0),
            lagging_followers=int(row["lagging"] or 0),
            # Sorted by name, as the driver path's are: the outputs do not depend on the path.
            counters={c: int(row[c] or 0) for c in sorted(counters)},
        )


# The names ``gauge_columns`` gives its aggregates: sums over the rows, every one of them.
GAUGES = (
    "with_leadership",
    "offline",
    "imbalance",
    "urp",
    "lagging",
    "reassigning",
    "ReplicasToDeleteCount",
    "ReplicasIneligibleToDeleteCount",
)


USED = "_used_"  # rows using a replica position (``_uses``)


def gauge_names(w: int) -> tuple[str, ...]:
    """The aggregates ``gauge_columns`` computes at width ``w``: ``GAUGES``, then per position
    the rows using it."""
    return (*GAUGES, *(f"{USED}{k}" for k in range(w)))


def width_used(gauged: Mapping[str, int], w: int) -> int:
    """The narrowest width that holds every row of a table at width ``w`` with these gauges:
    past its last used position, every row's slots are empty (at least 1)."""
    return max((k + 1 for k in range(w) if gauged[f"{USED}{k}"]), default=1)


@lru_cache(maxsize=16)
def gauge_columns(
    w: int, view: BrokerView, deleting: tuple[int, ...], started: tuple[int, ...]
) -> tuple[Column, ...]:
    """The gauges' aggregates (named ``GAUGES``), built once per key: an event's are otherwise
    ~1,000 JVM calls.

    ``deleting``: topics queued for deletion (left out of the imbalance); ``started``: those
    whose deletion has started (§16.1: their partitions are not counted offline). Each is a sum
    of a function of one row and the key, so a table's gauges move by what its changed rows
    add minus what their replaced values took away.
    """
    excluded = in_topics(deleting) if deleting else None
    offline = F.col(s.STATE_CODE) == int(PartitionState.OfflinePartition)
    if started:
        offline = offline & ~in_topics(started)
    sums = (
        F.sum(has_leadership().cast("long")),
        F.sum(offline.cast("long")),
        preferred_replica_imbalance(w, excluded),
        F.sum(_under_replicated(w).cast("long")),
        F.sum(_lagging(w, view).cast("long")),
        F.sum(being_reassigned().cast("long")),
        *deletion_gauges(w, deleting).values(),
        # A reassignment's replica moves widen the table; these tell when it may narrow again.
        *(F.sum(_uses(k).cast("long")) for k in range(w)),
    )
    return tuple(a.alias(n) for n, a in zip(gauge_names(w), sums, strict=True))


WAS = "_was_"  # a gauge over the replaced values of changed rows


def gauge_moves(
    touched: DataFrame, w: int, gauges: tuple[Column, ...], literals: dict[str, Column]
) -> DataFrame:
    """One row: ``gauges`` over the changed rows of ``touched`` (a stamped commit's rows, see
    ``controller.commit.diff``) as they are now, and as they were (prefixed ``WAS``)."""
    changes = F.col(CHANGE) != UNCHANGED
    data = [c for c in s.compact_columns(w) if c not in KEY]
    now = touched.where(changes).select(*s.compact_columns(w))
    was = touched.where(changes & F.col(REPLACED).isNotNull()).select(
        *KEY, *(F.col(REPLACED).getField(c).alias(c) for c in data)
    )
    before = was.withColumns(literals).agg(*gauges).toDF(*(WAS + g for g in gauge_names(w)))
    return now.withColumns(literals).agg(*gauges).crossJoin(before)


def moved(last: dict[str, int], moves: dict[str, Any]) -> dict[str, Any]:
    """The gauges ``last`` moved by a ``gauge_moves`` row (other fields kept)."""
    out = {k: v for k, v in moves.items() if not k.startswith(WAS)}
    for g, value in last.items():
        out[g] = value + int(moves[g] or 0) - int(moves[WAS + g] or 0)
    return out


@lru_cache(maxsize=16)
def event_columns(counters: tuple[str, ...], errors: bool, stamps: bool) -> tuple[Column, ...]:
    """The event's aggregates: its counters, its errors, and (stamped) its created and stale
    rows (see ``stamp_changes``)."""
    return (
        *[F.sum(F.col(c).cast("long")).alias(c) for c in counters],
        *([F.sum(error_count()).alias(ERRORS)] if errors else []),
        *(_stamp_totals() if stamps else ()),
    )


@lru_cache(maxsize=1)
def count_rows() -> Column:
    return F.count(F.lit(1)).alias("_rows")


@lru_cache(maxsize=1)
def count_changed() -> Column:
    return F.sum((F.col(CHANGE) != UNCHANGED).cast("long")).alias("_changed")


def _stamp_totals() -> tuple[Column, ...]:
    """Created rows, and rows whose previous values are unknown (see ``stamp_changes``)."""
    return (
        F.sum((F.col(CHANGE) == CREATED).cast("long")).alias("_created"),
        stale_rows().alias("_stale"),
    )


def _uses(k: int) -> Column:
    """The row has a replica or an ISR member at position ``k``."""
    return (F.col(s.replica_col(k)) != s.EMPTY_SLOT) | (F.col(s.isr_col(k)) != s.EMPTY_SLOT)


def _in_isr(k: int, w: int) -> Column:
    return in_list(F.col(s.replica_col(k)), [F.col(s.isr_col(j)) for j in range(w)])


def _under_replicated(w: int) -> Column:
    """Kafka's UnderReplicatedPartitions for a led partition: |ISR| < |replicas − adding|."""
    adding = F.col(s.ADDING_MASK)
    missing = [
        (F.col(s.replica_col(k)) != s.EMPTY_SLOT)
        & (adding.bitwiseAND(F.lit(1 << k)) == 0)
        & ~_in_isr(k, w)
        for k in range(w)
    ]
    return has_leadership() & (F.col(s.LEADER) >= 0) & any_of(missing)


def lagging_positions(w: int, view: BrokerView) -> list[Column]:
    """Per position: a live follower in an online state outside the ISR (it will catch up).

    Followers on shutting-down brokers do not: they stop fetching and the broker exits."""
    return [
        view.online(k)
        & (F.col(s.replica_col(k)) != F.col(s.LEADER))
        & F.col(s.replica_state_col(k)).isin(
            int(ReplicaState.NewReplica), int(ReplicaState.OnlineReplica)
        )
        & ~_in_isr(k, w)
        for k in range(w)
    ]


def _lagging(w: int, view: BrokerView) -> Column:
    """A partition led by a live broker with a lagging follower."""
    leader_live = view.live_or_shutting_down.contains(F.col(s.LEADER))
    return has_leadership() & leader_live & any_of(lagging_positions(w, view))


def deletion_gauges(w: int, queued: Iterable[int]) -> dict[str, Column]:
    """§16.1 replica gauges as aggregate Columns over a compact table of width ``w``.

    ``TopicsToDeleteCount`` / ``TopicsIneligibleToDeleteCount`` are set sizes on the driver
    (``controller.topic_deletion_state``).
    """
    q = in_topics(list(queued))
    pending = count_of(
        [
            (F.col(s.replica_col(k)) != s.EMPTY_SLOT)
            & (F.col(s.replica_state_col(k)) != int(ReplicaState.ReplicaDeletionSuccessful))
            for k in range(w)
        ]
    )
    inelig = count_of(
        [
            (F.col(s.replica_col(k)) != s.EMPTY_SLOT)
            & (F.col(s.replica_state_col(k)) == int(ReplicaState.ReplicaDeletionIneligible))
            for k in range(w)
        ]
    )
    return {
        "ReplicasToDeleteCount": F.sum(F.when(q, pending).otherwise(0).cast("long")),
        "ReplicasIneligibleToDeleteCount": F.sum(F.when(q, inelig).otherwise(0).cast("long")),
    }
