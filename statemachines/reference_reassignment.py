"""The oracle for KIP-455 partition reassignment (spec §10, 2.4+): plain Python, one partition at a time.

It transliterates ``ReplicaAssignment.reassignTo``, ``validateReplicas``/``maybeBuildReassignment``
(§10.4), ``onPartitionReassignment`` (phases U, A, B of §10.3) and ``maybeCompleteReassignment``,
reusing the state machines of ``statemachines.reference``. Two simplifications match the compact
layout: a replica state is kept only while its replica is in the assignment (Kafka keeps the
entry of a removed replica whose deletion chain was refused), and partitions without a state
znode answer UNKNOWN_SERVER_ERROR where Kafka throws (A1 IllegalStateException, B3 ``.get``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace

from statemachines.partition_states import PartitionState
from statemachines.reference import (
    Partition,
    View,
    elect_reassign,
    handle_partition_state_changes,
    handle_replica_state_changes,
)
from statemachines.replica_states import ReplicaState

Key = tuple[str, int]
ReplicaKey = tuple[str, int, int]

NONE = "NONE"
INVALID_REPLICA_ASSIGNMENT = "INVALID_REPLICA_ASSIGNMENT"
NO_REASSIGNMENT_IN_PROGRESS = "NO_REASSIGNMENT_IN_PROGRESS"
UNKNOWN_TOPIC_OR_PARTITION = "UNKNOWN_TOPIC_OR_PARTITION"
UNKNOWN_SERVER_ERROR = "UNKNOWN_SERVER_ERROR"


# ---- §10.1 data model --------------------------------------------------------------------------


def origin_replicas(p: Partition) -> tuple[int, ...]:
    return tuple(r for r in p.replicas if r not in p.adding_replicas)


def target_replicas(p: Partition) -> tuple[int, ...]:
    return tuple(r for r in p.replicas if r not in p.removing_replicas)


def is_being_reassigned(p: Partition) -> bool:
    return bool(p.adding_replicas or p.removing_replicas)


def reassign_to(
    replicas: Sequence[int],
    adding: Sequence[int],
    removing: Sequence[int],
    target: Sequence[int],
) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """``ReplicaAssignment.reassignTo``: (full, adding, removing), starting from the origin."""
    origin = [r for r in replicas if r not in adding]
    full = tuple(dict.fromkeys([*target, *origin]))
    return (
        full,
        tuple(r for r in full if r not in origin),
        tuple(r for r in full if r not in target),
    )


# ---- §10.4 validation ------------------------------------------------------------------------


def validate_reassignment(
    p: Partition | None,
    target: Sequence[int] | None,
    live: Collection[int],
    deleting: bool = False,
    api: bool = True,
) -> str:
    """The per-partition error code; ``p`` is None for an unknown partition.

    ``live`` excludes shutting-down brokers. ``api=False`` is the ZK path: no replica checks.
    """
    being = p is not None and is_being_reassigned(p)
    if api and target is not None:
        if not target or len(set(target)) != len(target) or min(target) < 0:
            return INVALID_REPLICA_ASSIGNMENT
        current = p or Partition("", 0, ())
        _, adding, _ = reassign_to(
            current.replicas, current.adding_replicas, current.removing_replicas, target
        )
        if not set(adding) <= set(live):
            return INVALID_REPLICA_ASSIGNMENT
    if target is None and not being:
        return NO_REASSIGNMENT_IN_PROGRESS
    if deleting or p is None:
        return UNKNOWN_TOPIC_OR_PARTITION
    return NONE


# ---- §10.3 onPartitionReassignment ---------------------------------------------------------------


@dataclass
class ReassignmentOutcome:
    """The new partitions and replica states, with per-partition facts of what happened."""

    partitions: dict[Key, Partition]
    states: dict[ReplicaKey, ReplicaState]
    errors: dict[Key, str] = field(default_factory=dict)
    assignment_changed: set[Key] = field(default_factory=set)
    started: set[Key] = field(default_factory=set)
    completed: set[Key] = field(default_factory=set)
    leader_moved: set[Key] = field(default_factory=set)
    failed_election: set[Key] = field(default_factory=set)
    isr_shrinks: dict[Key, int] = field(default_factory=dict)


def _replica_step(
    out: ReassignmentOutcome,
    key: Key,
    brokers: Sequence[int],
    target: ReplicaState,
    controller_epoch: int | None = None,
) -> None:
    step = handle_replica_state_changes(
        out.partitions, out.states, [(*key, r) for r in brokers], target, controller_epoch
    )
    out.partitions, out.states = step.partitions, step.states


def _bump_epoch(out: ReassignmentOutcome, key: Key, view: View) -> None:
    """``updateLeaderEpoch``: same leader and ISR, epoch+1, written with my controller epoch."""
    p = out.partitions[key]
    out.partitions[key] = replace(
        p,
        leader_epoch=p.leader_epoch + 1,
        zk_version=p.zk_version + 1,
        controller_epoch=view.controller_epoch,
    )


def _stop_and_delete(
    out: ReassignmentOutcome, key: Key, brokers: Sequence[int], view: View
) -> None:
    """B4/B5 (and U3): → Offline (ISR removal) → DeletionStarted → Successful → NonExistent."""
    if not brokers:
        return
    before = out.partitions[key].leader_epoch
    _replica_step(out, key, brokers, ReplicaState.OfflineReplica, view.controller_epoch)
    writes = out.partitions[key].leader_epoch - before
    out.isr_shrinks[key] = out.isr_shrinks.get(key, 0) + writes
    for target in (
        ReplicaState.ReplicaDeletionStarted,
        ReplicaState.ReplicaDeletionSuccessful,
        ReplicaState.NonExistentReplica,
    ):
        _replica_step(out, key, brokers, target)
    _forget_unassigned(out, key)


def _forget_unassigned(out: ReassignmentOutcome, key: Key) -> None:
    assigned = set(out.partitions[key].replicas)
    for rk in [rk for rk in out.states if rk[:2] == key and rk[2] not in assigned]:
        del out.states[rk]


def _complete(out: ReassignmentOutcome, key: Key, view: View) -> None:
    """Phase B of §10.3 for a partition whose TRS is in the ISR (or that is not reassigning)."""
    p = out.partitions[key]
    _replica_step(out, key, p.adding_replicas, ReplicaState.OnlineReplica)  # B1
    p = out.partitions[key]
    trs, removing = target_replicas(p), p.removing_replicas
    p = replace(p, replicas=trs, adding_replicas=(), removing_replicas=())  # B2
    out.partitions[key] = p
    if p.leader in trs and view.online(p, p.leader):  # B3
        _bump_epoch(out, key, view)
    else:
        step = handle_partition_state_changes(
            out.partitions, [key], PartitionState.OnlinePartition, view, elect_reassign
        )
        out.partitions = step.partitions
        if key in step.elected:
            out.leader_moved.add(key)
        if key in step.failed:
            out.failed_election.add(key)
    _stop_and_delete(out, key, removing, view)  # B4, B5
    out.assignment_changed.add(key)  # B6
    out.completed.add(key)


def _complete_now(p: Partition) -> bool:
    """``isReassignmentComplete``: not reassigning, or TRS ⊆ ISR read from the state znode."""
    if not is_being_reassigned(p):
        return True
    return p.has_leadership and set(target_replicas(p)) <= set(p.isr)


def on_partition_reassignment(
    partitions: Mapping[Key, Partition],
    states: Mapping[ReplicaKey, ReplicaState],
    plan: Mapping[Key, Sequence[int] | None],
    view: View,
) -> ReassignmentOutcome:
    """Apply validated plan entries (None = cancel): phase U, then A or B, per partition."""
    out = ReassignmentOutcome(dict(partitions), dict(states))
    for key, target in plan.items():
        p = out.partitions[key]
        if target is None and not is_being_reassigned(p):
            continue  # NO_REASSIGNMENT_IN_PROGRESS: validation reports it
        trs = origin_replicas(p) if target is None else tuple(target)
        full, adding, removing = reassign_to(
            p.replicas, p.adding_replicas, p.removing_replicas, trs
        )
        if (full, adding, removing) != (p.replicas, p.adding_replicas, p.removing_replicas):
            out.assignment_changed.add(key)  # U1, U2
        out.partitions[key] = replace(
            p, replicas=full, adding_replicas=adding, removing_replicas=removing
        )
        _stop_and_delete(out, key, [r for r in p.replicas if r not in full], view)  # U3
        p = out.partitions[key]
        if not p.has_leadership:
            out.errors[key] = UNKNOWN_SERVER_ERROR
            continue
        out.errors[key] = NONE
        if _complete_now(p):
            _complete(out, key, view)
        else:
            _bump_epoch(out, key, view)  # A1
            out.started.add(key)
            _replica_step(out, key, p.adding_replicas, ReplicaState.NewReplica)  # A2
    return out


def maybe_complete_reassignment(
    partitions: Mapping[Key, Partition],
    states: Mapping[ReplicaKey, ReplicaState],
    view: View,
) -> ReassignmentOutcome:
    """Phase B for every reassigning partition whose target replicas are all in the ISR."""
    out = ReassignmentOutcome(dict(partitions), dict(states))
    for key, p in partitions.items():
        if is_being_reassigned(p) and _complete_now(p):
            _complete(out, key, view)
    return out
