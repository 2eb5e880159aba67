"""Preferred/unclean elections, auto leader rebalance and unclean-enable events (spec §11, §4.3).

Each function takes the current compact generation and returns the next one lazily, with
per-partition counters (``elected``, ``failed_election``, ``unclean_elected``) that the controller
sums in its commit job, as in ``controller.handlers.brokers``. ``on_replica_election`` also
carries ``election_error``: the ElectLeaders result code Kafka would put in its callback for that
partition (null when the partition was not requested, or when Kafka's result map has no entry).
ZooKeeper side effects of the triggers (deleting ``/admin/preferred_replica_election`` and
re-arming its watch for ZkTriggered elections) are the controller's: they do not touch partitions.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from controller.handlers.brokers import (
    ELECTED,
    FAILED_ELECTION,
    UNCLEAN,
    UNCLEAN_ELECTED,
    election_counters,
    trigger_online_partition_state_change,
)
from controller.handlers.tracked import tracked
from statemachines import schemas as s
from statemachines.brokers import ClusterView
from statemachines.columns import has_leadership, in_list, in_topics
from statemachines.election import (
    ElectionStrategy,
    OfflinePartitionLeaderElectionStrategy,
    PreferredReplicaPartitionLeaderElectionStrategy,
)
from statemachines.election_kinds import ElectionTrigger, ElectionType
from statemachines.partition_states import OUTCOME, Outcome, PartitionState
from statemachines.partition_states import handle_state_changes as partition_changes
from statemachines.rebalance import NOT_PREFERRED, PREFERRED, TOTAL, imbalance_ratios

KafkaVersion = tuple[int, int]
BASELINE: KafkaVersion = (2, 8)

ELECTION_ERROR = "election_error"
REBALANCE_CANDIDATE = "rebalance_candidate"

# Kafka ``Errors`` names of the ElectLeaders results (§11.1 step 8).
NONE = "NONE"
ELECTION_NOT_NEEDED = "ELECTION_NOT_NEEDED"
PREFERRED_LEADER_NOT_AVAILABLE = "PREFERRED_LEADER_NOT_AVAILABLE"
ELIGIBLE_LEADERS_NOT_AVAILABLE = "ELIGIBLE_LEADERS_NOT_AVAILABLE"
UNKNOWN_TOPIC_OR_PARTITION = "UNKNOWN_TOPIC_OR_PARTITION"
INVALID_TOPIC_EXCEPTION = "INVALID_TOPIC_EXCEPTION"
# Kafka reads the cached leadership with ``.get``; a partition without one throws
# NoSuchElementException, which ``ApiError.fromThrowable`` reports as this.
UNKNOWN_SERVER_ERROR = "UNKNOWN_SERVER_ERROR"

_REQUESTED = "_requested"
_DELETING = "_deleting"
_NO_LEADERSHIP = "_no_leadership"
_NOT_NEEDED = "_not_needed"
_OVER = "_over_threshold_broker"

COUNTERS = (ELECTED, FAILED_ELECTION, UNCLEAN_ELECTED)


def _with_requested(
    partitions: DataFrame, selection: Column | DataFrame
) -> tuple[DataFrame, Column]:
    """The table (joined to the keys of a DataFrame selection) and whether a row is requested."""
    if isinstance(selection, Column):
        return partitions, F.coalesce(selection, F.lit(False))
    keys = selection.select(s.TOPIC_INDEX, s.PARTITION).distinct().withColumn(_REQUESTED, F.lit(1))
    joined = partitions.join(F.broadcast(keys), [s.TOPIC_INDEX, s.PARTITION], "left")
    return joined, F.col(_REQUESTED).isNotNull()


def unknown_partitions(partitions: DataFrame, selection: DataFrame) -> DataFrame:
    """§11.1 step 4: requested (topic_index, partition) keys absent from the table.

    Returns (topic_index, partition, election_error = UNKNOWN_TOPIC_OR_PARTITION). Requested
    topics the controller does not know have no topic index: the driver answers those itself.
    """
    keys = selection.select(s.TOPIC_INDEX, s.PARTITION).distinct()
    known = partitions.select(s.TOPIC_INDEX, s.PARTITION)
    return keys.join(known, [s.TOPIC_INDEX, s.PARTITION], "left_anti").withColumn(
        ELECTION_ERROR, F.lit(UNKNOWN_TOPIC_OR_PARTITION)
    )


def _strategy(
    election_type: ElectionType, trigger: ElectionTrigger, unclean: Column | None
) -> ElectionStrategy:
    if election_type is ElectionType.PREFERRED:
        return PreferredReplicaPartitionLeaderElectionStrategy()
    # Only the ElectLeaders API may force an unclean choice; other triggers read the topic config.
    return OfflinePartitionLeaderElectionStrategy(
        allow_unclean=trigger is ElectionTrigger.AdminClientTriggered,
        unclean_column=None if unclean is None else UNCLEAN,
    )


def _counted(outcomes: DataFrame, w: int, *extra: Column | str) -> DataFrame:
    return outcomes.select(*s.compact_columns(w), *tracked(outcomes), *extra, *election_counters())


def on_replica_election(
    partitions: DataFrame,
    selection: Column | DataFrame,
    election_type: ElectionType,
    trigger: ElectionTrigger,
    view: ClusterView,
    deleting: Sequence[int] = (),
    unclean: Column | None = None,
    kafka_version: KafkaVersion = BASELINE,
) -> DataFrame:
    """§11.1 steps 4–8 (``processReplicaLeaderElection`` + ``onReplicaElection``) in bulk.

    ``selection`` is a boolean Column or a DataFrame of (topic_index, partition) keys (find the
    unknown ones with ``unknown_partitions``); ``deleting`` are topic indices queued for deletion;
    ``unclean`` is the per-row effective ``unclean.leader.election.enable``, read only by UNCLEAN
    elections that are not AdminClientTriggered. Returns the next generation plus
    ``election_error`` and the counters.
    """
    s.check_compact(partitions)
    w = s.width(partitions)
    pre_kip460 = kafka_version < (2, 4)
    if pre_kip460 and election_type is ElectionType.UNCLEAN:
        raise ValueError("UNCLEAN elections exist from Kafka 2.4 (KIP-460)")
    df, requested = _with_requested(partitions, selection)
    flags = {
        _REQUESTED: requested,
        _DELETING: in_topics(deleting),
        _NO_LEADERSHIP: ~has_leadership(),
        _NOT_NEEDED: has_leadership() & _not_needed(election_type, view),
    }
    if unclean is not None:
        flags[UNCLEAN] = unclean
    df = df.withColumns(flags)  # one projection
    electable = F.col(_REQUESTED) & ~F.col(_DELETING) & ~F.col(_NO_LEADERSHIP) & ~F.col(_NOT_NEEDED)
    outcomes = partition_changes(
        df,
        electable,
        PartitionState.OnlinePartition,
        view,
        _strategy(election_type, trigger, unclean),
    ).outcomes
    failed = (
        PREFERRED_LEADER_NOT_AVAILABLE
        if election_type is ElectionType.PREFERRED
        else ELIGIBLE_LEADERS_NOT_AVAILABLE
    )
    outcome = F.col(OUTCOME)
    error = (
        F.when(~F.col(_REQUESTED), F.lit(None))
        .when(F.col(_DELETING), F.lit(INVALID_TOPIC_EXCEPTION))
        .when(F.col(_NO_LEADERSHIP), F.lit(UNKNOWN_SERVER_ERROR))
        # Before 2.4 a partition already led by its preferred replica was reported as success.
        .when(F.col(_NOT_NEEDED), F.lit(NONE if pre_kip460 else ELECTION_NOT_NEEDED))
        .when(outcome == int(Outcome.LEADERSHIP_WRITTEN), F.lit(NONE))
        .when(outcome == int(Outcome.FAILED), F.lit(failed))
        # An invalid transition is only logged by Kafka: no entry in the result map.
        .otherwise(F.lit(None))
    )
    return _counted(outcomes, w, error.cast("string").alias(ELECTION_ERROR))


def _not_needed(election_type: ElectionType, view: ClusterView) -> Column:
    """The partition already has the leader the election would give it (ELECTION_NOT_NEEDED)."""
    if election_type is ElectionType.PREFERRED:
        return _led_by_preferred()
    leader = F.col(s.LEADER)
    # ``liveBrokerIds`` excludes shutting-down brokers, and is broker-level (no log dirs).
    return (leader != s.NO_LEADER) & view.live.contains(leader)


def replica_election_scope(election_type: ElectionType, view: ClusterView) -> Column:
    """Of ``on_replica_election``: partitions with leadership that the election would change,
    the only ones it may touch (the others only get a result code)."""
    return has_leadership() & ~_not_needed(election_type, view)


def auto_rebalance_candidates(
    partitions: DataFrame,
    view: ClusterView,
    threshold_percentage: int,
    deleting: Sequence[int] = (),
    any_reassignment_in_progress: bool = False,
    kafka_version: KafkaVersion = BASELINE,
    whole: DataFrame | None = None,
) -> DataFrame:
    """§11.2: the table plus boolean ``rebalance_candidate`` (the auto rebalance's elections).

    A partition is a candidate when its preferred broker's imbalance ratio is strictly above
    ``threshold_percentage`` / 100 and it is one of that broker's "not preferred" partitions that
    pass the version's filter. The ratios are a small per-broker aggregation broadcast back,
    over ``whole`` when given (``partitions`` is then some of its rows, see ``not_preferred``).
    """
    s.check_compact(partitions)
    if any_reassignment_in_progress and kafka_version < (3, 4):
        # Before KAFKA-10149 (3.4) any reassignment in the cluster blocks every candidate.
        return partitions.withColumn(REBALANCE_CANDIDATE, F.lit(False))
    excluded = in_topics(deleting)
    ratios = imbalance_ratios(partitions if whole is None else whole, excluded)
    # ratio > pct/100 as integers: exact, and the same answer as Kafka's doubles for real sizes.
    over = ratios.where(
        F.col(NOT_PREFERRED).cast("long") * 100 > F.col(TOTAL).cast("long") * threshold_percentage
    ).select(F.col(PREFERRED).alias(_OVER))
    w = s.width(partitions)
    preferred = F.col(s.replica_col(0))
    online = view.online(0)
    # 2.6+ (KAFKA-9866): the preferred replica must also be in the ISR, so it can be elected.
    eligible = (
        online & in_list(preferred, [F.col(s.isr_col(k)) for k in range(w)])
        if kafka_version >= (2, 6)
        else online
    )
    candidate = (
        F.col(_OVER).isNotNull()
        & ~excluded
        & has_leadership()
        & (F.col(s.LEADER) != preferred)
        & eligible
    )
    joined = partitions.join(F.broadcast(over), preferred == F.col(_OVER), "left")
    return joined.withColumn(REBALANCE_CANDIDATE, candidate).drop(_OVER)


def _led_by_preferred() -> Column:
    return F.col(s.LEADER) == F.col(s.replica_col(0))


def not_preferred() -> Column:
    """Partitions with leadership led by another broker than their preferred replica: the only
    ones a preferred election may touch (``replica_election_scope`` of a preferred one)."""
    return has_leadership() & ~_led_by_preferred()


def check_and_trigger_auto_leader_rebalance(
    partitions: DataFrame,
    view: ClusterView,
    threshold_percentage: int,
    deleting: Sequence[int] = (),
    any_reassignment_in_progress: bool = False,
    kafka_version: KafkaVersion = BASELINE,
    whole: DataFrame | None = None,
) -> DataFrame:
    """§11.2 ``checkAndTriggerAutoLeaderRebalance``: preferred elections of the candidates.

    Returns the next generation with the counters and ``rebalance_candidate``. AutoTriggered
    failures are only logged by Kafka, so there is no result code. ``whole``: see
    ``auto_rebalance_candidates``.
    """
    w = s.width(partitions)
    candidates = auto_rebalance_candidates(
        partitions,
        view,
        threshold_percentage,
        deleting,
        any_reassignment_in_progress,
        kafka_version,
        whole,
    )
    outcomes = partition_changes(
        candidates,
        F.col(REBALANCE_CANDIDATE),
        PartitionState.OnlinePartition,
        view,
        PreferredReplicaPartitionLeaderElectionStrategy(),
    ).outcomes
    return _counted(outcomes, w, REBALANCE_CANDIDATE)


def on_unclean_leader_election_enable(
    partitions: DataFrame,
    view: ClusterView,
    unclean: Column,
    deleting: Sequence[int] = (),
    topic_index: int | None = None,
) -> DataFrame:
    """§4.3 UncleanLeaderElectionEnable / TopicUncleanLeaderElectionEnable(t).

    ``triggerOnlinePartitionStateChange()`` (or ``(t)`` when ``topic_index`` is given) with the
    new effective ``unclean`` flags: every New/Offline partition (of the topic) not queued for
    deletion goes Online under the offline strategy. Returns the next generation with counters.
    """
    w = s.width(partitions)
    scope = None if topic_index is None else F.col(s.TOPIC_INDEX) == topic_index
    outcomes = trigger_online_partition_state_change(partitions, view, unclean, deleting, scope)
    return _counted(outcomes, w)
