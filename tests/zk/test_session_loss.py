"""A session the server expires on its own, on both backends (spec §3.6).

Nothing in the emulation asks for it (on a real ensemble: a server restart the broker did not
reconnect to within its session timeout). As Kafka's ``ZooKeeperClient`` does on a new session,
the broker's controller module processes ``Expire``, the broker registers again with a newer
epoch, and ``RegisterBrokerAndReelect`` follows; the controller sees the broker bounce.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from pyspark.sql import SparkSession
from zk_server import ZooKeeperServer

from controller.partition_store import EmulatedEnsemble, Ensemble, ServerEnsemble
from controller.zk.kafka_zk_client import get_controller_id
from controller.zk.paths import BrokerIdZNode
from statemachines.partition_states import PartitionState
from statemachines.reference import Partition
from tests.controller_oracle import ClusterSpec, Harness, violations


def _p(partition: int, replicas: tuple[int, ...]) -> Partition:
    return Partition("s", partition, replicas, replicas, replicas[0], leader_epoch=0, zk_version=0,
                     controller_epoch=1, state=PartitionState.OnlinePartition)  # fmt: skip


SPEC = ClusterSpec(
    brokers=(1, 2, 3),
    partitions=(_p(0, (1, 2, 3)), _p(1, (2, 3, 1)), _p(2, (3, 1))),
    unclean_topics=frozenset(),
)


@pytest.fixture(params=["memory", pytest.param("real", marks=pytest.mark.zk)])
def ensemble(request: pytest.FixtureRequest) -> Iterator[Ensemble]:
    if request.param == "memory":
        yield EmulatedEnsemble()
        return
    server: ZooKeeperServer = request.getfixturevalue("zk_server")
    yield ServerEnsemble(f"{server.hosts}/sessions-{uuid.uuid4().hex[:8]}", session_timeout=10.0)


@pytest.mark.parametrize("broker", [1, 3], ids=["controller", "follower"])
def test_a_session_expired_by_the_server_registers_the_broker_again(
    spark: SparkSession, ensemble: Any, broker: int
) -> None:
    h = Harness(spark, SPEC, ensemble=ensemble, catch_up_ms=0)
    try:
        assert h.snapshot().controllers == (1,)
        old_epoch = h.cluster.brokers[broker].epoch
        seen = len(h.records)
        ensemble.expire_session(h.cluster.brokers[broker].zk, reconnect=True)
        assert not h.admin.exists(BrokerIdZNode.path(broker))  # the server dropped it
        h.cluster.drain()
        own = [r.event for r in h.records[seen:] if r.controller_id == broker]
        assert own[:2] == ["Expire", "RegisterBrokerAndReelect"]
        snap = h.snapshot()
        assert h.admin.exists(BrokerIdZNode.path(broker))
        assert snap.registered[broker] > old_epoch
        assert snap.live == snap.registered and set(snap.live) == {1, 2, 3}
        # The controller's session took /controller with it: the others elected a new one.
        assert snap.zk_epoch[0] == (2 if broker == 1 else 1)
        assert violations(snap, None) == []
        assert all(p.leader in p.isr for p in snap.partitions.values())
    finally:
        h.close()


def test_a_crashed_controller_keeps_its_znodes_until_its_session_times_out(
    spark: SparkSession, ensemble: Any
) -> None:
    # A crash closes no session: /brokers/ids/1 and /controller stay until ZooKeeper expires it
    # zookeeper.session.timeout.ms later, and only then do the others elect a controller, which
    # finds broker 1 dead in its failover (spec §3.6; Kafka's ControllerChangeHandler).
    h = Harness(spark, SPEC, ensemble=ensemble, catch_up_ms=0)
    try:
        cluster = h.cluster
        expiry = cluster.crash_unnoticed(1)
        assert expiry == cluster.clock.now_ms() + cluster.session_timeout_ms
        cluster.drain()
        cluster.advance_to(expiry - 1)
        assert h.admin.exists(BrokerIdZNode.path(1)) and get_controller_id(h.admin) == 1
        assert cluster.active_controller() is None  # dead, and nobody else may take over
        cluster.advance_to(expiry)
        assert not h.admin.exists(BrokerIdZNode.path(1))
        snap = h.snapshot()
        assert snap.controllers == (2,) and snap.zk_epoch[0] == 2 and set(snap.live) == {2, 3}
        led = {key[1]: p.leader for key, p in snap.partitions.items()}
        assert led == {0: 2, 1: 2, 2: 3}  # s-0 lost its leader 1 to the next in its ISR
        assert violations(snap, None) == []
    finally:
        h.close()
