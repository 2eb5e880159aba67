"""KIP-455 partition reassignment (spec §10) over ``CompactRow`` values: the twin of
``controller.handlers.reassignment`` and of the plan checks of ``handlers.reassignment_plans``,
step for step, with the same request batches, trail entries and counters.

Phase B's step order is Kafka's (B3 elects before B4 takes the old replicas out of the ISR), and
each state-machine call takes a request batch whether or not a row needs it, as on the Spark
path, whose calls run over every row.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, replace
from itertools import pairwise

from controller.handlers.reassignment import (
    ASSIGNMENT_CHANGED,
    COUNTERS,
    FAILED_ELECTION,
    ISR_SHRINKS,
    LEADER_MOVED,
    REASSIGNMENT_COMPLETED,
    REASSIGNMENT_STARTED,
)
from controller.handlers.reassignment_plans import (
    INVALID_REPLICA_ASSIGNMENT,
    NO_REASSIGNMENT_IN_PROGRESS,
    NONE,
    UNKNOWN_TOPIC_OR_PARTITION,
)
from controller.partition_store.bootstrap import topic_znode_payload
from controller.row_handlers.event_rows import EventRows, Key
from statemachines import state_change_trail as trail
from statemachines.compact_rows import CompactRow
from statemachines.partition_states import Outcome, PartitionState
from statemachines.replica_states import ReplicaState
from statemachines.row_state_machines import (
    REASSIGN,
    RowView,
    handle_partition_state_changes,
    handle_replica_state_changes,
)

Target = tuple[int, ...] | None  # None: cancel

_DELETION_CHAIN = (
    ReplicaState.OfflineReplica,
    ReplicaState.ReplicaDeletionStarted,
    ReplicaState.ReplicaDeletionSuccessful,
    ReplicaState.NonExistentReplica,
)


def being_reassigned(row: CompactRow) -> bool:
    return bool(row.adding_mask or row.removing_mask)


def positions(mask: int, row: CompactRow) -> list[int]:
    """The replicas at the positions set in ``mask``, in assignment order."""
    return [r for k, r in enumerate(row.replicas) if mask >> k & 1]


def origin(row: CompactRow) -> list[int]:
    """ORS: the replicas that are not being added."""
    return [r for k, r in enumerate(row.replicas) if not row.adding_mask >> k & 1]


def target_replicas(row: CompactRow) -> list[int]:
    """TRS: the replicas that are not being removed, in assignment order."""
    return [r for k, r in enumerate(row.replicas) if not row.removing_mask >> k & 1]


def _except(xs: Iterable[int], ys: Collection[int]) -> list[int]:
    """Spark's ``array_except``: distinct elements of ``xs`` not in ``ys``, in order."""
    return [x for x in dict.fromkeys(xs) if x not in ys]


def _trs_in_isr(row: CompactRow) -> bool:
    return all(r in row.isr for r in target_replicas(row))


def topic_znode_json(rows: Sequence[CompactRow]) -> str:
    """A topic's ``/brokers/topics/<t>`` payload from its rows in partition order."""
    return topic_znode_payload(
        (r.partition, r.replicas, positions(r.adding_mask, r), positions(r.removing_mask, r))
        for r in rows
    )


# -- §10.4 -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Checked:
    """A plan entry after ``validate_reassignments``: Kafka's error name (``NONE`` =
    accepted), the replica positions it needs, whether it replaces or cancels a reassignment
    in flight, and whether it may complete at once."""

    key: Key
    target: Target
    error: str
    width_needed: int
    reassigning: bool
    completes: bool


def validate_reassignments(
    rows: dict[Key, CompactRow],
    plan: Sequence[tuple[int, int, Target]],
    live: Collection[int],
    deleting: Collection[int],
    api: bool,
) -> list[Checked]:
    """``reassignment_plans.validate_reassignments`` for a plan held on the driver."""
    out = []
    for topic_index, partition, target in plan:
        row = rows.get((topic_index, partition))
        being = row is not None and being_reassigned(row)
        ors = origin(row) if row is not None else []
        error = None
        if target is None and not being:
            error = NO_REASSIGNMENT_IN_PROGRESS
        if api and target is not None:
            invalid = (
                not target
                or len(set(target)) != len(target)
                or min(target) < 0
                or not set(_except(target, ors)) <= set(live)
            )
            if invalid:
                error = INVALID_REPLICA_ASSIGNMENT
        if error is None:
            unknown = row is None or topic_index in deleting
            error = UNKNOWN_TOPIC_OR_PARTITION if unknown else NONE
        current = row.replicas if row is not None else ()
        needed = len({*(ors if target is None else target), *current})
        isr = row.isr if row is not None else ()
        same = target is not None and set(target) == set(ors)
        completes = target is None or same or set(target) <= set(isr)
        out.append(Checked((topic_index, partition), target, error, needed, being, completes))
    return out


def ongoing_plan(rows: dict[Key, CompactRow]) -> dict[Key, Target]:
    """(key → TRS) of every reassignment in flight: what a new controller resumes."""
    return {k: tuple(target_replicas(r)) for k, r in sorted(rows.items()) if being_reassigned(r)}


# -- §10.3 -------------------------------------------------------------------------------------


def _bump(step: EventRows, keys: Iterable[Key], view: RowView) -> None:
    """``updateLeaderEpochAndSendRequest`` in a request batch of its own."""
    batch = step.next_batch()
    for key in keys:
        row = step.rows[key]
        entry = trail.encode(None, int(row.state), trail.LEADER_EPOCH_BUMP, batch)
        step.rows[key] = replace(
            row,
            leader_epoch=row.leader_epoch + 1,
            zk_version=row.zk_version + 1,
            controller_epoch=view.controller_epoch,
            trail=(*row.trail, entry),
        )


def _stop_and_delete(step: EventRows, picked: dict[Key, set[int]], view: RowView) -> None:
    """→ Offline (ISR removal, one write each) → DeletionStarted → Successful → NonExistent
    for the ``picked`` replicas of each row; they leave the assignment whether or not the
    chain was legal (``handlers.reassignment._stop_and_delete``)."""
    keys = [k for k, brokers in picked.items() if brokers]
    writes = handle_replica_state_changes(
        step.rows,
        keys,
        lambda row, broker: broker in picked[row.key],
        ReplicaState.OfflineReplica,
        step.next_batch(),
        view.controller_epoch,
    )
    step.count(ISR_SHRINKS, writes)
    first = step.batch
    for key in keys:
        row = step.rows[key]
        went = [
            r
            for r, state in zip(row.replicas, row.replica_states, strict=True)
            if r in picked[key] and state == ReplicaState.OfflineReplica
        ]
        chain = [
            trail.encode(r, int(a), int(b), first + n)
            for n, (a, b) in enumerate(pairwise(_DELETION_CHAIN), start=1)
            for r in went
        ]
        kept = [k for k, r in enumerate(row.replicas) if r not in picked[key]]

        def shifted(mask: int, kept: list[int] = kept) -> int:
            return sum(1 << j for j, k in enumerate(kept) if mask >> k & 1)

        step.rows[key] = replace(
            row,
            replicas=tuple(row.replicas[k] for k in kept),
            replica_states=tuple(row.replica_states[k] for k in kept),
            adding_mask=shifted(row.adding_mask),
            removing_mask=shifted(row.removing_mask),
            trail=(*row.trail, *chain),
        )
    step.batch += len(_DELETION_CHAIN) - 1


def _complete(step: EventRows, keys: list[Key], view: RowView) -> None:
    """Phase B (§10.3) for ``keys``; they all have leadership. B6 rewrites their assignment:
    the caller counts it once per row with what phase U changed (a per-row flag on the Spark
    path)."""
    adding = {k: set(positions(step.rows[k].adding_mask, step.rows[k])) for k in keys}
    handle_replica_state_changes(
        step.rows,
        keys,
        lambda row, broker: broker in adding[row.key],
        ReplicaState.OnlineReplica,
        step.next_batch(),
    )  # B1
    kept_leader = {
        k
        for k in keys
        if (r := step.rows[k]).leader in target_replicas(r) and r.leader in view.live
    }
    _bump(step, [k for k in keys if k in kept_leader], view)  # B3, the leader stays
    result = handle_partition_state_changes(
        step.rows,
        [k for k in keys if k not in kept_leader],
        PartitionState.OnlinePartition,
        step.next_batch(),
        view,
        REASSIGN,
    )  # B3, a new leader
    outcome = result.outcome
    step.count(LEADER_MOVED, [k for k, o in outcome.items() if o == Outcome.LEADERSHIP_WRITTEN])
    step.count(FAILED_ELECTION, [k for k, o in outcome.items() if o == Outcome.FAILED])
    removing = {k: set(positions(step.rows[k].removing_mask, step.rows[k])) for k in keys}
    _stop_and_delete(step, removing, view)  # B4, B5
    for key in keys:
        step.rows[key] = replace(step.rows[key], adding_mask=0, removing_mask=0)
    step.count(REASSIGNMENT_COMPLETED, keys)  # B6: the caller counts the assignment change


def _name_counters(step: EventRows) -> None:
    for name in COUNTERS:
        step.count(name)


def start_reassignment(
    step: EventRows,
    plan: dict[Key, Target],
    view: RowView,
    replaces_ongoing: bool = True,
    may_complete: bool = True,
) -> None:
    """``onPartitionReassignment`` for accepted plan entries (phase U, then A or B), as
    ``handlers.reassignment.start_reassignment`` with the same two promises."""
    _name_counters(step)
    applied: list[Key] = []
    assignment_changed: set[Key] = set()
    replaced: dict[Key, set[int]] = {}
    for key, target in plan.items():
        row = step.rows[key]
        if target is None and not being_reassigned(row):
            continue  # NO_REASSIGNMENT_IN_PROGRESS: validation reports it
        ors = origin(row)
        trs = ors if target is None else list(target)
        full = list(dict.fromkeys([*trs, *ors]))
        gone = _except(row.replicas, full)
        adding, removing = _except(full, ors), _except(full, trs)
        ext = [*full, *gone]
        state = dict(zip(row.replicas, row.replica_states, strict=True))
        changed = (
            tuple(full) != row.replicas
            or adding != positions(row.adding_mask, row)
            or removing != positions(row.removing_mask, row)
        )
        step.rows[key] = replace(
            row,
            replicas=tuple(ext),
            replica_states=tuple(state.get(r, ReplicaState.NonExistentReplica) for r in ext),
            adding_mask=sum(1 << j for j, r in enumerate(ext) if r in adding),
            removing_mask=sum(1 << j for j, r in enumerate(ext) if r in removing),
        )  # U1, U2
        if changed:
            assignment_changed.add(key)
        applied.append(key)
        replaced[key] = set(gone)
    if replaces_ongoing:
        _stop_and_delete(step, replaced, view)  # U3
    rows = step.rows
    with_leadership = [k for k in applied if rows[k].has_leadership]
    completes = {
        k for k in with_leadership if not being_reassigned(rows[k]) or _trs_in_isr(rows[k])
    }
    phase_a = [k for k in with_leadership if k not in completes]
    _bump(step, phase_a, view)  # A1
    step.count(REASSIGNMENT_STARTED, phase_a)
    adding_now = {k: set(positions(rows[k].adding_mask, rows[k])) for k in phase_a}
    handle_replica_state_changes(
        rows,
        phase_a,
        lambda row, broker: broker in adding_now[row.key],
        ReplicaState.NewReplica,
        step.next_batch(),
    )  # A2
    if may_complete:
        completed = [k for k in with_leadership if k in completes]
        _complete(step, completed, view)
        assignment_changed.update(completed)
    step.count(ASSIGNMENT_CHANGED, sorted(assignment_changed))


def maybe_complete_reassignment(step: EventRows, view: RowView) -> None:
    """``maybeCompleteReassignment`` for every reassigning row whose TRS is in the ISR."""
    _name_counters(step)
    keys = step.where(lambda r: being_reassigned(r) and r.has_leadership and _trs_in_isr(r))
    _complete(step, keys, view)
    step.count(ASSIGNMENT_CHANGED, keys)
