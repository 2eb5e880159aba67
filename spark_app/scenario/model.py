"""The scenario file (``kce run SCENARIO.yaml``): top-level models, mapped to domain objects here
and nowhere else (``Scenario.brokers()``, ``timeline()``, ...); the ``cluster`` models live in
``cluster``.

Field validation is pydantic's; every cross-field rule lives in ``checks`` and runs once, after
the fields validated, so one ``ScenarioError`` lists every problem with its YAML path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    Field,
    Strict,
    ValidationInfo,
    field_validator,
    model_validator,
)

from spark_app.preflight import master_problem, zk_connect_problem
from spark_app.scenario.cluster import (
    BrokerGeneration,
    BrokerList,
    BrokerSpec,
    Cluster,
    GeneratedBrokers,
    InitialState,
    PartitionStateRow,
    ReplicaStateRow,
    TopicGeneration,
)
from spark_app.scenario.cross_checks import check_scenario
from spark_app.scenario.durations import Duration
from spark_app.scenario.emulation import Emulation
from spark_app.scenario.errors import ScenarioError
from spark_app.scenario.events import STRICT, ScenarioEvent
from spark_app.scenario.kafka_config import KafkaConfig
from spark_app.scenario.kafka_values import (
    DEFAULT_KAFKA_VERSION,
    SUPPORTED_KAFKA_VERSIONS,
    KafkaVersion,
    kafka_version_tuple,
)
from statemachines.assignment import BrokerMetadata

__all__ = [
    "BrokerGeneration",
    "BrokerList",
    "BrokerSpec",
    "Cluster",
    "Emulation",
    "GeneratedBrokers",
    "InitialState",
    "PartitionStateRow",
    "ReplicaStateRow",
    "Scenario",
    "SparkSettings",
    "TopicGeneration",
    "ZooKeeperSettings",
]


def _problem_free(problem: Callable[[str], str | None]) -> Callable[[str], str]:
    """An after-validator raising ``problem``'s message (``spark_app.preflight``'s checks)."""

    def check(value: str) -> str:
        found = problem(value)
        if found is not None:
            raise ValueError(f"{value!r}: {found}")
        return value

    return check


class SparkSettings(BaseModel):
    model_config = STRICT
    master: Annotated[str, AfterValidator(_problem_free(master_problem))] | None = Field(
        None, description="Spark master; default local[*] or spark-submit's"
    )
    conf: dict[str, str] = Field(default_factory=dict, description="extra Spark configuration")


class EmulatedZooKeeper(BaseModel):
    """The in-memory ZooKeeper (sessions, watches and multi-ops emulated)."""

    model_config = STRICT
    mode: Literal["emulated"] = Field("emulated", description="in-memory ZooKeeper")


class KazooZooKeeper(BaseModel):
    """A real ZooKeeper ensemble, through kazoo."""

    model_config = STRICT
    mode: Literal["kazoo"] = Field("kazoo", description="a real ZooKeeper via kazoo")
    connect: Annotated[str, AfterValidator(_problem_free(zk_connect_problem))] = Field(
        description="Kafka's zookeeper.connect: 'host:port[,host:port...][/chroot]'",
    )


ZooKeeperSettings = Annotated[EmulatedZooKeeper | KazooZooKeeper, Field(discriminator="mode")]


DEFAULT_DRIVER_ROWS = 10_000


class Execution(BaseModel):
    model_config = STRICT
    driver_rows: Annotated[int, Strict()] = Field(
        DEFAULT_DRIVER_ROWS,
        ge=0,
        description="a partitions table of at most this many rows is held on the driver, and "
        "the events with a driver path run there by the plain-Python rules (0: every event in "
        "Spark)",
    )


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
        default_factory=lambda data: KafkaConfig.resolve(
            data.get("kafka_version", DEFAULT_KAFKA_VERSION)
        ),
        description="Kafka broker/controller keys (§17); unset keys take kafka_version's defaults",
    )
    emulation: Emulation = Field(default_factory=Emulation, description="emulation knobs")
    execution: Execution = Field(
        default_factory=Execution, description="where events run: the driver or Spark"
    )
    cluster: Cluster = Field(description="brokers, topics and starting state")
    events: tuple[ScenarioEvent, ...] = Field(
        (), description="timed events (file order breaks ties)"
    )
    until: Duration = Field(description="run virtual time to here (>= the last event)")

    @field_validator("config")
    @classmethod
    def _kafka_version_defaults(cls, config: KafkaConfig, info: ValidationInfo) -> KafkaConfig:
        # Keys the file leaves out take kafka_version's defaults; an invalid kafka_version is
        # reported by its own field and the check goes on with the default version.
        return config.for_version(info.data.get("kafka_version", DEFAULT_KAFKA_VERSION))

    @model_validator(mode="after")
    def _cross_checks(self) -> Scenario:
        problems = check_scenario(
            self.cluster, self.config, self.kafka_version, self.events, self.until, self.emulation
        )
        if problems:
            raise ScenarioError(problems)
        return self

    # -- domain mapping ------------------------------------------------------------------------

    def version(self) -> tuple[int, int]:
        return kafka_version_tuple(self.kafka_version)

    def replication_enabled(self) -> bool:
        """Whether the run models replication: ``emulation.replication``, or when unset, whether
        the timeline has a replication event."""
        return self.emulation.replication_on(self.events)

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
