"""The oracle for spec §11 and the unclean-enable events: plain Python, one partition at a time.

It mirrors ``KafkaController.processReplicaLeaderElection`` / ``onReplicaElection`` /
``checkAndTriggerAutoLeaderRebalance`` and ``triggerOnlinePartitionStateChange`` over the
``statemachines.reference`` records, for property tests of ``controller.handlers.election``.
Result codes are Kafka's ``Errors`` names, spelled out here so the two paths stay independent.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

from statemachines.election_kinds import ElectionTrigger, ElectionType
from statemachines.partition_states import PartitionState
from statemachines.reference import (
    Partition,
    PartitionChanges,
    Strategy,
    View,
    elect_preferred,
    handle_partition_state_changes,
    imbalance_ratios,
    offline_strategy,
)
from statemachines.schemas import NO_LEADER

Key = tuple[str, int]


@dataclass
class ElectionOutcome:
    """The next partitions and what happened per partition key."""

    partitions: dict[Key, Partition]
    errors: dict[Key, str] = field(default_factory=dict)  # ElectLeaders callback entries
    elected: set[Key] = field(default_factory=set)
    failed: set[Key] = field(default_factory=set)
    unclean: set[Key] = field(default_factory=set)


def _absorb(out: ElectionOutcome, step: PartitionChanges) -> None:
    out.partitions = step.partitions
    out.elected |= set(step.elected)
    out.failed |= set(step.failed)
    out.unclean |= {k for k, e in step.elected.items() if e.unclean}


def _strategy(
    election_type: ElectionType, trigger: ElectionTrigger, unclean_by_topic: Mapping[str, bool]
) -> Strategy:
    if election_type is ElectionType.PREFERRED:
        return elect_preferred
    return offline_strategy(
        allow_unclean=trigger is ElectionTrigger.AdminClientTriggered,
        unclean_by_topic=unclean_by_topic,
    )


def on_replica_election(
    partitions: Mapping[Key, Partition],
    requested: Iterable[Key],
    election_type: ElectionType,
    trigger: ElectionTrigger,
    view: View,
    deleting_topics: Collection[str] = frozenset(),
    unclean_by_topic: Mapping[str, bool] | None = None,
    kafka_version: tuple[int, int] = (2, 8),
) -> ElectionOutcome:
    """§11.1 steps 3–8 for the requested keys (the active check and ZK steps are the caller's)."""
    out = ElectionOutcome(dict(partitions))
    electable: list[Key] = []
    for key in sorted(set(requested)):
        p = partitions.get(key)
        if p is None:
            out.errors[key] = "UNKNOWN_TOPIC_OR_PARTITION"
        elif key[0] in deleting_topics:
            out.errors[key] = "INVALID_TOPIC_EXCEPTION"
        elif not p.has_leadership:
            # Kafka's ``partitionLeadershipInfo(p).get`` throws here.
            out.errors[key] = "UNKNOWN_SERVER_ERROR"
        elif election_type is ElectionType.PREFERRED and p.leader == p.replicas[0]:
            out.errors[key] = "NONE" if kafka_version < (2, 4) else "ELECTION_NOT_NEEDED"
        elif (
            election_type is ElectionType.UNCLEAN
            and p.leader != NO_LEADER
            and p.leader in view.live
        ):
            out.errors[key] = "ELECTION_NOT_NEEDED"
        else:
            electable.append(key)
    step = handle_partition_state_changes(
        out.partitions,
        electable,
        PartitionState.OnlinePartition,
        view,
        _strategy(election_type, trigger, unclean_by_topic or {}),
    )
    _absorb(out, step)
    failed = (
        "PREFERRED_LEADER_NOT_AVAILABLE"
        if election_type is ElectionType.PREFERRED
        else "ELIGIBLE_LEADERS_NOT_AVAILABLE"
    )
    out.errors |= {k: "NONE" for k in step.elected}
    out.errors |= {k: failed for k in step.failed}
    return out


def auto_rebalance_candidates(
    partitions: Mapping[Key, Partition],
    view: View,
    threshold_percentage: int,
    deleting_topics: Collection[str] = frozenset(),
    any_reassignment_in_progress: bool = False,
    kafka_version: tuple[int, int] = (2, 8),
) -> set[Key]:
    """§11.2: the partitions ``checkAndTriggerAutoLeaderRebalance`` elects, all brokers together."""
    parts = {k: p for k, p in partitions.items() if k[0] not in deleting_topics and p.replicas}
    ratios = imbalance_ratios(parts.values())
    candidates: set[Key] = set()
    for broker, ratio in ratios.items():
        if not ratio > threshold_percentage / 100:  # Kafka's doubles, strictly greater
            continue
        for key, p in parts.items():
            if p.replicas[0] != broker or not p.has_leadership or p.leader == broker:
                continue
            if any_reassignment_in_progress and kafka_version < (3, 4):
                continue
            if not view.online(p, broker):
                continue
            if kafka_version >= (2, 6) and broker not in p.isr:
                continue
            candidates.add(key)
    return candidates


def check_and_trigger_auto_leader_rebalance(
    partitions: Mapping[Key, Partition],
    view: View,
    threshold_percentage: int,
    deleting_topics: Collection[str] = frozenset(),
    any_reassignment_in_progress: bool = False,
    kafka_version: tuple[int, int] = (2, 8),
) -> ElectionOutcome:
    """§11.2: ``onReplicaElection(candidates, PREFERRED, AutoTriggered)``."""
    candidates = auto_rebalance_candidates(
        partitions,
        view,
        threshold_percentage,
        deleting_topics,
        any_reassignment_in_progress,
        kafka_version,
    )
    out = ElectionOutcome(dict(partitions))
    _absorb(
        out,
        handle_partition_state_changes(
            out.partitions,
            sorted(candidates),
            PartitionState.OnlinePartition,
            view,
            elect_preferred,
        ),
    )
    return out


def on_unclean_leader_election_enable(
    partitions: Mapping[Key, Partition],
    view: View,
    unclean_by_topic: Mapping[str, bool],
    deleting_topics: Collection[str] = frozenset(),
    topic: str | None = None,
) -> ElectionOutcome:
    """§5.4 ``triggerOnlinePartitionStateChange()`` / ``(topic)`` with the new unclean flags."""
    keys = [
        k
        for k, p in partitions.items()
        if p.state in (PartitionState.OfflinePartition, PartitionState.NewPartition)
        and (topic is None or k[0] == topic)
        and k[0] not in deleting_topics
    ]
    out = ElectionOutcome(dict(partitions))
    _absorb(
        out,
        handle_partition_state_changes(
            out.partitions,
            keys,
            PartitionState.OnlinePartition,
            view,
            offline_strategy(unclean_by_topic=unclean_by_topic),
        ),
    )
    return out
