"""What one event changed: the previous and the new generation side by side, changed rows only.

``generation_diff(previous, new)`` full-outer-joins two compact generations on
(topic_index, partition) and keeps the rows where any model column differs. Every compact column
``c`` appears twice: ``c`` from the new generation and ``prev_c`` from the previous one (both at
the larger width; a row missing on one side has nulls there — created partitions have null
``prev_*``, deleted ones null new columns; ``topic_index``/``partition`` are never null). The
ZooKeeper writes, the controller-to-broker requests and the state-change log of an event are all
read off this one frame, which is small (changed rows) and cached once per commit. A new
generation that carries its event's ``state_change_trail`` (the transitions each row went
through, ``statemachines.state_change_trail``) passes it on as a column of the diff.

The join shuffles both generations, so the controller avoids it when it can: ``with_previous``
gives every row of the table a handler starts from its own values (a struct, tagged with the
generation), the handlers carry it, and the commit marks the changed and created rows and keeps
the replaced values of the changed ones beside them (``stamp_changes``). ``stamped_diff`` is then
a filter of the committed rows: neither generation is read again. A generation that lost rows
(deletions), changed width, or carried rows from another generation needs the join.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from statemachines import schemas as s
from statemachines.layout import widen
from statemachines.state_change_trail import TRAIL

PREV = "prev_"
KEY = (s.TOPIC_INDEX, s.PARTITION)


def prev(column: str) -> str:
    """The previous generation's name for compact column ``column``."""
    return PREV + column


def diff_columns(w: int) -> list[str]:
    """Column order of a diff at width ``w``."""
    data = [c for c in s.compact_columns(w) if c not in KEY]
    return [*KEY, *data, *(prev(c) for c in data)]


def generation_diff(previous: DataFrame | None, new: DataFrame) -> DataFrame:
    """Changed rows of ``new`` against ``previous`` (``None``: every row is new); lazy."""
    s.check_compact(new)
    w = s.width(new) if previous is None else max(s.width(previous), s.width(new))
    data = [c for c in s.compact_columns(w) if c not in KEY]
    trail = _trail(new)
    current = widen(new, w).select(*s.compact_columns(w), *trail)
    if previous is None:
        return current.select(
            *KEY,
            *data,
            *(F.lit(None).cast(current.schema[c].dataType).alias(prev(c)) for c in data),
            *trail,
        )
    old = widen(previous, w).select(*KEY, *(F.col(c).alias(prev(c)) for c in data))
    marked = current.withColumn("_new", F.lit(True))
    joined = marked.join(old.withColumn("_old", F.lit(True)), list(KEY), "full_outer")
    same: Column = F.col("_new").isNotNull() & F.col("_old").isNotNull()
    for c in data:
        same = same & F.col(c).eqNullSafe(F.col(prev(c)))
    return joined.where(~same).select(*diff_columns(w), *trail)


def _trail(new: DataFrame) -> list[str]:
    """The trail column of a generation that carries its event's (see ``state_change_trail``)."""
    return [TRAIL] if TRAIL in new.columns else []


PREVIOUS = "_previous"  # a row as it was in the generation its handler started from
PREVIOUS_GENERATION = "generation"  # ... tagged with that generation (a field of PREVIOUS)
CHANGE = "_change"  # UNCHANGED, CHANGED or CREATED, stamped at commit
REPLACED = "_replaced"  # a changed row's PREVIOUS, kept in the committed generation
UNCHANGED, CHANGED, CREATED = 0, 1, 2


def _data(w: int) -> list[str]:
    return [c for c in s.compact_columns(w) if c not in KEY]


def _tag(generation: int) -> Column:
    # A string: Spark compiles an integer literal into the generated code and a string one as a
    # reference, so each event's code stays the one already compiled (and JIT-warm).
    return F.lit(str(generation))


def with_previous(table: DataFrame, generation: int) -> DataFrame:
    """``table`` (compact, generation ``generation``) with each row's values as ``PREVIOUS``.

    Handlers carry the column; the commit compares it with the row's new values, so neither
    the stamp nor the diff looks the previous generation up. Until the commit, the struct's
    fields are references to the row's own columns (Spark folds them away)."""
    data = _data(s.width(table))
    fields = [_tag(generation).alias(PREVIOUS_GENERATION), *(F.col(c) for c in data)]
    return table.withColumn(PREVIOUS, F.struct(*fields))


def can_stamp(new: DataFrame) -> bool:
    """Whether ``new`` carries previous rows (``stamp_changes`` applies)."""
    return PREVIOUS in new.columns


def stamp_changes(new: DataFrame, replaced: int) -> list[Column]:
    """``_change`` and ``_replaced`` of the rows of a table that ``can_stamp``, which replaces
    generation ``replaced`` at the same width.

    A row carried from another generation is CHANGED, with a null ``_replaced``: its
    previous values are unknown, and ``stale_rows`` counts it (the diff then needs the join).
    """
    previous = F.col(PREVIOUS)
    current = previous.getField(PREVIOUS_GENERATION) == _tag(replaced)
    same: Column = F.lit(True)
    for c in _data(s.width(new)):
        same = same & F.col(c).eqNullSafe(previous.getField(c))
    change = (
        F.when(previous.isNull(), CREATED)
        .when(current & same, UNCHANGED)
        .otherwise(CHANGED)
        .cast("byte")
    )
    kept = F.when(previous.isNotNull() & current & ~same, previous)
    return [change.alias(CHANGE), kept.alias(REPLACED)]


def stale_rows() -> Column:
    """Rows of a stamped generation whose previous values are unknown (see ``stamp_changes``)."""
    return F.sum(((F.col(CHANGE) == CHANGED) & F.col(REPLACED).isNull()).cast("long"))


def stamped_diff(committed: DataFrame) -> DataFrame:
    """``generation_diff(previous, committed)`` for a generation committed with
    ``stamp_changes`` that dropped no row of ``previous`` and has no ``stale_rows``; lazy.

    One filter of the committed rows: a changed row carries its replaced values."""
    data = _data(s.width(committed))
    replaced = F.col(REPLACED)
    # A CASE, not the bare field: Spark counts a struct's field as free and would inline it into
    # every expression that reads the previous value (the requests read each one many times),
    # each use generating the struct's access again; a CASE is computed once per row.
    return committed.where(F.col(CHANGE) != UNCHANGED).select(
        *KEY,
        *data,
        *(F.when(replaced.isNotNull(), replaced.getField(c)).alias(prev(c)) for c in data),
        *_trail(committed),
    )
