"""Topic, reassignment, ISR and log-directory events end to end through ``kce run``."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from spark_app.runner import run
from spark_app.scenario import scenario_from_data

SCENARIO = {
    "name": "handlers",
    "seed": 3,
    "config": {"auto.leader.rebalance.enable": False},
    "cluster": {
        "brokers": [{"id": 1}, {"id": 2}, {"id": 3}, {"id": 4}],
        "topics": [
            {
                "name": "t",
                "partitions": 2,
                "replication_factor": 3,
                "assignment": {"0": [1, 2, 3], "1": [2, 3, 4]},
            }
        ],
        "controller": 1,
    },
    "events": [
        {"at": "1s", "type": "create_topic",
         "topic": {"name": "a", "partitions": 2, "replication_factor": 2,
                   "assignment": {"0": [3, 4], "1": [4, 1]}}},
        {"at": "2s", "type": "add_partitions", "topic": "t", "total": 3,
         "assignment": {"2": [3, 4, 1]}},
        {"at": "3s", "type": "delete_topic", "topic": "a"},
        {"at": "4s", "type": "reassign_partitions", "via": "api",
         "plan": {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [4, 2, 3]}]}},
        {"at": "6s", "type": "isr_change", "topic": "t", "partition": 1, "isr": [3, 2]},
        {"at": "8s", "type": "log_dir_failure", "broker": 3},
        {"at": "9s", "type": "reassign_partitions", "via": "zk",
         "plan": {"version": 1, "partitions": [{"topic": "t", "partition": 1, "replicas": [1, 2, 4]}]}},
    ],
    "until": "20s",
}  # fmt: skip


def test_topics_reassignments_isr_and_log_dirs_end_to_end(
    spark: SparkSession, tmp_path: Path, caplog: pytest.LogCaptureFixture, execution: str | None
) -> None:
    caplog.set_level(logging.INFO, logger="controller.commit.generation_commits")
    summary = run(spark, scenario_from_data(SCENARIO), tmp_path)
    assert summary["errors"] == []
    final = json.loads((tmp_path / "final_state.json").read_text())
    got = {
        p["partition"]: (p["replicas"], p["adding_replicas"], p["removing_replicas"], p["isr"],
                         p["leader"], p["state"])
        for p in final["partitions"]
    }  # fmt: skip
    assert got == {
        # API reassignment: 4 catches up, 1 (the leader) is removed, 4 leads; 3's log dir fails.
        0: ([4, 2, 3], [], [], [2, 4], 4, "OnlinePartition"),
        # The leader's ISR write ([3, 2]), 4 catches up again, 3 goes offline, then the ZK
        # reassignment adds 1 (caught up) and removes 3; leader 2 stays.
        1: ([1, 2, 4], [], [], [2, 4, 1], 2, "OnlinePartition"),
        # Added partition; its leader 3 loses its log dir: 4 is elected from the ISR.
        2: ([3, 4, 1], [], [], [4, 1], 4, "OnlinePartition"),
    }
    if execution == "spark":
        # Each move widened the Spark table to 4 positions; each completion narrowed it back.
        narrowed = [r for r in caplog.records if "narrows from 4 to 3" in r.getMessage()]
        assert len(narrowed) == 2
    assert final["topics"] == ["t"]  # "a" was deleted
    assert {r["topic"] for r in final["replicas"]} == {"t"}
    epochs = {p["partition"]: (p["leader_epoch"], p["zk_version"]) for p in final["partitions"]}
    assert all(zk >= epoch > 0 for epoch, zk in epochs.values())
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    kinds = {e["type"] for e in events}
    assert {
        "TopicChange", "PartitionModifications", "TopicDeletion",
        "TopicDeletionStopReplicaResponseReceived", "ApiPartitionReassignment",
        "ZkPartitionReassignment", "AlterIsrReceived", "LogDirEventNotification",
    } <= kinds  # fmt: skip
    deletion = next(e for e in events if e["type"] == "TopicDeletion" and e["commits"])
    assert deletion["requests"]["StopReplica_deletes"] == 4  # both replicas of both partitions
    metrics = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert metrics[-1]["global_topic_count"] == 1 and metrics[-1]["topics_to_delete_count"] == 0
    assert any(m["topics_to_delete_count"] == 1 for m in metrics)
    lines = (tmp_path / "state-change.log").read_text().splitlines()
    assert any("Changed partition a-0 state from" in line for line in lines)
    assert spark.read.parquet(str(tmp_path / "state-change")).count() == len(lines)
