"""``check_scenario``: every cross-field check of a scenario's parts, run once after the fields
validated (``Scenario`` calls it; the parts are passed, so this module does not import it)."""

from __future__ import annotations

from spark_app.scenario.checks import Checker
from spark_app.scenario.cluster import Cluster
from spark_app.scenario.durations import format_duration
from spark_app.scenario.emulation import Emulation
from spark_app.scenario.errors import Problem
from spark_app.scenario.events import ScenarioEvent
from spark_app.scenario.kafka_config import KafkaConfig
from spark_app.scenario.replication_checks import check_emulation
from spark_app.scenario.timeline_checks import check_events

# Kafka's periodic tasks keep running while nothing happens (the auto leader rebalance every
# leader.imbalance.check.interval.seconds), so a virtual day costs real seconds; a horizon of
# years would run for hours.
MAX_UNTIL_MS = 30 * 24 * 3_600_000


def check_scenario(
    cluster: Cluster,
    config: KafkaConfig,
    kafka_version: str,
    events: tuple[ScenarioEvent, ...],
    until: int,
    emulation: Emulation,
) -> list[Problem]:
    """Every cross-field problem as ``(path, message)``; empty if valid."""
    c = Checker(cluster, config, kafka_version, events)
    known = c.brokers()
    live = c.live_and_controller(known)
    topics = c.topics(known)
    c.state(known, topics)
    c.check_config()
    check_events(c, known, live, topics)
    check_emulation(c, emulation)
    last = max((e.at for e in events), default=0)
    if until > MAX_UNTIL_MS:
        c.add(
            ("until",),
            f"until {format_duration(until)} is beyond the {format_duration(MAX_UNTIL_MS)} a "
            "scenario may run; lower it",
        )
    if until < last:
        c.add(
            ("until",),
            f"until {format_duration(until)} is before the last event at "
            f"{format_duration(last)}; raise until to at least {format_duration(last)}",
        )
    return c.problems
