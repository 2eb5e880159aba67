"""Kafka 2.8's own controller test cases (``ControllerIntegrationTest``, ``ReassignPartitions``
and ``AdminZkClient`` tests), played as scenarios through ``kce run``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from pyspark.sql import SparkSession

from controller.partition_store import EmulatedEnsemble
from controller.zk.paths import TopicZNode
from spark_app.runner import run
from spark_app.scenario import scenario_from_data

SCENARIOS = Path(__file__).resolve().parent.parent / "configs" / "scenarios"


def _final(spark: SparkSession, scenario: dict[str, Any], out: Path) -> dict[str, Any]:
    summary = run(spark, scenario_from_data(scenario), out)
    assert summary["errors"] == []
    return json.loads((out / "final_state.json").read_text())


def _partitions(final: dict[str, Any]) -> dict[tuple[str, int], dict[str, Any]]:
    return {(p["topic"], p["partition"]): p for p in final["partitions"]}


def _rebalance_scenario(reassign: bool) -> dict[str, Any]:
    """Broker 1 bounces, so ``t-0`` is led by 2, off its preferred leader 1; the auto leader
    rebalance checks every 10 s. With ``reassign``, ``u-0`` moves to broker 4, which is down (the
    ZooKeeper path accepts an offline target):
    the reassignment stays in flight for the whole run."""
    events: list[dict[str, Any]] = [
        {"at": "1s", "type": "broker_failure", "brokers": [1]},
        {"at": "2s", "type": "broker_startup", "brokers": [1]},
    ]
    if reassign:
        events.append(
            {"at": "3s", "type": "reassign_partitions", "via": "zk",
             "plan": {"version": 1, "partitions": [{"topic": "u", "partition": 0,
                                                      "replicas": [4, 2]}]}}
        )  # fmt: skip
    return {
        "name": "rebalance-during-reassignment",
        "config": {"leader.imbalance.check.interval.seconds": 10},
        "cluster": {
            "brokers": [{"id": 1}, {"id": 2}, {"id": 3}, {"id": 4}],
            "live_brokers": [1, 2, 3],
            "topics": [
                {
                    "name": "t",
                    "partitions": 1,
                    "replication_factor": 2,
                    "assignment": {"0": [1, 2]},
                },
                {
                    "name": "u",
                    "partitions": 1,
                    "replication_factor": 2,
                    "assignment": {"0": [2, 3]},
                },
            ],
            "controller": 3,
        },
        "events": events,
        "until": "60s",
    }


@pytest.mark.parametrize("reassign", [False, True])
def test_auto_leader_rebalance_skipped_while_any_partition_is_reassigned(
    spark: SparkSession, tmp_path: Path, reassign: bool
) -> None:
    """Kafka 2.6-3.3 (``checkAndTriggerAutoLeaderRebalance``): no preferred election while
    ``partitionsBeingReassigned`` is non-empty, even for partitions not being reassigned."""
    final = _partitions(_final(spark, _rebalance_scenario(reassign), tmp_path))
    assert final[("u", 0)]["adding_replicas"] == ([4] if reassign else [])
    assert final[("t", 0)]["leader"] == (2 if reassign else 1)


def test_partition_reassignment_resumes_after_replica_comes_online(
    spark: SparkSession, tmp_path: Path
) -> None:
    """``ControllerIntegrationTest.testPartitionReassignmentResumesAfterReplicaComesOnline``:
    the target broker is down when the reassignment arrives (phase A only, leader epoch 1);
    when it starts, ``onPartitionReassignment`` runs again (epoch 2), and completion elects it
    (epoch 3) and drops the old replica from the ISR (epoch 4)."""
    # Shipped as an example of Kafka's own cases restated.
    scenario = yaml.safe_load((SCENARIOS / "reassignment-resumes.yaml").read_text())
    p = _partitions(_final(spark, scenario, tmp_path))[("t", 0)]
    got = (p["replicas"], p["adding_replicas"], p["leader"], p["isr"], p["leader_epoch"])
    assert got == ([2], [], 2, [2], 4)


class _KeptEnsemble(EmulatedEnsemble):
    """The emulated ZooKeeper, left open after the run so that the test can read it."""

    def close(self) -> None:
        pass


def _topic_znodes(ensemble: EmulatedEnsemble, topics: list[str]) -> dict[str, dict[str, Any]]:
    client = ensemble.client()
    return {t: json.loads(client.get(TopicZNode.path(t))[0]) for t in topics}


def _topic_id_scenario(ibp: str) -> dict[str, Any]:
    return {
        "name": "topic-ids",
        "seed": 11,
        "config": {"inter.broker.protocol.version": ibp, "auto.leader.rebalance.enable": False},
        "cluster": {
            "brokers": [{"id": 1}, {"id": 2}, {"id": 3}],
            "topics": [
                {"name": "t", "partitions": 2, "replication_factor": 2,
                 "assignment": {"0": [1, 2], "1": [2, 3]}},
            ],
            "controller": 1,
        },
        "events": [
            {"at": "1s", "type": "create_topic",
             "topic": {"name": "u", "partitions": 1, "replication_factor": 2,
                       "assignment": {"0": [3, 1]}}},
            {"at": "2s", "type": "reassign_partitions", "via": "api",
             "plan": {"version": 1, "partitions": [{"topic": "t", "partition": 0,
                                                      "replicas": [3, 2]}]}},
            {"at": "4s", "type": "broker_failure", "brokers": [1]},
        ],
        "until": "10s",
    }  # fmt: skip


def test_topic_ids_assigned_on_failover_and_topic_change_at_ibp_2_8(
    spark: SparkSession, tmp_path: Path
) -> None:
    """IBP 2.8-IV0 (spec §3.3 d, §4.3): the controller gives every topic without an id a random
    one, on failover (``t``) and on ``TopicChange`` (``u``), written back to the topic znode; a
    reassignment's rewrite keeps it, and the next controller (broker 1 fails) keeps it too."""
    ensemble = _KeptEnsemble()
    run(spark, scenario_from_data(_topic_id_scenario("2.8")), tmp_path / "a", ensemble)
    znodes = _topic_znodes(ensemble, ["t", "u"])
    ids = {t: z["topic_id"] for t, z in znodes.items()}
    assert all(len(i) == 22 and "=" not in i for i in ids.values())
    assert ids["t"] != ids["u"]
    assert znodes["t"]["version"] == 3
    assert znodes["t"]["partitions"]["0"] == [3, 2]  # the reassignment's rewrite
    # The same seed draws the same ids.
    again = _KeptEnsemble()
    run(spark, scenario_from_data(_topic_id_scenario("2.8")), tmp_path / "b", again)
    assert {t: z["topic_id"] for t, z in _topic_znodes(again, ["t", "u"]).items()} == ids


def test_no_topic_ids_below_ibp_2_8(spark: SparkSession, tmp_path: Path) -> None:
    ensemble = _KeptEnsemble()
    run(spark, scenario_from_data(_topic_id_scenario("2.7")), tmp_path, ensemble)
    assert all("topic_id" not in z for z in _topic_znodes(ensemble, ["t", "u"]).values())
