"""Each operation at each point as a scenario: the controller's real events on a generated cluster.

``plan(sweep, point, operation)`` builds the scenario ``kce run`` would play (``Plan.scenario``;
``kce run`` of it reports the same Kafka work) and the windows of virtual time that are timed:
everything up to ``setup_ms`` (the first controller's election, and the crashes an operation
needs before it) is not timed; each ``Phase`` runs from the previous one's end to its
``until_ms``. Broker 0 is the first controller; brokers that crash are 1, 2, … so the controller
stays up unless the operation is its failure.

Virtual times: setup events at 10 s and 20 s, the timed events at 30 s (a second phase at 40 s).
Kafka's first auto-rebalance check runs 5 s after the controller starts and then every
``leader.imbalance.check.interval.seconds``, so no check falls in a window ending at 30 s or
40 s; the operations that time a check end their window at the first one after 30 s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from scaling.sweep import (
    AutoRebalanceOp,
    BrokerFailureOp,
    BrokerStartupOp,
    ControlledShutdownOp,
    ControllerFailoverOp,
    Operation,
    Point,
    RackOutageOp,
    ReassignmentOp,
    Sweep,
    WhatIfOp,
)
from spark_app.scenario import Scenario, ScenarioError, scenario_from_data
from whatif.command import question_arguments, question_options

CONTROLLER = 0
SETUP_AT = (10_000, 20_000)
TIMED_AT = 30_000
SECOND_AT = 40_000
FIRST_CHECK_MS = 5_000  # Kafka schedules the first auto-rebalance check 5 s after failover
REBALANCE = "auto.leader.rebalance.enable"
CHECK_INTERVAL = "leader.imbalance.check.interval.seconds"


@dataclass(frozen=True)
class Phase:
    """One timed window, a row of the outputs: virtual time up to ``until_ms``."""

    label: str
    until_ms: int


@dataclass(frozen=True)
class Plan:
    """An operation at a point: the scenario, the untimed setup, the timed phases."""

    point: Point
    operation: Operation
    scenario: Scenario
    setup_ms: int
    phases: tuple[Phase, ...]


class _Events:
    """The scenario events of one plan, and what is wrong with the operation at this point."""

    def __init__(self, point: Point) -> None:
        self.point = point
        self.events: list[dict[str, Any]] = []
        self.problems: list[tuple[str, str]] = []

    def add(self, at: int, kind: str, **fields: Any) -> None:
        self.events.append({"at": at, "type": kind, **fields})

    def crashing(self, count: int, key: str) -> list[int]:
        """Brokers 1..count; the controller's broker and one more must stay."""
        if count > self.point.brokers - 1:
            self.problems.append(
                (key, f"{count} broker(s) cannot leave a cluster of {self.point.brokers} "
                 f"(broker {CONTROLLER} is the controller); lower it")
            )  # fmt: skip
        return list(range(1, count + 1))


def _first_check_after(at_ms: int, interval_s: int) -> int:
    interval = interval_s * 1000
    return FIRST_CHECK_MS + interval * math.ceil((at_ms - FIRST_CHECK_MS) / interval)


def _reassignment_plan(point: Point, count: int) -> dict[str, Any]:
    """Partitions spread over the topics (the i-th: topic i mod topics), the i-th moved to
    brokers i+1 … i+RF (mod brokers); one that already has them completes at once."""
    topics, per_topic = point.topic_count(), point.per_topic()
    entries = []
    for i in range(count):
        topic, partition = i % topics, (i // topics) % per_topic
        replicas = [(i + 1 + k) % point.brokers for k in range(point.replication_factor)]
        entries.append({"topic": f"topic-{topic}", "partition": partition, "replicas": replicas})
    return {"version": 1, "partitions": entries}


def _events(point: Point, op: Operation, interval_s: int) -> tuple[_Events, int, list[Phase]]:
    """The events of ``op``, its untimed setup's end and its phases."""
    e = _Events(point)
    label = op.label()
    phases = [Phase(label, TIMED_AT)]
    if isinstance(op, BrokerFailureOp):
        e.add(TIMED_AT, "broker_failure", brokers=e.crashing(op.brokers, "brokers"))
    elif isinstance(op, ControlledShutdownOp):
        if not 0 < op.broker < point.brokers:
            e.problems.append(
                ("broker", f"broker {op.broker} is not a broker 1..{point.brokers - 1} of the point")
            )  # fmt: skip
        e.add(TIMED_AT, "controlled_shutdown", broker=op.broker)
    elif isinstance(op, BrokerStartupOp | AutoRebalanceOp):
        brokers = e.crashing(op.brokers, "brokers")
        e.add(SETUP_AT[0], "broker_failure", brokers=brokers)
        returned = TIMED_AT if isinstance(op, BrokerStartupOp) else SETUP_AT[1]
        e.add(returned, "broker_startup", brokers=brokers)
        phases = [Phase(label, _first_check_after(TIMED_AT, interval_s))]
    elif isinstance(op, ControllerFailoverOp):
        e.add(TIMED_AT, "broker_failure", brokers=[CONTROLLER])
    elif isinstance(op, ReassignmentOp):
        if op.partitions > point.partitions:
            e.problems.append(
                ("partitions", f"{op.partitions} exceeds the point's {point.partitions} partitions")
            )  # fmt: skip
        plan = _reassignment_plan(point, min(op.partitions, point.partitions))
        e.add(TIMED_AT, "reassign_partitions", via=op.via, plan=plan)
    elif isinstance(op, RackOutageOp):
        if point.racks < 2 or op.rack >= point.racks:
            e.problems.append(
                ("rack", f"rack {op.rack} is not one of the point's racks 0..{point.racks - 1} "
                 "(a rack outage needs 2 racks or more)")
            )  # fmt: skip
        rack = [b for b in range(point.brokers) if point.racks and b % point.racks == op.rack]
        e.add(TIMED_AT, "broker_failure", brokers=rack)
        if op.recover:
            e.add(SECOND_AT, "broker_startup", brokers=rack)
            phases.append(Phase(f"{label}.recovery", SECOND_AT))
    else:
        assert isinstance(op, WhatIfOp)  # its arguments' syntax is checked with the sweep
        e.problems += _whatif_problems(point, op)
        return e, 0, [Phase(label, 0)]
    return e, TIMED_AT - 1, phases


def _whatif_problems(point: Point, op: WhatIfOp) -> list[tuple[str, str]]:
    """The brokers and the rack a question's arguments name, against the point's cluster (brokers
    0..brokers-1, broker i in rack-(i mod racks)): found now, not hours into the sweep."""
    options = question_options(question_arguments(op.question, op.args))
    problems = []
    brokers = getattr(options, "brokers", None) or ()
    unknown = [b for b in brokers if not 0 <= b < point.brokers]
    if unknown:
        problems.append(
            ("args", f"--brokers names {', '.join(map(str, unknown))}, not brokers 0..{point.brokers - 1} "
             "of the point")
        )  # fmt: skip
    rack = getattr(options, "rack", None)
    racks = [f"rack-{i}" for i in range(point.racks)]
    if rack is not None and rack not in racks:
        known = f"its racks are {', '.join(racks)}" if racks else "its brokers have no rack"
        problems.append(("args", f"--rack {rack} is not a rack of the point; {known}"))
    any_k = getattr(options, "any_k", None)
    if any_k is not None and any_k > point.brokers:
        problems.append(("args", f"--any {any_k} is more than the point's {point.brokers} brokers"))
    return problems


def _scenario_data(sweep: Sweep, point: Point, op: Operation | None) -> dict[str, Any]:
    config = dict(sweep.config)
    if isinstance(op, BrokerStartupOp | AutoRebalanceOp):
        config[REBALANCE] = True  # the operation is the check's election
    return {
        "name": f"{sweep.name}-{op.label() if op else 'config'}-{point.partitions}",
        "seed": sweep.seed,
        "kafka_version": sweep.kafka_version,
        "spark": sweep.spark.model_dump(),
        "config": config,
        "execution": sweep.execution.model_dump(),
        "cluster": {
            "brokers": {"generate": {"count": point.brokers, "racks": point.racks}},
            "generate": {
                "topics": point.topic_count(),
                "partitions_per_topic": point.per_topic(),
                "replication_factor": point.replication_factor,
            },
            "controller": CONTROLLER,
        },
    }


def _located(path: str, message: str, point: Point) -> tuple[str, str]:
    """A problem of a point's scenario: the sweep's own keys (``config``, ``kafka_version``)
    have the same path in the sweep; others are the point's."""
    if path.split(".")[0].split("[")[0] in ("config", "kafka_version", "spark", "execution"):
        return path, message
    return f"({point.label()}) {path}", message


def check_interval(sweep: Sweep) -> int:
    """``leader.imbalance.check.interval.seconds`` of the sweep's Kafka configuration, which the
    windows depend on; a problem of the configuration is a ``ScenarioError`` at its key."""
    data = _scenario_data(sweep, Point(partitions=1, brokers=1, racks=0, replication_factor=1,
                                       partitions_per_topic=1), None)  # fmt: skip
    scenario = scenario_from_data({**data, "until": TIMED_AT})
    return int(scenario.config.get(CHECK_INTERVAL))  # type: ignore[arg-type]


def plan(
    sweep: Sweep, point: Point, op: Operation, interval: int, where: str = "operations"
) -> Plan:
    """``op`` at ``point``; a ``ScenarioError`` names the operation's field and the point."""
    events, setup_ms, phases = _events(point, op, interval)
    if events.problems:
        raise ScenarioError(
            [(f"{where}.{key}", f"at {point.label()}: {msg}") for key, msg in events.problems]
        )
    until = max(1000, max(p.until_ms for p in phases))
    data = _scenario_data(sweep, point, op)
    try:
        scenario = scenario_from_data({**data, "events": events.events, "until": until})
    except ScenarioError as err:
        raise ScenarioError([_located(path, msg, point) for path, msg in err.problems]) from None
    return Plan(point, op, scenario, setup_ms, tuple(phases))


def plan_all(sweep: Sweep, source: str | None = None) -> list[Plan]:
    """Every operation at every point, point by point; every problem in one ``ScenarioError``."""
    try:
        interval = check_interval(sweep)
    except ScenarioError as err:
        raise ScenarioError(err.problems, source) from None
    plans, problems = [], []
    for point in sweep.all_points():
        for i, op in sweep.operations_at(point):
            try:
                plans.append(plan(sweep, point, op, interval, f"operations[{i}]"))
            except ScenarioError as err:
                problems += [p for p in err.problems if p not in problems]
    if problems:
        raise ScenarioError(problems, source)
    return plans
