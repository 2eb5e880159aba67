"""Broker events (spec §8): broker changes and controlled shutdown.

A ``BrokerChange`` sorts registered brokers into new, bounced (a newer broker epoch) and dead ones
and runs Kafka's startup / failure sequences as bulk phases over one table; topic deletion then
hears about the dead (failReplicaDeletion) and returning (resumeDeletionForTopics) replicas.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame

from controller.context import LiveBroker
from controller.events import controller_events as ev
from controller.handlers import brokers as hb
from controller.processors.deletion import DeletionEvents
from controller.processors.parts import ControllerParts
from controller.processors.reassignment import ReassignmentEvents
from controller.zk.kafka_zk_client import get_all_brokers
from statemachines.brokers import BrokerSet


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
        ctx, stage = self.ctx, self.committer.stage
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

        # Each phase is a step of the event: the next reads the rows it staged.
        register(new)
        if new:
            started = self.on_broker_startup(BrokerSet.of(new), deleting)
            stage(started, "BrokerChange", partial=True)
            self.reassignments.on_brokers_started(BrokerSet.of(new), "BrokerChange")
        if bounced:
            ctx.remove_live_brokers(bounced)  # onBrokerFailure: a shutdown in progress ends
            failed = self.on_broker_failure(BrokerSet.of(bounced), deleting)
            stage(failed, "BrokerChange", partial=True)
            # onReplicasBecomeOffline: the old incarnation's replica deletions failed with it.
            self.deletion.on_replicas_offline(BrokerSet.of(bounced), "BrokerChange")
            register(bounced)
            started = self.on_broker_startup(BrokerSet.of(bounced), deleting)
            stage(started, "BrokerChange", partial=True)
            self.reassignments.on_brokers_started(BrokerSet.of(bounced), "BrokerChange")
        if dead:
            ctx.remove_live_brokers(dead)
            failed = self.on_broker_failure(BrokerSet.of(dead), deleting)
            stage(failed, "BrokerChange", partial=True)
            self.deletion.on_replicas_offline(BrokerSet.of(dead), "BrokerChange")
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
        scope = hb.controlled_shutdown_scope(event.broker_id, self.committer.width())
        table = hb.on_controlled_shutdown(
            self.committer.table(scope), event.broker_id, self.ctx.view(), deleting
        )
        self.committer.stage(table, "ControlledShutdown", extra=("remaining",), partial=True)
        self.committer.on_commit(
            lambda _, gauges: reply("NONE", gauges.counters.get("remaining", 0))
        )

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
