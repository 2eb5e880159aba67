"""The oracle for broker events (spec §8): Kafka's sequences, one partition at a time."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace

from statemachines.partition_states import PartitionState
from statemachines.reference import (
    Partition,
    View,
    elect_controlled_shutdown,
    handle_partition_state_changes,
    handle_replica_state_changes,
    offline_strategy,
)
from statemachines.replica_states import ReplicaState

# ---- §8 broker events, partition by partition -------------------------------------------------


@dataclass
class BrokerEventOutcome:
    partitions: dict[tuple[str, int], Partition]
    states: dict[tuple[str, int, int], ReplicaState]
    elected: set[tuple[str, int]] = field(default_factory=set)
    failed: set[tuple[str, int]] = field(default_factory=set)
    unclean: set[tuple[str, int]] = field(default_factory=set)
    remaining: set[tuple[str, int]] = field(default_factory=set)


def _trigger_online(
    out: BrokerEventOutcome,
    view: View,
    unclean_by_topic: Mapping[str, bool],
    deleting_topics: Collection[str],
) -> None:
    """§5.4 ``triggerOnlinePartitionStateChange()``: New/Offline partitions not being deleted."""
    keys = [
        k
        for k, p in out.partitions.items()
        if p.state in (PartitionState.OfflinePartition, PartitionState.NewPartition)
        and k[0] not in deleting_topics
    ]
    step = handle_partition_state_changes(
        out.partitions,
        keys,
        PartitionState.OnlinePartition,
        view,
        offline_strategy(unclean_by_topic=unclean_by_topic),
    )
    out.partitions = step.partitions
    out.elected |= set(step.elected)
    out.failed |= set(step.failed)
    out.unclean |= {k for k, e in step.elected.items() if e.unclean}


def on_broker_failure(
    partitions: Mapping[tuple[str, int], Partition],
    states: Mapping[tuple[str, int, int], ReplicaState],
    dead: Collection[int],
    view: View,
    unclean_by_topic: Mapping[str, bool],
    deleting_topics: Collection[str] = frozenset(),
) -> BrokerEventOutcome:
    """§8.2 (b–e): leaderless → Offline, elect New/Offline, dead replicas → OfflineReplica.

    Topics queued for deletion are left alone (``onReplicasBecomeOffline`` hands their replicas
    to the deletion manager instead).
    """
    out = BrokerEventOutcome(dict(partitions), dict(states))
    offline = [
        k
        for k, p in out.partitions.items()
        if p.has_leadership
        and not (p.leader in p.replicas and view.online(p, p.leader))
        and k[0] not in deleting_topics
    ]
    out.partitions = handle_partition_state_changes(
        out.partitions, offline, PartitionState.OfflinePartition
    ).partitions
    _trigger_online(out, view, unclean_by_topic, deleting_topics)
    replicas = [k for k in out.states if k[2] in dead and k[0] not in deleting_topics]
    step = handle_replica_state_changes(
        out.partitions, out.states, replicas, ReplicaState.OfflineReplica, view.controller_epoch
    )
    out.partitions, out.states = step.partitions, step.states
    return out


def on_broker_startup(
    partitions: Mapping[tuple[str, int], Partition],
    states: Mapping[tuple[str, int, int], ReplicaState],
    new: Collection[int],
    view: View,
    unclean_by_topic: Mapping[str, bool],
    deleting_topics: Collection[str] = frozenset(),
) -> BrokerEventOutcome:
    """§8.1 (4–5): the new brokers' replicas → OnlineReplica, then elect New/Offline partitions
    of topics not queued for deletion."""
    out = BrokerEventOutcome(dict(partitions), dict(states))
    replicas = [k for k in out.states if k[2] in new]
    step = handle_replica_state_changes(
        out.partitions, out.states, replicas, ReplicaState.OnlineReplica
    )
    out.partitions, out.states = step.partitions, step.states
    _trigger_online(out, view, unclean_by_topic, deleting_topics)
    return out


def on_controlled_shutdown(
    partitions: Mapping[tuple[str, int], Partition],
    states: Mapping[tuple[str, int, int], ReplicaState],
    broker: int,
    view: View,
    deleting_topics: Collection[str] = frozenset(),
) -> BrokerEventOutcome:
    """§8.4 (5–8) for ``broker`` already in ``view.shutting_down``: its partitions with RF > 1,
    leadership and a topic not queued for deletion."""
    out = BrokerEventOutcome(dict(partitions), dict(states))
    act_on = [
        k
        for k, p in out.partitions.items()
        if broker in p.replicas
        and len(p.replicas) > 1
        and p.has_leadership
        and k[0] not in deleting_topics
    ]
    led = [k for k in act_on if out.partitions[k].leader == broker]
    step = handle_partition_state_changes(
        out.partitions, led, PartitionState.OnlinePartition, view, elect_controlled_shutdown
    )
    out.partitions = step.partitions
    out.elected |= set(step.elected)
    out.failed |= set(step.failed)
    followed = [(t, p, broker) for (t, p) in act_on if (t, p) not in set(led)]
    rstep = handle_replica_state_changes(
        out.partitions, out.states, followed, ReplicaState.OfflineReplica, view.controller_epoch
    )
    out.partitions, out.states = rstep.partitions, rstep.states
    out.remaining = {k for k in act_on if out.partitions[k].leader == broker}
    return out


def on_controller_failover(
    partitions: Iterable[Partition], live: Collection[int], controller_epoch: int
) -> BrokerEventOutcome:
    """A new controller over the partitions ZooKeeper holds, ``live`` the registered brokers,
    up to (not including) ``triggerOnlinePartitionStateChange()``.

    §5.4 step 1: a partition with leadership is OnlinePartition when its leader is live, else
    OfflinePartition; one without is NewPartition. §6.4: replicas on live brokers are
    OnlineReplica, the others ReplicaDeletionIneligible, then OfflineReplica (which takes them
    out of the ISR).
    """
    parts = {(p.topic, p.partition): _startup_state(p, set(live)) for p in partitions}
    states = {
        (t, p, r): ReplicaState.OnlineReplica
        if r in live
        else ReplicaState.ReplicaDeletionIneligible
        for (t, p), q in parts.items()
        for r in q.replicas
    }
    out = BrokerEventOutcome(parts, states)
    down = [k for k, state in states.items() if state != ReplicaState.OnlineReplica]
    if down:
        step = handle_replica_state_changes(
            out.partitions, out.states, down, ReplicaState.OfflineReplica, controller_epoch
        )
        out.partitions, out.states = step.partitions, step.states
    return out


def _startup_state(p: Partition, live: set[int]) -> Partition:
    """§5.4 step 1: a partition's state from its leadership, as a new controller sets it."""
    if not p.has_leadership:
        return replace(p, state=PartitionState.NewPartition)
    online = p.leader in live and p.leader not in p.offline_dir_replicas
    state = PartitionState.OnlinePartition if online else PartitionState.OfflinePartition
    return replace(p, state=state)
