"""Playing a plan on a fresh emulated cluster, and what each timed phase cost and did.

A run is ``kce run``'s own machinery (``runner.starting_table``, ``start_playback``) on an
emulated ZooKeeper, without its output files (no state-change log, no tables written): the cluster is bootstrapped and played up to the plan's ``setup_ms`` untimed,
then each phase's window is measured (``measure.Probe``). Kafka's work in a window is summed from
the ``EventRecord`` of every controller event processed in it, the same records ``kce run``
writes to ``events.jsonl``, and from the ZooKeeper reads the emulated ensemble served.

A what-if question is answered over the point's starting table (in Spark before the timing, as
``bench/whatif.py`` times them), its summary kept beside the row.
"""

from __future__ import annotations

import dataclasses
import gc
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from controller.partition_store import EmulatedEnsemble
from controller.records import EventRecord
from scaling.measure import Cost, Probe
from scaling.operations import Plan
from scaling.sweep import Point, WhatIfOp
from spark_app import runner
from spark_app.progress import format_seconds
from whatif.command import question_arguments, question_function, question_options
from whatif.sources import scenario_cluster

REQUEST_KEYS = (
    "LeaderAndIsr",
    "LeaderAndIsr_partitions",
    "UpdateMetadata",
    "UpdateMetadata_partitions",
    "StopReplica",
    "StopReplica_partitions",
    "StopReplica_deletes",
)
WORK_KEYS = (
    "events",
    "elections",
    "unclean_elections",
    "failed_elections",
    "partitions_changed",
    "zk_reads",
    "zk_writes",
    *REQUEST_KEYS,
)


@dataclass
class PhaseRun:
    """One phase of one run: its cost, Kafka's work (None for a what-if question), where the
    events ran, the errors, and the question's summary."""

    label: str
    setup_seconds: float
    cost: Cost
    work: dict[str, int] | None = None
    controller_seconds: float | None = None
    execution: str | None = None
    errors: list[str] = field(default_factory=list)
    answer: dict[str, Any] | None = None


def kafka_work(records: list[EventRecord], zk_reads: int) -> dict[str, int]:
    """Kafka's work in ``records``: the figures ``kce run`` reports, by ``WORK_KEYS``."""
    work = dict.fromkeys(WORK_KEYS, 0)
    for r in records:
        work["events"] += 1
        work["elections"] += r.counters.get("elected", 0)
        work["unclean_elections"] += r.counters.get("unclean_elected", 0)
        work["failed_elections"] += r.counters.get("failed_election", 0)
        work["partitions_changed"] += r.partitions_changed
        work["zk_writes"] += r.zk_writes
        for key in REQUEST_KEYS:
            work[key] += r.requests.get(key, 0)
    work["zk_reads"] = zk_reads
    return work


def _execution(records: list[EventRecord]) -> str | None:
    """``driver``, ``spark`` or ``driver+spark``: where the window's commits ran."""
    where = {w for r in records for w in r.execution}
    return "+".join(w for w in ("driver", "spark") if w in where) or None


def _release(spark: SparkSession, rows: list[dict[str, Any]] | None) -> None:
    """Free a run's tables before the next (the ensemble frees its own when closed). Spark's
    cleaner frees a table once the JVM has collected its handle, so a run whose tables were in
    Spark (not on the driver) ends with a JVM collection."""
    gc.collect()
    if rows is None:
        spark.sparkContext._jvm.System.gc()  # type: ignore[attr-defined]


def _where(plan: Plan, label: str | None = None) -> str:
    return f"{plan.point.label()} · {label or plan.phases[0].label}"


def _took(cost: Cost) -> str:
    peak = cost.peak_rss_mb()
    memory = "" if peak is None else f", driver peak RSS {peak / 1024:.1f} GiB"
    return f"{cost.wall_seconds:.2f} s{memory}"


class Player:
    """Plays plans point by point. A point's starting table is generated and checked once,
    untimed, and bootstrapped by each of its runs (every operation's scenario at a point has the
    same cluster); it is freed when the next point starts, or at ``close``. Each step done is told
    to ``log``: the starting table, a run's setup, each timed phase."""

    def __init__(
        self, spark: SparkSession, probe: Probe, log: Callable[[str], None] = lambda _: None
    ) -> None:
        self.spark = spark
        self.probe = probe
        self.log = log
        self._point: Point | None = None
        self._starting: tuple[DataFrame, list[dict[str, Any]] | None] | None = None

    def starting(self, plan: Plan) -> tuple[DataFrame, list[dict[str, Any]] | None]:
        if self._starting is None or plan.point != self._point:
            self.close()
            started = time.perf_counter()
            self._starting = runner.starting_table(self.spark, plan.scenario, persist=True)
            self._point = plan.point
            took = format_seconds(time.perf_counter() - started)
            self.log(f"{plan.point.label()}: starting table generated and checked in {took}")
        return self._starting

    def close(self) -> None:
        if self._starting is not None:
            self._starting[0].unpersist()
            self._starting = self._point = None

    def play(self, plan: Plan) -> list[PhaseRun]:
        """One run of ``plan``: a row's worth of measurements per phase."""
        if isinstance(plan.operation, WhatIfOp):
            return self._whatif(plan, plan.operation)
        return self._emulated(plan)

    def _emulated(self, plan: Plan) -> list[PhaseRun]:
        scenario, spark = plan.scenario, self.spark
        ensemble = EmulatedEnsemble()
        starting, rows = self.starting(plan)
        try:
            started = time.perf_counter()
            playback = runner.start_playback(spark, scenario, ensemble, starting, rows)
            cluster, records, rejected = playback.cluster, playback.records, playback.rejected
            cluster.advance_to(plan.setup_ms)
            setup = time.perf_counter() - started
            self.log(f"{_where(plan)}: set up in {format_seconds(setup)}")
            out = []
            for phase in plan.phases:
                first, reads, refused = len(records), ensemble.store.reads, len(rejected)
                with self.probe.measuring() as cost:
                    cluster.advance_to(phase.until_ms)
                self.log(f"{_where(plan, phase.label)}: {_took(cost)}")
                window = records[first:]
                errors = [r.failed for r in window if r.failed]
                errors += [f.line() for f in rejected[refused:]]
                out.append(
                    PhaseRun(
                        phase.label,
                        setup,
                        cost,
                        kafka_work(window, ensemble.store.reads - reads),
                        sum(r.processing_ms for r in window) / 1000,
                        _execution(window),
                        errors,
                    )
                )
            return out
        finally:
            ensemble.close()
            _release(spark, rows)

    def _whatif(self, plan: Plan, op: WhatIfOp) -> list[PhaseRun]:
        args = question_arguments(op.question, op.args)
        started = time.perf_counter()
        starting, rows = self.starting(plan)
        cluster = scenario_cluster(self.spark, plan.scenario, args.config, plan.scenario.name)
        # The snapshot is in Spark before the question, as a loaded one is.
        cluster = dataclasses.replace(cluster, partitions=starting.cache())
        cluster.partitions.count()
        setup = time.perf_counter() - started
        try:
            with self.probe.measuring() as cost:
                answer = question_function(op.question)(self.spark, cluster, question_options(args))
            self.log(f"{_where(plan)}: {_took(cost)}")
            return [PhaseRun(plan.phases[0].label, setup, cost, answer=dict(answer.summary))]
        finally:
            _release(self.spark, rows)
