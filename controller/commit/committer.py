"""The controller's commit point: one place turns a handler's next table into a generation.

``Committer.commit`` swaps the next generation into the context (``ControllerContext.commit``:
one action materialises it with its gauges), mirrors its changed partition states into
ZooKeeper through the partition-state store, totals the broker requests of its diff, appends the
state-change log, runs the post-commit steps it was built with (the topic znodes and the
reassignment request follow the committed assignments) and adds all of it to the event's record.
Handlers read the committed generation through ``table`` and never swap it themselves.

The committer knows no handler: the counter columns to total and the post-commit steps are given
when the controller builds it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from pyspark.sql import Column, DataFrame

from controller.commit.checkpoint import local_checkpoint, release
from controller.commit.diff import generation_diff, with_previous
from controller.commit.gauges import Gauges
from controller.commit.generation_commits import DiffTotals
from controller.commit.requests import RequestCount, request_count
from controller.commit.state_change_error_lines import error_lines
from controller.commit.state_change_log import state_change_lines
from controller.commit.state_change_store import EventStateChangeLog
from controller.commit.state_writer import StateWrites, write_changed_states, write_totals
from controller.context import ControllerContext
from controller.partition_store import PartitionStateStore
from controller.records import ControllerSettings, EventRecord
from controller.scheduler.clock import Clock
from statemachines import schemas as s
from statemachines.columns import in_topics
from statemachines.state_change_errors import ERRORS

# Called after each commit with the committed rows and the event's counters.
AfterCommit = Callable[[DataFrame, dict[str, int]], None]


class Committer:
    """Commits generations for one controller (see the module docstring)."""

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
        self.last_gauges: Gauges | None = None
        # Replaced at the last commit: freed at the next commit or when the event ends.
        self._retired: list[DataFrame | None] = []

    # -- reading the committed generation ------------------------------------------------------
    def table(self, scope: Column | None = None, named: DataFrame | None = None) -> DataFrame:
        """The committed generation, each row with its own values beside it: handlers carry
        them, so the commit can tell what changed without joining two generations
        (``controller.commit.diff``). ``scope``: only the rows an event may touch; ``named``: only
        the rows of these keys (a small frame of ``topic_index``, ``partition``). Commit
        either's result with ``partial``."""
        table = self.ctx.partitions
        assert table is not None, "no generation yet: the controller is not active"
        if named is not None:
            table = self.ctx.store.rows_named(named)
        return with_previous(table if scope is None else table.where(scope), self.ctx.generation)

    def width(self) -> int:
        """The committed generation's width (replica slots)."""
        assert self.ctx.partitions is not None, "no generation yet: the controller is not active"
        return s.width(self.ctx.partitions)

    def unclean_column(self) -> Column:
        """Per-row effective unclean.leader.election.enable: topic config over broker default."""
        default = str(self.settings.unclean_leader_election_enable).lower()
        key = "unclean.leader.election.enable"
        enabled = {n for n, t in self.ctx.topics.items() if t.config.get(key, default) == "true"}
        return in_topics(self.ctx.topic_indices(enabled))

    def reassigning_partitions(self) -> int:
        """Partitions with a reassignment in flight, as of the last commit."""
        return self.last_gauges.reassigning_partitions if self.last_gauges is not None else 0

    # -- the event's lifetime ------------------------------------------------------------------
    def begin(self, record: EventRecord) -> None:
        self.record = record

    def end(self) -> None:
        """The event is over: nothing reads the generations it replaced any more."""
        for retired in self._retired:
            release(retired)
        self._retired = []
        self.record = None

    def count(self, name: str, value: int) -> None:
        """Set one of the event's counters that no table column carries."""
        if self.record is not None:
            self.record.counters[name] = value

    def reset(self) -> None:
        """The controller resigned: its tables are dead, free their blocks now."""
        for dead in (*self._retired, *self.ctx.store.frames()):
            release(dead)
        self._retired = []
        self.last_gauges = None

    # -- the commit ------------------------------------------------------------------------------
    def commit(
        self,
        table: DataFrame,
        label: str,
        extra: tuple[str, ...] = (),
        write_zk: bool = True,
        kept: tuple[str, ...] = (),
        partial: bool = False,
    ) -> Gauges:
        """Commit the next generation, mirror its changed states into ZooKeeper (unless they
        came from there), run the post-commit steps, and add to the event's record.

        ``kept``: per-row columns of ``table`` that stay in ``ctx.committed``; ``partial``:
        ``table`` holds only the rows the event may have touched, the rest are unchanged (see
        ``ControllerContext.commit``)."""
        ctx = self.ctx
        counters = tuple(dict.fromkeys(c for c in (*self.counters, *extra) if c in table.columns))
        previous = ctx.partitions
        topics = ctx.topics_frame()  # before any completed deletion drops names
        live, deleting = ctx.view().live_or_shutting_down.ids, ctx.deleting
        counts: list[RequestCount] = []
        totals_of = event_totals(live, deleting, counts)
        gauges = ctx.commit(table, label, counters, kept, totals_of, partial)
        committed = ctx.committed
        assert committed is not None and ctx.partitions is not None
        written, requests = StateWrites(0, 0), {}
        lines: DataFrame | None = None
        diff: DataFrame | None = None
        if previous is not None:
            # What the event changed: writes, broker requests and the state-change log read that
            # small frame. A stamped commit materialised it and its totals; otherwise the two
            # generations are joined, and the first pass over the diff totals it.
            diff, totals = ctx.diff, ctx.diff_totals
            if diff is None or totals is None:
                # Every row is committed then: the rows carry the event's trail.
                diff = local_checkpoint(generation_diff(previous, committed), False)
                frame, aggregates = totals_of(diff)
                totals = frame.agg(*aggregates).first()
                assert totals is not None
            store = self.store if write_zk else None
            written = write_changed_states(store, topics, diff, ctx.epoch_zk_version, totals)
            requests = counts[-1].totals(totals)
            if self.state_change_log is not None:
                lines = state_change_lines(diff, topics, self.broker_id, ctx.epoch)
        if self.state_change_log is not None:
            if gauges.counters.get(ERRORS):  # transitions Kafka rejected or failed: ERROR lines
                alive = ctx.live_broker_ids.ids
                errors = error_lines(committed, topics, self.broker_id, ctx.epoch, alive)
                lines = errors if lines is None else lines.unionByName(errors)
            if lines is not None:
                self.state_change_log.append(lines, self.clock.now_ms())
        for step in self.after_commit:
            step(committed, gauges.counters)
        # An event may still read the generation it started from after committing (a deletion
        # step collects its facts then), so blocks are freed one commit later, or when the
        # event ends (``end``).
        for retired in self._retired:
            release(retired)
        self._retired = [*ctx.store.replaced, diff]
        self.last_gauges = gauges
        if self.record is not None:
            self.record.add_commit(gauges, written, requests)
        return gauges


def event_totals(
    live_or_shutting_down: Collection[int], deleting: Sequence[int], counts: list[RequestCount]
) -> DiffTotals:
    """What a commit totals over an event's diff: the ZooKeeper write's and the broker
    requests' (``ControllerContext.commit``'s ``diff_totals``). Each request count is appended
    to ``counts``, whose last one reads the totals back."""

    def totals(diff: DataFrame) -> tuple[DataFrame, tuple[Column, ...]]:
        counts.append(request_count(diff, live_or_shutting_down, deleting))
        return counts[-1].frame, (*write_totals(), *counts[-1].aggregates)

    return totals
