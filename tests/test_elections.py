"""Spec §7.4: every unit row of the four algorithms and every full-strategy row, on both paths."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from statemachines import columns as c
from statemachines import election, reference, replica_states
from statemachines.brokers import BrokerSet, ClusterView
from statemachines.partition_states import PartitionState, handle_state_changes
from statemachines.reference import Partition, View
from statemachines.replica_states import ReplicaState
from tests.frames import compact_frame, read_back

# (#, algorithm, assignment, isr, live, shutting down, unclean, expected leader)
UNIT_ROWS = [
    (1, "offline", [2, 4], [2, 4], {4}, set(), False, 4),
    (2, "offline", [2, 4], [2], {4}, set(), False, None),
    (3, "offline", [2, 4], [2], {4}, set(), True, 4),
    (4, "reassign", [2, 4], [2, 4], {4}, set(), False, 4),
    (5, "reassign", [2, 4], [2], set(), set(), False, None),
    (6, "reassign", [2, 4], [], {2}, set(), False, None),
    (7, "preferred", [2, 4], [2, 4], {2, 4}, set(), False, 2),
    (8, "preferred", [2, 4], [2], set(), set(), False, None),
    (9, "preferred", [2, 4], [4], {2, 4}, set(), False, None),
    (10, "preferred", [2, 4], [], set(), set(), False, None),
    (11, "controlled_shutdown", [2, 4], [2, 4], {2, 4}, {2}, False, 4),
    (12, "controlled_shutdown", [2, 4], [2], {2, 4}, {2}, False, None),
    (13, "controlled_shutdown", [2, 4], [2, 4], {2, 4}, {2, 4}, False, None),
]


def _reference(alg: str, a: list[int], isr: list[int], live: set[int], sd: set[int], unclean: bool):
    if alg == "offline":
        return reference.offline_leader(a, isr, live, unclean)
    if alg == "reassign":
        return reference.reassign_leader(a, isr, live)
    if alg == "preferred":
        return reference.preferred_leader(a, isr, live)
    return reference.controlled_shutdown_leader(a, isr, live, sd)


@pytest.mark.parametrize("row", UNIT_ROWS, ids=[f"row{r[0]}-{r[1]}" for r in UNIT_ROWS])
def test_unit_rows_reference(row: tuple) -> None:
    _, alg, a, isr, live, sd, unclean, expected = row
    assert _reference(alg, a, isr, live, sd, unclean) == expected


def test_unit_rows_columns(spark: SparkSession) -> None:
    """All 13 rows in one DataFrame: each row evaluates its own algorithm's Column expression."""
    parts = [Partition("t", n, tuple(a), isr=tuple(isr)) for n, _, a, isr, *_ in UNIT_ROWS]
    df, _ = compact_frame(spark, parts, w=2)
    reps, isr_cols = c.replicas(2), c.isr(2)
    exprs = F.lit(None).cast("int")
    for n, alg, _, _, live, sd, unclean, _ in UNIT_ROWS:
        live_set, sd_set = BrokerSet.of(live), BrokerSet.of(sd)
        flags = [live_set.contains(r) for r in reps]
        if alg == "offline":
            e = election.offline_leader(reps, isr_cols, flags, F.lit(unclean))
        elif alg == "reassign":
            e = election.reassign_leader(reps, isr_cols, flags)
        elif alg == "preferred":
            e = election.preferred_leader(reps, isr_cols, flags)
        else:
            e = election.controlled_shutdown_leader(
                reps, isr_cols, flags, [sd_set.contains(r) for r in reps]
            )
        exprs = F.when(F.col("partition") == n, e).otherwise(exprs)
    got = {r.partition: r.leader for r in df.select("partition", exprs.alias("leader")).collect()}
    assert got == {n: expected for n, *_, expected in UNIT_ROWS}


def test_unclean_meter_only_when_unclean_choice_produced_a_leader() -> None:
    p2 = Partition("t", 0, (2, 4), isr=(2,), leader=2)
    assert reference.elect_offline(p2, View(frozenset({4})), unclean_enabled=False) is None
    e = reference.elect_offline(p2, View(frozenset({4})), unclean_enabled=True)
    assert e is not None and e.unclean and e.leader == 4


# Full strategy rows (spec §7.4 second table): partition, live, shutting down, strategy name,
# expected (leader, isr, epoch delta) or None, expected recipients.
E = 5
STRATEGY_ROWS = [
    ("offline-clean", Partition("t", 0, (1, 2, 3), isr=(1, 2, 3), leader=1, leader_epoch=E),
     {2, 3}, set(), "offline", (2, (2, 3)), (2, 3)),
    ("offline-order", Partition("t", 1, (3, 1, 2), isr=(2, 1), leader=2, leader_epoch=E),
     {1, 3}, set(), "offline", (1, (1,)), (3, 1)),
    ("offline-isr-member-shutting-down", Partition("t", 2, (1, 2, 3), isr=(1, 2, 3), leader=1, leader_epoch=E),
     {3}, {2}, "offline", (3, (3,)), (3,)),
    ("offline-no-live-isr-unclean-off", Partition("t", 3, (5, 6), isr=(6,), leader=-1, leader_epoch=E, state=PartitionState.OfflinePartition),
     {5}, set(), "offline", None, ()),
    ("offline-no-live-isr-unclean-on", Partition("u", 0, (6, 5), isr=(6,), leader=6, leader_epoch=E),
     {5}, set(), "offline", (5, (5,)), (5,)),
    ("controlled-shutdown-of-leader", Partition("t", 5, (5, 6), isr=(5, 6), leader=5, leader_epoch=E),
     {6}, {5}, "controlled_shutdown", (6, (6,)), (5, 6)),
    ("controlled-shutdown-no-alternative", Partition("t", 6, (0, 1, 2), isr=(0,), leader=0, leader_epoch=E),
     set(), {0, 1, 2}, "controlled_shutdown", None, ()),
    ("preferred", Partition("t", 7, (2, 1), isr=(1, 2), leader=1, leader_epoch=E),
     {1, 2}, set(), "preferred", (2, (1, 2)), (2, 1)),
    ("preferred-already-preferred", Partition("t", 8, (5,), isr=(5,), leader=5, leader_epoch=E),
     {5}, set(), "preferred", (5, (5,)), (5,)),
    ("reassign", Partition("t", 9, (4, 5, 6, 1, 2, 3), isr=(1, 2, 3, 4, 5, 6), leader=1, leader_epoch=E,
                           adding_replicas=(4, 5, 6), removing_replicas=(1, 2, 3)),
     {1, 2, 3, 4, 5, 6}, set(), "reassign", (4, (1, 2, 3, 4, 5, 6)), (4, 5, 6)),
]  # fmt: skip

STRATEGIES = {
    "offline": (
        lambda: election.OfflinePartitionLeaderElectionStrategy(unclean_column="unclean_enabled"),
        lambda p, v: reference.elect_offline(p, v, unclean_enabled=p.topic == "u"),
    ),
    "controlled_shutdown": (
        election.ControlledShutdownPartitionLeaderElectionStrategy,
        reference.elect_controlled_shutdown,
    ),
    "preferred": (
        election.PreferredReplicaPartitionLeaderElectionStrategy,
        reference.elect_preferred,
    ),
    "reassign": (election.ReassignPartitionLeaderElectionStrategy, reference.elect_reassign),
}


@pytest.mark.parametrize("row", STRATEGY_ROWS, ids=[r[0] for r in STRATEGY_ROWS])
def test_strategy_rows_reference(row: tuple) -> None:
    _, p, live, sd, kind, expected, recipients = row
    got = STRATEGIES[kind][1](p, View(frozenset(live), frozenset(sd)))
    if expected is None:
        assert got is None
    else:
        assert (got.leader, got.isr) == expected
        assert got.recipients == recipients


@pytest.mark.parametrize("kind", sorted(STRATEGIES))
def test_strategy_rows_spark(spark: SparkSession, kind: str) -> None:
    rows = [r for r in STRATEGY_ROWS if r[4] == kind]
    for name, p, live, sd, _, expected, recipients in rows:
        df, topics = compact_frame(spark, [p], w=6)
        df = df.withColumn("unclean_enabled", F.col("topic_index") == topics.get("u", -1))
        view = ClusterView(BrokerSet.of(live), BrokerSet.of(sd), controller_epoch=9)
        result = handle_state_changes(
            df, F.lit(True), PartitionState.OnlinePartition, view, STRATEGIES[kind][0]()
        )
        outcome = result.outcomes.first()
        decided = result.decisions.collect()  # the elected or failed row, from one job
        assert [(r.partition, r.outcome) for r in decided] == [(p.partition, outcome.outcome)]
        after = read_back([outcome], topics, 6)[0][(p.topic, p.partition)]
        if expected is None:
            assert after == p, name
            assert outcome.outcome == 3 and outcome.failure.startswith("Failed to elect"), name
        else:
            assert (after.leader, after.isr) == expected, name
            assert (after.leader_epoch, after.zk_version) == (E + 1, p.zk_version + 1), name
            assert after.controller_epoch == 9 and after.state == PartitionState.OnlinePartition
            got_recipients = tuple(
                outcome[f"replica_{k}"] for k in range(6) if outcome.lair_recipients & (1 << k)
            )
            assert got_recipients == recipients, name
            assert outcome.unclean == (name == "offline-no-live-isr-unclean-on"), name


def test_elections_of_one_shape_read_each_events_brokers_and_epoch(spark: SparkSession) -> None:
    """A transition's Columns are built once per shape and kept; the live brokers and the
    controller epoch of each event are data they read, so no event sees an earlier one's."""
    p = Partition("t", 0, (1, 2, 3), isr=(1, 2, 3), leader=1, leader_epoch=4)
    df, topics = compact_frame(spark, [p])
    strategy = election.OfflinePartitionLeaderElectionStrategy()
    got = []
    for live, epoch in (({2, 3}, 7), ({3}, 8), ({2, 3}, 9), (set(), 10)):
        view = ClusterView(BrokerSet.of(live), controller_epoch=epoch)
        result = handle_state_changes(
            df, F.lit(True), PartitionState.OnlinePartition, view, strategy
        )
        after = read_back([result.outcomes.first()], topics, 3)[0][("t", 0)]
        got.append((after.leader, after.isr, after.controller_epoch))
    assert got == [(2, (2, 3), 7), (3, (3,), 8), (2, (2, 3), 9), (1, (1, 2, 3), 0)]


def test_isr_removals_of_one_shape_stamp_each_events_epoch_and_brokers(
    spark: SparkSession,
) -> None:
    """The replica machine's Columns are kept per shape too: the replicas an event takes
    offline and the epoch it writes with are the event's own."""
    p = Partition("t", 0, (1, 2, 3), isr=(1, 2, 3), leader=1, leader_epoch=4)
    df, topics = compact_frame(spark, [p])
    got = []
    for brokers, epoch in (({3}, 5), ({2}, 6), ({1, 2}, 7)):
        result = replica_states.handle_state_changes(
            df, BrokerSet.of(brokers), ReplicaState.OfflineReplica, controller_epoch=epoch
        )
        after = read_back([result.outcomes.first()], topics, 3)[0][("t", 0)]
        got.append((after.leader, after.isr, after.controller_epoch))
    assert got == [(1, (1, 2), 5), (1, (1, 3), 6), (-1, (3,), 7)]
