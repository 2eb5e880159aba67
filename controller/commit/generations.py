"""The committed partitions table: a base generation and the rows changed since.

Most events change few of the table's rows (a broker failure at 1e7 partitions changes 300,000 of
10,000,000, a startup almost none), and writing every row into each new generation cost most of
such an event. So a commit whose diff is a filter of its rows (``controller.commit.diff``, "stamped")
writes only the rows the event changed, into the ``delta``: the table is the ``base`` with the
delta's rows in place of their keys' rows (the base is probed against the delta's keys,
broadcast). A commit that cannot tell its rows apart (it dropped rows or changed the width)
writes every row into a new base instead (``install``), and a delta that outgrows its bound is
folded into a new base from the materialised rows (``fold``). A table whose last replica
positions no row uses any more is read without them (``narrow``): no row is rewritten.
"""

from __future__ import annotations

from pyspark.sql import DataFrame

from controller.commit.checkpoint import local_checkpoint
from controller.partition_store.merge import named_rows, superseded
from statemachines import schemas as s

KEY = (s.TOPIC_INDEX, s.PARTITION)
# The delta's keys are broadcast to every read of the table: bounded like the in-memory
# ZooKeeper's delta (``PartitionRegion``), by a quarter of the table and a million rows. A delta
# past the million (one commit that changed more) is read by a shuffle until it folds.
DELTA_MAX_ROWS = 1_000_000
DELTA_MIN_ROWS = 10_000  # a delta this small never forces a new base, however small the table
# The delta's rows per partition at most: one commit may put every row in it (a rack outage at
# 1e8 partitions), and one task materialising tens of millions of rows holds them as one block.
DELTA_PARTITION_ROWS = 1_000_000


class Generations:
    """The base, the delta on top of it (with an upper bound of its rows), and the last
    commit's rows (``committed``: every row, or the touched ones, with the handler's per-row
    results). ``replaced``: the checkpoints the last change stopped reading, to be freed once
    nothing reads the frames derived from them."""

    def __init__(self) -> None:
        self.base: DataFrame | None = None
        self.delta: DataFrame | None = None
        self.delta_rows = 0
        self.committed: DataFrame | None = None
        self.replaced: list[DataFrame] = []
        self._backing: DataFrame | None = None  # the checkpoint ``base`` projects

    @property
    def table(self) -> DataFrame | None:
        """Every row: the base's, with the delta's in place of their keys'; lazy."""
        if self.base is None or self.delta is None:
            return self.base
        return superseded(self.base, self._delta(), KEY, self.delta_rows <= DELTA_MAX_ROWS)

    def rows_named(self, keys: DataFrame, small: bool = True) -> DataFrame:
        """The table's rows whose key is one of ``keys`` (``small``: few enough to broadcast);
        lazy."""
        assert self.base is not None
        return named_rows(self.base, self._delta(), keys, KEY, small)

    def narrow(self, columns: list[str]) -> None:
        """Read the table as ``columns``: a narrower width, whose dropped positions are empty
        in every row."""
        assert self.base is not None
        self.base = self.base.select(*columns)

    def _delta(self) -> DataFrame | None:
        """The delta as the table reads it: at the base's width (see ``narrow``)."""
        if self.delta is None or self.base is None or self.delta.columns == self.base.columns:
            return self.delta
        return self.delta.select(*self.base.columns)

    def fits(self, rows: int) -> bool:
        """Whether the delta is within its bound (for a table of ``rows``)."""
        return self.delta_rows <= min(DELTA_MAX_ROWS, max(rows // 4, DELTA_MIN_ROWS))

    def frames(self) -> list[DataFrame]:
        """The checkpoints behind the table and ``committed`` (to free when they are dead)."""
        held = (self._backing, self.delta, self.committed)
        return list({id(f): f for f in held if f is not None}.values())

    def install(self, committed: DataFrame, columns: list[str]) -> None:
        """Make ``committed`` (every row, checkpointed) the base, read as ``columns``."""
        before = self.frames()
        self.base, self.delta, self.delta_rows = committed.select(*columns), None, 0
        self._backing = self.committed = committed
        self._retire(before)

    def extend(self, committed: DataFrame, changed: DataFrame, count: int) -> None:
        """Put ``changed`` (compact rows of ``committed``, the touched rows of a commit, at
        most ``count``) in place of their keys' rows.

        The new delta is checkpointed lazily: the next pass over the table materialises it, and
        the replaced delta may be freed after that."""
        assert self.base is not None
        before = self.frames()
        delta = self._delta()
        # One commit may change more rows than the bound (a rack of 33 brokers failing at 1e7
        # partitions changes every row): its keys are joined by a shuffle, here and in the
        # fold that follows, where broadcasting ten million keys exhausted the driver.
        small = self.delta_rows + count <= DELTA_MAX_ROWS
        merged = changed if delta is None else superseded(delta, changed, KEY, small)
        # Each merge unions two frames' partitions: coalesced, their number stays the cores'
        # (more for a delta past the cores' share of rows).
        cores = changed.sparkSession.sparkContext.defaultParallelism
        target = max(cores, -(-(self.delta_rows + count) // DELTA_PARTITION_ROWS))
        self.delta = local_checkpoint(merged.coalesce(target), eager=False)
        self.delta_rows += count
        self.committed = committed
        self._retire(before)

    def fold(self, base: DataFrame) -> None:
        """Make ``base`` (the table as it reads now, checkpointed) the base; no delta."""
        before = self.frames()
        self.base, self.delta, self.delta_rows = base, None, 0
        self._backing = base
        self._retire(before)

    def _retire(self, before: list[DataFrame]) -> None:
        held = {id(f) for f in self.frames()}
        self.replaced = [f for f in before if id(f) not in held]
