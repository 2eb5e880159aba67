"""What ``kce run`` prints when it ends: at most ``MAX_LINES`` lines for a person, read from the
run's own outputs, so the terminal never says more or less than the files hold.

``summary.json`` gives the totals; ``metrics.jsonl`` the peaks (the highest offline,
under-replicated and, with replication, under-min-ISR counts, and when each was first reached);
``events.jsonl`` tells rejected admin requests from failed controller events and counts the
partitions Kafka's elections found no leader for. Both are read one line at a time, as
``run_report`` reads them. ``--json`` prints ``summary.json`` instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spark_app.run_report import _jsonl  # the same line-at-a-time reader as the report's
from spark_app.scenario.durations import format_duration

MAX_LINES = 20
MAX_ERRORS = 3

# (peak, metrics.jsonl key per source): the controller's gauges (spec §16.1) and the brokers'
# summed partition gauges (with replication), each named as Kafka names the metric.
PEAK_KEYS: dict[str, dict[str, str]] = {
    "offline": {
        "controller": "offline_partitions_count",
        "brokers": "OfflinePartitionsCount",
    },
    "under-replicated": {
        "controller": "under_replicated_partitions",
        "brokers": "UnderReplicatedPartitions",
    },
    "under min ISR": {"brokers": "UnderMinIsrPartitionCount"},
}
REQUEST_KINDS = ("LeaderAndIsr", "UpdateMetadata", "StopReplica")


@dataclass(frozen=True)
class Peak:
    """The highest value a gauge took, and the virtual time it first took it."""

    value: int
    at_ms: int


def peaks(metrics: Iterable[Mapping[str, Any]]) -> dict[str, Peak | None]:
    """Each of ``PEAK_KEYS``' peaks over ``metrics.jsonl``'s lines; None when no line has it
    (under min ISR without replication)."""
    out: dict[str, Peak | None] = dict.fromkeys(PEAK_KEYS)
    for line in metrics:
        source = str(line.get("source", "controller"))
        at = int(line["virtual_time_ms"])
        for name, keys in PEAK_KEYS.items():
            value = line.get(keys.get(source, ""))
            if value is None:
                continue
            best = out[name]
            if best is None or value > best.value or (value == best.value and at < best.at_ms):
                out[name] = Peak(int(value), at)
    return out


@dataclass(frozen=True)
class EventFacts:
    """What ``events.jsonl`` says beyond ``summary.json``'s totals."""

    rejected: int = 0  # admin requests Kafka rejected (a line with Kafka's exception)
    failed: int = 0  # controller events whose handling failed
    no_leader: int = 0  # partitions an election found no leader for


def event_facts(events: Iterable[Mapping[str, Any]]) -> EventFacts:
    rejected = failed = no_leader = 0
    for line in events:
        if line.get("exception"):
            rejected += 1
        elif line.get("error"):
            failed += 1
        no_leader += int(line.get("failed_elections") or 0)
    return EventFacts(rejected, failed, no_leader)


def summary_lines(
    summary: Mapping[str, Any],
    out: Path,
    until_ms: int,
    found: Mapping[str, Peak | None],
    facts: EventFacts,
) -> list[str]:
    """The summary for a person; ``found``: ``peaks``; ``facts``: ``event_facts``."""
    wall = summary.get("wall_seconds")
    took = f" in {wall:.1f} s" if isinstance(wall, int | float) else ""
    lines = [
        f"kce run {summary['name']}: {format_duration(until_ms)} of virtual time{took}, "
        f"{summary['events_processed']:,} controller events",
        f"elections: {summary['elections']:,} ({summary['unclean_elections']:,} unclean, "
        f"{facts.no_leader:,} found no leader)",
        "peaks: " + ", ".join(_peak(name, p) for name, p in found.items()),
    ]
    errors = list(summary.get("errors", []))
    lines.append(
        f"admin requests rejected: {facts.rejected:,}; failed controller events: {facts.failed:,}"
    )
    lines += [f"  {e}" for e in errors[:MAX_ERRORS]]
    if len(errors) > MAX_ERRORS:
        lines.append(f"  … and {len(errors) - MAX_ERRORS:,} more (summary.json: errors)")
    controller = summary.get("controller")
    if controller:
        lines.append(f"controller: broker {controller['id']}, epoch {controller['epoch']}")
    else:
        lines.append("controller: none active at the end")
    requests = summary.get("requests", {})
    sent = ", ".join(f"{k} {requests[k]:,}" for k in REQUEST_KINDS if k in requests)
    lines.append(f"requests: {sent or 'none'}; ZooKeeper writes {summary['zk_writes']:,}")
    if "isr_shrinks" in summary:
        lines.append(
            f"replication: {summary['isr_shrinks']:,} ISR shrinks, {summary['isr_expands']:,} "
            f"expands, {summary['acked_records_lost']:,} acknowledged records lost, "
            f"{summary['divergent_partitions']:,} divergent partitions"
        )
    violations = (summary.get("model_violations") or {}).get("counts") or {}
    if violations:
        kinds = ", ".join(f"{k} {n:,}" for k, n in sorted(violations.items()))
        lines.append(f"MODEL VIOLATIONS: {kinds} (summary.json: model_violations)")
    lines.append(f"outputs: {out}/ (summary.json, events.jsonl, metrics.jsonl, Parquet tables)")
    lines.append(f"report: {out / 'report.html'}")
    return lines[:MAX_LINES]


def _peak(name: str, peak: Peak | None) -> str:
    if peak is None:
        return f"{name} not modelled (no replication)"
    if peak.value == 0:
        return f"{name} 0"
    return f"{name} {peak.value:,} at {format_duration(peak.at_ms)}"


def run_summary(summary: Mapping[str, Any], out: Path, until_ms: int) -> list[str]:
    """``summary_lines`` of the run written to ``out``."""
    found = peaks(_jsonl(out / "metrics.jsonl"))
    return summary_lines(summary, out, until_ms, found, event_facts(_jsonl(out / "events.jsonl")))
