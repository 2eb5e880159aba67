"""Kafka's partition and replica state machines and its four elections over ``CompactRow`` values.

The driver path's twin of ``partition_states``, ``replica_states`` and ``election``: the same
transitions, failures, trail entries and error entries, one row at a time in plain Python, so an
event over a few rows costs no Spark plan. Like the Spark path, every call is one request batch
(``state_change_trail``): the caller passes the batch number the call stamps on its entries.
``tests/test_row_state_machines.py`` holds both paths to the same rows on random tables.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from statemachines import schemas as s
from statemachines import state_change_trail as trail
from statemachines.compact_rows import CompactRow, ErrorEntry
from statemachines.partition_states import VALID_PREVIOUS_STATES as PARTITION_PREVIOUS
from statemachines.partition_states import Outcome, PartitionState
from statemachines.replica_states import VALID_PREVIOUS_STATES as REPLICA_PREVIOUS
from statemachines.replica_states import ReplicaState
from statemachines.state_change_errors import CONTROLLER, EPOCH, LIVE, PARTITION


@dataclass(frozen=True)
class RowView:
    """The brokers as elections see them (``brokers.ClusterView``): ``live`` excludes those
    shutting down; the controller epoch stamped on what the controller writes."""

    live: frozenset[int]
    shutting_down: frozenset[int] = frozenset()
    controller_epoch: int = 1

    @property
    def live_or_shutting_down(self) -> frozenset[int]:
        return self.live | self.shutting_down


@dataclass(frozen=True)
class Leadership:
    """A successful election's result: leader, ISR, LeaderAndIsr recipients, unclean or not."""

    leader: int
    isr: tuple[int, ...]
    recipients: tuple[int, ...]
    unclean: bool = False


@dataclass(frozen=True)
class Strategy:
    """One of Kafka's ``PartitionLeaderElectionStrategy`` values over a row (``election``)."""

    name: str
    elect: Callable[[CompactRow, RowView, bool], Leadership | None]


def offline_strategy(allow_unclean: bool = False) -> Strategy:
    """``OfflinePartitionLeaderElectionStrategy``: unclean if ``allow_unclean`` or the row's
    topic allows it (the ``unclean`` argument of ``elect``)."""

    def elect(row: CompactRow, view: RowView, unclean: bool) -> Leadership | None:
        online = [r for r in row.replicas if r in view.live]
        leader = next((r for r in online if r in row.isr), None)
        if leader is None and (allow_unclean or unclean) and online:
            return Leadership(online[0], (online[0],), tuple(online), unclean=True)
        if leader is None:
            return None
        isr = tuple(x for x in row.isr if x in view.live)
        return Leadership(leader, isr, tuple(online))

    name = f"OfflinePartitionLeaderElectionStrategy({str(allow_unclean).lower()})"
    return Strategy(name, elect)


def _reassign(row: CompactRow, view: RowView, _unclean: bool) -> Leadership | None:
    target = [r for k, r in enumerate(row.replicas) if not row.removing_mask >> k & 1]
    leader = next((r for r in target if r in view.live and r in row.isr), None)
    return None if leader is None else Leadership(leader, row.isr, tuple(target))


def _preferred(row: CompactRow, view: RowView, _unclean: bool) -> Leadership | None:
    head = row.replicas[0] if row.replicas else None
    if head is None or head not in view.live or head not in row.isr:
        return None
    return Leadership(head, row.isr, row.replicas)


def _controlled_shutdown(row: CompactRow, view: RowView, _unclean: bool) -> Leadership | None:
    reachable = [r for r in row.replicas if r in view.live_or_shutting_down]
    leader = next((r for r in reachable if r in row.isr and r not in view.shutting_down), None)
    if leader is None:
        return None
    isr = tuple(x for x in row.isr if x not in view.shutting_down)
    return Leadership(leader, isr, tuple(reachable))


REASSIGN = Strategy("ReassignPartitionLeaderElectionStrategy", _reassign)
PREFERRED = Strategy("PreferredReplicaPartitionLeaderElectionStrategy", _preferred)
CONTROLLED_SHUTDOWN = Strategy(
    "ControlledShutdownPartitionLeaderElectionStrategy", _controlled_shutdown
)


@dataclass
class PartitionResult:
    """What one ``handle_partition_state_changes`` call did to each row it selected."""

    outcome: dict[tuple[int, int], Outcome] = field(default_factory=dict)
    unclean: set[tuple[int, int]] = field(default_factory=set)


def _with(row: CompactRow, entries: Iterable[int], errors: Iterable[ErrorEntry]) -> CompactRow:
    added, failed = tuple(entries), tuple(errors)
    if not added and not failed:
        return row
    return replace(row, trail=row.trail + added, errors=row.errors + failed)


def handle_partition_state_changes(
    rows: dict[tuple[int, int], CompactRow],
    selected: Iterable[tuple[int, int]],
    target: PartitionState,
    batch: int,
    view: RowView | None = None,
    strategy: Strategy | None = None,
    unclean: Callable[[CompactRow], bool] = lambda _: False,
) -> PartitionResult:
    """Move the ``selected`` rows of ``rows`` (replaced in place) to ``target`` in request
    ``batch`` (``partition_states.handle_state_changes``); ``unclean`` is the row's effective
    ``unclean.leader.election.enable``."""
    out = PartitionResult()
    code = int(target)
    for key in selected:
        row = rows[key]
        current = int(row.state)
        if row.state not in PARTITION_PREVIOUS[target]:
            rows[key] = _with(row, (), [(None, current, code, None)])
            out.outcome[key] = Outcome.INVALID
            continue
        moved = trail.encode(None, current, code, batch)
        if target != PartitionState.OnlinePartition:
            rows[key] = _with(replace(row, state=target), [moved], ())
            out.outcome[key] = Outcome.STATE_CHANGED
            continue
        assert view is not None, "OnlinePartition needs the cluster view"
        if row.state == PartitionState.NewPartition:
            online = tuple(r for r in row.replicas if r in view.live)
            if not online:
                rows[key] = _with(row, (), [(None, current, code, _no_live_replica(row))])
                out.outcome[key] = Outcome.FAILED
                continue
            written = replace(
                row,
                leader=online[0],
                isr=online,
                leader_epoch=s.INITIAL_LEADER_EPOCH,
                zk_version=s.INITIAL_ZK_VERSION,
                controller_epoch=view.controller_epoch,
                state=PartitionState.OnlinePartition,
            )
            rows[key] = _with(written, [moved], ())
            out.outcome[key] = Outcome.LEADERSHIP_WRITTEN
            continue
        chosen = None if strategy is None else strategy.elect(row, view, unclean(row))
        if chosen is None:
            why = (
                "no election strategy was given"
                if strategy is None
                else f"Failed to elect leader for partition {PARTITION} under strategy "
                f"{strategy.name}"
            )
            rows[key] = _with(row, (), [(None, current, code, why)])
            out.outcome[key] = Outcome.FAILED
            continue
        written = replace(
            row,
            leader=chosen.leader,
            isr=chosen.isr,
            leader_epoch=row.leader_epoch + 1,
            zk_version=row.zk_version + 1,
            controller_epoch=view.controller_epoch,
            state=PartitionState.OnlinePartition,
        )
        rows[key] = _with(written, [moved], ())
        out.outcome[key] = Outcome.LEADERSHIP_WRITTEN
        if chosen.unclean:
            out.unclean.add(key)
    return out


def _no_live_replica(row: CompactRow) -> str:
    replicas = ",".join(str(r) for r in row.replicas)
    return (
        f"Controller {CONTROLLER} epoch {EPOCH} encountered error during state change of "
        f"partition {PARTITION} from New to Online, assigned replicas are [{replicas}], live "
        f"brokers are [{LIVE}]. No assigned replica is alive."
    )


def _cannot_become_new(broker: int) -> str:
    return (
        f"Replica {broker} for partition {PARTITION} cannot be moved to NewReplica state as it "
        "is being requested to become leader"
    )


# (row, broker) -> whether the replica is a target of the call.
ReplicaTargets = Callable[[CompactRow, int], bool]


def handle_replica_state_changes(
    rows: dict[tuple[int, int], CompactRow],
    keys: Iterable[tuple[int, int]],
    targets: ReplicaTargets,
    target: ReplicaState,
    batch: int,
    controller_epoch: int | None = None,
) -> dict[tuple[int, int], int]:
    """Move the replicas ``targets`` selects, of the rows ``keys`` names, to ``target`` in
    request ``batch`` (``replica_states.handle_state_changes``); rows are replaced in place.
    Returns the ISR writes per row that had any (OfflineReplica's ISR removals)."""
    writes: dict[tuple[int, int], int] = {}
    code = int(target)
    for key in keys:
        row = rows[key]
        applied: list[int] = []
        entries: list[int] = []
        errors: list[ErrorEntry] = []
        for k, broker in enumerate(row.replicas):
            if not targets(row, broker):
                continue
            current = int(row.replica_states[k])
            if row.replica_states[k] not in REPLICA_PREVIOUS[target]:
                errors.append((broker, current, code, None))
                continue
            if target == ReplicaState.NewReplica and row.has_leadership and row.leader == broker:
                # Kafka logs this failure as a transition to OfflineReplica.
                offline = int(ReplicaState.OfflineReplica)
                errors.append((broker, current, offline, _cannot_become_new(broker)))
                continue
            applied.append(k)
            entries.append(trail.encode(broker, current, code, batch))
        if not applied and not errors:
            continue
        states = tuple(target if k in applied else st for k, st in enumerate(row.replica_states))
        new = replace(row, replica_states=states)
        if target == ReplicaState.OfflineReplica:
            new, n = _remove_from_isr(new, [row.replicas[k] for k in applied], controller_epoch)
            if n:
                writes[key] = n
        elif target == ReplicaState.NonExistentReplica:
            new = _remove_from_assignment(new, set(applied))
        rows[key] = _with(new, entries, errors)
    return writes


def _remove_from_isr(
    row: CompactRow, removed: list[int], controller_epoch: int | None
) -> tuple[CompactRow, int]:
    """Each removed replica in the ISR costs one write; the last ISR member always stays (the
    largest removed id), and a removed leader leaves the partition leaderless."""
    if not row.has_leadership:
        return row, 0
    gone = [x for x in row.isr if x in removed]
    if not gone:
        return row, 0
    stays = tuple(x for x in row.isr if x not in removed)
    isr = stays if stays else (max(gone),)
    return (
        replace(
            row,
            isr=isr,
            leader=s.NO_LEADER if row.leader in removed else row.leader,
            leader_epoch=row.leader_epoch + len(gone),
            zk_version=row.zk_version + len(gone),
            controller_epoch=row.controller_epoch if controller_epoch is None else controller_epoch,
        ),
        len(gone),
    )


def _remove_from_assignment(row: CompactRow, dropped: set[int]) -> CompactRow:
    kept = [k for k in range(len(row.replicas)) if k not in dropped]

    def shifted(mask: int) -> int:
        return sum(1 << j for j, k in enumerate(kept) if mask >> k & 1)

    return replace(
        row,
        replicas=tuple(row.replicas[k] for k in kept),
        replica_states=tuple(row.replica_states[k] for k in kept),
        adding_mask=shifted(row.adding_mask),
        removing_mask=shifted(row.removing_mask),
    )
