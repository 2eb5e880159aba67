"""``kce whatif audit PLAN.json`` and the plan validator it shares with the planner.

Unit tests give ``check_plan`` one bad case each (Kafka's §10.4 checks, the tool's checks, RF and
rack safety); ``parse_plan`` errors name the file and the JSON path; the end-to-end tests audit
hand-worked plans on ``place-racks.txt`` (brokers 1, 3 in rack a; 2, 4 in rack b).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from spark_app.cli import main
from whatif.cluster import WhatIfInputError
from whatif.plan_check import ERROR, WARNING, Problem, check_plan, parse_plan, plan_from_json

DATA = Path(__file__).parent / "data" / "whatif"
CURRENT = {("t", 0): [1, 2], ("t", 1): [2, 3], ("u", 0): [1]}
BROKERS = (1, 2, 3, 4)
RACKS: dict[int, str | None] = {1: "a", 2: "b", 3: "a", 4: "b"}


def check(entries: list[dict[str, Any]], version: int = 1) -> list[Problem]:
    plan = plan_from_json({"version": version, "partitions": entries}, "plan.json")
    return check_plan(plan, CURRENT, BROKERS, RACKS)


def one(problems: list[Problem]) -> Problem:
    assert len(problems) == 1, problems
    return problems[0]


def test_a_good_plan_has_no_problem() -> None:
    # t-0 [1,2] → [4,1]: racks b, a (two of two); t-1 reordered; u-0 moved within RF 1.
    assert check([
        {"topic": "t", "partition": 0, "replicas": [4, 1]},
        {"topic": "t", "partition": 1, "replicas": [3, 2], "log_dirs": ["any", "/d"]},
        {"topic": "u", "partition": 0, "replicas": [3]},
    ]) == []  # fmt: skip


@pytest.mark.parametrize(
    ("entries", "version", "field", "severity", "text"),
    [
        ([{"topic": "t", "partition": 0, "replicas": [1, 2]}], 2, "version", ERROR, "version 2"),
        ([], 1, "partitions", ERROR, "no partition"),
        ([{"topic": "t", "partition": 0, "replicas": []}], 1, "replicas", ERROR, "empty replica"),
        ([{"topic": "t", "partition": 0, "replicas": [2, 2]}], 1, "replicas", ERROR, "twice"),
        ([{"topic": "t", "partition": 0, "replicas": [1, -4]}], 1, "replicas", ERROR, "negative"),
        ([{"topic": "t", "partition": 5, "replicas": [1, 2]}], 1, "partition", ERROR, "does not exist"),
        ([{"topic": "x", "partition": 0, "replicas": [1, 2]}], 1, "partition", ERROR, "does not exist"),
        ([{"topic": "t", "partition": 0, "replicas": [1, 9]}], 1, "replicas", ERROR, "unknown broker id(s) 9"),
        ([{"topic": "t", "partition": 0, "replicas": [1, 2], "log_dirs": ["any"]}], 1, "log_dirs", ERROR, "1 log dirs for 2"),
        # RF 2 → 3: Kafka runs it; a warning. Racks a, b, b: two racks of two, fine.
        ([{"topic": "t", "partition": 0, "replicas": [1, 2, 4]}], 1, "replicas", WARNING, "replication factor"),
        # [1,2] spans a and b; [1,3] only a: worse than before.
        ([{"topic": "t", "partition": 0, "replicas": [1, 3]}], 1, "replicas", ERROR, "1 rack(s), 2 before"),
    ],
)  # fmt: skip
def test_each_bad_case(
    entries: list[dict[str, Any]], version: int, field: str, severity: str, text: str
) -> None:
    problem = one(check(entries, version))
    assert (problem.field, problem.severity) == (field, severity)
    assert text in problem.message


def test_partition_listed_twice() -> None:
    problems = check([
        {"topic": "t", "partition": 0, "replicas": [4, 1]},
        {"topic": "t", "partition": 0, "replicas": [1, 4]},
    ])  # fmt: skip
    assert [p.field for p in problems] == ["partition", "partition"]
    assert "listed 2 times" in problems[0].message


def test_rack_unsafe_but_not_worse_is_a_warning() -> None:
    # v-0 [1,3] is all in rack a already; reordering it keeps it there: not worse, a warning.
    current = {("v", 0): [1, 3]}
    plan = plan_from_json(
        {"version": 1, "partitions": [{"topic": "v", "partition": 0, "replicas": [3, 1]}]}, "p"
    )
    problem = one(check_plan(plan, current, BROKERS, RACKS))
    assert problem.severity == WARNING and not problem.refused_by_kafka
    # Without racks on every broker, no rack check.
    assert check_plan(plan, current, BROKERS, {1: "a"}) == []


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ('{"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": ["x"]}]}',
         "partitions[0].replicas[0]"),
        ('{"version": 1, "partitions": [{"topic": "t", "partition": 0, "replica": [1]}]}',
         "partitions[0].replica"),
        ('{"partitions": []}', "version"),
        ('{"version": 1, "partitions": [', "plan.json:1"),
    ],
)  # fmt: skip
def test_parse_errors_name_file_and_json_path(tmp_path: Path, text: str, where: str) -> None:
    path = tmp_path / "plan.json"
    path.write_text(text)
    with pytest.raises(WhatIfInputError) as err:
        parse_plan(path)
    assert f"{path}" in str(err.value) and where in str(err.value)


def test_malformed_plan_file_names_entry() -> None:
    with pytest.raises(WhatIfInputError, match=r"plan-malformed.json: partitions\[3\]\.replicas"):
        parse_plan(DATA / "plan-malformed.json")


def _audit(tmp_path: Path, plan: str) -> dict[str, Any]:
    out = tmp_path / "out"
    args = ["whatif", "audit", str(DATA / plan), "--describe", str(DATA / "place-racks.txt")]
    rc = main([*args, "--rack-map", str(DATA / "place-racks.csv"), "--out", str(out)])
    assert rc == 0
    assert (out / "report.html").exists() and (out / "partitions_after.parquet").is_dir()
    return json.loads((out / "summary.json").read_text())


def test_cli_audit_good_plan(tmp_path: Path) -> None:
    # orders-0 [1,2] → [4,1]: one replica moves (2 → 4), racks b, a; orders-1 [2,3] → [3,2]:
    # reordered only. After: 1 holds orders-0 and logs-0; 2 orders-1; 3 orders-1, orders-2;
    # 4 orders-0, orders-2. Preferred leaders: 4 (orders-0), 3 (orders-1, orders-2), 1 (logs-0).
    # Losing rack a loses logs-0 (RF 1 on broker 1), before and after; the replica sets stay 4.
    summary = _audit(tmp_path, "plan-good.json")
    assert summary["valid"] is True and summary["problems"] == []
    assert (summary["partitions_moved"], summary["replicas_moved"]) == (1, 1)
    assert summary["leaders_moved"] == 2
    assert summary["replicas_per_broker_after"] == {"1": 2, "2": 1, "3": 2, "4": 2}
    assert summary["preferred_leaders_per_broker_after"] == {"1": 1, "2": 0, "3": 2, "4": 1}
    assert summary["rack_loss_offline"] == {"a": 1, "b": 0}
    assert summary["rack_loss_offline_before"] == {"a": 1, "b": 0}
    assert summary["distinct_replica_sets"] == {"before": 4, "after": 4}


def test_cli_audit_bad_plan(tmp_path: Path) -> None:
    # orders-0 [1,3]: both in rack a (was a, b) — error, but Kafka would run it, so it is in the
    # after state; orders-1 [2,2] duplicate and orders-2 [3,9] unknown broker: refused;
    # orders-7 unknown partition; logs-0 [2,1]: RF 1 → 2, a warning.
    # After: orders-0 [1,3], orders-1 [2,3], orders-2 [3,4], logs-0 [2,1]: losing rack a now
    # loses orders-0 and no longer logs-0.
    summary = _audit(tmp_path, "plan-bad.json")
    assert summary["valid"] is False
    found = sorted((p["topic"], p["partition"], p["severity"]) for p in summary["problems"])
    assert found == [
        ("logs", 0, "warning"), ("orders", 0, "error"), ("orders", 1, "error"),
        ("orders", 2, "error"), ("orders", 7, "error"),
    ]  # fmt: skip
    assert (summary["partitions_moved"], summary["replicas_moved"]) == (2, 2)
    assert summary["replicas_per_broker_after"] == {"1": 2, "2": 2, "3": 3, "4": 1}
    assert summary["rack_loss_offline"] == {"a": 1, "b": 0}


def test_cli_audit_malformed_plan_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    args = ["whatif", "audit", str(DATA / "plan-malformed.json")]
    rc = main([*args, "--describe", str(DATA / "place-racks.txt"), "--out", str(out)])
    assert rc == 2
    assert "partitions[3].replicas[0]" in capsys.readouterr().err
    assert not out.exists()
