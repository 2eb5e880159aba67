"""``kce run``'s ``report.html``: the summary's scalars; the partitions at risk over virtual time
(from the brokers' gauges when metrics.jsonl has broker lines, else the controller's) with the
scenario's events marked; the events that changed something first, the others counted; the
controller's gauges; no network, byte-stable, small for long runs; a real run writes it and
headless Chromium shows it no wider than the window."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from html_report.page import MAX_TABLE_ROWS
from html_report.timeline import MAX_STEP_BUCKETS, step_timeline, thin_steps
from spark_app.run_report import BROKER_CHART, REPORT, render_run_report
from spark_app.runner import run
from spark_app.scenario import load_scenario
from tests.chromium import assert_not_blank, chromium, needs_chromium, page_overflow

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "configs/scenarios/reassignment-resumes.yaml"  # 1 partition, 20 s: the fastest

SUMMARY: dict[str, Any] = {
    "name": "outage",
    "events_processed": 3,
    "elections": 2,
    "unclean_elections": 1,
    "errors": ["AlterPartitionReassignments at 4s failed: NoReassignmentInProgressException"],
    "requests": {"LeaderAndIsr": 4},
    "zk_writes": 5,
    "controller": {"id": 1, "epoch": 1, "epoch_zk_version": 0},
    "wall_seconds": 1.234,
}
REPLICATION = {"isr_shrinks": 2, "isr_expands": 1, "under_min_isr_partition_seconds": 4.5}


def _controller(at: int, offline: int, imbalance: int, **more: Any) -> dict[str, Any]:
    return {
        "virtual_time_ms": at,
        "controller": 1,
        "ActiveControllerCount": 1,
        "ControllerState": "BrokerChange",
        "EventQueueSize": 0,
        "EventQueueTimeMs": 0,
        "UncleanLeaderElections": 0,
        "global_partition_count": 10,
        "offline_partitions_count": offline,
        "preferred_replica_imbalance_count": imbalance,
        "under_replicated_partitions": 0,
        "counters": {},
        **more,
    }


def _brokers(at: int, urp: int, under_min: int, offline: int) -> dict[str, Any]:
    return {
        "virtual_time_ms": at,
        "source": "brokers",
        "UnderReplicatedPartitions": urp,
        "UnderMinIsrPartitionCount": under_min,
        "AtMinIsrPartitionCount": 0,
        "OfflinePartitionsCount": offline,
        "IsrShrinksPerSec": 0,
        "IsrExpandsPerSec": 0,
        "FailedIsrUpdatesPerSec": 0,
        "IsrChangeNotifications": 0,
    }


CONTROLLER = [
    _controller(0, 0, 0),
    _controller(1000, 3, 1, UncleanLeaderElections=1),
    _controller(5000, 0, 2, source="controller"),  # the source-tagged form reads the same
]
BROKERS = [_brokers(0, 0, 0, 0), _brokers(1000, 4, 2, 3), _brokers(5000, 1, 0, 0)]
STARTUPS = [
    {"virtual_time_ms": 0, "controller": b, "type": "Startup", "partitions_changed": 0,
     "elections": 0, "zk_writes": 0, "error": None}
    for b in (1, 2, 3)
]  # fmt: skip
EVENTS = [
    *STARTUPS,
    {"virtual_time_ms": 1000, "controller": 1, "type": "BrokerChange", "partitions_changed": 3,
     "elections": 2, "unclean_elections": 1, "isr_shrinks": 3, "zk_writes": 3, "error": None},
    {"virtual_time_ms": 1000, "controller": 2, "type": "Expire", "partitions_changed": 0,
     "error": None},
    {"virtual_time_ms": 4000, "controller": None, "type": "cancel_reassignment",
     "exception": "NoReassignmentInProgressException", "error": "cancel_reassignment failed"},
]  # fmt: skip
# The scenario's timeline as the runner passes it: two events at 1 s share one mark.
TIMELINE = [
    {"at": 1000, "type": "broker_failure", "brokers": [2]},
    {"at": 1000, "type": "broker_pause", "brokers": [2], "duration": 12000, "extra": None},
    {"at": 4000, "type": "cancel_reassignment", "partitions": [{"topic": "t", "partition": 0}]},
    {"at": 4000, "type": "create_topic", "topic": {"name": "a", "config": {"retention.ms": None}}},
]


def _render(metrics: list[dict[str, Any]], summary: dict[str, Any] = SUMMARY) -> str:
    return render_run_report(summary, EVENTS, metrics, 30_000, TIMELINE)


def _section(html: str, heading: str) -> str:
    start = html.index(f"<h2>{heading}</h2>")
    end = html.find("<h2>", start + 1)
    return html[start : end if end > 0 else len(html)]


def _summary_rows(html: str) -> dict[str, str]:
    return dict(re.findall(r'<th scope="row">([^<]+)</th><td>([^<]*)</td>', html))


def test_without_broker_lines_the_at_risk_chart_reads_the_controllers_counts() -> None:
    html = _render(CONTROLLER)
    assert html.count("<svg") == html.count("</svg>") == 2
    headings = re.findall(r"<h2>([^<]+)</h2>", html)
    assert headings[:2] == ["Summary", BROKER_CHART]  # the partitions at risk come first
    at_risk = _section(html, BROKER_CHART)
    # The legend, as SVG comments: the controller's offline count and the URP sum it keeps.
    assert "<!-- OfflinePartitionsCount -->" in at_risk
    assert "<!-- UnderReplicatedPartitions (sum) -->" in at_risk
    assert "<!-- UnderMinIsrPartitionCount -->" not in at_risk  # a broker gauge: not in the run
    assert "emulation.replication" in at_risk
    gauges = _section(html, "Controller gauges")
    assert "<!-- UncleanLeaderElections (count) -->" in gauges  # left 0 at 1 s: drawn
    # The at-risk lines read their own keys: an imbalance of 800 reaches only the gauges' axis.
    skewed = _render([*CONTROLLER, _controller(9000, 3, 800, under_replicated_partitions=5)])
    assert "<!-- 800 -->" in _section(skewed, "Controller gauges")
    assert "<!-- 800 -->" not in _section(skewed, BROKER_CHART)
    assert "lagging followers" not in html  # never left 0 (absent here): left out


def test_broker_lines_feed_the_at_risk_chart() -> None:
    html = _render([*CONTROLLER, *BROKERS])
    assert html.count("<svg") == html.count("</svg>") == 2
    at_risk = _section(html, BROKER_CHART)
    for name in (
        "UnderReplicatedPartitions",
        "UnderMinIsrPartitionCount",
        "OfflinePartitionsCount",
    ):
        assert f"<!-- {name} -->" in at_risk
    assert "(sum)" not in at_risk
    # Broker lines first, controller lines after: each source is a timeline of its own.
    assert _render([*BROKERS, *CONTROLLER]) == html


def test_scenario_events_are_numbered_marks_on_both_timelines() -> None:
    """One mark per distinct time of the scenario's events (two at 1 s share mark 1), a grey
    line at that time on the at-risk chart and on the controller's, listed under the first."""
    html = _render([*CONTROLLER, *BROKERS])
    for heading in (BROKER_CHART, "Controller gauges"):
        svg = _section(html, heading)
        assert "<!-- scenario event -->" in svg  # the marks' legend entry
        assert "<!-- 1 -->" in svg and "<!-- 2 -->" in svg
    listed = re.findall(
        r"<tr><td>(\d)</td><td>([^<]+)</td><td>([^<]+)</td><td>([^<]*)</td></tr>",
        _section(html, BROKER_CHART),
    )
    assert listed == [
        ("1", "1s", "broker_failure", "brokers: 2"),
        ("1", "1s", "broker_pause", "brokers: 2; duration: 12s"),  # None left out
        ("2", "4s", "cancel_reassignment", "partitions: t-0"),  # as Kafka names it
        ("2", "4s", "create_topic", "topic: name: a, config: "),  # unset keys left out
    ]  # fmt: skip
    marks = [
        line.get_xdata()[0]
        for line in step_timeline.figure(
            "t", {"OfflinePartitionsCount": [(0.0, 1.0)]}, 30.0, marks=[(1.0, "1"), (4.0, "2")]
        )
        .axes[0]
        .lines
        if line.get_label() in ("scenario event", "_nolegend_")
    ]
    assert marks == [1.0, 4.0]  # the grey lines stand at the events' times
    # No timeline: no marks and no list.
    bare = render_run_report(SUMMARY, EVENTS, CONTROLLER, 30_000)
    assert "scenario event" not in bare and "<td>broker_failure</td>" not in bare


def test_the_page_loads_nothing_from_outside() -> None:
    html = _render([*CONTROLLER, *BROKERS])
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:[a-z][a-z0-9+.-]*:)?//""", html, re.I)
    assert not re.search(r"url\(\s*[\"']?\s*(?:https?:)?//|@import|<script", html, re.I)
    # Only the SVG namespaces: identifiers, never fetched.
    assert set(re.findall(r"https?://[^\s\"'<>)]+", html)) <= {
        "http://www.w3.org/2000/svg",
        "http://www.w3.org/1999/xlink",
    }
    assert "default-src 'none'" in html


def test_two_renders_are_byte_identical_from_lists_or_iterators() -> None:
    first = _render([*CONTROLLER, *BROKERS])
    metrics = iter([*CONTROLLER, *BROKERS])
    again = render_run_report(dict(SUMMARY), iter(EVENTS), metrics, 30_000, list(TIMELINE))
    assert again == first


def test_summary_holds_the_scalars_and_replication_totals_only_when_present() -> None:
    rows = _summary_rows(_render(CONTROLLER))
    assert rows == {
        "name": "outage",
        "events_processed": "3",
        "elections": "2",
        "unclean_elections": "1",
        "zk_writes": "5",
        "errors": "1",
    }  # no wall_seconds: it would change the bytes every run
    rows = _summary_rows(_render(CONTROLLER, {**SUMMARY, **REPLICATION}))
    assert rows["isr_shrinks"] == "2" and rows["under_min_isr_partition_seconds"] == "4.5"
    assert "acked_records_lost" not in rows


def test_events_that_changed_something_come_first_and_the_others_are_counted() -> None:
    html = _render(CONTROLLER)
    changed = _section(html, "Events that changed something")
    assert "The 2 lines of events.jsonl" in changed and "more rows" not in changed
    rows = re.findall(r"<tr><td>([\d.]+)</td><td>[^<]*</td><td>([^<]+)</td>", changed)
    assert rows == [("1.000", "BrokerChange"), ("4.000", "cancel_reassignment")]
    assert "<td>cancel_reassignment failed</td>" in changed  # a rejected request: an error
    assert "Startup" not in changed and "Expire" not in changed
    others = _section(html, "Other events")
    assert re.findall(r"<tr><td>(\w+)</td><td>(\d+)</td>", others) == [
        ("Startup", "3"),
        ("Expire", "1"),
    ]
    headings = re.findall(r"<h2>([^<]+)</h2>", html)
    assert headings.index("Events that changed something") < headings.index("Other events")


def test_events_table_shows_the_first_rows_of_a_long_run() -> None:
    def events() -> Iterator[dict[str, Any]]:
        for i in range(120):
            yield {"virtual_time_ms": 0, "controller": i, "type": "Startup"}
            yield {
                "virtual_time_ms": 1500 * i,
                "controller": 1,
                "type": f"Event{i}",
                "zk_writes": 1,
            }

    html = render_run_report(SUMMARY, events(), CONTROLLER, 200_000)
    assert "<td>Event49</td>" in html and "Event50" not in html
    assert f"… and {120 - MAX_TABLE_ROWS} more rows" in html
    assert f"The first {MAX_TABLE_ROWS} of the 120 lines of events.jsonl" in html
    assert "<td>73.500</td>" in html  # virtual time in seconds
    assert "<tr><td>Startup</td><td>120</td>" in html  # the startups, one row
    assert "Other events" not in _render_events([])


def _render_events(events: list[dict[str, Any]]) -> str:
    return render_run_report(SUMMARY, events, CONTROLLER, 30_000)


def test_a_long_run_stays_small() -> None:
    lines = 100_000
    metrics = [_controller(10 * i, i % 7, (i // 3) % 5, EventQueueSize=i % 4) for i in range(lines)]
    metrics += [_brokers(30 * i, i % 11, i % 3, i % 2) for i in range(lines // 3)]
    events = ({"virtual_time_ms": 10 * i, "type": "IsrChangeNotification"} for i in range(lines))
    html = render_run_report(SUMMARY, events, metrics, 10 * lines)
    assert html.count("<svg") == 2
    assert len(html) < 700_000


def test_thinning_keeps_peaks_and_the_last_value() -> None:
    # Every 10th point a spike to 50 among values 0..6: after thinning, the spikes remain.
    points = [(float(i), float(50 if i % 10 == 5 else i % 7)) for i in range(10_000)]
    thin = thin_steps(points, 10_000.0)
    assert len(thin) <= 2 * MAX_STEP_BUCKETS
    assert max(y for _, y in thin) == 50 and thin[-1] == points[-1]
    assert thin == thin_steps(points, 10_000.0)
    # Short series only lose points that change nothing; a later point at the same x wins.
    assert thin_steps([(0, 1), (1, 1), (2, 3), (2, 1), (4, 2)], 10) == [(0, 1), (4, 2)]


def test_a_timeline_without_points_says_no_data() -> None:
    assert "<!-- no data -->" in step_timeline("Gauges", {"OfflinePartitionsCount": []}, 10.0)


@pytest.fixture(scope="module")
def played(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """One real run, shared: the report's checks and the browser's read the same output."""
    out = tmp_path_factory.mktemp("run") / "out"
    return out, run(spark, load_scenario(str(SCENARIO)), out)


def test_kce_run_writes_the_report_of_its_outputs(played: tuple[Path, dict]) -> None:
    out, summary = played
    html = (out / REPORT).read_text(encoding="utf-8")
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    scenario = load_scenario(str(SCENARIO))
    timeline = [e.model_dump(mode="json") for e in scenario.timeline()]
    # The page is the pure renderer's, over the files the run wrote and the scenario's events.
    assert html == render_run_report(summary, events, metrics, 20_000, timeline)
    assert html.count("<svg") == 2
    assert "kce run: reassignment-resumes" in html
    assert _summary_rows(html)["events_processed"] == str(summary["events_processed"])
    assert "<td>BrokerChange</td>" in _section(html, "Events that changed something")
    assert f"<td>{timeline[0]['type']}</td>" in _section(html, BROKER_CHART)


@needs_chromium
def test_headless_chromium_shows_the_run_report(played: tuple[Path, dict], tmp_path: Path) -> None:
    out, _ = played
    screenshot = tmp_path / "report.png"
    chromium(out / REPORT, tmp_path / "p1", f"--screenshot={screenshot}", "--window-size=1280,1600")
    assert_not_blank(screenshot, (1280, 1600))
    dom = chromium(out / REPORT, tmp_path / "p2", "--dump-dom").stdout
    assert dom.count("<svg") == 2
    assert f"<h2>{BROKER_CHART}</h2>" in dom and "<h2>Controller gauges</h2>" in dom
    # Not wider than the window, at the page's column and narrower.
    for width in (1280, 800):
        assert page_overflow(out / REPORT, tmp_path / f"w{width}", width) == 0
