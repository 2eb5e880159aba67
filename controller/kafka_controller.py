"""One broker's controller module (Kafka's ``KafkaController``): lifecycle and event dispatch.

Every emulated broker runs one. The module that wins ``/controller`` becomes active: it loads the
context from ZooKeeper with the bulk store (spec §3.3), and from then on turns each event into
bulk transforms over the partitions table (``controller.handlers``), commits one generation per
event (``ControllerContext.commit``) and writes the changed partition states back to ZooKeeper,
fenced by its controller epoch. Events are processed one at a time on the event manager, exactly
in Kafka's order; ``ControllerMovedError`` makes a deposed controller resign (``maybe_resign``).
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from collections.abc import Callable, Collection, Sequence
from typing import Any

from kazoo.exceptions import NoNodeError
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from controller import events as ev
from controller.broker_events import BrokerEvents
from controller.checkpoint import local_checkpoint, release
from controller.context import ControllerContext, LiveBroker
from controller.diff import generation_diff, with_previous
from controller.election_events import ElectionEvents
from controller.event_manager import ControllerEventManager
from controller.gauges import Gauges
from controller.generation_commits import DiffTotals
from controller.handlers import brokers as hb
from controller.isr_events import IsrEvents
from controller.partition_store import PartitionStateStore, read_cluster
from controller.reassignment_events import ReassignmentEvents
from controller.records import ControllerSettings, EventRecord
from controller.requests import RequestCount, request_count
from controller.state_change_error_lines import error_lines
from controller.state_change_log import state_change_lines
from controller.state_change_store import EventStateChangeLog
from controller.state_writer import StateWrites, write_changed_states, write_totals
from controller.timer import Clock, Timer
from controller.topic_events import TopicEvents
from controller.zk.errors import ControllerMovedError
from controller.zk.fencing import Delete, FencedWriter
from controller.zk.kafka_zk_client import (
    get_all_brokers,
    get_controller_id,
    register_controller_and_increment_controller_epoch,
)
from controller.zk.paths import DELETE_TOPICS, ControllerZNode
from controller.zk.protocol import ZkClient
from statemachines import schemas as s
from statemachines.columns import in_topics
from statemachines.layout import to_compact
from statemachines.replica_states import ISR_WRITES, ReplicaState
from statemachines.replica_states import handle_state_changes as replica_changes
from statemachines.state_change_errors import ERRORS

log = logging.getLogger(__name__)

COUNTERS = (hb.ELECTED, hb.FAILED_ELECTION, hb.UNCLEAN_ELECTED, hb.ISR_SHRINKS)
FIRST_AUTO_REBALANCE_DELAY_MS = 5_000


class KafkaController(BrokerEvents, ElectionEvents, TopicEvents, ReassignmentEvents, IsrEvents):
    """The controller module of broker ``broker_id`` (see the module docstring).

    Event families live in their mixins (``controller.broker_events``, ``election_events``,
    ``topic_events``, ``reassignment_events``, ``isr_events``); this class owns the lifecycle,
    controller election and failover, and the commit point.
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
        self.timer = timer
        self.settings = settings or ControllerSettings()
        self.on_event = on_event or (lambda record: None)
        self.state_change_log = state_change_log
        self.ctx = ControllerContext(spark, delete_topic_enable=self.settings.delete_topic_enable)
        self.store = store
        self.events = ControllerEventManager(self, clock, controller_id=broker_id)
        self.active_controller_id = -1
        self._rebalance_task: Any = None
        self._record: EventRecord | None = None
        self.last_gauges: Gauges | None = None
        # Replaced at the last commit: freed at the next commit or when the event ends.
        self._retired: list[DataFrame | None] = []

    # -- lifecycle -----------------------------------------------------------------------------
    @property
    def is_active(self) -> bool:
        return self.active_controller_id == self.broker_id

    def startup(self) -> None:
        self.events.put(ev.Startup())

    # -- ControllerEventProcessor --------------------------------------------------------------
    def process(self, event: ev.ControllerEvent) -> None:
        handler = getattr(self, "process_" + _snake(type(event).__name__), None)
        record = EventRecord(
            self.broker_id, type(event).__name__, event.state.name, self.clock.now_ms()
        )
        self._record = record
        started = time.perf_counter()
        try:
            if handler is None:
                raise NotImplementedError(f"no handler for {type(event).__name__}")
            handler(event)
        except ControllerMovedError as err:
            log.info("[Controller id=%d] %s: controller moved (%s)", self.broker_id, event, err)
            record.failed = "ControllerMovedException"
            self.maybe_resign()
        except Exception as err:  # Kafka logs and carries on; the event loop must not die
            log.exception("[Controller id=%d] error processing %s", self.broker_id, event)
            record.failed = f"{type(err).__name__}: {err}"
        finally:
            # The event is over: nothing reads the generations it replaced any more.
            for retired in self._retired:
                release(retired)
            self._retired = []
            record.processing_ms = (time.perf_counter() - started) * 1000
            queue_time = self.events.metrics.event_queue_time_ms
            record.queue_time_ms = int(queue_time.recent[-1]) if queue_time.recent else 0
            record.queue_size = self.events.queue_size
            self._record = None
            self.on_event(record)

    def preempt(self, event: ev.ControllerEvent) -> None:
        callback = getattr(event, "callback", None)
        if callback is not None:
            callback("NOT_CONTROLLER")

    # -- controller election (spec §3) ---------------------------------------------------------
    def _controller_watch(self, watched: Any) -> None:
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
        self.active_controller_id = get_controller_id(self.zk, watch=self._controller_watch)
        if self.active_controller_id != -1:
            return
        try:
            epoch, version = register_controller_and_increment_controller_epoch(
                self.zk, self.broker_id, self.clock.now_ms()
            )
        except ControllerMovedError:
            self.maybe_resign()
            return
        self.ctx.epoch, self.ctx.epoch_zk_version = epoch, version
        self.active_controller_id = self.broker_id
        log.info("[Controller id=%d] won the election, epoch %d", self.broker_id, epoch)
        self.on_controller_failover()

    def maybe_resign(self) -> None:
        was_active = self.is_active
        self.active_controller_id = get_controller_id(self.zk, watch=self._controller_watch)
        if was_active and not self.is_active:
            self.on_controller_resignation()

    def on_controller_resignation(self) -> None:
        if self._rebalance_task is not None:
            self._rebalance_task.cancel()
            self._rebalance_task = None
        # A deposed controller's tables are dead: free their blocks now, not at some JVM GC.
        for dead in (*self._retired, *self.ctx.store.frames()):
            release(dead)
        self._retired = []
        self.ctx.reset()
        self.last_gauges = None

    def trigger_controller_move(self) -> None:
        self.active_controller_id = get_controller_id(self.zk)
        if not self.is_active:
            return
        epoch_zk_version = self.ctx.epoch_zk_version
        self.active_controller_id = -1
        self.on_controller_resignation()
        with contextlib.suppress(ControllerMovedError, NoNodeError):
            FencedWriter(self.zk, epoch_zk_version).multi([Delete(ControllerZNode.path())])

    # -- failover (spec §3.3) ------------------------------------------------------------------
    def on_controller_failover(self) -> None:
        registered = get_all_brokers(self.zk, watch=self._broker_watch)
        self.ctx.live_brokers = {
            b.id: LiveBroker(b.id, b.rack, b.epoch) for b in registered.values()
        }
        self.ctx.shutting_down.clear()
        snapshot = read_cluster(self.zk, self.spark, self.store)
        for name, count in sorted(snapshot.topic_partitions.items()):
            self.ctx.add_topic(name, count)
        self.load_topic_configs()
        self.register_topic_watches()
        self.register_isr_watches()
        queued = set(self.zk.get_children(DELETE_TOPICS)) & set(self.ctx.topics)
        if queued and self.ctx.deletion.enabled:
            self.ctx.deletion.topics_to_be_deleted |= set(self.ctx.topic_indices(queued))
        width = max(1, snapshot.width)
        compact = to_compact(snapshot.partitions, self.ctx.topics_frame(), width)
        view = self.ctx.view()
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
        # What ZooKeeper holds now: the failover's own writes are diffed against it.
        self.ctx.load(compact)
        snapshot.release()  # generation 0 holds the rows now
        compact = self._table()
        # ... then the offline ones go OfflineReplica (ISR removal in ZK), §6.4 step 3.
        shrunk = replica_changes(
            compact,
            lambda b, k: ~view.online(k) & (b != s.EMPTY_SLOT),
            ReplicaState.OfflineReplica,
            view.controller_epoch,
        ).outcomes.withColumnRenamed(ISR_WRITES, hb.ISR_SHRINKS)
        # §5.4: partition state machine startup, then triggerOnlinePartitionStateChange.
        outcomes = hb.trigger_online_partition_state_change(
            shrunk, view, self._unclean_column(), deleting=self.ctx.deleting
        )
        self._commit(hb.with_election_counters(outcomes), "failover")
        self.resume_reassignments()
        if self.ctx.deletion.topics_to_be_deleted:  # tryTopicDeletion
            self.apply_deletion_step(
                self.ctx.deletion.resume_deletions(self._table(), self.ctx.view()), "failover"
            )
        if self.settings.auto_leader_rebalance_enable:
            self._schedule_auto_rebalance(FIRST_AUTO_REBALANCE_DELAY_MS)

    # -- helpers ---------------------------------------------------------------------------------
    def _table(self, scope: Column | None = None, named: DataFrame | None = None) -> DataFrame:
        """The committed generation, each row with its own values beside it: handlers carry
        them, so the commit can tell what changed without joining two generations
        (``controller.diff``). ``scope``: only the rows an event may touch; ``named``: only
        the rows of these keys (a small frame of ``topic_index``, ``partition``). Commit
        either's result with ``partial``."""
        table = self.ctx.partitions
        assert table is not None, "no generation yet: the controller is not active"
        if named is not None:
            table = self.ctx.store.rows_named(named)
        return with_previous(table if scope is None else table.where(scope), self.ctx.generation)

    def _width(self) -> int:
        """The committed generation's width (replica slots)."""
        assert self.ctx.partitions is not None, "no generation yet: the controller is not active"
        return s.width(self.ctx.partitions)

    def _unclean_column(self) -> Any:
        """Per-row effective unclean.leader.election.enable: topic config over broker default."""
        default = str(self.settings.unclean_leader_election_enable).lower()
        key = "unclean.leader.election.enable"
        enabled = {n for n, t in self.ctx.topics.items() if t.config.get(key, default) == "true"}
        return in_topics(self.ctx.topic_indices(enabled))

    def _commit(
        self,
        table: DataFrame,
        label: str,
        extra: tuple[str, ...] = (),
        write_zk: bool = True,
        kept: tuple[str, ...] = (),
        partial: bool = False,
    ) -> Gauges:
        """Commit the next generation, mirror its changed states into ZooKeeper (unless they
        came from there), keep the topic znodes in step, and add to the event's record.

        ``kept``: per-row columns of ``table`` that stay in ``ctx.committed``; ``partial``:
        ``table`` holds only the rows the event may have touched, the rest are unchanged (see
        ``ControllerContext.commit``)."""
        counters = tuple(dict.fromkeys(c for c in (*COUNTERS, *extra) if c in table.columns))
        previous = self.ctx.partitions
        topics = self.ctx.topics_frame()  # before any completed deletion drops names
        live, deleting = self.ctx.view().live_or_shutting_down.ids, self.ctx.deleting
        counts: list[RequestCount] = []
        totals_of = event_totals(live, deleting, counts)
        gauges = self.ctx.commit(table, label, counters, kept, totals_of, partial)
        committed = self.ctx.committed
        assert committed is not None and self.ctx.partitions is not None
        written, requests = StateWrites(0, 0), {}
        lines: DataFrame | None = None
        diff: DataFrame | None = None
        if previous is not None:
            # What the event changed: writes, broker requests and the state-change log read that
            # small frame. A stamped commit materialised it and its totals; otherwise the two
            # generations are joined, and the first pass over the diff totals it.
            diff, totals = self.ctx.diff, self.ctx.diff_totals
            if diff is None or totals is None:
                diff = local_checkpoint(generation_diff(previous, self.ctx.partitions), False)
                frame, aggregates = totals_of(diff)
                totals = frame.agg(*aggregates).first()
                assert totals is not None
            store = self.store if write_zk else None
            written = write_changed_states(store, topics, diff, self.ctx.epoch_zk_version, totals)
            requests = counts[-1].totals(totals)
            if self.state_change_log is not None:
                lines = state_change_lines(diff, topics, self.broker_id, self.ctx.epoch)
        if self.state_change_log is not None:
            if gauges.counters.get(ERRORS):  # transitions Kafka rejected or failed: ERROR lines
                live = self.ctx.live_broker_ids.ids
                errors = error_lines(committed, topics, self.broker_id, self.ctx.epoch, live)
                lines = errors if lines is None else lines.unionByName(errors)
            if lines is not None:
                self.state_change_log.append(lines, self.clock.now_ms())
        self.after_reassignment_commit(committed, gauges.counters)
        # An event may still read the generation it started from after committing (a deletion
        # step collects its facts then), so blocks are freed one commit later, or when the
        # event ends (``process``).
        for retired in self._retired:
            release(retired)
        self._retired = [*self.ctx.store.replaced, diff]
        self.last_gauges = gauges
        if self._record is not None:
            record = self._record
            for name, value in gauges.counters.items():
                record.counters[name] = record.counters.get(name, 0) + value
            record.gauges = gauges
            record.zk_writes += written.znode_writes
            record.partitions_changed += written.partitions_changed
            record.commits += 1
            for kind, n in requests.items():
                record.requests[kind] = record.requests.get(kind, 0) + n
        return gauges

    def reassigning_partitions(self) -> int:
        """Partitions with a reassignment in flight, as of the last commit."""
        return self.last_gauges.reassigning_partitions if self.last_gauges is not None else 0


def event_totals(
    live_or_shutting_down: Collection[int], deleting: Sequence[int], counts: list[RequestCount]
) -> DiffTotals:
    """What a commit totals over an event's diff: the ZooKeeper write's and the broker
    requests' (``ControllerContext.commit``'s ``diff_totals``). Each request count is appended
    to ``counts``, whose last one reads the totals back."""

    def totals(diff: DataFrame) -> tuple[DataFrame, tuple[Column, ...]]:
        counts.append(request_count(diff, live_or_shutting_down, deleting))
        return counts[-1].frame, (*write_totals(), *counts[-1].aggregates)

    return totals


def _snake(name: str) -> str:
    """``BrokerChange`` -> ``broker_change``: handler names follow the event names."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()
