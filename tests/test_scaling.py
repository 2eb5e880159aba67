"""``kce scale``: the smoke sweep end to end (one run shared by the assertions), its Kafka work
against a plain ``kce run`` of the same scenario, budgets, bad sweep files, and the growth fit."""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from pyspark.sql import SparkSession

from scaling.growth import fit_exponent, step_exponents
from scaling.operations import plan_all
from scaling.play import REQUEST_KEYS
from scaling.report import markdown
from scaling.results import AXES, COLUMNS
from scaling.sweep import load_sweep
from spark_app import runner
from spark_app.cli import main
from spark_app.scenario import ScenarioError, format_problems

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "configs" / "sweeps" / "smoke.yaml"
OPERATIONS = ("broker_failure", "controller_failover", "rack_outage", "rack_outage.recovery")
WHATIF = "whatif-leaders"
AXES_VALUES = {"brokers": 100, "racks": 3, "replication_factor": 3, "topics": 1,
               "partitions_per_topic": 1, "type": "broker_failure"}  # fmt: skip


@pytest.fixture(scope="module")
def smoke(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    out = tmp_path_factory.mktemp("scale") / "smoke"
    assert main(["scale", str(SMOKE), "--out", str(out)]) == 0
    yield out


@pytest.fixture(scope="module")
def rows(smoke: Path) -> list[dict[str, str]]:
    with (smoke / "scaling.csv").open(newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def rack_outage_run(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Any, list[dict[str, Any]]]:
    """``kce run`` of the smoke's rack outage at its smallest point: the plan and its events."""
    plan = next(p for p in plan_all(load_sweep(SMOKE)) if p.operation.label() == "rack_outage")
    out = tmp_path_factory.mktemp("scale") / "run"
    runner.run(spark, plan.scenario, out)
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    return plan, events


def test_smoke_csv_has_a_row_per_point_and_operation(rows: list[dict[str, str]]) -> None:
    labels = [*OPERATIONS, WHATIF]
    assert [r["operation"] for r in rows] == labels + labels
    assert [int(r["partitions"]) for r in rows] == [1000] * 5 + [4000] * 5
    assert {(r["brokers"], r["racks"], r["replication_factor"]) for r in rows} == {("12", "3", "3")}
    assert [int(r["topics"]) for r in rows] == [10] * 5 + [40] * 5
    for r in rows:
        assert float(r["wall_seconds"]) > 0 and r["errors"] == "0"
        assert float(r["peak_rss_mb"]) > 0 and float(r["jvm_heap_peak_mb"]) > 0
    # A broker failure elects new leaders for the partitions it led; a controller failover
    # reads every partition's state znode; the what-if question has no controller work but
    # runs Spark jobs.
    failure = {int(r["partitions"]): r for r in rows if r["operation"] == "broker_failure"}
    assert 0 < int(failure[1000]["elections"]) < int(failure[4000]["elections"])
    failover = [r for r in rows if r["operation"] == "controller_failover"]
    assert [int(r["zk_reads"]) >= int(r["partitions"]) for r in failover] == [True, True]
    whatif = [r for r in rows if r["operation"] == WHATIF]
    assert all(r["elections"] == "" and int(r["spark_jobs"]) > 0 for r in whatif)


def test_smoke_csv_columns_are_stable(smoke: Path) -> None:
    header = (smoke / "scaling.csv").read_text().splitlines()[0].split(",")
    assert tuple(header) == COLUMNS
    assert tuple(header[: len(AXES)]) == (
        "partitions", "brokers", "racks", "replication_factor", "topics", "partitions_per_topic",
    )  # fmt: skip


def test_smoke_json_keys_and_exponents(smoke: Path, rows: list[dict[str, str]]) -> None:
    data = json.loads((smoke / "scaling.json").read_text())
    assert list(data) == [
        "name", "sweep", "environment", "columns", "rows", "exponents", "step_exponents",
        "budgets_exceeded",
    ]  # fmt: skip
    assert data["name"] == "smoke" and data["budgets_exceeded"] == []
    assert data["columns"] == list(COLUMNS)
    assert [r["operation"] for r in data["rows"]] == [r["operation"] for r in rows]
    assert set(data["rows"][0]) == {*COLUMNS, "error_messages", "answer"}
    assert data["rows"][4]["answer"]["leader_imbalance_per_broker_percentage"] == 10
    (series,) = data["exponents"]["broker_failure"].values()
    # Elections grow with the partitions the failed broker led: linearly.
    assert series["elections"] == pytest.approx(1.0, abs=0.1)
    assert set(data["exponents"]) == {*OPERATIONS, WHATIF}
    # Two sizes: one step, the fit itself.
    (steps,) = data["step_exponents"]["broker_failure"].values()
    assert steps["elections"] == [
        {"from": 1000, "to": 4000, "exponent": pytest.approx(series["elections"], abs=1e-3)}
    ]


def test_smoke_charts_are_pngs_and_the_report_shows_them(smoke: Path) -> None:
    charts = sorted((smoke / "charts").iterdir())
    assert [c.name for c in charts] == sorted(f"{o}.png" for o in (*OPERATIONS, WHATIF))
    for chart in charts:
        with Image.open(chart) as image:
            image.verify()
            assert image.format == "PNG" and image.size[0] > 600
    page = (smoke / "report.html").read_text()
    assert page.count('src="data:image/png;base64,') == len(charts)
    summary = (smoke / "summary.md").read_text()
    assert all(f"## {o}\n" in summary for o in (*OPERATIONS, WHATIF))


def _window(events: list[dict[str, Any]], after_ms: int, until_ms: int) -> dict[str, int]:
    """events.jsonl summed over virtual time (after_ms, until_ms]."""
    lines = [e for e in events if after_ms < e["virtual_time_ms"] <= until_ms]
    totals = {
        "events": len(lines),
        "elections": sum(e["elections"] for e in lines),
        "unclean_elections": sum(e["unclean_elections"] for e in lines),
        "failed_elections": sum(e["failed_elections"] for e in lines),
        "partitions_changed": sum(e["partitions_changed"] for e in lines),
        "zk_writes": sum(e["zk_writes"] for e in lines),
    }
    for key in REQUEST_KEYS:
        totals[key] = sum(e["requests"].get(key, 0) for e in lines)
    return totals


def test_kafka_work_equals_what_kce_run_reports(
    rows: list[dict[str, str]], rack_outage_run: tuple[Any, list[dict[str, Any]]]
) -> None:
    plan, events = rack_outage_run
    (outage, recovery) = plan.phases
    expected = {
        "rack_outage": _window(events, plan.setup_ms, outage.until_ms),
        "rack_outage.recovery": _window(events, outage.until_ms, recovery.until_ms),
    }
    for label, totals in expected.items():
        (row,) = [r for r in rows if r["operation"] == label and r["partitions"] == "1000"]
        assert {k: int(row[k]) for k in totals} == totals
        assert totals["events"] > 0 and totals["LeaderAndIsr_partitions"] > 0


def test_budget_exceeded_exits_1_after_writing(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep = tmp_path / "tight.yaml"
    sweep.write_text(
        "name: tight\nrepeat: 1\npoints: [{partitions: 300, brokers: 6}]\n"
        "budgets: {wall_seconds: 0.000001}\noperations: [{type: broker_failure}]\n"
    )
    assert main(["scale", str(sweep), "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr()
    assert "over the budget wall_seconds 1e-06" in err.out and "1 budget(s) exceeded" in err.err
    # Off a terminal, a timestamped line per step done instead of the bar.
    steps = [line[9:] for line in err.err.splitlines() if re.match(r"\d\d:\d\d:\d\d ", line)]
    where = "partitions=300 brokers=6"
    assert (
        steps[0].startswith(f"{where} ") and " starting table generated and checked in " in steps[0]
    )
    assert re.fullmatch(rf"{where} .* · broker_failure: set up in \d+s", steps[1])
    assert re.fullmatch(
        rf"{where} .* · broker_failure: [\d.]+ s, driver peak RSS [\d.]+ GiB", steps[2]
    )
    assert steps[3:] == [f"writing the outputs to {tmp_path / 'out'}/"]
    data = json.loads((tmp_path / "out" / "scaling.json").read_text())
    assert len(data["budgets_exceeded"]) == 1 and data["rows"][0]["partitions"] == 300


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "name: bad\nrepeat: 0\naxes: {partitions: 1000, brokr: 3}\n"
            "operations: [{type: brokr_failure},\n"
            "  {type: whatif, question: leaders, args: [--bogus, '1']}]\n",
            ["repeat: Input should be greater than or equal to 1",
             "axes.brokr: unknown key 'brokr'",
             "operations[0]: unknown type 'brokr_failure'; did you mean 'broker_failure'?",
             "operations[1].args: kce whatif leaders: unrecognized arguments: --bogus 1"],
        ),
        (
            "name: bad\naxes: {partitions: [1000, 1050], brokers: 4}\n"
            "operations: [{type: broker_failure, brokers: 4}]\n",
            ["axes: (partitions=1050 brokers=4 racks=3 replication_factor=3) partitions 1050 "
             "is not a multiple of partitions_per_topic 100"],
        ),
        (
            "name: bad\npoints: [{partitions: 1000, brokers: 4}]\n"
            "operations: [{type: broker_failure, brokers: 4}, {type: rack_outage, rack: 3}]\n",
            ["operations[0].brokers: at partitions=1000 brokers=4",
             "4 broker(s) cannot leave a cluster of 4",
             "operations[1].rack: at partitions=1000",
             "rack 3 is not one of the point's racks 0..2"],
        ),
        (
            "name: bad\npoints: [{partitions: 1000, operations: [failover]}]\n"
            "operations: [{type: controller_failover}, {type: controller_failover}]\n",
            ["operations[1]: the label 'controller_failover' is taken; give this one a name",
             "points[0].operations[0]: no operation is labelled 'failover'"],
        ),
    ],
    ids=["fields", "axes", "operations", "labels"],
)  # fmt: skip
def test_bad_sweep_exits_2_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, expected: list[str]
) -> None:
    sweep = tmp_path / "bad.yaml"
    sweep.write_text(text)
    assert main(["scale", str(sweep), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"kce: {sweep}: ") and "Traceback" not in err
    assert expected[0] in err and len(err.splitlines()) <= 3  # bounded: the first ones shown
    with pytest.raises(ScenarioError) as found:  # ... and every problem found at once
        plan_all(load_sweep(sweep), str(sweep))
    for part in expected:
        assert part in format_problems(found.value.problems)
    assert not (tmp_path / "out").exists()


def test_growth_exponent_is_the_log_log_slope() -> None:
    assert fit_exponent([(x, 3 * x**1.5) for x in (1e3, 1e4, 1e5)]) == pytest.approx(1.5)
    assert fit_exponent([(1e5, 2.0), (1e6, 2.0)]) == pytest.approx(0.0)
    # Least squares over noisy points: the slope of the best line through their logarithms.
    points = [(10.0, 10.0), (100.0, 1000.0), (1000.0, 10000.0)]
    logs = [(math.log10(x), math.log10(y)) for x, y in points]
    mean_x = sum(x for x, _ in logs) / 3
    mean_y = sum(y for _, y in logs) / 3
    slope = sum((x - mean_x) * (y - mean_y) for x, y in logs) / sum(
        (x - mean_x) ** 2 for x, _ in logs
    )
    assert fit_exponent(points) == pytest.approx(slope) == pytest.approx(1.5)
    # Zero and missing values cannot be on a log scale; one size gives no slope.
    assert fit_exponent([(1e3, 0.0), (1e4, 5.0), (1e5, 50.0)]) == pytest.approx(1.0)
    assert fit_exponent([(1e3, 1.0), (1e3, 2.0)]) is None
    assert fit_exponent([]) is None


def test_step_exponents_read_the_growth_between_consecutive_sizes() -> None:
    # A fixed cost dominates the small size: the fit over all sizes is below the last step's.
    points = [(1e5, 3.0), (1e6, 4.0), (1e7, 40.0)]
    assert step_exponents(points) == [
        {"from": 1e5, "to": 1e6, "exponent": pytest.approx(math.log10(4 / 3), abs=1e-3)},
        {"from": 1e6, "to": 1e7, "exponent": pytest.approx(1.0)},
    ]
    assert fit_exponent(points) < 1.0
    assert step_exponents([(1e7, 2.0), (1e5, 2.0), (1e6, 0.0)]) == [
        {"from": 1e5, "to": 1e7, "exponent": 0.0}
    ]
    assert step_exponents([(1e5, 1.0)]) == []
    rows = [
        {"partitions": p, "operation": "broker_failure", "wall_seconds": t, **AXES_VALUES}
        for p, t in points
    ]
    text = markdown("s", rows, [], {})
    assert "- from 100,000 to 1,000,000: wall_seconds 0.12" in text
    assert "- from 1,000,000 to 10,000,000: wall_seconds 1.00" in text
