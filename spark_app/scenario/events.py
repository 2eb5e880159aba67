"""Scenario events: one strict model per ``type``, a discriminated union of them.

Each event is what an operator or the cluster does at a virtual time; the docstrings name the
Kafka controller event (spec §4.3) it leads to. Whether an event makes sense at its time (topic
exists, broker is up) is checked against the whole timeline in ``checks``.

The replication events (``REPLICATION_EVENT_TYPES``) act below the controller: producers append
to leaders, followers fetch, brokers pause, slow down, lose their network or their power, and
take replication throttles. They reach the controller only through what Kafka's brokers do about
them (ISR changes, expired sessions, restarts).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Discriminator, Field, Strict, Tag

from controller.events.controller_events import TopicPartition
from spark_app.scenario.broker_config import BrokerConfig
from spark_app.scenario.durations import Duration, PositiveDuration
from spark_app.scenario.kafka_config import TopicConfig
from statemachines.election_kinds import ElectionType
from statemachines.schemas import INT_MAX

STRICT = ConfigDict(extra="forbid", frozen=True)

# YAML ints are ints: Strict keeps `true` and "3" out of broker ids and counts; all are Kafka Ints.
BrokerId = Annotated[int, Strict(), Field(ge=0, le=INT_MAX)]
PartitionId = Annotated[int, Strict(), Field(ge=0, le=INT_MAX)]
Count = Annotated[int, Strict(), Field(ge=1, le=INT_MAX)]
# Assignment keys arrive as strings ("0") in JSON-style YAML, so keys are lax ints.
Assignment = dict[Annotated[int, Field(ge=0, le=INT_MAX)], tuple[BrokerId, ...]]


class PartitionRef(BaseModel):
    """A partition ``topic-partition`` (Kafka's ``TopicPartition``)."""

    model_config = STRICT
    topic: str = Field(description="topic name")
    partition: PartitionId = Field(description="partition id")

    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


class TopicSpec(BaseModel):
    """A topic as created by the admin path (spec §9.1): name, size, overrides, placement."""

    model_config = STRICT
    name: str = Field(description="legal Kafka topic name: [a-zA-Z0-9._-], <= 249 chars")
    partitions: Count = Field(description="partition count")
    replication_factor: Count = Field(description="replicas per partition (<= broker count)")
    config: TopicConfig = Field(
        default_factory=TopicConfig, description="topic-level overrides (/config/topics/<name>)"
    )
    assignment: Assignment | None = Field(
        None,
        description="partition id -> replicas (preferred first); partitions not listed are "
        "placed by Kafka's assignReplicasToBrokers",
    )


class _Event(BaseModel):
    model_config = STRICT
    at: Duration = Field(description="virtual time: int ms or '500ms', '5s', '5m', '1h'")


Detection = Literal["immediate", "session_timeout"]
"""How the controller learns of a broker's failure: ``immediate`` (its ZooKeeper session closes
with the process, as a clean stop does) or ``session_timeout`` (a real crash: the session, and
``/brokers/ids/<id>`` with it, lasts until ``zookeeper.session.timeout.ms`` has passed)."""


class BrokerFailure(_Event):
    """Brokers stop: their ``/brokers/ids`` znodes vanish -> ``BrokerChange`` (dead, §8.2), at
    once or, for a real crash (``detection: session_timeout``), when their ZooKeeper sessions
    expire; until then they serve and fetch nothing but stay registered (§3.6)."""

    type: Literal["broker_failure"] = Field("broker_failure", description="event type")
    brokers: tuple[BrokerId, ...] = Field(min_length=1, description="brokers that crash")
    detection: Detection = Field(
        "immediate",
        description="immediate: the session closes at once; session_timeout: it expires "
        "zookeeper.session.timeout.ms later (a crash or power-off)",
    )


class BrokerStartup(_Event):
    """Brokers register in ``/brokers/ids`` -> ``BrokerChange`` (new, ``onBrokerStartup`` §8.1)."""

    type: Literal["broker_startup"] = Field("broker_startup", description="event type")
    brokers: tuple[BrokerId, ...] = Field(min_length=1, description="brokers that start")


class ControlledShutdown(_Event):
    """Kafka's clean shutdown (§8.4): the broker's ``ControlledShutdown`` request (it joins
    ``shuttingDownBrokerIds``; retried while it still leads partitions, up to 3 attempts), then it
    deregisters (``BrokerChange``)."""

    type: Literal["controlled_shutdown"] = Field("controlled_shutdown", description="event type")
    broker: BrokerId = Field(description="the broker shutting down")


class CreateTopic(_Event):
    """An admin creates ``/brokers/topics/<t>`` -> ``TopicChange`` (§9.1)."""

    type: Literal["create_topic"] = Field("create_topic", description="event type")
    topic: TopicSpec = Field(description="the new topic")


class AddPartitions(_Event):
    """``CreatePartitions`` rewrites the topic znode -> ``PartitionModifications`` (§9.2)."""

    type: Literal["add_partitions"] = Field("add_partitions", description="event type")
    topic: str = Field(description="existing topic")
    total: Count = Field(description="new partition count (larger than the current one)")
    assignment: Assignment | None = Field(
        None, description="replicas of new partition ids; else Kafka's algorithm"
    )


class DeleteTopic(_Event):
    """An admin writes ``/admin/delete_topics/<t>`` -> ``TopicDeletion`` (§9.5).

    With ``delete.topic.enable: false`` the controller drops the request and the topic stays.
    """

    type: Literal["delete_topic"] = Field("delete_topic", description="event type")
    topic: str = Field(description="existing topic")


class ReassignmentEntry(BaseModel):
    """One partition of a reassignment plan, as in ``kafka-reassign-partitions`` JSON."""

    model_config = STRICT
    topic: str = Field(description="topic name")
    partition: PartitionId = Field(description="partition id")
    replicas: tuple[BrokerId, ...] = Field(min_length=1, description="target replicas, in order")
    log_dirs: tuple[str, ...] | None = Field(
        None, description="per-replica log dirs ('any'); one per replica"
    )


class ReassignmentPlan(BaseModel):
    """Kafka's reassignment JSON (``{"version": 1, "partitions": [...]}``)."""

    model_config = STRICT
    version: Literal[1] = Field(description="format version; Kafka knows only 1")
    partitions: tuple[ReassignmentEntry, ...] = Field(
        min_length=1, description="partitions to move"
    )


class ReassignPartitions(_Event):
    """A reassignment: ``/admin/reassign_partitions`` (``ZkPartitionReassignment``) or the
    ``AlterPartitionReassignments`` API (``ApiPartitionReassignment``, 2.4+), §10."""

    type: Literal["reassign_partitions"] = Field("reassign_partitions", description="event type")
    via: Literal["zk", "api"] = Field(description="zk: the admin znode; api: KIP-455 (2.4+)")
    plan: ReassignmentPlan = Field(description="the reassignment JSON")


class CancelReassignment(_Event):
    """``AlterPartitionReassignments`` with no target: revert to the origin replicas (2.4+)."""

    type: Literal["cancel_reassignment"] = Field("cancel_reassignment", description="event type")
    partitions: tuple[PartitionRef, ...] = Field(min_length=1, description="partitions to cancel")


def _scope_tag(value: object) -> str:
    return "all" if isinstance(value, str) else "list"


ElectionScope = Annotated[
    Annotated[Literal["all"], Tag("all")] | Annotated[tuple[PartitionRef, ...], Tag("list")],
    Discriminator(_scope_tag),
]


class ElectLeaders(_Event):
    """A leader election: ``/admin/preferred_replica_election`` (zk, preferred only) or the
    ``ElectLeaders`` API -> ``ReplicaLeaderElection`` (§11.1)."""

    type: Literal["elect_leaders"] = Field("elect_leaders", description="event type")
    via: Literal["zk", "api"] = Field(description="zk: the admin znode; api: ElectLeaders")
    election_type: Literal["preferred", "unclean"] = Field(
        "preferred", description="preferred, or unclean (api, 2.4+)"
    )
    partitions: ElectionScope = Field(description="'all' or a list of {topic, partition}")

    def kafka_election_type(self) -> ElectionType:
        return ElectionType.PREFERRED if self.election_type == "preferred" else ElectionType.UNCLEAN


class IsrChange(_Event):
    """A partition leader changes its ISR: a ZK write + ``IsrChangeNotification`` (IBP < 2.7-IV2)
    or an ``AlterIsr`` request (§12.4, §12.5)."""

    type: Literal["isr_change"] = Field("isr_change", description="event type")
    topic: str = Field(description="topic name")
    partition: PartitionId = Field(description="partition id")
    isr: tuple[BrokerId, ...] = Field(min_length=1, description="the new ISR")


class SetTopicConfig(_Event):
    """An admin sets topic overrides in ``/config/topics/<t>`` (keys given are set, others kept);
    enabling unclean election leads to ``TopicUncleanLeaderElectionEnable``."""

    type: Literal["set_topic_config"] = Field("set_topic_config", description="event type")
    topic: str = Field(description="existing topic")
    config: TopicConfig = Field(description="overrides to set")


class ZkSessionExpiry(_Event):
    """A broker's ZooKeeper session expires (§3.6): the controller's => ``Expire`` and failover;
    any broker re-registers (``BrokerChange``)."""

    type: Literal["zk_session_expiry"] = Field("zk_session_expiry", description="event type")
    broker: BrokerId = Field(description="whose session expires")


class LogDirFailure(_Event):
    """A broker's log directory fails -> ``LogDirEventNotification`` (§8.6)."""

    type: Literal["log_dir_failure"] = Field("log_dir_failure", description="event type")
    broker: BrokerId = Field(description="the broker with the failed directory")


# -- replication below the controller ----------------------------------------------------------

ALL_TOPICS = "all"
"""``topic: all`` in ``produce``/``set_produce_rate``: every partition of every topic."""

Brokers = Annotated[tuple[BrokerId, ...], Field(min_length=1)]
# Strict: ints pass, `true` and "5" do not; .inf and .nan are no rate.
Rate = Annotated[float, Strict(), Field(ge=0, le=INT_MAX, allow_inf_nan=False)]


def _acks(value: object) -> object:
    # The producer's acks: "all" (or -1, the same setting in Kafka), 1 or 0, as ints or strings.
    if isinstance(value, bool | float):
        raise ValueError(f"{value!r} is not an acks setting; use all, 1 or 0")
    if value in (-1, "-1"):
        return "all"
    return int(value) if value in ("1", "0") else value


Acks = Annotated[Literal["all", 1, 0], BeforeValidator(_acks)]


class Produce(_Event):
    """A burst of ``records`` appended at once to the leader of each partition named. With
    ``acks: all`` Kafka's leader rejects the write (``NotEnoughReplicasException``) while the ISR is
    smaller than ``min.insync.replicas`` and acknowledges it once every ISR member has fetched it
    (the high watermark passed it); ``acks: 1`` is acknowledged after the leader's append,
    ``acks: 0`` never."""

    type: Literal["produce"] = Field("produce", description="event type")
    topic: str = Field(description="a topic name, or 'all' for every partition of every topic")
    partition: PartitionId | None = Field(
        None, description="one partition of the named topic (default: each of its partitions)"
    )
    records: Count = Field(description="records appended to each partition")
    acks: Acks = Field("all", description="the producer's acks: all (or -1), 1 or 0")


class SetProduceRate(_Event):
    """A steady produce load from this time on: each partition's leader appends
    ``records_per_s`` records of ``bytes_per_record`` bytes per second (0 stops it)."""

    type: Literal["set_produce_rate"] = Field("set_produce_rate", description="event type")
    topic: str = Field(description="a topic name, or 'all' for every topic")
    records_per_s: Rate = Field(description="records per second per partition (>= 0)")
    bytes_per_record: Count = Field(1024, description="bytes per record")


class FetchStop(_Event):
    """The brokers' replica fetcher threads stop for ``duration``: their followers fall behind,
    and a leader drops a follower from the ISR once it has not caught up for
    ``replica.lag.time.max.ms``. The brokers stay registered and keep leading."""

    type: Literal["fetch_stop"] = Field("fetch_stop", description="event type")
    brokers: Brokers = Field(description="brokers whose fetchers stop")
    duration: PositiveDuration = Field(description="how long they stay stopped (> 0)")


class BrokerPause(_Event):
    """A stop-the-world pause (a long GC): the brokers neither fetch, serve nor heartbeat
    ZooKeeper for ``duration``. A pause longer than ``zookeeper.session.timeout.ms`` expires the
    session (its ``/brokers/ids`` znode vanishes -> ``BrokerChange``); the broker re-registers when
    it resumes."""

    type: Literal["broker_pause"] = Field("broker_pause", description="event type")
    brokers: Brokers = Field(description="brokers that pause")
    duration: PositiveDuration = Field(description="how long the pause lasts (> 0)")


class SlowBroker(_Event):
    """The brokers' replica fetch throughput is divided by ``factor`` for ``duration`` (a slow
    disk or network card): their followers lag, and drop out of the ISR when they lag longer than
    ``replica.lag.time.max.ms``."""

    type: Literal["slow_broker"] = Field("slow_broker", description="event type")
    brokers: Brokers = Field(description="brokers that slow down")
    factor: float = Field(
        gt=1, strict=True, allow_inf_nan=False, description="fetch throughput divided by this (> 1)"
    )
    duration: PositiveDuration = Field(description="how long they stay slow (> 0)")


class NetworkPartition(_Event):
    """The brokers are cut off for ``duration``: from the other brokers (no fetches either way;
    they stay registered and keep leading, so their followers drop out of the ISR), from
    ZooKeeper (their sessions expire after ``zookeeper.session.timeout.ms`` and the controller
    moves leadership; a cut-off leader keeps serving until it learns), or from both."""

    model_config = ConfigDict(extra="forbid", frozen=True, serialize_by_alias=True)
    type: Literal["network_partition"] = Field("network_partition", description="event type")
    brokers: Brokers = Field(description="brokers cut off")
    from_: Literal["brokers", "zookeeper", "both"] = Field(
        alias="from", description="cut off from: brokers, zookeeper or both"
    )
    duration: PositiveDuration = Field(description="how long the partition lasts (> 0)")


class PowerLoss(_Event):
    """The brokers' machines lose power: what their logs had not flushed to disk (the page cache,
    see ``log.flush.interval.*`` and ``emulation.page_cache_flush_ms``) is lost; their sessions
    expire ``zookeeper.session.timeout.ms`` later (``BrokerChange``), and then they restart,
    recover their logs and register again (Kafka refuses a registration while the old session's
    ``/brokers/ids/<id>`` is there)."""

    type: Literal["power_loss"] = Field("power_loss", description="event type")
    brokers: Brokers = Field(description="brokers that lose power")


class BrokerRestart(_Event):
    """The brokers restart: clean is a controlled shutdown (``ControlledShutdown``, leaders moved
    first) then a start; unclean is a crash: the session expires ``zookeeper.session.timeout.ms``
    later (``BrokerChange``), then the start. Unflushed data survives either way (the OS keeps
    the page cache)."""

    type: Literal["broker_restart"] = Field("broker_restart", description="event type")
    brokers: Brokers = Field(description="brokers that restart")
    clean: Annotated[bool, Strict()] = Field(
        True, description="true: controlled shutdown, then start; false: crash, then start"
    )


class SetBrokerConfig(_Event):
    """``kafka-configs --entity-type brokers --alter``: the brokers' dynamic configs in
    ``/config/brokers/<id>`` (null keys deleted), the replication throttle rates, in force at once."""

    type: Literal["set_broker_config"] = Field("set_broker_config", description="event type")
    brokers: Brokers = Field(description="brokers whose configs change (each its own znode)")
    config: BrokerConfig = Field(description="dynamic configs to set (null: delete)")


ScenarioEvent = Annotated[
    BrokerFailure
    | BrokerStartup
    | ControlledShutdown
    | CreateTopic
    | AddPartitions
    | DeleteTopic
    | ReassignPartitions
    | CancelReassignment
    | ElectLeaders
    | IsrChange
    | SetTopicConfig
    | ZkSessionExpiry
    | LogDirFailure
    | Produce
    | SetProduceRate
    | FetchStop
    | BrokerPause
    | SlowBroker
    | NetworkPartition
    | PowerLoss
    | BrokerRestart
    | SetBrokerConfig,
    Field(discriminator="type"),
]

EVENT_TYPES: tuple[str, ...] = (
    "broker_failure",
    "broker_startup",
    "controlled_shutdown",
    "create_topic",
    "add_partitions",
    "delete_topic",
    "reassign_partitions",
    "cancel_reassignment",
    "elect_leaders",
    "isr_change",
    "set_topic_config",
    "zk_session_expiry",
    "log_dir_failure",
    "produce",
    "set_produce_rate",
    "fetch_stop",
    "broker_pause",
    "slow_broker",
    "network_partition",
    "power_loss",
    "broker_restart",
    "set_broker_config",
)

REPLICATION_EVENT_TYPES: tuple[str, ...] = EVENT_TYPES[EVENT_TYPES.index("produce") :]
"""The events below the controller (producers, fetchers, pauses, faults, restarts)."""

REPLICATION_EVENTS = (
    Produce, SetProduceRate, FetchStop, BrokerPause, SlowBroker, NetworkPartition, PowerLoss,
    BrokerRestart, SetBrokerConfig,
)  # fmt: skip


def has_replication_event(events: tuple[ScenarioEvent, ...]) -> bool:
    """Whether a timeline has a replication event (``Emulation.replication`` left unset); a
    crash noticed at the session timeout is one: until then its leaders serve nothing and its
    followers fetch nothing, which only the replication model tells."""
    return any(
        isinstance(e, REPLICATION_EVENTS) or crash_detection(e) == "session_timeout" for e in events
    )


def crash_detection(event: ScenarioEvent) -> Detection | None:
    """How the controller learns of the crash ``event`` makes (None: it makes none): a power loss
    and an unclean restart are real crashes, noticed at the session timeout."""
    if isinstance(event, BrokerFailure):
        return event.detection
    if isinstance(event, PowerLoss) or (isinstance(event, BrokerRestart) and not event.clean):
        return "session_timeout"
    return None
