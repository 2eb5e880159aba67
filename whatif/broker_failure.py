"""Kafka's broker-failure handling (spec §8.2) as one lazy transform over the public partitions.

``after_failure`` applies to the snapshot what the controller's own
``controller.handlers.brokers.on_broker_failure`` does when brokers fail (a test compares them),
without its bookkeeping (requests, state-change log), so a million partitions take one pass:

1. partitions whose leader is not live go ``OfflinePartition``;
2. ``triggerOnlinePartitionStateChange`` elects every Offline partition with the offline strategy
   (§7.1: the first live ISR member in assignment order; else, only where the topic enables
   ``unclean.leader.election.enable``, the first live replica; the new ISR is the live part of the
   old one, or the unclean leader alone);
3. the failed brokers' replicas go ``OfflineReplica`` (§6.3): they leave the ISR, except that the
   last ISR member is never removed, and a partition whose leader failed without a successor
   ends with leader -1.

Each row also says what the return of the brokers does (§8.1, §11.2): ``leader_on_return`` elects
the partitions still offline with every broker live; ``rebalance_candidate`` marks the partitions
whose preferred replica, back in the ISR it was in, the auto leader rebalance may elect.
Partitions of topics queued for deletion (marked in the snapshot, or leader -2) are left alone and
counted in no flag, as Kafka leaves them; so are the partitions the snapshot has without a leader
(no failure brings them back). The ISR and offline rules are ``whatif.isr_rules``'.

``snapshot_facts`` is what both ``fail`` questions (``whatif.failure``, ``whatif.failure_sets``)
read from the snapshot before building their transforms.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from statemachines import schemas as s
from statemachines.brokers import BrokerSet
from statemachines.columns import (
    any_of,
    compact,
    count_of,
    has_leadership,
    in_list,
    present,
)
from statemachines.election import offline_leader
from statemachines.partition_states import PartitionState
from whatif.cluster import WhatIfCluster
from whatif.isr_rules import (
    DELETING,
    MIN_ISR,
    UNCLEAN,
    is_offline,
    is_under_min_isr,
    isr_after_removing,
    left_offline,
    with_topic_configs,
)

# Flags of ``partitions_after`` (one per partition).
OFFLINE = "offline"
UNDER_MIN_ISR = "under_min_isr"
UNCLEAN_NEEDED = "unclean_needed"
LEADER_MOVED = "leader_moved"
FLAGS = (OFFLINE, UNDER_MIN_ISR, UNCLEAN_NEEDED, LEADER_MOVED)

LEADER_BEFORE = "leader_before"
ISR_BEFORE = "isr_before"
# After the return of the brokers: the leader once offline partitions are elected again, and
# whether the auto rebalance may elect the preferred replica (the preferred broker's ratio decides).
LEADER_RETURN = "leader_on_return"
PREFERRED = "preferred"
REBALANCE_CANDIDATE = "rebalance_candidate"

# -- the snapshot's facts ------------------------------------------------------------------------


@dataclass(frozen=True)
class Snapshot:
    """What the transforms need to know about the snapshot before they are built (one job)."""

    width: int
    controller_epoch: int
    deleting_topics: frozenset[str]
    reassigning: bool
    topics: tuple[str, ...]

    def topic_indices(self, names: Iterable[str]) -> list[int]:
        index = {t: i for i, t in enumerate(self.topics)}
        return sorted(index[t] for t in names if t in index)


def snapshot_facts(cluster: WhatIfCluster) -> Snapshot:
    """Width (largest replica list), controller epoch, topics being deleted, and whether any
    partition is being reassigned, in one small job."""
    p = cluster.partitions
    row = p.agg(
        F.max(F.size(s.REPLICAS)).alias("w"),
        F.max(s.CONTROLLER_EPOCH).alias("epoch"),
        F.collect_set(F.when(F.col(s.LEADER) == s.LEADER_DURING_DELETE, F.col(s.TOPIC))).alias(
            "deleting"
        ),
        F.max(F.size(s.ADDING_REPLICAS) + F.size(s.REMOVING_REPLICAS)).alias("moving"),
    ).first()
    assert row is not None
    topics = tuple(sorted(cluster.topic_configs))
    return Snapshot(
        width=max(1, int(row["w"] or 1)),
        controller_epoch=int(row["epoch"] or 0),
        deleting_topics=frozenset(row["deleting"] or ()) | cluster.deleting_topics,
        reassigning=int(row["moving"] or 0) > 0,
        topics=topics,
    )


# -- the failure, as Kafka's controller handles it ------------------------------------------------


def after_failure(
    spark: SparkSession, cluster: WhatIfCluster, failed: Iterable[int], facts: Snapshot
) -> DataFrame:
    """The public partitions table after ``failed`` fail (lazy), with the ``FLAGS`` and
    ``leader_before``, ``isr_before``, ``min_insync_replicas``, ``leader_on_return``,
    ``preferred`` and ``rebalance_candidate`` columns."""
    dead = BrokerSet.of(failed)
    everyone = BrokerSet.of(cluster.brokers)
    live = everyone - dead
    failed_rows = on_failure(failure_rows(cluster), facts.width, live, dead)
    return with_flags(failed_rows, live, everyone, dead, facts.width)


def failure_rows(cluster: WhatIfCluster) -> DataFrame:
    """The snapshot's partitions with their topic configs (``isr_rules.with_topic_configs``)
    and ``leader_before``, ``isr_before``: what ``on_failure`` and ``with_flags`` read."""
    return with_topic_configs(cluster, cluster.partitions).withColumns(
        {LEADER_BEFORE: F.col(s.LEADER), ISR_BEFORE: F.col(s.ISR)}
    )


def slot_columns(array: str, w: int) -> list[Column]:
    """The first ``w`` elements of an int array column, ``EMPTY_SLOT`` where it is shorter: the
    transforms here work slot by slot, ``w`` being the largest replica list."""
    return [F.coalesce(F.get(F.col(array), k), F.lit(s.EMPTY_SLOT)) for k in range(w)]


def _staged(names: str, w: int) -> list[Column]:
    return [F.col(f"{names}{k}") for k in range(w)]


def on_failure(rows: DataFrame, w: int, live: BrokerSet, dead: BrokerSet) -> DataFrame:
    """§8.2 steps b–e over public partitions rows of replication factor ≤ ``w`` with the
    columns of ``isr_rules.with_topic_configs``: the same outcome as
    ``controller.handlers.brokers.on_broker_failure`` (a test compares them), in a few int
    expressions per row and without the controller's bookkeeping (requests, state-change log).

    Offline election (§7.1 via ``statemachines.election.offline_leader``) for partitions whose
    leader is not live; then each failed ISR member leaves the ISR, one write (epoch+1) each,
    except that the last member stays (``isr_rules.isr_after_removing``); a leader that failed
    without a successor becomes -1. Topics queued for deletion are left alone, and so are the
    partitions the snapshot already has without a leader (``isr_rules.left_offline``).
    """
    reps, isr = _staged("_r", w), _staged("_i", w)
    leader = F.col(s.LEADER)
    slots = {f"_r{k}": c for k, c in enumerate(slot_columns(s.REPLICAS, w))}
    slots |= {f"_i{k}": c for k, c in enumerate(slot_columns(s.ISR, w))}
    acting = has_leadership() & ~F.col(DELETING)
    first = {
        "_acting": acting,
        "_elect": acting & (leader >= 0) & ~live.contains(leader),
        **{f"_live_r{k}": live.contains(r) for k, r in enumerate(reps)},
        **{f"_live_i{k}": live.contains(x) for k, x in enumerate(isr)},
    }
    elected = F.when(
        F.col("_elect"),
        offline_leader(reps, isr, _staged("_live_r", w), F.col(UNCLEAN)),
    )
    second = {"_new_leader": elected}
    new_leader = F.col("_new_leader")
    was_in_isr = in_list(new_leader, isr)
    live_isr = compact(isr, _staged("_live_i", w))
    alone = [new_leader] + [F.lit(s.EMPTY_SLOT)] * (w - 1)
    isr_elected = [F.when(was_in_isr, a).otherwise(b) for a, b in zip(live_isr, alone, strict=True)]
    # Not elected: the failed ISR members leave, one write each, the last one staying.
    gone = [F.col("_acting") & (x != s.EMPTY_SLOT) & dead.contains(x) for x in isr]
    writes = count_of(gone)
    is_elected = new_leader.isNotNull()
    isr_shrunk = F.when(
        F.col("_acting"), isr_after_removing(F.col(s.ISR), dead.contains)
    ).otherwise(F.col(s.ISR))
    new_isr = F.when(is_elected, present(isr_elected)).otherwise(isr_shrunk)
    leader_removed = any_of([g & (x == leader) for x, g in zip(isr, gone, strict=True)])
    final_leader = (
        F.when(is_elected, new_leader)
        .when(F.col("_elect") | leader_removed, F.lit(s.NO_LEADER))
        .otherwise(leader)
    )
    bumps = is_elected.cast("int") + F.when(is_elected, F.lit(0)).otherwise(writes)
    state = (
        F.when(is_elected, F.lit(PartitionState.OnlinePartition.name))
        .when(
            F.col("_acting") & (final_leader == s.NO_LEADER),
            F.lit(PartitionState.OfflinePartition.name),
        )
        .otherwise(F.col(s.STATE))
    )
    third = {
        s.ISR: new_isr,
        s.LEADER: final_leader,
        s.LEADER_EPOCH: F.col(s.LEADER_EPOCH) + bumps,
        s.ZK_VERSION: F.col(s.ZK_VERSION) + bumps,
        s.STATE: state,
    }
    out = rows.withColumns(slots).withColumns(first).withColumns(second).withColumns(third)
    return out.drop(*slots, *first, *second)


def with_flags(
    public: DataFrame, live: BrokerSet, everyone: BrokerSet, dead: BrokerSet, w: int
) -> DataFrame:
    leader = F.col(s.LEADER)
    leader_before = F.col(LEADER_BEFORE)
    isr_before = F.col(ISR_BEFORE)
    deleting = F.col(DELETING)
    not_deleting = ~deleting
    flags = {
        OFFLINE: is_offline(leader, deleting),
        UNDER_MIN_ISR: is_under_min_isr(leader, F.size(s.ISR), F.col(MIN_ISR), deleting),
        UNCLEAN_NEEDED: not_deleting
        & ~left_offline(deleting)
        & ~any_of([live.contains(x) for x in slot_columns(ISR_BEFORE, w)])
        & any_of([live.contains(r) for r in slot_columns(s.REPLICAS, w)]),
        LEADER_MOVED: (leader >= 0) & (leader != leader_before) & not_deleting,
    }
    # The return: §8.1 elects the partitions still offline, every broker live again.
    replicas, isr = slot_columns(s.REPLICAS, w), slot_columns(s.ISR, w)
    elected = offline_leader(
        replicas, isr, [everyone.contains(r) for r in replicas], F.col(UNCLEAN)
    )
    offline_with_state = has_leadership() & (leader == s.NO_LEADER) & not_deleting
    on_return = F.when(offline_with_state, F.coalesce(elected, leader)).otherwise(leader)
    preferred = F.get(F.col(s.REPLICAS), 0)
    # The returned brokers catch up and rejoin the ISRs they were in before the failure.
    in_isr_on_return = F.array_contains(F.col(s.ISR), preferred) | (
        dead.contains(preferred) & F.array_contains(isr_before, preferred)
    )
    candidate = (
        has_leadership()
        & not_deleting
        & (F.col(LEADER_RETURN) != preferred)
        & everyone.contains(preferred)
        & in_isr_on_return
    )
    return (
        public.withColumns(flags)
        .withColumn(LEADER_RETURN, on_return)
        .withColumns({PREFERRED: preferred, REBALANCE_CANDIDATE: candidate})
    )
