"""``report.html`` of ``kce run``: the run's totals, its gauges over virtual time, its events.

Drawn with the what-if report's page and charts (``html_report``), so it is as self-contained
(no network) and byte-stable: the same summary, events and metrics render to the same bytes.
``render_run_report`` is pure; ``write_run_report`` reads ``events.jsonl`` and ``metrics.jsonl``
back from the output directory, one line at a time, so a run of 100K events is never held twice.

``metrics.jsonl`` has two kinds of line. A controller line (``"source": "controller"``, or no
``source``) holds the active controller's gauges after an event that committed. A broker line
(``"source": "brokers"``) holds the brokers' partition gauges summed over the cluster:
``UnderReplicatedPartitions``, ``UnderMinIsrPartitionCount``, ``AtMinIsrPartitionCount``,
``OfflinePartitionsCount`` and the ISR meters' cumulative counts. Each line is a state held until
the next line of its kind.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from html_report.charts import MAX_STEP_BUCKETS, step_timeline
from html_report.page import MAX_TABLE_ROWS, Section, TableHead, render_html
from spark_app.scenario.durations import format_duration

REPORT = "report.html"
CONTROLLER, BROKERS = "controller", "brokers"

# summary.json's scalars, in the table's order; the replication totals only where the run has them.
SUMMARY_KEYS = ("name", "events_processed", "elections", "unclean_elections", "zk_writes")
REPLICATION_KEYS = (
    "isr_shrinks",
    "isr_expands",
    "isr_change_notifications",
    "under_min_isr_partition_seconds",
    "acked_records_lost",
    "divergent_partitions",
    "records_refused_not_enough_replicas",
    "records_without_leader",
)

# (label, metrics.jsonl key, always drawn): Kafka's metric name as the label where Kafka has one.
# A gauge not always drawn is left out while it stays 0, so a quiet run's chart stays readable;
# the global partition and topic counts are left out as their scale would flatten every other line.
CONTROLLER_SERIES: tuple[tuple[str, str, bool], ...] = (
    ("OfflinePartitionsCount", "offline_partitions_count", True),
    ("PreferredReplicaImbalanceCount", "preferred_replica_imbalance_count", True),
    ("UnderReplicatedPartitions (sum)", "under_replicated_partitions", False),
    ("ReassigningPartitions", "reassigning_partitions", False),
    ("lagging followers", "lagging_followers", False),
    ("TopicsToDeleteCount", "topics_to_delete_count", False),
    ("ReplicasToDeleteCount", "replicas_to_delete_count", False),
    ("UncleanLeaderElections (count)", "UncleanLeaderElections", False),
    ("EventQueueSize", "EventQueueSize", False),
)
BROKER_SERIES: tuple[tuple[str, str, bool], ...] = (
    ("UnderReplicatedPartitions", "UnderReplicatedPartitions", True),
    ("UnderMinIsrPartitionCount", "UnderMinIsrPartitionCount", True),
    ("OfflinePartitionsCount", "OfflinePartitionsCount", True),
)
BROKER_CHART = "Under-replicated / under min ISR / offline"

# (column, events.jsonl key) of the events table; an admin request Kafka rejected has only some.
EVENT_COLUMNS = (
    ("controller", "controller"),
    ("event", "type"),
    ("partitions changed", "partitions_changed"),
    ("elections", "elections"),
    ("unclean", "unclean_elections"),
    ("ISR shrinks", "isr_shrinks"),
    ("ZK writes", "zk_writes"),
    ("error", "error"),
)

Points = list[tuple[float, float]]
_Values = tuple[int, tuple[Any, ...]]  # a metrics line's virtual time and its series' values


def write_run_report(out: Path, summary: Mapping[str, Any], until_ms: int) -> Path:
    """Write ``out/report.html`` from ``summary`` and the run's ``events.jsonl`` and
    ``metrics.jsonl`` in ``out``; returns its path."""
    html = render_run_report(
        summary, _jsonl(out / "events.jsonl"), _jsonl(out / "metrics.jsonl"), until_ms
    )
    path = out / REPORT
    path.write_text(html, encoding="utf-8")
    return path


def render_run_report(
    summary: Mapping[str, Any],
    events: Iterable[Mapping[str, Any]],
    metrics: Iterable[Mapping[str, Any]],
    until_ms: int,
) -> str:
    """The report page of one run: ``summary`` (summary.json), ``events`` (events.jsonl lines),
    ``metrics`` (metrics.jsonl lines) and the scenario's ``until`` in milliseconds."""
    name = str(summary.get("name", ""))
    timelines = _timelines(metrics)
    until = until_ms / 1000
    controller = _series(timelines.get(CONTROLLER, []), CONTROLLER_SERIES)
    sections = [
        Section(
            "Controller gauges",
            "The active controller's gauges after each event that committed (metrics.jsonl), "
            "each held until the next. Gauges other than the offline and imbalance counts are "
            "drawn once they leave 0; UncleanLeaderElections counts from the start. A gauge "
            f"that changes more than {2 * MAX_STEP_BUCKETS:,} times is drawn in "
            f"{MAX_STEP_BUCKETS} slices of time, each at its highest value, then its last.",
            [step_timeline("Controller gauges", controller, until)],
        )
    ]
    if timelines.get(BROKERS):
        brokers = _series(timelines[BROKERS], BROKER_SERIES)
        sections.append(
            Section(
                BROKER_CHART,
                "The brokers' partition gauges summed over the cluster (metrics.jsonl lines "
                "with source brokers), each held until the next line.",
                [step_timeline(BROKER_CHART, brokers, until)],
            )
        )
    head, total = _event_rows(events)
    sections.append(
        Section(
            "Events",
            f"{_shown(total)} events.jsonl: controller events in the order they were "
            "processed, and admin requests Kafka rejected (no controller).",
            tables=[TableHead(head, total)],
        )
    )
    return render_html(
        title=f"kce run: {name}",
        question=f"scenario {name}, played to {format_duration(until_ms)} of virtual time",
        summary=_summary(summary),
        sections=sections,
    )


def _summary(summary: Mapping[str, Any]) -> dict[str, Any]:
    """The summary table: scalars only (wall_seconds is left out: it would differ every run)."""
    rows = {k: summary[k] for k in SUMMARY_KEYS if k in summary}
    if "errors" in summary:
        rows["errors"] = len(summary["errors"])
    rows.update({k: summary[k] for k in REPLICATION_KEYS if k in summary})
    return rows


def _timelines(metrics: Iterable[Mapping[str, Any]]) -> dict[str, list[_Values]]:
    """Per source, the values its series read from each line, in virtual-time order (file order
    within one time). Only those values are kept: a long run's lines are not held whole."""
    specs = {CONTROLLER: CONTROLLER_SERIES, BROKERS: BROKER_SERIES}
    out: dict[str, list[_Values]] = {}
    for line in metrics:
        source = str(line.get("source", CONTROLLER))
        if source in specs:
            values = tuple(line.get(key) for _, key, _ in specs[source])
            out.setdefault(source, []).append((int(line["virtual_time_ms"]), values))
    for lines in out.values():
        lines.sort(key=lambda line: line[0])  # stable: file order kept within one time
    return out


def _series(lines: list[_Values], spec: tuple[tuple[str, str, bool], ...]) -> dict[str, Points]:
    """The chart's step lines: a line without a key adds no point to that series."""
    out: dict[str, Points] = {}
    for i, (label, _, always) in enumerate(spec):
        points = [(t / 1000, float(v[i])) for t, v in lines if v[i] is not None]
        # A hidden series stays in the mapping, empty: it keeps the others' colours.
        out[label] = points if always or any(y for _, y in points) else []
    return out


def _event_rows(events: Iterable[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """The table's first rows and the number of events: only the rows shown are built."""
    head: list[dict[str, Any]] = []
    total = 0
    for event in events:
        total += 1
        if len(head) < MAX_TABLE_ROWS:
            row: dict[str, Any] = {"time (s)": f"{int(event['virtual_time_ms']) / 1000:.3f}"}
            row.update({column: event[key] for column, key in EVENT_COLUMNS if key in event})
            head.append(row)
    return head, total


def _shown(total: int) -> str:
    if total <= MAX_TABLE_ROWS:
        return f"The {total} line{'' if total == 1 else 's'} of"
    return f"The first {MAX_TABLE_ROWS} of the {total:,} lines of"


def _jsonl(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)
