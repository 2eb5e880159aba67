"""ISR and log-directory events of the controller (spec §12.4, §12.5, §8.6).

Before AlterIsr (IBP < 2.7-IV2) leaders write the
state znodes themselves and leave ``/isr_change_notification`` nodes: the controller reads every
notification at once — so a burst of queued notifications costs one bulk refresh, the others find
nothing — reloads those partitions' leadership from ZooKeeper into a new generation, and completes
reassignments whose targets joined the ISR. With AlterIsr the leader proposes, and the controller
checks and writes the whole request in one pass; requests queued back to back for disjoint
partitions share that pass (one commit), with the replies they would get one at a time. A failed
log directory makes every replica of the broker offline (one directory per emulated broker) until
the broker registers again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kazoo.exceptions import NoNodeError
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from controller.commit.driver_path import Scope
from controller.commit.gauges import Gauges
from controller.commit.generations import DELTA_MAX_ROWS
from controller.events import controller_events as ev
from controller.events.event_manager import ControllerEventManager
from controller.handlers import isr as hi
from controller.partition_store import PartitionStateStore
from controller.processors.brokers import BrokerEvents
from controller.processors.deletion import DeletionEvents
from controller.processors.parts import ControllerParts
from controller.processors.reassignment import ReassignmentEvents
from controller.row_handlers import isr as ri
from controller.zk.kafka_zk_client import fenced_delete
from controller.zk.paths import (
    ISR_CHANGE_NOTIFICATION,
    LOG_DIR_EVENT_NOTIFICATION,
    IsrChangeNotificationZNode,
    LogDirEventNotificationZNode,
    PartitionStateZNode,
)
from statemachines import schemas as s
from statemachines.brokers import BrokerSet
from statemachines.local_rows import local_frame

log = logging.getLogger(__name__)

_KEY = [s.TOPIC_INDEX, s.PARTITION]
_KEY_SCHEMA = f"{s.TOPIC_INDEX} int, {s.PARTITION} int"


class IsrEvents:
    """``process_*`` for IsrChangeNotification, AlterIsrReceived, LogDirEventNotification."""

    def __init__(
        self,
        parts: ControllerParts,
        store: PartitionStateStore,
        events: ControllerEventManager,
        brokers: BrokerEvents,
        deletion: DeletionEvents,
        reassignments: ReassignmentEvents,
    ) -> None:
        self.ctx, self.zk, self.spark = parts.ctx, parts.zk, parts.spark
        self.committer, self.settings = parts.committer, parts.settings
        self.put, self.is_active, self.broker_id = parts.put, parts.is_active, parts.broker_id
        self.store = store
        self.events = events
        self.brokers = brokers
        self.deletion = deletion
        self.reassignments = reassignments

    def isr_watch(self, _: Any) -> None:
        self.events.put(ev.IsrChangeNotification())

    def log_dir_watch(self, _: Any) -> None:
        self.events.put(ev.LogDirEventNotification())

    def register_isr_watches(self) -> None:
        self.zk.get_children(ISR_CHANGE_NOTIFICATION, watch=self.isr_watch)
        self.zk.get_children(LOG_DIR_EVENT_NOTIFICATION, watch=self.log_dir_watch)

    # -- §12.4 ---------------------------------------------------------------------------------
    def process_isr_change_notification(self, _: ev.IsrChangeNotification) -> None:
        if not self.is_active():
            return
        children = sorted(self.zk.get_children(ISR_CHANGE_NOTIFICATION, watch=self.isr_watch))
        if not children:
            return
        paths = [f"{ISR_CHANGE_NOTIFICATION}/{c}" for c in children]
        keys: set[tuple[str, int]] = set()
        try:
            for path in paths:
                data, _stat = self.zk.get(path)
                keys |= {
                    (p.topic, p.partition)
                    for p in IsrChangeNotificationZNode.decode(data, path).partitions
                }
        finally:  # processed notifications go, even on error (§12.4 step 3)
            fenced_delete(self.zk, paths, self.ctx.epoch_zk_version)
        self.update_leader_and_isr_cache(keys)
        if self.committer.reassigning_partitions():
            self.reassignments.maybe_complete_reassignments()

    def update_leader_and_isr_cache(self, keys: set[tuple[str, int]]) -> None:
        """Reload the leadership of ``keys`` from their state znodes into a new generation."""
        known = sorted((t, p) for t, p in keys if t in self.ctx.topics)
        if not known:
            return
        step = None
        if not self.committer.admin_work_in_flight():
            named = {(self.ctx.topics[t].index, p) for t, p in known}
            step = self.committer.driver_step(
                "IsrChangeNotification",
                extra=(hi.ISR_UPDATED,),
                write_zk=False,
                scope=Scope.named(named),
            )
        if step is not None:
            # The few znodes read one by one, as Kafka reads them.
            states = {}
            paths = [PartitionStateZNode.path(t, p) for t, p in known]
            for (topic, partition), (path, result) in zip(
                known, self.zk.get_many(paths), strict=True
            ):
                if isinstance(result, NoNodeError):
                    continue
                if isinstance(result, Exception):
                    raise result
                state = PartitionStateZNode.decode(result[0], path)
                states[(self.ctx.topics[topic].index, partition)] = (
                    state.leader, state.leader_epoch, list(state.isr), state.controller_epoch,
                    result[1].version,
                )  # fmt: skip
            ri.with_zk_leadership(step, states)
            return
        selection = local_frame(self.spark, known, f"{s.TOPIC} string, {s.PARTITION} int")
        states = self.store.read_states(self.spark, selection, rows=len(known)).join(
            F.broadcast(self.ctx.topics_frame()), s.TOPIC
        )
        named = [(self.ctx.topics[t].index, p) for t, p in known]
        # Only the partitions read: the commit is partial.
        table = self.committer.table(named=local_frame(self.spark, named, _KEY_SCHEMA))
        out = hi.with_zk_leadership(table, states)
        # The znodes already hold these states: nothing to write back.
        self.committer.stage(
            out, "IsrChangeNotification", extra=(hi.ISR_UPDATED,), write_zk=False, partial=True
        )

    # -- §12.5 ---------------------------------------------------------------------------------
    def process_alter_isr_received(self, event: ev.AlterIsrReceived) -> None:
        """One bulk pass for this request and the AlterIsr requests queued right behind it.

        Requests join the pass while their partitions are disjoint from those already in it,
        so each is checked against the state it would have seen processed alone.
        """
        batch = [event]
        if self.is_active():
            batch += self.events.take_queued(_disjoint_from(event))  # type: ignore[arg-type]
        replies: list[tuple[ev.AlterIsrReceived, dict[ev.TopicPartition, str] | str]] = []
        rows: list[tuple[Any, ...]] = []
        senders: list[int] = []  # of the accepted frame requests
        for request in batch:
            broker = self.ctx.live_brokers.get(request.broker_id)
            if not self.is_active():
                replies.append((request, "NOT_CONTROLLER"))
            elif broker is None or request.broker_epoch != broker.epoch:
                replies.append((request, "STALE_BROKER_EPOCH"))
            elif request.frame is not None:
                senders.append(request.broker_id)
                replies.append((request, {}))
            else:
                known = {
                    tp: i for tp, i in request.isrs_to_alter.items() if tp.topic in self.ctx.topics
                }
                rows += [
                    (self.ctx.topics[tp.topic].index, tp.partition, request.broker_id,
                     item.leader_epoch, list(item.new_isr), item.current_isr_version)
                    for tp, item in known.items()
                ]  # fmt: skip
                unknown = {
                    tp: "UNKNOWN_TOPIC_OR_PARTITION"
                    for tp in request.isrs_to_alter
                    if tp not in known
                }
                replies.append((request, unknown))
        if len(batch) > 1:
            self.committer.count("coalesced_events", len(batch) - 1)

        def answer(errors: dict[ev.TopicPartition, str]) -> None:
            for request, reply in replies:
                callback = request.callback or (lambda *a: None)
                if isinstance(reply, str):
                    callback(reply)
                else:
                    known = {tp: errors[tp] for tp in request.isrs_to_alter if tp in errors}
                    callback(reply | known)

        if rows:
            # Per-partition errors are read back only for a request that waits for them.
            wanted = any(r.callback is not None and r.isrs_to_alter for r in batch)
            self._alter_isr(rows, answer, wanted)
        elif senders:
            assert event.frame is not None  # a frame request's batch holds only its kind
            count = sum(r.frame.rows for r in batch if r.frame and r.broker_id in senders)
            self._alter_isr_frame(event.frame.source, senders, count, answer)
        else:
            answer({})
        if self.is_active() and self.committer.reassigning_partitions():
            self.reassignments.maybe_complete_reassignments()

    def _alter_isr(
        self,
        rows: list[tuple[Any, ...]],
        answer: Callable[[dict[ev.TopicPartition, str]], None],
        errors_wanted: bool = True,
    ) -> None:
        """Check and apply AlterIsr items (one row per partition, ``_sender`` the leader);
        ``answer`` gets the per-partition errors once they are committed (none unless
        ``errors_wanted``)."""
        step = None
        if not self.committer.admin_work_in_flight():
            keys = {(r[0], r[1]) for r in rows}
            step = self.committer.driver_step(
                "AlterIsrReceived", extra=(hi.ISR_UPDATED,), scope=Scope.named(keys)
            )
        if step is not None:
            ri.alter_isr(step, rows, self.ctx.epoch)
            names = {t.index: t.name for t in self.ctx.topics.values()}
            errors = {
                ev.TopicPartition(names[k[0]], k[1]): str(error)
                for k, error in step.kept[hi.ALTER_ISR_ERROR].items()
            }
            self.committer.on_commit(lambda _c, _g: answer(errors))
            return
        requests = local_frame(self.spark, rows, hi.ALTER_ISR_SCHEMA)
        table = self.committer.table(keys={(r[0], r[1]) for r in rows})
        self._stage_alter_isr(hi.alter_isr(table, requests, self.ctx.epoch), answer, errors_wanted)

    def _alter_isr_frame(
        self,
        source: DataFrame,
        senders: list[int],
        count: int,
        answer: Callable[[dict[ev.TopicPartition, str]], None],
    ) -> None:
        """``_alter_isr`` for the items of ``senders`` in ``source`` (``AlterIsrFrame``), read
        in Spark: ``count`` items, joined by a shuffle when too many to broadcast."""
        requests = (
            source.where(F.col(s.LEADER).isin(senders))
            .join(F.broadcast(self.ctx.topics_frame()), s.TOPIC)  # drops deleted topics
            .select(
                s.TOPIC_INDEX,
                s.PARTITION,
                F.col(s.LEADER).alias("_sender"),
                F.col(s.LEADER_EPOCH).alias("_req_epoch"),
                F.col(s.ISR).alias("_new_isr"),
                F.col(s.ZK_VERSION).alias("_req_version"),
            )
        )
        small = count <= DELTA_MAX_ROWS
        table = self.committer.table(named=requests.select(*_KEY), named_small=small)
        self._stage_alter_isr(hi.alter_isr(table, requests, self.ctx.epoch, small), answer, False)

    def _stage_alter_isr(
        self,
        out: DataFrame,
        answer: Callable[[dict[ev.TopicPartition, str]], None],
        errors_wanted: bool,
    ) -> None:
        # The replies are read off the committed rows: one evaluation makes both. Unless no
        # request waits for them: one reply per partition is a collect of every requested row.
        kept = (hi.ALTER_ISR_ERROR,) if errors_wanted else ()
        self.committer.stage(
            out, "AlterIsrReceived", extra=(hi.ISR_UPDATED,), kept=kept, partial=True
        )
        if not errors_wanted:
            self.committer.on_commit(lambda _c, _g: answer({}))
            return
        names = {t.index: t.name for t in self.ctx.topics.values()}

        def replied(committed: DataFrame | None, _: Gauges) -> None:
            assert committed is not None
            errors = committed.where(F.col(hi.ALTER_ISR_ERROR).isNotNull())
            answer(
                {
                    ev.TopicPartition(names[r[0]], r[1]): r[2]
                    for r in errors.select(*_KEY, hi.ALTER_ISR_ERROR).collect()
                }
            )

        self.committer.on_commit(replied)

    # -- §8.6 ----------------------------------------------------------------------------------
    def process_log_dir_event_notification(self, _: ev.LogDirEventNotification) -> None:
        if not self.is_active():
            return
        children = sorted(
            self.zk.get_children(LOG_DIR_EVENT_NOTIFICATION, watch=self.log_dir_watch)
        )
        if not children:
            return
        paths = [f"{LOG_DIR_EVENT_NOTIFICATION}/{c}" for c in children]
        brokers: set[int] = set()
        try:
            for path in paths:
                data, _stat = self.zk.get(path)
                brokers.add(LogDirEventNotificationZNode.decode(data, path).broker)
        finally:
            fenced_delete(self.zk, paths, self.ctx.epoch_zk_version)
        failed = sorted((brokers & set(self.ctx.live_brokers)) - self.ctx.offline_dir_brokers)
        if not failed:
            return
        log.info(
            "[Controller id=%d] Mark replicas on brokers %s as offline", self.broker_id, failed
        )
        self.ctx.mark_log_dirs_offline(failed)
        # The broker answers LeaderAndIsr with KAFKA_STORAGE_ERROR for each of its replicas, and
        # onReplicasBecomeOffline follows: elections where they led, ISR removal elsewhere.
        self.brokers.run_phase("LogDirEventNotification", failed, True, self.ctx.deleting)
        # onReplicasBecomeOffline: their replica deletions fail with them.
        self.deletion.on_replicas_offline(BrokerSet.of(failed), "LogDirEventNotification")


def _disjoint_from(event: ev.AlterIsrReceived) -> Callable[[ev.ControllerEvent], bool]:
    """Whether a queued event may join ``event``'s pass: an AlterIsr request for partitions
    none of the pass's requests names. Requests cut from one frame are disjoint by
    construction; a frame's partitions are unknown to Python, so it meets no other request."""
    seen = set(event.isrs_to_alter)
    source = event.frame.source if event.frame is not None else None

    def disjoint(other: ev.ControllerEvent) -> bool:
        if not isinstance(other, ev.AlterIsrReceived):
            return False
        if source is not None or other.frame is not None:
            return other.frame is not None and other.frame.source is source
        if seen & other.isrs_to_alter.keys():
            return False
        seen.update(other.isrs_to_alter)
        return True

    return disjoint
