"""``report.html`` of ``kce run``: the run's totals; the partitions at risk (offline,
under-replicated, under min ISR) over virtual time with the scenario's events marked on it; the
events that changed something, then the others counted by type; the controller's gauges.

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
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from html_report.page import MAX_TABLE_ROWS, Section, TableHead, format_value, render_html
from html_report.timeline import MAX_STEP_BUCKETS, step_timeline
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
    "offline_partition_seconds",
    "leader_down_partition_seconds",
    "acked_records_lost",
    "divergent_partitions",
    "records_refused_not_enough_replicas",
    "records_without_leader",
)

Spec = tuple[tuple[str, str, bool], ...]
# (label, metrics.jsonl key, always drawn): Kafka's metric name as the label where Kafka has one.
# A gauge not always drawn is left out while it stays 0, so a quiet run's chart stays readable;
# the global partition and topic counts are left out as their scale would flatten every other line.
CONTROLLER_SERIES: Spec = (
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
BROKER_SERIES: Spec = (
    ("UnderReplicatedPartitions", "UnderReplicatedPartitions", True),
    ("UnderMinIsrPartitionCount", "UnderMinIsrPartitionCount", True),
    ("OfflinePartitionsCount", "OfflinePartitionsCount", True),
    ("leader down, not yet noticed", "leader_down_partitions", False),
)
BROKER_CHART = "Under-replicated / under min ISR / offline"
# Without broker lines (no replication emulation), the controller's own counts of the same.
AT_RISK_FROM_CONTROLLER: Spec = (
    ("UnderReplicatedPartitions (sum)", "under_replicated_partitions", True),
    ("OfflinePartitionsCount", "offline_partitions_count", True),
)

# An event changed something when one of these is non-zero, or it has an error.
CHANGES = (
    "partitions_changed",
    "elections",
    "unclean_elections",
    "failed_elections",
    "isr_shrinks",
    "state_change_errors",
    "zk_writes",
)
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


def write_run_report(
    out: Path,
    summary: Mapping[str, Any],
    until_ms: int,
    timeline: Sequence[Mapping[str, Any]] = (),
) -> Path:
    """Write ``out/report.html`` from ``summary``, the run's ``events.jsonl`` and
    ``metrics.jsonl`` in ``out``, and the scenario's ``timeline``; returns its path."""
    html = render_run_report(
        summary, _jsonl(out / "events.jsonl"), _jsonl(out / "metrics.jsonl"), until_ms, timeline
    )
    path = out / REPORT
    path.write_text(html, encoding="utf-8")
    return path


def render_run_report(
    summary: Mapping[str, Any],
    events: Iterable[Mapping[str, Any]],
    metrics: Iterable[Mapping[str, Any]],
    until_ms: int,
    timeline: Sequence[Mapping[str, Any]] = (),
) -> str:
    """The report page of one run: ``summary`` (summary.json), ``events`` (events.jsonl lines),
    ``metrics`` (metrics.jsonl lines), the scenario's ``until`` in milliseconds and its
    ``timeline`` (its events in time order, as JSON: ``at`` in ms, ``type``, their fields)."""
    name = str(summary.get("name", ""))
    timelines = _timelines(metrics)
    until = until_ms / 1000
    marks, timeline_rows = _marks(timeline)
    sections = [_at_risk(timelines, until, marks, timeline_rows)]
    changed, others = _event_tables(events)
    sections.append(
        Section(
            "Events that changed something",
            f"{_shown(changed.total)} events.jsonl that changed partitions, elected leaders, "
            "shrank ISRs or wrote to ZooKeeper, or failed (an admin request Kafka rejected has "
            "no controller), in the order they were processed.",
            tables=[changed],
        )
    )
    if others:
        sections.append(
            Section(
                "Other events",
                "The events that changed nothing (startups, session expirations of brokers "
                "already gone, periodic checks that found nothing to do), counted by type.",
                tables=[others],
            )
        )
    controller = _series(timelines.get(CONTROLLER, []), CONTROLLER_SERIES)
    sections.append(
        Section(
            "Controller gauges",
            "The active controller's gauges after each event that committed (metrics.jsonl), "
            "each held until the next. Gauges other than the offline and imbalance counts are "
            "drawn once they leave 0; UncleanLeaderElections counts from the start. A gauge "
            f"that changes more than {2 * MAX_STEP_BUCKETS:,} times is drawn in "
            f"{MAX_STEP_BUCKETS} slices of time, each at its highest value, then its last.",
            [step_timeline("Controller gauges", controller, until, marks=marks)],
        )
    )
    return render_html(
        title=f"kce run: {name}",
        question=f"scenario {name}, played to {format_duration(until_ms)} of virtual time",
        summary=_summary(summary),
        sections=sections,
    )


def _at_risk(
    timelines: Mapping[str, list[_Values]],
    until: float,
    marks: list[tuple[float, str]],
    timeline_rows: list[dict[str, Any]],
) -> Section:
    """The partitions at risk over time, from the brokers' gauges when the run has them."""
    if timelines.get(BROKERS):
        series = _series(timelines[BROKERS], BROKER_SERIES)
        text = (
            "The brokers' partition gauges summed over the cluster (metrics.jsonl lines with "
            "source brokers), each held until the next line"
        )
    else:
        lines = timelines.get(CONTROLLER, [])
        series = _series(lines, AT_RISK_FROM_CONTROLLER, CONTROLLER_SERIES)
        text = (
            "The controller's count of offline partitions and the brokers' under-replicated "
            "count it sums (metrics.jsonl), each held until the next event. "
            "UnderMinIsrPartitionCount is a broker gauge: it is drawn when the run emulates "
            "replication (emulation.replication)"
        )
    if marks:
        text += "; the numbered grey lines are the scenario's events, listed below."
    else:
        text += "."
    return Section(
        BROKER_CHART,
        text,
        [step_timeline(BROKER_CHART, series, until, marks=marks)],
        [timeline_rows] if timeline_rows else [],
    )


def _marks(
    timeline: Sequence[Mapping[str, Any]],
) -> tuple[list[tuple[float, str]], list[dict[str, Any]]]:
    """A numbered mark per distinct time of the scenario's events, and the table that lists
    them: number, time, type and the event's other fields."""
    marks: list[tuple[float, str]] = []
    rows: list[dict[str, Any]] = []
    for event in timeline:
        at = int(event["at"])
        if not marks or marks[-1][0] != at / 1000:
            marks.append((at / 1000, str(len(marks) + 1)))
        details = {k: v for k, v in event.items() if k not in ("at", "type") and v is not None}
        rows.append(
            {
                "#": marks[-1][1],
                "at": format_duration(at),
                "event": event["type"],
                "details": "; ".join(f"{k}: {_detail(k, v)}" for k, v in details.items()),
            }
        )
    return marks, rows


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


def _series(lines: list[_Values], spec: Spec, read: Spec | None = None) -> dict[str, Points]:
    """The chart's step lines of ``spec``, from ``lines`` holding the values of ``read`` (by
    default ``spec``) in its order: a line without a key adds no point to that series."""
    keys = [key for _, key, _ in (read or spec)]
    out: dict[str, Points] = {}
    for label, key, always in spec:
        i = keys.index(key)
        points = [(t / 1000, float(v[i])) for t, v in lines if v[i] is not None]
        # A hidden series stays in the mapping, empty: it keeps the others' colours.
        out[label] = points if always or any(y for _, y in points) else []
    return out


def _detail(key: str, value: Any) -> str:
    """A scenario event's field as the timeline table shows it: partitions as Kafka names them
    (``topic-partition``), a fault's ``duration`` as the scenario spells durations."""
    if key == "duration" and isinstance(value, int):
        return format_duration(value)
    if isinstance(value, list) and all(_is_partition(v) for v in value):
        value = [f"{v['topic']}-{v['partition']}" for v in value]
    return format_value(_set(value))


def _set(value: Any) -> Any:
    """``value`` without the fields left unset (None) at any depth: a created topic's config
    lists only the keys the scenario gives."""
    if isinstance(value, Mapping):
        return {k: _set(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_set(v) for v in value]
    return value


def _is_partition(value: Any) -> bool:
    return isinstance(value, Mapping) and set(value) == {"topic", "partition"}


def _event_tables(events: Iterable[Mapping[str, Any]]) -> tuple[TableHead, list[dict[str, Any]]]:
    """The events that changed something (the first rows of, and their number), and the others
    counted per type with their first and last time; only the rows shown are built."""
    head: list[dict[str, Any]] = []
    total = 0
    others: dict[str, dict[str, Any]] = {}
    for event in events:
        seconds = int(event["virtual_time_ms"]) / 1000
        if event.get("error") or any(event.get(key) for key in CHANGES):
            total += 1
            if len(head) < MAX_TABLE_ROWS:
                row: dict[str, Any] = {"time (s)": f"{seconds:.3f}"}
                row.update({column: event[key] for column, key in EVENT_COLUMNS if key in event})
                head.append(row)
        else:
            kind = str(event.get("type"))
            seen = others.setdefault(kind, {"event": kind, "count": 0, "first (s)": seconds})
            seen["count"] += 1
            seen["last (s)"] = seconds
    return TableHead(head, total), list(others.values())


def _shown(total: int) -> str:
    if total <= MAX_TABLE_ROWS:
        return f"The {total} line{'' if total == 1 else 's'} of"
    return f"The first {MAX_TABLE_ROWS} of the {total:,} lines of"


def _jsonl(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)
