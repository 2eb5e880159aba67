"""What one event changed: the previous and the new generation side by side, changed rows only.

``generation_diff(previous, new)`` full-outer-joins two compact generations on
(topic_index, partition) and keeps the rows where any model column differs. Every compact column
``c`` appears twice: ``c`` from the new generation and ``prev_c`` from the previous one (both at
the larger width; a row missing on one side has nulls there — created partitions have null
``prev_*``, deleted ones null new columns; ``topic_index``/``partition`` are never null). The
ZooKeeper writes, the controller-to-broker requests and the state-change log of an event are all
read off this one frame, which is small (changed rows) and cached once per commit.

The join shuffles both generations, so the controller avoids it when it can: ``with_previous``
gives every row of the table a handler starts from a fingerprint of its values (a 64-bit hash,
with the generation), the handlers carry it, and the commit marks the rows whose fingerprint
changed and the created ones (``stamp_changes``). ``stamped_diff`` then looks only those rows up
in the previous generation, broadcast: no shuffle. A generation that lost rows (deletions),
changed width, or changed too many rows to broadcast needs the join.
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


PREVIOUS = "_prev_fingerprint"  # a row's fingerprint in the generation its handler started from
CHANGE = "_change"  # UNCHANGED, CHANGED (a candidate) or CREATED, stamped at commit
UNCHANGED, CHANGED, CREATED = 0, 1, 2


def _data(w: int) -> list[str]:
    return [c for c in s.compact_columns(w) if c not in KEY]


def _fingerprint(w: int, generation: int) -> Column:
    """A 64-bit hash of a row's data columns in generation ``generation``.

    The generation goes in as a string: Spark compiles an integer literal into the generated
    code and a string one as a reference, so this keeps each event's code the one already
    compiled (and JIT-warm) for the previous event."""
    return F.xxhash64(F.lit(str(generation)), *_data(w))


def with_previous(table: DataFrame, generation: int) -> DataFrame:
    """``table`` (compact, generation ``generation``) with its rows' fingerprints."""
    return table.withColumn(PREVIOUS, _fingerprint(s.width(table), generation))


def can_stamp(new: DataFrame) -> bool:
    """Whether ``new`` carries fingerprints (``stamp_changes`` applies)."""
    return PREVIOUS in new.columns


def stamp_changes(new: DataFrame, replaced: int) -> Column:
    """``_change`` of the rows of a table that ``can_stamp``, which replaces generation
    ``replaced`` at the same width. A changed fingerprint makes a candidate (a fingerprint
    from another generation does too); ``stamped_diff`` compares the candidates exactly."""
    previous = F.col(PREVIOUS)
    return (
        F.when(previous.isNull(), CREATED)
        .when(_fingerprint(s.width(new), replaced) != previous, CHANGED)
        .otherwise(UNCHANGED)
        .cast("byte")
        .alias(CHANGE)
    )


def stamped_diff(previous: DataFrame, committed: DataFrame) -> DataFrame:
    """``generation_diff(previous, committed)`` for a generation committed with
    ``stamp_changes`` that dropped no row of ``previous``; lazy.

    Only the candidates are looked up in ``previous``, broadcast, so neither generation is
    shuffled; created rows need no lookup.
    """
    w = s.width(committed)
    data = _data(w)
    change = F.col(CHANGE)
    candidates = committed.where(change == CHANGED).select(*KEY, *data)
    old = previous.select(*KEY, *(F.col(c).alias(prev(c)) for c in data))
    same: Column = F.lit(True)
    for c in data:
        same = same & F.col(c).eqNullSafe(F.col(prev(c)))
    changed = old.join(F.broadcast(candidates), list(KEY)).where(~same)
    created = committed.where(change == CREATED).select(
        *KEY, *data, *(F.lit(None).cast(committed.schema[c].dataType).alias(prev(c)) for c in data)
    )
    return changed.select(*diff_columns(w)).unionByName(created.select(*diff_columns(w)))
