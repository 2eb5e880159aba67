"""Topic deletion events (spec §9.5): the deletion requests and the brokers' StopReplica replies.

Deletion keeps Kafka's conversation with the brokers: every StopReplica(delete=true) batch is
answered by the emulated broker with a ``TopicDeletionStopReplicaResponseReceived`` event on the
controller's queue. Broker changes and failover resume or fail deletions through this family.
"""

from __future__ import annotations

import logging
from typing import Any

from pyspark.sql import DataFrame

from controller.events import controller_events as ev
from controller.handlers import deletion as hd
from controller.processors.parts import ControllerParts
from controller.row_handlers.deletion import DeletionResult, RowTopicDeletionManager
from controller.row_handlers.event_rows import EventRows
from controller.zk.kafka_zk_client import fenced_delete, topic_znode_paths
from controller.zk.paths import DELETE_TOPICS, DeleteTopicZNode
from statemachines import schemas as s
from statemachines.brokers import BrokerSet
from statemachines.columns import in_partitions

log = logging.getLogger(__name__)


class DeletionEvents:
    """``process_*`` for TopicDeletion and TopicDeletionStopReplicaResponseReceived, and the
    deletion steps other events take (failover, broker changes)."""

    def __init__(self, parts: ControllerParts) -> None:
        self.ctx, self.zk, self.spark = parts.ctx, parts.zk, parts.spark
        self.committer, self.settings = parts.committer, parts.settings
        self.put, self.is_active, self.broker_id = parts.put, parts.is_active, parts.broker_id

    @property
    def manager(self) -> hd.TopicDeletionManager:
        """The bulk entry points over the context's deletion sets (which a resignation
        replaces)."""
        return hd.TopicDeletionManager(self.ctx.deletion)

    def driver_step(self, label: str) -> tuple[RowTopicDeletionManager, EventRows] | None:
        """The deletion step's rows on the driver, when it holds the whole table (a step
        decides per topic from every row of the queued topics), with the manager over them."""
        if self.committer.held_rows() is None:
            return None
        step = self.committer.driver_step(label, extra=(hd.STOP_REPLICA_DELETES,))
        assert step is not None, "the driver holds the table"
        return RowTopicDeletionManager(self.ctx.deletion), step

    def delete_topics_watch(self, _: Any) -> None:
        self.put(ev.TopicDeletion())

    def register_watch(self) -> None:
        self.zk.get_children(DELETE_TOPICS, watch=self.delete_topics_watch)

    # -- events ----------------------------------------------------------------------------------
    def process_topic_deletion(self, _: ev.TopicDeletion) -> None:
        if not self.is_active():
            return
        ctx = self.ctx
        requested = set(self.zk.get_children(DELETE_TOPICS, watch=self.delete_topics_watch))
        unknown = requested - set(ctx.topics)
        if not ctx.deletion.enabled:
            unknown = requested  # delete.topic.enable=false: requests are dropped
        if unknown:
            log.info("Removing deletion requests for topics %s", sorted(unknown))
            fenced_delete(
                self.zk, [DeleteTopicZNode.path(t) for t in sorted(unknown)], ctx.epoch_zk_version
            )
        queued = ctx.topic_indices(requested - unknown)
        if not queued:
            return
        log.info(
            "[Controller id=%d] Starting topic deletion for topics %s",
            self.broker_id,
            sorted(requested - unknown),
        )
        if on_driver := self.driver_step("TopicDeletion"):
            rows, step = on_driver
            view = self.committer.row_view()
            self.finish(rows.enqueue_topics_for_deletion(step, queued, view))
            return
        step = self.manager.enqueue_topics_for_deletion(self._table(), queued, ctx.view())
        self.apply(step, "TopicDeletion")

    def process_topic_deletion_stop_replica_response_received(
        self, event: ev.TopicDeletionStopReplicaResponseReceived
    ) -> None:
        if not self.is_active():
            return
        ctx = self.ctx
        if not ctx.deletion.topics_to_be_deleted:
            return  # nothing queued: the response changes nothing (Kafka's guard)
        bad = None  # a top-level error fails every replica of the request
        if event.error == "NONE":
            bad = {
                (ctx.topics[tp.topic].index, tp.partition)
                for tp, error in event.partition_errors.items()
                if error != "NONE" and tp.topic in ctx.topics
            }
        label = "TopicDeletionStopReplicaResponseReceived"
        if on_driver := self.driver_step(label):
            rows, step = on_driver
            view = self.committer.row_view()
            self.finish(rows.on_stop_replica_response(step, event.replica_id, bad, view))
            return
        failed: hd.ReplicaPredicate | None = None
        if bad is not None:
            keys = in_partitions(bad)
            failed = lambda _b, _k: keys  # noqa: E731
        step = self.manager.on_stop_replica_response(
            self._table(), event.replica_id, failed, ctx.view()
        )
        self.apply(step, "TopicDeletionStopReplicaResponseReceived")

    # -- steps other events take -------------------------------------------------------------------
    def on_failover(self) -> None:
        """Queue what ``/admin/delete_topics`` holds and try the deletions (tryTopicDeletion)."""
        ctx = self.ctx
        queued = set(self.zk.get_children(DELETE_TOPICS)) & set(ctx.topics)
        if queued:
            ctx.deletion.queue(ctx.topic_indices(queued))

    # A queued deletion is what makes each of these a step (the managers return one then).
    def resume(self, label: str) -> None:
        if not self.ctx.deletion.topics_to_be_deleted:
            return
        if on_driver := self.driver_step(label):
            rows, step = on_driver
            self.finish(rows.resume_deletions(step, self.committer.row_view()))
            return
        self.apply(self.manager.resume_deletions(self._table(), self.ctx.view()), label)

    def on_replicas_offline(self, dead: BrokerSet, label: str) -> None:
        """onReplicasBecomeOffline: failReplicaDeletion for the replicas of ``dead``."""
        if not self.ctx.deletion.topics_to_be_deleted:
            return
        if on_driver := self.driver_step(label):
            rows, step = on_driver
            view = self.committer.row_view()
            self.finish(rows.fail_replica_deletion(step, lambda _r, b: b in dead.ids, view))
            return
        step = self.manager.fail_replica_deletion(
            self._table(), lambda b, _k: dead.contains(b), self.ctx.view()
        )
        self.apply(step, label)

    def on_brokers_started(self, started: BrokerSet, label: str) -> None:
        """resumeDeletionForTopics for the topics with replicas on ``started``."""
        if not self.ctx.deletion.topics_to_be_deleted:
            return
        if on_driver := self.driver_step(label):
            rows, step = on_driver
            view = self.committer.row_view()
            self.finish(rows.on_brokers_started(step, started.ids, view))
            return
        step = self.manager.on_brokers_started(self._table(), started, self.ctx.view())
        self.apply(step, label)

    def _table(self) -> DataFrame:
        """Every row, settled: a deletion step reads its rows twice (its per-topic facts, then
        the transitions they decide), and its facts are collected before the event goes on."""
        return self.committer.table(settled=True)

    def apply(self, step: hd.DeletionStep | None, label: str) -> None:
        """Stage a deletion step and collect its per-topic facts and StopReplica counts
        (``_after``)."""
        if step is None:
            return
        self.committer.stage(step.partitions, label, extra=(hd.STOP_REPLICA_DELETES,))
        topics, stop_replica = self.committer.read(step.topics, step.stop_replica)
        facts = [r.asDict() for r in topics]
        stops = {int(r[s.BROKER]): int(r[hd.STOP_REPLICA_DELETES]) for r in stop_replica}
        self._after(facts, stops)

    def finish(self, result: DeletionResult | None) -> None:
        """``apply`` for a step the driver path took (its rows are already the step's)."""
        if result is not None:
            self._after(result.topics, result.stop_replica)

    def _after(self, facts: list[dict[str, Any]], stops: dict[int, int]) -> None:
        """Update the manager's sets, finish completed topics, and hand each
        StopReplica(delete=true) batch to its broker (who answers on the queue)."""
        ctx = self.ctx
        done = ctx.deletion.commit_facts(facts)
        if done:
            names = set(ctx.topic_names(done))
            log.info(
                "[Controller id=%d] Deletion of topics %s successfully completed",
                self.broker_id,
                sorted(names),
            )
            paths = [p for t in sorted(names) for p in topic_znode_paths(self.zk, t)]
            fenced_delete(self.zk, paths, ctx.epoch_zk_version)
            ctx.remove_topics(names)
        for broker, deletes in sorted(stops.items()):
            if deletes and broker in ctx.live_brokers:
                self.put(ev.TopicDeletionStopReplicaResponseReceived(broker))
