"""The scenario file (``kce run SCENARIO.yaml``): top-level and cluster models, mapped to domain
objects here and nowhere else (``Scenario.brokers()``, ``timeline()``, ...).

Field validation is pydantic's; every cross-field rule lives in ``checks`` and runs once, after
the fields validated, so one ``ScenarioError`` lists every problem with its YAML path.
"""

from __future__ import annotations

import difflib
import enum
from collections.abc import Callable, Mapping
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    Discriminator,
    Field,
    PlainSerializer,
    Strict,
    Tag,
    model_validator,
)

from spark_app.scenario.checks import check_scenario
from spark_app.scenario.durations import Duration
from spark_app.scenario.errors import ScenarioError
from spark_app.scenario.events import (
    STRICT,
    BrokerId,
    Count,
    PartitionId,
    ScenarioEvent,
    TopicSpec,
)
from spark_app.scenario.kafka_config import (
    DEFAULT_KAFKA_VERSION,
    SUPPORTED_KAFKA_VERSIONS,
    KafkaConfig,
    KafkaVersion,
    kafka_version_tuple,
    parse_kafka_version,
    version_defaults,
)
from statemachines.assignment import BrokerMetadata
from statemachines.partition_states import PartitionState
from statemachines.replica_states import ReplicaState


def _by_name(enum_type: type[enum.Enum]) -> Callable[[object], enum.Enum]:
    names = tuple(enum_type.__members__)

    def parse(value: object) -> enum.Enum:
        if isinstance(value, enum_type):
            return value
        if isinstance(value, str) and value in enum_type.__members__:
            return enum_type[value]
        close = difflib.get_close_matches(str(value), names, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ValueError(
            f"{value!r} is not a Kafka {enum_type.__name__}{hint} (use one of: {', '.join(names)})"
        )

    return parse


def _name(state: enum.Enum) -> str:
    return state.name


# States are written by Kafka's names (OnlinePartition), held as the state-machine enums.
PartitionStateName = Annotated[
    PartitionState, BeforeValidator(_by_name(PartitionState)), PlainSerializer(_name)
]
ReplicaStateName = Annotated[
    ReplicaState, BeforeValidator(_by_name(ReplicaState)), PlainSerializer(_name)
]


class SparkSettings(BaseModel):
    model_config = STRICT
    master: str | None = Field(None, description="Spark master; default local[*] or spark-submit's")
    conf: dict[str, str] = Field(default_factory=dict, description="extra Spark configuration")


class EmulatedZooKeeper(BaseModel):
    """The in-memory ZooKeeper (sessions, watches and multi-ops emulated)."""

    model_config = STRICT
    mode: Literal["emulated"] = Field("emulated", description="in-memory ZooKeeper")


class KazooZooKeeper(BaseModel):
    """A real ZooKeeper ensemble, through kazoo."""

    model_config = STRICT
    mode: Literal["kazoo"] = Field("kazoo", description="a real ZooKeeper via kazoo")
    connect: str = Field(
        pattern=r"^[^,/:\s]+:\d+(,[^,/:\s]+:\d+)*(/[^\s]*)?$",
        description="Kafka's zookeeper.connect: 'host:port[,host:port...][/chroot]'",
    )


ZooKeeperSettings = Annotated[EmulatedZooKeeper | KazooZooKeeper, Field(discriminator="mode")]


class Emulation(BaseModel):
    model_config = STRICT
    catch_up_ms: Duration = Field(0, description="how long a live follower takes to rejoin the ISR")


class BrokerSpec(BaseModel):
    """One broker: Kafka's ``broker.id`` and ``broker.rack``."""

    model_config = STRICT
    id: BrokerId = Field(description="broker.id")
    rack: str | None = Field(None, description="broker.rack; all brokers or none (rack-aware rule)")


class BrokerGeneration(BaseModel):
    model_config = STRICT
    count: Count = Field(description="brokers 0..count-1")
    racks: Annotated[int, Strict(), Field(ge=0)] = Field(
        0,
        description="racks rack-0.. assigned round-robin (broker i in rack-{i mod racks}); 0 = none",
    )


class GeneratedBrokers(BaseModel):
    model_config = STRICT
    generate: BrokerGeneration = Field(description="a generated broker list")


def _brokers_tag(value: object) -> str:
    return "generate" if isinstance(value, Mapping | GeneratedBrokers) else "list"


BrokerList = Annotated[
    Annotated[tuple[BrokerSpec, ...], Tag("list")] | Annotated[GeneratedBrokers, Tag("generate")],
    Discriminator(_brokers_tag),
]


class TopicGeneration(BaseModel):
    """Bulk topics named ``{topic_prefix}{i}``, placed by Kafka's algorithm (as the generator)."""

    model_config = STRICT
    misplaced_keys: ClassVar[Mapping[str, str]] = {
        "count": "generated brokers go under cluster.brokers: {generate: {count, racks}}",
        "racks": "generated brokers go under cluster.brokers: {generate: {count, racks}}",
    }
    topics: Count = Field(description="topic count")
    partitions_per_topic: Count = Field(description="partitions of every generated topic")
    replication_factor: Count = Field(description="replicas per partition (<= broker count)")
    topic_prefix: str = Field("topic-", description="names are {topic_prefix}{0..topics-1}")

    def names(self) -> tuple[str, ...]:
        return tuple(f"{self.topic_prefix}{i}" for i in range(self.topics))


class PartitionStateRow(BaseModel):
    """A partition's starting state: the ``/brokers/topics/<t>/partitions/<p>/state`` znode."""

    model_config = STRICT
    topic: str = Field(description="topic name")
    partition: PartitionId = Field(description="partition id")
    leader: Annotated[int, Strict(), Field(ge=-1)] = Field(description="leader id, -1 = none")
    isr: tuple[BrokerId, ...] = Field(min_length=1, description="in-sync replicas")
    leader_epoch: Annotated[int, Strict(), Field(ge=0)] = Field(description="leader epoch")
    zk_version: Annotated[int, Strict(), Field(ge=0)] = Field(description="state znode version")
    controller_epoch: Annotated[int, Strict(), Field(ge=0)] = Field(
        description="epoch of the controller that wrote it"
    )
    state: PartitionStateName = Field(
        PartitionState.OnlinePartition, description="Kafka's PartitionState name"
    )


class ReplicaStateRow(BaseModel):
    """A replica's starting ``ReplicaState``."""

    model_config = STRICT
    topic: str = Field(description="topic name")
    partition: PartitionId = Field(description="partition id")
    broker: BrokerId = Field(description="the replica's broker")
    state: ReplicaStateName = Field(description="Kafka's ReplicaState name")


class InitialState(BaseModel):
    """Explicit starting state, applied after bootstrap; rows not listed keep the bootstrap's."""

    model_config = STRICT
    partitions: tuple[PartitionStateRow, ...] = Field((), description="partition state rows")
    replicas: tuple[ReplicaStateRow, ...] = Field((), description="replica state rows")


class Cluster(BaseModel):
    model_config = STRICT
    brokers: BrokerList = Field(description="a list of {id, rack} or {generate: {count, racks}}")
    topics: tuple[TopicSpec, ...] = Field((), description="explicit topics")
    generate: TopicGeneration | None = Field(None, description="bulk generated topics")
    live_brokers: tuple[BrokerId, ...] | None = Field(
        None, description="brokers registered at t=0; default all"
    )
    controller: BrokerId | None = Field(None, description="winner of the first election")
    state: InitialState | None = Field(None, description="explicit starting state")


class Scenario(BaseModel):
    """A scenario file: a cluster, a Kafka configuration, and timed events up to ``until``."""

    model_config = STRICT
    name: str = Field(min_length=1, description="scenario name")
    seed: Annotated[int, Strict()] = Field(0, description="seed of Kafka's assignment draws")
    kafka_version: KafkaVersion = Field(
        DEFAULT_KAFKA_VERSION, description=f"emulated Kafka: {', '.join(SUPPORTED_KAFKA_VERSIONS)}"
    )
    spark: SparkSettings = Field(default_factory=SparkSettings, description="Spark settings")
    zookeeper: ZooKeeperSettings = Field(
        default_factory=EmulatedZooKeeper, description="{mode: emulated} or {mode: kazoo, connect}"
    )
    config: KafkaConfig = Field(
        default_factory=KafkaConfig,
        description="Kafka broker/controller keys (§17); unset keys take kafka_version's defaults",
    )
    emulation: Emulation = Field(default_factory=Emulation, description="emulation knobs")
    cluster: Cluster = Field(description="brokers, topics and starting state")
    events: tuple[ScenarioEvent, ...] = Field(
        (), description="timed events (file order breaks ties)"
    )
    until: Duration = Field(description="run virtual time to here (>= the last event)")

    @model_validator(mode="before")
    @classmethod
    def _version_defaults(cls, data: Any) -> Any:
        # Kafka's version-dependent defaults fill the keys the file leaves out, so `config`
        # is the resolved configuration; an invalid kafka_version is reported by its field.
        if not isinstance(data, Mapping) or isinstance(data.get("config"), KafkaConfig):
            return data
        user = data.get("config") or {}
        if not isinstance(user, Mapping):
            return data
        try:
            version = parse_kafka_version(data.get("kafka_version", DEFAULT_KAFKA_VERSION))
        except ValueError:
            version = DEFAULT_KAFKA_VERSION
        return {**data, "config": {**version_defaults(version), **user}}

    @model_validator(mode="after")
    def _cross_checks(self) -> Scenario:
        problems = check_scenario(self)
        if problems:
            raise ScenarioError(problems)
        return self

    # -- domain mapping ------------------------------------------------------------------------

    def version(self) -> tuple[int, int]:
        return kafka_version_tuple(self.kafka_version)

    def brokers(self) -> tuple[BrokerMetadata, ...]:
        """Every broker known to the scenario, in file (or id) order."""
        listed = self.cluster.brokers
        if isinstance(listed, GeneratedBrokers):
            gen = listed.generate
            return tuple(
                BrokerMetadata(b, f"rack-{b % gen.racks}" if gen.racks else None)
                for b in range(gen.count)
            )
        return tuple(BrokerMetadata(b.id, b.rack) for b in listed)

    def broker_ids(self) -> tuple[int, ...]:
        return tuple(b.id for b in self.brokers())

    def initial_live_brokers(self) -> tuple[int, ...]:
        """Brokers registered at t=0, ascending."""
        live = self.cluster.live_brokers
        return tuple(sorted(self.broker_ids() if live is None else live))

    def topic_partition_counts(self) -> dict[str, int]:
        """Every topic at t=0 (explicit, then generated) -> partition count."""
        counts = {t.name: t.partitions for t in self.cluster.topics}
        gen = self.cluster.generate
        if gen is not None:
            counts.update(dict.fromkeys(gen.names(), gen.partitions_per_topic))
        return counts

    def timeline(self) -> tuple[ScenarioEvent, ...]:
        """Events by virtual time; ties keep file order (``sorted`` is stable)."""
        return tuple(sorted(self.events, key=lambda e: e.at))
