"""What the emulated brokers take from the topics' and their own dynamic configs, as Kafka's
``TopicConfigHandler`` and ``BrokerConfigHandler`` do when ``/config/topics/<t>`` or
``/config/brokers/<id>`` changes: a topic's ``min.insync.replicas`` and its throttled replicas
(``leader.replication.throttled.replicas``, ``follower.replication.throttled.replicas``), and a
broker's ``leader.replication.throttled.rate`` and ``follower.replication.throttled.rate``.

Values are Kafka's strings, as stored in ZooKeeper (validated when the scenario is read). A rate
that is not set is Kafka's default, ``Long.MaxValue``: no throttle. A throttled-replicas value
that is empty removes the topic's throttle (``quotaManager.removeThrottle``).
"""

from __future__ import annotations

from collections.abc import Mapping

from statemachines import replication_throttles as rt

MIN_ISR = "min.insync.replicas"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
FLUSH_MS = "flush.ms"
FLUSH_MESSAGES = "flush.messages"
LONG_MAX = 2**63 - 1


class ConfigHandlers:
    """The topic and broker overrides the brokers hold, and what replication reads of them."""

    def __init__(self, default_min_isr: int) -> None:
        self.default_min_isr = default_min_isr
        self.topics: dict[str, dict[str, str]] = {}  # topic name -> overrides
        self.brokers: dict[int, dict[str, str]] = {}  # broker id -> dynamic overrides
        self._throttled: tuple[rt.ThrottledReplicas, rt.ThrottledReplicas] | None = None
        self._indexed: dict[str, int] = {}  # the topic indices ``_throttled`` was built with

    def topic_changed(self, name: str, config: Mapping[str, str]) -> None:
        """``/config/topics/<name>`` now holds ``config`` (all of its overrides)."""
        self.topics[name] = dict(config)
        self._throttled = None

    def topic_known(self, name: str, config: Mapping[str, str]) -> None:
        """A topic the brokers learn from the controller: its overrides as the controller read
        them, unless a change came first."""
        if name not in self.topics:
            self.topic_changed(name, config)

    def broker_changed(self, broker: int, config: Mapping[str, str]) -> None:
        """``/config/brokers/<broker>`` now holds ``config``."""
        self.brokers[broker] = dict(config)

    def min_isr(self, name: str) -> int:
        value = self.topics.get(name, {}).get(MIN_ISR)
        return self.default_min_isr if value is None else int(value)

    def flush_overrides(
        self, indices: Mapping[str, int], page_cache_ms: int | None
    ) -> tuple[dict[int, tuple[int, ...]], dict[int, int]]:
        """The topics' ``flush.ms`` and ``flush.messages`` overrides (``LogConfig``, in place of
        the broker's ``log.flush.interval.*``), keyed by ``indices``: each overriding topic's
        flush periods (the page cache's write-back and its flush.ms), and its flush.messages (0:
        never, Long.MaxValue)."""
        periods: dict[int, tuple[int, ...]] = {}
        messages: dict[int, int] = {}
        for name, config in sorted(self.topics.items()):
            if name not in indices:
                continue
            if (ms := config.get(FLUSH_MS)) is not None:
                own = (page_cache_ms, int(ms) if int(ms) < LONG_MAX else None)
                periods[indices[name]] = tuple(p for p in own if p is not None and p > 0)
            if (count := config.get(FLUSH_MESSAGES)) is not None:
                messages[indices[name]] = int(count) if int(count) < LONG_MAX else 0
        return periods, messages

    def rates(self) -> tuple[dict[int, float], dict[int, float]]:
        """The brokers' leader and follower throttle rates (bytes/s), where set."""
        return (
            {b: float(c[LEADER_RATE]) for b, c in sorted(self.brokers.items()) if LEADER_RATE in c},
            {
                b: float(c[FOLLOWER_RATE])
                for b, c in sorted(self.brokers.items())
                if FOLLOWER_RATE in c
            },
        )

    def throttled(
        self, indices: Mapping[str, int]
    ) -> tuple[rt.ThrottledReplicas, rt.ThrottledReplicas]:
        """The leader and follower sides' throttled replicas, keyed by ``indices`` (topic name ->
        the replication table's topic index; topics not in it are left out)."""
        if self._throttled is None or not self._covers(indices):
            leader = self._side(LEADER_REPLICAS, indices)
            self._throttled = (leader, self._side(FOLLOWER_REPLICAS, indices))
            self._indexed = dict(indices)
        return self._throttled

    def _covers(self, indices: Mapping[str, int]) -> bool:
        return all(self._indexed.get(n) == i for n, i in indices.items() if n in self.topics)

    def _side(self, key: str, indices: Mapping[str, int]) -> rt.ThrottledReplicas:
        values = {
            indices[name]: rt.parse(config[key])
            for name, config in self.topics.items()
            if name in indices and config.get(key, "").strip()
        }
        return rt.ThrottledReplicas.of(values)
