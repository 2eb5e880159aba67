"""``execute PLAN.json``: replay a reassignment plan in waves under movement caps, in virtual time.

The plan is read and checked as ``audit`` reads and checks it (``plan_check``); a plan with a
problem Kafka refuses is an input error. Then the plan's topics are emulated with their logs
(``execute_cluster``): Kafka's controller over brokers whose new replicas start empty and join
the ISR once they have copied the partition's log at their broker's fetch throughput (shared by
the replicas the broker copies at once, within the throttles of ``--throttle``); the controller
then completes the reassignment (phase B of KIP-455, the removed replicas are deleted).

The executor (``execute_waves``) submits the moves that fit under the caps as one
AlterPartitionReassignments request, a wave, and submits the next wave each time moves complete,
until every move has completed. Virtual time counts from the first submission. Partitions the
plan does not move take no part (``_emulated``), unless a replica of theirs is on a broker that is
down: in sync and with no produce load, nothing of theirs changes and they take no share of a
broker's fetch throughput. The emulated topics hold the moved partitions renumbered 0..n-1 in
order, and the replay's results are named back.

With a throttle, each wave is submitted as ``kafka-reassign-partitions --execute --additional
--throttle`` submits it (``execute_throttles``): the brokers' replication throttles then cap the
copies of the new replicas, which are outside the ISR until they have copied the log.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from html_report.page import Section
from html_report.timeline import step_timeline
from spark_app.progress import WorkProgress
from spark_app.scenario import Scenario
from statemachines import schemas as s
from whatif.answer import Answer
from whatif.cluster import WhatIfCluster, WhatIfInputError
from whatif.execute_cluster import ExecutionCluster, execution_scenario
from whatif.execute_throttles import throttle_writes
from whatif.execute_waves import Caps, Move, PartitionKey, WavePlanner
from whatif.new_brokers import with_new_brokers
from whatif.options import ExecuteOptions
from whatif.plan_check import ReassignmentPlan, check_plan, parse_plan, refused_error

DEFAULT_PARTITION_BYTES = 1 << 30  # a partition the --sizes file does not list: 1 GiB
MAX_VIRTUAL_MS = 30 * 24 * 3600 * 1000  # a plan still running after 30 virtual days is stuck
MAX_LISTED = 1000
PROGRESS_DELAY_S = 3.0  # a replay that ends sooner shows no progress


def answer(spark: SparkSession, cluster: WhatIfCluster, options: ExecuteOptions) -> Answer:
    """Run ``options.plan`` on the emulated cluster under the caps and report how it went."""
    caps = Caps(options.max_moves_per_broker, options.max_moves, options.max_leader_moves)
    cluster = with_new_brokers(cluster, options.new_brokers)
    plan = parse_plan(options.plan)
    assignments = _topic_assignments(spark, cluster, sorted({p.topic for p in plan.partitions}))
    current = {
        (p.topic, p.partition): list(assignments[p.topic][p.partition])
        for p in plan.partitions
        if p.topic in assignments and 0 <= p.partition < len(assignments[p.topic])
    }
    problems = check_plan(plan, current, cluster.brokers, cluster.racks, cluster.deleting_topics)
    error = refused_error(options.plan, problems, plan, cluster.brokers)
    if error is not None:
        raise error
    sizes, defaulted = _sizes(spark, cluster, list(current))
    moves = _moves(plan, current, sizes)
    numbering = _emulated(assignments, moves, cluster.brokers)
    emulated = [replace(m, partition=numbering[m.key][1]) for m in moves]
    scenario = execution_scenario(
        _renumbered(assignments, numbering),
        cluster.brokers,
        cluster.racks,
        {m.key: m.size_bytes for m in emulated if m.adding},
        options.fetch_mb_per_s,
    )
    result = (
        _replay(spark, scenario, emulated, caps, options.throttle).renamed(
            {(t, i): key for key, (t, i) in numbering.items()}
        )
        if moves
        else _Replay.empty()
    )
    return _answer(
        spark, options, plan, moves, result, problems, defaulted, options.fetch_mb_per_s, caps
    )


# -- inputs --------------------------------------------------------------------------------------


def _topic_assignments(
    spark: SparkSession, cluster: WhatIfCluster, topics: Sequence[str]
) -> dict[str, list[list[int]]]:
    """Each named topic's replicas by partition id, when its partitions are 0..n-1."""
    rows = (
        cluster.partitions.where(F.col(s.TOPIC).isin(list(topics)))
        .select(s.TOPIC, s.PARTITION, s.REPLICAS)
        .collect()
    )
    by_topic: dict[str, dict[int, list[int]]] = {}
    for r in rows:
        by_topic.setdefault(r[s.TOPIC], {})[r[s.PARTITION]] = list(r[s.REPLICAS])
    out: dict[str, list[list[int]]] = {}
    for topic, parts in by_topic.items():
        if sorted(parts) != list(range(len(parts))):
            missing = sorted(set(range(max(parts) + 1)) - set(parts))
            raise WhatIfInputError(
                f"topic {topic}: the snapshot lacks partition {missing[0]} — execute emulates "
                "whole topics; give a snapshot with every partition of the plan's topics"
            )
        out[topic] = [parts[p] for p in range(len(parts))]
    return out


def _sizes(
    spark: SparkSession, cluster: WhatIfCluster, keys: list[PartitionKey]
) -> tuple[dict[PartitionKey, int], int]:
    """Bytes of each partition (``--sizes``, else ``DEFAULT_PARTITION_BYTES``), and how many took
    the default."""
    found: dict[PartitionKey, int] = {}
    if cluster.sizes is not None and keys:
        topics = sorted({t for t, _ in keys})
        rows = cluster.sizes.where(F.col(s.TOPIC).isin(topics)).collect()
        wanted = set(keys)
        found = {
            (r[s.TOPIC], r[s.PARTITION]): int(r["bytes"])
            for r in rows
            if (r[s.TOPIC], r[s.PARTITION]) in wanted
        }
    sizes = {k: found.get(k, DEFAULT_PARTITION_BYTES) for k in keys}
    return sizes, len(keys) - len(found)


def _moves(
    plan: ReassignmentPlan,
    current: Mapping[PartitionKey, list[int]],
    sizes: Mapping[PartitionKey, int],
) -> list[Move]:
    """The plan's entries that change something, in plan order (an entry naming the current
    replicas in their order is a no-op: Kafka completes it at once)."""
    out = []
    for entry in plan.partitions:
        key = (entry.topic, entry.partition)
        before = tuple(current[key])
        if tuple(entry.replicas) != before:
            out.append(Move(key[0], key[1], before, tuple(entry.replicas), sizes[key]))
    return out


def _emulated(
    assignments: Mapping[str, Sequence[Sequence[int]]], moves: Sequence[Move], live: Sequence[int]
) -> dict[PartitionKey, PartitionKey]:
    """The partitions emulated, each with its key in the emulated cluster (a topic's partitions
    renumbered 0..n-1 in order): the moved ones, and those with a replica on a broker that is
    down (under-replicated, they count in UnderReplicatedPartitions). The others, in sync with
    no load, change nothing: no produce, no copy, no demand on a broker's fetch throughput."""
    moved = {m.key for m in moves}
    up = set(live)
    out: dict[PartitionKey, PartitionKey] = {}
    for topic in sorted({m.topic for m in moves}):
        kept = [
            p
            for p, replicas in enumerate(assignments[topic])
            if (topic, p) in moved or not set(replicas) <= up
        ]
        out.update({(topic, p): (topic, i) for i, p in enumerate(kept)})
    return out


def _renumbered(
    assignments: Mapping[str, Sequence[Sequence[int]]],
    numbering: Mapping[PartitionKey, PartitionKey],
) -> dict[str, list[list[int]]]:
    """The emulated topics' replicas by emulated partition id."""
    out: dict[str, list[list[int]]] = {}
    for (topic, p), _ in sorted(numbering.items(), key=lambda item: item[1]):
        out.setdefault(topic, []).append(list(assignments[topic][p]))
    return out


# -- the replay ----------------------------------------------------------------------------------


class _Replay:
    """What happened: per move its wave and times, per wave its start, and the timeline."""

    def __init__(self) -> None:
        self.wave_of: dict[PartitionKey, int] = {}
        self.started: dict[PartitionKey, int] = {}
        self.finished: dict[PartitionKey, int] = {}
        self.wave_starts: list[int] = []
        self.wave_throttles: list[tuple[int, int]] = []  # leader, follower replicas throttled
        self.throttled_brokers: set[int] = set()
        self.timeline: list[tuple[int, int, int, int]] = []  # ms, in flight, URP, completed
        self.peak_moves = 0
        self.warm_up_ms = 0

    @classmethod
    def empty(cls) -> _Replay:
        return cls()

    def record(self, at_ms: int, in_flight: int, urp: int) -> None:
        point = (at_ms, in_flight, urp, len(self.finished))
        if not self.timeline or self.timeline[-1][1:] != point[1:]:
            self.timeline.append(point)

    def renamed(self, keys: Mapping[PartitionKey, PartitionKey]) -> _Replay:
        """This replay with its partitions under the names ``keys`` gives them."""
        for field in ("wave_of", "started", "finished"):
            setattr(self, field, {keys[k]: v for k, v in getattr(self, field).items()})
        return self

    @property
    def makespan_ms(self) -> int:
        return max(self.finished.values(), default=0)


def _replay(
    spark: SparkSession, scenario: Scenario, moves: list[Move], caps: Caps, throttle: int | None
) -> _Replay:
    out = _Replay()
    planner = WavePlanner(moves, caps)
    run = ExecutionCluster(spark, scenario)
    progress = WorkProgress("execute", sum(m.copied_bytes for m in moves), delay_s=PROGRESS_DELAY_S)
    try:
        start = run.now_ms()
        out.warm_up_ms = start
        out.record(0, 0, run.under_replicated())
        while not planner.done:
            wave = planner.next_wave()
            if wave:
                at = run.now_ms() - start
                out.wave_starts.append(at)
                for m in wave:
                    out.wave_of[m.key] = len(out.wave_starts)
                    out.started[m.key] = at
                progress.log(
                    f"wave {len(out.wave_starts)}: {len(wave)} move(s) submitted at "
                    f"{at / 1000:.3f} s virtual, {len(planner.in_flight)} in flight"
                )
                if throttle is not None:  # the tool's writes cover the moves still in flight
                    writes = throttle_writes(planner.in_flight.values(), throttle)
                    run.throttle(writes)
                    out.throttled_brokers.update(writes.brokers)
                    out.wave_throttles.append(writes.listed())
                run.submit({m.key: m.after for m in wave})
                out.peak_moves = max(out.peak_moves, len(planner.in_flight))
                out.record(at, len(planner.in_flight), run.under_replicated())
            done = run.completed({k: m.after for k, m in planner.in_flight.items()})
            if done:
                for m in planner.finished(sorted(done)):
                    out.finished[m.key] = run.now_ms() - start
                out.record(run.now_ms() - start, len(planner.in_flight), run.under_replicated())
                _show(progress, moves, out)
                continue  # the freed slots take the next wave at once
            if planner.done or not run.step(start + MAX_VIRTUAL_MS):
                break  # done, or nothing left that could complete the moves in flight
            out.record(run.now_ms() - start, len(planner.in_flight), run.under_replicated())
    finally:
        progress.close()
        run.close()
    return out


def _show(progress: WorkProgress, moves: list[Move], out: _Replay) -> None:
    """Bytes copied by the completed moves on the bar; a line per completion in a log."""
    ended = [m for m in moves if m.key in out.finished]
    text = (
        f"{len(ended)}/{len(moves)} moves done · wave {len(out.wave_starts)} · "
        f"{out.makespan_ms / 1000:.3f} s virtual"
    )
    progress.update(sum(m.copied_bytes for m in ended), text)
    progress.log(text)


# -- the answer ----------------------------------------------------------------------------------


def _seconds(ms: int | None) -> float | None:
    return None if ms is None else round(ms / 1000, 3)


def _answer(
    spark: SparkSession,
    options: ExecuteOptions,
    plan: ReassignmentPlan,
    moves: list[Move],
    result: _Replay,
    problems: Sequence[Any],
    defaulted: int,
    fetch_mb_per_s: float,
    caps: Caps,
) -> Answer:
    waves = []
    for i, started in enumerate(result.wave_starts, start=1):
        members = [m for m in moves if result.wave_of.get(m.key) == i]
        ends = [result.finished.get(m.key) for m in members]
        waves.append({
            "wave": i,
            "started_s": _seconds(started),
            "finished_s": None if None in ends else _seconds(max(e for e in ends if e is not None)),
            "partitions": len(members),
            "bytes": sum(m.copied_bytes for m in members),
            **_wave_throttle(result, i),
        })  # fmt: skip
    unfinished = [f"{m.topic}-{m.partition}" for m in moves if m.key not in result.finished]
    moved = [m for m in moves if m.adding or m.removing]
    peak_urp = max((p[2] for p in result.timeline), default=0)
    summary: dict[str, Any] = {
        "question": "execute",
        "plan": str(options.plan),
        "partitions_in_plan": len(plan.partitions),
        "partitions_moved": len(moved),
        "partitions_reordered": len(moves) - len(moved),
        "replicas_moved": sum(len(m.adding) for m in moves),
        "leader_moves": sum(1 for m in moves if m.moves_leader),
        "bytes_moved": sum(m.copied_bytes for m in moves),
        "waves": len(waves),
        "makespan_seconds": _seconds(result.makespan_ms),
        "peak_under_replicated_partitions": peak_urp,
        "peak_concurrent_moves": result.peak_moves,
        "max_moves_per_broker": caps.per_broker,
        "max_moves": caps.total,
        "max_leader_moves": caps.leader,
        "fetch_mb_per_s": fetch_mb_per_s,
        "throttle_bytes_per_s": options.throttle,
        "throttled_brokers": sorted(result.throttled_brokers),
        "partitions_default_size": defaulted,
        "default_partition_bytes": DEFAULT_PARTITION_BYTES,
        "warm_up_seconds": _seconds(result.warm_up_ms),
        "unfinished_partitions": unfinished[:MAX_LISTED],
        "warnings": [p.as_json() for p in problems][:MAX_LISTED],
        "per_wave": waves,
    }
    lines = [
        f"execute {options.plan}: {len(moved)} partition(s) moved, "
        f"{summary['bytes_moved']:,} bytes copied in {len(waves)} wave(s)",
        f"makespan {summary['makespan_seconds']} s of virtual time at {fetch_mb_per_s:g} MB/s "
        f"per broker{_throttled(options.throttle, result)}; peak {result.peak_moves} move(s) in "
        f"flight, {peak_urp} under-replicated partition(s)",
        f"caps: {caps.per_broker} move(s) per broker, "
        f"{'no' if caps.total is None else caps.total} cluster-wide cap, "
        f"{caps.leader} leader move(s)",
        *[f"  warning: {p.line()}" for p in problems[:5]],
    ]
    if unfinished:
        lines.append(f"UNFINISHED: {len(unfinished)} move(s) never completed, e.g. {unfinished[0]}")
    timeline = "".join(
        json.dumps({
            "t_s": _seconds(at), "moves_in_flight": n, "under_replicated_partitions": urp,
            "completed": done,
        }) + "\n"
        for at, n, urp, done in result.timeline
    )  # fmt: skip
    return Answer(
        "execute",
        summary,
        lines,
        {"moves": _moves_table(spark, moves, result)},
        {},
        _sections(result, waves, caps),
        {"timeline.jsonl": timeline},
    )


def _wave_throttle(result: _Replay, wave: int) -> dict[str, int | None]:
    """Replicas the wave's ``--throttle`` listed, per side (null without a throttle)."""
    listed = result.wave_throttles[wave - 1] if result.wave_throttles else (None, None)
    return {"leader_throttled_replicas": listed[0], "follower_throttled_replicas": listed[1]}


def _throttled(throttle: int | None, result: _Replay) -> str:
    if throttle is None:
        return ""
    return f", throttled to {throttle:,} B/s on {len(result.throttled_brokers)} broker(s)"


def _moves_table(spark: SparkSession, moves: list[Move], result: _Replay) -> DataFrame:
    brokers = pa.list_(pa.int32())
    table = pa.table({
        s.TOPIC: pa.array([m.topic for m in moves], pa.string()),
        s.PARTITION: pa.array([m.partition for m in moves], pa.int32()),
        "replicas_before": pa.array([list(m.before) for m in moves], brokers),
        "replicas_after": pa.array([list(m.after) for m in moves], brokers),
        "bytes": pa.array([m.copied_bytes for m in moves], pa.int64()),
        "wave": pa.array([result.wave_of.get(m.key) for m in moves], pa.int32()),
        "started_s": pa.array([_seconds(result.started.get(m.key)) for m in moves], pa.float64()),
        "finished_s": pa.array([_seconds(result.finished.get(m.key)) for m in moves], pa.float64()),
    })  # fmt: skip
    return spark.createDataFrame(table)


def _sections(result: _Replay, waves: list[dict[str, Any]], caps: Caps) -> list[Section]:
    until = max(result.makespan_ms / 1000, 0.001)
    series = {
        "moves in flight": [(at / 1000, float(n)) for at, n, _, _ in result.timeline],
        "under-replicated partitions": [(at / 1000, float(u)) for at, _, u, _ in result.timeline],
    }
    return [
        Section(
            "Moves over virtual time",
            "Partition moves in flight and the brokers' UnderReplicatedPartitions, from the first "
            f"submission (0 s). Caps: {caps.per_broker} move(s) per broker, "
            f"{'no cluster-wide cap' if caps.total is None else f'{caps.total} in the cluster'}, "
            f"{caps.leader} moving a leader.",
            charts=[
                step_timeline(
                    "Moves in flight and under-replicated partitions",
                    series,
                    until,
                    xlabel="virtual time since the first submission (s)",
                )
            ],
        ),
        Section(
            "Waves",
            "Each wave is one AlterPartitionReassignments request, sent when moves complete; "
            "bytes are copied bytes (the log once per new replica).",
            tables=[waves] if waves else [],
        ),
    ]
