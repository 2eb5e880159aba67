"""Controller events: the closed set of Kafka 2.8's ZK-mode controller (spec §4.3).

Every event is a frozen dataclass named as in Kafka and knows its ``ControllerState`` (§4.2), which
the event manager publishes while the event is processed. Events are pure data: what a handler
does, and what ``preempt`` answers when ``clear_and_put`` drains an event, belong to the controller
(each docstring says what Kafka does on preemption).

Callbacks are plain callables; their arguments follow Kafka's (per-partition error codes as
Kafka's error names such as ``"NOT_CONTROLLER"``, or the result of a successful call).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

from controller.events.controller_state import ControllerState
from statemachines.election_kinds import ElectionTrigger, ElectionType

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

Callback = Callable[..., object]
"""A reply callback. Kafka's callbacks take either the result or the error(s) of the request."""


class TopicPartition(NamedTuple):
    """A partition ``t-p``: Kafka's ``TopicPartition``."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


class AlterIsrItem(NamedTuple):
    """One partition of an AlterIsr request; the proposed leader is the sending broker."""

    leader_epoch: int
    new_isr: tuple[int, ...]
    current_isr_version: int


@dataclass(frozen=True)
class AlterIsrFrame:
    """AlterIsr items too many to hold as Python objects, built in Spark by the emulated
    leaders: the rows of ``source`` whose ``leader`` is the sending broker (``rows`` of them).
    ``source`` has ``topic``, ``partition``, ``leader``, ``leader_epoch``, ``isr`` (the proposed
    ISR) and ``zk_version`` (the ISR version the leader knows); one partition has one leader, so
    requests cut from one source are disjoint."""

    source: DataFrame = field(compare=False)
    rows: int


class FeatureUpdate(NamedTuple):
    """One entry of an UpdateFeatures request (KIP-584); ``max_version_level < 1`` deletes."""

    max_version_level: int
    allow_downgrade: bool = False


def _empty_mapping() -> Mapping[Any, Any]:
    return MappingProxyType({})


@dataclass(frozen=True)
class ControllerEvent:
    """Base of every controller event; ``state`` is the ControllerState published while it runs."""

    STATE: ClassVar[ControllerState]

    @property
    def state(self) -> ControllerState:
        return self.STATE

    def __post_init__(self) -> None:
        # Mapping payloads become read-only copies (left out of hashing: views are unhashable).
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, Mapping):
                object.__setattr__(self, f.name, MappingProxyType(dict(value)))


@dataclass(frozen=True)
class Startup(ControllerEvent):
    """``startup()``: register the ``/controller`` watch and ``elect()``. Preempt: nothing."""

    STATE: ClassVar[ControllerState] = ControllerState.ControllerChange


@dataclass(frozen=True)
class ControllerChange(ControllerEvent):
    """``/controller`` created or changed: ``maybeResign()``. Preempt: nothing."""

    STATE: ClassVar[ControllerState] = ControllerState.ControllerChange


@dataclass(frozen=True)
class Reelect(ControllerEvent):
    """``/controller`` deleted: ``maybeResign()`` then ``elect()``. Preempt: nothing."""

    STATE: ClassVar[ControllerState] = ControllerState.ControllerChange


@dataclass(frozen=True)
class Expire(ControllerEvent):
    """ZK session expired (always via ``clear_and_put``): resign. Preempt: nothing."""

    STATE: ClassVar[ControllerState] = ControllerState.ControllerChange


@dataclass(frozen=True)
class RegisterBrokerAndReelect(ControllerEvent):
    """New ZK session: re-register the broker, ``maybeResign()``, ``elect()``. Preempt: nothing."""

    STATE: ClassVar[ControllerState] = ControllerState.ControllerChange


@dataclass(frozen=True)
class BrokerChange(ControllerEvent):
    """Children of ``/brokers/ids`` changed: new, dead and bounced brokers (§8). Preempt: nothing."""

    STATE: ClassVar[ControllerState] = ControllerState.BrokerChange


@dataclass(frozen=True)
class BrokerModifications(ControllerEvent):
    """Data of ``/brokers/ids/<broker_id>`` changed (§8.5). Preempt: nothing."""

    STATE: ClassVar[ControllerState] = ControllerState.BrokerChange
    broker_id: int


@dataclass(frozen=True)
class TopicChange(ControllerEvent):
    """Children of ``/brokers/topics`` changed: create new topics (§9.1). Preempt: nothing."""

    STATE: ClassVar[ControllerState] = ControllerState.TopicChange


@dataclass(frozen=True)
class PartitionModifications(ControllerEvent):
    """Data of ``/brokers/topics/<topic>`` changed: partition addition (§9.2). Preempt: nothing."""

    STATE: ClassVar[ControllerState] = ControllerState.TopicChange
    topic: str


@dataclass(frozen=True)
class TopicDeletion(ControllerEvent):
    """Children of ``/admin/delete_topics`` changed (§9.5). Preempt: nothing."""

    STATE: ClassVar[ControllerState] = ControllerState.TopicDeletion


@dataclass(frozen=True)
class ZkPartitionReassignment(ControllerEvent):
    """``/admin/reassign_partitions`` created or re-armed by the controller. Preempt: nothing."""

    STATE: ClassVar[ControllerState] = ControllerState.AlterPartitionReassignment


@dataclass(frozen=True)
class ApiPartitionReassignment(ControllerEvent):
    """AlterPartitionReassignments API: ``reassignments`` maps a partition to its target replicas,
    or to None to cancel (§10.4). ``callback`` gets per-partition errors or a top-level error.

    Preempt: ``callback("NOT_CONTROLLER")``.
    """

    STATE: ClassVar[ControllerState] = ControllerState.AlterPartitionReassignment
    reassignments: Mapping[TopicPartition, tuple[int, ...] | None] = field(
        default_factory=_empty_mapping, hash=False
    )
    callback: Callback | None = field(default=None, compare=False)


@dataclass(frozen=True)
class PartitionReassignmentIsrChange(ControllerEvent):
    """State znode of a reassigning ``partition`` changed (pre-AlterIsr). Preempt: nothing."""

    STATE: ClassVar[ControllerState] = ControllerState.AlterPartitionReassignment
    partition: TopicPartition


@dataclass(frozen=True)
class ListPartitionReassignments(ControllerEvent):
    """ListPartitionReassignments API for ``partitions`` (None = all reassigning ones).

    Preempt: ``callback("NOT_CONTROLLER")``.
    """

    STATE: ClassVar[ControllerState] = ControllerState.ListPartitionReassignment
    partitions: frozenset[TopicPartition] | None = None
    callback: Callback | None = field(default=None, compare=False)


@dataclass(frozen=True)
class IsrChangeNotification(ControllerEvent):
    """Children of ``/isr_change_notification`` changed (§12.4). Preempt: nothing."""

    STATE: ClassVar[ControllerState] = ControllerState.IsrChange


@dataclass(frozen=True)
class AlterIsrReceived(ControllerEvent):
    """AlterIsr request from ``broker_id`` (2.7+, §12.5). Preempt: nothing (as in Kafka 2.8)."""

    STATE: ClassVar[ControllerState] = ControllerState.IsrChange
    broker_id: int
    broker_epoch: int
    isrs_to_alter: Mapping[TopicPartition, AlterIsrItem] = field(
        default_factory=_empty_mapping, hash=False
    )
    callback: Callback | None = field(default=None, compare=False)
    # In place of ``isrs_to_alter`` for an emulated leader's bulk request; its callback learns
    # only the request's own errors.
    frame: AlterIsrFrame | None = field(default=None, compare=False)


@dataclass(frozen=True)
class LogDirEventNotification(ControllerEvent):
    """Children of ``/log_dir_event_notification`` changed (§8.6). Preempt: nothing."""

    STATE: ClassVar[ControllerState] = ControllerState.LogDirChange


@dataclass(frozen=True)
class LeaderAndIsrResponseReceived(ControllerEvent):
    """LeaderAndIsr response from ``broker_id``: top-level ``error`` and per-partition errors
    (``KAFKA_STORAGE_ERROR`` marks a replica offline). Preempt: nothing."""

    STATE: ClassVar[ControllerState] = ControllerState.LeaderAndIsrResponseReceived
    broker_id: int
    error: str = "NONE"
    partition_errors: Mapping[TopicPartition, str] = field(
        default_factory=_empty_mapping, hash=False
    )


@dataclass(frozen=True)
class UpdateMetadataResponseReceived(ControllerEvent):
    """UpdateMetadata response from ``broker_id`` (2.7+): logged only. Preempt: nothing."""

    STATE: ClassVar[ControllerState] = ControllerState.UpdateMetadataResponseReceived
    broker_id: int
    error: str = "NONE"


@dataclass(frozen=True)
class TopicDeletionStopReplicaResponseReceived(ControllerEvent):
    """StopReplica(delete) response of ``replica_id`` for a topic being deleted. Preempt: nothing.

    ``error`` is the top-level error name; ``partition_errors`` the per-partition ones.
    """

    STATE: ClassVar[ControllerState] = ControllerState.TopicDeletion
    replica_id: int
    error: str = "NONE"
    partition_errors: Mapping[TopicPartition, str] = field(
        default_factory=_empty_mapping, hash=False
    )


@dataclass(frozen=True)
class ReplicaLeaderElection(ControllerEvent):
    """Preferred or unclean election for ``partitions`` (None = read the ZK node) (§11.1).

    Preempt: ``callback({p: "NOT_CONTROLLER"})`` for every requested partition.
    """

    STATE: ClassVar[ControllerState] = ControllerState.ManualLeaderBalance
    partitions: frozenset[TopicPartition] | None = None
    election_type: ElectionType = ElectionType.PREFERRED
    election_trigger: ElectionTrigger = ElectionTrigger.ZkTriggered
    callback: Callback | None = field(default=None, compare=False)


@dataclass(frozen=True)
class AutoPreferredReplicaLeaderElection(ControllerEvent):
    """Scheduled auto leader rebalance (§11.2); the handler reschedules it. Preempt: nothing."""

    STATE: ClassVar[ControllerState] = ControllerState.AutoLeaderBalance


@dataclass(frozen=True)
class UncleanLeaderElectionEnable(ControllerEvent):
    """Broker-level ``unclean.leader.election.enable`` turned on. Preempt: nothing."""

    STATE: ClassVar[ControllerState] = ControllerState.UncleanLeaderElectionEnable


@dataclass(frozen=True)
class TopicUncleanLeaderElectionEnable(ControllerEvent):
    """``unclean.leader.election.enable=true`` set on ``topic``. Preempt: nothing."""

    STATE: ClassVar[ControllerState] = ControllerState.TopicUncleanLeaderElectionEnable
    topic: str


@dataclass(frozen=True)
class ControlledShutdown(ControllerEvent):
    """ControlledShutdown API (§8.4); ``callback(remaining partitions)`` or an error.

    Preempt: ``callback`` fails with ControllerMovedException (NOT_CONTROLLER).
    """

    STATE: ClassVar[ControllerState] = ControllerState.ControlledShutdown
    broker_id: int
    broker_epoch: int
    callback: Callback | None = field(default=None, compare=False)


@dataclass(frozen=True)
class UpdateFeatures(ControllerEvent):
    """UpdateFeatures API (2.7+): rewrite ``/feature``. Preempt: nothing (as in Kafka 2.8)."""

    STATE: ClassVar[ControllerState] = ControllerState.UpdateFeatures
    updates: Mapping[str, FeatureUpdate] = field(default_factory=_empty_mapping, hash=False)
    callback: Callback | None = field(default=None, compare=False)


@dataclass(frozen=True)
class ShutdownEventThread(ControllerEvent):
    """Sentinel put by ``close()``; it stops the event thread and is never dispatched."""

    STATE: ClassVar[ControllerState] = ControllerState.ControllerShutdown


@dataclass(frozen=True)
class MockEvent(ControllerEvent):
    """Tests only: the controller runs ``process_fn`` (and ``preempt_fn`` when preempted)."""

    STATE: ClassVar[ControllerState] = ControllerState.Idle
    process_fn: Callable[[], object] = field(compare=False)
    preempt_fn: Callable[[], object] | None = field(default=None, compare=False)
    controller_state: ControllerState = ControllerState.Idle

    @property
    def state(self) -> ControllerState:
        return self.controller_state


CONTROLLER_EVENT_TYPES: tuple[type[ControllerEvent], ...] = (
    Startup,
    ControllerChange,
    Reelect,
    Expire,
    RegisterBrokerAndReelect,
    BrokerChange,
    BrokerModifications,
    TopicChange,
    PartitionModifications,
    TopicDeletion,
    ZkPartitionReassignment,
    ApiPartitionReassignment,
    PartitionReassignmentIsrChange,
    ListPartitionReassignments,
    IsrChangeNotification,
    AlterIsrReceived,
    LogDirEventNotification,
    LeaderAndIsrResponseReceived,
    UpdateMetadataResponseReceived,
    TopicDeletionStopReplicaResponseReceived,
    ReplicaLeaderElection,
    AutoPreferredReplicaLeaderElection,
    UncleanLeaderElectionEnable,
    TopicUncleanLeaderElectionEnable,
    ControlledShutdown,
    UpdateFeatures,
    ShutdownEventThread,
    MockEvent,
)
"""Every event of §4.3, in the spec's order."""
