"""One broker's controller module (Kafka's ``KafkaController``): lifecycle and event dispatch.

Every emulated broker runs one. The module that wins ``/controller`` becomes active: it loads the
context from ZooKeeper with the bulk store (spec §3.3), and from then on hands each event to the
``process_*`` of its family (``controller.processors``), which turns it into bulk transforms over
the partitions table (``controller.handlers``); the committer (``controller.commit.committer``)
swaps in the next generation and writes the changed partition states back to ZooKeeper, fenced
by the controller epoch. Events are processed one at a time on the event manager, exactly in
Kafka's order; ``ControllerMovedError`` makes a deposed controller resign (``maybe_resign``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from controller.commit.committer import Committer
from controller.commit.gauges import Gauges
from controller.commit.state_change_store import EventStateChangeLog
from controller.context import ControllerContext, LiveBroker
from controller.events import controller_events as ev
from controller.events.event_manager import ControllerEventManager
from controller.handlers import brokers as hb
from controller.partition_store import PartitionStateStore, read_cluster, read_cluster_rows
from controller.processors.brokers import BrokerEvents
from controller.processors.deletion import DeletionEvents
from controller.processors.elections import ElectionEvents
from controller.processors.isr import IsrEvents
from controller.processors.parts import ControllerParts
from controller.processors.reassignment import ReassignmentEvents
from controller.processors.topics import TopicEvents
from controller.records import ControllerSettings, EventRecord
from controller.row_handlers import brokers as rb
from controller.scheduler.timer import Clock, Timer
from controller.zk.errors import ControllerMovedError, ZooKeeperClientTimeoutError
from controller.zk.kafka_zk_client import (
    get_all_brokers,
    get_controller_id,
    register_controller_and_increment_controller_epoch,
)
from controller.zk.protocol import ZkClient
from statemachines import schemas as s
from statemachines.compact_rows import CompactRow
from statemachines.layout import to_compact
from statemachines.partition_states import PartitionState
from statemachines.replica_states import ISR_WRITES, ReplicaState
from statemachines.replica_states import handle_state_changes as replica_changes

log = logging.getLogger(__name__)

COUNTERS = (hb.ELECTED, hb.FAILED_ELECTION, hb.UNCLEAN_ELECTED, hb.ISR_SHRINKS)

Handler = Callable[[Any], None]


class KafkaController:
    """The controller module of broker ``broker_id`` (see the module docstring).

    It owns the lifecycle (controller election, failover, resignation) and dispatches each
    event through ``handlers``, an explicit table from event type to the ``process_*`` of its
    family (``controller.processors``); the families share the context and the committer.
    """

    def __init__(
        self,
        broker_id: int,
        zk: ZkClient,
        spark: SparkSession,
        clock: Clock,
        timer: Timer,
        settings: ControllerSettings | None = None,
        on_event: Callable[[EventRecord], None] | None = None,
        state_change_log: EventStateChangeLog | None = None,
        *,
        store: PartitionStateStore,
    ) -> None:
        self.broker_id = broker_id
        self.zk = zk
        self.spark = spark
        self.clock = clock
        self.settings = settings or ControllerSettings()
        self.on_event = on_event or (lambda record: None)
        self.ctx = ControllerContext(spark, delete_topic_enable=self.settings.delete_topic_enable)
        self.store = store
        self.events = ControllerEventManager(
            self, clock, controller_id=broker_id, fatal=(ZooKeeperClientTimeoutError,)
        )
        self.active_controller_id = -1
        self.committer = Committer(
            self.ctx, self.store, broker_id, clock, self.settings, COUNTERS, state_change_log
        )
        parts = ControllerParts(
            self.ctx,
            zk,
            spark,
            self.committer,
            self.settings,
            self.events.put,
            lambda: self.is_active,
            broker_id,
        )
        self.deletion = DeletionEvents(parts)
        self.reassignments = ReassignmentEvents(parts)
        self.brokers = BrokerEvents(parts, self.deletion, self.reassignments)
        self.topics = TopicEvents(parts)
        self.elections = ElectionEvents(parts, timer)
        self.isr = IsrEvents(
            parts, store, self.events, self.brokers, self.deletion, self.reassignments
        )
        # The topic znodes and the reassignment request follow each committed assignment.
        self.committer.after_commit.append(self.reassignments.after_commit)
        self.handlers: dict[type[ev.ControllerEvent], Handler] = {
            ev.Startup: self.process_startup,
            ev.ControllerChange: self.process_controller_change,
            ev.Reelect: self.process_reelect,
            ev.Expire: self.process_expire,
            ev.RegisterBrokerAndReelect: self.process_register_broker_and_reelect,
            ev.BrokerChange: self.brokers.process_broker_change,
            ev.ControlledShutdown: self.brokers.process_controlled_shutdown,
            ev.TopicChange: self.topics.process_topic_change,
            ev.PartitionModifications: self.topics.process_partition_modifications,
            ev.TopicDeletion: self.deletion.process_topic_deletion,
            ev.TopicDeletionStopReplicaResponseReceived: (
                self.deletion.process_topic_deletion_stop_replica_response_received
            ),
            ev.ReplicaLeaderElection: self.elections.process_replica_leader_election,
            ev.AutoPreferredReplicaLeaderElection: (
                self.elections.process_auto_preferred_replica_leader_election
            ),
            ev.TopicUncleanLeaderElectionEnable: (
                self.elections.process_topic_unclean_leader_election_enable
            ),
            ev.UncleanLeaderElectionEnable: (self.elections.process_unclean_leader_election_enable),
            ev.ZkPartitionReassignment: self.reassignments.process_zk_partition_reassignment,
            ev.ApiPartitionReassignment: self.reassignments.process_api_partition_reassignment,
            ev.PartitionReassignmentIsrChange: (
                self.reassignments.process_partition_reassignment_isr_change
            ),
            ev.ListPartitionReassignments: (
                self.reassignments.process_list_partition_reassignments
            ),
            ev.IsrChangeNotification: self.isr.process_isr_change_notification,
            ev.AlterIsrReceived: self.isr.process_alter_isr_received,
            ev.LogDirEventNotification: self.isr.process_log_dir_event_notification,
        }

    # -- lifecycle -----------------------------------------------------------------------------
    @property
    def is_active(self) -> bool:
        return self.active_controller_id == self.broker_id

    @property
    def last_gauges(self) -> Gauges | None:
        """The gauges of the last commit (None before the first, and after resigning)."""
        return self.committer.last_gauges

    def startup(self) -> None:
        self.events.put(ev.Startup())

    # -- ControllerEventProcessor --------------------------------------------------------------
    def process(self, event: ev.ControllerEvent) -> None:
        handler = self.handlers.get(type(event))
        record = EventRecord(
            self.broker_id, type(event).__name__, event.state.name, self.clock.now_ms()
        )
        self.committer.begin(record)
        started = time.perf_counter()
        try:
            if handler is None:
                raise NotImplementedError(f"no handler for {type(event).__name__}")
            handler(event)
            self.committer.commit_event()
        except ControllerMovedError as err:
            log.info("[Controller id=%d] %s: controller moved (%s)", self.broker_id, event, err)
            record.failed = "ControllerMovedException"
            self.maybe_resign()
        except ZooKeeperClientTimeoutError as err:
            # Kafka's thread would wait for ZooKeeper forever; a run without it cannot go on.
            record.failed = f"ZooKeeperClientTimeoutException: {err}"
            raise
        except Exception as err:  # Kafka logs and carries on; the event loop must not die
            log.exception("[Controller id=%d] error processing %s", self.broker_id, event)
            record.failed = f"{type(err).__name__}: {err}"
        finally:
            self.committer.end()
            record.processing_ms = (time.perf_counter() - started) * 1000
            queue_time = self.events.metrics.event_queue_time_ms
            record.queue_time_ms = int(queue_time.recent[-1]) if queue_time.recent else 0
            record.queue_size = self.events.queue_size
            self.on_event(record)

    def preempt(self, event: ev.ControllerEvent) -> None:
        callback = getattr(event, "callback", None)
        if callback is not None:
            callback("NOT_CONTROLLER")

    # -- controller election (spec §3) ---------------------------------------------------------
    def controller_watch(self, watched: Any) -> None:
        deleted = getattr(watched, "type", None) == "DELETED"
        self.events.put(ev.Reelect() if deleted else ev.ControllerChange())

    def process_startup(self, _: ev.Startup) -> None:
        self.elect()

    def process_controller_change(self, _: ev.ControllerChange) -> None:
        self.maybe_resign()

    def process_reelect(self, _: ev.Reelect) -> None:
        self.maybe_resign()
        self.elect()

    def process_expire(self, _: ev.Expire) -> None:
        self.active_controller_id = -1
        self.on_controller_resignation()

    def process_register_broker_and_reelect(self, _: ev.RegisterBrokerAndReelect) -> None:
        self.maybe_resign()
        self.elect()

    def elect(self) -> None:
        self.active_controller_id = get_controller_id(self.zk, watch=self.controller_watch)
        if self.active_controller_id != -1:
            return
        try:
            epoch, version = register_controller_and_increment_controller_epoch(
                self.zk, self.broker_id, self.clock.now_ms()
            )
        except ControllerMovedError:
            self.maybe_resign()
            return
        self.ctx.set_epoch(epoch, version)
        self.active_controller_id = self.broker_id
        log.info("[Controller id=%d] won the election, epoch %d", self.broker_id, epoch)
        self.on_controller_failover()

    def maybe_resign(self) -> None:
        was_active = self.is_active
        self.active_controller_id = get_controller_id(self.zk, watch=self.controller_watch)
        if was_active and not self.is_active:
            self.on_controller_resignation()

    def on_controller_resignation(self) -> None:
        self.elections.cancel_auto_rebalance()
        # A deposed controller's tables are dead: free their blocks now, not at some JVM GC.
        self.committer.reset()
        self.ctx.reset()

    # -- failover (spec §3.3) ------------------------------------------------------------------
    def _loaded_rows(
        self, partitions: list[dict[str, Any]], online: frozenset[int]
    ) -> dict[tuple[int, int], CompactRow]:
        """The compact rows of a small cluster read on the driver, with §6.4's replica states:
        online replicas are OnlineReplica, the others ReplicaDeletionIneligible."""
        rows = {}
        for r in partitions:
            replicas = tuple(r[s.REPLICAS])

            def mask(members: list[int], replicas: tuple[int, ...] = replicas) -> int:
                return sum(1 << k for k, b in enumerate(replicas) if b in members)

            row = CompactRow(
                topic_index=self.ctx.topics[r[s.TOPIC]].index,
                partition=r[s.PARTITION],
                replicas=replicas,
                isr=tuple(r[s.ISR]),
                replica_states=tuple(
                    ReplicaState.OnlineReplica
                    if b in online
                    else ReplicaState.ReplicaDeletionIneligible
                    for b in replicas
                ),
                adding_mask=mask(r[s.ADDING_REPLICAS]),
                removing_mask=mask(r[s.REMOVING_REPLICAS]),
                leader=r[s.LEADER],
                leader_epoch=r[s.LEADER_EPOCH],
                zk_version=r[s.ZK_VERSION],
                controller_epoch=r[s.CONTROLLER_EPOCH],
                state=PartitionState[r[s.STATE]],
            )
            rows[row.key] = row
        return rows

    def on_controller_failover(self) -> None:
        ctx, c = self.ctx, self.committer
        registered = get_all_brokers(self.zk, watch=self.brokers.broker_watch)
        ctx.set_live_brokers(LiveBroker(b.id, b.rack, b.epoch) for b in registered.values())
        limit = self.settings.driver_rows
        small = read_cluster_rows(self.zk, limit) if limit > 0 else None
        snapshot = None if small is not None else read_cluster(self.zk, self.spark, self.store)
        source = small if small is not None else snapshot
        assert source is not None
        for name, count in sorted(source.topic_partitions.items()):
            ctx.add_topic(name, count, topic_id=source.topic_ids.get(name))
        self.topics.assign_missing_topic_ids(ctx.topics)
        self.topics.load_topic_configs()
        self.topics.register_watches()
        self.deletion.register_watch()
        self.isr.register_isr_watches()
        self.elections.register_preferred_election_watch()
        self.deletion.on_failover()
        view = ctx.view()
        if ctx.deletion.topics_to_be_deleted:
            # fetchTopicDeletionsInProgress: a queued topic with a replica on a dead broker or a
            # partition being reassigned is ineligible before tryTopicDeletion first runs.
            queued = {
                n for n, t in ctx.topics.items() if t.index in ctx.deletion.topics_to_be_deleted
            }
            live = view.live.ids
            if small is not None:
                stuck = {
                    r[s.TOPIC]
                    for r in small.partitions
                    if r[s.TOPIC] in queued
                    and (any(b not in live for b in r[s.REPLICAS])
                         or r[s.ADDING_REPLICAS] or r[s.REMOVING_REPLICAS])
                }  # fmt: skip
            else:
                assert snapshot is not None
                stuck = _topics_ineligible_for_deletion(snapshot.partitions, queued, live)
            ctx.deletion.mark_topic_ineligible_for_deletion(ctx.topic_indices(stuck))
        # What ZooKeeper holds now: the failover's own writes are diffed against it.
        if small is not None:
            ctx.load_rows(self._loaded_rows(small.partitions, view.live.ids))
        else:
            assert snapshot is not None
            width = max(1, snapshot.width)
            compact = to_compact(snapshot.partitions, ctx.topics_frame(), width)
            # §6.4: online replicas are OnlineReplica, the others ReplicaDeletionIneligible ...
            compact = compact.withColumns(
                {
                    s.replica_state_col(k): F.when(
                        F.col(s.replica_col(k)) == s.EMPTY_SLOT,
                        F.lit(int(ReplicaState.NonExistentReplica)),
                    )
                    .when(view.online(k), F.lit(int(ReplicaState.OnlineReplica)))
                    .otherwise(F.lit(int(ReplicaState.ReplicaDeletionIneligible)))
                    .cast("byte")
                    for k in range(width)
                }
            )
            ctx.load(compact)
            snapshot.release()  # generation 0 holds the rows now
        if c.held_rows() is not None:
            # The failover's steps run on the driver: its own, the reassignments', the deletions'.
            step = c.driver_step("failover")
            assert step is not None
            rb.on_controller_failover(step, c.row_view(), c.unclean_rule(), ctx.deleting)
            self.reassignments.resume_reassignments()
            self.deletion.resume("failover")  # tryTopicDeletion
            self.elections.resume_preferred_elections()
            self.elections.schedule_auto_rebalance()
            return
        compact = c.table()
        # ... then the offline ones go OfflineReplica (ISR removal in ZK), §6.4 step 3.
        shrunk = replica_changes(
            compact,
            lambda b, k: ~view.online(k) & (b != s.EMPTY_SLOT),
            ReplicaState.OfflineReplica,
            view.controller_epoch,
        ).outcomes.withColumnRenamed(ISR_WRITES, hb.ISR_SHRINKS)
        # §5.4: partition state machine startup, then triggerOnlinePartitionStateChange.
        outcomes = hb.trigger_online_partition_state_change(
            shrunk, view, c.unclean_column(), deleting=ctx.deleting
        )
        c.stage(hb.with_election_counters(outcomes), "failover")
        self.reassignments.resume_reassignments()
        self.deletion.resume("failover")  # tryTopicDeletion
        self.elections.resume_preferred_elections()
        self.elections.schedule_auto_rebalance()


def _topics_ineligible_for_deletion(
    partitions: DataFrame, queued: set[str], live: frozenset[int]
) -> set[str]:
    """The ``queued`` topics of the public ``partitions`` table with a replica off the ``live``
    brokers or a partition being reassigned (one small aggregate, at failover only)."""
    offline = F.exists(F.col(s.REPLICAS), lambda b: ~b.isin(*sorted(live)) if live else F.lit(True))
    moving = (F.size(s.ADDING_REPLICAS) > 0) | (F.size(s.REMOVING_REPLICAS) > 0)
    rows = (
        partitions.where(F.col(s.TOPIC).isin(*sorted(queued)) & (offline | moving))
        .select(s.TOPIC)
        .distinct()
        .collect()
    )
    return {r[s.TOPIC] for r in rows}
