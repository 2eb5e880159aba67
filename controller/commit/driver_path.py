"""The driver path's side of the commit point: which rows an event may take to the driver, and
its commit there.

An event whose rows are few runs on the driver by the plain-Python rules (``row_handlers``):
the whole table when the driver holds it (at most ``settings.driver_rows`` rows), or, on a
larger table, the rows of a ``Scope`` the event names or bounds, fetched in one job when they are
that few and the last gauges can be moved by them. Its commit computes on the driver what a
Spark commit reads off its diff (``row_commit``): the state-znode writes, the broker requests,
the state-change lines, and the gauges (``row_gauges``: over the held table, or the last ones
moved by the fetched rows); the rows replace the held table or join the Spark table's delta.
The ``Committer`` owns the event's bookkeeping (labels, counters, replies, the record) and hands
the driver's rows here to commit.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from pyspark.sql import Column

from controller.commit.broker_counts import BrokerCounts
from controller.commit.gauges import Gauges
from controller.commit.outputs import CommitOutputs
from controller.commit.row_commit import RowDiff, error_lines
from controller.commit.row_gauges import moved_gauges, row_gauges
from controller.commit.state_change_store import EventStateChangeLog
from controller.commit.state_writer import StateWrites
from controller.context import ControllerContext
from controller.partition_store import PartitionStateStore
from controller.row_handlers.event_rows import EventRows
from statemachines import schemas as s
from statemachines.compact_rows import CompactRow
from statemachines.local_rows import local_frame
from statemachines.row_state_machines import RowView
from statemachines.state_change_errors import ERRORS

log = logging.getLogger(__name__)

Key = tuple[int, int]
# What gauges read besides the rows: the brokers' view, the topics queued for deletion and
# those whose deletion started.
GaugeFacts = tuple[RowView, tuple[int, ...], tuple[int, ...]]


@dataclass(frozen=True)
class Scope:
    """The rows a driver step may touch, on a table the driver does not hold: the rows of
    ``keys``, or those ``where`` holds for; ``size`` bounds their number from above (known
    before any job); ``brokers``: those whose state the event changes (the rows hosting them
    are in the scope, so the gauges of the others are not moved by them)."""

    keys: Collection[Key] | None = None
    where: Column | None = None
    size: int = 0
    brokers: frozenset[int] = frozenset()

    @classmethod
    def named(cls, keys: Collection[Key]) -> Scope:
        return cls(keys=keys, size=len(keys))


@dataclass(frozen=True)
class DriverCommit:
    """What the committer hands over with an event's driver rows."""

    counters: Mapping[str, int]
    names: Mapping[int, str]  # every topic the event's steps knew
    write_zk: bool
    now_ms: int


class DriverPath:
    """Rows for the driver path, and their commit (see the module docstring)."""

    def __init__(
        self,
        ctx: ControllerContext,
        store: PartitionStateStore,
        broker_id: int,
        driver_rows: int,
        state_change_log: EventStateChangeLog | None,
    ) -> None:
        self.ctx = ctx
        self.store = store
        self.broker_id = broker_id
        self.limit = driver_rows
        self.state_change_log = state_change_log
        self.last_gauges: Gauges | None = None
        self.gauged_facts: GaugeFacts | None = None  # what ``last_gauges`` read besides rows
        self._broker_counts: BrokerCounts | None = None  # moved by driver commits

    # -- which rows ------------------------------------------------------------------------
    def held(self) -> dict[Key, CompactRow] | None:
        """The whole committed table, when it has at most ``limit`` rows (fetched in one job
        when the driver does not hold it yet)."""
        return self.ctx.table.hold(self.limit) if self.limit > 0 else None

    def rows(self, scope: Scope | None) -> EventRows | None:
        """An event's rows on the driver: the held table, or the fetched rows of ``scope``
        when they may take the driver path; None otherwise."""
        held = self.held()
        if held is not None:
            return EventRows(dict(held))
        if scope is not None and self._fits(scope):
            return self._fetch(scope)
        return None

    def view(self) -> RowView:
        """The context's view of the brokers, as the driver path's rules read it."""
        view = self.ctx.view()
        return RowView(view.live.ids, view.shutting_down.ids, view.controller_epoch)

    def facts(self) -> GaugeFacts:
        started = self.ctx.deletion.topics_with_deletion_started
        return self.view(), tuple(self.ctx.deleting), tuple(sorted(started))

    def may_fit(self, brokers: int) -> bool:
        """Whether the replicas of ``brokers`` brokers may be few enough for the driver path,
        before counting them (a pass over the table after a Spark commit): on average each
        registered broker holds at most rows × width / brokers of them (width: the largest
        replication factor); twice the bound is allowed for uneven clusters."""
        rows, table = self.ctx.rows, self.ctx.partitions
        registered = len(self.ctx.live_brokers) or 1
        if rows is None or table is None or self.limit <= 0:
            return False
        return brokers * rows * s.width(table) <= 2 * self.limit * registered

    def broker_counts(self) -> BrokerCounts:
        """Replicas and leaderships per broker (one job unless the driver knows them)."""
        if self._broker_counts is None:
            held = self.ctx.table.driver
            if held is not None:
                counts = BrokerCounts()
                counts.move((), held.values())
                self._broker_counts = counts
            else:
                assert self.ctx.partitions is not None
                self._broker_counts = BrokerCounts.of_table(self.ctx.partitions)
        return self._broker_counts

    def _fits(self, scope: Scope) -> bool:
        """Whether the rows of ``scope`` can take the driver path on a table the driver does
        not hold: few enough, and the last gauges can be moved by them (the same deletions,
        and brokers that changed only among the scope's)."""
        if not 0 < scope.size <= self.limit:
            return False
        if self.last_gauges is None or self.gauged_facts is None:
            return False
        (was, *deletions), (now, *current) = self.gauged_facts, self.facts()
        moved = (was.live ^ now.live) | (was.shutting_down ^ now.shutting_down)
        return deletions == current and moved <= scope.brokers

    def _fetch(self, scope: Scope) -> EventRows:
        """The committed rows of ``scope``, in one job."""
        table = self.ctx.partitions
        assert table is not None
        w = s.width(table)
        if scope.keys is not None:
            key_schema = f"{s.TOPIC_INDEX} int, {s.PARTITION} int"
            named = local_frame(self.ctx.spark, sorted(scope.keys), key_schema)
            rows = self.ctx.store.rows_named(named)
        else:
            assert scope.where is not None
            rows = table.where(scope.where)
        fetched = {r.key: r for r in (CompactRow.of(x.asDict(), w) for x in rows.collect())}
        return EventRows(dict(fetched), scope=fetched)

    # -- commits -----------------------------------------------------------------------------
    def committed(self, gauges: Gauges) -> None:
        """A commit of either path: its gauges are the last ones; a Spark commit leaves the
        per-broker counts to count again when next asked for."""
        self.last_gauges, self.gauged_facts = gauges, self.facts()

    def spark_committed(self, gauges: Gauges) -> None:
        self.committed(gauges)
        self._broker_counts = None

    def reset(self) -> None:
        self.last_gauges, self.gauged_facts, self._broker_counts = None, None, None

    def commit(self, step: EventRows, event: DriverCommit) -> CommitOutputs:
        """Commit an event's driver rows (see the module docstring)."""
        ctx = self.ctx
        before = ctx.table.driver if step.scope is None else step.scope
        assert before is not None
        view = ctx.view()
        diff = RowDiff.of(before, step.rows)
        writes = diff.state_writes(event.names) if event.write_zk else []
        if writes and self.store.write_state_rows(writes, ctx.epoch_zk_version):
            log.warning("some partition-state writes failed")
        written = StateWrites(diff.partitions, sum(w[-1] for w in writes))
        requests = diff.requests(view.live_or_shutting_down.ids, ctx.deleting)
        counters = dict(event.counters)
        if step.batch > 0:  # a state machine ran: its refused transitions are counted
            counters[ERRORS] = sum(len(r.errors) for r in step.rows.values())
        if self.state_change_log is not None:
            lines = diff.lines(event.names, self.broker_id, ctx.epoch)
            if counters.get(ERRORS):
                alive = ctx.live_broker_ids.ids
                lines += error_lines(step.rows, event.names, self.broker_id, ctx.epoch, alive)
            if lines:
                self.state_change_log.append(lines, event.now_ms)
        deletion = ctx.deletion
        facts = (
            self.view(),
            ctx.deleting,
            deletion.topics_with_deletion_started,
            len(ctx.topics),
            len(deletion.topics_ineligible_for_deletion),
            counters,
        )
        now = [row for _, row in diff.changed]
        was = [old for old, _ in diff.changed if old is not None]
        was += diff.removed  # a completed topic deletion's rows leave the counts
        if self._broker_counts is not None:
            self._broker_counts.move(was, now)
        if step.scope is None:
            ctx.table.commit_rows(step.rows)
            gauges = row_gauges(step.rows.values(), *facts)
        else:
            assert self.last_gauges is not None and self.gauged_facts is not None
            ctx.table.commit_delta(now, created=len(now) - len(was))
            # Every fetched row moves the gauges, changed or not: the brokers the event changed
            # are hosted by them alone. As they were, they count as the last gauges counted
            # them, with the view of then.
            gauges = moved_gauges(
                self.last_gauges, step.rows.values(), step.scope.values(), *facts,
                self.gauged_facts[0],
            )  # fmt: skip
        self.committed(gauges)
        return CommitOutputs(gauges, written, requests)
