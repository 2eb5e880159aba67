"""Kafka's znode JSON payloads (spec §2.2) as strict pydantic models, field names verbatim.

Field order is the order Kafka's examples show; readers ignore key order. Version rules are checked
after parsing and every problem is reported at once. Optional fields that Kafka omits when unset
are ``None`` here and left out when encoding.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from statemachines.schemas import INT_MAX

_STRICT = ConfigDict(extra="forbid", frozen=True, strict=True)
# Kafka reads these numbers as Java Ints: a larger one fails its JSON decoding too.
Int = Annotated[int, Field(ge=-INT_MAX - 1, le=INT_MAX)]


def _check(problems: list[str]) -> None:
    if problems:
        raise ValueError("; ".join(problems))


class ControllerZNodeData(BaseModel):
    """``/controller``: who the active controller is."""

    model_config = _STRICT
    version: Literal[1, 2] = Field(
        1, description="1 up to 3.3; 2 adds kraftControllerEpoch (3.4+)."
    )
    brokerid: Int = Field(description="Broker id of the active controller.")
    timestamp: str = Field(description="Election time in ms since the epoch, as a decimal string.")
    kraftControllerEpoch: Int | None = Field(
        None, description="KRaft controller epoch (-1 when none); version 2 only."
    )

    @model_validator(mode="after")
    def _versions(self) -> ControllerZNodeData:
        problems = []
        if not self.timestamp.lstrip("-").isdigit():
            problems.append(f"timestamp {self.timestamp!r} is not a decimal number")
        if self.kraftControllerEpoch is not None and self.version < 2:
            problems.append("kraftControllerEpoch needs version 2")
        _check(problems)
        return self


class FeatureRange(BaseModel):
    """A supported feature version range advertised by a broker."""

    model_config = _STRICT
    min_version: Int = Field(description="Lowest supported version.")
    max_version: Int = Field(description="Highest supported version.")


class BrokerRegistration(BaseModel):
    """``/brokers/ids/<id>``: a live broker's registration (ephemeral)."""

    model_config = _STRICT
    version: Literal[1, 2, 3, 4, 5] = Field(5, description="4 up to IBP 2.6, 5 from IBP 2.7-IV0.")
    host: str | None = Field(None, description="Host of the first PLAINTEXT endpoint, or null.")
    port: Int = Field(-1, description="Port of the first PLAINTEXT endpoint, or -1.")
    jmx_port: Int = Field(-1, description="JMX port, -1 when disabled.")
    timestamp: str = Field(description="Registration time in ms, as a decimal string.")
    endpoints: list[str] = Field(description="Listener URLs, e.g. PLAINTEXT://host:9092.")
    listener_security_protocol_map: dict[str, str] | None = Field(
        None, description="Listener name -> security protocol (version >= 4)."
    )
    rack: str | None = Field(None, description="broker.rack, only when configured (version >= 3).")
    features: dict[str, FeatureRange] | None = Field(
        None, description="Supported features (version >= 5)."
    )

    @model_validator(mode="after")
    def _versions(self) -> BrokerRegistration:
        problems = []
        if self.rack is not None and self.version < 3:
            problems.append("rack needs version >= 3")
        if self.listener_security_protocol_map is not None and self.version < 4:
            problems.append("listener_security_protocol_map needs version >= 4")
        if self.features is not None and self.version < 5:
            problems.append("features needs version >= 5")
        _check(problems)
        return self


def _partition_keys(name: str, mapping: dict[str, list[int]]) -> list[str]:
    return [
        f"{name} key {key!r} is not a partition id"
        for key in mapping
        if not key.isdigit() or str(int(key)) != key or int(key) > INT_MAX
    ]


class TopicAssignment(BaseModel):
    """``/brokers/topics/<t>``: replica assignment (full set RS) and in-flight reassignment."""

    model_config = _STRICT
    version: Literal[1, 2, 3] = Field(3, description="1 ≤ 2.3; 2 for 2.4-2.7; 3 from 2.8.")
    partitions: dict[str, list[Int]] = Field(description="Partition id (string) -> replicas RS.")
    adding_replicas: dict[str, list[Int]] | None = Field(
        None, description="Partition id -> replicas being added; only non-empty lists (v >= 2)."
    )
    removing_replicas: dict[str, list[Int]] | None = Field(
        None, description="Partition id -> replicas being removed; only non-empty lists (v >= 2)."
    )
    topic_id: str | None = Field(None, description="Base64 topic UUID (version 3, when known).")

    @model_validator(mode="after")
    def _versions(self) -> TopicAssignment:
        problems = _partition_keys("partitions", self.partitions)
        for name in ("adding_replicas", "removing_replicas"):
            mapping = getattr(self, name)
            if mapping is None:
                continue
            if self.version < 2:
                problems.append(f"{name} needs version >= 2")
            problems += _partition_keys(name, mapping)
            problems += [
                f"{name}[{key}] names an unknown partition"
                for key in mapping
                if key not in self.partitions
            ]
        if self.topic_id is not None and self.version < 3:
            problems.append("topic_id needs version 3")
        _check(problems)
        return self


class PartitionState(BaseModel):
    """``/brokers/topics/<t>/partitions/<p>/state``: leader, ISR and epochs of one partition."""

    model_config = _STRICT
    controller_epoch: Int = Field(description="Epoch of the controller whose decision this is.")
    leader: Int = Field(description="Leader broker id, -1 when none.")
    version: Literal[1] = Field(1, description="Always 1.")
    leader_epoch: Int = Field(description="Leader epoch, bumped by the controller.")
    isr: list[Int] = Field(description="In-sync replicas, ordered.")
    leader_recovery_state: Literal[0, 1] | None = Field(
        None, description="3.2+: 1 = RECOVERING after an unclean election; omitted when 0."
    )


class PartitionRef(BaseModel):
    """A topic-partition inside a notification or election request."""

    model_config = _STRICT
    topic: str = Field(description="Topic name.")
    partition: Int = Field(description="Partition id.")


class ReassignmentEntry(BaseModel):
    """One partition of a ZK-submitted reassignment."""

    model_config = _STRICT
    topic: str = Field(description="Topic name.")
    partition: Int = Field(description="Partition id.")
    replicas: list[Int] = Field(description="Target replicas TRS, ordered.")


class ReassignPartitions(BaseModel):
    """``/admin/reassign_partitions`` (legacy tool)."""

    model_config = _STRICT
    version: Literal[1] = Field(1, description="Always 1.")
    partitions: list[ReassignmentEntry] = Field(description="Requested reassignments.")


class PartitionList(BaseModel):
    """``/admin/preferred_replica_election`` and ``/isr_change_notification/isr_change_<seq>``."""

    model_config = _STRICT
    version: Literal[1] = Field(1, description="Always 1.")
    partitions: list[PartitionRef] = Field(description="The partitions concerned.")


class LogDirEvent(BaseModel):
    """``/log_dir_event_notification/log_dir_event_<seq>``."""

    model_config = _STRICT
    version: Literal[1] = Field(1, description="Always 1.")
    broker: Int = Field(description="Broker whose log directory failed.")
    event: Literal[1] = Field(1, description="1 = log directory failure.")


class TopicConfig(BaseModel):
    """``/config/topics/<t>``: topic-level overrides (values are strings); ``/config/brokers/<id>``
    holds a broker's dynamic overrides in the same format."""

    model_config = _STRICT
    version: Literal[1] = Field(1, description="Always 1.")
    config: dict[str, str] = Field(description="Config key -> value, e.g. min.insync.replicas.")


class FinalizedRange(BaseModel):
    """A finalized feature version range in ``/feature``."""

    model_config = _STRICT
    min_version_level: Int = Field(description="Lowest finalized version level.")
    max_version_level: Int = Field(description="Highest finalized version level.")


class FeatureZNodeData(BaseModel):
    """``/feature`` (2.7+): cluster-wide finalized features."""

    model_config = _STRICT
    version: Literal[1] = Field(1, description="Always 1.")
    status: Literal[0, 1] = Field(description="1 = Enabled, 0 = Disabled.")
    features: dict[str, FinalizedRange] = Field(description="Feature name -> finalized range.")
