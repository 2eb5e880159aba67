"""The oracle: a plain-Python, per-partition transliteration of Kafka's controller rules.

It is what property tests compare the Spark path against and the "per-partition controller loop"
baseline of the benchmarks. It favours being obviously Kafka over being fast: one partition at a
time, lists and sets, no Spark.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from statemachines.assignment import assign_replicas_to_brokers as assign_replicas_to_brokers
from statemachines.partition_states import VALID_PREVIOUS_STATES as PARTITION_VALID_PREVIOUS
from statemachines.partition_states import PartitionState
from statemachines.replica_states import VALID_PREVIOUS_STATES as REPLICA_VALID_PREVIOUS
from statemachines.replica_states import ReplicaState
from statemachines.schemas import INITIAL_LEADER_EPOCH, INITIAL_ZK_VERSION, NO_LEADER, NO_ZK_VERSION

# ---- §7.1 selection functions -----------------------------------------------------------------


def offline_leader(
    assignment: Sequence[int], isr: Collection[int], live: Collection[int], unclean_enabled: bool
) -> int | None:
    for r in assignment:
        if r in live and r in isr:
            return r
    if unclean_enabled:
        for r in assignment:
            if r in live:
                return r
    return None


def reassign_leader(
    target_replicas: Sequence[int], isr: Collection[int], live: Collection[int]
) -> int | None:
    for r in target_replicas:
        if r in live and r in isr:
            return r
    return None


def preferred_leader(
    assignment: Sequence[int], isr: Collection[int], live: Collection[int]
) -> int | None:
    if not assignment:
        return None
    r = assignment[0]
    return r if r in live and r in isr else None


def controlled_shutdown_leader(
    assignment: Sequence[int],
    isr: Collection[int],
    live_or_shutting_down: Collection[int],
    shutting_down: Collection[int],
) -> int | None:
    for r in assignment:
        if r in live_or_shutting_down and r in isr and r not in shutting_down:
            return r
    return None


# ---- the partition record and the cluster view -----------------------------------------------


@dataclass(frozen=True)
class Partition:
    """One row of the partitions table, in the public shape (state by Kafka name)."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...] = ()
    leader: int = NO_LEADER
    leader_epoch: int = INITIAL_LEADER_EPOCH
    zk_version: int = INITIAL_ZK_VERSION
    controller_epoch: int = 0
    state: PartitionState = PartitionState.OnlinePartition
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    offline_dir_replicas: frozenset[int] = frozenset()  # replicas on failed log directories

    @property
    def has_leadership(self) -> bool:
        return self.zk_version != NO_ZK_VERSION


@dataclass(frozen=True)
class View:
    """Live (registered, not shutting down) and shutting-down brokers; the controller epoch."""

    live: frozenset[int]
    shutting_down: frozenset[int] = frozenset()
    controller_epoch: int = 1

    def online(self, p: Partition, r: int) -> bool:
        return r in self.live and r not in p.offline_dir_replicas

    def online_or_shutting_down(self, p: Partition, r: int) -> bool:
        return (r in self.live or r in self.shutting_down) and r not in p.offline_dir_replicas


@dataclass(frozen=True)
class Election:
    """A successful strategy result (§7.2): the new leadership and who gets LeaderAndIsr."""

    leader: int
    isr: tuple[int, ...]
    recipients: tuple[int, ...]
    unclean: bool = False


# ---- §7.2 strategy wrappers ------------------------------------------------------------------


def elect_offline(p: Partition, view: View, unclean_enabled: bool) -> Election | None:
    live = [r for r in p.replicas if view.online(p, r)]
    leader = offline_leader(p.replicas, p.isr, set(live), unclean_enabled)
    if leader is None:
        return None
    if leader in p.isr:
        return Election(leader, tuple(x for x in p.isr if view.online(p, x)), tuple(live))
    return Election(leader, (leader,), tuple(live), unclean=True)


def elect_reassign(p: Partition, view: View) -> Election | None:
    target = [r for r in p.replicas if r not in p.removing_replicas]
    live_target = {r for r in target if view.online(p, r)}
    leader = reassign_leader(target, p.isr, live_target)
    return None if leader is None else Election(leader, p.isr, tuple(target))


def elect_preferred(p: Partition, view: View) -> Election | None:
    live = {r for r in p.replicas if view.online(p, r)}
    leader = preferred_leader(p.replicas, p.isr, live)
    return None if leader is None else Election(leader, p.isr, p.replicas)


def elect_controlled_shutdown(p: Partition, view: View) -> Election | None:
    ls = [r for r in p.replicas if view.online_or_shutting_down(p, r)]
    leader = controlled_shutdown_leader(p.replicas, p.isr, set(ls), view.shutting_down)
    if leader is None:
        return None
    new_isr = tuple(x for x in p.isr if x not in view.shutting_down)
    return Election(leader, new_isr, tuple(ls))


Strategy = Callable[[Partition, View], Election | None]


def offline_strategy(
    allow_unclean: bool = False, unclean_by_topic: Mapping[str, bool] | None = None
) -> Strategy:
    """Kafka's offline strategy: unclean if allowed outright or enabled for the partition's topic."""

    def run(p: Partition, view: View) -> Election | None:
        unclean = allow_unclean or bool((unclean_by_topic or {}).get(p.topic, False))
        return elect_offline(p, view, unclean)

    return run


# ---- §5 partition state machine ---------------------------------------------------------------


@dataclass
class PartitionChanges:
    """What one ``handle_partition_state_changes`` call did, per partition key."""

    partitions: dict[tuple[str, int], Partition]
    invalid: dict[tuple[str, int], PartitionState] = field(default_factory=dict)  # key -> current
    failed: dict[tuple[str, int], str] = field(default_factory=dict)
    elected: dict[tuple[str, int], Election] = field(default_factory=dict)


def _write(p: Partition, e: Election, view: View) -> Partition:
    return replace(
        p,
        leader=e.leader,
        isr=tuple(e.isr),
        leader_epoch=p.leader_epoch + 1,
        zk_version=p.zk_version + 1,
        controller_epoch=view.controller_epoch,
        state=PartitionState.OnlinePartition,
    )


def handle_partition_state_changes(
    partitions: Mapping[tuple[str, int], Partition],
    targets: Iterable[tuple[str, int]],
    target: PartitionState,
    view: View | None = None,
    strategy: Strategy | None = None,
) -> PartitionChanges:
    out = PartitionChanges(dict(partitions))
    for key in targets:
        p = out.partitions[key]
        if p.state not in PARTITION_VALID_PREVIOUS[target]:
            out.invalid[key] = p.state
            continue
        if target != PartitionState.OnlinePartition:
            out.partitions[key] = replace(p, state=target)
            continue
        assert view is not None
        if p.state == PartitionState.NewPartition:
            live = tuple(r for r in p.replicas if view.online(p, r))
            if not live:
                out.failed[key] = "No assigned replica is alive"
                continue
            out.partitions[key] = replace(
                p,
                leader=live[0],
                isr=live,
                leader_epoch=INITIAL_LEADER_EPOCH,
                zk_version=INITIAL_ZK_VERSION,
                controller_epoch=view.controller_epoch,
                state=PartitionState.OnlinePartition,
            )
            out.elected[key] = Election(live[0], live, live)
            continue
        e = strategy(p, view) if strategy is not None else None
        if e is None:
            out.failed[key] = "Failed to elect leader"
            continue
        out.partitions[key] = _write(p, e, view)
        out.elected[key] = e
    return out


# ---- §6 replica state machine (ISR removal on OfflineReplica) --------------------------------


def remove_replica_from_isr(p: Partition, r: int, controller_epoch: int | None = None) -> Partition:
    """§6.3 OfflineReplica for one replica: drop it from the ISR (never the last member), epoch+1,
    written with ``controller_epoch`` when given."""
    if not p.has_leadership or r not in p.isr:
        return p
    new_leader = NO_LEADER if r == p.leader else p.leader
    new_isr = p.isr if len(p.isr) == 1 else tuple(x for x in p.isr if x != r)
    return replace(
        p,
        leader=new_leader,
        isr=new_isr,
        leader_epoch=p.leader_epoch + 1,
        zk_version=p.zk_version + 1,
        controller_epoch=p.controller_epoch if controller_epoch is None else controller_epoch,
    )


def replica_transition_valid(current: ReplicaState, target: ReplicaState) -> bool:
    return current in REPLICA_VALID_PREVIOUS[target]


@dataclass
class ReplicaChanges:
    partitions: dict[tuple[str, int], Partition]
    states: dict[tuple[str, int, int], ReplicaState]
    invalid: dict[tuple[str, int, int], ReplicaState] = field(default_factory=dict)
    failed: set[tuple[str, int, int]] = field(default_factory=set)


def handle_replica_state_changes(
    partitions: Mapping[tuple[str, int], Partition],
    states: Mapping[tuple[str, int, int], ReplicaState],
    targets: Iterable[tuple[str, int, int]],
    target: ReplicaState,
    controller_epoch: int | None = None,
) -> ReplicaChanges:
    """§6.2/§6.3: replicas grouped by broker (ascending), each group applied in turn."""
    out = ReplicaChanges(dict(partitions), dict(states))
    by_broker: dict[int, list[tuple[str, int, int]]] = {}
    for key in targets:
        by_broker.setdefault(key[2], []).append(key)
    for broker in sorted(by_broker):
        for key in by_broker[broker]:
            tp = (key[0], key[1])
            current = out.states.get(key, ReplicaState.NonExistentReplica)
            if not replica_transition_valid(current, target):
                out.invalid[key] = current
                continue
            p = out.partitions[tp]
            if target == ReplicaState.NewReplica and p.has_leadership and p.leader == broker:
                out.failed.add(key)
                continue
            if target == ReplicaState.OfflineReplica:
                out.partitions[tp] = remove_replica_from_isr(p, broker, controller_epoch)
            if target == ReplicaState.NonExistentReplica:
                out.partitions[tp] = replace(
                    p,
                    replicas=tuple(r for r in p.replicas if r != broker),
                    adding_replicas=tuple(r for r in p.adding_replicas if r != broker),
                    removing_replicas=tuple(r for r in p.removing_replicas if r != broker),
                )
                del out.states[key]
                continue
            out.states[key] = target
    return out


# ---- §11 preferred-replica imbalance ----------------------------------------------------------


def imbalance_ratios(partitions: Iterable[Partition]) -> dict[int, float]:
    """Per preferred broker (§11.2): partitions it should lead but another leads, over all it should lead.

    The numerator counts partitions with cached leadership whose leader is not the preferred
    replica (a leaderless partition with a state znode counts); the denominator counts all.
    """
    total: dict[int, int] = {}
    bad: dict[int, int] = {}
    for p in partitions:
        if not p.replicas:
            continue
        preferred = p.replicas[0]
        total[preferred] = total.get(preferred, 0) + 1
        if p.has_leadership and p.leader != preferred:
            bad[preferred] = bad.get(preferred, 0) + 1
    return {b: bad.get(b, 0) / n for b, n in total.items()}
