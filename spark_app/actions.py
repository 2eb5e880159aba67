"""What brokers, operators and admin clients do for each scenario event: ``ACTIONS`` maps every
scenario event type to one method of ``Actor``, the only place scenario events become actions.

Admin requests write ZooKeeper as Kafka's ``AdminZkClient`` does (spec §9, §10) after its checks
(``admin_validation``); API requests go to the active controller's queue. Assignments use Kafka's
algorithm over the registered brokers with the scenario's seeded random draws.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable
from typing import Any

from kazoo.exceptions import NodeExistsError

from controller.emulation.cluster import EmulatedCluster
from controller.emulation.replication import Replication
from controller.events import controller_events as ev
from controller.kafka_controller import KafkaController
from controller.zk import admin_zk_client as admin
from controller.zk.kafka_zk_client import get_all_brokers
from controller.zk.paths import BROKER_TOPICS, DeleteTopicZNode
from spark_app.admin_validation import (
    AdminRequestError,
    new_partitions_assignment,
    place_replicas,
    validate_topic_create,
    validate_topic_exists,
)
from spark_app.scenario import events as se
from statemachines.assignment import BrokerMetadata
from statemachines.election_kinds import ElectionTrigger


class Actor:
    """Plays scenario events on an emulated cluster; ``apply`` raises ``AdminRequestError`` for
    an admin request Kafka rejects (nothing is written then)."""

    def __init__(self, cluster: EmulatedCluster, seed: int) -> None:
        self.cluster = cluster
        self.zk = cluster.admin
        self.rng = random.Random(seed)
        # The AlterPartitionReassignments requests the controller refused (some partition's
        # error, or a top-level one), one line each, as the admin client reads them back.
        self.api_refusals: list[str] = []

    def apply(self, event: se.ScenarioEvent) -> None:
        ACTIONS[type(event)](self, event)

    # -- what the admin reads ------------------------------------------------------------------

    def registered_brokers(self) -> list[BrokerMetadata]:
        brokers = get_all_brokers(self.zk)
        return [BrokerMetadata(b, brokers[b].rack) for b in sorted(brokers)]

    def topics(self) -> list[str]:
        return list(self.zk.get_children(BROKER_TOPICS))

    def controller(self) -> KafkaController | None:
        return self.cluster.active_controller()

    def alter_reassignments(self, entries: dict[ev.TopicPartition, tuple[int, ...] | None]) -> None:
        active = self.controller()
        if active is not None:
            active.events.put(ev.ApiPartitionReassignment(entries, self._reassignment_answer))

    def _reassignment_answer(self, answer: object) -> None:
        """The controller's answer: a top-level error, or each partition's (``NONE``: done)."""
        if isinstance(answer, str):
            refused = [] if answer == "NONE" else [answer]
        else:
            refused = [
                f"{tp.topic}-{tp.partition}: {e}" for tp, e in dict(answer).items() if e != "NONE"
            ]  # type: ignore[call-overload]
        if refused:
            self.api_refusals.append(", ".join(refused))

    # -- brokers -------------------------------------------------------------------------------

    def broker_failure(self, event: se.BrokerFailure) -> None:
        for b in event.brokers:
            if event.detection == "session_timeout":
                self.cluster.crash_unnoticed(b)
            else:
                self.cluster.crash(b)

    def broker_startup(self, event: se.BrokerStartup) -> None:
        for b in event.brokers:
            self.cluster.start_broker(b)

    def controlled_shutdown(self, event: se.ControlledShutdown) -> None:
        self.cluster.controlled_shutdown(event.broker)

    def zk_session_expiry(self, event: se.ZkSessionExpiry) -> None:
        # ZooKeeper expires a session on its own clock: the ephemerals vanish and the other
        # brokers' watches fire at once (a new controller is elected, the broker's death is
        # processed), while the broker learns of it only once it reaches the server again, then
        # registers anew (spec §3.6). Real Kafka 2.8 does exactly this (docs/fidelity.md).
        if self.cluster.lose_session(event.broker):
            self.cluster.drain()
            self.cluster.reconnect(event.broker)

    def isr_change(self, event: se.IsrChange) -> None:
        self.cluster.isr_change(event.topic, event.partition, list(event.isr))

    def log_dir_failure(self, event: se.LogDirFailure) -> None:
        self.cluster.log_dir_failure(event.broker)

    # -- brokers and producers, below the controller (replication) ----------------------------

    def replication(self) -> Replication:
        if self.cluster.replication is None:  # the model turns it on for these events
            raise RuntimeError("replication events need emulation.replication")
        return self.cluster.replication

    def produce(self, event: se.Produce) -> None:
        topics = None if event.topic == se.ALL_TOPICS else [event.topic]
        self.replication().produce(topics, event.partition, event.records, str(event.acks))

    def set_produce_rate(self, event: se.SetProduceRate) -> None:
        topics = None if event.topic == se.ALL_TOPICS else [event.topic]
        self.replication().set_rate(topics, event.records_per_s, event.bytes_per_record)

    def fetch_stop(self, event: se.FetchStop) -> None:
        self.replication().until(event.brokers, "stopped_until", event.duration)

    def broker_pause(self, event: se.BrokerPause) -> None:
        self.replication().until(event.brokers, "paused_until", event.duration)
        self._unreachable_from_zookeeper(event.brokers, event.duration)

    def slow_broker(self, event: se.SlowBroker) -> None:
        self.replication().slow(event.brokers, event.factor, event.duration)

    def network_partition(self, event: se.NetworkPartition) -> None:
        if event.from_ in ("brokers", "both"):
            self.replication().until(event.brokers, "cut_off_until", event.duration)
        if event.from_ in ("zookeeper", "both"):
            self._unreachable_from_zookeeper(event.brokers, event.duration)

    def set_broker_config(self, event: se.SetBrokerConfig) -> None:
        for b in event.brokers:
            held = admin.set_broker_config(
                self.zk, b, event.config.overrides(), event.config.deleted()
            )
            self.replication().broker_config_changed(b, held)

    def power_loss(self, event: se.PowerLoss) -> None:
        self._crash_and_restart(event.brokers)
        self.replication().lose_unflushed(event.brokers)

    def broker_restart(self, event: se.BrokerRestart) -> None:
        if not event.clean:
            self._crash_and_restart(event.brokers)
            return
        for b in event.brokers:
            self.cluster.controlled_shutdown(b)
        self._restart(event.brokers)

    def _crash_and_restart(self, brokers: tuple[int, ...]) -> None:
        """Real crashes: the brokers start again once their old sessions have expired (Kafka
        refuses to register a broker while ``/brokers/ids/<id>`` of its old session is there)."""
        ends = [self.cluster.crash_unnoticed(b) for b in brokers]
        at = max((x for x in ends if x is not None), default=self.cluster.clock.now_ms())
        self.cluster.timer.schedule_at(at, functools.partial(self._restart, brokers))

    def _restart(self, brokers: tuple[int, ...]) -> None:
        """The controller learns of the failures first; then the brokers start again, and
        their logs are recovered (truncated) before anything else happens."""
        self.cluster.drain()
        for b in brokers:
            self.cluster.start_broker(b)
        self.cluster.drain()

    def _unreachable_from_zookeeper(self, brokers: tuple[int, ...], duration_ms: int) -> None:
        """A broker that cannot heartbeat for longer than ``zookeeper.session.timeout.ms`` loses
        its session then (its ephemerals vanish), and registers again when it is back."""
        timeout = self.cluster.session_timeout_ms
        if duration_ms <= timeout:
            return
        cluster, now = self.cluster, self.cluster.clock.now_ms()

        def lose() -> None:
            for b in brokers:
                cluster.lose_session(b)

        def back() -> None:
            for b in brokers:
                cluster.reconnect(b)

        cluster.timer.schedule_at(now + timeout, lose)
        cluster.timer.schedule_at(now + duration_ms, back)

    # -- admin: topics -------------------------------------------------------------------------

    def create_topic(self, event: se.CreateTopic) -> None:
        spec = event.topic
        listed = {p: list(r) for p, r in (spec.assignment or {}).items()}
        placed: dict[int, list[int]] = {}
        if len(listed) < spec.partitions:
            placed = place_replicas(
                self.registered_brokers(), spec.partitions, spec.replication_factor, rng=self.rng
            )
        assignment = {p: listed.get(p, placed.get(p, [])) for p in range(spec.partitions)}
        validate_topic_create(spec.name, assignment, self.topics())
        admin.create_topic(self.zk, spec.name, assignment, spec.config.overrides())
        self._brokers_see_topic_config(spec.name, spec.config.overrides())

    def add_partitions(self, event: se.AddPartitions) -> None:
        validate_topic_exists(event.topic, self.topics(), "add")
        current = admin.read_topic_assignment(self.zk, event.topic).partitions
        existing = {int(p): r for p, r in current.items()}
        added = new_partitions_assignment(
            event.topic, existing, self.registered_brokers(), event.total, event.assignment
        )
        admin.add_partitions(self.zk, event.topic, added)

    def delete_topic(self, event: se.DeleteTopic) -> None:
        validate_topic_exists(event.topic, self.topics(), "delete")
        if self.zk.exists(DeleteTopicZNode.path(event.topic)) is not None:
            raise AdminRequestError(
                "TopicAlreadyMarkedForDeletionException",
                f"topic {event.topic} is already marked for deletion",
            )
        admin.request_topic_deletion(self.zk, event.topic)

    def set_topic_config(self, event: se.SetTopicConfig) -> None:
        validate_topic_exists(event.topic, self.topics(), "config")
        merged = admin.set_topic_config(self.zk, event.topic, event.config.overrides())
        self._brokers_see_topic_config(event.topic, merged)
        active = self.controller()
        # The controller broker's config handler raises the event when unclean turns on.
        if active is not None and merged.get("unclean.leader.election.enable") == "true":
            active.events.put(ev.TopicUncleanLeaderElectionEnable(event.topic))

    def _brokers_see_topic_config(self, topic: str, config: dict[str, str]) -> None:
        # The brokers' TopicConfigHandler: the replication model reads what they apply.
        if self.cluster.replication is not None:
            self.cluster.replication.topic_config_changed(topic, config)

    # -- admin: reassignments and elections ----------------------------------------------------

    def reassign_partitions(self, event: se.ReassignPartitions) -> None:
        entries = [(e.topic, e.partition, e.replicas) for e in event.plan.partitions]
        if event.via == "api":
            self.alter_reassignments({ev.TopicPartition(t, p): tuple(r) for t, p, r in entries})
            return
        try:
            admin.request_reassignment(self.zk, entries)
        except NodeExistsError:
            raise AdminRequestError(
                "TerseReassignmentFailureException",
                "Cannot execute because there is an existing partition assignment.",
            ) from None

    def cancel_reassignment(self, event: se.CancelReassignment) -> None:
        self.alter_reassignments({p.tp(): None for p in event.partitions})

    def elect_leaders(self, event: se.ElectLeaders) -> None:
        if event.via == "zk":
            self.request_preferred_election(event)
            return
        active = self.controller()
        if active is None:
            return
        partitions = (
            None if event.partitions == "all" else frozenset(p.tp() for p in event.partitions)  # type: ignore[union-attr]
        )
        trigger = ElectionTrigger.AdminClientTriggered
        active.events.put(
            ev.ReplicaLeaderElection(partitions, event.kafka_election_type(), trigger)
        )

    def request_preferred_election(self, event: se.ElectLeaders) -> None:
        """``kafka-preferred-replica-election.sh --zookeeper``: the znode lists the partitions
        (every partition of every topic for ``all``), whether or not a controller is there."""
        if event.partitions == "all":
            keys = [
                (t, p)
                for t in sorted(self.topics())
                for p in sorted(map(int, admin.read_topic_assignment(self.zk, t).partitions))
            ]
        else:
            keys = [(p.topic, p.partition) for p in event.partitions]  # type: ignore[union-attr]
        try:
            admin.request_preferred_election(self.zk, keys)
        except NodeExistsError:
            raise AdminRequestError(
                "AdminOperationException",
                "Preferred replica leader election currently in progress. Aborting operation",
            ) from None


ACTIONS: dict[type[Any], Callable[[Actor, Any], None]] = {
    se.BrokerFailure: Actor.broker_failure,
    se.BrokerStartup: Actor.broker_startup,
    se.ControlledShutdown: Actor.controlled_shutdown,
    se.CreateTopic: Actor.create_topic,
    se.AddPartitions: Actor.add_partitions,
    se.DeleteTopic: Actor.delete_topic,
    se.ReassignPartitions: Actor.reassign_partitions,
    se.CancelReassignment: Actor.cancel_reassignment,
    se.ElectLeaders: Actor.elect_leaders,
    se.IsrChange: Actor.isr_change,
    se.SetTopicConfig: Actor.set_topic_config,
    se.ZkSessionExpiry: Actor.zk_session_expiry,
    se.LogDirFailure: Actor.log_dir_failure,
    se.Produce: Actor.produce,
    se.SetProduceRate: Actor.set_produce_rate,
    se.FetchStop: Actor.fetch_stop,
    se.BrokerPause: Actor.broker_pause,
    se.SlowBroker: Actor.slow_broker,
    se.NetworkPartition: Actor.network_partition,
    se.PowerLoss: Actor.power_loss,
    se.BrokerRestart: Actor.broker_restart,
    se.SetBrokerConfig: Actor.set_broker_config,
}
