"""How the controller learns of a crash: at once, or when the broker's ZooKeeper session expires.

Kafka's controller sees a broker die only through ZooKeeper: its ephemeral ``/brokers/ids/<id>``
goes when its session ends, and the ``BrokerChange`` handler fires (spec §3.6, §8.2; Kafka's
``BrokerChangeHandler`` on ``/brokers/ids``). A clean stop closes the session at once; a crash or
power-off leaves it until ``zookeeper.session.timeout.ms`` (18 s from Kafka 2.5, KIP-537) passes
without a heartbeat. In that gap the dead broker still leads and sits in ISRs, the controller does
nothing, and its partitions take no records: the brokers' gauges count them offline
(``leader_down_partitions``) and count ISR members only while they are up.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from spark_app.runner import run
from spark_app.scenario import scenario_from_data

pytestmark = pytest.mark.scenario

GAP_MS = 18_000  # zookeeper.session.timeout.ms, Kafka 2.5+ default


def _scenario(*events: dict[str, Any], until: str = "30s") -> dict[str, Any]:
    return {
        "name": "crash-detection",
        "config": {"auto.leader.rebalance.enable": False, "min.insync.replicas": 3},
        "cluster": {
            "brokers": [{"id": 1}, {"id": 2}, {"id": 3}],
            "topics": [
                {"name": "t", "partitions": 3, "replication_factor": 3,
                 "assignment": {"0": [1, 2, 3], "1": [2, 3, 1], "2": [3, 1, 2]}},
            ],
            "controller": 1,
        },
        "events": [{"at": "1s", "type": "set_produce_rate", "topic": "t", "records_per_s": 10},
                   *events],
        "until": until,
    }  # fmt: skip


def _play(
    spark: SparkSession, data: dict[str, Any], out: Path
) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """The summary, the events and the metric lines of a run."""
    summary = run(spark, scenario_from_data(data), out)
    events = [json.loads(x) for x in (out / "events.jsonl").read_text().splitlines()]
    metrics = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    return summary, events, metrics


def _times(events: list[dict[str, Any]], kind: str, controller: int | None = None) -> list[int]:
    return [
        e["virtual_time_ms"]
        for e in events
        if e.get("type") == kind and controller in (None, e.get("controller"))
    ]


def _brokers_at(metrics: list[dict[str, Any]], at_ms: int) -> dict[str, Any]:
    """The brokers' gauges as they stood at ``at_ms`` (the last line at or before it)."""
    lines = [m for m in metrics if m["source"] == "brokers" and m["virtual_time_ms"] <= at_ms]
    return lines[-1]


def test_a_crash_is_noticed_when_the_session_expires_and_its_leaders_serve_nothing_meanwhile(
    spark: SparkSession, tmp_path: Path
) -> None:
    crash = {"at": "10s", "type": "broker_failure", "brokers": [2]}
    timed, events, metrics = _play(
        spark, _scenario({**crash, "detection": "session_timeout"}), tmp_path / "timed"
    )
    # The controller (broker 1) handles BrokerChange only when /brokers/ids/2 goes, at 28 s.
    assert _times(events, "BrokerChange") == [10_000 + GAP_MS]
    # Its own OfflinePartitionsCount never sees the gap: to Kafka's controller, 2 was alive.
    controller = [m for m in metrics if m["source"] == "controller"]
    assert all(m["offline_partitions_count"] == 0 for m in controller)
    # The brokers' view: t-1's leader is down (offline, not yet noticed); t-0 and t-2 keep 2
    # ISR members up of the 3 min.insync.replicas asks, so producers with acks=all are refused.
    gap = _brokers_at(metrics, 27_999)
    assert (gap["OfflinePartitionsCount"], gap["leader_down_partitions"]) == (1, 1)
    assert (gap["UnderMinIsrPartitionCount"], gap["UnderReplicatedPartitions"]) == (2, 2)
    after = _brokers_at(metrics, 10_000 + GAP_MS)
    assert (after["OfflinePartitionsCount"], after["leader_down_partitions"]) == (0, 0)
    assert after["UnderMinIsrPartitionCount"] == 3  # t-1 led by 3 now, ISR [3, 1]
    assert timed["offline_partition_seconds"] == timed["leader_down_partition_seconds"] == 18.0
    assert timed["under_min_isr_partition_seconds"] == 2 * 18.0 + 3 * 2.0
    # Noticed at once (the default, a clean stop of the process), nothing is ever offline.
    now, events, metrics = _play(spark, _scenario(crash), tmp_path / "immediate")
    assert _times(events, "BrokerChange") == [10_000]
    assert now["offline_partition_seconds"] == now["leader_down_partition_seconds"] == 0.0
    assert now["under_min_isr_partition_seconds"] == 3 * 20.0


@pytest.mark.parametrize(
    "crash",
    [
        {"type": "power_loss", "brokers": [2]},
        {"type": "broker_restart", "brokers": [2], "clean": False},
    ],
    ids=["power_loss", "unclean_restart"],
)
def test_a_crashed_broker_registers_again_only_after_its_old_session_expired(
    spark: SparkSession, tmp_path: Path, crash: dict[str, Any]
) -> None:
    # Kafka's registerBroker (KafkaZkClient.checkedEphemeralCreate) fails with NodeExists while
    # the old session's /brokers/ids/2 is there, so the broker is back at 28 s, not at 10 s.
    summary, events, metrics = _play(spark, _scenario({"at": "10s", **crash}), tmp_path)
    back = 10_000 + GAP_MS
    assert _times(events, "BrokerChange") == [back, back]  # dead, then registered again
    assert _times(events, "Startup", controller=2) == [0, back]
    assert _brokers_at(metrics, back - 1)["leader_down_partitions"] == 1
    assert summary["leader_down_partition_seconds"] == 18.0
