"""``/admin/preferred_replica_election``, the legacy tool's request (spec §2.1, §3.3, §11.1).

The controller watches the znode for creation, elects the partitions it lists, then deletes it
(fenced) and arms the watch again. A request no controller processed is found by the next
one's failover (step 13).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from controller.zk import admin_zk_client as admin
from controller.zk.paths import PREFERRED_REPLICA_ELECTION, PreferredReplicaElectionZNode
from spark_app.actions import Actor
from spark_app.admin_validation import AdminRequestError
from spark_app.scenario import events as se
from statemachines.partition_states import PartitionState
from statemachines.reference import Partition
from tests.controller_oracle import ClusterSpec, Harness, violations


def _p(partition: int, replicas: tuple[int, ...], leader: int) -> Partition:
    return Partition("p", partition, replicas, replicas, leader, leader_epoch=0, zk_version=0,
                     controller_epoch=1, state=PartitionState.OnlinePartition)  # fmt: skip


# Neither partition is led by its preferred replica (the head of its replicas).
SPEC = ClusterSpec(
    brokers=(1, 2, 3),
    partitions=(_p(0, (1, 2, 3), 2), _p(1, (2, 3, 1), 3)),
    unclean_topics=frozenset(),
)


def _leaders(h: Harness) -> dict[int, int]:
    snap = h.snapshot()
    assert violations(snap, None) == []
    return {p: row.leader for (_t, p), row in snap.partitions.items()}


@pytest.fixture
def h(spark: SparkSession) -> Iterator[Harness]:
    """Brokers 1-3 up, broker 1 the controller, neither partition on its preferred leader."""
    harness = Harness(spark, SPEC)
    yield harness
    harness.close()


def test_the_znode_elects_what_it_lists_then_goes_and_the_watch_is_armed_again(h: Harness) -> None:
    seen = len(h.records)
    admin.request_preferred_election(h.admin, [("p", 0)])
    h.cluster.drain()
    assert _leaders(h) == {0: 1, 1: 3}  # only the listed partition moved
    assert h.admin.exists(PREFERRED_REPLICA_ELECTION) is None
    ran = [(r.event, r.commits) for r in h.records[seen:]]
    assert ran == [("ReplicaLeaderElection", 1)]
    admin.request_preferred_election(h.admin, [("p", 1)])  # seen: the watch is armed
    h.cluster.drain()
    assert _leaders(h) == {0: 1, 1: 2}
    assert h.admin.exists(PREFERRED_REPLICA_ELECTION) is None


def test_a_request_the_controller_did_not_process_is_elected_by_the_next_failover(
    h: Harness,
) -> None:
    # Written as the controller loses its session: the watch's event is preempted by
    # Expire, and the znode stays for whoever wins /controller next.
    seen = len(h.records)
    admin.request_preferred_election(h.admin, [("p", 1), ("gone", 0)])
    h.cluster.expire_session(1)
    h.cluster.drain()
    snap = h.snapshot()
    assert snap.zk_epoch[0] == 2  # broker 1 may win again, as a new controller
    winner = snap.controllers[0]
    failover = next(r for r in h.records[seen:] if r.controller_id == winner and r.commits)
    assert failover.event in ("Reelect", "RegisterBrokerAndReelect")
    assert failover.counters["elected"] == 1
    assert _leaders(h)[1] == 2
    assert h.admin.exists(PREFERRED_REPLICA_ELECTION) is None


def test_the_watch_a_failover_arms_twice_fires_once(h: Harness) -> None:
    assert not [r for r in h.records if r.event == "ReplicaLeaderElection"]
    # The watch armed by the failover (step 3) and again after its step 13 is one watch.
    admin.request_preferred_election(h.admin, [("p", 0)])
    h.cluster.drain()
    assert _leaders(h)[0] == 1
    assert [r.event for r in h.records].count("ReplicaLeaderElection") == 1


def test_the_tool_lists_every_partition_for_all_and_is_refused_while_one_is_pending(
    h: Harness,
) -> None:
    actor = Actor(h.cluster, seed=0)
    event = se.ElectLeaders(at=0, via="zk", election_type="preferred", partitions="all")
    actor.apply(event)  # the controller runs nothing until the cluster drains
    data, _stat = h.admin.get(PREFERRED_REPLICA_ELECTION)
    listed = PreferredReplicaElectionZNode.decode(data).partitions
    assert [(r.topic, r.partition) for r in listed] == [("p", 0), ("p", 1)]
    with pytest.raises(AdminRequestError, match="currently in progress"):
        actor.apply(event)
    h.cluster.drain()
    assert _leaders(h) == {0: 1, 1: 2}
    assert h.admin.exists(PREFERRED_REPLICA_ELECTION) is None
