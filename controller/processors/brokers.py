"""Broker events (spec §8): broker changes and controlled shutdown.

A ``BrokerChange`` sorts registered brokers into new, bounced (a newer broker epoch) and dead ones
and runs Kafka's startup / failure sequences as bulk phases over one table; topic deletion then
hears about the dead (failReplicaDeletion) and returning (resumeDeletionForTopics) replicas.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame

from controller.commit.driver_path import Scope
from controller.context import LiveBroker
from controller.events import controller_events as ev
from controller.handlers import brokers as hb
from controller.processors.deletion import DeletionEvents
from controller.processors.parts import ControllerParts
from controller.processors.reassignment import ReassignmentEvents
from controller.row_handlers import brokers as rb
from controller.row_handlers.event_rows import EventRows
from controller.zk.kafka_zk_client import get_all_brokers
from statemachines.brokers import BrokerSet, ClusterView


class BrokerEvents:
    """``process_*`` for BrokerChange and ControlledShutdown, and the failure and startup
    sequences other events reuse (a failed log directory fails its broker's replicas)."""

    def __init__(
        self, parts: ControllerParts, deletion: DeletionEvents, reassignments: ReassignmentEvents
    ) -> None:
        self.ctx, self.zk, self.spark = parts.ctx, parts.zk, parts.spark
        self.committer, self.settings = parts.committer, parts.settings
        self.put, self.is_active, self.broker_id = parts.put, parts.is_active, parts.broker_id
        self.deletion = deletion
        self.reassignments = reassignments

    def broker_watch(self, _: Any) -> None:
        self.put(ev.BrokerChange())

    def process_broker_change(self, _: ev.BrokerChange) -> None:
        if not self.is_active():
            return
        ctx = self.ctx
        registered = get_all_brokers(self.zk, watch=self.broker_watch)
        known = ctx.live_brokers
        new = sorted(set(registered) - set(known))
        dead = sorted(set(known) - set(registered))
        bounced = sorted(
            b for b in set(registered) & set(known) if registered[b].epoch > known[b].epoch
        )
        deleting = ctx.deleting
        # A broker that registers again has its log directories back (§8.6).
        ctx.restore_log_dirs(set(new) | set(bounced))

        def register(brokers: list[int]) -> None:
            for b in brokers:
                ctx.add_live_broker(LiveBroker(b, registered[b].rack, registered[b].epoch))

        scope = self._scope(new, dead, bounced, set(registered))

        def startup(brokers: list[int]) -> None:
            self.run_phase("BrokerChange", brokers, False, deleting, scope)
            self.reassignments.on_brokers_started(BrokerSet.of(brokers), "BrokerChange")

        def failure(brokers: list[int]) -> None:
            self.run_phase("BrokerChange", brokers, True, deleting, scope)
            # onReplicasBecomeOffline: the replicas' deletions failed with them.
            self.deletion.on_replicas_offline(BrokerSet.of(brokers), "BrokerChange")

        # Each phase is a step of the event: the next reads the rows it staged.
        register(new)
        if new:
            startup(new)
        if bounced:
            ctx.remove_live_brokers(bounced)  # onBrokerFailure: a shutdown in progress ends
            failure(bounced)
            register(bounced)
            startup(bounced)
        if dead:
            ctx.remove_live_brokers(dead)
            failure(dead)
        if new or bounced:
            self.deletion.on_brokers_started(BrokerSet.of([*new, *bounced]), "BrokerChange")

    def process_controlled_shutdown(self, event: ev.ControlledShutdown) -> None:
        reply = event.callback or (lambda *a: None)
        if not self.is_active():
            reply("NOT_CONTROLLER")
            return
        broker = self.ctx.live_brokers.get(event.broker_id)
        if broker is None:
            reply("BROKER_NOT_AVAILABLE")
            return
        if event.broker_epoch != -1 and event.broker_epoch < broker.epoch:
            reply("STALE_BROKER_EPOCH")
            return
        self.ctx.mark_shutting_down(event.broker_id)
        deleting = self.ctx.deleting
        c = self.committer
        scope = None
        counts = c.broker_counts(1) if c.held_rows() is None and c.last_gauges else None
        if counts is not None:
            where = hb.controlled_shutdown_scope(event.broker_id, c.width())
            size = counts.replicas[event.broker_id]
            scope = Scope(where=where, size=size, brokers=frozenset({event.broker_id}))
        step = self.driver_step("ControlledShutdown", extra=("remaining",), scope=scope)
        if step is not None:
            view = self.committer.row_view()
            rb.on_controlled_shutdown(step, event.broker_id, view, deleting)
        else:
            scope = hb.controlled_shutdown_scope(event.broker_id, self.committer.width())
            table = hb.on_controlled_shutdown(
                self.committer.table(scope), event.broker_id, self.ctx.view(), deleting
            )
            self.committer.stage(table, "ControlledShutdown", extra=("remaining",), partial=True)
        self.committer.on_commit(
            lambda _, gauges: reply("NONE", gauges.counters.get("remaining", 0))
        )

    def run_phase(
        self,
        label: str,
        brokers: list[int],
        failing: bool,
        deleting: list[int],
        scope: Scope | None = None,
    ) -> None:
        """The brokers' failure (``failing``) or startup as a step of the event: on the driver
        when it may take the driver path, else staged in Spark."""
        step = self.driver_step(label, scope=scope)
        if step is None:
            run = self.on_broker_failure if failing else self.on_broker_startup
            self.committer.stage(run(BrokerSet.of(brokers), deleting), label, partial=True)
            return
        c = self.committer
        rule = rb.on_broker_failure if failing else rb.on_broker_startup
        rule(step, set(brokers), c.row_view(), c.unclean_rule(), deleting)

    def driver_step(
        self, label: str, extra: tuple[str, ...] = (), scope: Scope | None = None
    ) -> EventRows | None:
        """The event's rows on the driver (``Committer.driver_step``) unless a deletion or a
        reassignment is in flight on a table the driver does not hold (the event's deletion
        and reassignment steps would read every row)."""
        if self.committer.admin_work_in_flight():
            return None
        return self.committer.driver_step(label, extra, scope=scope)

    def _scope(
        self, new: list[int], dead: list[int], bounced: list[int], registered: set[int]
    ) -> Scope | None:
        """The rows a BrokerChange may touch, with an upper bound of their number from the
        per-broker counts and the gauges (None when the driver holds the table, or on an
        unknown one): replicas of the brokers that come, go or bounce, partitions to elect,
        and those whose leader is not online once the event is over."""
        c, ctx = self.committer, self.ctx
        moved = {*new, *dead, *bounced}
        if not moved or c.admin_work_in_flight() or c.last_gauges is None or ctx.rows is None:
            return None
        if c.held_rows() is not None:
            return None
        shutting_down = ctx.shutting_down - set(dead) - set(bounced)
        offline_dirs = ctx.offline_dir_brokers - set(new) - set(bounced)
        view = ClusterView(
            live=BrokerSet.of(registered - shutting_down - offline_dirs),
            shutting_down=BrokerSet.of(shutting_down & registered - offline_dirs),
            controller_epoch=ctx.epoch,
        )
        counts, gauges = c.broker_counts(len(moved)), c.last_gauges
        if counts is None:
            return None
        w = c.width()
        where = hb.broker_startup_scope(BrokerSet.of([*new, *bounced]), w)
        size = sum(counts.replicas[b] for b in moved) + gauges.offline_partitions_count
        size += ctx.rows - gauges.global_partition_count  # new partitions: no state znode yet
        if dead or bounced:
            where = where | hb.broker_failure_scope(BrokerSet.of([*dead, *bounced]), view, w)
            size += sum(counts.leaders[b] for b in (shutting_down | offline_dirs))
        return Scope(where=where, size=size, brokers=frozenset(moved))

    def on_broker_failure(self, dead: BrokerSet, deleting: list[int]) -> DataFrame:
        """``handlers.brokers.on_broker_failure`` over the rows it may touch (stage it with
        ``partial``)."""
        view, c = self.ctx.view(), self.committer
        scope = hb.broker_failure_scope(dead, view, c.width())
        return hb.on_broker_failure(c.table(scope), dead, view, c.unclean_column(), deleting)

    def on_broker_startup(self, new: BrokerSet, deleting: list[int]) -> DataFrame:
        """``handlers.brokers.on_broker_startup`` over the rows it may touch (stage it with
        ``partial``)."""
        view, c = self.ctx.view(), self.committer
        scope = hb.broker_startup_scope(new, c.width())
        return hb.on_broker_startup(c.table(scope), new, view, c.unclean_column(), deleting)
