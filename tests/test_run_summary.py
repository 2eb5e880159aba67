"""What ``kce run`` prints: a short summary for a person (at most 20 lines) read from the run's
own outputs, or ``summary.json`` with ``--json``; and its default output directory, which a
``--set`` run does not share with the plain run.

The peaks are Kafka's gauges (spec §16.1: ``OfflinePartitionsCount``; the brokers'
``UnderReplicatedPartitions`` and ``UnderMinIsrPartitionCount``) at their highest over
``metrics.jsonl``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from spark_app.cli import EXIT_OK, main
from spark_app.out_names import default_name, run_out, slug
from spark_app.run_summary import MAX_LINES, EventFacts, Peak, event_facts, peaks, summary_lines

SCENARIOS = Path(__file__).resolve().parents[1] / "configs" / "scenarios"
# Broker 2 is down at t=0 and holds the reassignment's target replica; it starts at 5 s.
SCENARIO = SCENARIOS / "reassignment-resumes.yaml"


def test_peaks_are_the_highest_gauges_first_reached() -> None:
    metrics = [
        {"virtual_time_ms": 0, "source": "controller", "offline_partitions_count": 0,
         "under_replicated_partitions": 0},
        {"virtual_time_ms": 10_000, "source": "controller", "offline_partitions_count": 7,
         "under_replicated_partitions": 30},
        {"virtual_time_ms": 11_000, "source": "brokers", "OfflinePartitionsCount": 7,
         "UnderReplicatedPartitions": 33, "UnderMinIsrPartitionCount": 12},
        {"virtual_time_ms": 12_000, "offline_partitions_count": 7,  # no source: the controller
         "under_replicated_partitions": 2},
    ]  # fmt: skip
    assert peaks(metrics) == {
        "offline": Peak(7, 10_000),
        "under-replicated": Peak(33, 11_000),
        "under min ISR": Peak(12, 11_000),
    }
    # Without replication there are no broker lines: under min ISR is not modelled.
    assert peaks(metrics[:2])["under min ISR"] is None


def test_events_tell_rejected_requests_from_failed_events() -> None:
    events = [
        {"controller": None, "exception": "TopicExistsException", "error": "TopicExists..."},
        {"controller": 1, "failed_elections": 2, "error": None},
        {"controller": 1, "failed_elections": 0, "error": "emulator error"},
    ]
    assert event_facts(events) == EventFacts(rejected=1, failed=1, no_leader=2)


def test_many_errors_still_fit_the_summary(tmp_path: Path) -> None:
    summary = {
        "name": "s", "events_processed": 9, "elections": 1, "unclean_elections": 0,
        "errors": [f"create_topic at {i}s failed: TopicExistsException" for i in range(40)],
        "requests": {}, "zk_writes": 0, "controller": None,
        "model_violations": {"counts": {"leader_not_in_isr": 2}},
    }  # fmt: skip
    lines = summary_lines(summary, tmp_path, 60_000, dict.fromkeys(("offline",)), EventFacts(40))
    assert len(lines) <= MAX_LINES
    assert "  … and 37 more (summary.json: errors)" in lines
    assert "MODEL VIOLATIONS: leader_not_in_isr 2 (summary.json: model_violations)" in lines
    assert lines[-1] == f"report: {tmp_path / 'report.html'}"


def test_run_prints_a_short_human_summary_and_json_on_request(
    spark: SparkSession,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["run", str(SCENARIO)]) == EXIT_OK
    lines = capsys.readouterr().out.splitlines()
    out = Path("out") / "reassignment-resumes"
    summary = json.loads((out / "summary.json").read_text())
    assert 8 <= len(lines) <= MAX_LINES
    assert lines[0].startswith("kce run reassignment-resumes: 20s of virtual time in ")
    assert lines[0].endswith(f", {summary['events_processed']} controller events")
    assert lines[1] == f"elections: {summary['elections']} (0 unclean, 0 found no leader)"
    assert (
        lines[2]
        == "peaks: offline 0, under-replicated 0, under min ISR not modelled (no replication)"
    )
    assert lines[3] == "admin requests rejected: 0; failed controller events: 0"
    assert lines[4] == f"controller: broker 1, epoch {summary['controller']['epoch']}"
    requests = summary["requests"]
    assert lines[5] == (
        f"requests: LeaderAndIsr {requests['LeaderAndIsr']}, UpdateMetadata "
        f"{requests['UpdateMetadata']}, StopReplica {requests['StopReplica']}; "
        f"ZooKeeper writes {summary['zk_writes']}"
    )
    assert lines[-2].startswith(f"outputs: {out}/ ")
    assert lines[-1] == f"report: {out / 'report.html'}" and (out / "report.html").is_file()

    # --json prints summary.json as written; a --set run takes a directory of its own.
    option = "auto.leader.rebalance.enable=true"
    assert main(["run", str(SCENARIO), "--set", option, "--json"]) == EXIT_OK
    own = Path("out") / "reassignment-resumes-set-auto.leader.rebalance.enable-true"
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads((own / "summary.json").read_text())
    assert json.loads((out / "summary.json").read_text()) == summary  # the plain run's is kept


def test_run_default_names_are_stable_and_distinct() -> None:
    assert run_out("gc-pause", []) == Path("out/gc-pause")
    one = run_out("s", ["emulation.isr_rule=time", "log.message.format.version=0.10.2"])
    assert one == run_out("s", ["log.message.format.version=0.10.2", "emulation.isr_rule=time"])
    assert one == Path("out/s-set-emulation.isr_rule-time-log.message.format.version-0.10.2")
    assert run_out("s", ["emulation.isr_rule=count"]) != run_out("s", ["emulation.isr_rule=time"])
    assert slug("config.a b=/x") == "config.a-b-x"
    long = default_name("s", ["set", "x" * 100])
    assert len(long) == 64 and long == default_name("s", ["set", "x" * 100])
    assert long != default_name("s", ["set", "x" * 101])
