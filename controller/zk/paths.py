"""Kafka's ZooKeeper layout (spec §2.1): one small codec per znode kind, as in Kafka's ``ZkData``.

Each codec has ``path(...)`` (the path builder), ``encode(value) -> bytes`` and
``decode(data, path) -> value``. Decoding raises ``MalformedZnodeError`` naming the path for bad
JSON, missing fields, wrong types or broken version rules — with one documented exception:
``ReassignPartitionsZNode.decode_lenient`` logs a warning and returns an empty reassignment, as
Kafka's controller does for a node it cannot parse (spec §2.2).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Generic, TypeVar

from pydantic import BaseModel, ValidationError

from controller.zk.errors import MalformedZnodeError
from controller.zk.models import (
    BrokerRegistration,
    ControllerZNodeData,
    FeatureZNodeData,
    LogDirEvent,
    PartitionList,
    PartitionState,
    ReassignPartitions,
    TopicAssignment,
    TopicConfig,
)

log = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)

CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
BROKERS = "/brokers"
BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
ADMIN = "/admin"
DELETE_TOPICS = "/admin/delete_topics"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX = "log_dir_event_"
CONFIG_TOPICS = "/config/topics"
CONFIG_BROKERS = "/config/brokers"
CONFIG_CHANGES = "/config/changes"
FEATURE = "/feature"

# Persistent paths every broker creates at startup (spec §3.1), in creation order.
PERSISTENT_PATHS = (
    BROKER_IDS,
    BROKER_TOPICS,
    CONFIG_CHANGES,
    DELETE_TOPICS,
    "/brokers/seqid",
    ISR_CHANGE_NOTIFICATION,
    "/latest_producer_id_block",
    LOG_DIR_EVENT_NOTIFICATION,
    CONFIG_TOPICS,
)


@dataclass(frozen=True)
class JsonCodec(Generic[M]):
    """Encode/decode one JSON payload kind with its strict model."""

    model: type[M]

    def encode(self, value: M) -> bytes:
        return value.model_dump_json(exclude_none=True).encode()

    def decode(self, data: bytes | None, path: str) -> M:
        if not data:
            raise MalformedZnodeError(path, "no payload")
        try:
            return self.model.model_validate_json(data)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or 'payload'}: {err['msg']}"
                for err in exc.errors()
            )
            raise MalformedZnodeError(path, problems) from None


class ControllerZNode:
    codec = JsonCodec(ControllerZNodeData)

    @staticmethod
    def path() -> str:
        return CONTROLLER

    @classmethod
    def encode(cls, broker_id: int, timestamp_ms: int) -> bytes:
        return cls.codec.encode(
            ControllerZNodeData(brokerid=broker_id, timestamp=str(timestamp_ms))
        )

    @classmethod
    def decode(cls, data: bytes | None, path: str = CONTROLLER) -> ControllerZNodeData:
        return cls.codec.decode(data, path)


class ControllerEpochZNode:
    """Not JSON: the decimal epoch as text."""

    @staticmethod
    def path() -> str:
        return CONTROLLER_EPOCH

    @staticmethod
    def encode(epoch: int) -> bytes:
        return str(epoch).encode()

    @staticmethod
    def decode(data: bytes | None, path: str = CONTROLLER_EPOCH) -> int:
        text = (data or b"").decode("utf-8", "replace").strip()
        if not text.lstrip("-").isdigit():
            raise MalformedZnodeError(path, f"controller epoch {text!r} is not an integer")
        return int(text)


class BrokerIdZNode:
    codec = JsonCodec(BrokerRegistration)

    @staticmethod
    def path(broker_id: int) -> str:
        return f"{BROKER_IDS}/{broker_id}"

    @classmethod
    def encode(cls, value: BrokerRegistration) -> bytes:
        return cls.codec.encode(value)

    @classmethod
    def decode(cls, data: bytes | None, path: str) -> BrokerRegistration:
        return cls.codec.decode(data, path)


class TopicZNode:
    codec = JsonCodec(TopicAssignment)

    @staticmethod
    def path(topic: str) -> str:
        return f"{BROKER_TOPICS}/{topic}"

    @classmethod
    def encode(cls, value: TopicAssignment) -> bytes:
        # Version >= 2 always writes both reassignment maps, possibly empty (spec §2.2).
        if value.version >= 2:
            value = value.model_copy(
                update={
                    "adding_replicas": value.adding_replicas or {},
                    "removing_replicas": value.removing_replicas or {},
                }
            )
        return cls.codec.encode(value)

    @classmethod
    def decode(cls, data: bytes | None, path: str) -> TopicAssignment:
        return cls.codec.decode(data, path)


class TopicPartitionsZNode:
    @staticmethod
    def path(topic: str) -> str:
        return f"{BROKER_TOPICS}/{topic}/partitions"


class TopicPartitionZNode:
    @staticmethod
    def path(topic: str, partition: int) -> str:
        return f"{BROKER_TOPICS}/{topic}/partitions/{partition}"


class PartitionStateZNode:
    codec = JsonCodec(PartitionState)

    @staticmethod
    def path(topic: str, partition: int) -> str:
        return f"{BROKER_TOPICS}/{topic}/partitions/{partition}/state"

    @staticmethod
    def encode_fields(
        leader: int, leader_epoch: int, isr: list[int], controller_epoch: int
    ) -> bytes:
        """Fast path for bulk writes; byte-identical to ``encode`` without leader_recovery_state."""
        return (
            f'{{"controller_epoch":{controller_epoch},"leader":{leader},"version":1,'
            f'"leader_epoch":{leader_epoch},"isr":[{",".join(map(str, isr))}]}}'
        ).encode()

    @classmethod
    def encode(cls, value: PartitionState) -> bytes:
        if value.leader_recovery_state == 0:
            value = value.model_copy(update={"leader_recovery_state": None})
        return cls.codec.encode(value)

    @classmethod
    def decode(cls, data: bytes | None, path: str) -> PartitionState:
        return cls.codec.decode(data, path)


class DeleteTopicZNode:
    """``/admin/delete_topics/<t>``: no payload; existence is the request."""

    @staticmethod
    def path(topic: str) -> str:
        return f"{DELETE_TOPICS}/{topic}"

    @staticmethod
    def encode() -> bytes:
        return b""


class ReassignPartitionsZNode:
    codec = JsonCodec(ReassignPartitions)

    @staticmethod
    def path() -> str:
        return REASSIGN_PARTITIONS

    @classmethod
    def encode(cls, value: ReassignPartitions) -> bytes:
        return cls.codec.encode(value)

    @classmethod
    def decode(cls, data: bytes | None, path: str = REASSIGN_PARTITIONS) -> ReassignPartitions:
        return cls.codec.decode(data, path)

    @classmethod
    def decode_lenient(
        cls, data: bytes | None, path: str = REASSIGN_PARTITIONS
    ) -> ReassignPartitions:
        """The controller's reading: a payload it cannot parse means no reassignments."""
        try:
            return cls.decode(data, path)
        except MalformedZnodeError as exc:
            log.warning("ignoring unparseable reassignment request: %s", exc)
            return ReassignPartitions(partitions=[])


class PreferredReplicaElectionZNode:
    codec = JsonCodec(PartitionList)

    @staticmethod
    def path() -> str:
        return PREFERRED_REPLICA_ELECTION

    @classmethod
    def encode(cls, value: PartitionList) -> bytes:
        return cls.codec.encode(value)

    @classmethod
    def decode(cls, data: bytes | None, path: str = PREFERRED_REPLICA_ELECTION) -> PartitionList:
        return cls.codec.decode(data, path)


class IsrChangeNotificationZNode:
    """Sequential children ``isr_change_<10 digits>`` of ``/isr_change_notification``."""

    codec = JsonCodec(PartitionList)

    @staticmethod
    def path_prefix() -> str:
        return f"{ISR_CHANGE_NOTIFICATION}/{ISR_CHANGE_PREFIX}"

    @staticmethod
    def path(sequence_number: str) -> str:
        return f"{ISR_CHANGE_NOTIFICATION}/{ISR_CHANGE_PREFIX}{sequence_number}"

    @classmethod
    def encode(cls, value: PartitionList) -> bytes:
        return cls.codec.encode(value)

    @classmethod
    def decode(cls, data: bytes | None, path: str) -> PartitionList:
        return cls.codec.decode(data, path)


class LogDirEventNotificationZNode:
    """Sequential children ``log_dir_event_<10 digits>`` of ``/log_dir_event_notification``."""

    codec = JsonCodec(LogDirEvent)

    @staticmethod
    def path_prefix() -> str:
        return f"{LOG_DIR_EVENT_NOTIFICATION}/{LOG_DIR_EVENT_PREFIX}"

    @staticmethod
    def path(sequence_number: str) -> str:
        return f"{LOG_DIR_EVENT_NOTIFICATION}/{LOG_DIR_EVENT_PREFIX}{sequence_number}"

    @classmethod
    def encode(cls, value: LogDirEvent) -> bytes:
        return cls.codec.encode(value)

    @classmethod
    def decode(cls, data: bytes | None, path: str) -> LogDirEvent:
        return cls.codec.decode(data, path)


class ConfigEntityZNode:
    """``/config/<entity type>/<name>``: an entity's config overrides (Kafka's
    ``ConfigEntityZNode``); one subclass per entity type names its path."""

    codec = JsonCodec(TopicConfig)

    @classmethod
    def encode(cls, value: TopicConfig) -> bytes:
        return cls.codec.encode(value)

    @classmethod
    def decode(cls, data: bytes | None, path: str) -> TopicConfig:
        return cls.codec.decode(data, path)


class TopicConfigZNode(ConfigEntityZNode):
    @staticmethod
    def path(topic: str) -> str:
        return f"{CONFIG_TOPICS}/{topic}"


class BrokerConfigZNode(ConfigEntityZNode):
    """``/config/brokers/<id>``: a broker's dynamic configs."""

    @staticmethod
    def path(broker: int) -> str:
        return f"{CONFIG_BROKERS}/{broker}"


class FeatureZNode:
    codec = JsonCodec(FeatureZNodeData)

    @staticmethod
    def path() -> str:
        return FEATURE

    @classmethod
    def encode(cls, value: FeatureZNodeData) -> bytes:
        return cls.codec.encode(value)

    @classmethod
    def decode(cls, data: bytes | None, path: str = FEATURE) -> FeatureZNodeData:
        return cls.codec.decode(data, path)
