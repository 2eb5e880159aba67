"""Cross-field checks of a scenario: every problem is collected, none stops the others.

Besides the hard rules Kafka enforces (legal topic names, RF <= brokers, assignment shape), some
checks promote what Kafka would only log or answer with an error code to scenario errors, because
in a scenario file they are almost always typos:

* broker events must name a broker that is up at that time (``broker_failure`` of a dead broker,
  ``broker_startup`` of a live one, ``controlled_shutdown``/``zk_session_expiry``/``log_dir_failure``
  of a dead one). After ``controlled_shutdown`` the broker is shutting down: still registered
  until it exits, which the runner decides, so it may appear in later events either way;
* events must reference topics/partitions that exist at their time, replaying earlier
  ``create_topic``/``add_partitions``/``delete_topic`` in time order (a deletion with
  ``delete.topic.enable: false`` is dropped by the controller, so the topic stays);
* APIs the chosen ``kafka_version`` lacks (KIP-455 reassignment API and cancellation 2.4+,
  ``ElectLeaders`` 2.2+ preferred / 2.4+ unclean) and unclean elections via the ZK znode.

This module holds the ``Checker`` and the checks of the cluster and configuration;
``timeline_checks`` replays the events with it and ``cross_checks.check_scenario`` runs both.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from spark_app.limits import MAX_PARTITIONS
from spark_app.scenario import events as ev
from spark_app.scenario.cluster import Cluster
from spark_app.scenario.errors import Problem, join_path
from spark_app.scenario.kafka_config import KafkaConfig
from spark_app.scenario.kafka_values import ibp_key, kafka_version_tuple, record_version

_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_NAME_LENGTH = 249


@dataclass
class TopicState:
    partitions: int
    replication_factor: int
    # partition -> every broker that may hold it (explicit assignment ∪ reassignment targets);
    # partitions placed by Kafka's algorithm are absent: their replicas are unknown here.
    replicas: dict[int, set[int]] = field(default_factory=dict)


@dataclass
class Checker:
    """Collects ``(path, message)`` problems of one scenario's parts; ``check_scenario`` runs it."""

    cluster: Cluster
    config: KafkaConfig
    kafka_version: str
    events: tuple[ev.ScenarioEvent, ...]
    problems: list[Problem] = field(default_factory=list)

    def version(self) -> tuple[int, int]:
        return kafka_version_tuple(self.kafka_version)

    def add(self, path: tuple[str | int, ...], message: str) -> None:
        self.problems.append((join_path(*path), message))

    # -- brokers -------------------------------------------------------------------------------

    def brokers(self) -> set[int]:
        listed = self.cluster.brokers
        if not isinstance(listed, tuple):
            gen = listed.generate
            if gen.racks > gen.count:
                self.add(
                    ("cluster", "brokers", "generate", "racks"),
                    f"{gen.racks} racks for {gen.count} brokers; use at most {gen.count} racks",
                )
            return set(range(gen.count))
        if not listed:
            self.add(("cluster", "brokers"), "no brokers; list at least one {id, rack}")
        seen: dict[int, int] = {}
        for i, b in enumerate(listed):
            if b.id in seen:
                self.add(
                    ("cluster", "brokers", i, "id"),
                    f"broker id {b.id} is also cluster.brokers[{seen[b.id]}]; ids must be unique",
                )
            seen.setdefault(b.id, i)
        racked = [b.id for b in listed if b.rack is not None]
        if racked and len(racked) < len(listed):
            for i, b in enumerate(listed):
                if b.rack is None:
                    self.add(
                        ("cluster", "brokers", i, "rack"),
                        f"broker {b.id} has no rack but brokers {sorted(racked)[:5]} do; Kafka's "
                        "rack-aware assignment needs a rack on every broker or on none",
                    )
        return set(seen)

    def known(self, known: set[int], path: tuple[str | int, ...], ids: Iterable[int]) -> None:
        """Each id is a broker of the cluster and appears once."""
        counts: Counter[int] = Counter()
        for j, b in enumerate(ids):
            counts[b] += 1
            if b not in known:
                self.add(
                    (*path, j),
                    f"broker {b} is not a broker of the cluster; use one of "
                    f"{format_ids(known)} or add it to cluster.brokers",
                )
            elif counts[b] == 2:
                self.add((*path, j), f"broker {b} is listed twice; list each broker once")

    def live_and_controller(self, known: set[int]) -> set[int]:
        c = self.cluster
        if c.live_brokers is not None:
            self.known(known, ("cluster", "live_brokers"), c.live_brokers)
        live = set(known if c.live_brokers is None else c.live_brokers) & known
        if c.controller is not None and c.controller not in live:
            self.add(
                ("cluster", "controller"),
                f"broker {c.controller} is not live at t=0, so it cannot win the first election; "
                f"pick one of {format_ids(live)}",
            )
        return live

    # -- topics --------------------------------------------------------------------------------

    def topic_name(
        self, path: tuple[str | int, ...], name: str, existing: Mapping[str, object]
    ) -> None:
        """Kafka's ``Topic.validate`` plus the '.'/'_' collision rule (§9.1)."""
        if name in (".", "..") or not _LEGAL_TOPIC.match(name):
            self.add(
                path,
                f"{name!r} is not a legal topic name; use [a-zA-Z0-9._-] only, not '.' or '..'",
            )
        elif len(name) > MAX_TOPIC_NAME_LENGTH:
            self.add(path, f"topic name is {len(name)} chars; Kafka allows at most 249")
        if name in existing:
            self.add(path, f"topic {name!r} already exists; rename one of them")
            return
        twin = name.replace(".", "_")
        for other in existing:
            if other.replace(".", "_") == twin:
                self.add(
                    path,
                    f"{name!r} collides with topic {other!r} ('.' and '_' clash in metric names)",
                )

    def assignment(
        self,
        path: tuple[str | int, ...],
        assignment: Mapping[int, tuple[int, ...]],
        rf: int,
        first: int,
        end: int,
        known: set[int],
    ) -> dict[int, set[int]]:
        """Keys are partition ids in [first, end); lists have ``rf`` known, distinct brokers."""
        out: dict[int, set[int]] = {}
        for pid, replicas in assignment.items():
            where = (*path, str(pid))
            if not first <= pid < end:
                self.add(where, f"partition {pid} is out of range; use ids {first}..{end - 1}")
            if len(replicas) != rf:
                self.add(
                    where,
                    f"{len(replicas)} replicas but the replication factor is {rf}; list {rf} brokers",
                )
            self.known(known, where, replicas)
            out[pid] = set(replicas)
        return out

    def topic_spec(
        self,
        path: tuple[str | int, ...],
        spec: ev.TopicSpec,
        known: set[int],
        existing: Mapping[str, object],
    ) -> TopicState:
        self.topic_name((*path, "name"), spec.name, existing)
        if spec.replication_factor > len(known):
            self.add(
                (*path, "replication_factor"),
                f"replication factor {spec.replication_factor} is larger than the "
                f"{len(known)} brokers; lower it or add brokers",
            )
        topic = TopicState(spec.partitions, spec.replication_factor)
        if spec.assignment is not None:
            topic.replicas = self.assignment(
                (*path, "assignment"), spec.assignment, spec.replication_factor, 0,
                spec.partitions, known,
            )  # fmt: skip
        return topic

    def topics(self, known: set[int]) -> dict[str, TopicState]:
        c = self.cluster
        topics: dict[str, TopicState] = {}
        for i, spec in enumerate(c.topics):
            topic = self.topic_spec(("cluster", "topics", i), spec, known, topics)
            topics.setdefault(spec.name, topic)
        gen = c.generate
        if gen is not None:
            if gen.replication_factor > len(known):
                self.add(
                    ("cluster", "generate", "replication_factor"),
                    f"replication factor {gen.replication_factor} is larger than the "
                    f"{len(known)} brokers; lower it or add brokers",
                )
            for name in gen.names():
                if name in topics:
                    self.add(
                        ("cluster", "generate", "topic_prefix"),
                        f"generated topic {name!r} clashes with an explicit topic; "
                        "change topic_prefix or rename the topic",
                    )
                topics[name] = TopicState(gen.partitions_per_topic, gen.replication_factor)
        self.bounded(("cluster", "topics"), sum(t.partitions for t in topics.values()), "at 0s")
        return topics

    def bounded(self, path: tuple[str | int, ...], total: int, when: str) -> None:
        """A problem when the topics hold more partitions (``total``) than a scenario may."""
        if total > MAX_PARTITIONS:
            self.add(
                path,
                f"the topics hold {total:,} partitions {when}, above the {MAX_PARTITIONS:,} a "
                "scenario may hold; use fewer partitions",
            )

    def partition(
        self, path: tuple[str | int, ...], topics: Mapping[str, TopicState], topic: str, pid: int,
        when: str,
    ) -> TopicState | None:  # fmt: skip
        """The topic if ``topic-pid`` exists ``when``; a problem otherwise."""
        found = topics.get(topic)
        if found is None:
            self.add(
                (*path, "topic"),
                f"topic {topic!r} does not exist {when}; create it first or fix the name",
            )
            return None
        if pid >= found.partitions:
            self.add(
                (*path, "partition"),
                f"{topic!r} has partitions 0..{found.partitions - 1} {when}; use one of those",
            )
            return None
        return found

    # -- starting state ------------------------------------------------------------------------

    def state(self, known: set[int], topics: Mapping[str, TopicState]) -> None:
        st = self.cluster.state
        if st is None:
            return
        seen: set[tuple[str, int]] = set()
        for i, row in enumerate(st.partitions):
            path = ("cluster", "state", "partitions", i)
            topic = self.partition(path, topics, row.topic, row.partition, "at t=0")
            if (row.topic, row.partition) in seen:
                self.add(path, f"{row.topic}-{row.partition} has two rows; keep one")
            seen.add((row.topic, row.partition))
            self.known(known, (*path, "isr"), row.isr)
            if row.leader != -1 and row.leader not in known:
                self.add(
                    (*path, "leader"),
                    f"leader {row.leader} is not a broker; use -1 or one of {format_ids(known)}",
                )
            replicas = topic.replicas.get(row.partition) if topic else None
            if replicas is None:
                continue  # placed by Kafka's algorithm: replicas unknown until the runner assigns
            if row.leader in known and row.leader not in replicas:
                self.add(
                    (*path, "leader"),
                    f"leader {row.leader} is not a replica {sorted(replicas)}; use one or -1",
                )
            for j, b in enumerate(row.isr):
                if b in known and b not in replicas:
                    self.add(
                        (*path, "isr", j),
                        f"ISR member {b} is not a replica {sorted(replicas)}; ISR ⊆ replicas",
                    )
        seen_replicas: set[tuple[str, int, int]] = set()
        for i, rrow in enumerate(st.replicas):
            path = ("cluster", "state", "replicas", i)
            topic = self.partition(path, topics, rrow.topic, rrow.partition, "at t=0")
            key = (rrow.topic, rrow.partition, rrow.broker)
            if key in seen_replicas:
                self.add(
                    path,
                    f"replica {rrow.topic}-{rrow.partition} on {rrow.broker} has two rows; keep one",
                )
            seen_replicas.add(key)
            if rrow.broker not in known:
                self.add(
                    (*path, "broker"),
                    f"broker {rrow.broker} is not a broker of the cluster; use one of {format_ids(known)}",
                )
            replicas = topic.replicas.get(rrow.partition) if topic else None
            if replicas is not None and rrow.broker in known and rrow.broker not in replicas:
                self.add(
                    (*path, "broker"),
                    f"broker {rrow.broker} holds no replica of {rrow.topic}-{rrow.partition} (replicas {sorted(replicas)})",
                )

    # -- configuration -------------------------------------------------------------------------

    def check_config(self) -> None:
        major, minor = self.version()
        ibp = self.config.inter_broker_protocol_version
        if ibp_key(ibp) > (major, minor, 0, 1_000):
            self.add(
                ("config", "inter.broker.protocol.version"),
                f"{ibp} is newer than kafka_version {self.kafka_version}; use {major}.{minor} or older",
            )
        fmt = self.config.log_message_format_version
        if ibp_key(fmt) > (major, minor, 0, 1_000):
            self.add(
                ("config", "log.message.format.version"),
                f"{fmt} is newer than kafka_version {self.kafka_version}; use {major}.{minor} or older",
            )
        elif record_version(fmt) > record_version(ibp):
            # KafkaConfig's startup check: the protocol must carry the record format it writes.
            self.add(
                ("config", "log.message.format.version"),
                f"{fmt} writes record format v{record_version(fmt)} but "
                f"inter.broker.protocol.version {ibp} carries v{record_version(ibp)}; lower the "
                "format or raise the protocol version",
            )


def format_ids(ids: Iterable[int]) -> str:
    ordered = sorted(ids)
    return str(ordered) if len(ordered) <= 12 else f"{ordered[0]}..{ordered[-1]}"
