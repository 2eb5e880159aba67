"""One ``kce verify`` run: the scenario's steps on a real Kafka cluster and on the emulator,
both ZooKeeper trees compared after each step.

A step is the scenario's events due at one virtual time (step 0 is the cluster's start: the
brokers live at t=0, the scenario's controller first, then its topics). The real cluster plays a
step's events in order with Kafka's tools and signals and is then left until it is quiescent:
its tree (controller included) unchanged for the settle interval, or, when the scenario enables
the auto leader rebalance and leaves the interval before its next event, for that interval more,
so that a rebalance check has run on the settled state. The emulator plays the same events and
runs on in virtual time until just before the next step (or ``until``).
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from pyspark.sql import SparkSession

from spark_app.scenario import Scenario, ScenarioEvent
from verify.emulator_side import EmulatorSide
from verify.real_cluster import RealClusterError, RealKafkaCluster, wait_until
from verify.real_events import TOPICS, RealPlayer
from verify.snapshot import PENDING_ADMIN, Difference, Snapshot, differences, take

QUIESCENT_TIMEOUT_S = 180.0
PENDING_FACTOR = 3
ADMIN_EVENTS = (
    "create_topic", "add_partitions", "delete_topic", "set_topic_config", "reassign_partitions",
    "cancel_reassignment", "elect_leaders",
)  # fmt: skip


@dataclass
class StepResult:
    """One step: its events, the differences found, and what each side's controller did."""

    index: int
    at_ms: int
    events: list[dict[str, Any]]
    differences: list[Difference]
    controller: dict[str, int | None]
    rejected: dict[str, list[str]] = field(default_factory=dict)
    quiescent: bool = True
    wall_seconds: float = 0.0
    kafka_state: Snapshot = field(default_factory=dict)  # the real tree, normalised

    @property
    def identical(self) -> bool:
        return not self.differences

    def label(self) -> str:
        return ", ".join(e["type"] for e in self.events) or "start"

    def to_json(self) -> dict[str, Any]:
        return {
            "step": self.index,
            "at_ms": self.at_ms,
            "events": self.events,
            "identical": self.identical,
            "differences": [d.to_json() for d in self.differences],
            "controller": self.controller,
            "rejected": self.rejected,
            "quiescent": self.quiescent,
            "wall_seconds": round(self.wall_seconds, 1),
            "kafka_state": self.kafka_state,
        }


def steps(scenario: Scenario) -> list[tuple[int, list[ScenarioEvent]]]:
    """The scenario's events grouped by virtual time, in timeline order."""
    return [
        (at, list(group)) for at, group in itertools.groupby(scenario.timeline(), lambda e: e.at)
    ]


def broker_properties(scenario: Scenario) -> dict[str, str]:
    """The scenario's ``config:`` keys (and its version's defaults) as ``server.properties``."""
    values = scenario.config.model_dump(by_alias=True, exclude_unset=True, exclude_none=True)
    return {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in values.items()}


def _controller(zk: KazooClient) -> int | None:
    try:
        data, _ = zk.get("/controller")
    except NoNodeError:
        return None
    return int(json.loads(data)["brokerid"])


class Verification:
    """The two clusters of one scenario; ``run`` yields each step's result as it is compared."""

    def __init__(
        self, spark: SparkSession, scenario: Scenario, release: str, settle_s: float,
        keep_dir: bool = False,
    ) -> None:  # fmt: skip
        self.scenario = scenario
        self.settle_s = settle_s
        self.real = RealKafkaCluster(
            release, scenario.brokers(), broker_properties(scenario),
            session_timeout_ms=scenario.config.zookeeper_session_timeout_ms, keep_dir=keep_dir,
        )  # fmt: skip
        self.emulator = EmulatorSide(spark, scenario)
        self.player = RealPlayer(self.real, self.emulator.assignment)
        self.real_ids: dict[str, str] = {}

    def close(self) -> None:
        try:
            self.real.close()
        finally:
            self.emulator.close()

    def run(
        self, on_step: Callable[[StepResult], object] = lambda _r: None
    ) -> Iterator[StepResult]:
        timeline = steps(self.scenario)
        ends = [at - 1 for at, _ in timeline[1:]] + [self.scenario.until]
        first = timeline[0][0] - 1 if timeline else self.scenario.until
        started = time.monotonic()
        self._start_real()
        result = self._compare(0, 0, [], {}, first, started)
        on_step(result)
        yield result
        for i, ((at, events), end) in enumerate(zip(timeline, ends, strict=True), start=1):
            started = time.monotonic()
            kce_rejected = self.emulator.advance_to(at)
            kafka_rejected = [r for e in events if (r := self.player.play(e)) is not None]
            rejected = {"kafka": kafka_rejected, "kce": kce_rejected}
            result = self._compare(i, at, events, rejected, end, started, gap_ms=end - at)
            on_step(result)
            yield result

    def _start_real(self) -> None:
        """The brokers live at t=0, the scenario's controller first (it wins the election), then
        the starting topics with the emulator's assignment and their configs."""
        zk = self.real.start_zookeeper()
        live = self.scenario.initial_live_brokers()
        first = self.scenario.cluster.controller
        first = live[0] if first is None else first
        self.real.start_broker(first)
        wait_until(lambda: _controller(zk) == first, 60, f"broker {first} to become controller")
        for b in live:
            if b != first:
                self.real.start_broker(b)
        for topic in sorted(self.scenario.topic_partition_counts()):
            spec = next((t for t in self.scenario.cluster.topics if t.name == topic), None)
            configs = spec.config.overrides() if spec is not None else {}
            assignment = self.emulator.assignment(topic)
            self.real.tool(
                TOPICS, "--bootstrap-server", self.real.bootstrap_servers(), "--create",
                "--topic", topic, "--replica-assignment",
                ",".join(":".join(map(str, assignment[p])) for p in sorted(assignment)),
                *[a for k, v in configs.items() for a in ("--config", f"{k}={v}")],
            )  # fmt: skip

    def _settle_s(self, gap_ms: int | None) -> float:
        config = self.scenario.config
        interval_s = config.leader_imbalance_check_interval_seconds
        rebalance = config.auto_leader_rebalance_enable and gap_ms is not None
        if rebalance and gap_ms is not None and gap_ms >= interval_s * 1000:
            return self.settle_s + interval_s
        return self.settle_s

    def _quiesce(self, settle_s: float) -> bool:
        """Wait until the real tree (and its controller) stayed unchanged ``settle_s`` seconds
        (three times that with an admin request pending); false when it did not within the
        timeout."""
        zk = self.real.zk
        assert zk is not None

        def state() -> tuple[Snapshot, int | None]:
            snap, _ = take(zk, self.real_ids)
            return snap, _controller(zk)

        deadline = time.monotonic() + QUIESCENT_TIMEOUT_S
        last, since = state(), time.monotonic()
        while time.monotonic() < deadline:
            time.sleep(0.25)
            now = state()
            if now != last:
                last, since = now, time.monotonic()
            # A pending admin request may wait for good (a move to a dead broker): it must
            # then stay untouched three times as long before the step counts as settled.
            pending = any(last[0].get(p) is not None for p in PENDING_ADMIN)
            if time.monotonic() - since >= settle_s * (PENDING_FACTOR if pending else 1):
                return True
        return False

    def _compare(
        self, index: int, at: int, events: Sequence[ScenarioEvent], rejected: dict[str, list[str]],
        end: int, started: float, gap_ms: int | None = None,
    ) -> StepResult:  # fmt: skip
        quiescent = self._quiesce(self._settle_s(gap_ms))
        self.emulator.advance_to(end)
        assert self.real.zk is not None
        kafka, self.real_ids = take(self.real.zk, self.real_ids)
        found = differences(kafka, self.emulator.snapshot())
        for e, k, c in _requests(events, rejected):
            found.append(Difference(f"request {e}", k, c))
        controller = {"kafka": _controller(self.real.zk), "kce": self.emulator.controller()}
        return StepResult(
            index, at, [e.model_dump(mode="json", by_alias=True) for e in events], found,
            controller, rejected, quiescent, time.monotonic() - started, kafka,
        )  # fmt: skip


def _requests(
    events: Sequence[ScenarioEvent], rejected: dict[str, list[str]]
) -> list[tuple[str, str, str]]:
    """Admin requests one side refused and the other accepted (the counts of refusals differ)."""
    admin = [e.type for e in events if e.type in ADMIN_EVENTS]
    kafka, kce = len(rejected.get("kafka", ())), len(rejected.get("kce", ()))
    if not admin or kafka == kce:
        return []
    return [(", ".join(admin), f"{kafka} refused", f"{kce} refused")]


__all__ = ["RealClusterError", "StepResult", "Verification", "steps"]
