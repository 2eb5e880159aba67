"""The sweep file of ``kce scale SWEEP.yaml``: strict models, the points, loading.

A sweep names cluster sizes (``axes``: every combination of the listed values, or ``points``:
an explicit list) and operations to time at each size. Every point is a generated cluster as
``kce run`` builds one (``cluster.brokers.generate`` and ``cluster.generate``): brokers
``0..brokers-1``, broker ``i`` in ``rack-(i mod racks)``, topics of ``partitions_per_topic``
partitions placed by Kafka's rack-aware algorithm, broker 0 the first controller.

``load_sweep(path)`` returns a validated ``Sweep`` or raises ``ScenarioError`` (the scenario's
error type: every problem as ``(yaml.path, message)``), also for every problem of the scenarios
the sweep's points and operations make (``operations.plan_all``).
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, Field, Strict, ValidationError, model_validator

from spark_app.limits import MAX_BROKERS, MAX_PARTITIONS, MAX_SWEEP_POINTS
from spark_app.quickstart import fit_problems
from spark_app.scenario.errors import ScenarioError, problems_from_validation_error
from spark_app.scenario.events import STRICT, BrokerId, Count
from spark_app.scenario.kafka_values import DEFAULT_KAFKA_VERSION, KafkaVersion
from spark_app.scenario.loading import read_yaml_file
from spark_app.scenario.model import Execution, SparkSettings
from whatif.cluster import WhatIfInputError, broker_defaults
from whatif.command import QUESTIONS, question_arguments, question_options

DEFAULT_BROKERS = 100
DEFAULT_RACKS = 3
DEFAULT_REPLICATION_FACTOR = 3
DEFAULT_PARTITIONS_PER_TOPIC = 100

Racks = Annotated[int, Strict(), Field(ge=0)]
Seconds = Annotated[float, Field(gt=0, allow_inf_nan=False)]


def _listed(value: object) -> object:
    """An axis given as one value is a list of one."""
    return value if isinstance(value, list | tuple) else [value]


CountAxis = Annotated[tuple[Count, ...], BeforeValidator(_listed)]
RackAxis = Annotated[tuple[Racks, ...], BeforeValidator(_listed)]


class Budgets(BaseModel):
    """Limits every operation at a point must stay within; exceeding one makes ``kce scale``
    exit 1 (after writing its outputs)."""

    model_config = STRICT
    wall_seconds: Seconds | None = Field(
        None, description="an operation's median wall time at the point, in seconds"
    )
    peak_rss_mb: Seconds | None = Field(
        None, description="an operation's peak driver RSS (Python + JVM), in MiB"
    )


class Point(BaseModel):
    """One cluster size."""

    model_config = STRICT
    partitions: Annotated[int, Strict(), Field(ge=1, le=MAX_PARTITIONS)] = Field(
        description=f"partitions in the cluster (at most {MAX_PARTITIONS:,})"
    )
    brokers: Annotated[int, Strict(), Field(ge=1, le=MAX_BROKERS)] = Field(
        DEFAULT_BROKERS, description=f"brokers 0..brokers-1 (at most {MAX_BROKERS:,})"
    )
    racks: Racks = Field(
        DEFAULT_RACKS, description="racks rack-0.. (broker i in rack-(i mod racks)); 0: none"
    )
    replication_factor: Count = Field(
        DEFAULT_REPLICATION_FACTOR, description="replicas per partition"
    )
    partitions_per_topic: Count | None = Field(
        None,
        description=f"partitions of every topic (default {DEFAULT_PARTITIONS_PER_TOPIC} unless topics is given)",
    )
    topics: Count | None = Field(None, description="topic count (instead of partitions_per_topic)")
    budgets: Budgets | None = Field(None, description="this point's budgets (over the sweep's)")
    operations: tuple[str, ...] | None = Field(
        None, description="labels of the sweep's operations to run here (default: all)"
    )

    @model_validator(mode="after")
    def _fits(self) -> Point:
        problems = []
        if self.partitions_per_topic is not None and self.topics is not None:
            problems.append("give partitions_per_topic or topics, not both")
        elif self.partitions % (self.topics or self.per_topic()) != 0:
            by = "topics" if self.topics else "partitions_per_topic"
            problems.append(
                f"partitions {self.partitions} is not a multiple of {by} "
                f"{self.topics or self.per_topic()}; make it one"
            )
        problems += fit_problems(self.brokers, self.racks, self.replication_factor)
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def per_topic(self) -> int:
        if self.topics is not None:
            return self.partitions // self.topics
        return self.partitions_per_topic or DEFAULT_PARTITIONS_PER_TOPIC

    def topic_count(self) -> int:
        return self.partitions // self.per_topic()

    def axes(self) -> dict[str, int]:
        """The point's coordinates: the CSV's axis columns, in their order."""
        return {
            "partitions": self.partitions,
            "brokers": self.brokers,
            "racks": self.racks,
            "replication_factor": self.replication_factor,
            "topics": self.topic_count(),
            "partitions_per_topic": self.per_topic(),
        }

    def label(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.axes().items())


class Axes(BaseModel):
    """Every combination of the listed values is a point (a single value is a list of one)."""

    model_config = STRICT
    partitions: CountAxis = Field(min_length=1, description="partition counts")
    brokers: CountAxis = Field((DEFAULT_BROKERS,), min_length=1, description="broker counts")
    racks: RackAxis = Field((DEFAULT_RACKS,), min_length=1, description="rack counts")
    replication_factor: CountAxis = Field(
        (DEFAULT_REPLICATION_FACTOR,), min_length=1, description="replication factors"
    )
    partitions_per_topic: CountAxis = Field(
        (), description=f"partitions per topic (default {DEFAULT_PARTITIONS_PER_TOPIC})"
    )
    topics: CountAxis = Field((), description="topic counts (instead of partitions_per_topic)")

    def combinations(self) -> list[dict[str, int]]:
        """The points' fields, partitions varying fastest (so each series is in size order)."""
        per_topic: list[tuple[str, int | None]] = [("partitions_per_topic", None)]
        if self.partitions_per_topic or self.topics:
            per_topic = [("partitions_per_topic", v) for v in self.partitions_per_topic]
            per_topic += [("topics", v) for v in self.topics]
        axes = (self.brokers, self.racks, self.replication_factor, per_topic, self.partitions)
        count = math.prod(len(axis) for axis in axes)
        if count > MAX_SWEEP_POINTS:  # before the product is built
            raise ScenarioError(
                [("axes", f"{count:,} combinations, above the {MAX_SWEEP_POINTS:,} points a "
                  "sweep may have; list fewer values")]
            )  # fmt: skip
        out = []
        for brokers, racks, rf, (key, value), partitions in itertools.product(
            self.brokers, self.racks, self.replication_factor, per_topic, sorted(self.partitions)
        ):
            fields = {"partitions": partitions, "brokers": brokers, "racks": racks}
            fields["replication_factor"] = rf
            if value is not None:
                fields[key] = value
            out.append(fields)
        return out


# -- operations ------------------------------------------------------------------------------


class _Operation(BaseModel):
    model_config = STRICT
    type: str = Field(description="operation type (each operation narrows it to its own)")
    name: str | None = Field(
        None,
        pattern=r"^[A-Za-z0-9._-]+$",
        description="the operation's label in the outputs (default: its type)",
    )

    def label(self) -> str:
        return self.name or self.type


class BrokerFailureOp(_Operation):
    """Brokers 1..brokers crash at once (``BrokerChange``)."""

    type: Literal["broker_failure"] = Field(description="operation type")
    brokers: Count = Field(
        1, description="how many brokers crash (1..N; broker 0 is the controller)"
    )


class ControlledShutdownOp(_Operation):
    """A broker shuts down cleanly (``ControlledShutdown``, then ``BrokerChange``)."""

    type: Literal["controlled_shutdown"] = Field(description="operation type")
    broker: BrokerId = Field(1, description="the broker that shuts down")


class BrokerStartupOp(_Operation):
    """Brokers 1..brokers, crashed before the timing, start (``BrokerChange``, their followers
    rejoin the ISRs) and the controller's next auto-rebalance check elects their preferred
    leaders back."""

    type: Literal["broker_startup"] = Field(description="operation type")
    brokers: Count = Field(1, description="how many brokers return (1..N)")


class AutoRebalanceOp(_Operation):
    """One ``AutoPreferredReplicaLeaderElection`` pass after brokers 1..brokers crashed and
    returned (their preferred leaderships are elsewhere)."""

    type: Literal["auto_rebalance"] = Field(description="operation type")
    brokers: Count = Field(10, description="how many brokers crashed and returned (1..N)")


class ControllerFailoverOp(_Operation):
    """The controller's broker (0) crashes: another broker wins ``/controller`` (``Reelect``),
    loads the context from ZooKeeper and handles the dead broker."""

    type: Literal["controller_failover"] = Field(description="operation type")


class ReassignmentOp(_Operation):
    """An admin reassigns N partitions (their replicas moved one broker up); the new replicas
    join the ISRs and the reassignments complete."""

    type: Literal["reassignment"] = Field(description="operation type")
    partitions: Count = Field(description="how many partitions are reassigned")
    via: Literal["api", "zk"] = Field(
        "api", description="api: AlterPartitionReassignments; zk: /admin/reassign_partitions"
    )


class RackOutageOp(_Operation):
    """Every broker of one rack crashes at once; with ``recover`` they start again afterwards,
    timed as a second row (``<label>.recovery``)."""

    type: Literal["rack_outage"] = Field(description="operation type")
    rack: Racks = Field(1, description="the rack index (rack-<rack>); rack 0 holds the controller")
    recover: bool = Field(True, description="also time the rack's return")


class WhatIfOp(_Operation):
    """A ``kce whatif`` question over the point's starting cluster (no controller events)."""

    type: Literal["whatif"] = Field(description="operation type")
    question: Literal[tuple(QUESTIONS)] = Field(description="the question, as kce whatif names it")  # type: ignore[valid-type]
    args: tuple[str, ...] = Field((), description="its options, as on the command line")

    def label(self) -> str:
        return self.name or f"whatif-{self.question}"

    @model_validator(mode="after")
    def _arguments(self) -> WhatIfOp:
        try:
            args = question_arguments(self.question, self.args)
            question_options(args)
            broker_defaults(args.config)
        except WhatIfInputError as err:
            raise ScenarioError([("args", f"kce whatif {self.question}: {err}")]) from None
        return self


Operation = Annotated[
    BrokerFailureOp
    | ControlledShutdownOp
    | BrokerStartupOp
    | AutoRebalanceOp
    | ControllerFailoverOp
    | ReassignmentOp
    | RackOutageOp
    | WhatIfOp,
    Field(discriminator="type"),
]


class Sweep(BaseModel):
    """A sweep file: sizes, operations, repeats, budgets."""

    model_config = STRICT
    name: str = Field(
        pattern=r"^[A-Za-z0-9._-]+$", description="names the sweep; outputs go to out/scale-<name>"
    )
    seed: Annotated[int, Strict()] = Field(0, description="seed of Kafka's assignment draws")
    kafka_version: KafkaVersion = Field(DEFAULT_KAFKA_VERSION, description="emulated Kafka version")
    config: dict[str, Any] = Field(
        default_factory=dict,
        description="Kafka keys for every point's cluster (server.properties names)",
    )
    spark: SparkSettings = Field(default_factory=SparkSettings, description="Spark settings")
    execution: Execution = Field(default_factory=Execution, description="where events run")
    repeat: Count = Field(
        3, description="runs of each operation at each point; the median is reported"
    )
    axes: Axes | None = Field(None, description="every combination of these values is a point")
    points: tuple[Point, ...] | None = Field(
        None, min_length=1, description="or: the points, listed"
    )
    budgets: Budgets | None = Field(
        None, description="limits for every point (exit 1 when exceeded)"
    )
    operations: tuple[Operation, ...] = Field(
        min_length=1, description="what to time at each point"
    )

    @model_validator(mode="after")
    def _one_way_to_points(self) -> Sweep:
        problems = []
        if (self.axes is None) == (self.points is None):
            problems.append(("", "give axes (every combination) or points (a list), exactly one"))
        labels = [op.label() for op in self.operations]
        for i, op in enumerate(self.operations):
            if labels.index(op.label()) != i:
                problems.append(
                    (f"operations[{i}]", f"the label {op.label()!r} is taken; give this one a name")
                )
        for i, point in enumerate(self.points or ()):
            for j, label in enumerate(point.operations or ()):
                if label not in labels:
                    problems.append(
                        (f"points[{i}].operations[{j}]",
                         f"no operation is labelled {label!r}; use one of: {', '.join(labels)}")
                    )  # fmt: skip
        if problems:
            raise ScenarioError(problems)
        return self

    def all_points(self) -> list[Point]:
        """The points, validated (a bad combination of the axes is a ``ScenarioError``)."""
        if self.points is not None:
            return list(self.points)
        assert self.axes is not None
        out, problems = [], []
        for fields in self.axes.combinations():
            try:
                out.append(Point.model_validate(fields))
            except ValidationError as err:
                where = " ".join(f"{k}={v}" for k, v in fields.items())
                for e in err.errors():
                    problems.append(("axes", f"({where}) {e['msg'].removeprefix('Value error, ')}"))
        if problems:
            raise ScenarioError(problems)
        return out

    def operations_at(self, point: Point) -> list[tuple[int, Operation]]:
        """The operations to run at ``point`` with their index in the file."""
        chosen = point.operations
        return [
            (i, op)
            for i, op in enumerate(self.operations)
            if chosen is None or op.label() in chosen
        ]

    def budgets_of(self, point: Point) -> Budgets:
        """The point's own budgets, each unset one from the sweep's."""
        own = point.budgets or Budgets()
        common = self.budgets or Budgets()
        return Budgets(
            wall_seconds=own.wall_seconds or common.wall_seconds,
            peak_rss_mb=own.peak_rss_mb or common.peak_rss_mb,
        )


def sweep_from_data(data: object, source: str) -> Sweep:
    """Validate parsed YAML; every problem in one ``ScenarioError``."""
    if not isinstance(data, dict):
        kind = type(data).__name__
        raise ScenarioError(
            [("", f"a sweep is a YAML mapping (name, axes, operations, ...), not {kind}")], source
        )
    try:
        sweep = Sweep.model_validate(data)
        sweep.all_points()
    except ValidationError as err:
        raise ScenarioError(problems_from_validation_error(Sweep, err), source) from None
    except ScenarioError as err:
        raise ScenarioError(err.problems, source) from None
    return sweep


def load_sweep(path: str | Path) -> Sweep:
    """Read and validate a sweep file (``ScenarioError`` lists every problem)."""
    return sweep_from_data(read_yaml_file(path), str(path))
