"""Kafka's transitions implied by one row of a generation diff (its before/after pair).

* A diff only sees where a partition or replica started and ended. Kafka moves through
  intermediate states within one event (creation NonExistent → New → Online, deletion
  Online → Offline → NonExistent, a removed replica Online → Offline → ReplicaDeletionStarted →
  ReplicaDeletionSuccessful → NonExistent). Where the end state cannot be entered from the start
  state directly, the transitions follow the shortest chain of valid ones (Kafka's
  valid-previous tables, §5.1/§6.1), which is exactly the chain of those flows.
* Replicas are matched by broker id between the previous and the new assignment (a
  reassignment reorders positions); a replica absent on one side is NonExistentReplica there.
* A partition that is OnlinePartition before and after logs a line only when its leader changed
  to a broker (an election: preferred, controlled shutdown, reassign, offline). If the previous
  leader's replica went OfflineReplica in the same event, the partition went through
  OfflinePartition first (broker failure, §8.2), so the lines are Online → Offline, then
  Offline → Online. An epoch bump without a new leader (ISR removal, reassignment's
  ``updateLeaderEpoch``) or a pure ISR/zkVersion change logs no partition line, as in Kafka.
* The ISR-removal line is logged for every replica that went OfflineReplica in a partition with
  leadership — also when the replica was not in the ISR (Kafka logs the unchanged value then).

The state-change log (``controller.state_change_log``) renders these transitions as lines and the
broker requests (``controller.requests``) are derived from them.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from enum import IntEnum
from functools import lru_cache
from typing import NamedTuple, TypeVar

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from controller.diff import diff_columns, prev
from statemachines import schemas as s
from statemachines.columns import first_of, in_list
from statemachines.partition_states import VALID_PREVIOUS_STATES as PARTITION_VALID_PREVIOUS
from statemachines.partition_states import PartitionState
from statemachines.replica_states import VALID_PREVIOUS_STATES as REPLICA_VALID_PREVIOUS
from statemachines.replica_states import ReplicaState

_P = PartitionState
_R = ReplicaState
S = TypeVar("S", bound=IntEnum)

# ---- transitions implied by a before/after pair --------------------------------------------------

KEY_BASE = 16  # codes of both state enums are below this


def path_key(previous: int, current: int) -> int:
    return previous * KEY_BASE + current


def shortest_paths(
    states: type[S], table: Mapping[S, frozenset[S]]
) -> dict[tuple[S, S], tuple[S, ...]]:
    """For every ordered pair of distinct states, the shortest chain of valid transitions.

    Breadth-first over ``table`` (target -> valid previous states), successors in enum order, so
    the chain is deterministic. Pairs with no chain are absent.
    """
    successors = {a: [b for b in states if a in table[b]] for a in states}
    paths: dict[tuple[S, S], tuple[S, ...]] = {}
    for start in states:
        seen = {start: (start,)}
        queue = deque([start])
        while queue:
            here = queue.popleft()
            for nxt in successors[here]:
                if nxt not in seen:
                    seen[nxt] = (*seen[here], nxt)
                    queue.append(nxt)
        paths.update({(start, end): p for end, p in seen.items() if end != start})
    return paths


REPLICA_PATHS = shortest_paths(ReplicaState, REPLICA_VALID_PREVIOUS)
PARTITION_PATHS = shortest_paths(PartitionState, PARTITION_VALID_PREVIOUS)

# Online -> Online is no transition in a diff; these two keys stand for an election.
ELECTION_KEY = path_key(_P.OnlinePartition, _P.OnlinePartition)
ELECTION_VIA_OFFLINE_KEY = KEY_BASE * KEY_BASE
PARTITION_CHAINS: dict[int, tuple[PartitionState, ...]] = {
    path_key(a, b): p for (a, b), p in PARTITION_PATHS.items()
} | {
    ELECTION_KEY: (_P.OnlinePartition, _P.OnlinePartition),
    ELECTION_VIA_OFFLINE_KEY: (_P.OnlinePartition, _P.OfflinePartition, _P.OnlinePartition),
}
REPLICA_CHAINS: dict[int, tuple[ReplicaState, ...]] = {
    path_key(a, b): p for (a, b), p in REPLICA_PATHS.items()
}


def replica_keys_entering(*targets: ReplicaState) -> list[int]:
    """Replica path keys whose chain enters one of ``targets`` (for ``isin`` tests)."""
    return sorted(k for k, p in REPLICA_CHAINS.items() if any(t in p[1:] for t in targets))


# ---- replica slots: every replica of a diff row, matched by broker id -----------------------------


class Slot(NamedTuple):
    """One replica of a diff row, either side (``broker``, ``previous`` and ``current`` are
    null where the slot holds no replica).

    ``previous``/``current``: ReplicaState codes before and after, NonExistentReplica where the
    replica is absent on that side; ``assigned``: the replica is in the new assignment (a
    literal: it follows from the slot's position).
    """

    broker: Column
    previous: Column
    current: Column
    assigned: Column


_SLOT_FIELDS = Slot._fields[:3]  # the columns; ``assigned`` is not one


def _slot_col(i: int, field: str) -> str:
    return f"_slot_{i}_{field}"


def slot_key(slot: Slot) -> Column:
    """The path key (previous, current) of a slot."""
    return slot.previous * KEY_BASE + slot.current


def check_diff(diff: DataFrame) -> int:
    """The width of a generation diff; raises if a column of ``diff_columns`` is missing (no job)."""
    w = s.width(diff)
    missing = [c for c in diff_columns(w) if c not in diff.columns] if w else ["replica_k"]
    if missing:
        raise s.SchemaMismatchError(f"generation diff: missing columns {missing}")
    return w


def with_replica_slots(diff: DataFrame, w: int) -> DataFrame:
    """``diff`` plus the columns of ``slots_of(w)``: 2·w slots, one per replica of the row.

    Slot k < w is the new assignment's replica k; slot w + j is the previous assignment's
    replica j when it left the assignment (a reassignment moves positions, so replicas are
    matched by broker id). Other slots are null.

    Flat columns, not an array of structs: the requests and the log test each slot many times,
    in branches that common-subexpression elimination does not share, and Spark inlines a field
    of an array's element at every use (an ``ExtractValue`` counts as free), so the generated
    code grew by an array and struct access per test, past the JVM's method limit at width 4.
    A column computed by a ``CASE`` is kept in its own projection and read as a local.
    """
    return diff.withColumns(dict(_replica_slots(w)))


def slots_of(w: int) -> list[Slot]:
    """The slots of ``with_replica_slots(_, w)``, in order."""
    return [
        Slot(*(F.col(_slot_col(i, f)) for f in _SLOT_FIELDS), F.lit(i < w)) for i in range(2 * w)
    ]


@lru_cache(maxsize=8)
def _replica_slots(w: int) -> tuple[tuple[str, Column], ...]:
    """The slot columns of width ``w`` by name, built once (a few hundred JVM calls)."""
    none = F.lit(int(_R.NonExistentReplica))
    new_reps = [F.col(s.replica_col(k)) for k in range(w)]
    old_reps = [F.col(prev(s.replica_col(j))) for j in range(w)]

    def slot(i: int, where: Column, *fields: Column) -> list[tuple[str, Column]]:
        return [
            (_slot_col(i, f), F.when(where, c)) for f, c in zip(_SLOT_FIELDS, fields, strict=True)
        ]

    columns: list[tuple[str, Column]] = []
    for k in range(w):
        before = first_of(
            [(old_reps[j] == new_reps[k], F.col(prev(s.replica_state_col(j)))) for j in range(w)]
        )
        present = new_reps[k].isNotNull() & (new_reps[k] != s.EMPTY_SLOT)
        current = F.col(s.replica_state_col(k)).cast("int")
        columns += slot(k, present, new_reps[k], F.coalesce(before, none).cast("int"), current)
    for j in range(w):
        gone = (
            old_reps[j].isNotNull()
            & (old_reps[j] != s.EMPTY_SLOT)
            & ~in_list(old_reps[j], new_reps)
        )
        previous = F.col(prev(s.replica_state_col(j))).cast("int")
        columns += slot(w + j, gone, old_reps[j], previous, none)
    return tuple(columns)


def partition_codes() -> tuple[Column, Column]:
    """(previous, current) PartitionState codes of a diff row; NonExistentPartition if absent."""
    none = F.lit(int(_P.NonExistentPartition))
    return (
        F.coalesce(F.col(prev(s.STATE_CODE)).cast("int"), none),
        F.coalesce(F.col(s.STATE_CODE).cast("int"), none),
    )
