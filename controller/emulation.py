"""Emulated brokers around the controller: registration, crashes, controlled shutdown.

An ``EmulatedCluster`` owns one ZooKeeper session per broker (in-memory by default) and one
``KafkaController`` module per broker. A crash expires the broker's session, so its ephemeral
``/brokers/ids/<id>`` (and ``/controller``, if it held it) vanish and the watches fire exactly as
on a real ensemble. ``drain`` delivers watches and runs every controller's queue until nothing
is left, deterministically, on the calling thread.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from pyspark.sql import SparkSession

from controller import events as ev
from controller.kafka_controller import KafkaController
from controller.records import ControllerSettings, EventRecord
from controller.timer import Timer, VirtualClock
from controller.zk.kafka_zk_client import create_persistent_paths, register_broker
from controller.zk.memory import InMemoryZooKeeper
from controller.zk.protocol import ZkClient

log = logging.getLogger(__name__)

CONTROLLED_SHUTDOWN_MAX_RETRIES = 3


@dataclass
class EmulatedBroker:
    id: int
    rack: str | None
    zk: ZkClient
    controller: KafkaController
    epoch: int = -1
    registered: bool = False
    alive: bool = True  # the process runs (a crashed broker processes nothing)


@dataclass
class EmulatedCluster:
    """Brokers, their controller modules, one ZooKeeper, one virtual clock."""

    spark: SparkSession
    store: InMemoryZooKeeper
    settings: ControllerSettings = field(default_factory=ControllerSettings)
    on_event: Callable[[EventRecord], None] | None = None
    topic_unclean: Callable[[str], bool] | None = None
    clock: VirtualClock = field(default_factory=VirtualClock)
    brokers: dict[int, EmulatedBroker] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.timer = Timer(self.clock)

    # -- brokers -------------------------------------------------------------------------------
    def add_broker(self, broker_id: int, rack: str | None = None) -> EmulatedBroker:
        """A broker process (not yet registered): its ZooKeeper session and controller module."""
        zk = self.store.client()
        zk.start()
        create_persistent_paths(zk)
        controller = KafkaController(
            broker_id, zk, self.spark, self.clock, self.timer, self.settings,
            self.on_event, self.topic_unclean,
        )  # fmt: skip
        broker = EmulatedBroker(broker_id, rack, zk, controller)
        self.brokers[broker_id] = broker
        return broker

    def start_broker(self, broker_id: int, start_controller: bool = True) -> None:
        """Register ``/brokers/ids/<id>`` (a new broker epoch) and start its controller module."""
        broker = self.brokers[broker_id]
        if not broker.alive:  # a restart is a new process with a new session
            broker = self.add_broker(broker_id, broker.rack)
        broker.epoch = register_broker(broker.zk, broker_id, broker.rack, self.clock.now_ms())
        broker.registered = True
        if start_controller:
            broker.controller.startup()

    def crash(self, broker_id: int) -> None:
        """A hard failure: the session expires, the broker's ephemerals vanish."""
        broker = self.brokers[broker_id]
        session = broker.zk.client_id
        assert session is not None
        broker.controller.events.clear_and_put(ev.Expire())
        broker.controller.events.run_until_idle()
        broker.alive = broker.registered = False
        self.store.expire_session(session[0], reconnect=False)

    def expire_session(self, broker_id: int) -> None:
        """ZooKeeper session expiry (spec §3.6): Expire, then re-register and RegisterBrokerAndReelect."""
        broker = self.brokers[broker_id]
        session = broker.zk.client_id
        assert session is not None
        broker.controller.events.clear_and_put(ev.Expire())
        self.drain()
        self.store.expire_session(session[0], reconnect=True)
        broker.epoch = register_broker(broker.zk, broker_id, broker.rack, self.clock.now_ms())
        broker.controller.events.put(ev.RegisterBrokerAndReelect())

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
        """Deliver watches and run every controller's queued events until all are idle."""
        for _ in range(max_rounds):
            self.store.wait_idle()
            ran = sum(b.controller.events.run_until_idle() for b in self.running())
            self.store.wait_idle()
            if ran == 0 and all(b.controller.events.queue_size == 0 for b in self.running()):
                return
        raise RuntimeError("the controllers did not settle")

    def advance_to(self, at_ms: int) -> None:
        """Move virtual time, firing periodic tasks (and draining after each)."""
        self.timer.run_until(at_ms, after_each=lambda _now: self.drain())
        self.drain()
