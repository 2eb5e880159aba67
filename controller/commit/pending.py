"""An event's next rows before its commit: what its steps staged so far.

Kafka runs an event as a sequence of state-machine calls (a broker's failure, then its
return; a deletion's step, then its completion). Here each step is a transform over the rows
the previous steps left, and the event commits once (``Committer.commit_event``). Between
steps the rows stay lazy: the next step reads the staged rows together with the committed rows
its own scope adds, and the transforms, which leave a row they have no business with as it
is, run over both.

A step's per-row results (its counters and the columns it keeps for the event's replies) would
be dropped by the next step's projections, so they are folded into one struct column,
``RESULTS``, which every handler carries like the trail (``controller.handlers.tracked``), and
unfolded at the commit: counters add up, a kept value is the latest step's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from controller.commit.checkpoint import local_checkpoint

RESULTS = "_results"


def _folded_names(df: DataFrame) -> list[str]:
    if RESULTS not in df.columns:
        return []
    kind = df.schema[RESULTS].dataType
    assert isinstance(kind, StructType)
    return kind.fieldNames()


def _merged(df: DataFrame, counters: Sequence[str], kept: Sequence[str]) -> dict[str, Column]:
    """Each result name's value over the row's own column and what ``RESULTS`` holds."""
    folded = _folded_names(df)
    names = dict.fromkeys([*folded, *(c for c in (*counters, *kept) if c in df.columns)])
    values: dict[str, Column] = {}
    for name in names:
        own = F.col(name) if name in df.columns else None
        prior = F.col(RESULTS).getField(name) if name in folded else None
        if name in kept:
            values[name] = (
                own if prior is None else prior if own is None else F.coalesce(own, prior)
            )
            continue
        zero = F.lit(0).cast("long")
        parts = [F.coalesce(c.cast("long"), zero) for c in (own, prior) if c is not None]
        values[name] = parts[0] if len(parts) == 1 else parts[0] + parts[1]
    return values


def fold(df: DataFrame, counters: Sequence[str], kept: Sequence[str]) -> DataFrame:
    """``df`` with its result columns folded into ``RESULTS`` (for the next step to carry)."""
    values = _merged(df, counters, kept)
    if not values:
        return df
    own = [c for c in values if c in df.columns]
    struct = F.struct(*(v.alias(n) for n, v in values.items())).alias(RESULTS)
    # The struct reads the columns it replaces: built before they are dropped.
    return df.withColumn(RESULTS, struct).drop(*own)


def unfold(df: DataFrame, counters: Sequence[str], kept: Sequence[str]) -> DataFrame:
    """``df`` with every result as a column of its own again (what the commit reads)."""
    if RESULTS not in df.columns:
        return df
    values = _merged(df, counters, kept)
    return df.withColumns(values).drop(RESULTS)


@dataclass
class PendingRows:
    """The rows an event's steps have staged (lazy unless ``settled``).

    ``partial``: they are only the rows the steps read, the others are as committed;
    ``pulled``: which committed rows those are (the union of the steps' scopes), or None when a
    step named its rows (the next step then reads committed rows). ``settled``: the rows are a
    checkpoint, so a step may read them more than once. ``handed_results``: the last rows
    handed to a handler carried ``RESULTS``, so its output must too.
    """

    rows: DataFrame
    pulled: Column | None
    partial: bool
    settled: bool = False
    handed_results: bool = False

    def settle(self, counters: Sequence[str], kept: Sequence[str]) -> DataFrame | None:
        """Checkpoint the rows (one job); returns the checkpoint, for the caller to free."""
        if self.settled:
            return None
        self.rows = local_checkpoint(fold(self.rows, counters, kept), eager=True)
        self.settled = True
        return self.rows
