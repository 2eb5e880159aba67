"""What one event changed: the previous and the new generation side by side, changed rows only.

``generation_diff(previous, new)`` full-outer-joins two compact generations on
(topic_index, partition) and keeps the rows where any model column differs. Every compact column
``c`` appears twice: ``c`` from the new generation and ``prev_c`` from the previous one (both at
the larger width; a row missing on one side has nulls there — created partitions have null
``prev_*``, deleted ones null new columns; ``topic_index``/``partition`` are never null). The
ZooKeeper writes, the controller-to-broker requests and the state-change log of an event are all
read off this one frame, which is small (changed rows) and cached once per commit.

The join shuffles both generations, so the controller avoids it when it can: ``with_previous``
gives every row of the table a handler starts from its own values (a struct, with the
generation), the handlers carry it, and the commit marks the changed rows, keeping their
previous values, and the created ones (``stamp_changes``). ``stamped_diff`` then reads the diff
off the committed generation alone; only rows that carried values from another generation are
looked up in the previous one, broadcast. A generation that lost rows (deletions), changed
width, or has too many such rows to broadcast needs the join.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from statemachines import schemas as s
from statemachines.layout import widen

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
    current = widen(new, w).select(*s.compact_columns(w))
    if previous is None:
        return current.select(
            *KEY,
            *data,
            *(F.lit(None).cast(current.schema[c].dataType).alias(prev(c)) for c in data),
        )
    old = widen(previous, w).select(*KEY, *(F.col(c).alias(prev(c)) for c in data))
    marked = current.withColumn("_new", F.lit(True))
    joined = marked.join(old.withColumn("_old", F.lit(True)), list(KEY), "full_outer")
    same: Column = F.col("_new").isNotNull() & F.col("_old").isNotNull()
    for c in data:
        same = same & F.col(c).eqNullSafe(F.col(prev(c)))
    return joined.where(~same).select(*diff_columns(w))


PREVIOUS = "_previous"  # a row's values in the generation its handler started from
CHANGE = "_change"  # UNCHANGED, CHANGED, CREATED or STALE, stamped at commit
PREVIOUS_VALUES = "_previous_values"  # a committed CHANGED row's PREVIOUS
UNCHANGED, CHANGED, CREATED, STALE = 0, 1, 2, 3
_GENERATION = "generation"


def _data(w: int) -> list[str]:
    return [c for c in s.compact_columns(w) if c not in KEY]


def _values(w: int, generation: int) -> Column:
    """A row's data columns as one struct, tagged with the generation they belong to."""
    return F.struct(F.lit(generation).alias(_GENERATION), *_data(w))


def with_previous(table: DataFrame, generation: int) -> DataFrame:
    """``table`` (compact, generation ``generation``) with each row's values as ``PREVIOUS``."""
    return table.withColumn(PREVIOUS, _values(s.width(table), generation))


def can_stamp(new: DataFrame) -> bool:
    """Whether ``new`` carries its rows' previous values (``stamp_changes`` applies)."""
    return PREVIOUS in new.columns


def stamp_changes(new: DataFrame, replaced: int) -> list[Column]:
    """``CHANGE`` and ``PREVIOUS_VALUES`` of the rows of a table that ``can_stamp``, which
    replaces generation ``replaced`` at the same width.

    A row compares its values with those it carried; values carried from another generation
    (STALE) tell nothing, so ``stamped_diff`` looks those rows up.
    """
    previous = F.col(PREVIOUS)
    change = (
        F.when(previous.isNull(), CREATED)
        .when(previous[_GENERATION] != replaced, STALE)
        .when(previous.eqNullSafe(_values(s.width(new), replaced)), UNCHANGED)
        .otherwise(CHANGED)
        .cast("byte")
    )
    return [change.alias(CHANGE), F.when(change == CHANGED, previous).alias(PREVIOUS_VALUES)]


def stamped_diff(previous: DataFrame, committed: DataFrame, stale: bool) -> DataFrame:
    """``generation_diff(previous, committed)`` for a generation committed with
    ``stamp_changes`` that dropped no row of ``previous``; lazy.

    Changed rows carry their previous values and created rows have none, so one scan of
    ``committed`` finds both. Only ``stale`` rows (some exist) are looked up in ``previous``,
    broadcast: neither generation is shuffled.
    """
    w = s.width(committed)
    data = _data(w)
    change = F.col(CHANGE)
    values = F.col(PREVIOUS_VALUES)
    diff = committed.where(change.isin(CHANGED, CREATED)).select(
        *KEY, *data, *(values[c].alias(prev(c)) for c in data)
    )
    if not stale:
        return diff
    candidates = committed.where(change == STALE).select(*KEY, *data)
    old = previous.select(*KEY, *(F.col(c).alias(prev(c)) for c in data))
    same: Column = F.lit(True)
    for c in data:
        same = same & F.col(c).eqNullSafe(F.col(prev(c)))
    looked_up = old.join(F.broadcast(candidates), list(KEY)).where(~same)
    return diff.unionByName(looked_up.select(*diff_columns(w)))
