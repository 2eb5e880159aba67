"""The what-if flow as README runs it: scale-out, then audit and execute of its plan, each into a
default output directory of its own.

Kafka's tool refuses a plan that names a broker it does not know (``kafka-reassign-partitions.sh``
verifies every broker id of a plan against the live brokers: "Unknown broker id"): a scale-out's
plan becomes runnable once its new brokers have started. ``--new-brokers`` declares them,
started empty, as ``ID[:RACK],...`` or through the scale-out's own ``summary.json``.

Cluster: ``execute-cluster.yaml`` (brokers 1-5, rackless; topic a's three partitions on 1 and 2,
102.4, 51.2 and 25.6 MB by ``execute-sizes.csv``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from spark_app.cli import EXIT_INVALID, EXIT_OK, _parser, main
from tests.test_whatif_execute import SOURCE  # the same cluster and sizes
from whatif import execute
from whatif.cluster import WhatIfCluster, WhatIfInputError
from whatif.command import default_out
from whatif.new_brokers import NewBroker, parse_new_brokers, with_new_brokers

# -- default output directories ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ("fail --rack b", "whatif-fail-rack-b"),
        ("fail --any 2", "whatif-fail-any-2"),
        ("fail --any 2 --samples 500 --seed 3", "whatif-fail-any-2-samples-500-seed-3"),
        ("fail --brokers 1,2", "whatif-fail-brokers-1-2"),
        (
            "fail --brokers 1,2 --config min.insync.replicas=2",
            "whatif-fail-brokers-1-2-config-min.insync.replicas-2",
        ),
        ("roll --batch rack", "whatif-roll-batch-rack"),
        ("decommission --brokers 4", "whatif-decommission-brokers-4"),
        ("scale-out --add 10 --racks a,b", "whatif-scale-out-add-10-racks-a-b"),
        ("leaders", "whatif-leaders"),
        ("rebalance --sizes s.csv --rack-map r.csv --master local[2] --json", "whatif-rebalance"),
        ("audit plan.json", "whatif-audit-plan"),
        (
            "audit out/whatif-scale-out-add-2/reassignment.json --new-brokers 6,7",
            "whatif-audit-scale-out-add-2-reassignment",
        ),
        ("execute plan.json --fetch-mb-per-s 100", "whatif-execute-plan"),  # the default
        ("execute plan.json --max-moves 2", "whatif-execute-plan-max-moves-2"),
    ],
)
def test_each_question_and_its_options_get_their_own_directory(argv: str, expected: str) -> None:
    question, *rest = argv.split()
    args = _parser().parse_args(["whatif", question, "--describe", "c.txt", *rest])
    assert default_out(args) == Path("out") / expected


def test_a_long_name_is_cut_and_ends_with_a_digest() -> None:
    def name(throttle: str) -> str:
        argv = ["whatif", "execute", "p.json", "--zk", "z:2181", "--max-moves-per-broker", "2",
                "--max-leader-moves", "100", "--throttle", throttle]  # fmt: skip
        return default_out(_parser().parse_args(argv)).name

    assert len(name("40000000")) == 64 and name("40000000") == name("40000000")
    assert name("40000000") != name("40000001")
    assert name("40000000").startswith("whatif-execute-p-max-moves-per-broker-2-")


# -- --new-brokers -------------------------------------------------------------------------------


def _snapshot(racks: dict[int, str | None]) -> WhatIfCluster:
    # The checks read only the brokers and racks: no partitions needed.
    return WhatIfCluster(None, tuple(sorted(racks)), racks, {})  # type: ignore[arg-type]


def test_new_brokers_join_the_snapshot_live_and_empty() -> None:
    new = parse_new_brokers("5:a, 6:b")
    assert new == (NewBroker(5, "a"), NewBroker(6, "b"))
    grown = with_new_brokers(_snapshot({1: "a", 2: "b"}), new)
    assert grown.brokers == (1, 2, 5, 6)
    assert grown.racks == {1: "a", 2: "b", 5: "a", 6: "b"}
    assert with_new_brokers(_snapshot({1: None}), parse_new_brokers("7")).brokers == (1, 7)


@pytest.mark.parametrize(
    ("snapshot", "text", "message"),
    [
        ({1: "a"}, "1:a", "broker 1 is already in the snapshot"),
        ({1: "a", 2: "b"}, "5,6", "the snapshot's brokers have racks, the new ones none"),
        ({1: None}, "5:a", "the snapshot's brokers have no racks"),
        ({1: "a"}, "5:a,5:b", "broker 5 is listed twice"),
        ({1: "a"}, "5:a,6", "some new brokers have a rack and some not"),
        ({1: "a"}, "x:a", "'x:a' is not ID or ID:RACK"),
        ({1: "a"}, "5:", "'5:' is not ID or ID:RACK"),
        ({1: "a"}, "3000000000", "is not 0..2147483647"),
    ],
)
def test_bad_new_brokers_name_the_problem(
    snapshot: dict[int, str | None], text: str, message: str
) -> None:
    with pytest.raises(WhatIfInputError, match=message):
        with_new_brokers(_snapshot(snapshot), parse_new_brokers(text))


def test_a_summary_that_is_not_a_scale_outs_is_refused(tmp_path: Path) -> None:
    summary = tmp_path / "summary.json"
    summary.write_text(json.dumps({"question": "leaders"}))
    with pytest.raises(WhatIfInputError, match="it lists no new_brokers"):
        parse_new_brokers(str(summary))
    with pytest.raises(WhatIfInputError, match="cannot read it"):
        parse_new_brokers(str(tmp_path / "missing.json"))


# -- scale-out → audit → execute -----------------------------------------------------------------


def test_scale_out_then_audit_and_execute_its_plan_with_the_new_brokers(
    spark: SparkSession,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(execute, "PROGRESS_DELAY_S", 0.0)  # show the log however fast it runs
    assert main(["whatif", "scale-out", *SOURCE, "--add", "2"]) == EXIT_OK
    scaled = Path("out/whatif-scale-out-add-2")
    assert json.loads((scaled / "summary.json").read_text())["new_brokers"] == [6, 7]
    plan = str(scaled / "reassignment.json")
    capsys.readouterr()

    # Without them, execute refuses the plan with the audit's own line, and writes nothing.
    assert main(["whatif", "execute", plan, *SOURCE]) == EXIT_INVALID
    err = capsys.readouterr().err
    assert "Kafka refuses this plan" in err
    assert "error: a-1 replicas: unknown broker id(s) 6 — use live brokers, or declare" in err
    assert err.rstrip().endswith(
        "if the plan adds them, declare them with --new-brokers 6 (ID:RACK with racks) or the scale-out's output directory"
    )
    assert not Path("out/whatif-execute-scale-out-add-2-reassignment").exists()

    # Declared by the scale-out's summary, the plan is valid and runs.
    assert main(["whatif", "audit", plan, *SOURCE, "--new-brokers", str(scaled)]) == EXIT_OK
    audit = json.loads(
        Path("out/whatif-audit-scale-out-add-2-reassignment/summary.json").read_text()
    )
    assert audit["valid"] is True and audit["problems"] == []
    assert audit["replicas_per_broker_before"] == {
        "1": 3,
        "2": 3,
        "3": 0,
        "4": 0,
        "5": 0,
        "6": 0,
        "7": 0,
    }
    assert sum(audit["replicas_per_broker_after"].values()) == 6
    capsys.readouterr()

    assert main(["whatif", "execute", plan, *SOURCE, "--new-brokers", "6,7"]) == EXIT_OK
    out = Path("out/whatif-execute-scale-out-add-2-reassignment")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["partitions_moved"] == 2 and summary["unfinished_partitions"] == []
    assert summary["waves"] == 1 and summary["makespan_seconds"] > 0
    # Off a terminal, a timestamped line per wave and per completion (spark_app.progress).
    steps = [line[9:] for line in capsys.readouterr().err.splitlines() if line[2:3] == ":"]
    assert steps[0] == "wave 1: 2 move(s) submitted at 0.000 s virtual, 2 in flight"
    assert steps[-1].startswith("2/2 moves done · wave 1 · ")
    # Every question wrote into its own directory.
    assert sorted(p.name for p in Path("out").iterdir()) == [
        "whatif-audit-scale-out-add-2-reassignment",
        "whatif-execute-scale-out-add-2-reassignment",
        "whatif-scale-out-add-2",
    ]
