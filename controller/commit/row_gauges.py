"""The controller gauges of spec §16.1 over ``CompactRow`` values: the driver path's twin of
``gauges.gauge_columns`` (each gauge the same sum of a function of one row)."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import replace

from controller.commit.gauges import Gauges
from statemachines.compact_rows import CompactRow
from statemachines.partition_states import PartitionState
from statemachines.replica_states import ReplicaState
from statemachines.row_state_machines import RowView

_FOLLOWING = (ReplicaState.NewReplica, ReplicaState.OnlineReplica)


def _imbalanced(r: CompactRow) -> bool:
    """PreferredReplicaImbalanceCount's test (``rebalance.preferred_replica_imbalance``)."""
    preferred = r.replicas[0]
    adding_head = bool(r.adding_mask & 1)
    return r.has_leadership and r.leader != preferred and (not adding_head or preferred in r.isr)


def _under_replicated(r: CompactRow) -> bool:
    missing = any(not r.adding_mask >> k & 1 and b not in r.isr for k, b in enumerate(r.replicas))
    return r.has_leadership and r.leader >= 0 and missing


def _lagging(r: CompactRow, view: RowView) -> bool:
    """A partition led by a live broker with a live follower outside the ISR
    (``gauges.lagging_positions``)."""
    followers = any(
        b in view.live and b != r.leader and st in _FOLLOWING and b not in r.isr
        for b, st in zip(r.replicas, r.replica_states, strict=True)
    )
    return r.has_leadership and r.leader in view.live_or_shutting_down and followers


def row_gauges(
    rows: Iterable[CompactRow],
    view: RowView,
    deleting: Collection[int],
    started: Collection[int],
    topics: int,
    ineligible: int,
    counters: Mapping[str, int],
) -> Gauges:
    """The gauges over every row of a table, with the event's ``counters``."""
    n = dict.fromkeys(
        ("leadership", "offline", "imbalance", "urp", "lagging", "moving", "delete", "stuck"), 0
    )
    for r in rows:
        n["leadership"] += r.has_leadership
        n["offline"] += r.state == PartitionState.OfflinePartition and r.topic_index not in started
        n["urp"] += _under_replicated(r)
        n["lagging"] += _lagging(r, view)
        n["moving"] += r.adding_mask != 0 or r.removing_mask != 0
        if r.topic_index in deleting:
            states = r.replica_states
            n["delete"] += sum(st != ReplicaState.ReplicaDeletionSuccessful for st in states)
            n["stuck"] += sum(st == ReplicaState.ReplicaDeletionIneligible for st in states)
        elif r.replicas:
            n["imbalance"] += _imbalanced(r)
    return Gauges(
        global_partition_count=n["leadership"],
        offline_partitions_count=n["offline"],
        preferred_replica_imbalance_count=n["imbalance"],
        global_topic_count=topics,
        topics_to_delete_count=len(deleting),
        replicas_to_delete_count=n["delete"],
        topics_ineligible_to_delete_count=ineligible,
        replicas_ineligible_to_delete_count=n["stuck"],
        under_replicated_partitions=n["urp"],
        reassigning_partitions=n["moving"],
        lagging_followers=n["lagging"],
        counters=dict(sorted(counters.items())),  # by name, as the Spark path's
    )


def moved_gauges(
    last: Gauges,
    now: Iterable[CompactRow],
    was: Iterable[CompactRow],
    view: RowView,
    deleting: Collection[int],
    started: Collection[int],
    topics: int,
    ineligible: int,
    counters: Mapping[str, int],
    last_view: RowView,
) -> Gauges:
    """``last`` (over the table before an event, with the same deletions, under
    ``last_view``) moved by the rows the event read: their gauges as they are ``now`` added,
    as they ``was`` taken away (every gauge is a sum over rows). The brokers that changed since
    must be hosted by these rows alone."""
    added = row_gauges(now, view, deleting, started, topics, ineligible, counters)
    taken = row_gauges(was, last_view, deleting, started, topics, ineligible, counters)
    summed = {f: getattr(last, f) + getattr(added, f) - getattr(taken, f) for f in _ROW_SUMS}
    return replace(added, **summed)


# The gauges that are sums over rows (the others are the driver's counts).
_ROW_SUMS = (
    "global_partition_count",
    "offline_partitions_count",
    "preferred_replica_imbalance_count",
    "replicas_to_delete_count",
    "replicas_ineligible_to_delete_count",
    "under_replicated_partitions",
    "reassigning_partitions",
    "lagging_followers",
)
