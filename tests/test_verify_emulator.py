"""Regressions of the divergences ``kce verify`` found against real Kafka 2.8.2, on the emulator
alone (docs/fidelity.md): each test states what the real cluster did."""

from __future__ import annotations

from typing import Any

from pyspark.sql import SparkSession

from spark_app.scenario import Scenario
from verify.emulator_side import EmulatorSide

STATE = "/brokers/topics/orders/partitions/{}/state#{}"


def _scenario(events: list[dict[str, Any]]) -> Scenario:
    return Scenario.model_validate({
        "name": "regression",
        "kafka_version": "2.8",
        "config": {"zookeeper.session.timeout.ms": 6000, "auto.leader.rebalance.enable": False},
        "cluster": {
            "brokers": [{"id": 1}, {"id": 2}, {"id": 3}],
            "topics": [{"name": "orders", "partitions": 2, "replication_factor": 2,
                        "assignment": {"0": [1, 2], "1": [2, 3]}}],
            "controller": 1,
        },
        "events": events,
        "until": "30s",
    })  # fmt: skip


def test_the_controllers_expired_session_is_noticed_by_the_others_first(
    spark: SparkSession,
) -> None:
    """ZooKeeper expires a session on its own clock and fires the other brokers' watches then;
    the broker learns of it only once it reaches the server again (spec §3.6). Real Kafka 2.8.2
    (verify-core step 15): another broker wins ``/controller`` without the expired broker, whose
    leaderships its failover moves in two writes (``ReplicaStateMachine.startup`` takes the dead
    leader out of the ISR, leader -1; ``PartitionStateMachine.startup`` elects: two new leader
    epochs), then processes its return (it rejoins the ISR, same epoch)."""
    side = EmulatorSide(spark, _scenario([{"at": "10s", "type": "zk_session_expiry", "broker": 1}]))
    try:
        side.advance_to(20_000)
        snap = side.snapshot()
        assert side.controller() in (2, 3)
        assert snap["/controller_epoch"] == 2
        assert snap["/brokers/ids"] == [1, 2, 3]
        assert snap[STATE.format(0, "leader")] == 2
        assert snap[STATE.format(0, "leader_epoch")] == 2
        assert snap[STATE.format(0, "controller_epoch")] == 2
        assert snap[STATE.format(0, "isr")] == [2, 1]
        assert snap[STATE.format(1, "leader_epoch")] == 0  # untouched: broker 1 holds no replica
    finally:
        side.close()


def test_refused_api_reassignments_are_answered_as_the_admin_client_reads_them(
    spark: SparkSession,
) -> None:
    """``KafkaController.validateReplicas``: a target with a replica not alive is
    INVALID_REPLICA_ASSIGNMENT; a cancel with nothing in flight is NO_REASSIGNMENT_IN_PROGRESS
    (real Kafka 2.8.2 answered both so in verify-core steps 3 and 4, the tree unchanged)."""
    move = {"version": 1, "partitions": [{"topic": "orders", "partition": 0, "replicas": [3, 1]}]}
    side = EmulatorSide(spark, _scenario([
        {"at": "1s", "type": "broker_failure", "brokers": [3]},
        {"at": "5s", "type": "reassign_partitions", "via": "api", "plan": move},
        {"at": "6s", "type": "cancel_reassignment",
         "partitions": [{"topic": "orders", "partition": 1}]},
    ]))  # fmt: skip
    try:
        assert side.advance_to(4_000) == []
        assert side.advance_to(5_000) == ["orders-0: INVALID_REPLICA_ASSIGNMENT"]
        assert side.snapshot()["/brokers/topics/orders#adding_replicas"] == {}
        assert side.advance_to(6_000) == ["orders-1: NO_REASSIGNMENT_IN_PROGRESS"]
    finally:
        side.close()


def test_a_new_controller_leaves_a_deletion_waiting_for_a_dead_broker_alone(
    spark: SparkSession,
) -> None:
    """``KafkaController.fetchTopicDeletionsInProgress``: a queued topic with a replica on a dead
    broker is ineligible before the failover's ``tryTopicDeletion``, so the new controller does
    not start its deletion again (no ``OfflineReplica`` ISR write). Real Kafka 2.8.2 left the
    state znode as the old controller's deletion had (leader -1, ISR [1]: docs/fidelity.md)."""
    scenario = Scenario.model_validate({
        "name": "regression",
        "kafka_version": "2.8",
        "config": {"zookeeper.session.timeout.ms": 6000, "auto.leader.rebalance.enable": False},
        "cluster": {
            "brokers": [{"id": 1}, {"id": 2}, {"id": 3}],
            "topics": [{"name": "audit", "partitions": 1, "replication_factor": 2,
                        "assignment": {"0": [3, 1]}}],
            "controller": 2,
        },
        "events": [
            {"at": "1s", "type": "broker_failure", "brokers": [3]},
            {"at": "2s", "type": "delete_topic", "topic": "audit"},
            {"at": "3s", "type": "zk_session_expiry", "broker": 2},
        ],
        "until": "10s",
    })  # fmt: skip
    side = EmulatorSide(spark, scenario)
    try:
        side.advance_to(2_500)
        before = side.snapshot()
        side.advance_to(10_000)
        after = side.snapshot()
        assert after["/controller_epoch"] == 2
        assert after["/admin/delete_topics"] == ["audit"]
        state = "/brokers/topics/audit/partitions/0/state#"
        assert before[state + "leader"] == -1 and before[state + "isr"] == [1]
        for field in ("leader", "isr", "leader_epoch", "controller_epoch"):
            assert after[state + field] == before[state + field], field
    finally:
        side.close()
