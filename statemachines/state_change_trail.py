"""The transitions each partition row went through in an event, in the order Kafka applied them.

A generation only shows where a partition and its replicas ended; Kafka moves through
intermediate states within one event (creation NonExistent → New → Online, deletion Online →
Offline → NonExistent, a removed replica Offline → ReplicaDeletionStarted → … → NonExistent) and
logs and batches requests per transition. So both state machines append every transition they
apply to the array column ``state_change_trail`` of their outcomes (appending to the input's,
when a handler chains several calls), as they append refused ones to ``state_change_errors``.
The controller commits the column with the generation, and the state-change log and the broker
requests of the event are read off it.

Kafka sends the requests of each state-machine call as one batch (``ControllerBrokerRequestBatch``,
spec §15.1), so an entry also names its call: every call moves the row's ``request_batch`` counter
on by one and stamps its entries with it. Every row a step reads passes through every call of the
step, so the counters agree across rows; the committer starts each step of an event past the
batches of the steps before it. The controller's own batches (a leader-epoch bump, §10) do the
same and leave an entry that is no transition (``LEADER_EPOCH_BUMP``).

An entry is one ``long``: ``batch · 2⁴⁰ + (broker + 1) · 256 + from · 16 + to``, where ``broker``
is -1 for the partition's own transition and ``from``/``to`` are state codes (both enums' codes
are below 16). The broker, not the position, names a replica: positions move when a replica
leaves the assignment. The column is null on rows without transitions.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, LongType

TRAIL = "state_change_trail"
TRAIL_TYPE = ArrayType(LongType())
REQUEST_BATCH = "request_batch"  # the row's count of the step's request batches so far
PARTITION_UNIT = -1  # the ``broker`` of a partition's own transition
# The ``to`` of a partition entry that is the controller's leader-epoch bump, not a transition.
LEADER_EPOCH_BUMP = 15
_UNIT = 256
_STATE = 16
_BATCH_SHIFT = 40
_UNITS = (1 << (_BATCH_SHIFT - 8)) - 1  # the mask of the broker part, once shifted down


def encode(broker: int | None, start: int, end: int, batch: int = 0) -> int:
    """The entry of one transition (``broker`` None for the partition's) in request ``batch``."""
    unit = 0 if broker is None else broker + 1
    return (batch << _BATCH_SHIFT) + unit * _UNIT + start * _STATE + end


def decode(entry: int) -> tuple[int | None, int, int]:
    """(broker or None, from, to) of an entry."""
    unit, states = divmod(entry & ((1 << _BATCH_SHIFT) - 1), _UNIT)
    return (None if unit == 0 else unit - 1), states // _STATE, states % _STATE


def batch_number(entry: int) -> int:
    """The request batch of an entry."""
    return entry >> _BATCH_SHIFT


def next_batch(counted: bool = True) -> Column:
    """The batch of the call about to be made: one past the row's ``REQUEST_BATCH`` (its
    caller stores it there before stamping the call's entries); ``counted``: whether the rows
    carry the column (else the call is their first)."""
    return (F.coalesce(F.col(REQUEST_BATCH), F.lit(0)) if counted else F.lit(0)) + 1


def entry(
    broker: Column | None, start: Column, end: int | Column, batch: Column | None = None
) -> Column:
    """The entry of a transition as a Column (``broker`` None for the partition's), in
    ``batch`` (by default the row's current one, ``REQUEST_BATCH``, set by the call)."""
    unit = F.lit(0).cast("long") if broker is None else broker.cast("long") + 1
    number = F.col(REQUEST_BATCH) if batch is None else batch
    return (
        F.shiftleft(number.cast("long"), _BATCH_SHIFT)
        + unit * _UNIT
        + start.cast("long") * _STATE
        + end
    )


def broker_of(e: Column) -> Column:
    """The entry's broker; ``PARTITION_UNIT`` for a partition transition."""
    return F.shiftright(e, 8).bitwiseAND(_UNITS) - 1


def batch_of(e: Column) -> Column:
    """The entry's request batch."""
    return F.shiftright(e, _BATCH_SHIFT).cast("int")


def from_of(e: Column) -> Column:
    return F.shiftright(e, 4).bitwiseAND(_STATE - 1).cast("int")


def to_of(e: Column) -> Column:
    return e.bitwiseAND(_STATE - 1).cast("int")


def existing(carried: bool) -> Column:
    """The trail a row already carries: the column if the table ``carried`` it, else null."""
    return F.col(TRAIL) if carried else F.lit(None).cast(TRAIL_TYPE)


def appended(before: Column, entries: Sequence[tuple[Column, Column]]) -> Column:
    """``before`` plus the entries whose flag holds, in order; unchanged (maybe null) if none.

    One small array per call, concatenated once: the expression grows with the entries, not
    with the trail."""
    any_flag = reduce(lambda a, b: a | b, [flag for flag, _ in entries])
    new = F.array(*[F.when(flag, e) for flag, e in entries]) if len(entries) > 1 else None
    added = F.array(entries[0][1]) if new is None else F.array_compact(new)
    combined = F.concat(F.coalesce(before, F.array().cast(TRAIL_TYPE)), added)
    return F.when(any_flag, combined).otherwise(before).alias(TRAIL)


def leader_epoch_bump(where: Column, state: Column) -> dict[str, Column]:
    """The columns of the controller's own batch for a leader-epoch bump of the rows ``where``
    holds (``updateLeaderEpochAndSendRequest``), whose partition state is ``state``: a new
    batch on every row, and the bump's entry on those. The row must carry a trail."""
    batch = next_batch()
    bump = entry(None, state, LEADER_EPOCH_BUMP, batch)
    return {REQUEST_BATCH: batch, TRAIL: appended(F.col(TRAIL), [(where, bump)])}


def with_trail(df: DataFrame) -> DataFrame:
    """``df`` with an (empty) trail column and a batch count if it has none, so a handler can
    list them."""
    missing = {TRAIL: existing(False), REQUEST_BATCH: F.lit(0)}
    return df.withColumns({c: v for c, v in missing.items() if c not in df.columns})
