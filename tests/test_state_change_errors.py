"""Transitions Kafka rejects or fails leave the state alone and become ERROR lines (spec §16.2)."""

from __future__ import annotations

import json
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from controller.commit.state_change_error_lines import error_lines
from spark_app.runner import run
from spark_app.scenario import scenario_from_data
from statemachines import partition_states as ps
from statemachines import replica_states as rs
from statemachines import schemas as s
from statemachines.brokers import BrokerSet, ClusterView
from statemachines.election import OfflinePartitionLeaderElectionStrategy
from statemachines.reference import Partition
from statemachines.state_change_errors import ERRORS
from tests.frames import compact_frame, partition_of

ME = "[Controller id=5 epoch=2] Controller 5 epoch 2"
ILLEGAL = "java.lang.IllegalStateException: "
FAILED = "kafka.common.StateChangeFailedException: "


def test_invalid_and_failed_transitions_accumulate_and_render_as_kafka_logs_them(
    spark: SparkSession,
) -> None:
    parts = [
        # Every replica dead: the offline election fails, the row stays Offline.
        Partition("a", 0, (3, 4), isr=(3,), leader=-1, state=ps.PartitionState.OfflinePartition),
        # Online: NonExistentPartition is not reachable from here (invalid).
        Partition("b", 1, (1, 2), isr=(1, 2), leader=1, leader_epoch=3),
    ]
    # b-1's leader has no replica state yet (NonExistentReplica), as after a failover's load.
    df, topics = compact_frame(spark, parts, {("b", 1, 1): rs.ReplicaState.NonExistentReplica})
    view = ClusterView(BrokerSet.of([1, 2]), controller_epoch=2)
    offline = F.col(s.STATE_CODE) == int(ps.PartitionState.OfflinePartition)
    elected = ps.handle_state_changes(
        df,
        offline,
        ps.PartitionState.OnlinePartition,
        view,
        OfflinePartitionLeaderElectionStrategy(),
    ).outcomes.select(*s.compact_columns(2), ERRORS)
    online_b = F.col(s.TOPIC_INDEX) == topics["b"]
    gone = ps.handle_state_changes(elected, online_b, ps.PartitionState.NonExistentPartition)
    # Replica 1 may become NewReplica but leads b-1, so it fails; replica 2 is Online, not
    # Offline, so it cannot start its deletion.
    new = rs.handle_state_changes(
        gone.outcomes, lambda b, _k: online_b & (b == 1), rs.ReplicaState.NewReplica
    ).outcomes
    started = rs.handle_state_changes(
        new, lambda b, _k: online_b & (b == 2), rs.ReplicaState.ReplicaDeletionStarted
    ).outcomes

    # Nothing changed: every transition was refused.
    names = {i: t for t, i in topics.items()}
    rows = started.orderBy(s.TOPIC_INDEX).collect()
    assert [partition_of(r, names, 2) for r in rows] == parts
    assert [len(r[ERRORS] or []) for r in rows] == [1, 3]

    frame = spark.createDataFrame(list(names.items()), "topic_index int, topic string")
    lines = error_lines(started, frame, controller_id=5, epoch=2, live=[2, 1])
    got = [
        (r.topic, r.partition, r.broker, r.level, r.line, r.exception)
        for r in lines.orderBy(
            s.TOPIC, s.PARTITION, F.col(s.BROKER).asc_nulls_first(), "step"
        ).collect()
    ]
    assert [g[:4] for g in got] == [
        ("a", 0, None, "ERROR"),
        ("b", 1, None, "ERROR"),
        ("b", 1, 1, "ERROR"),
        ("b", 1, 2, "ERROR"),
    ]
    assert [(line, exc) for *_, line, exc in got] == [
        (
            f"{ME} failed to change state for partition a-0 from OfflinePartition to "
            "OnlinePartition",
            f"{FAILED}Failed to elect leader for partition a-0 under strategy "
            "OfflinePartitionLeaderElectionStrategy(false)",
        ),
        (
            f"{ME} failed to change state for partition b-1 from OnlinePartition to "
            "NonExistentPartition",
            f"{ILLEGAL}Partition b-1 should be in one of OfflinePartition states before moving "
            "to NonExistentPartition state. Instead it is in OnlinePartition state",
        ),
        (
            # Kafka names OfflineReplica as the target of this failure.
            f"{ME} initiated state change of replica 1 for partition b-1 from NonExistentReplica "
            "to OfflineReplica failed",
            f"{FAILED}Replica 1 for partition b-1 cannot be moved to NewReplica state as it is "
            "being requested to become leader",
        ),
        (
            f"{ME} initiated state change of replica 2 for partition b-1 from OnlineReplica to "
            "ReplicaDeletionStarted failed",
            f"{ILLEGAL}Replica [Topic=b,Partition=1,Replica=2] should be in the OfflineReplica "
            "states before moving to ReplicaDeletionStarted state. Instead it is in "
            "OnlineReplica state",
        ),
    ]


SCENARIO = {
    "name": "refused",
    "seed": 1,
    "config": {"auto.leader.rebalance.enable": False},
    "cluster": {
        "brokers": [{"id": 1}, {"id": 2}, {"id": 3}],
        "topics": [
            {"name": "solo", "partitions": 1, "replication_factor": 1, "assignment": {"0": [3]}},
            {"name": "t", "partitions": 1, "replication_factor": 2, "assignment": {"0": [1, 2]}},
        ],
        "controller": 1,
    },
    "events": [
        {"at": "1s", "type": "broker_failure", "brokers": [3]},
        {"at": "2s", "type": "create_topic",
         "topic": {"name": "late", "partitions": 1, "replication_factor": 1,
                   "assignment": {"0": [3]}}},
    ],
    "until": "3s",
}  # fmt: skip


def test_a_run_logs_failed_elections_and_initialisations_as_errors(
    spark: SparkSession, tmp_path: Path
) -> None:
    summary = run(spark, scenario_from_data(SCENARIO), tmp_path)
    assert summary["errors"] == []
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    refused = {e["type"]: e["state_change_errors"] for e in events if e["state_change_errors"]}
    assert refused == {"BrokerChange": 1, "TopicChange": 1}
    text = (tmp_path / "state-change.log").read_text().splitlines()
    errors = [(line, text[i + 1]) for i, line in enumerate(text) if " ERROR " in line]
    me = "[Controller id=1 epoch=1] Controller 1 epoch 1"
    assert [(line.split("] ", 1)[1], exc) for line, exc in errors] == [
        (
            f"ERROR {me} failed to change state for partition solo-0 from OfflinePartition to "
            "OnlinePartition (state.change.logger)",
            f"{FAILED}Failed to elect leader for partition solo-0 under strategy "
            "OfflinePartitionLeaderElectionStrategy(false)",
        ),
        (
            f"ERROR {me} failed to change state for partition late-0 from NewPartition to "
            "OnlinePartition (state.change.logger)",
            f"{FAILED}Controller 1 epoch 1 encountered error during state change of partition late-0 from New "
            "to Online, assigned replicas are [3], live brokers are [Set(1, 2)]. No assigned "
            "replica is alive.",
        ),
    ]
    stored = spark.read.parquet(str(tmp_path / "state-change")).where("level = 'ERROR'")
    assert stored.count() == 2
    final = json.loads((tmp_path / "final_state.json").read_text())
    states = {p["topic"]: (p["leader"], p["state"]) for p in final["partitions"]}
    assert states == {
        "solo": (-1, "OfflinePartition"),
        "late": (-1, "NewPartition"),
        "t": (1, "OnlinePartition"),
    }
