"""Broker events of the controller (spec §8): broker changes and controlled shutdown.

``BrokerEvents`` is part of ``KafkaController``. A ``BrokerChange`` sorts registered brokers
into new, bounced (a newer broker epoch) and dead ones and runs Kafka's startup / failure
sequences as bulk phases over one table, committed once; topic deletion then hears about the
dead (failReplicaDeletion) and returning (resumeDeletionForTopics) replicas.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame

from controller import events as ev
from controller.context import LiveBroker
from controller.handlers import brokers as hb
from controller.zk.kafka_zk_client import get_all_brokers
from statemachines.brokers import BrokerSet

if TYPE_CHECKING:
    from controller.kafka_controller import KafkaController as _Controller
else:
    _Controller = object


class BrokerEvents(_Controller):
    """``process_*`` for BrokerChange and ControlledShutdown."""

    def _broker_watch(self, _: Any) -> None:
        self.events.put(ev.BrokerChange())

    def process_broker_change(self, _: ev.BrokerChange) -> None:
        if not self.is_active:
            return
        registered = get_all_brokers(self.zk, watch=self._broker_watch)
        known = self.ctx.live_brokers
        new = sorted(set(registered) - set(known))
        dead = sorted(set(known) - set(registered))
        bounced = sorted(
            b for b in set(registered) & set(known) if registered[b].epoch > known[b].epoch
        )
        deleting = self.ctx.deleting
        # A broker that registers again has its log directories back (§8.6).
        self.ctx.offline_dir_brokers -= set(new) | set(bounced)
        # Each phase is committed on its own: a phase's counters and state-change errors are
        # columns of its output, which the next phase's transforms would not carry.
        for b in new:
            known[b] = LiveBroker(b, registered[b].rack, registered[b].epoch)
        if new:
            started = self.on_broker_startup(BrokerSet.of(new), deleting)
            self._commit(started, "BrokerChange", partial=True)
        if bounced:
            for b in bounced:
                del known[b]
            failed = self.on_broker_failure(BrokerSet.of(bounced), deleting)
            self._commit(failed, "BrokerChange", partial=True)
            for b in bounced:
                known[b] = LiveBroker(b, registered[b].rack, registered[b].epoch)
            started = self.on_broker_startup(BrokerSet.of(bounced), deleting)
            self._commit(started, "BrokerChange", partial=True)
        if dead:
            for b in dead:
                del known[b]
                self.ctx.shutting_down.discard(b)
            failed = self.on_broker_failure(BrokerSet.of(dead), deleting)
            self._commit(failed, "BrokerChange", partial=True)
        deletion = self.ctx.deletion
        if dead and deletion.topics_to_be_deleted:  # onReplicasBecomeOffline: failReplicaDeletion
            gone = BrokerSet.of(dead)
            self.apply_deletion_step(
                deletion.fail_replica_deletion(
                    self._table(), lambda b, _k: gone.contains(b), self.ctx.view()
                ),
                "BrokerChange",
            )
        if (new or bounced) and deletion.topics_to_be_deleted:  # resumeDeletionForTopics
            self.apply_deletion_step(
                deletion.on_brokers_started(
                    self._table(), BrokerSet.of([*new, *bounced]), self.ctx.view()
                ),
                "BrokerChange",
            )

    def process_controlled_shutdown(self, event: ev.ControlledShutdown) -> None:
        reply = event.callback or (lambda *a: None)
        if not self.is_active:
            reply("NOT_CONTROLLER")
            return
        broker = self.ctx.live_brokers.get(event.broker_id)
        if broker is None:
            reply("BROKER_NOT_AVAILABLE")
            return
        if event.broker_epoch != -1 and event.broker_epoch < broker.epoch:
            reply("STALE_BROKER_EPOCH")
            return
        self.ctx.shutting_down.add(event.broker_id)
        deleting = self.ctx.deleting
        w = self._width()
        scoped = self._table(hb.controlled_shutdown_scope(event.broker_id, w))
        table = hb.on_controlled_shutdown(scoped, event.broker_id, self.ctx.view(), deleting)
        gauges = self._commit(table, "ControlledShutdown", extra=("remaining",), partial=True)
        reply("NONE", gauges.counters.get("remaining", 0))

    def on_broker_failure(self, dead: BrokerSet, deleting: list[int]) -> DataFrame:
        """``handlers.brokers.on_broker_failure`` over the rows it may touch (commit it with
        ``partial``)."""
        view = self.ctx.view()
        scope = hb.broker_failure_scope(dead, view, self._width())
        return hb.on_broker_failure(
            self._table(scope), dead, view, self._unclean_column(), deleting
        )

    def on_broker_startup(self, new: BrokerSet, deleting: list[int]) -> DataFrame:
        """``handlers.brokers.on_broker_startup`` over the rows it may touch (commit it with
        ``partial``)."""
        view = self.ctx.view()
        scope = hb.broker_startup_scope(new, self._width())
        return hb.on_broker_startup(self._table(scope), new, view, self._unclean_column(), deleting)
