"""Checks of the events against the cluster as it is at each event's time.

Events are replayed in timeline order (time, then file order), tracking which brokers are up and
which topics exist with how many partitions; problems name the event by its file index.

A crash noticed at the session timeout (``broker_failure`` with ``detection: session_timeout``,
``power_loss``, an unclean ``broker_restart``) leaves its broker down but registered until its
ZooKeeper session expires, ``zookeeper.session.timeout.ms`` later: Kafka refuses to register the
broker again while the old session's ``/brokers/ids/<id>`` is there (``NodeExistsException`` at
startup), so a ``broker_startup`` must come after that; ``power_loss`` and an unclean restart
start their brokers at that moment themselves.
"""

from __future__ import annotations

from collections.abc import Sequence

from spark_app.scenario import events as ev
from spark_app.scenario.checks import Checker, TopicState, format_ids
from spark_app.scenario.durations import format_duration
from spark_app.scenario.replication_checks import check_replication_event

# Kafka versions that introduced an API (KIP-183 ElectPreferredLeaders, KIP-455, KIP-460).
ELECT_PREFERRED_API = (2, 2)
REASSIGNMENT_API = (2, 4)
ELECT_UNCLEAN_API = (2, 4)


def check_events(
    c: Checker, known: set[int], live: set[int], topics: dict[str, TopicState]
) -> None:
    """Replay the timeline; ``live`` and ``topics`` are copied, not changed."""
    live = set(live)
    # After controlled_shutdown a broker is "shutting down": still registered until it exits,
    # which the runner decides; no liveness problem is raised for it until another event says.
    leaving: set[int] = set()
    topics = {
        name: TopicState(t.partitions, t.replication_factor, dict(t.replicas))
        for name, t in topics.items()
    }
    held = sum(t.partitions for t in topics.values())  # partitions the topics hold now
    version = c.version()
    timeout = c.config.zookeeper_session_timeout_ms
    # Crashed brokers still registered: broker -> (when its session expires, whether it then
    # starts again). The expiry runs after the events of its own moment.
    sessions: dict[int, tuple[int, bool]] = {}
    order = sorted(range(len(c.events)), key=lambda i: c.events[i].at)
    for i in order:
        e = c.events[i]
        path: tuple[str | int, ...] = ("events", i)
        when = f"at {format_duration(e.at)}"
        for b, (end, restarts) in list(sessions.items()):
            if end < e.at:
                del sessions[b]
                if restarts:
                    live.add(b)

        def needs(
            since: tuple[int, int],
            what: str,
            fix: str = "use via: zk",
            e: ev.ScenarioEvent = e,
            path: tuple[str | int, ...] = path,
        ) -> None:
            if version < since:
                c.add(
                    (*path, "via" if "via" in type(e).model_fields else "type"),
                    f"{what} needs Kafka {since[0]}.{since[1]}+ (kafka_version is "
                    f"{c.kafka_version}); raise kafka_version or {fix}",
                )

        if ev.crash_detection(e) == "session_timeout":
            # A broker that was shutting down has exited already: nothing is left to expire.
            crashed = (set(e.brokers) & live) - leaving  # type: ignore[union-attr]
            restarts = not isinstance(e, ev.BrokerFailure)
            sessions.update(dict.fromkeys(crashed, (e.at + timeout, restarts)))
        if isinstance(e, ev.REPLICATION_EVENTS):
            check_replication_event(c, path, e, known, live, leaving, topics)
            if ev.crash_detection(e) is not None:
                live.difference_update(e.brokers)
        elif isinstance(e, ev.BrokerFailure | ev.BrokerStartup):
            c.known(known, (*path, "brokers"), e.brokers)
            starting = isinstance(e, ev.BrokerStartup)
            for j, b in enumerate(e.brokers):
                if starting and b in sessions:
                    _registered(c, (*path, "brokers", j), b, sessions[b][0], when)
                elif b in known and b not in leaving and (b in live) == starting:
                    state = "already up" if starting else "already down"
                    c.add(
                        (*path, "brokers", j),
                        f"broker {b} is {state} {when}; drop it from this event",
                    )
            if starting:  # a refused registration leaves the broker down
                live.update(set(e.brokers) & known - set(sessions))
            else:
                live.difference_update(e.brokers)
            leaving.difference_update(e.brokers)
        elif isinstance(e, ev.ControlledShutdown | ev.ZkSessionExpiry | ev.LogDirFailure):
            if e.broker not in known:
                c.add(
                    (*path, "broker"),
                    f"broker {e.broker} is not a broker of the cluster; use one of {format_ids(known)}",
                )
            if e.broker in known and e.broker not in live and e.broker not in leaving:
                c.add(
                    (*path, "broker"),
                    f"broker {e.broker} is down {when}, so it cannot have a {e.type}; "
                    "start it first (broker_startup) or drop the event",
                )
            if isinstance(e, ev.ControlledShutdown) and e.broker in live:
                leaving.add(e.broker)
        elif isinstance(e, ev.CreateTopic):
            topic = c.topic_spec((*path, "topic"), e.topic, known, topics)
            if e.topic.name not in topics:
                held += topic.partitions
                c.bounded((*path, "topic", "partitions"), held, when)
            topics.setdefault(e.topic.name, topic)
        elif isinstance(e, ev.AddPartitions):
            before = topics[e.topic].partitions if e.topic in topics else 0
            _add_partitions(c, path, e, topics, known, when)
            if e.topic in topics:
                held += topics[e.topic].partitions - before
                c.bounded((*path, "total"), held, when)
        elif isinstance(e, ev.DeleteTopic):
            if e.topic not in topics:
                c.add(
                    (*path, "topic"),
                    f"topic {e.topic!r} does not exist {when}; fix the name or drop the event",
                )
            elif c.config.delete_topic_enable:
                held -= topics.pop(e.topic).partitions
        elif isinstance(e, ev.ReassignPartitions):
            if e.via == "api":
                needs(REASSIGNMENT_API, "the AlterPartitionReassignments API")
            _reassignment(c, path, e.plan.partitions, topics, known, when)
        elif isinstance(e, ev.CancelReassignment):
            needs(REASSIGNMENT_API, "cancelling a reassignment", "drop the event")
            _refs(c, (*path, "partitions"), e.partitions, topics, when)
        elif isinstance(e, ev.ElectLeaders):
            if e.via == "zk" and e.election_type == "unclean":
                c.add(
                    (*path, "election_type"),
                    "the ZK znode only triggers preferred elections; use via: api for unclean",
                )
            elif e.via == "api":
                since = ELECT_UNCLEAN_API if e.election_type == "unclean" else ELECT_PREFERRED_API
                needs(since, f"the ElectLeaders API ({e.election_type})")
            if not isinstance(e.partitions, str):
                _refs(c, (*path, "partitions"), e.partitions, topics, when)
        elif isinstance(e, ev.IsrChange):
            topic = c.partition(path, topics, e.topic, e.partition, when)
            c.known(known, (*path, "isr"), e.isr)
            replicas = topic.replicas.get(e.partition) if topic else None
            for j, b in enumerate(e.isr):
                if replicas is not None and b in known and b not in replicas:
                    c.add(
                        (*path, "isr", j),
                        f"broker {b} holds no replica of {e.topic}-{e.partition} (replicas {sorted(replicas)}); ISR ⊆ replicas",
                    )
        elif isinstance(e, ev.SetTopicConfig) and e.topic not in topics:
            c.add(
                (*path, "topic"),
                f"topic {e.topic!r} does not exist {when}; create it first or fix the name",
            )


def _registered(c: Checker, path: tuple[str | int, ...], b: int, end: int, when: str) -> None:
    c.add(
        path,
        f"broker {b} crashed and stays registered until its ZooKeeper session expires at "
        f"{format_duration(end)} (zookeeper.session.timeout.ms), and Kafka refuses a second "
        f"registration before; start it after {format_duration(end)}, not {when}",
    )


def _add_partitions(
    c: Checker, path: tuple[str | int, ...], e: ev.AddPartitions, topics: dict[str, TopicState],
    known: set[int], when: str,
) -> None:  # fmt: skip
    topic = topics.get(e.topic)
    if topic is None:
        c.add(
            (*path, "topic"),
            f"topic {e.topic!r} does not exist {when}; create it first or fix the name",
        )
        return
    if e.total <= topic.partitions:
        c.add(
            (*path, "total"),
            f"{e.topic!r} already has {topic.partitions} partitions {when}; total must be larger (InvalidPartitionsException)",
        )
        return
    if e.assignment is not None:
        topic.replicas.update(
            c.assignment(
                (*path, "assignment"),
                e.assignment,
                topic.replication_factor,
                topic.partitions,
                e.total,
                known,
            )
        )
    topic.partitions = e.total


def _refs(
    c: Checker, path: tuple[str | int, ...], refs: Sequence[ev.PartitionRef],
    topics: dict[str, TopicState], when: str,
) -> None:  # fmt: skip
    seen: set[tuple[str, int]] = set()
    for j, ref in enumerate(refs):
        c.partition((*path, j), topics, ref.topic, ref.partition, when)
        if (ref.topic, ref.partition) in seen:
            c.add((*path, j), f"{ref.topic}-{ref.partition} is listed twice; list it once")
        seen.add((ref.topic, ref.partition))


def _reassignment(
    c: Checker, path: tuple[str | int, ...], entries: Sequence[ev.ReassignmentEntry],
    topics: dict[str, TopicState], known: set[int], when: str,
) -> None:  # fmt: skip
    _refs(c, (*path, "plan", "partitions"), entries, topics, when)  # type: ignore[arg-type]
    for j, entry in enumerate(entries):
        where = (*path, "plan", "partitions", j)
        c.known(known, (*where, "replicas"), entry.replicas)
        if entry.log_dirs is not None and len(entry.log_dirs) != len(entry.replicas):
            c.add(
                (*where, "log_dirs"),
                f"{len(entry.log_dirs)} log dirs for {len(entry.replicas)} replicas; give one per replica ('any')",
            )
        topic = topics.get(entry.topic)
        replicas = topic.replicas.get(entry.partition) if topic else None
        if replicas is not None:
            replicas.update(entry.replicas)  # during a move the replicas are old ∪ target
