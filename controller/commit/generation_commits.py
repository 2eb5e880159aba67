"""The partitions table's generations, and how one is swapped in (``GenerationTable.commit``).

``ControllerContext`` holds one ``GenerationTable``. An event whose diff is a filter of its
rows (``controller.commit.diff``) checkpoints only the rows it touched, which join the delta over the
last base (``controller.commit.generations``): one action materialises them with the event's totals,
and a second computes the controller gauges (spec §16.1) over the new table and, for the caller,
the diff's totals. Any other event checkpoints every row into a new base in one action that
also computes the gauges (and the diff's totals). The controller frees what a commit replaced.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from pyspark.sql import Column, DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from controller.commit.checkpoint import local_checkpoint, release
from controller.commit.diff import (
    CHANGE,
    KEY,
    UNCHANGED,
    can_stamp,
    stamp_changes,
    stamped_diff,
    with_previous,
)
from controller.commit.gauges import (
    Gauges,
    count_changed,
    count_rows,
    event_columns,
    gauge_columns,
    gauge_moves,
    gauge_names,
    moved,
    width_used,
)
from controller.commit.generations import Generations
from controller.partition_store.merge import superseded
from statemachines import schemas as s
from statemachines.brokers import BrokerView, ClusterView
from statemachines.columns import any_of
from statemachines.compact_rows import CompactRow, width_of
from statemachines.layout import widen
from statemachines.local_rows import local_frame
from statemachines.state_change_errors import ERRORS
from statemachines.state_change_trail import TRAIL

log = logging.getLogger(__name__)


CUT = "_cut"  # see ``GenerationTable._commit_touched``
DELTA = "_delta_rows"

# Given an event's diff: the one-row frame of the totals over it that the committer reads
# (``ControllerContext.commit``).
DiffTotals = Callable[[DataFrame], DataFrame]


@dataclass(frozen=True)
class _Pending:
    """A commit's inputs: the new table, its columns and stamps, and the aggregates to run."""

    table: DataFrame
    columns: list[str]
    stamps: list[Column]
    gauges: tuple[Column, ...]
    events: tuple[Column, ...]
    literals: dict[str, Column]
    diff_totals: DiffTotals | None


@dataclass(frozen=True)
class CommitFacts:
    """What a commit's gauges read besides the rows: the controller's driver-side facts."""

    view: ClusterView
    deleting: tuple[int, ...] = ()  # topics queued for deletion
    started: tuple[int, ...] = ()  # topics whose deletion started
    ineligible: int = 0  # topics ineligible for deletion
    topics: int = 0


class GenerationTable:
    """The committed generation of the partitions table (``table``), with ``commit`` and its
    two write paths."""

    def __init__(self, spark: SparkSession, checkpoint_interval: int = 20) -> None:
        self.spark = spark
        self.checkpoint_interval = checkpoint_interval
        self.store = Generations()
        self._partitions: DataFrame | None = None  # the committed generation (``store.table``)
        # The committed rows on the driver, when it holds them (``hold``): the driver path's
        # commits replace them (``commit_rows``), and the Spark frame follows when read.
        self.driver: dict[tuple[int, int], CompactRow] | None = None
        self._driver_width = 0
        self._frame_behind = False
        # The last gauges, and what they read besides the rows (``commit``'s ``key``).
        self._gauged: tuple[tuple, dict[str, int]] | None = None
        self.generation = 0
        self.rows: int | None = None  # of the committed generation
        self.stamped = False  # the last commit's diff is a filter of it (``stamped_diff``)
        # The last stamped commit's diff, materialised by its job, and its ``diff_totals``.
        self.diff: DataFrame | None = None
        self.diff_totals: Row | None = None

    @property
    def partitions(self) -> DataFrame | None:
        """The committed generation as a Spark frame (built from the driver's rows when the
        driver path committed last)."""
        if self._frame_behind:
            assert self.driver is not None
            w = self._driver_width
            rows = [r.compact(w) for _, r in sorted(self.driver.items())]
            frame = local_frame(self.spark, rows, s.compact_schema(w))
            self.store.install(frame, frame.columns)
            self._partitions = self.store.table
            self._frame_behind = False
        return self._partitions

    @partitions.setter
    def partitions(self, table: DataFrame | None) -> None:
        self._partitions = table
        self._frame_behind = False
        self.driver = None  # a Spark commit: the driver's rows are stale

    def hold(self, limit: int) -> dict[tuple[int, int], CompactRow] | None:
        """The committed rows on the driver if there are at most ``limit`` (fetched in one job
        when the driver does not hold them yet), else None."""
        if self.driver is None and self.rows is not None and self.rows <= limit:
            table = self.partitions
            assert table is not None
            w = s.width(table)
            fetched = (CompactRow.of(r.asDict(), w) for r in table.collect())
            self.driver = {r.key: r for r in fetched}
            self._driver_width = w
        return self.driver if self.rows is not None and self.rows <= limit else None

    def commit_rows(self, rows: dict[tuple[int, int], CompactRow]) -> None:
        """Swap in the driver path's next generation: ``rows`` are every row, as the event
        left them (their trails and errors are dropped here)."""
        self.generation += 1
        self.driver = {k: replace(r, trail=(), errors=()) for k, r in rows.items()}
        self._driver_width = max(self._driver_width, width_of(list(rows.values())))
        self.rows = len(rows)
        self._frame_behind = True
        self.stamped, self.diff, self.diff_totals, self._gauged = False, None, None, None

    def commit_delta(self, changed: list[CompactRow], created: int) -> None:
        """The driver path's commit on a table the driver does not hold: the rows an event
        changed (``created`` of them new) join the delta, with no job (the next read
        materialises it); a delta past its bound, or new rows wider than the table, make a
        new base."""
        table = self.partitions
        assert table is not None and self.rows is not None
        w = max(s.width(table), width_of(changed))
        frame = local_frame(self.spark, [r.compact(w) for r in changed], s.compact_schema(w))
        self.generation += 1
        self.rows += created
        if w > s.width(table):
            whole = superseded(widen(table, w), frame, KEY)
            self.store.install(local_checkpoint(whole, eager=False), s.compact_columns(w))
        else:
            self.store.extend(frame, frame, len(changed))
            if not self.store.fits(self.rows):
                self.store.fold(local_checkpoint(self.store.table, eager=False))
        self.partitions = self.store.table
        self.stamped, self.diff, self.diff_totals, self._gauged = False, None, None, None

    def load_rows(self, rows: dict[tuple[int, int], CompactRow]) -> None:
        """``load`` for a table read on the driver (a small cluster's failover): generation 0
        is held there, and its Spark frame built when something reads it."""
        self.driver = dict(rows)
        self._driver_width = width_of(list(rows.values()))
        self.rows = len(rows)
        self.generation = 0
        self._frame_behind = True
        self.stamped, self.diff, self.diff_totals, self._gauged = False, None, None, None

    @property
    def committed(self) -> DataFrame | None:
        """The last commit's rows with its per-row results (counters, errors, kept columns):
        every row, or those the event touched (``commit``)."""
        return self.store.committed

    def load(self, table: DataFrame) -> None:
        """Install ``table`` (compact: what ZooKeeper holds, read at failover) as generation 0.

        It is read once, into a local checkpoint; the failover's own changes are then committed
        against it like any event's, so its diff needs no join of two generations.
        """
        s.check_compact(table)
        loaded = local_checkpoint(table.select(*s.compact_columns(s.width(table))), eager=False)
        self.rows = loaded.count()  # the one pass over ZooKeeper's rows
        self.generation = 0
        self._gauged = None
        self.store.install(loaded, loaded.columns)
        self.partitions = self.store.table

    def commit(
        self,
        new_partitions: DataFrame,
        facts: CommitFacts,
        label: str = "",
        counters: Sequence[str] = (),
        kept: Sequence[str] = (),
        diff_totals: DiffTotals | None = None,
        partial: bool = False,
    ) -> Gauges:
        """Swap in ``new_partitions`` (compact) as the next generation.

        A pass over the new rows computes the gauges, and the sums of the per-partition
        ``counters`` columns a handler attached (``Gauges.counters``). The counters stay in the
        ``committed`` rows; ``partitions`` projects them away. So do the rows'
        ``state_change_errors``, whose number is counted under that name, the
        ``state_change_trail`` (read with the diff) and the ``kept`` columns (per-row results
        the handler reads back off ``committed``).

        ``diff_totals``: when the generation is ``stamped``, its diff is materialised too and
        its totals computed, into ``diff`` and ``diff_totals`` (else both are None
        and the caller diffs the generations itself).

        A stamped event writes only the rows it touched (``controller.commit.generations``); the
        ``committed`` rows are then those, which include every row with a counter, an error or
        a kept value. Otherwise every row is written, and ``committed`` holds them all.

        ``partial``: ``new_partitions`` holds only the rows the event may have touched (a
        handler's scope, e.g. ``handlers.brokers.broker_failure_scope``), at the same width;
        every other row is as committed.
        """
        s.check_compact(new_partitions)
        w = s.width(new_partitions)
        errors = [ERRORS] if ERRORS in new_partitions.columns else []
        same_width = self.partitions is not None and s.width(self.partitions) == w
        stampable = same_width and can_stamp(new_partitions)
        touched_only = stampable and self.rows is not None and self.store.base is not None
        assert same_width or not partial, "a partial table keeps the width"
        stamps = stamp_changes(new_partitions, self.generation) if stampable else []
        trail = [TRAIL] if TRAIL in new_partitions.columns else []
        columns = [*s.compact_columns(w), *counters, *errors, *trail, *kept]
        self.generation += 1
        if self.checkpoint_interval and self.generation % self.checkpoint_interval == 0:
            # The periodic JVM GC lets Spark's cleaner free dropped checkpoints the controller
            # does not free itself (``release``).
            self.spark.sparkContext._jvm.System.gc()  # type: ignore[union-attr]
        # The view's brokers are data the cached Columns read (``ClusterView.as_columns``).
        cluster = facts.view
        view: BrokerView
        view, literals = cluster.as_columns() or (cluster, {})
        deleting, started = facts.deleting, facts.started
        gauges = gauge_columns(w, view, deleting, started)
        key = (w, cluster, deleting, started)  # what the gauges read besides the rows
        events = event_columns(tuple(counters), bool(errors), bool(stamps))
        pending = _Pending(new_partitions, columns, stamps, gauges, events, literals, diff_totals)
        row = None
        if touched_only:
            # Rows the event changed, or that carry a result of the handler's.
            counted = [F.col(c).cast("long") != 0 for c in counters]
            results = [F.col(c).isNotNull() for c in (*errors, *kept)]
            touched = any_of([F.col(CHANGE) != UNCHANGED, *counted, *results])
            row = self._commit_touched(pending, partial, touched, key)
        if row is None:
            replaced = self.generation - 1
            whole = self._whole(new_partitions, replaced) if partial else new_partitions
            stamps = stamp_changes(whole, replaced) if stampable else []
            row = self._commit_every_row(replace(pending, table=whole, stamps=stamps))
        self._gauged = key, {g: int(row[g] or 0) for g in gauge_names(w)}
        self._maybe_narrow(w)
        result = Gauges.of(
            row,
            (*counters, *errors),
            topics=facts.topics,
            to_delete=len(facts.deleting),
            ineligible=facts.ineligible,
        )
        log.debug("generation %d committed (%s): %s", self.generation, label, result)
        return result

    def _maybe_narrow(self, w: int) -> None:
        """Read the committed table at the narrowest width that holds its rows (a completed or
        cancelled replica move leaves its last positions empty): the handlers' plans grow with
        the width. Its rows and so its gauges are unchanged; only their key's width moves."""
        assert self._gauged is not None
        key, gauged = self._gauged
        needed = width_used(gauged, w)
        if needed >= w:
            return
        self.store.narrow(s.compact_columns(needed))
        self.partitions = self.store.table
        self._gauged = (needed, *key[1:]), {g: gauged[g] for g in gauge_names(needed)}
        log.info("The partitions table narrows from %d to %d replica positions", w, needed)

    def _whole(self, partial: DataFrame, generation: int) -> DataFrame:
        """The committed generation (``generation``) with the rows of ``partial`` (a
        ``partial`` commit's) in place of their keys' rows; lazy."""
        assert self.partitions is not None
        keys = F.broadcast(partial.select(*KEY))
        rest = with_previous(self.partitions, generation).join(keys, list(KEY), "left_anti")
        return rest.unionByName(partial, allowMissingColumns=True)

    def _is_stamped(self, row: Row, rows: int) -> bool:
        """Whether a stamped generation (of ``rows`` rows) has a diff that is the filter of its
        changed rows: every row of the replaced generation is still here (no row dropped),
        and every changed row knows its previous values."""
        created = int(row["_created"] or 0)
        return self.rows is not None and rows == self.rows + created and not row["_stale"]

    def _commit_every_row(self, pending: _Pending) -> Row:
        """Write every row into a new base: one action materialises it and computes the gauges
        and, when stamped, checkpoints the diff and totals it."""
        # A local checkpoint cuts the logical plan at every generation: without it each plan
        # would carry every ancestor's expressions and planning time would grow per event.
        table = local_checkpoint(
            pending.table.select(*pending.columns, *pending.stamps), eager=False
        )
        aggregated = table.withColumns(pending.literals).agg(
            *pending.gauges, *pending.events, count_rows()
        )
        diff = None
        if pending.stamps and pending.diff_totals is not None:
            # The diff is a filter of the new rows: materialised and totalled by the same job
            # (a second action would plan and run a pass of its own). Dropped below when the
            # generation turns out not stamped.
            diff = local_checkpoint(stamped_diff(table), eager=False)
            aggregated = aggregated.crossJoin(pending.diff_totals(diff))
        row = aggregated.first()
        assert row is not None
        self.stamped = bool(pending.stamps) and self._is_stamped(row, int(row["_rows"]))
        self.rows = int(row["_rows"])
        if diff is not None and not self.stamped:
            release(diff)
            diff = None
        self.diff, self.diff_totals = diff, row if diff is not None else None
        self.store.install(table, s.compact_columns(s.width(pending.table)))
        self.partitions = self.store.table
        return row

    def _commit_touched(
        self, pending: _Pending, partial: bool, touched: Column, key: tuple
    ) -> Row | None:
        """Write the rows the event touched into the delta; None (nothing committed) when the
        generation turns out not stamped.

        One action materialises the touched rows, with the event's totals over them and the
        new row count; a second totals the diff and computes the gauges. When what they read
        besides the rows (``key``) is as at the last commit, the gauges are the last ones moved
        by the changed rows; otherwise they are computed over the new table (the base and the
        new delta, both materialised by then)."""
        # A nondeterministic column keeps the filter above the stamps: Spark would otherwise
        # push it through the handler's projections one by one, inlining each layer's
        # expressions into the condition, which then grows exponentially with the layers.
        stamped = pending.table.select(
            *pending.columns, *pending.stamps, F.spark_partition_id().alias(CUT)
        )
        rows = local_checkpoint(stamped.where(touched), eager=False)
        totalled = rows.agg(*pending.events, count_changed())
        if not partial:  # Spark prunes the handler's columns away from the count
            totalled = totalled.crossJoin(pending.table.agg(count_rows()))
        first = totalled.first()
        assert first is not None and self.rows is not None
        # A partial table's other rows are there, unchanged.
        count = self.rows + int(first["_created"] or 0) if partial else int(first["_rows"])
        if not self._is_stamped(first, count):
            release(rows)
            return None
        self.stamped = True
        self.rows = count
        w = s.width(pending.table)
        changed = rows.where(F.col(CHANGE) != UNCHANGED).select(*s.compact_columns(w))
        self.store.extend(rows, changed, int(first["_changed"] or 0))
        folded, last = None, None
        if not self.store.fits(count):
            # Past its bound the delta folds into a new base, which the gauges' action writes.
            folded = local_checkpoint(self.store.table, eager=False)
            aggregated = folded.withColumns(pending.literals).agg(*pending.gauges)
        else:
            assert self.store.delta is not None
            if self._gauged is not None and self._gauged[0] == key:
                last = self._gauged[1]
            table = self.store.table
            assert table is not None
            aggregated = (
                table.withColumns(pending.literals).agg(*pending.gauges)
                if last is None
                else gauge_moves(rows, w, pending.gauges, pending.literals)
            )
            # The new delta is materialised here, while the checkpoints it reads are held.
            count_delta = F.count(F.lit(1)).alias(DELTA)
            aggregated = aggregated.crossJoin(self.store.delta.agg(count_delta))
        self.diff = None
        if pending.diff_totals is not None:
            self.diff = stamped_diff(rows)  # a filter of the materialised touched rows
            aggregated = aggregated.crossJoin(pending.diff_totals(self.diff))
        second = aggregated.first()
        assert second is not None
        values = second.asDict() if last is None else moved(last, second.asDict())
        if folded is not None:
            self.store.fold(folded)
        else:
            self.store.delta_rows = int(values.pop(DELTA))
        self.partitions = self.store.table
        row = Row(**{**first.asDict(), **values})
        self.diff_totals = row if self.diff is not None else None
        return row
