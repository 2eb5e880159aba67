"""Checks of the replication events and of the ``emulation`` knobs that go with them.

``timeline_checks`` replays the timeline and hands each replication event here with the brokers
that are up and the topics that exist at its time. The rules:

* every broker named exists and is listed once, and is up at the event's time (or shutting down
  after ``controlled_shutdown``, still registered); a clean ``broker_restart`` leaves its brokers
  up, ``power_loss`` and an unclean one leave them down until their sessions expire
  (``timeline_checks``); ``set_broker_config`` writes ZooKeeper, so its brokers may be down;
* ``produce``/``set_produce_rate`` name a topic that exists at that time, or ``all``;
  ``partition`` needs a named topic and is one of its partitions at that time;
* ``emulation.catch_up_ms`` and the replication model exclude each other: with replication on,
  followers rejoin the ISR when they have fetched up to the leader's log end, not after a delay.

Durations > 0 and ``factor`` > 1 are field rules (``PositiveDuration``, ``gt=1``).
"""

from __future__ import annotations

from collections.abc import Mapping

from spark_app.scenario import events as ev
from spark_app.scenario.checks import Checker, TopicState
from spark_app.scenario.durations import format_duration
from spark_app.scenario.emulation import Emulation

Path = tuple[str | int, ...]
ReplicationEvent = (
    ev.Produce | ev.SetProduceRate | ev.FetchStop | ev.BrokerPause | ev.SlowBroker
    | ev.NetworkPartition | ev.PowerLoss | ev.BrokerRestart | ev.SetBrokerConfig
)  # fmt: skip


def check_replication_event(
    c: Checker, path: Path, e: ReplicationEvent, known: set[int], live: set[int],
    leaving: set[int], topics: Mapping[str, TopicState],
) -> None:  # fmt: skip
    """One replication event at its time; ``live`` and ``leaving`` follow restarts."""
    when = f"at {format_duration(e.at)}"
    if isinstance(e, ev.Produce | ev.SetProduceRate):
        _topic(c, path, e, topics, when)
        return
    c.known(known, (*path, "brokers"), e.brokers)
    if isinstance(e, ev.SetBrokerConfig):
        return
    for j, b in enumerate(e.brokers):
        if b in known and b not in live and b not in leaving:
            c.add(
                (*path, "brokers", j),
                f"broker {b} is down {when}, so it cannot have a {e.type}; start it first "
                "(broker_startup) or drop it from this event",
            )
    if isinstance(e, ev.PowerLoss | ev.BrokerRestart):
        restarted = set(e.brokers) & known
        leaving.difference_update(restarted)
        if ev.crash_detection(e) is None:  # a clean restart: up again at once
            live.update(restarted)


def _topic(
    c: Checker, path: Path, e: ev.Produce | ev.SetProduceRate, topics: Mapping[str, TopicState],
    when: str,
) -> None:  # fmt: skip
    partition = e.partition if isinstance(e, ev.Produce) else None
    if e.topic == ev.ALL_TOPICS:
        if partition is not None:
            c.add(
                (*path, "partition"),
                f"partition {partition} needs a named topic, not 'all'; name the topic or drop "
                "partition",
            )
        if not topics:
            c.add((*path, "topic"), f"'all' names no topic: none exists {when}; drop the event")
        return
    if partition is not None:
        c.partition(path, topics, e.topic, partition, when)
    elif e.topic not in topics:
        c.add(
            (*path, "topic"),
            f"topic {e.topic!r} does not exist {when}; create it first, fix the name or use "
            f"'all' (topics: {_names(topics)})",
        )


def _names(topics: Mapping[str, TopicState]) -> str:
    names = sorted(topics)
    return ", ".join(names) if len(names) <= 8 else f"{', '.join(names[:8])}, ..."


def check_emulation(c: Checker, emulation: Emulation) -> None:
    """``catch_up_ms`` is the ISR rule of the emulation without replication only."""
    if emulation.catch_up_ms and emulation.replication_on(c.events):
        why = (
            "emulation.replication is true"
            if emulation.replication
            else "the timeline has replication events"
        )
        c.add(
            ("emulation", "catch_up_ms"),
            f"catch_up_ms is {format_duration(emulation.catch_up_ms)} but replication is on "
            f"({why}), and then followers rejoin the ISR when they have fetched up to the "
            "leader; remove catch_up_ms (or set it to 0), or set emulation.replication: false",
        )
