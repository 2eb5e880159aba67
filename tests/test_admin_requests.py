"""``kce run``: admin requests Kafka rejects are reported as the admin tool sees them (Kafka's
exception name and message) and the run goes on; a starting state that breaks the cluster model
ends the run with exit 2."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from spark_app.cli import EXIT_INVALID, EXIT_OK, main

REJECTED = """
name: rejected-admin-requests
seed: 1
cluster:
  brokers: [{id: 1}, {id: 2}, {id: 3}]
  topics:
    - {name: t, partitions: 1, replication_factor: 3, assignment: {0: [1, 2, 3]}}
    - {name: u, partitions: 1, replication_factor: 1, assignment: {0: [1]}}
  controller: 1
events:
  - {at: 1s, type: broker_failure, brokers: [3]}
  # RF 3 on the 2 registered brokers: Kafka's placement raises.
  - {at: 2s, type: add_partitions, topic: t, total: 2}
  # Manual assignment of an added partition on an unregistered broker.
  - {at: 3s, type: add_partitions, topic: u, total: 2, assignment: {1: [3]}}
  # Broker 3 holds a replica of t, so its deletion waits and t still exists at 5s.
  - {at: 4s, type: delete_topic, topic: t}
  - {at: 5s, type: create_topic, topic: {name: t, partitions: 1, replication_factor: 2}}
  # Kafka 2.8 does not check a new topic's manual assignment against the registered brokers.
  - {at: 6s, type: create_topic, topic: {name: v, partitions: 1, replication_factor: 2, assignment: {0: [3, 1]}}}
until: 10s
"""

EXPECTED = [
    (
        2000,
        "add_partitions",
        "InvalidReplicationFactorException",
        "Replication factor: 3 larger than available brokers: 2",
    ),
    (
        3000,
        "add_partitions",
        "BrokerNotAvailableException",
        "Some brokers specified for partition id 1 are not available. "
        "Specified brokers: 3, available brokers: 1, 2.",
    ),
    (5000, "create_topic", "TopicExistsException", "Topic 't' already exists."),
]


def test_rejected_admin_requests_are_recorded_and_the_run_goes_on(
    spark: SparkSession,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(REJECTED)
    with caplog.at_level(logging.WARNING, logger="spark_app.runner"):
        code = main(["run", str(path), "--out", str(tmp_path / "out")])
    captured = capsys.readouterr()
    assert code == EXIT_OK
    assert "Traceback" not in captured.err and "Uncaught exception" not in caplog.text
    out = tmp_path / "out"
    lines = [json.loads(x) for x in (out / "events.jsonl").read_text().splitlines()]
    failed = [x for x in lines if x.get("exception")]
    got = [(x["virtual_time_ms"], x["type"], x["exception"], x["message"]) for x in failed]
    assert len(got) == len(EXPECTED)
    for (at, kind, exc, message), (want_at, want_kind, want_exc, want_message) in zip(
        got, EXPECTED, strict=True
    ):
        assert (at, kind, exc) == (want_at, want_kind, want_exc)
        assert message.startswith(want_message)
    assert all(x["error"] == f"{x['exception']}: {x['message']}" for x in failed)
    # Each sits among the controller events in the order it happened.
    times = [x["virtual_time_ms"] for x in lines]
    assert times == sorted(times)
    summary = json.loads((out / "summary.json").read_text())
    assert len(summary["errors"]) == 3
    for text, (_, kind, exc, message) in zip(summary["errors"], EXPECTED, strict=True):
        assert text.startswith(f"{kind} at ") and f"failed: {exc}: {message}" in text
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert [w for w in warnings if "failed:" in w] == [f"kce: {e}" for e in summary["errors"]]
    assert all("\n" not in w for w in warnings)
    final = json.loads((out / "final_state.json").read_text())
    by_name = {(p["topic"], p["partition"]): p for p in final["partitions"]}
    assert ("t", 1) not in by_name and ("u", 1) not in by_name  # nothing was written
    assert by_name[("v", 0)]["replicas"] == [3, 1] and by_name[("v", 0)]["leader"] == 1
    assert summary["model_violations"] == {"counts": {}, "examples": []}


BROKEN_STATE = """
name: broken-state
cluster:
  brokers: [{id: 1}, {id: 2}, {id: 3}]
  topics:
    # No assignment: Kafka's algorithm places the single replica, so the load-time checks
    # cannot see that the ISR below names a broker that holds no replica.
    - {name: t, partitions: 1, replication_factor: 1}
  state:
    partitions:
      - {topic: t, partition: 0, leader: 1, isr: [1, 2, 3], leader_epoch: 0, zk_version: 0, controller_epoch: 1}
until: 1s
"""


def test_starting_state_that_breaks_the_model_exits_2_with_every_problem(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(BROKEN_STATE)
    out = tmp_path / "out"
    assert main(["run", str(path), "--out", str(out)]) == EXIT_INVALID
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.startswith(f"kce: {path}: the starting cluster breaks the model: ")
    assert "problem(s) in the partitions table:" in err
    assert (
        "isr_not_subset_of_replicas: 1 partition(s) — ISR members must be assigned replicas" in err
    )
    assert "partition(s): t-0: isr_not_subset_of_replicas" in err.splitlines()[-1]
    assert not out.exists()  # refused before anything was written
