"""What ``kce run`` writes when its timeline has played: ``events.jsonl`` (controller events and
the admin requests Kafka rejected, in the order they happened), ``metrics.jsonl`` (the
controller's and, with replication, the brokers' gauges), ``summary.json``'s totals, the final
tables as Parquet and ``final_state.json`` (up to 100K partitions)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from controller.emulation.cluster import EmulatedCluster
from controller.records import EventRecord
from spark_app.playback import AdminFailure
from spark_app.replication_outputs import LOG_STATE_KEYS, metric_line
from spark_app.replication_outputs import summary as replication_summary
from spark_app.scenario import Scenario
from spark_app.validate import violations_json
from statemachines import schemas as s
from statemachines.layout import to_public_partitions, to_public_replicas
from statemachines.state_change_errors import ERRORS

FINAL_STATE_MAX_PARTITIONS = 100_000


def _record_json(r: EventRecord) -> dict[str, Any]:
    return {
        "virtual_time_ms": r.at_ms,
        "controller": r.controller_id,
        "type": r.event,
        "controller_state": r.state,
        "queue_time_ms": r.queue_time_ms,
        "processing_ms": round(r.processing_ms, 3),
        "partitions_changed": r.partitions_changed,
        "elections": r.counters.get("elected", 0),
        "unclean_elections": r.counters.get("unclean_elected", 0),
        "failed_elections": r.counters.get("failed_election", 0),
        "isr_shrinks": r.counters.get("isr_shrinks", 0),
        "state_change_errors": r.counters.get(ERRORS, 0),
        "requests": r.requests,
        "zk_writes": r.zk_writes,
        "commits": r.commits,
        # "driver", "spark", or both joined by "+" when the event committed on each.
        "execution": "+".join(dict.fromkeys(r.execution)) or None,
        "counters": r.counters,
        "error": r.failed,
    }


def _errors(records: list[EventRecord], rejected: list[AdminFailure]) -> list[str]:
    """Failed controller events and rejected admin requests, in the order they happened."""
    out: list[tuple[float, str]] = [(f.position - 0.5, f.line()) for f in rejected]
    out += [(i, r.failed) for i, r in enumerate(records) if r.failed]
    return [text for _, text in sorted(out, key=lambda x: x[0])]


def _summed(dicts: Iterable[dict[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for d in dicts:
        for k, v in d.items():
            total[k] = total.get(k, 0) + v
    return total


def _rate_and_time(cluster: EmulatedCluster) -> dict[str, dict[str, float]]:
    """Kafka's per-state timers (§4.2, §16.1) summed over every controller module of the run."""
    out: dict[str, dict[str, float]] = {}
    for broker in cluster.brokers.values():
        for timer in broker.controller.events.metrics.rate_and_time.values():
            if timer.count == 0:
                continue
            entry = out.setdefault(timer.metric_name, {"count": 0, "total_ms": 0.0, "max_ms": 0.0})
            entry["count"] += timer.count
            entry["total_ms"] = round(entry["total_ms"] + timer.time_ms.total, 3)
            entry["max_ms"] = round(max(entry["max_ms"], timer.time_ms.max or 0.0), 3)
    return dict(sorted(out.items()))


def write_outputs(
    cluster: EmulatedCluster,
    scenario: Scenario,
    records: list[EventRecord],
    rejected: list[AdminFailure],
    out: Path,
) -> dict[str, Any]:
    with (out / "events.jsonl").open("w") as f:
        pending = list(rejected)
        for i, r in enumerate([*records, None]):
            while pending and pending[0].position <= i:  # a request sits where it happened
                f.write(json.dumps(pending.pop(0).to_json()) + "\n")
            if r is not None:
                f.write(json.dumps(_record_json(r)) + "\n")
    unclean = 0
    rep = cluster.replication
    brokers = [metric_line(g) for g in rep.timeline] if rep is not None else []
    with (out / "metrics.jsonl").open("w") as f:
        for r in records:
            while brokers and brokers[0]["virtual_time_ms"] < r.at_ms:
                f.write(json.dumps(brokers.pop(0)) + "\n")
            unclean += r.counters.get("unclean_elected", 0)
            if r.gauges is not None:
                line = {
                    "virtual_time_ms": r.at_ms,
                    "source": "controller",
                    "controller": r.controller_id,
                    "ActiveControllerCount": 1,
                    "ControllerState": r.state,
                    "EventQueueSize": r.queue_size,
                    "EventQueueTimeMs": r.queue_time_ms,
                    "UncleanLeaderElections": unclean,  # the meter's count
                    **asdict(r.gauges),
                }
                f.write(json.dumps(line) + "\n")
        for line in brokers:
            f.write(json.dumps(line) + "\n")
    active = cluster.active_controller()
    summary: dict[str, Any] = {
        "name": scenario.name,
        "events_processed": len(records),
        "elections": sum(r.counters.get("elected", 0) for r in records),
        "unclean_elections": sum(r.counters.get("unclean_elected", 0) for r in records),
        "errors": _errors(records, rejected),
        "requests": _summed(r.requests for r in records),
        "zk_writes": sum(r.zk_writes for r in records),
        "rate_and_time": _rate_and_time(cluster),
        "controller": None,
        "model_violations": None,  # checked on the final table when a controller holds one
    }
    if active is None or active.ctx.partitions is None:
        if rep is not None:
            summary.update(replication_summary(rep, None))
        return summary
    ctx = active.ctx
    topics = ctx.topics_frame()
    partitions = to_public_partitions(ctx.partitions, topics)
    replicas = to_public_replicas(ctx.partitions, topics)
    total = sum(t.partitions for t in ctx.topics.values()) or None
    count = partitions.count() if total is None else total
    # A table final_state.json lists is collected once, and checked on the driver.
    rows = (
        [r.asDict() for r in partitions.orderBy(s.TOPIC, s.PARTITION).collect()]
        if count <= FINAL_STATE_MAX_PARTITIONS
        else None
    )
    summary["model_violations"] = violations_json(
        partitions if rows is None else rows, scenario.broker_ids()
    )
    partitions.write.mode("overwrite").parquet(str(out / "partitions.parquet"))
    replicas.write.mode("overwrite").parquet(str(out / "replicas.parquet"))
    last = next((r.gauges for r in reversed(records) if r.gauges is not None), None)
    summary["controller"] = {
        "id": active.broker_id,
        "epoch": ctx.epoch,
        "epoch_zk_version": ctx.epoch_zk_version,
    }
    summary["metrics"] = asdict(last) if last is not None else {}
    logs = rep.partition_results() if rep is not None else None
    if rep is not None and logs is not None:
        listed = None
        if rows is not None:  # final_state.json lists each partition's log state with it
            by_key = {(x[s.TOPIC], x[s.PARTITION]): x.asDict() for x in logs.collect()}
            for row in rows:
                log_state = by_key.get((row[s.TOPIC], row[s.PARTITION]), {})
                row.update({k: log_state.get(k) for k in LOG_STATE_KEYS})
            listed = [by_key[k] for k in sorted(by_key)]
        logs.write.mode("overwrite").parquet(str(out / "replication.parquet"))
        summary.update(replication_summary(rep, listed))
    if rows is not None:
        final = {
            "controller": summary["controller"],
            "brokers": {
                "live": sorted(ctx.live_brokers),
                "shutting_down": sorted(ctx.shutting_down),
            },
            "partitions": rows,
            "replicas": [
                r.asDict() for r in replicas.orderBy(s.TOPIC, s.PARTITION, s.BROKER).collect()
            ],
            "topics": sorted(ctx.topics),
            "metrics": summary["metrics"],
        }
        (out / "final_state.json").write_text(json.dumps(final, indent=2))
    return summary
