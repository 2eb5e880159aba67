"""The ``cluster`` part of a scenario file: brokers, topics and the starting state.

These models are shared by the scenario (``model``) and its cross-field checks (``checks``), so
they live below both.
"""

from __future__ import annotations

import difflib
import enum
from collections.abc import Callable, Mapping
from typing import Annotated, ClassVar

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

from spark_app.limits import MAX_BROKERS, MAX_PARTITIONS
from spark_app.scenario.events import STRICT, BrokerId, Count, PartitionId, TopicSpec
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


class BrokerSpec(BaseModel):
    """One broker: Kafka's ``broker.id`` and ``broker.rack``."""

    model_config = STRICT
    id: BrokerId = Field(description="broker.id")
    rack: str | None = Field(None, description="broker.rack; all brokers or none (rack-aware rule)")


class BrokerGeneration(BaseModel):
    model_config = STRICT
    count: Annotated[int, Strict(), Field(ge=1, le=MAX_BROKERS)] = Field(
        description=f"brokers 0..count-1 (at most {MAX_BROKERS:,})"
    )
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


def generated_partitions_problem(topics: int, partitions_per_topic: int) -> str | None:
    """Why generating ``topics`` x ``partitions_per_topic`` partitions is refused, or None."""
    total = topics * partitions_per_topic
    if total <= MAX_PARTITIONS:
        return None
    return (
        f"{topics:,} topics x {partitions_per_topic:,} partitions is {total:,} partitions, "
        f"above the {MAX_PARTITIONS:,} a cluster may hold; generate fewer"
    )


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

    @model_validator(mode="after")
    def _bounded(self) -> TopicGeneration:
        problem = generated_partitions_problem(self.topics, self.partitions_per_topic)
        if problem is not None:
            raise ValueError(problem)
        return self

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
