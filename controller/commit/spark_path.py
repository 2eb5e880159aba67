"""The Spark path's side of the commit point: an event's staged rows become the next generation.

One action materialises the generation with its gauges (``ControllerContext.commit``); what the
event changed is then read off the small diff of the two generations: the changed partition
states go to ZooKeeper through the partition-state store, the broker requests of the diff are
totalled, and the state-change log gets the event's lines. The ``Committer`` owns the event's
bookkeeping (labels, counters, replies, the record) and hands the staged rows here to commit,
as it hands the driver path's rows to ``driver_path``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from pyspark.sql import DataFrame

from controller.commit.checkpoint import local_checkpoint
from controller.commit.diff import generation_diff
from controller.commit.generation_commits import DiffTotals
from controller.commit.outputs import CommitOutputs
from controller.commit.requests import RequestCount, request_count
from controller.commit.state_change_error_lines import error_lines
from controller.commit.state_change_log import state_change_lines
from controller.commit.state_change_store import EventStateChangeLog
from controller.commit.state_writer import StateWrites, write_changed_states, write_totals
from controller.context import ControllerContext
from controller.partition_store import PartitionStateStore
from controller.scheduler.clock import Clock
from statemachines import schemas as s
from statemachines.local_rows import local_frame
from statemachines.state_change_errors import ERRORS


@dataclass(frozen=True)
class SparkCommit:
    """What the committer hands over with an event's staged rows.

    ``kept``: per-row columns that stay in ``ctx.committed``; ``partial``: the rows are only
    those the event may have touched, the rest are unchanged (``ControllerContext.commit``);
    ``names``: every topic the event's steps knew (a completed deletion drops its names before
    the commit)."""

    label: str
    counters: tuple[str, ...]
    kept: tuple[str, ...]
    partial: bool
    names: Mapping[int, str]
    write_zk: bool


@dataclass
class SparkPath:
    """Commits staged rows as the next generation (see the module docstring)."""

    ctx: ControllerContext
    store: PartitionStateStore
    broker_id: int
    clock: Clock
    state_change_log: EventStateChangeLog | None

    def commit(self, table: DataFrame, event: SparkCommit) -> CommitOutputs:
        """Commit the next generation and mirror its changed states into ZooKeeper (unless
        they came from there)."""
        ctx = self.ctx
        names = {**event.names, **{t.index: t.name for t in ctx.topics.values()}}
        topics = ctx.topics_frame()
        if len(names) > len(ctx.topics):
            topics = local_frame(ctx.spark, sorted(names.items()), s.TOPICS_SCHEMA)
        live, deleting = ctx.view().live_or_shutting_down.ids, ctx.deleting
        counts: list[RequestCount] = []
        totals_of = event_totals(live, deleting, counts)
        previous = ctx.partitions
        gauges = ctx.commit(
            table, event.label, event.counters, event.kept, totals_of, event.partial
        )
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
                totals = totals_of(diff).first()
                assert totals is not None
            store = self.store if event.write_zk else None
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
        return CommitOutputs(gauges, written, requests, diff)


def event_totals(
    live_or_shutting_down: Collection[int], deleting: Sequence[int], counts: list[RequestCount]
) -> DiffTotals:
    """What a commit totals over an event's diff: the ZooKeeper write's and the broker
    requests' (``ControllerContext.commit``'s ``diff_totals``). Each request count is appended
    to ``counts``, whose last one reads the totals back."""

    def totals(diff: DataFrame) -> DataFrame:
        counts.append(request_count(diff, live_or_shutting_down, deleting))
        return diff.agg(*write_totals()).crossJoin(counts[-1].aggregated())

    return totals
