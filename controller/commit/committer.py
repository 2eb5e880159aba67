"""The controller's commit point: an event's steps are staged, and the event commits once.

A handler reads rows through ``table`` and hands its next rows to ``stage``; the next step of
the same event reads them back through ``table`` (``controller.commit.pending``). When the
event's handler returns, the controller calls ``commit_event``: the staged rows become one new
generation, their changed partition states go to ZooKeeper, the broker requests of the event's
diff are totalled and the state-change log gets the event's lines (``spark_path``; an event on
the driver path commits by ``driver_path``). Then the post-commit steps run (the topic znodes and
the reassignment request follow the committed assignments), then the event's replies
(``on_commit``), and all of it goes into the event's record. An event whose handler fails
commits nothing.

Every Spark action of an event runs here: the commit, ``settle`` (a step that reads its rows
twice, or must know facts about them before it goes on, checkpoints what the event staged),
and ``read`` (those facts, collected in one job).

Two cases commit before the event ends, because the next step could not read the staged rows
correctly otherwise: rows reloaded from ZooKeeper (``write_zk=False``) are committed before
any further step, and a step that names its rows (``table(named=...)``) after rows were
staged, or after a step that named its own, reads committed rows.

The committer knows no handler: the counter columns to total and the post-commit steps are
given when the controller builds it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from functools import reduce

from pyspark.sql import Column, DataFrame, Row
from pyspark.sql import functions as F

from controller.commit.broker_counts import BrokerCounts
from controller.commit.checkpoint import release
from controller.commit.diff import with_previous
from controller.commit.driver_path import DriverCommit, DriverPath, Scope
from controller.commit.gauges import Gauges
from controller.commit.pending import RESULTS, PendingRows, fold, unfold
from controller.commit.spark_path import SparkCommit, SparkPath
from controller.commit.state_change_store import EventStateChangeLog
from controller.context import ControllerContext
from controller.partition_store import PartitionStateStore
from controller.records import ControllerSettings, EventRecord
from controller.row_handlers.event_rows import EventRows
from controller.scheduler.clock import Clock
from statemachines import schemas as s
from statemachines.columns import in_partitions, in_topics, runtime_int
from statemachines.compact_rows import CompactRow
from statemachines.layout import widen
from statemachines.local_rows import local_frame
from statemachines.row_state_machines import RowView
from statemachines.state_change_trail import REQUEST_BATCH

# Called after each commit with the event's counters and its rows: the committed frame on the
# Spark path, the event's driver rows (with their per-row counters) on the driver path.
AfterCommit = Callable[[DataFrame | None, dict[str, int], EventRows | None], None]
# An event's reply, sent once its rows are committed: the committed rows (None on the driver
# path) and the gauges.
OnCommit = Callable[[DataFrame | None, Gauges], None]


@dataclass(frozen=True)
class _Read:
    """What the last ``table`` call handed out: the committed rows it covers (a predicate;
    None for every row), whether it named its rows (no predicate for them), and the staged
    rows it did not hand out (which the step's rows join at ``stage``)."""

    covers: Column | None
    named: bool = False
    rest: DataFrame | None = None


# More state-machine calls than one step of an event makes: each step's request batches are
# numbered from its index times this.
_BATCHES_PER_STEP = 64


def _false_if_null(predicate: Column) -> Column:
    return F.coalesce(predicate, F.lit(False))


class Committer:
    """Stages an event's rows and commits them (see the module docstring)."""

    def __init__(
        self,
        ctx: ControllerContext,
        store: PartitionStateStore,
        broker_id: int,
        clock: Clock,
        settings: ControllerSettings,
        counters: Sequence[str],
        state_change_log: EventStateChangeLog | None = None,
    ) -> None:
        self.ctx = ctx
        self.store = store
        self.broker_id = broker_id
        self.clock = clock
        self.settings = settings
        self.counters = tuple(counters)
        self.state_change_log = state_change_log
        self.after_commit: list[AfterCommit] = []
        self.record: EventRecord | None = None  # of the event being processed
        # The driver path: its rows and commits, and the last gauges of either path.
        self.driver = DriverPath(ctx, store, broker_id, settings.driver_rows, state_change_log)
        self.spark_path = SparkPath(ctx, store, broker_id, clock, state_change_log)
        # The event's staged rows and what they need at the commit.
        self._pending: PendingRows | None = None
        self._driver: EventRows | None = None  # the event's rows on the driver path
        self._read: _Read | None = None
        self._write_zk = True
        self._counted: dict[str, None] = {}
        self._kept: dict[str, None] = {}
        self._labels: list[str] = []
        self._topic_names: dict[int, str] = {}
        self._on_commit: list[OnCommit] = []
        # What the event's commits replaced and its checkpoints: freed when the event ends.
        self._retired: list[DataFrame | None] = []

    # -- reading the rows ----------------------------------------------------------------------
    def table(
        self,
        scope: Column | None = None,
        named: DataFrame | None = None,
        settled: bool = False,
        keys: Collection[tuple[int, int]] | None = None,
        named_small: bool = True,
    ) -> DataFrame:
        """The rows a step starts from: the committed generation with what the event staged in
        place of its rows, each row with its committed values beside it (handlers carry them,
        so the commit can tell what changed without joining two generations,
        ``controller.commit.diff``).

        ``scope``: the rows the step may touch (plus, when the event staged rows already,
        those: a step leaves a row it has no business with as it is); ``named``: only the rows
        of these keys (a frame of ``topic_index``, ``partition``; ``named_small``: few enough
        to broadcast). Stage the step's result with ``partial`` when it holds only those rows.
        ``settled``: the step reads the rows more than once, so what the event staged is
        checkpointed first. ``keys``: only the rows of these (topic_index, partition) pairs,
        a small set held on the driver; the next step can then read the staged rows beside
        committed ones (unlike ``named``).
        """
        covers = None
        if keys is not None:
            key_schema = f"{s.TOPIC_INDEX} int, {s.PARTITION} int"
            named, covers = (
                local_frame(self.ctx.spark, sorted(keys), key_schema),
                in_partitions(keys),
            )
        if self._driver is not None:
            self._commit_pending()  # a Spark step reads what the driver path's steps staged
        pending = self._pending
        if pending is not None and (
            not self._write_zk or named is not None or (pending.partial and pending.pulled is None)
        ):
            self._commit_pending()
            pending = None
        if pending is None:
            table = self.ctx.partitions
            assert table is not None, "no generation yet: the controller is not active"
            if named is not None:
                table = self.ctx.store.rows_named(named, named_small)
            if scope is not None:
                table = table.where(scope)
            if covers is not None:
                self._read = _Read(covers if scope is None else covers & _false_if_null(scope))
            else:
                self._read = _Read(None if named is not None else scope, named is not None)
            return with_previous(table, self.ctx.generation).withColumn(REQUEST_BATCH, F.lit(0))
        if settled:
            self.settle()
        rows = fold(pending.rows, tuple(self._counted), tuple(self._kept))
        pending.handed_results = RESULTS in rows.columns
        rest = None
        if pending.settled and scope is not None:
            # A checkpoint is read twice for free: the step gets only its scope's rows.
            rest = rows.where(~_false_if_null(scope))
            rows = rows.where(_false_if_null(scope))
        # The step's request batches come after the earlier steps' (which the staged rows'
        # trails name), on every row it reads.
        batches = {REQUEST_BATCH: runtime_int(_BATCHES_PER_STEP * len(self._labels))}
        if pending.pulled is None:  # every row, or none the next step may add, is staged
            self._read = _Read(None, rest=rest)
            return rows.withColumns(batches)
        covered = _false_if_null(pending.pulled)
        added = self.ctx.partitions
        assert added is not None
        wanted = ~covered if scope is None else _false_if_null(scope) & ~covered
        added = with_previous(added.where(wanted), self.ctx.generation)
        self._read = _Read(None if scope is None else covered | _false_if_null(scope), rest=rest)
        rows = rows.unionByName(widen(added, s.width(rows)), allowMissingColumns=True)
        return rows.withColumns(batches)

    @property
    def last_gauges(self) -> Gauges | None:
        """The gauges of the last commit, of either path."""
        return self.driver.last_gauges

    def held_rows(self) -> dict[tuple[int, int], CompactRow] | None:
        """The committed rows, when the driver holds them (or fetches them: at most
        ``settings.driver_rows``) and the event's next step may take the driver path, for a
        step that must know facts about them to decide."""
        if self._driver is not None and self._driver.scope is None:
            return self._driver.rows  # as the event's earlier driver steps left them
        return None if self._pending is not None else self.driver.held()

    def driver_step(
        self,
        label: str,
        extra: tuple[str, ...] = (),
        write_zk: bool = True,
        scope: Scope | None = None,
    ) -> EventRows | None:
        """The rows the event's next step reads and writes on the driver, or None when it is
        to run in Spark (``table``). While no step of the event staged Spark rows, the driver
        path takes a table of at most ``settings.driver_rows`` rows, or the rows of ``scope``
        on a larger table (``DriverPath.rows``). The step's calls number their request batches
        past the earlier steps' (as ``table`` does); ``extra`` names the step's counters beyond
        the controller's; ``write_zk`` as for ``stage``."""
        if self._driver is not None and not self._write_zk:
            self._commit_pending()  # rows reloaded from ZooKeeper commit before any further step
        step = self._driver
        if step is None:
            step = None if self._pending is not None else self.driver.rows(scope)
            if step is None:
                return None
        elif step.scope is not None and scope is None:
            return None  # a fetched scope serves the steps that say they need no more
        self._driver = step
        if not self._labels:
            self._topic_names = {t.index: t.name for t in self.ctx.topics.values()}
        step.batch = _BATCHES_PER_STEP * len(self._labels)
        self._labels.append(label)
        self._counted.update(dict.fromkeys((*self.counters, *extra)))
        self._write_zk = write_zk
        return step

    def broker_counts(self, brokers: int) -> BrokerCounts | None:
        """Replicas and leaderships per broker (``DriverPath.broker_counts``), for an event
        of ``brokers`` brokers that may take the driver path (None when it cannot:
        ``DriverPath.may_fit``)."""
        return self.driver.broker_counts() if self.driver.may_fit(brokers) else None

    def width(self) -> int:
        """The width (replica slots) of the rows a step reads."""
        if self._pending is not None:
            return s.width(self._pending.rows)
        assert self.ctx.partitions is not None, "no generation yet: the controller is not active"
        return s.width(self.ctx.partitions)

    def unclean_topics(self) -> set[int]:
        """Topics whose effective unclean.leader.election.enable (topic config over broker
        default) is true."""
        default = str(self.settings.unclean_leader_election_enable).lower()
        key = "unclean.leader.election.enable"
        enabled = {n for n, t in self.ctx.topics.items() if t.config.get(key, default) == "true"}
        return set(self.ctx.topic_indices(enabled))

    def unclean_rule(self) -> Callable[[CompactRow], bool]:
        """``unclean_topics`` as the driver path's rules read it: per row."""
        enabled = self.unclean_topics()
        return lambda row: row.topic_index in enabled

    def admin_work_in_flight(self) -> bool:
        """A topic deletion or a reassignment is in flight on a table the driver does not
        hold: their steps (a deletion's per-topic decisions, a reassignment's completion or
        restart) read every row, so the events that may run them stay in Spark."""
        admin = self.ctx.deletion.topics_to_be_deleted or self.reassigning_partitions()
        return bool(admin) and self.held_rows() is None

    def unclean_column(self) -> Column:
        """Per-row effective unclean.leader.election.enable: topic config over broker default."""
        return in_topics(sorted(self.unclean_topics()))

    def row_view(self) -> RowView:
        """The context's view of the brokers, as the driver path's rules read it."""
        return self.driver.view()

    def reassigning_partitions(self) -> int:
        """Partitions with a reassignment in flight, as of the last commit."""
        return self.last_gauges.reassigning_partitions if self.last_gauges is not None else 0

    def settle(self) -> None:
        """Checkpoint what the event staged (one job), for a step that reads it twice."""
        if self._pending is not None:
            self._retired.append(self._pending.settle(tuple(self._counted), tuple(self._kept)))

    def read(self, *frames: DataFrame) -> list[list[Row]]:
        """The rows of small frames the event must know before it goes on, in one job."""
        if not frames:
            return []
        lists = [
            f.agg(F.collect_list(F.struct(*f.columns)).alias(f"_{i}")) for i, f in enumerate(frames)
        ]
        row = reduce(lambda a, b: a.crossJoin(b), lists).first()
        assert row is not None
        return [list(row[f"_{i}"]) for i in range(len(frames))]

    def exists(self, frame: DataFrame) -> bool:
        """Whether ``frame`` has a row (one job that stops at the first)."""
        return bool(frame.limit(1).collect())

    # -- the event's lifetime ------------------------------------------------------------------
    def begin(self, record: EventRecord) -> None:
        self.record = record

    def end(self) -> None:
        """The event is over: what it staged and did not commit (it failed) is dropped, and
        nothing reads the generations it replaced any more."""
        self._drop_pending()
        for retired in self._retired:
            release(retired)
        self._retired = []
        self.record = None

    def count(self, name: str, value: int) -> None:
        """Set one of the event's counters that no table column carries."""
        if self.record is not None:
            self.record.counters[name] = value

    def on_commit(self, reply: OnCommit) -> None:
        """Run ``reply`` once the rows staged so far are committed (an admin reply that
        reads them)."""
        self._on_commit.append(reply)

    def reset(self) -> None:
        """The controller resigned: its tables are dead, free their blocks now."""
        self._drop_pending()
        for dead in (*self._retired, *self.ctx.store.frames()):
            release(dead)
        self._retired = []
        self.driver.reset()

    def _drop_pending(self) -> None:
        self._pending, self._read, self._driver = None, None, None
        self._write_zk = True
        self._counted, self._kept, self._labels = {}, {}, []
        self._topic_names = {}
        self._on_commit = []

    # -- staging and the commit ------------------------------------------------------------------
    def stage(
        self,
        table: DataFrame,
        label: str,
        extra: tuple[str, ...] = (),
        write_zk: bool = True,
        kept: tuple[str, ...] = (),
        partial: bool = False,
    ) -> None:
        """The event's next rows after one of its steps; read back by the next step's
        ``table`` and committed with the event (``commit_event``).

        ``extra``: per-row counter columns beyond the controller's; ``kept``: per-row columns
        of ``table`` that stay in the committed rows (for ``on_commit`` replies);
        ``write_zk``: the states are to be written to ZooKeeper (False: they came from there);
        ``partial``: ``table`` holds only the rows of the step's ``table`` read, the rest are
        unchanged."""
        pending, read = self._pending, self._read
        assert read is not None, "a step stages what it read through table()"
        if pending is not None and pending.handed_results:
            assert RESULTS in table.columns, f"{label}: the step dropped the tracked results"
        self._counted.update(
            dict.fromkeys(c for c in (*self.counters, *extra) if c in table.columns)
        )
        self._kept.update(dict.fromkeys(kept))
        if not self._labels:
            # The names as the first step found them: a later step may complete a deletion,
            # and the commit adds the topics created since.
            self._topic_names = {t.index: t.name for t in self.ctx.topics.values()}
        self._labels.append(label)
        self._write_zk = write_zk
        if read.rest is not None and partial:
            table = read.rest.unionByName(table, allowMissingColumns=True)
        if not partial or (pending is not None and not pending.partial):
            self._pending = PendingRows(table, None, partial=False)
        elif read.named or read.covers is None:
            self._pending = PendingRows(table, None, partial=True)  # the next read commits it
        else:
            self._pending = PendingRows(table, read.covers, partial=True)
        self._read = None

    def commit_event(self) -> Gauges | None:
        """Commit what the event staged (None if nothing), then send its replies."""
        return self._commit_pending()

    def _commit_pending(self) -> Gauges | None:
        pending, replies = self._pending, self._on_commit
        if self._driver is not None:
            return self._commit_driver()
        if pending is None:
            return None
        counted, kept = tuple(self._counted), tuple(self._kept)
        label = "+".join(dict.fromkeys(self._labels))
        names = dict(self._topic_names)
        event = SparkCommit(label, counted, kept, pending.partial, names, self._write_zk)
        self._drop_pending()
        gauges = self._commit(unfold(pending.rows, counted, kept), event)
        for reply in replies:
            assert self.ctx.committed is not None
            reply(self.ctx.committed, gauges)
        return gauges

    def _commit(self, table: DataFrame, event: SparkCommit) -> Gauges:
        """Commit the next generation (``SparkPath.commit``), run the post-commit steps, and
        add to the event's record."""
        ctx = self.ctx
        out = self.spark_path.commit(table, event)
        for step in self.after_commit:
            step(ctx.committed, out.gauges.counters, None)
        # A reply may still read the generation the event started from: blocks are freed
        # when the event ends (``end``).
        self._retired += [*ctx.store.replaced, out.diff]
        ctx.store.replaced = []  # handed over: nothing refers to them once they are freed
        self.driver.spark_committed(out.gauges)
        if self.record is not None:
            self.record.add_commit(out.gauges, out.written, out.requests)
        return out.gauges

    def _commit_driver(self) -> Gauges:
        """Commit the driver path's rows (``DriverPath.commit``), then the post-commit steps
        and the replies (with no committed frame: a driver step's reply reads its own
        results)."""
        step, replies = self._driver, self._on_commit
        assert step is not None
        counters = {c: sum(step.counters[c].values()) for c in self._counted if c in step.counters}
        names = {**self._topic_names, **{t.index: t.name for t in self.ctx.topics.values()}}
        event = DriverCommit(counters, names, self._write_zk, self.clock.now_ms())
        self._drop_pending()
        out = self.driver.commit(step, event)
        for after in self.after_commit:
            after(None, out.gauges.counters, step)
        if self.record is not None:
            self.record.add_commit(out.gauges, out.written, out.requests, "driver")
        for reply in replies:
            reply(None, out.gauges)
        return out.gauges
