"""Emulated brokers around the controller: registration, crashes, controlled shutdown, ISR.

An ``EmulatedCluster`` owns one ZooKeeper session per broker on the ensemble it is given (whose
znode times then follow the cluster's virtual clock), and one ``KafkaController`` module per
broker, each with the ensemble's partition-state store for its session. A crash expires the
broker's session, so its ephemeral ``/brokers/ids/<id>`` (and ``/controller``, if it held it)
vanish and the watches fire exactly as on a real ensemble: at once (``crash``: the session
closes with the process), or ``session_timeout_ms`` later (``crash_unnoticed``: a real crash; the
process serves nothing meanwhile, but the ensemble, and so the controller, still count it
registered, spec §3.6). ``drain`` delivers watches and runs
every controller's queue until nothing is left, deterministically, on the calling thread.

With ``model_replication`` the brokers' logs decide the ISR (``replication``). Without it,
followers outside the ISR (``Gauges.lagging_followers``) are added back ``catch_up_ms`` later
through the normal ISR-change path: AlterIsr (IBP >= 2.7-IV2), or the leader's own state-znode
write plus ``/isr_change_notification``; ``catch_up_ms`` 0 is exact, and a value past the end
of the run keeps them out.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from kazoo.exceptions import BadVersionError, NoNodeError
from pyspark.sql import DataFrame, SparkSession

from controller.commit.checkpoint import local_checkpoint, release
from controller.commit.state_change_store import EventStateChangeLog
from controller.emulation.catch_up import Rejoining, rejoining, rejoining_frame
from controller.emulation.replication import Replication
from controller.emulation.replication_records import ReplicationSettings
from controller.events import controller_events as ev
from controller.events.event_manager import ControllerEventManager
from controller.kafka_controller import KafkaController
from controller.partition_store import STATE_COLUMNS, Ensemble, PartitionStateStore
from controller.records import ControllerSettings, EventRecord
from controller.scheduler.timer import Timer, VirtualClock
from controller.zk import admin_zk_client as admin
from controller.zk.kafka_zk_client import create_persistent_paths, register_broker
from controller.zk.paths import PartitionStateZNode
from controller.zk.protocol import ZkClient
from statemachines import schemas as s

log = logging.getLogger(__name__)

CONTROLLED_SHUTDOWN_MAX_RETRIES = 3
FRAME_CATCH_UP_ROWS = 100_000


def session_id(zk: ZkClient) -> int | None:
    client_id = zk.client_id
    return None if client_id is None else client_id[0]


@dataclass
class EmulatedBroker:
    id: int
    rack: str | None
    zk: ZkClient
    controller: KafkaController
    epoch: int = -1
    registered: bool = False
    session: int | None = None  # the ZooKeeper session its registration lives in
    alive: bool = True  # the process runs (a crashed broker processes nothing)


@dataclass
class EmulatedCluster:
    """Brokers, their controller modules, one ZooKeeper, one virtual clock."""

    spark: SparkSession
    zookeeper: Ensemble
    settings: ControllerSettings = field(default_factory=ControllerSettings)
    on_event: Callable[[EventRecord], None] | None = None
    clock: VirtualClock = field(default_factory=VirtualClock)
    brokers: dict[int, EmulatedBroker] = field(default_factory=dict)
    catch_up_ms: int = 0
    # Past this many partitions a catch-up's AlterIsr requests carry Spark frames: Python items
    # for millions of partitions cost more than the commit itself (and the driver's memory).
    frame_catch_up_rows: int = FRAME_CATCH_UP_ROWS
    alter_isr: bool = True  # inter.broker.protocol.version >= 2.7-IV2
    state_change_log: EventStateChangeLog | None = None
    replication: Replication | None = None  # the brokers' logs, when the scenario models them
    session_timeout_ms: int = 18_000  # zookeeper.session.timeout.ms: a crashed broker's session

    def __post_init__(self) -> None:
        self.timer = Timer(self.clock)
        self.zookeeper.use_clock(self.clock.now_ms)
        self.admin = self.zookeeper.client()
        self.states: PartitionStateStore = self.zookeeper.state_store(self.admin)
        self._catch_up_at: set[int] = set()
        self._catch_up_due = False
        self._sent: list[DataFrame] = []  # catch-up frames the controllers' requests read
        self.failed_log_dirs: set[int] = set()  # brokers whose log directory failed

    def _observe(self, record: EventRecord) -> None:
        """Every processed event: schedule the followers' catch-up when some lag."""
        if self.on_event is not None:
            self.on_event(record)
        if record.commits and record.event in ("Startup", "Reelect", "RegisterBrokerAndReelect"):
            # A new controller learns offline log dirs from LeaderAndIsr responses
            # (KAFKA_STORAGE_ERROR); the brokers tell it through their notification.
            for b in sorted(self.failed_log_dirs):
                self.log_dir_failure(b)
        if self.replication is not None:
            return  # followers rejoin when their logs catch up
        if record.gauges is None or record.gauges.lagging_followers == 0:
            return
        if self.catch_up_ms == 0:
            self._catch_up_due = True
            return
        at = self.clock.now_ms() + self.catch_up_ms
        if at not in self._catch_up_at:
            self._catch_up_at.add(at)
            self.timer.schedule_at(at, lambda: self._fire_catch_up(at))

    def _fire_catch_up(self, at: int) -> None:
        self._catch_up_at.discard(at)
        self.catch_up()

    # -- brokers -------------------------------------------------------------------------------
    def add_broker(self, broker_id: int, rack: str | None = None) -> EmulatedBroker:
        """A broker process (not yet registered): its ZooKeeper session and controller module."""
        zk = self.zookeeper.client()
        create_persistent_paths(zk)
        controller = KafkaController(
            broker_id, zk, self.spark, self.clock, self.timer, self.settings,
            self._observe, self.state_change_log, store=self.zookeeper.state_store(zk),
        )  # fmt: skip
        broker = EmulatedBroker(broker_id, rack, zk, controller)
        self.brokers[broker_id] = broker
        return broker

    def start_broker(self, broker_id: int, start_controller: bool = True) -> None:
        """Register ``/brokers/ids/<id>`` (a new broker epoch) and start its controller module."""
        broker = self.brokers[broker_id]
        self.failed_log_dirs.discard(broker_id)
        restarted = not broker.alive
        if restarted:  # a restart is a new process with a new session
            broker = self.add_broker(broker_id, broker.rack)
        self._register(broker)
        if self.replication is not None:
            self.replication.broker_started(broker_id, restarted)
        if start_controller:
            broker.controller.startup()

    def crash(self, broker_id: int) -> None:
        """The process stops and its session closes with it: the ephemerals vanish at once."""
        if self._stop(broker_id):
            self._end_session(broker_id, self.brokers[broker_id].zk)

    def crash_unnoticed(self, broker_id: int) -> int | None:
        """A real crash: the process stops now, but ZooKeeper expires its session only after
        ``session_timeout_ms`` without a heartbeat; until then ``/brokers/ids/<id>`` (and
        ``/controller``) stay and no controller acts. The time the session ends (None: the broker
        was down already)."""
        if not self._stop(broker_id):
            return None
        at = self.clock.now_ms() + self.session_timeout_ms
        zk = self.brokers[broker_id].zk
        self.timer.schedule_at(at, functools.partial(self._end_session, broker_id, zk))
        return at

    def _stop(self, broker_id: int) -> bool:
        """The broker's process stops (its controller module resigns in-process, its timers
        with it); false if it was not running (e.g. it finished a controlled shutdown)."""
        broker = self.brokers[broker_id]
        if not broker.alive:
            return False
        broker.controller.events.clear_and_put(ev.Expire())
        broker.controller.events.run_until_idle()
        broker.alive = False
        if self.replication is not None:
            self.replication.broker_stopped()
        return True

    def _end_session(self, broker_id: int, zk: ZkClient) -> None:
        """The crashed broker's session ends: its ephemerals vanish and the watches fire."""
        self.brokers[broker_id].registered = False
        self.zookeeper.expire_session(zk, reconnect=False)

    def expire_session(self, broker_id: int) -> None:
        """ZooKeeper session expiry (spec §3.6): Expire, then re-register and RegisterBrokerAndReelect."""
        if self.lose_session(broker_id):
            self.reconnect(broker_id)

    def lose_session(self, broker_id: int) -> bool:
        """The session expires while the process lives on: its ephemerals vanish; true if any."""
        broker = self.brokers[broker_id]
        if not broker.alive or not broker.registered:
            return False
        broker.controller.events.clear_and_put(ev.Expire())
        self.drain()
        broker.zk = self.zookeeper.expire_session(broker.zk, reconnect=True)
        broker.registered = False
        return True

    def reconnect(self, broker_id: int) -> None:
        """Back in reach of ZooKeeper: a new registration (epoch), ``RegisterBrokerAndReelect``."""
        broker = self.brokers[broker_id]
        if not broker.alive or broker.registered:
            return
        self._register(broker)
        # The watches these fired queue their events first: queued from the ZooKeeper
        # dispatcher and from here at once, the order changed from run to run.
        self.zookeeper.wait_idle()
        broker.controller.events.put(ev.RegisterBrokerAndReelect())

    def _register(self, broker: EmulatedBroker) -> None:
        broker.epoch = register_broker(broker.zk, broker.id, broker.rack, self.clock.now_ms())
        broker.registered = True
        broker.session = session_id(broker.zk)

    def renew_lost_sessions(self) -> None:
        """A registered broker whose session the server expired on its own (say, a ZooKeeper
        restart it did not reconnect to in time) goes through what Kafka's ``ZooKeeperClient``
        does on a new session (spec §3.6): ``Expire``, then a new registration and
        ``RegisterBrokerAndReelect``. Its ephemerals are gone already, as on a real server."""
        for broker in self.running():
            if not broker.registered or session_id(broker.zk) == broker.session:
                continue
            log.warning("broker %d: ZooKeeper session expired; registering again", broker.id)
            broker.controller.events.clear_and_put(ev.Expire())
            self._run_queued(broker.controller.events)
            broker.registered = False
            self.reconnect(broker.id)

    def controlled_shutdown(self, broker_id: int) -> int:
        """Kafka's clean shutdown: ControlledShutdown requests with retries, then deregister.

        Returns the partitions still led by the broker after the last attempt.
        """
        broker = self.brokers[broker_id]
        remaining = -1
        for _attempt in range(CONTROLLED_SHUTDOWN_MAX_RETRIES):
            active = self.active_controller()
            if active is None:
                break
            answer: dict[str, object] = {}

            def reply(error: str, left: int = 0, answer: dict[str, object] = answer) -> None:
                answer.update(error=error, remaining=left)

            active.events.put(ev.ControlledShutdown(broker_id, broker.epoch, reply))
            self.drain()
            remaining = int(answer.get("remaining", -1))  # type: ignore[call-overload]
            if answer.get("error") == "NONE" and remaining == 0:
                break
        self.crash(broker_id)
        return remaining

    # -- the controller ------------------------------------------------------------------------
    def running(self) -> list[EmulatedBroker]:
        return [b for b in self.brokers.values() if b.alive]

    def active_controller(self) -> KafkaController | None:
        return next((b.controller for b in self.running() if b.controller.is_active), None)

    def drain(self, max_rounds: int = 1000) -> None:
        """Deliver watches and run every controller's queued events until all are idle
        (followers due to catch up now do so, which may queue more events)."""
        for _ in range(max_rounds):
            self.zookeeper.wait_idle()
            self.renew_lost_sessions()
            ran = sum(self._run_queued(b.controller.events) for b in self.running())
            if ran == 0 and all(b.controller.events.queue_size == 0 for b in self.running()):
                if self.replication is not None and self.replication.settle():
                    continue  # the leaders sent AlterIsr requests
                if not self._catch_up_due:
                    for frame in self._sent:  # every request sent is answered
                        release(frame)
                    self._sent.clear()
                    return
                self._catch_up_due = False
                self.catch_up()
        raise RuntimeError("the controllers did not settle")

    def _run_queued(self, events: ControllerEventManager) -> int:
        """Run a controller's queued events one at a time, delivering the watches each one
        fired before the next: the events they queue, on any controller, then come in the
        same order however long each event took."""
        ran = 0
        while (queued := events.queue_size) > 0:
            done = events.run_until_idle(max_events=1)
            self.zookeeper.wait_idle()
            if done == 0 and events.queue_size >= queued:
                break  # the manager stopped: its queue is dead
            ran += done
        return ran

    # -- what partition leaders do -------------------------------------------------------------
    def isr_change(self, topic: str, partition: int, isr: list[int]) -> None:
        """The leader of ``topic-partition`` changes its ISR (§12.4 / §12.5)."""
        path = PartitionStateZNode.path(topic, partition)
        data, stat = self.admin.get(path)
        state = PartitionStateZNode.decode(data, path)
        leader = self.brokers.get(state.leader)
        if leader is None or not leader.alive:
            log.warning(
                "isr_change for %s-%d: leader %d is not running", topic, partition, state.leader
            )
            return
        if self.alter_isr:
            item = ev.AlterIsrItem(state.leader_epoch, tuple(isr), stat.version)
            self._send_alter_isr(state.leader, {ev.TopicPartition(topic, partition): item})
        else:
            admin.update_leader_and_isr(leader.zk, topic, partition, isr)
            admin.propagate_isr_changes(leader.zk, [(topic, partition)])

    def isr_changes(self, changes: Sequence[tuple[str, int, list[int]]]) -> None:
        """Leaders change many ISRs in one pass, as Kafka's ISR expiration task shrinks every
        lagging partition of its broker; each change is an ``isr_change``."""
        self.states.prefetch([(t, p) for t, p, _ in changes])
        for topic, partition, isr in changes:
            self.isr_change(topic, partition, isr)

    def _send_alter_isr(self, leader: int, items: dict[ev.TopicPartition, ev.AlterIsrItem]) -> None:
        active = self.active_controller()
        if active is not None:
            epoch = self.brokers[leader].epoch
            active.events.put(ev.AlterIsrReceived(leader, epoch, items))

    def catch_up(self) -> None:
        """Every lagging live follower rejoins its leader's ISR (appended, in replica order)."""
        active = self.active_controller()
        if active is None or active.ctx.partitions is None:
            return
        ctx = active.ctx
        if ctx.table.driver is None:
            self._catch_up_frame(active)
            return
        rows = rejoining(ctx)
        if not self.alter_isr:
            self.states.write_state_rows([(*r, 1) for r in rows], ctx.epoch_zk_version)
            admin.propagate_isr_changes(self.admin, [(r[0], r[1]) for r in rows])
            return
        self._send_items(rows)

    def _catch_up_frame(self, active: KafkaController) -> None:
        """``catch_up`` over the Spark table, evaluated once. Past ``frame_catch_up_rows``
        partitions, the leaders' proposals stay a frame: each leader's request is its rows of
        it (an ``AlterIsrFrame``)."""
        ctx = active.ctx
        frame = local_checkpoint(rejoining_frame(ctx))
        if not self.alter_isr:
            self.states.write_states(frame.select(*STATE_COLUMNS), ctx.epoch_zk_version)
            keys = [(r[0], r[1]) for r in frame.select(s.TOPIC, s.PARTITION).collect()]
            release(frame)
            admin.propagate_isr_changes(self.admin, keys)
            return
        counts = sorted(tuple(r) for r in frame.groupBy(s.LEADER).count().collect())
        if sum(n for _, n in counts) <= self.frame_catch_up_rows:
            self._send_items([tuple(r) for r in frame.collect()])  # type: ignore[misc]
            release(frame)
            return
        self._sent.append(frame)  # read by the controller's commit; freed once it is idle
        for leader, rows in counts:
            epoch = self.brokers[leader].epoch
            request = ev.AlterIsrReceived(leader, epoch, frame=ev.AlterIsrFrame(frame, rows))
            active.events.put(request)

    def _send_items(self, rows: list[Rejoining]) -> None:
        by_leader: dict[int, dict[ev.TopicPartition, ev.AlterIsrItem]] = {}
        for topic, partition, leader, epoch, isr, _cepoch, version in rows:
            item = ev.AlterIsrItem(epoch, tuple(isr), version)
            by_leader.setdefault(leader, {})[ev.TopicPartition(topic, partition)] = item
        for leader, items in sorted(by_leader.items()):
            self._send_alter_isr(leader, items)

    def log_dir_failure(self, broker_id: int) -> None:
        """The broker's (single) log directory fails; it tells the controller through ZooKeeper.
        The directory stays failed until the broker restarts."""
        broker = self.brokers[broker_id]
        if broker.alive and broker.registered:
            self.failed_log_dirs.add(broker_id)
            admin.notify_log_dir_failure(broker.zk, broker_id)

    def advance_to(self, at_ms: int, quiet: Callable[[int], object] = lambda _now: None) -> None:
        """Move virtual time (replicas first); after each task run, drain, then ``quiet(now)``."""
        before = self.replication.advance_to if self.replication is not None else None
        self.timer.run_until(
            at_ms, after_each=lambda t: (self.drain(), quiet(t)), before_each=before
        )
        if self.replication is not None:
            self.replication.advance_to(at_ms)
        self.drain()

    # -- replication below the controller ------------------------------------------------------
    def model_replication(self, settings: ReplicationSettings) -> Replication:
        """From now on the brokers' logs decide when followers fall out of and rejoin the ISR."""
        self.replication = Replication(
            self.spark,
            settings,
            alive=lambda b: b in self.brokers and self.brokers[b].alive,
            broker_zk=lambda b: self.brokers[b].zk,
            broker_epoch=lambda b: self.brokers[b].epoch,
            active=self.active_controller,
            schedule_at=lambda at, action: self.timer.schedule_at(at, action),
            write_isr=self.write_leader_isr,
        )
        for b in self.brokers.values():
            if b.registered:
                self.replication.broker_started(b.id, restarted=False)
        return self.replication

    def write_leader_isr(
        self, rows: list[tuple[str, int, int, int, list[int], int, int]]
    ) -> list[int]:
        """Leaders write their partitions' new ISRs themselves (§12.4 step 1): same leader and
        epochs, conditional on the znode version they hold. The new versions (-1: refused)."""
        self.states.prefetch([(r[0], r[1]) for r in rows])
        out = []
        for topic, partition, leader, epoch, isr, cepoch, version in rows:
            data = PartitionStateZNode.encode_fields(leader, epoch, isr, cepoch)
            path = PartitionStateZNode.path(topic, partition)
            try:
                out.append(self.brokers[leader].zk.set(path, data, version=version).version)
            except (BadVersionError, NoNodeError):
                out.append(-1)
        return out
