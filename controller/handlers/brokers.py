"""Broker failure, startup and controlled shutdown (spec §8.1, §8.2, §8.4) as bulk transforms.

Each function takes the current compact generation and returns the next one lazily, with
per-partition counters as extra columns (``elected``, ``failed_election``, ``unclean_elected``,
``isr_shrinks``) that the controller sums into its event metrics in the commit job, and the
``state_change_errors`` of the transitions Kafka would reject or fail. Kafka's order of steps is
kept: it decides which partitions a later step sees.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from controller.handlers.tracked import tracked
from statemachines import schemas as s
from statemachines.brokers import BrokerSet, ClusterView
from statemachines.columns import any_of, has_leadership, in_topics
from statemachines.election import (
    ControlledShutdownPartitionLeaderElectionStrategy,
    LeadershipChange,
    OfflinePartitionLeaderElectionStrategy,
)
from statemachines.partition_states import FAILURE, OUTCOME, Outcome, PartitionState
from statemachines.partition_states import handle_state_changes as partition_changes
from statemachines.replica_states import ISR_WRITES, ReplicaState
from statemachines.replica_states import handle_state_changes as replica_changes

UNCLEAN = "unclean_enabled"
ELECTED = "elected"
FAILED_ELECTION = "failed_election"
UNCLEAN_ELECTED = "unclean_elected"
ISR_SHRINKS = "isr_shrinks"


def _hosted_on(brokers: BrokerSet, w: int) -> Column:
    return any_of([brokers.contains(F.col(s.replica_col(k))) for k in range(w)])


def _not_deleting(deleting: Sequence[int]) -> Column:
    return ~in_topics(deleting)


def _electable() -> Column:
    """New or Offline: the partitions ``trigger_online_partition_state_change`` elects."""
    state = F.col(s.STATE_CODE)
    return state.isin(int(PartitionState.OfflinePartition), int(PartitionState.NewPartition))


def _leader_offline(view: ClusterView, w: int) -> Column:
    return ~any_of(
        [(F.col(s.replica_col(k)) == F.col(s.LEADER)) & view.online(k) for k in range(w)]
    )


# The rows each handler below may change, or annotate with a counter or a refused transition: a
# superset, so that the controller transforms and writes only those (``ControllerContext.commit``
# with ``partial``); every other row comes out of the handler as it went in.
def broker_failure_scope(dead: BrokerSet, view: ClusterView, w: int) -> Column:
    """Of ``on_broker_failure``: replicas on the dead brokers, leaders offline, elections."""
    return _hosted_on(dead, w) | _leader_offline(view, w) | _electable()


def broker_startup_scope(new: BrokerSet, w: int) -> Column:
    """Of ``on_broker_startup``: replicas on the new brokers, elections."""
    return _hosted_on(new, w) | _electable()


def controlled_shutdown_scope(broker: int, w: int) -> Column:
    """Of ``on_controlled_shutdown``: the broker's replicas."""
    return _hosted_on(BrokerSet.of([broker]), w)


def trigger_online_partition_state_change(
    partitions: DataFrame,
    view: ClusterView,
    unclean: Column,
    deleting: Sequence[int],
    scope: Column | None = None,
) -> DataFrame:
    """§5.4: every New/Offline partition not queued for deletion → Online (offline strategy).

    Returns the transition's outcomes; ``unclean`` is the per-row effective unclean flag.
    ``scope`` restricts the partitions considered (Kafka's ``triggerOnlinePartitionStateChange(t)``).
    """
    result = partition_changes(
        partitions.withColumn(UNCLEAN, unclean),
        _electable() & _not_deleting(deleting) & (F.lit(True) if scope is None else scope),
        PartitionState.OnlinePartition,
        view,
        OfflinePartitionLeaderElectionStrategy(unclean_column=UNCLEAN),
    )
    return result.outcomes


def election_counters() -> list[Column]:
    """The outcome of an OnlinePartition transition as 0/1 counter columns."""
    return [
        (F.col(OUTCOME) == int(Outcome.LEADERSHIP_WRITTEN)).cast("int").alias(ELECTED),
        (F.col(OUTCOME) == int(Outcome.FAILED)).cast("int").alias(FAILED_ELECTION),
        F.col(LeadershipChange.UNCLEAN).cast("int").alias(UNCLEAN_ELECTED),
    ]


def with_election_counters(outcomes: DataFrame) -> DataFrame:
    """``election_counters`` in place of the outcome columns (caller columns kept)."""
    result = (OUTCOME, FAILURE, LeadershipChange.RECIPIENTS, LeadershipChange.UNCLEAN)
    carried = [c for c in outcomes.columns if c not in result]
    return outcomes.select(*carried, *election_counters())


def on_broker_failure(
    partitions: DataFrame, dead: BrokerSet, view: ClusterView, unclean: Column, deleting: list[int]
) -> DataFrame:
    """§8.2 step 2 (b–e) for replicas of topics not queued for deletion.

    The result carries ``elected``/``failed_election``/``unclean_elected``/``isr_shrinks`` per row.
    """
    w = s.width(partitions)
    offline = partition_changes(
        partitions,
        has_leadership() & _leader_offline(view, w) & _not_deleting(deleting),
        PartitionState.OfflinePartition,
    ).outcomes
    outcomes = trigger_online_partition_state_change(
        offline.select(*s.compact_columns(w), *tracked(offline)), view, unclean, deleting
    )
    counted = outcomes.select(*s.compact_columns(w), *tracked(outcomes), *election_counters())
    keep = _not_deleting(deleting)
    shrunk = replica_changes(
        counted,
        lambda broker, _k: dead.contains(broker) & keep,
        ReplicaState.OfflineReplica,
        view.controller_epoch,
    ).outcomes
    return shrunk.select(
        *s.compact_columns(w),
        *tracked(shrunk),
        ELECTED,
        FAILED_ELECTION,
        UNCLEAN_ELECTED,
        F.col(ISR_WRITES).alias(ISR_SHRINKS),
    )


def on_broker_startup(
    partitions: DataFrame, new: BrokerSet, view: ClusterView, unclean: Column, deleting: list[int]
) -> DataFrame:
    """§8.1 steps 4–5: replicas on the new brokers → OnlineReplica, then elect New/Offline ones."""
    w = s.width(partitions)
    online = replica_changes(partitions, new, ReplicaState.OnlineReplica).outcomes
    outcomes = trigger_online_partition_state_change(
        online.select(*s.compact_columns(w), *tracked(online)), view, unclean, deleting
    )
    return outcomes.select(
        *s.compact_columns(w),
        *tracked(outcomes),
        *election_counters(),
        F.lit(0).alias(ISR_SHRINKS),
    )


def on_controlled_shutdown(
    partitions: DataFrame, broker: int, view: ClusterView, deleting: list[int]
) -> DataFrame:
    """§8.4 steps 5–7 for a broker already in ``view.shutting_down``.

    Partitions it leads (RF > 1, with leadership, not being deleted) are elected with the
    controlled-shutdown strategy; then its follower replicas of the rest go OfflineReplica.
    The result carries ``remaining`` (1 where the broker still leads such a partition).
    """
    w = s.width(partitions)
    me = BrokerSet.of([broker])
    act_on = (
        _hosted_on(me, w)
        & ((F.col(s.replica_col(1)) != s.EMPTY_SLOT) if w > 1 else F.lit(False))  # RF > 1
        & has_leadership()
        & _not_deleting(deleting)
    )
    led = act_on & (F.col(s.LEADER) == broker)
    elected = partition_changes(
        partitions.withColumn("_followed", act_on & ~led),
        led,
        PartitionState.OnlinePartition,
        view,
        ControlledShutdownPartitionLeaderElectionStrategy(),
    ).outcomes
    counted = elected.select(
        *s.compact_columns(w), *tracked(elected), "_followed", *election_counters()
    )
    followed = F.col("_followed")
    shrunk = replica_changes(
        counted,
        lambda b, _k: (b == broker) & followed,
        ReplicaState.OfflineReplica,
        view.controller_epoch,
    ).outcomes
    remaining = act_on & (F.col(s.LEADER) == broker)
    return shrunk.select(
        *s.compact_columns(w),
        *tracked(shrunk),
        ELECTED,
        FAILED_ELECTION,
        UNCLEAN_ELECTED,
        F.col(ISR_WRITES).alias(ISR_SHRINKS),
    ).withColumn("remaining", remaining.cast("int"))
