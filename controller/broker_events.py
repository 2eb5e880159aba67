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
from statemachines import schemas as s
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
        table = self._table()
        deleting = self.ctx.deleting

        def model(t: DataFrame) -> DataFrame:  # the next phase starts from the model columns
            return t.select(*s.compact_columns(s.width(t)))

        # A broker that registers again has its log directories back (§8.6).
        self.ctx.offline_dir_brokers -= set(new) | set(bounced)
        for b in new:
            known[b] = LiveBroker(b, registered[b].rack, registered[b].epoch)
        if new:
            table = hb.on_broker_startup(
                table, BrokerSet.of(new), self.ctx.view(), self._unclean_column(), deleting
            )
        if bounced:
            for b in bounced:
                del known[b]
            table = hb.on_broker_failure(
                model(table),
                BrokerSet.of(bounced),
                self.ctx.view(),
                self._unclean_column(),
                deleting,
            )
            for b in bounced:
                known[b] = LiveBroker(b, registered[b].rack, registered[b].epoch)
            table = hb.on_broker_startup(
                model(table),
                BrokerSet.of(bounced),
                self.ctx.view(),
                self._unclean_column(),
                deleting,
            )
        if dead:
            for b in dead:
                del known[b]
                self.ctx.shutting_down.discard(b)
            table = hb.on_broker_failure(
                model(table),
                BrokerSet.of(dead),
                self.ctx.view(),
                self._unclean_column(),
                deleting,
            )
        if new or bounced or dead:
            self._commit(table, "BrokerChange")
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
        table = hb.on_controlled_shutdown(self._table(), event.broker_id, self.ctx.view(), deleting)
        gauges = self._commit(table, "ControlledShutdown", extra=("remaining",))
        reply("NONE", gauges.counters.get("remaining", 0))
