"""Faults on a real ZooKeeper server: outages, session expiry, zombie controllers, concurrent
admin tools, slow responses. Each run is held to an exact outcome: the final state of the same
work without the fault (the in-memory backend, uninterrupted), Kafka's epoch rules, and the
znodes themselves.
"""

from __future__ import annotations

import copy
import json
import queue
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from faults import DelayProxy, FaultyEnsemble, Outage, admin_tool, request, znode_tree
from kazoo.client import KazooClient
from pyspark.sql import SparkSession
from zk_server import ZooKeeperServer

from controller.events import controller_events as ev
from controller.kafka_controller import KafkaController
from controller.partition_store import EmulatedEnsemble, ServerEnsemble
from controller.zk.kazoo_client import KazooZkClient
from controller.zk.paths import ControllerZNode, PartitionStateZNode
from spark_app import cli, runner
from spark_app.runner import run
from spark_app.scenario import scenario_from_data
from statemachines.election_kinds import ElectionTrigger, ElectionType
from statemachines.partition_states import PartitionState
from statemachines.reference import Partition
from tests.controller_oracle import ClusterSpec, Harness, violations

pytestmark = pytest.mark.zk

# Long enough to outlast a restart of the server on a loaded machine (sessions survive a restart
# when their clients are back within it); within the server's 2..20 ticks of 500 ms.
SESSION_MS = 10_000
# Brokers 1-4, broker 2 the controller; broker 4 is down from 1 s to 6 s, so a reassignment onto
# it and the deletion of a topic with a replica on it stay in flight meanwhile. IBP 2.6: ISR
# changes go through ZooKeeper.
SCENARIO: dict[str, Any] = {
    "name": "zk-faults",
    "seed": 7,
    "config": {
        "auto.leader.rebalance.enable": False,
        "inter.broker.protocol.version": "2.6",
        "zookeeper.session.timeout.ms": SESSION_MS,
        "zookeeper.connection.timeout.ms": 20_000,
    },
    "cluster": {
        "brokers": [{"id": 1}, {"id": 2}, {"id": 3}, {"id": 4}],
        "topics": [
            {"name": "orders", "partitions": 3, "replication_factor": 2,
             "assignment": {"0": [1, 2], "1": [2, 3], "2": [3, 1]}},
            {"name": "audit", "partitions": 1, "replication_factor": 2,
             "assignment": {"0": [4, 1]}},
        ],
        "controller": 2,
    },
    "events": [
        {"at": "1s", "type": "broker_failure", "brokers": [4]},
        {"at": "2s", "type": "reassign_partitions", "via": "zk", "plan": {"version": 1, "partitions": [
            {"topic": "orders", "partition": 0, "replicas": [2, 3]},
            {"topic": "orders", "partition": 1, "replicas": [3, 4]}]}},
        {"at": "3s", "type": "delete_topic", "topic": "audit"},
        {"at": "4s", "type": "elect_leaders", "via": "zk", "election_type": "preferred",
         "partitions": "all"},
        {"at": "5s", "type": "isr_change", "topic": "orders", "partition": 2, "isr": [3]},
        {"at": "6s", "type": "broker_startup", "brokers": [4]},
    ],
    "until": "10s",
}  # fmt: skip


@pytest.fixture(scope="module")
def server() -> Iterator[ZooKeeperServer]:
    """A server of this module's own: the tests stop it."""
    zk = ZooKeeperServer(tick_ms=500).start()
    yield zk
    zk.stop()


def chroot(server: ZooKeeperServer) -> str:
    return f"{server.hosts}/faults-{uuid.uuid4().hex[:8]}"


def play(spark: SparkSession, data: dict[str, Any], out: Path, ensemble: Any) -> dict[str, Any]:
    summary = run(spark, scenario_from_data(data), out, ensemble)
    final = json.loads((out / "final_state.json").read_text())
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    return {"summary": summary, "final": final, "events": events}


@pytest.fixture(scope="module")
def baseline(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The scenario without faults, on the in-memory ZooKeeper."""
    return play(spark, SCENARIO, tmp_path_factory.mktemp("baseline"), EmulatedEnsemble())


def test_baseline_finishes_the_reassignment_and_the_deletion(baseline: dict[str, Any]) -> None:
    final = baseline["final"]
    assert baseline["summary"]["errors"] == []
    assert final["topics"] == ["orders"]
    got = {p["partition"]: (p["replicas"], p["isr"], p["leader"]) for p in final["partitions"]}
    assert got == {0: ([2, 3], [2, 3], 2), 1: ([3, 4], [3, 4], 3), 2: ([3, 1], [3, 1], 3)}


def test_server_restarts_mid_events_lose_no_request(
    spark: SparkSession, tmp_path: Path, server: ZooKeeperServer, baseline: dict[str, Any]
) -> None:
    # Down right after the reassignment znode is written, and again after the deletion request.
    outage = Outage(server, back_after_s=1.0)
    ensemble = FaultyEnsemble(
        chroot(server), {2000: outage, 3000: outage}, session_timeout=SESSION_MS / 1000,
        connection_timeout=20.0,
    )  # fmt: skip
    result = play(spark, SCENARIO, tmp_path, ensemble)
    outage.join()
    assert ensemble.fired == [2000, 3000]
    assert result["summary"]["errors"] == []
    assert result["final"] == baseline["final"]
    kinds = [e["type"] for e in result["events"]]
    assert kinds == [e["type"] for e in baseline["events"]]


def test_server_gone_for_good_ends_the_run_with_exit_2(
    tmp_path: Path,
    server: ZooKeeperServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    baseline: dict[str, Any],  # the Spark session is warm; the module's server is up
) -> None:
    data = copy.deepcopy(SCENARIO)
    data["config"]["zookeeper.connection.timeout.ms"] = 1500
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(json.dumps(data))
    outage = Outage(server, back_after_s=None)
    ensemble = FaultyEnsemble(
        chroot(server), {2000: outage}, session_timeout=SESSION_MS / 1000, connection_timeout=1.5
    )
    # The run's own ZooKeeper, with the fault scheduled in it.
    monkeypatch.setattr(runner, "open_zookeeper", lambda scenario, override: ensemble)
    try:
        code = cli.main(["run", str(scenario), "--out", str(tmp_path / "out")])
    finally:
        server.start()
    err = capsys.readouterr().err
    assert code == 2
    assert ensemble.fired == [2000]
    assert "Timed out waiting for connection" in err
    assert "unreachable for 1500 ms (zookeeper.connection.timeout.ms)" in err
    assert "Traceback" not in err


def test_slow_responses_change_nothing(
    spark: SparkSession, tmp_path: Path, server: ZooKeeperServer, baseline: dict[str, Any]
) -> None:
    # Every byte between the sessions and the server held 5 ms each way.
    proxy = DelayProxy(server.port, delay_s=0.005)
    try:
        path = chroot(server).replace(server.hosts, proxy.hosts)
        slow = play(spark, SCENARIO, tmp_path / "slow", FaultyEnsemble(path, {}))
    finally:
        proxy.close()
    assert proxy.chunks > 0
    assert slow["summary"]["errors"] == []
    assert slow["final"] == baseline["final"]
    assert [e["type"] for e in slow["events"]] == [e["type"] for e in baseline["events"]]


def without_epochs(final: dict[str, Any]) -> dict[str, Any]:
    """The work a run did (assignments, leaders, ISRs, states, topics, brokers), not the epochs
    and versions a failover adds to it."""
    epochs = ("leader_epoch", "zk_version", "controller_epoch")
    partitions = [{k: v for k, v in p.items() if k not in epochs} for p in final["partitions"]]
    return {**final, "partitions": partitions, "controller": None}


def test_controller_session_expiry_mid_reassignment_and_deletion_next_controller_finishes(
    spark: SparkSession, tmp_path: Path, server: ZooKeeperServer, baseline: dict[str, Any]
) -> None:
    # At 3.5 s orders-1's move onto broker 4 and audit's deletion wait for broker 4 (down).
    data = copy.deepcopy(SCENARIO)
    data["events"].insert(3, {"at": "3500ms", "type": "zk_session_expiry", "broker": 2})
    ensemble = FaultyEnsemble(chroot(server), {}, session_timeout=SESSION_MS / 1000)
    result = play(spark, data, tmp_path, ensemble)
    final = result["final"]
    assert result["summary"]["errors"] == []
    # Broker 1 wins /controller with epoch 2 and completes both when broker 4 is back.
    assert final["controller"] == {"id": 1, "epoch": 2, "epoch_zk_version": 2}
    winners = [e["controller"] for e in result["events"] if e["type"] == "Reelect" and e["commits"]]
    assert winners == [1]
    # Broker 2's expiry took it out of the ISRs until it caught up (appended; spec §3.6, as real
    # Kafka 2.8.2 does, docs/fidelity.md): the same members, maybe in another order.
    assert with_isr_sets(without_epochs(final)) == with_isr_sets(without_epochs(baseline["final"]))
    epochs = {
        p["partition"]: (p["leader_epoch"], p["controller_epoch"]) for p in final["partitions"]
    }
    before = {p["partition"]: p["leader_epoch"] for p in baseline["final"]["partitions"]}
    # Broker 2's expiry is its death to the new controller: orders-0 (led by 2) loses its
    # leader in the failover's ISR removal, gets 3 elected, and 2 back from the preferred
    # election at 4 s (three more epochs); orders-1 (led by 2, moving) two more; orders-2 (no
    # replica on 2) none. Real Kafka 2.8.2 writes the same epochs (kce verify, docs/fidelity.md).
    assert epochs == {0: (before[0] + 3, 2), 1: (before[1] + 2, 2), 2: (before[2], 1)}


def with_isr_sets(final: dict[str, Any]) -> dict[str, Any]:
    """The ISRs as sets: a broker back in the ISR is appended to it."""
    partitions = [{**p, "isr": sorted(p["isr"])} for p in final["partitions"]]
    return {**final, "partitions": partitions}


# -- controllers on a cluster built directly (no scenario) -----------------------------------------


def _p(topic: str, partition: int, replicas: tuple[int, ...], leader: int) -> Partition:
    return Partition(topic, partition, replicas, replicas, leader, leader_epoch=0, zk_version=0,
                     controller_epoch=1, state=PartitionState.OnlinePartition)  # fmt: skip


def harness(spark: SparkSession, spec: ClusterSpec, ensemble: Any) -> Harness:
    """Every broker up, broker 1 the controller; followers rejoin ISRs at once."""
    return Harness(spark, spec, ensemble=ensemble, catch_up_ms=0)


ZOMBIE_SPEC = ClusterSpec(
    brokers=(1, 2, 3),
    partitions=(
        _p("z", 0, (2, 3, 1), 3),  # a preferred election moves it to 2
        _p("z", 1, (1, 2, 3), 1),  # its leader shrinks the ISR (AlterIsr)
        _p("z", 2, (3, 1), 3),  # reassigned to [3, 2]
        _p("z", 3, (3, 1), 3),  # broker 3's controlled shutdown moves it to 1
    ),
    unclean_topics=frozenset(),
)
Z = [ev.TopicPartition("z", p) for p in range(4)]


def zombie_writes(h: Harness) -> list[ev.ControllerEvent]:
    """One request per kind of controller write, as the active controller receives them."""
    data, stat = h.admin.get(PartitionStateZNode.path("z", 1))
    state = PartitionStateZNode.decode(data, "")
    broker_epoch = h.active().ctx.live_brokers[1].epoch  # the sender of AlterIsr
    shrink = ev.AlterIsrItem(state.leader_epoch, (1, 2), stat.version)
    return [
        ev.ReplicaLeaderElection(frozenset([Z[0]]), ElectionType.PREFERRED,
                                 ElectionTrigger.AdminClientTriggered),
        ev.AlterIsrReceived(1, broker_epoch, {Z[1]: shrink}),
        ev.ApiPartitionReassignment({Z[2]: (3, 2)}),
        ev.ControlledShutdown(3, h.active().ctx.live_brokers[3].epoch),
    ]  # fmt: skip


def run_all_but(h: Harness, zombie: KafkaController) -> None:
    """Deliver watches and run every controller's queue except the zombie's, until idle."""
    c = h.cluster
    while True:
        c.zookeeper.wait_idle()
        ran = sum(
            b.controller.events.run_until_idle() for b in c.running() if b.controller is not zombie
        )
        if ran == 0:
            return


def test_zombie_controller_writes_are_fenced_and_it_resigns(
    spark: SparkSession, server: ZooKeeperServer
) -> None:
    h = harness(spark, ZOMBIE_SPEC, ServerEnsemble(chroot(server), SESSION_MS / 1000))
    try:
        initial = h.snapshot()
        assert initial.epoch == (1, 1)
        for round_, kind in enumerate(range(4), start=2):
            zombie = h.active()
            zombie.events.put(zombie_writes(h)[kind])  # the zombie is busy: not processed yet
            # An operator forces a controller move; the others elect one, the zombie has not
            # noticed: two controllers believe they are active.
            h.admin.delete(ControllerZNode.path())
            run_all_but(h, zombie)
            active = [b.controller for b in h.cluster.running() if b.controller.is_active]
            assert zombie in active and len(active) == 2
            winner = next(c for c in active if c is not zombie)
            assert winner.ctx.epoch == round_
            before = znode_tree(h.admin)
            zombie.events.run_until_idle(max_events=1)  # its write: fenced by /controller_epoch
            assert h.records[-1].controller_id == zombie.broker_id
            assert h.records[-1].failed == "ControllerMovedException"
            assert znode_tree(h.admin) == before  # none of its writes landed
            assert not zombie.is_active  # it resigned
            h.cluster.drain()
            snap = h.snapshot()
            assert violations(snap, None) == []
            assert snap.zk_epoch == (round_, round_) and snap.controllers == (winner.broker_id,)
            # Everything as it was: the request was the zombie's only.
            assert {k: (p.replicas, p.isr, p.leader) for k, p in snap.partitions.items()} == {
                k: (p.replicas, p.isr, p.leader) for k, p in initial.partitions.items()
            }
        # The same request from the active controller lands.
        h.active().events.put(zombie_writes(h)[0])
        h.cluster.drain()
        assert h.snapshot().partitions[("z", 0)].leader == 2
    finally:
        h.close()


ADMIN_SPEC = ClusterSpec(
    brokers=(1, 2, 3, 4),
    partitions=(
        *(_p("r", p, ((p % 4) + 1, ((p + 1) % 4) + 1), (p % 4) + 1) for p in range(4)),
        *(_p(f"d{i}", 0, (1, 2), 1) for i in range(3)),
        *(_p("p", p, (p + 1, p + 2, p + 3), p + 2) for p in range(2)),  # not the preferred
    ),
    unclean_topics=frozenset(),
)
# An operator's scripts: reassignments (kafka-reassign-partitions --zookeeper: one at a time, the
# next once the znode is gone), deletions (kafka-topics --delete) and ElectLeaders requests, mixed.
ADMIN_REQUESTS: list[tuple[str, Any]] = [
    ("reassign", ("r", 0, [3, 4])), ("delete", "d0"), ("elect", ("p", 0)),
    ("reassign", ("r", 1, [4, 1])), ("delete", "d1"), ("elect", ("p", 1)),
    ("reassign", ("r", 2, [1, 2])), ("delete", "d2"), ("reassign", ("r", 3, [2, 3])),
]  # fmt: skip


def test_concurrent_admin_requests_are_each_processed_once(
    spark: SparkSession, server: ZooKeeperServer
) -> None:
    # The requests one after another, on the in-memory ZooKeeper: the expected end state.
    alone = harness(spark, ADMIN_SPEC, EmulatedEnsemble())
    try:
        for kind, arg in ADMIN_REQUESTS:
            request(kind, arg, alone.admin, alone.active)
            alone.cluster.drain()
        expected = alone.snapshot()
    finally:
        alone.close()
    connect = chroot(server)
    h = harness(spark, ADMIN_SPEC, ServerEnsemble(connect, SESSION_MS / 1000))
    try:
        errors: list[str] = []
        tool = threading.Thread(target=admin_tool, args=(connect, ADMIN_REQUESTS, h.active, errors))
        tool.start()
        while tool.is_alive():
            h.cluster.drain()
        tool.join()
        h.cluster.drain()
        snap = h.snapshot()
        assert errors == []
        assert violations(snap, None) == []
        assert snap.partitions == expected.partitions
        assert snap.zk_states == expected.zk_states
        assert sorted(znode_tree(h.admin, "/admin")) == ["/admin", "/admin/delete_topics"]
        processed = [r.event for r in h.records if r.commits and r.event in (
            "ZkPartitionReassignment", "ReplicaLeaderElection", "TopicDeletion")]  # fmt: skip
        assert sorted(processed) == sorted(
            r.event for r in alone.records if r.commits and r.event in processed
        )
    finally:
        h.close()


def test_watches_survive_a_lost_connection_and_fire_for_changes_made_meanwhile(
    server: ZooKeeperServer,
) -> None:
    # The client reaches the server through a proxy; an admin session does not.
    connect = chroot(server)
    ServerEnsemble(connect).close()  # creates the chroot
    proxy = DelayProxy(server.port, delay_s=0.0)
    client = KazooZkClient(connect.replace(server.hosts, proxy.hosts), SESSION_MS / 1000, 20.0)
    admin_session = KazooClient(hosts=connect)
    seen: queue.Queue[tuple[str, str]] = queue.Queue()

    def watch(event: Any) -> None:
        seen.put((event.type, event.path))

    try:
        client.start()
        admin_session.start()
        for path in ("/changed", "/kids", "/quiet"):
            client.ensure_path(path)
        client.get("/changed", watch=watch)
        client.get_children("/kids", watch=watch)
        client.exists("/created", watch=watch)
        client.get("/quiet", watch=watch)
        proxy.cut()  # the client is cut off; the admin writes meanwhile
        admin_session.set("/changed", b"1")
        admin_session.create("/kids/k")
        admin_session.create("/created")
        proxy.mend()
        assert client.await_connected()
        got = {seen.get(timeout=30) for _ in range(3)}
        # Re-armed with the zxid last seen: what changed meanwhile fires at once, nothing else.
        assert got == {("CHANGED", "/changed"), ("CHILD", "/kids"), ("CREATED", "/created")}
        assert client.watches.rearmed == 4
        admin_session.set("/quiet", b"1")  # still armed
        assert seen.get(timeout=30) == ("CHANGED", "/quiet")
        assert seen.empty()  # the handlers never saw the disconnection (no NONE event)
    finally:
        for session in (admin_session, client):
            session.stop()
            session.close()
        proxy.close()
