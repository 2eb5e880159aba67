"""Loss accounting against what the cluster acknowledged, per the producer's ``acks``
(``ReplicaManager.appendRecords``, ``Partition.appendRecordsToLeader``, ``DelayedProduce``):

* acks=all: the leader refuses the write while the ISR is below ``min.insync.replicas``
  (``NotEnoughReplicasException``) and acknowledges it once the high watermark passes it;
* acks=1: acknowledged on the leader's append; acks=0: never acknowledged;
* a partition with no leader that serves takes nothing (``NotLeaderOrFollower``).

Acknowledged records are lost only when the log of the partition's next leader lacks them: a
power loss that shortens the old leader's log loses nothing a follower in the ISR still holds.
End to end through ``kce run``, on the driver and with the tables in Spark (the rows against the
Spark transforms on random tables: ``test_replication_table``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from spark_app.runner import run
from spark_app.scenario import scenario_from_data

PATHS = pytest.mark.parametrize("driver_rows", [10_000, 0], ids=["driver", "spark"])


def _topic(name: str, replicas: list[int], **config: str) -> dict[str, Any]:
    return {
        "name": name,
        "partitions": 1,
        "replication_factor": len(replicas),
        "assignment": {"0": replicas},
        "config": config,
    }


def _run(
    spark: SparkSession,
    tmp_path: Path,
    topics: list[dict[str, Any]],
    events: list[dict[str, Any]],
    driver_rows: int,
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    data = {
        "name": "loss",
        "kafka_version": "2.8",
        "config": {"auto.leader.rebalance.enable": False},
        "cluster": {"brokers": [{"id": 1}, {"id": 2}], "topics": topics, "controller": 1},
        "events": events,
        # Past the session timeout (18 s) of a broker that lost power: the controller has noticed
        # it, it has restarted, and a controller holds the final table.
        "until": "30s",
        "execution": {"driver_rows": driver_rows},
    }
    summary = run(spark, scenario_from_data(data), tmp_path)
    final = json.loads((tmp_path / "final_state.json").read_text())["partitions"]
    return summary, {p["topic"]: p for p in final}


@PATHS
def test_a_power_loss_of_the_leader_alone_loses_nothing_its_isr_follower_holds(
    spark: SparkSession, tmp_path: Path, driver_rows: int
) -> None:
    """100 records acknowledged by both replicas, none flushed yet (the page cache writes back
    at 30 s). Leader 1 loses power and comes back empty; follower 2, in the ISR, leads with all
    100: nothing acknowledged is lost, and 1 copies them back as a follower."""
    events = [
        {"at": "1s", "type": "produce", "topic": "events", "records": 100},
        {"at": "2s", "type": "power_loss", "brokers": [1]},
    ]
    summary, final = _run(spark, tmp_path, [_topic("events", [1, 2])], events, driver_rows)
    p = final["events"]
    assert p["leader"] == 2 and summary["unclean_elections"] == 0
    assert summary["acked_records_lost"] == 0 and p["acked_records_lost"] == 0
    assert p["log_end_offsets"] == {"1": 100, "2": 100}


@PATHS
def test_acks_decide_what_is_acknowledged_refused_or_not_served(
    spark: SparkSession, tmp_path: Path, driver_rows: int
) -> None:
    """``solo`` (broker 1 alone): 10 records at each acks, then a power loss empties its log:
    acks=all (passed by the high watermark) and acks=1 were acknowledged, acks=0 never, so 20
    are lost of the 30. ``strict`` (broker 2 alone, min.insync.replicas 2): acks=all is refused,
    acks=1 taken; once broker 2 fails, a write finds no leader."""
    topics = [_topic("solo", [1]), _topic("strict", [2], **{"min.insync.replicas": "2"})]
    events = [
        {"at": "1s", "type": "produce", "topic": "solo", "records": 10, "acks": "all"},
        {"at": "2s", "type": "produce", "topic": "solo", "records": 10, "acks": 1},
        {"at": "3s", "type": "produce", "topic": "solo", "records": 10, "acks": 0},
        {"at": "4s", "type": "power_loss", "brokers": [1]},
        {"at": "5s", "type": "produce", "topic": "strict", "records": 10, "acks": "all"},
        {"at": "5s", "type": "produce", "topic": "strict", "records": 5, "acks": 1},
        {"at": "6s", "type": "broker_failure", "brokers": [2]},
        {"at": "7s", "type": "produce", "topic": "strict", "records": 3, "acks": 1},
    ]
    summary, final = _run(spark, tmp_path, topics, events, driver_rows)
    assert final["solo"]["acked_records_lost"] == 20
    assert final["solo"]["log_end_offsets"] == {"1": 0}
    assert final["strict"]["log_end_offsets"] == {"2": 5}
    assert summary["acked_records_lost"] == 20
    assert summary["records_refused_not_enough_replicas"] == 10
    assert summary["records_without_leader"] == 3


@PATHS
def test_topic_flush_overrides_decide_what_a_power_loss_keeps(
    spark: SparkSession, tmp_path: Path, driver_rows: int
) -> None:
    """``flush.messages`` and ``flush.ms`` override the broker's ``log.flush.interval.*`` per
    topic (``LogConfig``; ``Log.append`` flushes every flush.messages records, ``LogManager``'s
    flusher every flush.ms). Broker 1 alone leads three topics and loses power at 2.5 s: the
    page cache (30 s) wrote nothing back, flush.messages 4 kept 8 of 10, flush.ms 1000 kept the
    10 written at 1 s (flushed at 2 s)."""
    topics = [
        _topic("cached", [1]),
        _topic("counted", [1], **{"flush.messages": "4"}),
        _topic("timed", [1], **{"flush.ms": "1000"}),
    ]
    events = [
        {"at": "1s", "type": "produce", "topic": "all", "records": 10, "acks": 1},
        {"at": "2500ms", "type": "power_loss", "brokers": [1]},
    ]
    summary, final = _run(spark, tmp_path, topics, events, driver_rows)
    kept = {name: p["log_end_offsets"]["1"] for name, p in final.items()}
    assert kept == {"cached": 0, "counted": 8, "timed": 10}
    assert summary["acked_records_lost"] == 10 + 2
