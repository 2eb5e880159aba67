"""What one event changed: the previous and the new generation side by side, changed rows only.

``generation_diff(previous, new)`` full-outer-joins two compact generations on
(topic_index, partition) and keeps the rows where any model column differs. Every compact column
``c`` appears twice: ``c`` from the new generation and ``prev_c`` from the previous one (both at
the larger width; a row missing on one side has nulls there — created partitions have null
``prev_*``, deleted ones null new columns; ``topic_index``/``partition`` are never null). The
ZooKeeper writes, the controller-to-broker requests and the state-change log of an event are all
read off this one frame, which is small (changed rows) and cached once per commit.
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
