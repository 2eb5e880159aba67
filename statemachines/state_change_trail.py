"""The transitions each partition row went through in an event, in the order Kafka applied them.

A generation only shows where a partition and its replicas ended; Kafka moves through
intermediate states within one event (creation NonExistent → New → Online, deletion Online →
Offline → NonExistent, a removed replica Offline → ReplicaDeletionStarted → … → NonExistent) and
logs and batches requests per transition. So both state machines append every transition they
apply to the array column ``state_change_trail`` of their outcomes (appending to the input's,
when a handler chains several calls), as they append refused ones to ``state_change_errors``.
The controller commits the column with the generation, and the state-change log and the broker
requests of the event are read off it.

An entry is one ``long``: ``(broker + 1) · 256 + from · 16 + to``, where ``broker`` is -1 for the
partition's own transition (entry below 256) and ``from``/``to`` are state codes (both enums'
codes are below 16). The broker, not the position, names a replica: positions move when a
replica leaves the assignment. The column is null on rows without transitions.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, LongType

TRAIL = "state_change_trail"
TRAIL_TYPE = ArrayType(LongType())
PARTITION_UNIT = -1  # the ``broker`` of a partition's own transition
_UNIT = 256
_STATE = 16


def encode(broker: int | None, start: int, end: int) -> int:
    """The entry of one transition (``broker`` None for the partition's)."""
    unit = 0 if broker is None else broker + 1
    return unit * _UNIT + start * _STATE + end


def decode(entry: int) -> tuple[int | None, int, int]:
    """(broker or None, from, to) of an entry."""
    unit, states = divmod(entry, _UNIT)
    return (None if unit == 0 else unit - 1), states // _STATE, states % _STATE


def entry(broker: Column | None, start: Column, end: int | Column) -> Column:
    """The entry of a transition as a Column (``broker`` None for the partition's)."""
    unit = F.lit(0).cast("long") if broker is None else broker.cast("long") + 1
    return unit * _UNIT + start.cast("long") * _STATE + end


def broker_of(e: Column) -> Column:
    """The entry's broker; ``PARTITION_UNIT`` for a partition transition."""
    return F.shiftright(e, 8) - 1


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


def with_trail(df: DataFrame) -> DataFrame:
    """``df`` with an (empty) trail column if it has none, so a handler can list it."""
    return df if TRAIL in df.columns else df.withColumn(TRAIL, existing(False))
