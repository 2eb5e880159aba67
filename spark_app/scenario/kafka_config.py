"""Kafka's broker/controller configuration (spec §17) and topic-level overrides, as typed models.

Keys are Kafka's dotted names, exactly; values are typed the way Kafka's ``ConfigDef`` parses them:
booleans accept ``true``/``false`` or the strings ``"true"``/``"false"`` (any case), ints accept
ints or decimal strings (``kafka_values`` parses them). Defaults are Kafka's; the
version-dependent ones (KIP-537 in 2.5, the protocol and message format versions) are resolved
from the scenario's ``kafka_version`` by ``KafkaConfig.resolve``.

Three §17 keys are per broker, not cluster-wide, so the scenario spells them elsewhere:
``broker.id`` and ``broker.rack`` in ``cluster.brokers``, ``zookeeper.connect`` in ``zookeeper``.
The replication throttle rates are dynamic broker configs in Kafka, set only with
``kafka-configs`` (``broker_config.BrokerConfig``, in a ``set_broker_config`` event).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from spark_app.scenario.kafka_values import (
    DEFAULT_KAFKA_VERSION,
    KafkaBool,
    KafkaInt,
    MessageFormatVersion,
    OptionalKafkaInt,
    ProtocolVersion,
    ibp_key,
    kafka_bool,
    kafka_int,
    kafka_version_tuple,
    unset_or,
)
from statemachines import replication_throttles as rt


def version_defaults(kafka_version: str) -> dict[str, object]:
    """The §17 defaults that differ by Kafka version (§0: KIP-537 in 2.5; IBP = the release)."""
    major, minor = kafka_version_tuple(kafka_version)
    kip_537 = (major, minor) >= (2, 5)
    return {
        "zookeeper.session.timeout.ms": 18_000 if kip_537 else 6_000,
        "replica.lag.time.max.ms": 30_000 if kip_537 else 10_000,
        "inter.broker.protocol.version": f"{major}.{minor}",
        # Kafka 3 deprecates the key and pins its default to 3.0-IV1 (KIP-724).
        "log.message.format.version": f"{major}.{minor}" if major < 3 else "3.0-IV1",
    }


def _key(dotted: str, description: str, **constraints: Any) -> Any:
    return Field(alias=dotted, description=description, **constraints)


class KafkaConfig(BaseModel):
    """The resolved, typed broker/controller configuration of a run (spec §17).

    Attributes use Python names (``replica_lag_time_max_ms``); ``get("replica.lag.time.max.ms")``
    reads by Kafka's key. Class defaults are the 2.8 baseline; use ``resolve`` for other versions.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, serialize_by_alias=True)
    # Keys people reach for here that live elsewhere in a scenario (used in error messages).
    misplaced_keys: ClassVar[Mapping[str, str]] = {
        "broker.id": "broker ids are set per broker in cluster.brokers[].id",
        "broker.rack": "racks are set per broker in cluster.brokers[].rack",
        "zookeeper.connect": "set it as zookeeper: {mode: kazoo, connect: 'host:port/chroot'}",
        **dict.fromkeys(
            ("leader.replication.throttled.rate", "follower.replication.throttled.rate"),
            "a dynamic broker config in Kafka (kafka-configs, not server.properties): set it "
            "with a set_broker_config event",
        ),
        **dict.fromkeys(
            ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas"),
            "a topic config: set it in cluster.topics[].config or with a set_topic_config event",
        ),
    }

    zookeeper_session_timeout_ms: KafkaInt = _key(
        "zookeeper.session.timeout.ms",
        "session timeout; expiry => Expire / re-registration. 6000 (<=2.4), 18000 (2.5+)",
        default=18_000, ge=1,
    )  # fmt: skip
    zookeeper_connection_timeout_ms: KafkaInt = _key(
        "zookeeper.connection.timeout.ms", "connect timeout; the session timeout if unset",
        default=18_000, ge=1,
    )  # fmt: skip
    zookeeper_max_in_flight_requests: KafkaInt = _key(
        "zookeeper.max.in.flight.requests", "pipelined ZooKeeper requests", default=10, ge=1
    )
    controller_socket_timeout_ms: KafkaInt = _key(
        "controller.socket.timeout.ms", "controller->broker connect timeout", default=30_000, ge=0
    )
    request_timeout_ms: KafkaInt = _key(
        "request.timeout.ms", "request timeout", default=30_000, ge=0
    )
    controlled_shutdown_enable: KafkaBool = _key(
        "controlled.shutdown.enable",
        "brokers ask the controller to move leaders first",
        default=True,
    )
    controlled_shutdown_max_retries: KafkaInt = _key(
        "controlled.shutdown.max.retries", "ControlledShutdown attempts before a hard stop",
        default=3, ge=0,
    )  # fmt: skip
    controlled_shutdown_retry_backoff_ms: KafkaInt = _key(
        "controlled.shutdown.retry.backoff.ms", "pause between attempts", default=5_000, ge=0
    )
    auto_leader_rebalance_enable: KafkaBool = _key(
        "auto.leader.rebalance.enable", "periodic preferred-leader rebalance", default=True
    )
    leader_imbalance_per_broker_percentage: KafkaInt = _key(
        "leader.imbalance.per.broker.percentage", "rebalance a broker above this (strict >)",
        default=10, ge=0,
    )  # fmt: skip
    leader_imbalance_check_interval_seconds: KafkaInt = _key(
        "leader.imbalance.check.interval.seconds", "rebalance period; first check 5 s after failover",
        default=300, ge=1,
    )  # fmt: skip
    unclean_leader_election_enable: KafkaBool = _key(
        "unclean.leader.election.enable", "broker default; topics may override", default=False
    )
    delete_topic_enable: KafkaBool = _key(
        "delete.topic.enable", "false: the controller drops deletion requests", default=True
    )
    replica_lag_time_max_ms: KafkaInt = _key(
        "replica.lag.time.max.ms", "ISR shrink threshold, checked every value/2. 10000 (<=2.4), 30000 (2.5+)",
        default=30_000, ge=1,
    )  # fmt: skip
    min_insync_replicas: KafkaInt = _key(
        "min.insync.replicas", "acks=all durability floor", default=1, ge=1
    )
    default_replication_factor: KafkaInt = _key(
        "default.replication.factor", "RF of auto-created topics", default=1, ge=1
    )
    num_partitions: KafkaInt = _key(
        "num.partitions", "partitions of auto-created topics", default=1, ge=1
    )
    inter_broker_protocol_version: ProtocolVersion = _key(
        "inter.broker.protocol.version",
        "gates AlterIsr (>=2.7-IV2), /feature (>=2.7-IV0), topic ids (>=2.8-IV0); default = kafka_version",
        default=DEFAULT_KAFKA_VERSION,
    )
    replica_high_watermark_checkpoint_interval_ms: KafkaInt = _key(
        "replica.high.watermark.checkpoint.interval.ms", "HW checkpoint period", default=5_000, ge=1
    )
    replica_fetch_wait_max_ms: KafkaInt = _key(
        "replica.fetch.wait.max.ms", "follower fetch max wait", default=500, ge=0
    )
    replica_fetch_min_bytes: KafkaInt = _key(
        "replica.fetch.min.bytes", "follower fetch min bytes", default=1, ge=0
    )
    replica_fetch_backoff_ms: KafkaInt = _key(
        "replica.fetch.backoff.ms", "follower backoff after a fetch error", default=1_000, ge=0
    )
    num_replica_fetchers: KafkaInt = _key(
        "num.replica.fetchers", "fetcher threads per source broker", default=1, ge=1
    )
    control_plane_listener_name: str | None = _key(
        "control.plane.listener.name", "separate controller listener; null = none", default=None
    )
    fetch_purgatory_purge_interval_requests: KafkaInt = _key(
        "fetch.purgatory.purge.interval.requests", "fetch purgatory purge interval", default=1_000
    )
    producer_purgatory_purge_interval_requests: KafkaInt = _key(
        "producer.purgatory.purge.interval.requests", "produce purgatory purge interval",
        default=1_000,
    )  # fmt: skip
    delete_records_purgatory_purge_interval_requests: KafkaInt = _key(
        "delete.records.purgatory.purge.interval.requests", "delete-records purge interval",
        default=1,
    )  # fmt: skip
    replica_lag_max_messages: KafkaInt = _key(
        "replica.lag.max.messages", "ISR rule of Kafka <= 0.8.x (emulation.isr_rule: count): a "
        "follower this many messages behind leaves the ISR; removed in 0.9 (KIP-16)",
        default=4_000, ge=0,
    )  # fmt: skip
    log_message_format_version: MessageFormatVersion = _key(
        "log.message.format.version", "record format the leaders write: v0 before 0.10.0, v1 "
        "0.10.x, v2 0.11.0+; at most the protocol's; default = kafka_version (3.x: 3.0-IV1)",
        default=DEFAULT_KAFKA_VERSION,
    )  # fmt: skip
    log_flush_interval_messages: KafkaInt = _key(
        "log.flush.interval.messages", "fsync a log after this many appended messages",
        default=9_223_372_036_854_775_807, ge=1,
    )  # fmt: skip
    log_flush_interval_ms: OptionalKafkaInt = _key(
        "log.flush.interval.ms", "fsync a log this long after its last flush; null = not set "
        "(the OS page cache decides)",
        default=None, ge=0,
    )  # fmt: skip
    delegation_token_expiry_check_interval_ms: KafkaInt = _key(
        "delegation.token.expiry.check.interval.ms", "controller token-expiry task period",
        default=3_600_000, ge=1,
    )  # fmt: skip

    def for_version(self, kafka_version: str) -> KafkaConfig:
        """This configuration with ``kafka_version``'s defaults for the keys left unset; as in
        Kafka, an unset ``zookeeper.connection.timeout.ms`` follows the session timeout."""
        names = {f.alias: name for name, f in type(self).model_fields.items()}
        given = self.model_fields_set
        update: dict[str, object] = {
            names[key]: value
            for key, value in version_defaults(kafka_version).items()
            if names[key] not in given
        }
        if "zookeeper_connection_timeout_ms" not in given:
            update["zookeeper_connection_timeout_ms"] = update.get(
                "zookeeper_session_timeout_ms", self.zookeeper_session_timeout_ms
            )
        return self.model_copy(update=update)

    @classmethod
    def resolve(
        cls,
        kafka_version: str = DEFAULT_KAFKA_VERSION,
        overrides: Mapping[str, object] | None = None,
    ) -> KafkaConfig:
        """Kafka's defaults for ``kafka_version`` with ``overrides`` (dotted keys) on top."""
        return cls.model_validate(dict(overrides or {})).for_version(kafka_version)

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        """Kafka's dotted keys, in §17 order."""
        return tuple(f.alias or name for name, f in cls.model_fields.items())

    def get(self, key: str) -> object:
        """The value of Kafka's dotted ``key``; ``KeyError`` (with a suggestion) if unknown."""
        for name, field in type(self).model_fields.items():
            if field.alias == key:
                return getattr(self, name)
        raise KeyError(unknown_key_message(key, self.keys(), self.misplaced_keys))

    def ibp_at_least(self, version: str) -> bool:
        """``inter.broker.protocol.version >= version`` (e.g. ``"2.7-IV2"`` gates AlterIsr)."""
        return ibp_key(self.inter_broker_protocol_version) >= ibp_key(version)

    def message_format_at_least(self, version: str) -> bool:
        """``log.message.format.version >= version`` (e.g. ``"0.11.0"``: v2 record batches)."""
        return ibp_key(self.log_message_format_version) >= ibp_key(version)


def unknown_key_message(
    key: str, known: tuple[str, ...], misplaced: Mapping[str, str] | None = None
) -> str:
    """'unknown key' with where it belongs, the closest known key, or the list of known keys."""
    import difflib

    if misplaced and key in misplaced:
        return f"{key!r} is not accepted here: {misplaced[key]}"
    close = difflib.get_close_matches(key, known, n=1)
    if close:
        return f"unknown key {key!r}; did you mean {close[0]!r}?"
    return f"unknown key {key!r}; remove it or use one of: {', '.join(known)}"


_CLEANUP_POLICIES = ("compact", "delete")


def _topic_bool(value: object) -> str:
    return "true" if kafka_bool(value) else "false"


def _topic_int(minimum: int) -> Any:
    def check(value: object) -> str:
        number = kafka_int(value)
        if number < minimum:
            raise ValueError(f"{number} is below the minimum {minimum}")
        return str(number)

    return check


def _cleanup_policy(value: object) -> str:
    items = value if isinstance(value, list) else str(value).split(",")
    policies = [str(p).strip() for p in items]
    bad = [p for p in policies if p not in _CLEANUP_POLICIES]
    if bad or not policies:
        raise ValueError(f"{value!r} is not a cleanup.policy; use 'delete', 'compact' or both")
    return ",".join(policies)


def _throttled_replicas(value: object) -> str:
    # Kafka's ThrottledReplicaListValidator; a LIST type, so a YAML list is joined by commas.
    if isinstance(value, list | tuple):
        value = ",".join(str(item) for item in value)
    if not isinstance(value, str):
        raise ValueError(
            f"{value!r} is not a list of replicas; quote it, e.g. '1:2' or '*' (YAML reads an "
            "unquoted 1:2 as the number 62 and * as an alias)"
        )
    rt.parse(value)
    return value


ThrottledReplicas = Annotated[str | None, BeforeValidator(unset_or(_throttled_replicas))]


class TopicConfig(BaseModel):
    """Topic-level overrides, stored as strings as in ``/config/topics/<topic>``.

    Unset keys (``None``) fall back to the broker configuration.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, serialize_by_alias=True)

    unclean_leader_election_enable: Annotated[
        str | None, BeforeValidator(unset_or(_topic_bool))
    ] = _key("unclean.leader.election.enable", "topic override of the broker default", default=None)
    min_insync_replicas: Annotated[str | None, BeforeValidator(unset_or(_topic_int(1)))] = _key(
        "min.insync.replicas", "topic override of the broker default", default=None
    )
    retention_ms: Annotated[str | None, BeforeValidator(unset_or(_topic_int(-1)))] = _key(
        "retention.ms", "log retention; -1 = unlimited", default=None
    )
    cleanup_policy: Annotated[str | None, BeforeValidator(unset_or(_cleanup_policy))] = _key(
        "cleanup.policy", "'delete', 'compact' or 'compact,delete'", default=None
    )

    flush_messages: Annotated[str | None, BeforeValidator(unset_or(_topic_int(1)))] = _key(
        "flush.messages", "topic override of log.flush.interval.messages", default=None
    )
    flush_ms: Annotated[str | None, BeforeValidator(unset_or(_topic_int(0)))] = _key(
        "flush.ms", "topic override of log.flush.interval.ms", default=None
    )
    leader_replication_throttled_replicas: ThrottledReplicas = _key(
        "leader.replication.throttled.replicas",
        "replicas whose leader throttles the followers outside the ISR to its broker's "
        "leader.replication.throttled.rate: 'partition:broker,...' or '*'",
        default=None,
    )
    follower_replication_throttled_replicas: ThrottledReplicas = _key(
        "follower.replication.throttled.replicas",
        "replicas that, outside the ISR, fetch within their broker's "
        "follower.replication.throttled.rate: 'partition:broker,...' or '*'",
        default=None,
    )

    def overrides(self) -> dict[str, str]:
        """The keys that are set, as Kafka stores them (dotted key -> string)."""
        return {k: v for k, v in self.model_dump().items() if v is not None}

    def unclean_enabled(self, broker_default: bool) -> bool:
        """Kafka's effective ``unclean.leader.election.enable`` for this topic."""
        if self.unclean_leader_election_enable is None:
            return broker_default
        return self.unclean_leader_election_enable == "true"
