"""Controller invariants under generated event sequences on small emulated clusters.

Each example boots 3–5 brokers with 2–3 topics (RF 1–3, some followers out of sync, some topics
with unclean election on) on the in-memory ZooKeeper and plays broker crashes and restarts,
controlled shutdowns, session expiries, ElectLeaders (preferred/unclean, all or some
partitions), auto-rebalance checks and topics turning unclean election on. After every event
the active controller's committed table and ZooKeeper must keep Kafka's guarantees
(``controller_oracle.violations``): one controller, named by ``/controller``; leader ∈ ISR ⊆
replicas; Online partitions led by live brokers, Offline ones leaderless; leader epochs, znode
versions and the controller epoch never going back; the OfflinePartitionsCount gauge; state
znodes equal to the table. While the controller stays in place the partitions must also equal
the plain-Python reference controller's (``controller_oracle.predict``).

Every example replays a whole cluster through Spark, so examples are few by default and
shrinking is off: a failure reports the generated event list as it ran.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from hypothesis import HealthCheck, Phase, given, note, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from statemachines.partition_states import PartitionState
from statemachines.reference import Partition
from tests.controller_oracle import (
    ClusterSpec,
    Event,
    Harness,
    Snapshot,
    Step,
    brief,
    cluster_specs,
    differences,
    first_line,
    play_steps,
    predict,
    predictor,
    steps,
    violations,
)

ONLINE = PartitionState.OnlinePartition

# An example boots a cluster and runs every event through Spark (seconds each): the defaults keep
# the file near 90 s on 2 cores. Raise KCE_INVARIANT_EXAMPLES for a longer search.
EXAMPLES = int(os.environ.get("KCE_INVARIANT_EXAMPLES", "3"))
PROPERTY = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
)


def _play(
    spark: SparkSession,
    spec: ClusterSpec,
    plan: list[Step],
    with_model: bool,
    say: Callable[[str], None] = note,
) -> Snapshot:
    """Run ``plan`` with the invariants (and the model) checked after each step; the last
    snapshot."""
    return play_steps(spark, spec, plan, with_model, say)[-1]


@PROPERTY
@given(cluster_specs(), st.lists(steps(failover=False), min_size=1, max_size=3))
def test_events_without_failover_keep_invariants_and_match_the_model(
    spark: SparkSession, spec: ClusterSpec, plan: list[Step]
) -> None:
    _play(spark, spec, plan, with_model=True)


@settings(PROPERTY, max_examples=max(1, EXAMPLES - 1))  # failover examples cost the most
@given(cluster_specs(), st.lists(steps(failover=True), min_size=1, max_size=3))
def test_events_with_controller_failover_keep_invariants_and_match_the_model(
    spark: SparkSession, spec: ClusterSpec, plan: list[Step]
) -> None:
    _play(spark, spec, plan, with_model=True)


def _online(topic: str, replicas: tuple[int, ...]) -> Partition:
    """A healthy partition: full ISR, led by its preferred replica, never re-elected."""
    return Partition(topic, 0, replicas, replicas, replicas[0], 0, 0, 1, ONLINE)


def test_failover_after_controller_crash_writes_its_elections_to_zookeeper(
    spark: SparkSession,
) -> None:
    """§6.4 step 3 and §5.4 during failover write ZooKeeper like any other event.

    Broker 1 leads t0-0 and is the controller; it crashes. The new controller removes 1 from the
    ISR (leader -1, epoch 1) and elects 2 (epoch 2): both writes must reach the state znode.
    """
    h = Harness(spark, ClusterSpec((1, 2, 3), (_online("t0", (1, 2, 3)),), frozenset()))
    try:
        assert h.active().broker_id == 1
        h.apply(Event("crash", 1, of_controller=True))
        snap = h.snapshot()
        got = snap.partitions[("t0", 0)]
        assert (got.leader, got.isr, got.leader_epoch, got.zk_version) == (2, (2, 3), 2, 2)
        assert snap.zk_states[("t0", 0)] == (2, 2, (2, 3), snap.epoch[0], 2), (
            f"state znode of t0-0 after failover: {snap.zk_states[('t0', 0)]}"
        )
    finally:
        h.close()


def test_isr_removal_carries_the_current_controller_epoch(spark: SparkSession) -> None:
    """Every partition-state write carries the writer's controller epoch (§6.3, §2.3).

    A previous controller left epoch 1, so broker 1 takes over with epoch 2 (and nothing to
    change). Follower 3 of t0-0 crashes: the ISR removal written for it must say epoch 2.
    """
    spec = ClusterSpec((1, 2, 3), (_online("t0", (1, 2, 3)),), frozenset())
    h = Harness(spark, spec, previous_controller_epoch=1)
    try:
        assert h.snapshot().epoch[0] == 2
        h.apply(Event("crash", 3))
        got = h.snapshot().partitions[("t0", 0)]
        assert (got.leader, got.isr, got.leader_epoch, got.zk_version) == (1, (1, 2), 1, 1)
        assert got.controller_epoch == 2, f"t0-0 after the ISR removal: {brief(got)}"
    finally:
        h.close()


def test_controlled_shutdown_when_every_partition_has_one_replica(spark: SparkSession) -> None:
    """§8.4: RF=1 partitions are never acted on; the first request succeeds with none remaining.

    The broker's own partition goes offline when it exits (§8.2).
    """
    parts = (_online("t0", (1,)), _online("t1", (2,)))
    h = Harness(spark, ClusterSpec((1, 2, 3), parts, frozenset()))
    try:
        before = h.snapshot()
        h.apply(Event("controlled_shutdown", 2))
        snap = h.snapshot()
        shutdowns = [first_line(r.failed) for r in h.records if r.event == "ControlledShutdown"]
        assert shutdowns == [""], f"ControlledShutdown attempts and their errors: {shutdowns}"
        assert violations(snap, before) == []
        t1 = snap.partitions[("t1", 0)]
        assert (t1.leader, t1.state) == (-1, PartitionState.OfflinePartition)
    finally:
        h.close()


def _follow(spark: SparkSession, spec: ClusterSpec, plan: list[Step]) -> Harness:
    """Run ``plan`` on a new cluster beside the reference; each step must agree with it and keep
    the invariants. Returns the harness (close it)."""
    h = Harness(spark, spec)
    snap = h.snapshot()
    model = predictor(spec, snap.epoch[0])
    for step in plan:
        event = h.resolve(step)
        assert event is not None, step
        checks = h.apply(event)
        before, snap = snap, h.snapshot()
        assert violations(snap, before) == [], event
        predict(model, event, checks)
        assert differences(model.partitions, snap.partitions) == [], event
    return h


def test_alter_isr_requests_are_answered_and_applied_as_the_model_says(
    spark: SparkSession,
) -> None:
    """§12.5: a shrink and an expansion from the leader are written (leader epoch kept, znode
    version +1); a proposal at an older ISR version or leader epoch changes nothing. The
    controller's table and ZooKeeper follow the reference at every step."""
    parts = (_online("t0", (1, 2, 3)),)
    plan = [Step("alter_isr", pick=k) for k in (0, 2, 3, 1)]  # shrink, stale, fenced, expand
    h = _follow(spark, ClusterSpec((1, 2, 3), parts, frozenset()), plan)
    try:
        got = h.snapshot().partitions[("t0", 0)]
        # The shrink dropped 3 (version 1), the expansion added it back (version 2).
        assert (got.leader, got.isr, got.leader_epoch, got.zk_version) == (1, (1, 2, 3), 0, 2)
    finally:
        h.close()


def test_a_failed_log_directory_moves_leadership_and_leaves_the_isr_as_the_model_says(
    spark: SparkSession,
) -> None:
    """§8.6: broker 2's log directory fails while it stays registered: t1, which it led,
    elects 1; t0 drops 2 from its ISR."""
    parts = (_online("t0", (1, 2, 3)), _online("t1", (2, 1)))
    plan = [Step("log_dir_failure", target="follower", pick=0), Step("rebalance")]
    h = _follow(spark, ClusterSpec((1, 2, 3), parts, frozenset()), plan)
    try:
        snap = h.snapshot()
        assert 2 in snap.registered
        t0, t1 = snap.partitions[("t0", 0)], snap.partitions[("t1", 0)]
        assert (t0.leader, t0.isr) == (1, (1, 3))
        assert (t1.leader, t1.isr) == (1, (1,))
    finally:
        h.close()


def test_failover_with_a_broker_down_matches_the_model(spark: SparkSession) -> None:
    """§5.4, §6.4: broker 3 crashes (t1 elects 2), then the controller, broker 1: broker 2 takes
    over with 1 and 3 down, removes both from t0's ISR and elects itself, as the model does."""
    parts = (_online("t0", (1, 2, 3)), _online("t1", (3, 2)))
    plan = [
        Step("crash", target="follower", pick=1),  # broker 3
        Step("crash", target="controller"),
    ]
    _play(spark, ClusterSpec((1, 2, 3), parts, frozenset()), plan, True, say=lambda _: None)


def test_topic_deletion_waits_for_a_dead_replica_and_matches_the_model(
    spark: SparkSession,
) -> None:
    """§9.5: t1 is deleted while broker 3, one of its replicas, is down: its deletion is
    ineligible until 3 returns; then the StopReplica answers complete it. The table, ZooKeeper
    and the reference agree at every step."""
    parts = (_online("t0", (1, 2)), _online("t1", (2, 3)))
    spec = ClusterSpec((1, 2, 3), parts, frozenset())
    plan = [
        Step("crash", target="follower", pick=1),  # broker 3
        Step("delete_topic", pick=1),  # t1
        Step("start"),  # broker 3 returns: the deletion resumes and completes
    ]
    snap = _play(spark, spec, plan, True, say=lambda _: None)
    assert {t for t, _ in snap.partitions} == {"t0"}
    assert set(snap.zk_states) == {("t0", 0)}
