"""One row of the compact partitions table as plain values, for the controller's driver path.

An event whose rows are few is applied on the driver by the plain-Python rules of
``row_state_machines`` (no Spark plan to build), and its result committed as the delta. The rules
read and write ``CompactRow``: the compact columns (``schemas.compact_columns``) with the
assignment, ISR and replica states as tuples (no ``EMPTY_SLOT`` padding), plus what an event
carries per row beside them on the Spark path: its ``state_change_trail`` (with the request
batches, ``state_change_trail``) and its ``state_change_errors``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from statemachines import schemas as s
from statemachines.partition_states import PartitionState
from statemachines.replica_states import ReplicaState

# An entry of ``state_change_errors``: (broker or None, current code, target code, failure or
# None), as the Spark path's struct.
ErrorEntry = tuple[int | None, int, int, str | None]


@dataclass(frozen=True)
class CompactRow:
    """A partition row: ``replicas`` in assignment order, ``isr`` in ISR order, ``replica_states``
    one per replica, the adding/removing masks by assignment position, the state znode's fields
    (``zk_version`` -1: no znode), the partition state, and the event's trail and errors."""

    topic_index: int
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    replica_states: tuple[ReplicaState, ...]
    adding_mask: int
    removing_mask: int
    leader: int
    leader_epoch: int
    zk_version: int
    controller_epoch: int
    state: PartitionState
    trail: tuple[int, ...] = ()
    errors: tuple[ErrorEntry, ...] = ()

    @property
    def key(self) -> tuple[int, int]:
        return (self.topic_index, self.partition)

    @property
    def has_leadership(self) -> bool:
        """The partition has a state znode (cached leadership in Kafka's terms)."""
        return self.zk_version != s.NO_ZK_VERSION

    def state_of(self, broker: int) -> ReplicaState:
        return self.replica_states[self.replicas.index(broker)]

    def values(self) -> tuple[Any, ...]:
        """The compact columns' values (what a commit compares), without trail or errors."""
        return (
            self.topic_index,
            self.partition,
            self.replicas,
            self.isr,
            self.replica_states,
            self.adding_mask,
            self.removing_mask,
            self.leader,
            self.leader_epoch,
            self.zk_version,
            self.controller_epoch,
            self.state,
        )

    @classmethod
    def of(cls, row: Mapping[str, Any], w: int) -> CompactRow:
        """From a compact row of width ``w`` (a Spark ``Row``'s ``asDict()``), with its trail
        and errors when it carries them."""
        reps = [row[s.replica_col(k)] for k in range(w)]
        n = sum(1 for r in reps if r != s.EMPTY_SLOT)
        isr = tuple(x for x in (row[s.isr_col(k)] for k in range(w)) if x != s.EMPTY_SLOT)
        errors = row.get("state_change_errors") or ()
        return cls(
            topic_index=row[s.TOPIC_INDEX],
            partition=row[s.PARTITION],
            replicas=tuple(reps[:n]),
            isr=isr,
            replica_states=tuple(ReplicaState(row[s.replica_state_col(k)]) for k in range(n)),
            adding_mask=row[s.ADDING_MASK],
            removing_mask=row[s.REMOVING_MASK],
            leader=row[s.LEADER],
            leader_epoch=row[s.LEADER_EPOCH],
            zk_version=row[s.ZK_VERSION],
            controller_epoch=row[s.CONTROLLER_EPOCH],
            state=PartitionState(row[s.STATE_CODE]),
            trail=tuple(row.get("state_change_trail") or ()),
            errors=tuple(tuple(e) for e in errors),  # type: ignore[misc]
        )

    def compact(self, w: int) -> tuple[Any, ...]:
        """The compact columns' values at width ``w`` (``schemas.compact_columns`` order)."""
        pad = w - len(self.replicas)
        return (
            self.topic_index,
            self.partition,
            *self.replicas,
            *([s.EMPTY_SLOT] * pad),
            *self.isr,
            *([s.EMPTY_SLOT] * (w - len(self.isr))),
            *(int(x) for x in self.replica_states),
            *([int(ReplicaState.NonExistentReplica)] * pad),
            self.adding_mask,
            self.removing_mask,
            self.leader,
            self.leader_epoch,
            self.zk_version,
            self.controller_epoch,
            int(self.state),
        )


def width_of(rows: Sequence[CompactRow]) -> int:
    """The fewest replica positions that hold every row (at least 1)."""
    return max((len(r.replicas) for r in rows), default=1) or 1
