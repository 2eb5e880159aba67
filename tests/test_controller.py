"""The controller end to end on the in-memory ZooKeeper: election, broker events, failover.

Follows spec Appendix B (three brokers 1, 2, 3; controller on 1; topic t with assignment
{0: [2, 3, 1]}); the partition state is checked both in the committed table and in ZooKeeper.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from controller.emulation.cluster import EmulatedCluster
from controller.events import controller_events as ev
from controller.kafka_controller import KafkaController
from controller.partition_store import EmulatedEnsemble, bootstrap_cluster
from controller.records import ControllerSettings, EventRecord
from controller.zk import admin_zk_client as admin
from controller.zk.errors import ControllerMovedError
from controller.zk.fencing import FencedWriter, SetData
from controller.zk.paths import (
    ControllerEpochZNode,
    ControllerZNode,
    PartitionStateZNode,
    TopicZNode,
)
from statemachines import schemas as s
from statemachines.brokers import BrokerSet
from statemachines.replica_states import ReplicaState
from statemachines.replica_states import handle_state_changes as replica_changes
from statemachines.state_change_trail import REQUEST_BATCH, TRAIL, batch_number, decode
from tests.test_checkpoint import (
    LONG_MAX_DIGITS,
    checkpointed_rdd_id,
    estimate_digits,
    persisted_rdd_ids,
)

T0 = ("t", 0, [2, 3, 1], [], [], [2, 3, 1], 2, 0, 0, 1, "OnlinePartition")
U0 = ("u", 0, [3], [], [], [3], 3, 0, 0, 1, "OnlinePartition")


@pytest.fixture
def cluster(spark: SparkSession) -> Iterator[tuple[EmulatedCluster, list[EventRecord]]]:
    ensemble = EmulatedEnsemble()
    records: list[EventRecord] = []
    settings = ControllerSettings(auto_leader_rebalance_enable=False)
    c = EmulatedCluster(spark, ensemble, settings, on_event=records.append)
    partitions = spark.createDataFrame([T0, U0], s.PARTITIONS_SCHEMA)
    bootstrap_cluster(c.admin, {}, partitions, c.states)
    for b in (1, 2, 3):
        c.add_broker(b)
    for b in (1, 2, 3):  # all registered; then broker 1's controller module starts first
        c.start_broker(b, start_controller=False)
    for b in (1, 2, 3):
        c.brokers[b].controller.startup()
        c.drain()
    yield c, records
    ensemble.close()


def _zk_state(c: EmulatedCluster, topic: str, p: int) -> tuple[int, int, list[int], int, int]:
    client = next(b.zk for b in c.running())
    data, stat = client.get(PartitionStateZNode.path(topic, p))
    st = PartitionStateZNode.decode(data, "")
    return st.leader, st.leader_epoch, list(st.isr), st.controller_epoch, stat.version


def _table(c: EmulatedCluster) -> dict[str, tuple]:
    ctrl = c.active_controller()
    assert ctrl is not None and ctrl.ctx.partitions is not None
    names = {t.index: n for n, t in ctrl.ctx.topics.items()}
    out = {}
    for r in ctrl.ctx.partitions.collect():
        isr = [r[f"isr_{k}"] for k in range(3) if f"isr_{k}" in r and r[f"isr_{k}"] != -1]
        out[f"{names[r.topic_index]}-{r.partition}"] = (r.leader, r.leader_epoch, isr, r.zk_version)
    return out


def test_first_controller_wins_with_epoch_one(cluster: tuple) -> None:
    c, records = cluster
    ctrl = c.active_controller()
    assert ctrl is not None and ctrl.broker_id == 1 and ctrl.ctx.epoch == 1
    data, _ = c.brokers[2].zk.get(ControllerZNode.path())
    assert ControllerZNode.decode(data).brokerid == 1
    data, stat = c.brokers[2].zk.get(ControllerEpochZNode.path())
    assert ControllerEpochZNode.decode(data) == 1 and stat.version == 1
    assert all(not b.controller.is_active for b in c.brokers.values() if b.id != 1)
    assert next(r.event for r in records if r.controller_id == 1) == "Startup"


def test_broker_failure_then_controlled_shutdown_follow_appendix_b(cluster: tuple) -> None:
    c, records = cluster
    c.crash(2)  # B.2: broker 2 (leader of t-0) crashes
    c.drain()
    assert _table(c)["t-0"] == (3, 1, [3, 1], 1)
    assert _zk_state(c, "t", 0) == (3, 1, [3, 1], 1, 1)
    change = [r for r in records if r.event == "BrokerChange" and r.controller_id == 1][-1]
    assert change.counters["elected"] == 1 and change.failed is None
    assert change.gauges is not None and change.gauges.offline_partitions_count == 0
    # B.2's batches (§15.1): the election's LeaderAndIsr to 3 and 1, then the same state again
    # with the ISR removal of 2's replica; an UpdateMetadata to both live brokers with each.
    # Broker 2's StopReplica is dropped: it is dead.
    assert change.requests == {
        "LeaderAndIsr": 4,
        "LeaderAndIsr_partitions": 4,
        "UpdateMetadata": 4,
        "UpdateMetadata_partitions": 4,
        "StopReplica": 0,
        "StopReplica_partitions": 0,
        "StopReplica_deletes": 0,
    }

    # B.4 (on broker 3, now the leader): the controlled-shutdown election moves leadership to 1.
    remaining = c.controlled_shutdown(3)
    c.drain()
    assert remaining == 0
    table = _table(c)
    assert table["t-0"][:3] == (1, 2, [1])
    assert _zk_state(c, "t", 0)[:3] == (1, 2, [1])
    # u-0 (RF 1 on broker 3) is untouched by the shutdown and goes offline when 3 exits.
    assert table["u-0"][0] == -1
    ctrl = c.active_controller()
    assert ctrl is not None
    last = [r for r in records if r.controller_id == 1][-1]
    assert last.gauges is not None and last.gauges.offline_partitions_count == 1


def test_controller_session_expiry_moves_the_controller_and_fences_the_zombie(
    cluster: tuple,
) -> None:
    c, _ = cluster
    old_version = c.active_controller().ctx.epoch_zk_version
    c.expire_session(1)
    c.drain()
    ctrl = c.active_controller()
    assert ctrl is not None and ctrl.broker_id in (1, 2, 3) and ctrl.ctx.epoch == 2
    assert _table(c)["t-0"][:3] == (2, 0, [2, 3, 1])  # failover reloads the same state
    # A write fenced with the deposed controller's epoch version is rejected.
    with pytest.raises(ControllerMovedError):
        FencedWriter(c.brokers[2].zk, old_version).multi(
            [SetData(PartitionStateZNode.path("t", 0), b"{}")]
        )


def test_queued_alter_isr_requests_coalesce_while_their_partitions_are_disjoint(
    cluster: tuple,
) -> None:
    c, records = cluster
    active = c.active_controller()
    replies: list[tuple[str, object]] = []

    def send(name: str, leader: int, tp: ev.TopicPartition, item: ev.AlterIsrItem) -> None:
        epoch = c.brokers[leader].epoch
        callback = lambda reply: replies.append((name, reply))  # noqa: E731
        active.events.put(ev.AlterIsrReceived(leader, epoch, {tp: item}, callback))

    t0, u0 = ev.TopicPartition("t", 0), ev.TopicPartition("u", 0)
    mark = len(records)
    send("shrink t-0", 2, t0, ev.AlterIsrItem(0, (2, 3), 0))
    send("u-0 as is", 3, u0, ev.AlterIsrItem(0, (3,), 0))
    # Same partition as the first: it must see the first one's write (version 1 by now).
    send("stale t-0", 2, t0, ev.AlterIsrItem(0, (2,), 0))
    send("unknown", 3, ev.TopicPartition("nope", 0), ev.AlterIsrItem(0, (3,), 0))
    active.events.run_until_idle()

    assert replies == [
        ("shrink t-0", {t0: "NONE"}),
        ("u-0 as is", {u0: "NONE"}),
        ("stale t-0", {t0: "INVALID_UPDATE_VERSION"}),
        ("unknown", {ev.TopicPartition("nope", 0): "UNKNOWN_TOPIC_OR_PARTITION"}),
    ]
    passes = [r for r in records[mark:] if r.event == "AlterIsrReceived"]
    assert [r.counters.get("coalesced_events", 0) for r in passes] == [1, 1]
    assert [r.counters.get("isr_updated", 0) for r in passes] == [1, 0]
    assert _zk_state(c, "t", 0)[2:] == ([2, 3], 1, 1)


@pytest.mark.spark_path
def test_generations_and_the_zookeeper_table_keep_a_bounded_size_estimate(cluster: tuple) -> None:
    c, _ = cluster
    for _ in range(3):
        c.crash(3)
        c.drain()
        c.start_broker(3)
        c.drain()
    active = c.active_controller()
    assert active is not None and active.ctx.partitions is not None
    # Both tables are a base and a delta of recent changes over it, each checkpointed.
    assert isinstance(c.zookeeper, EmulatedEnsemble)
    generations, region = active.ctx.store, c.zookeeper.region
    assert generations.delta is not None and region.delta is not None
    assert estimate_digits(generations.base) <= LONG_MAX_DIGITS
    assert estimate_digits(generations.delta) <= LONG_MAX_DIGITS
    assert estimate_digits(region.base) <= LONG_MAX_DIGITS
    assert estimate_digits(region.delta) <= LONG_MAX_DIGITS


def _committed_blocks(c: EmulatedCluster) -> tuple[KafkaController, int]:
    """The active controller and the RDD id of its committed generation's blocks."""
    active = c.active_controller()
    assert active is not None and active.ctx.committed is not None
    return active, checkpointed_rdd_id(active.ctx.committed)


@pytest.mark.spark_path
def test_a_replaced_generation_frees_its_blocks_one_commit_later(
    cluster: tuple, spark: SparkSession
) -> None:
    c, _ = cluster
    active, first = _committed_blocks(c)
    assert first in persisted_rdd_ids(spark)
    c.crash(3)
    c.drain()
    c.start_broker(3)
    c.drain()
    held = persisted_rdd_ids(spark)
    assert first not in held
    assert checkpointed_rdd_id(active.ctx.committed) in held
    assert _table(c)["t-0"][0] == 2


@pytest.mark.spark_path
def test_a_deposed_controller_frees_the_blocks_of_its_tables(
    cluster: tuple, spark: SparkSession
) -> None:
    c, _ = cluster
    deposed, held = _committed_blocks(c)
    c.expire_session(deposed.broker_id)  # it resigns, then a failover (maybe its own) reloads
    c.drain()
    active = c.active_controller()
    assert active is not None and active.ctx.epoch == 2
    assert held not in persisted_rdd_ids(spark)
    assert _table(c)["t-0"][:3] == (2, 0, [2, 3, 1])


def test_bounced_broker_is_no_longer_shutting_down(cluster: tuple) -> None:
    """§8.3: a broker whose session expired and who registered again is failed, then started;
    Kafka's ``onBrokerFailure`` ends its controlled shutdown, so its new incarnation can lead."""
    c, _ = cluster
    ctrl = c.active_controller()
    assert ctrl is not None
    replies: list[tuple] = []
    ctrl.events.put(ev.ControlledShutdown(3, c.brokers[3].epoch, lambda *a: replies.append(a)))
    c.drain()
    assert replies and replies[0][0] == "NONE"
    assert 3 in ctrl.ctx.shutting_down
    c.expire_session(3)  # re-registers with a newer epoch before the controller looks
    c.drain()
    assert 3 in ctrl.ctx.live_brokers
    assert 3 not in ctrl.ctx.shutting_down


def test_bounced_broker_fails_its_replica_deletions_then_resumes_them(cluster: tuple) -> None:
    """§8.3, §9.5: broker 3 holds topic u's only replica and loses its session while that
    replica is ReplicaDeletionStarted (its StopReplica answer goes with the old session).
    ``onBrokerFailure`` fails the deletion (ReplicaDeletionIneligible); the return resumes it,
    sends StopReplica again, and the topic is deleted."""
    c, records = cluster
    ctrl = c.active_controller()
    assert ctrl is not None
    admin.request_topic_deletion(c.admin, "u")
    c.zookeeper.wait_idle()
    ctrl.events.run_until_idle(max_events=1)  # TopicDeletion: StopReplica(delete) to broker 3
    answered = ev.TopicDeletionStopReplicaResponseReceived
    lost = ctrl.events.take_queued(lambda e: isinstance(e, answered) and e.replica_id == 3)
    assert lost
    seen = len(records)
    c.expire_session(3)
    c.drain()
    # Failure, failed deletion, startup and resumed deletion: steps of one BrokerChange.
    change = next(r for r in records[seen:] if r.event == "BrokerChange" and r.controller_id == 1)
    assert change.failed is None and change.commits == 1
    assert "u" not in ctrl.ctx.topics
    assert not c.admin.exists(TopicZNode.path("u"))


def test_a_bounced_leader_is_failed_and_started_in_one_commit(cluster: tuple) -> None:
    """§8.3: the failure and the startup of a bounced broker are steps of one BrokerChange; the
    startup reads the rows the failure staged, and the event commits once with both steps'
    counters."""
    c, records = cluster
    c.expire_session(2)  # broker 2 leads t-0 and registers again with a newer epoch
    c.drain()
    change = [r for r in records if r.event == "BrokerChange" and r.controller_id == 1][-1]
    assert change.failed is None and change.commits == 1
    assert change.counters["elected"] == 1
    assert change.gauges is not None and change.gauges.offline_partitions_count == 0
    # Broker 3 leads from the election on; broker 2's new incarnation catches up afterwards.
    leader, epoch, isr, version = _table(c)["t-0"]
    assert (leader, epoch) == (3, 1)
    assert _zk_state(c, "t", 0) == (leader, epoch, isr, 1, version)


def test_an_event_whose_handler_fails_commits_nothing(
    cluster: tuple, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A BrokerChange that fails after its failure step was staged leaves the committed table and
    ZooKeeper as they were: an event's rows are committed all at once or not at all."""
    c, records = cluster
    ctrl = c.active_controller()
    assert ctrl is not None
    generation = ctrl.ctx.generation

    def broken(*_: object) -> None:
        raise RuntimeError("the step after the failure")

    monkeypatch.setattr(ctrl.deletion, "on_replicas_offline", broken)
    c.crash(2)
    c.drain()
    change = [r for r in records if r.event == "BrokerChange" and r.controller_id == 1][-1]
    assert change.failed == "RuntimeError: the step after the failure" and change.commits == 0
    assert ctrl.ctx.generation == generation
    assert _table(c)["t-0"] == (2, 0, [2, 3, 1], 0)
    assert _zk_state(c, "t", 0) == (2, 0, [2, 3, 1], 1, 0)


def test_each_step_of_an_event_numbers_its_request_batches_after_the_last(
    cluster: tuple,
) -> None:
    """Kafka sends a batch per state-machine call (§15.1): a step that reads what an earlier
    step of its event staged starts past that step's batches, on every row it reads, so the
    two steps' requests stay apart."""
    c, _ = cluster
    ctrl = c.active_controller()
    assert ctrl is not None
    committer = ctrl.committer
    committer.begin(EventRecord(1, "BrokerChange", "BrokerChange"))
    try:
        first = committer.table()
        offline = replica_changes(first, BrokerSet.of([2]), ReplicaState.OfflineReplica)
        committer.stage(offline.outcomes, "BrokerChange")
        second = committer.table()
        online = replica_changes(second, BrokerSet.of([2]), ReplicaState.OnlineReplica).outcomes
        rows = {r.topic_index: r for r in online.collect()}
    finally:
        committer.end()
    t0 = rows[ctrl.ctx.topics["t"].index][TRAIL]
    assert {r[REQUEST_BATCH] for r in rows.values()} == {65}
    online_, offline_ = ReplicaState.OnlineReplica, ReplicaState.OfflineReplica
    assert [decode(e) for e in t0] == [(2, online_, offline_), (2, offline_, online_)]
    assert [batch_number(e) for e in t0] == [1, 65]
