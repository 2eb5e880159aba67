"""The reassignment-plan validator: every plan the planner makes and every plan ``audit`` reads.

A plan is Kafka's reassignment JSON (``kafka-reassign-partitions.sh --execute``):
``{"version":1,"partitions":[{"topic","partition","replicas"[,"log_dirs"]}]}``. ``parse_plan``
reads it strictly (unknown keys and wrong types are input errors naming the file and the JSON
path); ``check_plan`` then lists what Kafka would refuse and what would be unsafe:

=====================  ========  ===============================================================
check                  severity  from
=====================  ========  ===============================================================
version is 1           error     the tool (``parsePartitionReassignmentData``)
non-empty plan         error     the tool ("Partition reassignment list cannot be empty")
partition listed once  error     the tool ("contains duplicate topic partitions")
log_dirs length        error     the tool (one log dir, or "any", per replica)
non-empty replicas     error     the controller, §10.4 (INVALID_REPLICA_ASSIGNMENT)
no duplicate replica   error     the controller, §10.4
non-negative ids       error     the controller, §10.4
known partition        error     the controller, §10.4 (UNKNOWN_TOPIC_OR_PARTITION)
topic not being        error     the controller (``maybeTriggerPartitionReassignment``: a topic
deleted                          queued for deletion answers UNKNOWN_TOPIC_OR_PARTITION)
replica brokers exist  error     the tool ("Unknown broker id"); declared new brokers allowed
replication factor     warning   RF changes are allowed by Kafka, but rarely meant
rack safety            error     fewer racks than before, where the brokers' racks allow more
rack safety            warning   two replicas in one rack where racks allow, not made worse
=====================  ========  ===============================================================

Rack checks apply only when every broker the partition's lists name has a rack (Kafka's own
rack-aware placement needs that too, §9.4). A partition "could" span ``min(RF, racks)`` racks.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError

from spark_app.limits import MAX_PLAN_BYTES
from statemachines.schemas import INT_MAX
from whatif.cluster import WhatIfInputError

ERROR = "error"
WARNING = "warning"

PartitionKey = tuple[str, int]


# Kafka's tool reads partition ids and broker ids as Java Ints: a larger number is no plan.
KafkaInt = Annotated[StrictInt, Field(ge=-INT_MAX - 1, le=INT_MAX)]
# About a million partitions; json and the models hold some 8 times a plan's size in memory.


class PlanPartition(BaseModel):
    """One entry of ``partitions``."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    topic: StrictStr = Field(description="the topic name")
    partition: KafkaInt = Field(description="the partition id")
    replicas: list[KafkaInt] = Field(description="the target replicas, preferred leader first")
    log_dirs: list[StrictStr] | None = Field(
        None, description="one absolute log dir or 'any' per replica (optional)"
    )


class ReassignmentPlan(BaseModel):
    """Kafka's reassignment JSON."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    version: StrictInt = Field(description="the format version; Kafka reads version 1")
    partitions: list[PlanPartition] = Field(description="the partitions to reassign")


@dataclass(frozen=True)
class Problem:
    """One finding: ``topic``/``partition`` are None for a whole-plan problem."""

    topic: str | None
    partition: int | None
    field: str
    message: str
    severity: str = ERROR
    refused_by_kafka: bool = True  # False: Kafka would run it (RF change, rack spread)

    def as_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "field": self.field,
            "message": self.message,
            "severity": self.severity,
            "refused_by_kafka": self.refused_by_kafka,
        }

    def line(self) -> str:
        """One line for the terminal: severity, partition and field, message."""
        where = f"{self.topic}-{self.partition} " if self.topic is not None else ""
        return f"{self.severity}: {where}{self.field}: {self.message}"


def _json_path(loc: Sequence[int | str]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def parse_plan(path: str | Path) -> ReassignmentPlan:
    """Read a reassignment JSON file; a ``WhatIfInputError`` names the file and the JSON path."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_PLAN_BYTES:
            raise WhatIfInputError(
                f"{path}: {size:,} bytes, above the {MAX_PLAN_BYTES:,} a plan may have — split "
                "the plan and run it in parts"
            )
        text = path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise WhatIfInputError(f"{path}: cannot read the plan ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise WhatIfInputError(
            f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason}) — Kafka's plans are UTF-8 "
            "JSON"
        ) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise WhatIfInputError(
            f"{path}:{exc.lineno}: not JSON ({exc.msg}, column {exc.colno}) — write Kafka's "
            'reassignment JSON {"version":1,"partitions":[...]}'
        ) from None
    return plan_from_json(data, str(path))


def plan_from_json(data: Any, where: str) -> ReassignmentPlan:
    """``data`` (parsed JSON) as a plan; ``where`` names it in errors."""
    try:
        return ReassignmentPlan.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{_json_path(err['loc'])}: {err['msg']}" + _given(err) for err in exc.errors()[:5]
        )
        raise WhatIfInputError(
            f"{where}: {problems} — fix the plan (Kafka's reassignment JSON: "
            '{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]}]})'
        ) from None


def refused_error(
    path: str | Path,
    problems: Sequence[Problem],
    plan: ReassignmentPlan,
    brokers: Iterable[int],
) -> WhatIfInputError | None:
    """The input error of a plan Kafka refuses (``check_plan``'s refusing problems), or None: the
    first refusal as the audit words it, how many more, and how to go on, in three lines."""
    refused = [p for p in problems if p.severity == ERROR and p.refused_by_kafka]
    if not refused:
        return None
    more = f"  … and {len(refused) - 1} more" if len(refused) > 1 else "  (1 error)"
    return WhatIfInputError(
        f"{path}: Kafka refuses this plan: {refused[0].line()}\n"
        f"{more} (kce whatif audit lists every problem)\n{_fix(plan, brokers)}"
    )


def _fix(plan: ReassignmentPlan, brokers: Iterable[int]) -> str:
    """The refusal's last line: how to go on."""
    live = set(brokers)
    new = sorted({b for p in plan.partitions for b in p.replicas if b >= 0 and b not in live})
    if new:  # a scale-out's plan, say: its brokers start before it runs
        ids = ",".join(map(str, new))
        return (
            f"brokers {ids} are not in the snapshot: if the plan adds them, declare them with "
            f"--new-brokers {ids} (ID:RACK with racks) or the scale-out's output directory"
        )
    return "fix the plan"


def _given(err: Mapping[str, Any]) -> str:
    if err["type"] in ("missing", "extra_forbidden"):
        return ""
    return f" (got {json.dumps(err.get('input'), default=str)[:40]})"


def check_plan(
    plan: ReassignmentPlan,
    current: Mapping[PartitionKey, Sequence[int]],
    brokers: Iterable[int],
    racks: Mapping[int, str | None],
    deleting: Iterable[str] = (),
) -> list[Problem]:
    """Every problem of ``plan`` against the cluster.

    ``current`` maps (topic, partition) to its current replicas, for at least the plan's
    partitions (a partition missing from it is unknown to the cluster); ``brokers`` are the
    brokers a replica may be placed on (live ones and those the plan adds); ``racks`` maps brokers
    to their rack (None or absent = rackless); ``deleting`` are the topics queued for deletion.
    """
    known = set(brokers)
    problems: list[Problem] = []
    if plan.version != 1:
        problems.append(
            Problem(None, None, "version", f"version {plan.version} is not supported — write 1")
        )
    if not plan.partitions:
        problems.append(
            Problem(None, None, "partitions", "the plan lists no partition — Kafka refuses it")
        )
    seen = Counter((p.topic, p.partition) for p in plan.partitions)
    # The racks a replica may be placed in: those of the brokers it may go to.
    all_racks = {racks.get(b) for b in known} - {None}
    doomed = frozenset(deleting)
    for entry in plan.partitions:
        problems.extend(_check_entry(entry, seen, current, known, racks, len(all_racks)))
        if entry.topic in doomed and (entry.topic, entry.partition) in current:
            problems.append(
                Problem(
                    entry.topic,
                    entry.partition,
                    "topic",
                    f"topic {entry.topic} is queued for deletion — Kafka refuses to reassign it "
                    "(UNKNOWN_TOPIC_OR_PARTITION); leave it out of the plan",
                )
            )
    return problems


def _check_entry(
    entry: PlanPartition,
    seen: Counter[PartitionKey],
    current: Mapping[PartitionKey, Sequence[int]],
    known: set[int],
    racks: Mapping[int, str | None],
    rack_count: int,
) -> list[Problem]:
    t, p, target = entry.topic, entry.partition, entry.replicas
    out: list[Problem] = []

    def problem(field: str, message: str, severity: str = ERROR) -> None:
        out.append(Problem(t, p, field, message, severity, severity == ERROR))

    if seen[(t, p)] > 1:
        problem("partition", f"{t}-{p} is listed {seen[(t, p)]} times — list each partition once")
    if entry.log_dirs is not None and len(entry.log_dirs) != len(target):
        problem(
            "log_dirs",
            f"{len(entry.log_dirs)} log dirs for {len(target)} replicas — give one per replica "
            "('any' for no preference)",
        )
    if not target:
        problem("replicas", "empty replica list — a partition needs at least one replica")
        return out
    twice = sorted(b for b, n in Counter(target).items() if n > 1)
    if twice:
        problem("replicas", f"broker {twice[0]} is listed twice — list each broker once")
    negative = sorted(b for b in target if b < 0)
    if negative:
        problem("replicas", f"negative broker id {negative[0]} — broker ids are >= 0")
    before = current.get((t, p))
    if before is None:
        problem("partition", f"{t}-{p} does not exist in the cluster — check topic and partition")
        return out
    unknown = sorted({b for b in target if b >= 0 and b not in known})
    if unknown:
        problem(
            "replicas",
            f"unknown broker id(s) {','.join(map(str, unknown))} — use live brokers, or declare "
            "the brokers the plan adds (--new-brokers)",
        )
    if len(target) != len(before):
        problem(
            "replicas",
            f"replication factor changes from {len(before)} to {len(target)} — Kafka allows it; "
            "keep the RF unless meant",
            WARNING,
        )
    if twice or negative:
        return out
    out.extend(_rack_problems(t, p, before, target, racks, rack_count))
    return out


def _rack_problems(
    topic: str,
    partition: int,
    before: Sequence[int],
    target: Sequence[int],
    racks: Mapping[int, str | None],
    rack_count: int,
) -> list[Problem]:
    after_racks = [racks.get(b) for b in target]
    if rack_count < 2 or any(r is None for r in after_racks):
        return []
    spread = len(set(after_racks))
    possible = min(len(target), rack_count)
    if spread >= possible:
        return []
    before_racks = [racks.get(b) for b in before]
    was = len(set(before_racks)) if all(r is not None for r in before_racks) else 0
    shared = sorted(r for r, n in Counter(after_racks).items() if n > 1)  # type: ignore[type-var]
    if spread < min(was, possible):
        return [
            Problem(
                topic,
                partition,
                "replicas",
                f"replicas span {spread} rack(s), {was} before (rack {shared[0]} holds two) — "
                f"place them in {possible} different racks",
                refused_by_kafka=False,
            )
        ]
    return [
        Problem(
            topic,
            partition,
            "replicas",
            f"replicas span {spread} of {possible} possible racks (rack {shared[0]} holds two); "
            "not worse than before",
            WARNING,
            refused_by_kafka=False,
        )
    ]


def errors(problems: Iterable[Problem]) -> list[Problem]:
    """The problems Kafka would refuse or that make rack spread worse."""
    return [p for p in problems if p.severity == ERROR]
