"""What the driver path's commit makes of an event's rows: the outputs a Spark commit reads off
its diff (``committer``), computed on the driver from the rows before and after the event.

The event's changed rows are those whose compact values differ from the committed ones, as in
``diff.generation_diff``. From them: the partition-state znode writes (a row written d times in
the event is d conditional writes, ``state_writer``), the broker requests
(``statemachines.reference_requests``) and the state-change lines
(``statemachines.reference_state_change_log``), with the ERROR lines of every row's refused
transitions. Tests hold both paths to the same outputs over whole scenarios.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from controller.zk.kazoo_bulk import StateRow
from statemachines import reference_requests as rr
from statemachines import reference_state_change_log as rl
from statemachines.compact_rows import CompactRow
from statemachines.replica_states import ReplicaState
from statemachines.schemas import NO_ZK_VERSION
from statemachines.state_change_trail import encode

Key = tuple[int, int]


@dataclass(frozen=True)
class RowDiff:
    """The rows an event changed: each as it was (None: created) and as it is, and the rows it
    removed (a completed topic deletion), as they were."""

    changed: list[tuple[CompactRow | None, CompactRow]]
    removed: list[CompactRow]

    @classmethod
    def of(cls, before: Mapping[Key, CompactRow], after: Mapping[Key, CompactRow]) -> RowDiff:
        changed = []
        for key, row in sorted(after.items()):
            old = before.get(key)
            if old is None or old.values() != row.values():
                changed.append((old, row))
        removed = [row for key, row in sorted(before.items()) if key not in after]
        return cls(changed, removed)

    @property
    def partitions(self) -> int:
        """The partitions the event changed or removed (the Spark diff's rows)."""
        return len(self.changed) + len(self.removed)

    def state_writes(self, names: Mapping[int, str]) -> list[StateRow]:
        """The partition-state znodes to write: rows whose ``zk_version`` moved."""
        out: list[StateRow] = []
        for old, row in self.changed:
            was = NO_ZK_VERSION if old is None else old.zk_version
            if row.zk_version == was:
                continue
            out.append(
                (
                    names[row.topic_index], row.partition, row.leader, row.leader_epoch,
                    list(row.isr), row.controller_epoch, was, row.zk_version - was,
                )
            )  # fmt: skip
        return out

    def changed_rows(self) -> list[rr.ChangedRow]:
        """The rows as the request and line rules read them."""
        return [
            rr.ChangedRow(
                row.topic_index,
                row.partition,
                tuple(zip(row.replicas, row.replica_states, strict=True)),
                _leadership(row),
                _leadership(old),
                row.trail,
            )
            for old, row in self.changed
        ] + [
            rr.ChangedRow(
                old.topic_index, old.partition, (), _leadership(None), _leadership(old),
                removed_trail(old), removed=True,
            )
            for old in self.removed
        ]  # fmt: skip

    def requests(
        self, live_or_shutting_down: Collection[int], deleting: Collection[int]
    ) -> dict[str, int]:
        return rr.request_totals(self.changed_rows(), live_or_shutting_down, list(deleting))

    def lines(self, names: Mapping[int, str], controller_id: int, epoch: int) -> list[rl.Line]:
        return rl.state_change_lines(self.changed_rows(), names, controller_id, epoch)


def _leadership(row: CompactRow | None) -> rr.Leadership:
    if row is None:
        return rr.Leadership(None, None, None, ())
    return rr.Leadership(row.leader, row.leader_epoch, row.zk_version, row.isr)


def removed_trail(row: CompactRow) -> tuple[int, ...]:
    """completeDeleteTopic's transitions of a partition the event removed, from its committed
    row (``controller.commit.transitions.event_trail``'s): replicas whose StopReplica answer
    came in this event succeed first, then every replica goes. They send no request: their
    batch does not matter."""
    started, done = ReplicaState.ReplicaDeletionStarted, ReplicaState.ReplicaDeletionSuccessful
    gone = int(ReplicaState.NonExistentReplica)
    present = [
        (r, st)
        for r, st in zip(row.replicas, row.replica_states, strict=True)
        if st != ReplicaState.NonExistentReplica
    ]
    succeeded = [encode(r, int(started), int(done), 0) for r, st in present if st == started]
    removed = [encode(r, int(done if st == started else st), gone, 0) for r, st in present]
    return (*succeeded, *removed)


def error_lines(
    rows: Mapping[Key, CompactRow],
    names: Mapping[int, str],
    controller_id: int,
    epoch: int,
    live: Collection[int],
) -> list[rl.Line]:
    """The ERROR lines of the rows' refused or failed transitions."""
    errors = [(r.topic_index, r.partition, r.errors) for _, r in sorted(rows.items()) if r.errors]
    return rl.error_lines(errors, names, controller_id, epoch, live)
