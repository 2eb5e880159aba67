"""The snapshot every what-if question starts from: partitions, live brokers, racks and configs.

Sources (``sources``, ``describe``, ``zookeeper``) fill a ``WhatIfCluster``; they report bad input
as ``WhatIfInputError`` whose message names the file and line (or row, field, znode) and the fix.

Configs resolve as Kafka resolves them, lowest first: Kafka's default, the broker default (here
``--config KEY=VALUE``), then the topic's own override (``Configs:`` / ``/config/topics/<t>``).
Only the keys a what-if question reads are typed; other topic keys are kept as text and ignored.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import LongType, StringType, StructField, StructType

from statemachines import schemas as s
from statemachines.partition_states import PartitionState
from whatif.errors import WhatIfInputError

MIN_INSYNC_REPLICAS = "min.insync.replicas"
UNCLEAN_LEADER_ELECTION_ENABLE = "unclean.leader.election.enable"
LEADER_IMBALANCE_PER_BROKER_PERCENTAGE = "leader.imbalance.per.broker.percentage"
DEFAULT_REPLICATION_FACTOR = "default.replication.factor"
TOPIC_KEYS = (MIN_INSYNC_REPLICAS, UNCLEAN_LEADER_ELECTION_ENABLE)
BROKER_KEYS = (*TOPIC_KEYS, LEADER_IMBALANCE_PER_BROKER_PERCENTAGE, DEFAULT_REPLICATION_FACTOR)

ONLINE = PartitionState.OnlinePartition.name
OFFLINE = PartitionState.OfflinePartition.name
NEW = PartitionState.NewPartition.name

SIZES_SCHEMA = StructType(
    [
        StructField(s.TOPIC, StringType(), nullable=False),
        StructField(s.PARTITION, s.PARTITIONS_SCHEMA[s.PARTITION].dataType, nullable=False),
        StructField("bytes", LongType(), nullable=False),
    ]
)

_MODEL = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class BrokerDefaults(BaseModel):
    """Broker-level configs a what-if question reads (Kafka's defaults unless ``--config``)."""

    model_config = _MODEL
    min_insync_replicas: int = Field(1, ge=1, alias=MIN_INSYNC_REPLICAS)
    unclean_leader_election_enable: bool = Field(False, alias=UNCLEAN_LEADER_ELECTION_ENABLE)
    leader_imbalance_per_broker_percentage: int = Field(
        10, ge=0, alias=LEADER_IMBALANCE_PER_BROKER_PERCENTAGE
    )
    default_replication_factor: int = Field(1, ge=1, alias=DEFAULT_REPLICATION_FACTOR)


class TopicConfigs(BaseModel):
    """A topic's effective configs; ``other`` keeps the keys no question reads, as text."""

    model_config = _MODEL
    min_insync_replicas: int = Field(1, ge=1, alias=MIN_INSYNC_REPLICAS)
    unclean_leader_election_enable: bool = Field(False, alias=UNCLEAN_LEADER_ELECTION_ENABLE)
    other: dict[str, str] = Field(default_factory=dict)


@dataclass(frozen=True)
class WhatIfCluster:
    """One cluster snapshot.

    ``partitions`` has ``statemachines.schemas.PARTITIONS_SCHEMA``; ``brokers`` are the live
    broker ids, ascending; ``racks`` maps a broker to its ``broker.rack`` (None = rackless);
    ``topic_configs`` has an entry for every topic of ``partitions``; ``sizes`` (topic,
    partition, bytes) is there when a sizes file was given. ``deleting_topics`` are the topics
    the snapshot marks for deletion (``MarkedForDeletion: true``, ``/admin/delete_topics``);
    ``down_brokers`` the brokers the snapshot proves down (``proven_down``), never live.
    """

    partitions: DataFrame
    brokers: tuple[int, ...]
    racks: dict[int, str | None]
    topic_configs: dict[str, TopicConfigs]
    broker_defaults: BrokerDefaults = field(default_factory=BrokerDefaults)
    sizes: DataFrame | None = None
    source: str = ""
    deleting_topics: frozenset[str] = frozenset()
    down_brokers: tuple[int, ...] = ()

    def configs_of(self, topic: str) -> TopicConfigs:
        """The topic's configs; the broker defaults for a topic the snapshot did not list."""
        found = self.topic_configs.get(topic)
        return found if found is not None else topic_configs(self.broker_defaults, {}, "")

    def being_deleted(self) -> Column:
        """True for a row of a topic queued for deletion: one the snapshot marks, or one whose
        leader is -2 (``LeaderAndIsr.duringDelete``, as brokers' metadata shows it). Kafka's
        controller leaves such partitions out of elections, ISR shrinks and the auto leader
        rebalance (``isTopicQueuedUpForDeletion``)."""
        marked = F.col(s.TOPIC).isin(sorted(self.deleting_topics)) if self.deleting_topics else None
        during = F.col(s.LEADER) == s.LEADER_DURING_DELETE
        return during if marked is None else marked | during


# -- configs -------------------------------------------------------------------------------------


def _kafka_bool(value: str) -> bool:
    # Kafka's ConfigDef BOOLEAN: "true"/"false", case and surrounding blanks ignored.
    text = value.strip().lower()
    if text not in ("true", "false"):
        raise ValueError(f"{value!r} is not a boolean — write true or false")
    return text == "true"


def _kafka_int(value: str) -> int:
    # Kafka's ConfigDef INT: a Java Int, so a larger number is "not a number of type INT" too.
    if not re.fullmatch(r"\s*-?\d+\s*", value) or not -s.INT_MAX - 1 <= int(value) <= s.INT_MAX:
        raise ValueError(f"{value!r} is not an integer (a Kafka Int) — write e.g. 2")
    return int(value)


_PARSE = {
    MIN_INSYNC_REPLICAS: _kafka_int,
    UNCLEAN_LEADER_ELECTION_ENABLE: _kafka_bool,
    LEADER_IMBALANCE_PER_BROKER_PERCENTAGE: _kafka_int,
    DEFAULT_REPLICATION_FACTOR: _kafka_int,
}


def _typed(key: str, value: str, where: str) -> Any:
    try:
        return _PARSE[key](value)
    except ValueError as exc:
        raise WhatIfInputError(f"{where}: {key}={value}: {exc}") from None


def _validated(model: type[BaseModel], values: Mapping[str, Any], where: str) -> Any:
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}={err.get('input')!r}: {err['msg']}"
            for err in exc.errors()
        )
        raise WhatIfInputError(f"{where}: {problems} — fix the value") from None


def broker_defaults(config: Iterable[str], base: BrokerDefaults | None = None) -> BrokerDefaults:
    """``--config KEY=VALUE`` items over ``base`` (Kafka's defaults when None)."""
    values: dict[str, Any] = (base or BrokerDefaults()).model_dump(by_alias=True)
    seen: set[str] = set()
    for item in config:
        key, eq, value = item.partition("=")
        key = key.strip()
        where = f"--config {item}"
        if not eq or not key:
            raise WhatIfInputError(
                f"{where}: not KEY=VALUE — write e.g. --config min.insync.replicas=2"
            )
        if key not in _PARSE:
            close = difflib.get_close_matches(key, BROKER_KEYS, n=1)
            hint = f"did you mean {close[0]}? " if close else ""
            raise WhatIfInputError(
                f"{where}: unknown config {key!r} — {hint}accepted: {', '.join(BROKER_KEYS)}"
            )
        if key in seen:
            raise WhatIfInputError(f"{where}: {key} is given twice — keep one --config {key}=...")
        seen.add(key)
        values[key] = _typed(key, value, where)
    return _validated(BrokerDefaults, values, "--config")


def topic_configs(
    defaults: BrokerDefaults, overrides: Mapping[str, str], where: str
) -> TopicConfigs:
    """A topic's configs: its own ``overrides`` (Kafka's text values) over the broker defaults."""
    values: dict[str, Any] = {
        MIN_INSYNC_REPLICAS: defaults.min_insync_replicas,
        UNCLEAN_LEADER_ELECTION_ENABLE: defaults.unclean_leader_election_enable,
    }
    other: dict[str, str] = {}
    for key, value in overrides.items():
        if key in TOPIC_KEYS:
            values[key] = _typed(key, value, where)
        else:
            other[key] = value
    return _validated(TopicConfigs, {**values, "other": other}, where)


# -- frames --------------------------------------------------------------------------------------

PARTITION_COLUMNS = tuple(f.name for f in s.PARTITIONS_SCHEMA.fields)


def empty_columns() -> dict[str, list[Any]]:
    """One list per public partitions column, filled row by row by a source."""
    return {c: [] for c in PARTITION_COLUMNS}


def columns_frame(
    spark: SparkSession, columns: Mapping[str, list[Any]], schema: StructType
) -> DataFrame:
    """Driver-side column lists as a DataFrame of exactly ``schema``, through one Arrow table
    (Spark holds it as a local relation: no Python worker reads it back)."""
    arrow = to_arrow_schema(schema)
    arrays = [pa.array(columns[f.name], type=f.type) for f in arrow]
    return spark.createDataFrame(pa.Table.from_arrays(arrays, schema=arrow), schema)


def partitions_frame(spark: SparkSession, columns: Mapping[str, list[Any]]) -> DataFrame:
    return columns_frame(spark, columns, s.PARTITIONS_SCHEMA)


# -2 is what the controller writes while it deletes the topic (LeaderAndIsr.duringDelete).
_NO_LEADERS = (s.NO_LEADER, s.LEADER_DURING_DELETE)


def replica_problem(
    replicas: list[int], isr: list[int], leader: int, adding: list[int], removing: list[int]
) -> str | None:
    """What breaks Kafka's model in one partition's lists, or None."""
    assigned = set(replicas)
    if (
        not adding
        and not removing
        and len(assigned) == len(replicas) > 0
        and min(replicas) >= 0
        and max(replicas) <= s.INT_MAX
        and (leader in _NO_LEADERS or leader in assigned)
        and len(set(isr)) == len(isr)
        and assigned.issuperset(isr)
    ):
        return None  # the usual partition, checked at once
    if not replicas:
        return "Replicas is empty — a partition has at least one replica"
    for name, ids in (("Replicas", replicas), ("Isr", isr), ("Adding Replicas", adding),
                      ("Removing Replicas", removing)):  # fmt: skip
        if len(set(ids)) != len(ids):
            twice = sorted({b for b in ids if ids.count(b) > 1})
            return f"{name} names broker {twice[0]} twice — list each broker once"
        if any(b < 0 for b in ids):
            return f"{name} has a negative broker id — broker ids are >= 0"
        if any(b > s.INT_MAX for b in ids):
            return f"{name} has a broker id above {s.INT_MAX:,} — broker ids are Kafka Ints"
    for name, ids in (("Isr", isr), ("Adding Replicas", adding), ("Removing Replicas", removing)):
        outside = [b for b in ids if b not in assigned]
        if outside:
            return f"{name} broker {outside[0]} is not in Replicas {_ids(replicas)} — it must be a subset"
    if leader not in _NO_LEADERS and leader not in assigned:
        return (
            f"leader {leader} is not in Replicas {_ids(replicas)} — "
            "the leader is one of the replicas (or none when offline)"
        )
    return None


def proven_down(
    columns: Mapping[str, list[Any]],
    deleting: Iterable[str],
    configs: Mapping[str, TopicConfigs],
) -> set[int]:
    """The brokers a snapshot proves down: Kafka's controller elects every partition without a
    leader that has an electable replica (``triggerOnlinePartitionStateChange`` on every broker
    change, §5.4, §8.1), so a partition left with leader -1 has none — its ISR members (every
    replica, where its topic allows unclean election) are down. Topics queued for deletion are
    not elected and prove nothing; a broker that leads some partition is live."""
    doomed = set(deleting)
    down: set[int] = set()
    leaders: set[int] = set()
    for topic, replicas, isr, leader, state in zip(
        columns[s.TOPIC], columns[s.REPLICAS], columns[s.ISR], columns[s.LEADER],
        columns[s.STATE], strict=True,
    ):  # fmt: skip
        if leader >= 0:
            leaders.add(leader)
        elif leader == s.NO_LEADER and state == OFFLINE and topic not in doomed:
            config = configs.get(topic)
            down.update(replicas if config and config.unclean_leader_election_enable else isr)
    return down - leaders


def _ids(ids: Iterable[int]) -> str:
    return ",".join(map(str, ids))
