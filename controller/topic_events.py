"""Topic events of the controller (spec §9): creation, partition addition, deletion, configs.

``TopicEvents`` is part of ``KafkaController``: these ``process_*`` methods read what admins wrote
to ZooKeeper (``controller.zk.admin_zk_client``), run the bulk handlers of
``controller.handlers.topics`` / ``deletion`` and commit one generation per step. Deletion keeps
Kafka's conversation with the brokers: every StopReplica(delete=true) batch is answered by the
emulated broker with a ``TopicDeletionStopReplicaResponseReceived`` event on the controller's queue.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING, Any

from kazoo.exceptions import NoNodeError
from pyspark.sql import functions as F

from controller import events as ev
from controller.handlers import deletion as hd
from controller.handlers import election as he
from controller.handlers.topics import (
    INIT_FAILED,
    INITIALIZED,
    add_partition_rows,
    assigned_partition_rows,
    on_new_partition_creation,
)
from controller.zk.admin_zk_client import read_topic_assignment, read_topic_config
from controller.zk.kafka_zk_client import fenced_delete, topic_znode_paths
from controller.zk.paths import BROKER_TOPICS, DELETE_TOPICS, DeleteTopicZNode, TopicZNode
from statemachines import schemas as s
from statemachines.columns import in_partitions, in_topics

if TYPE_CHECKING:
    from controller.kafka_controller import KafkaController as _Controller
else:
    _Controller = object

log = logging.getLogger(__name__)


class TopicEvents(_Controller):
    """``process_*`` for TopicChange, PartitionModifications, TopicDeletion and topic configs."""

    # -- watches -------------------------------------------------------------------------------
    def _topics_watch(self, _: Any) -> None:
        self.events.put(ev.TopicChange())

    def _partitions_watch(self, topic: str) -> Any:
        def fire(watched: Any) -> None:
            if getattr(watched, "type", None) != "DELETED":
                self.events.put(ev.PartitionModifications(topic))

        return fire

    def _delete_topics_watch(self, _: Any) -> None:
        self.events.put(ev.TopicDeletion())

    def register_topic_watches(self) -> None:
        """Failover: child watches on topics and deletion requests, a data watch per topic."""
        for topic in self.zk.get_children(BROKER_TOPICS, watch=self._topics_watch):
            self.zk.exists(TopicZNode.path(topic), watch=self._partitions_watch(topic))
        self.zk.get_children(DELETE_TOPICS, watch=self._delete_topics_watch)

    def load_topic_configs(self) -> None:
        for name, entry in self.ctx.topics.items():
            entry.config.update(read_topic_config(self.zk, name))

    # -- creation and partition addition (§9.1, §9.2) ------------------------------------------
    def process_topic_change(self, _: ev.TopicChange) -> None:
        if not self.is_active:
            return
        children = set(self.zk.get_children(BROKER_TOPICS, watch=self._topics_watch))
        gone = set(self.ctx.topics) - children
        table = self._table()
        if gone:  # removed behind the controller's back: forget them, as Kafka's context does
            table = table.where(~in_topics(self.ctx.topic_indices(gone)))
            self.ctx.remove_topics(gone)
        assignments: dict[int, dict[int, list[int]]] = {}
        for name in sorted(children - set(self.ctx.topics)):
            try:
                znode = read_topic_assignment(self.zk, name, watch=self._partitions_watch(name))
            except NoNodeError:
                continue
            entry = self.ctx.add_topic(
                name, len(znode.partitions), read_topic_config(self.zk, name)
            )
            assignments[entry.index] = {int(p): r for p, r in znode.partitions.items()}
        if not assignments:
            if gone:
                self._commit(table, "TopicChange")
            return
        log.info("[Controller id=%d] New topics: %s", self.broker_id, sorted(assignments))
        rows = assigned_partition_rows(self.spark, assignments, s.width(table))
        table = on_new_partition_creation(
            add_partition_rows(table, rows), in_topics(sorted(assignments)), self.ctx.view()
        )
        self._commit(table, "TopicChange", extra=(INITIALIZED, INIT_FAILED))

    def process_partition_modifications(self, event: ev.PartitionModifications) -> None:
        if not self.is_active:
            return
        entry = self.ctx.topics.get(event.topic)
        try:
            znode = read_topic_assignment(
                self.zk, event.topic, watch=self._partitions_watch(event.topic)
            )
        except NoNodeError:
            return
        if entry is None:
            return
        added = {int(p): r for p, r in znode.partitions.items() if int(p) >= entry.partitions}
        if not added:
            return
        if entry.index in self.ctx.deletion.topics_to_be_deleted:
            # §4.3: additions to a topic queued for deletion are reverted in ZooKeeper.
            log.info(
                "Skipping adding partitions %s for topic %s being deleted",
                sorted(added),
                entry.name,
            )
            kept = {p: r for p, r in znode.partitions.items() if int(p) < entry.partitions}
            restored = znode.model_copy(update={"partitions": kept})
            self.zk.set(TopicZNode.path(entry.name), TopicZNode.encode(restored))
            return
        table = self._table()
        rows = assigned_partition_rows(self.spark, {entry.index: added}, s.width(table))
        new = (F.col(s.TOPIC_INDEX) == entry.index) & (F.col(s.PARTITION) >= entry.partitions)
        table = on_new_partition_creation(add_partition_rows(table, rows), new, self.ctx.view())
        entry.partitions = len(znode.partitions)
        self._commit(table, "PartitionModifications", extra=(INITIALIZED, INIT_FAILED))

    # -- deletion (§9.5) -----------------------------------------------------------------------
    def process_topic_deletion(self, _: ev.TopicDeletion) -> None:
        if not self.is_active:
            return
        requested = set(self.zk.get_children(DELETE_TOPICS, watch=self._delete_topics_watch))
        unknown = requested - set(self.ctx.topics)
        if not self.ctx.deletion.enabled:
            unknown = requested  # delete.topic.enable=false: requests are dropped
        if unknown:
            log.info("Removing deletion requests for topics %s", sorted(unknown))
            fenced_delete(
                self.zk,
                [DeleteTopicZNode.path(t) for t in sorted(unknown)],
                self.ctx.epoch_zk_version,
            )
        queued = self.ctx.topic_indices(requested - unknown)
        if not queued:
            return
        log.info(
            "[Controller id=%d] Starting topic deletion for topics %s",
            self.broker_id,
            sorted(requested - unknown),
        )
        self.apply_deletion_step(
            self.ctx.deletion.enqueue_topics_for_deletion(self._table(), queued, self.ctx.view()),
            "TopicDeletion",
        )

    def process_topic_deletion_stop_replica_response_received(
        self, event: ev.TopicDeletionStopReplicaResponseReceived
    ) -> None:
        if not self.is_active:
            return
        failed: hd.ReplicaPredicate | None
        if event.error != "NONE":
            failed = None  # a top-level error fails every replica of the request
        else:
            bad = {
                (self.ctx.topics[tp.topic].index, tp.partition)
                for tp, error in event.partition_errors.items()
                if error != "NONE" and tp.topic in self.ctx.topics
            }
            keys = in_partitions(bad)
            failed = lambda _b, _k: keys  # noqa: E731
        step = self.ctx.deletion.on_stop_replica_response(
            self._table(), event.replica_id, failed, self.ctx.view()
        )
        self.apply_deletion_step(step, "TopicDeletionStopReplicaResponseReceived")

    def apply_deletion_step(self, step: hd.DeletionStep | None, label: str) -> None:
        """Commit a deletion step, update the manager's sets, finish completed topics, and hand
        each StopReplica(delete=true) batch to its broker (who answers on the queue)."""
        if step is None:
            return
        self._commit(step.partitions, label, extra=(hd.STOP_REPLICA_DELETES,))
        facts = [r.asDict() for r in step.topics.collect()]
        stops = {
            int(r[s.BROKER]): int(r[hd.STOP_REPLICA_DELETES]) for r in step.stop_replica.collect()
        }
        done = self.ctx.deletion.commit_facts(facts)
        if done:
            names = set(self.ctx.topic_names(done))
            log.info(
                "[Controller id=%d] Deletion of topics %s successfully completed",
                self.broker_id,
                sorted(names),
            )
            paths = [p for t in sorted(names) for p in topic_znode_paths(self.zk, t)]
            fenced_delete(self.zk, paths, self.ctx.epoch_zk_version)
            self.ctx.remove_topics(names)
        self._refresh_topic_gauges()
        for broker, deletes in sorted(stops.items()):
            if deletes and broker in self.ctx.live_brokers:
                self.events.put(ev.TopicDeletionStopReplicaResponseReceived(broker))

    def _refresh_topic_gauges(self) -> None:
        """Driver-side gauges change after the commit job ran (the sets move on collected facts)."""
        record = self._record
        if record is None or record.gauges is None:
            return
        gauges = self.ctx.deletion.topic_gauges()
        record.gauges = dataclasses.replace(
            record.gauges,
            global_topic_count=len(self.ctx.topics),
            topics_to_delete_count=gauges["TopicsToDeleteCount"],
            topics_ineligible_to_delete_count=gauges["TopicsIneligibleToDeleteCount"],
        )

    # -- configs -------------------------------------------------------------------------------
    def process_topic_unclean_leader_election_enable(
        self, event: ev.TopicUncleanLeaderElectionEnable
    ) -> None:
        if not self.is_active:
            return
        entry = self.ctx.topics.get(event.topic)
        if entry is None:
            return
        entry.config = read_topic_config(self.zk, event.topic)
        table = he.on_unclean_leader_election_enable(
            self._table(), self.ctx.view(), self._unclean_column(), self.ctx.deleting, entry.index
        )
        self._commit(table, "TopicUncleanLeaderElectionEnable")

    def process_unclean_leader_election_enable(self, _: ev.UncleanLeaderElectionEnable) -> None:
        if not self.is_active:
            return
        table = he.on_unclean_leader_election_enable(
            self._table(), self.ctx.view(), self._unclean_column(), self.ctx.deleting
        )
        self._commit(table, "UncleanLeaderElectionEnable")
