"""Kafka's transitions of one event, read off its generation diff.

The state machines record every transition they apply in the row's ``state_change_trail``
(``statemachines.state_change_trail``), in the order Kafka applies them; the commit passes it
into the diff. ``event_trail`` is that column, plus what no state machine call leaves behind:

* A partition whose topic deletion completed (``completeDeleteTopic``, §9.5) leaves the table,
  and its trail with it. Kafka removes a topic only once every replica is
  ReplicaDeletionSuccessful, and moves each to NonExistentReplica first; a diff row with no new
  side gets these transitions, preceded by ReplicaDeletionStarted → ReplicaDeletionSuccessful
  for a replica that was still ReplicaDeletionStarted before the event (its StopReplica
  response completed the deletion, ``completeReplicaDeletion``).

Rows that did not change are not in the diff, so their transitions (an Online → Online replica
re-announcement at failover, §6.4) are not read. The state-change log
(``controller.commit.state_change_log``) renders the trail as lines and the broker requests
(``controller.commit.requests``) are derived from it.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import NamedTuple

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from controller.commit.diff import diff_columns, prev
from statemachines import schemas as s
from statemachines import state_change_trail as t
from statemachines.columns import in_list
from statemachines.replica_states import ReplicaState

_R = ReplicaState


def check_diff(diff: DataFrame) -> int:
    """The width of a generation diff; raises if a column of ``diff_columns`` is missing (no job)."""
    w = s.width(diff)
    missing = [c for c in diff_columns(w) if c not in diff.columns] if w else ["replica_k"]
    if missing:
        raise s.SchemaMismatchError(f"generation diff: missing columns {missing}")
    return w


def event_trail(diff: DataFrame, w: int) -> Column:
    """The transitions of a diff row in Kafka's order (see the module docstring); null if none."""
    carried = t.existing(t.TRAIL in diff.columns)
    return F.when(F.col(s.STATE_CODE).isNotNull(), carried).otherwise(_removed(w))


@lru_cache(maxsize=8)
def _removed(w: int) -> Column:
    """completeDeleteTopic's transitions of a partition the event removed."""
    started, done = int(_R.ReplicaDeletionStarted), int(_R.ReplicaDeletionSuccessful)
    gone = int(_R.NonExistentReplica)
    reps = [F.col(prev(s.replica_col(j))) for j in range(w)]
    states = [F.col(prev(s.replica_state_col(j))) for j in range(w)]
    present = [
        r.isNotNull() & (r != s.EMPTY_SLOT) & (c != gone) for r, c in zip(reps, states, strict=True)
    ]
    # completeReplicaDeletion first, for replicas whose StopReplica answer came in this event.
    # These transitions send no request: their batch does not matter.
    none = F.lit(0)
    succeeded = [
        F.when(p & (c == started), t.entry(r, F.lit(started), done, none))
        for r, c, p in zip(reps, states, present, strict=True)
    ]
    removed = [
        F.when(p, t.entry(r, F.when(c == started, done).otherwise(c), gone, none))
        for r, c, p in zip(reps, states, present, strict=True)
    ]
    return F.array_compact(F.array(*succeeded, *removed))


def brokers_with(trail: Column, test: Callable[[Column, Column], Column]) -> Column:
    """The brokers of the replica transitions (from, to) of ``trail`` that pass ``test``, as an
    array (empty if none). Build it once per plan: its lambda's variable is named afresh."""

    def hit(e: Column) -> Column:
        return (t.broker_of(e) != t.PARTITION_UNIT) & test(t.from_of(e), t.to_of(e))

    picked = F.filter(F.coalesce(trail, F.array().cast(t.TRAIL_TYPE)), hit)
    return F.transform(picked, lambda e: t.broker_of(e).cast("int"))


def partition_entered(trail: Column, target: int) -> Column:
    """Whether the partition itself made a transition into ``target``."""
    return F.coalesce(
        F.exists(trail, lambda e: (t.broker_of(e) == t.PARTITION_UNIT) & (t.to_of(e) == target)),
        F.lit(False),
    )


# ---- replica slots: every replica of a diff row, matched by broker id -----------------------------


class Slot(NamedTuple):
    """One replica of a diff row, either side (``broker`` and ``current`` are null where the
    slot holds no replica).

    ``current``: the ReplicaState code after the event, NonExistentReplica for a replica that
    left the assignment; ``assigned``: the replica is in the new assignment (a literal: it
    follows from the slot's position).
    """

    broker: Column
    current: Column
    assigned: Column


_SLOT_FIELDS = Slot._fields[:2]  # the columns; ``assigned`` is not one


def _slot_col(i: int, field: str) -> str:
    return f"_slot_{i}_{field}"


def with_replica_slots(diff: DataFrame, w: int) -> DataFrame:
    """``diff`` plus the columns of ``slots_of(w)``: 2·w slots, one per replica of the row.

    Slot k < w is the new assignment's replica k; slot w + j is the previous assignment's
    replica j when it left the assignment (a reassignment moves positions, so replicas are
    matched by broker id). Other slots are null.

    Flat columns, not an array of structs: the requests test each slot many times, in branches
    that common-subexpression elimination does not share, and Spark inlines a field of an
    array's element at every use (an ``ExtractValue`` counts as free), so the generated code
    grew by an array and struct access per test, past the JVM's method limit at width 4. A
    column computed by a ``CASE`` is kept in its own projection and read as a local.
    """
    return diff.withColumns(dict(_replica_slots(w)))


def slots_of(w: int) -> list[Slot]:
    """The slots of ``with_replica_slots(_, w)``, in order."""
    return [
        Slot(*(F.col(_slot_col(i, f)) for f in _SLOT_FIELDS), F.lit(i < w)) for i in range(2 * w)
    ]


@lru_cache(maxsize=8)
def _replica_slots(w: int) -> tuple[tuple[str, Column], ...]:
    """The slot columns of width ``w`` by name, built once."""
    none = F.lit(int(_R.NonExistentReplica))
    new_reps = [F.col(s.replica_col(k)) for k in range(w)]
    old_reps = [F.col(prev(s.replica_col(j))) for j in range(w)]

    def slot(i: int, where: Column, *fields: Column) -> list[tuple[str, Column]]:
        return [
            (_slot_col(i, f), F.when(where, c)) for f, c in zip(_SLOT_FIELDS, fields, strict=True)
        ]

    columns: list[tuple[str, Column]] = []
    for k in range(w):
        present = new_reps[k].isNotNull() & (new_reps[k] != s.EMPTY_SLOT)
        columns += slot(k, present, new_reps[k], F.col(s.replica_state_col(k)).cast("int"))
    for j in range(w):
        gone = (
            old_reps[j].isNotNull()
            & (old_reps[j] != s.EMPTY_SLOT)
            & ~in_list(old_reps[j], new_reps)
        )
        columns += slot(w + j, gone, old_reps[j], none)
    return tuple(columns)
