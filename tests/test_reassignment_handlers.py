"""KIP-455 reassignment in bulk: the §10.5 worked examples, §10.4 validation, and the oracle."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pyspark.sql import DataFrame, Row, SparkSession

from controller.handlers import reassignment as h
from controller.handlers import reassignment_plans as plans
from statemachines import reference_reassignment as ref
from statemachines.brokers import BrokerSet, ClusterView
from statemachines.columns import in_partitions
from statemachines.partition_states import PartitionState
from statemachines.reference import Partition, View
from statemachines.replica_states import ReplicaState
from statemachines.schemas import NO_ZK_VERSION
from tests.frames import assert_untouched_outside, compact_frame, read_back

SETTINGS = settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
PLAN_SCHEMA = "topic_index int, partition int, target array<int>"
Plan = Mapping[tuple[str, int], Sequence[int] | None]
States = dict[tuple[str, int, int], ReplicaState]
_R = ReplicaState


def _plan(spark: SparkSession, plan: Plan, topics: Mapping[str, int]) -> DataFrame:
    rows = [(topics[t], p, None if x is None else list(x)) for (t, p), x in plan.items()]
    return spark.createDataFrame(rows, PLAN_SCHEMA)


def _view(live: set[int], sd: frozenset[int] = frozenset()) -> ClusterView:
    return ClusterView(BrokerSet.of(live), BrokerSet.of(sd), 4)


def _keys(rows: Sequence[Row], topics: Mapping[str, int], column: str) -> set[tuple[str, int]]:
    names = {i: t for t, i in topics.items()}
    return {(names[r.topic_index], r.partition) for r in rows if r[column]}


def _known(states: States) -> States:
    """Kafka reads an absent replica state as NonExistentReplica: the two spellings are equal."""
    return {k: s for k, s in states.items() if s is not _R.NonExistentReplica}


def _online(parts: Sequence[Partition]) -> States:
    return {(p.topic, p.partition, r): _R.OnlineReplica for p in parts for r in p.replicas}


# ---- §10.1 -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("current", "adding", "removing", "target", "want"),
    [
        ((1, 2, 3), (), (), (4, 5, 6), ((4, 5, 6, 1, 2, 3), (4, 5, 6), (1, 2, 3))),
        (
            (4, 5, 6, 1, 2, 3),
            (4, 5, 6),
            (1, 2, 3),
            (7, 8, 9),
            ((7, 8, 9, 1, 2, 3), (7, 8, 9), (1, 2, 3)),
        ),
        ((4, 5, 6, 1, 2, 3), (4, 5, 6), (1, 2, 3), (1, 2, 3), ((1, 2, 3), (), ())),
        ((1, 2, 3, 4), (), (), (4, 2, 5, 3), ((4, 2, 5, 3, 1), (5,), (1,))),
        ((1, 2, 3), (), (), (3, 1, 2), ((3, 1, 2), (), ())),
        ((1, 2), (), (), (2, 3), ((2, 3, 1), (3,), (1,))),
        ((1, 2, 3), (), (), (3, 4, 2), ((3, 4, 2, 1), (4,), (1,))),
    ],
)
def test_reassign_to_table(
    current: tuple, adding: tuple, removing: tuple, target: tuple, want: tuple
) -> None:
    assert ref.reassign_to(current, adding, removing, target) == want


# ---- §10.5 worked examples ---------------------------------------------------------------------


@dataclass(frozen=True)
class Result:
    parts: dict[tuple[str, int], Partition]
    states: States
    rows: list[Row]
    topics: dict[str, int]

    def keys(self, column: str) -> set[tuple[str, int]]:
        return _keys(self.rows, self.topics, column)


def _start(
    spark: SparkSession,
    parts: list[Partition],
    states: States,
    plan: Plan,
    view: ClusterView,
    w: int,
) -> Result:
    df, topics = compact_frame(spark, parts, states)
    frame = _plan(spark, plan, topics)
    # As the controller calls it: U3 and phase B are planned only if validation says a row
    # may need them.
    checked = plans.validate_reassignments(df, frame, view.live, api=False).collect()
    out = h.start_reassignment(
        df,
        frame,
        view,
        width=w,
        replaces_ongoing=any(r[plans.REASSIGNING] for r in checked),
        may_complete=any(r[plans.COMPLETES] for r in checked),
    )
    rows = out.collect()
    return Result(*read_back(rows, topics, w), rows, topics)


def _complete(
    spark: SparkSession, parts: list[Partition], states: States, view: ClusterView
) -> Result:
    df, topics = compact_frame(spark, parts, states)
    rows = h.maybe_complete_reassignment(df, view).collect()
    return Result(*read_back(rows, topics, max(len(p.replicas) for p in parts)), rows, topics)


def _p(
    pid: int, reps: tuple[int, ...], isr: tuple[int, ...], epoch: int, **kw: object
) -> Partition:
    return Partition(
        "t",
        pid,
        reps,
        isr=isr,
        leader=isr[0],
        leader_epoch=epoch,
        zk_version=epoch,
        controller_epoch=1,
        **kw,
    )  # type: ignore[arg-type]


def test_worked_examples_phase_u_and_a_cancel_and_reorder(spark: SparkSession) -> None:
    """§10.5: examples 1 and 2 enter phase A; example 3 cancels; example 4 completes at once."""
    parts = [
        _p(0, (1,), (1,), 0),  # example 1: [C] → [O] with C=1, O=2
        _p(1, (1, 2, 3), (1, 2, 3), 10),  # example 2 with e = 10
        _p(
            2,
            (4, 5, 6, 1, 2, 3),
            (1, 2, 3, 4),
            11,
            adding_replicas=(4, 5, 6),
            removing_replicas=(1, 2, 3),
        ),  # example 3: example 2 in phase A, 4 caught up
        _p(3, (1, 2, 3), (1, 2, 3), 0),  # example 4: pure reorder
    ]
    states = _online(parts) | {("t", 2, r): _R.NewReplica for r in (4, 5, 6)}
    plan = {("t", 0): [2], ("t", 1): [4, 5, 6], ("t", 2): None, ("t", 3): [3, 1, 2]}
    got = _start(spark, parts, states, plan, _view({1, 2, 3, 4, 5, 6}), 6)

    ex1, ex2, ex3, ex4 = (got.parts[("t", i)] for i in range(4))
    assert (ex1.replicas, ex1.adding_replicas, ex1.removing_replicas) == ((2, 1), (2,), (1,))
    assert (ex1.leader, ex1.isr, ex1.leader_epoch) == (1, (1,), 1)
    assert got.states[("t", 0, 2)] == _R.NewReplica
    assert (ex2.replicas, ex2.adding_replicas, ex2.removing_replicas) == (
        (4, 5, 6, 1, 2, 3),
        (4, 5, 6),
        (1, 2, 3),
    )
    assert (ex2.leader, ex2.isr, ex2.leader_epoch) == (1, (1, 2, 3), 11)
    # Example 3: 4, 5, 6 deleted (4 leaves the ISR: +1), then complete: B3 keeps leader 1 (+1).
    assert (ex3.replicas, ex3.adding_replicas, ex3.removing_replicas) == ((1, 2, 3), (), ())
    assert (ex3.leader, ex3.isr, ex3.leader_epoch) == (1, (1, 2, 3), 13)
    assert not any(k[:2] == ("t", 2) and k[2] > 3 for k in got.states)
    # Example 4: not a reassignment; B3 bumps the epoch, leader stays 1.
    assert (ex4.replicas, ex4.adding_replicas, ex4.leader, ex4.leader_epoch) == (
        (3, 1, 2),
        (),
        1,
        1,
    )
    assert got.keys(h.REASSIGNMENT_STARTED) == {("t", 0), ("t", 1)}
    assert got.keys(h.REASSIGNMENT_COMPLETED) == {("t", 2), ("t", 3)}
    assert got.keys(h.ASSIGNMENT_CHANGED) == {("t", i) for i in range(4)}
    assert got.keys(h.LEADER_MOVED) == set()
    assert {r.partition: r.error for r in got.rows} == {i: plans.NONE for i in range(4)}


def test_worked_examples_complete_only_when_target_in_isr(spark: SparkSession) -> None:
    """§10.5 examples 1 and 2 after phase A: B3 moves the leader, B4 removes one at a time."""
    parts = [
        _p(0, (2, 1), (1, 2), 1, adding_replicas=(2,), removing_replicas=(1,)),
        _p(
            1,
            (4, 5, 6, 1, 2, 3),
            (1, 2, 3, 4, 5, 6),
            11,
            adding_replicas=(4, 5, 6),
            removing_replicas=(1, 2, 3),
        ),
        # the same move with 6 still catching up stays in progress
        _p(
            2,
            (4, 5, 6, 1, 2, 3),
            (1, 2, 3, 4, 5),
            11,
            adding_replicas=(4, 5, 6),
            removing_replicas=(1, 2, 3),
        ),
    ]
    states = _online(parts) | {("t", i, r): _R.NewReplica for i in (1, 2) for r in (4, 5, 6)}
    states[("t", 0, 2)] = _R.NewReplica
    got = _complete(spark, parts, states, _view({1, 2, 3, 4, 5, 6}))

    ex1, ex2, waiting = (got.parts[("t", i)] for i in range(3))
    assert (ex1.replicas, ex1.adding_replicas, ex1.removing_replicas) == ((2,), (), ())
    assert (ex1.leader, ex1.isr, ex1.leader_epoch) == (2, (2,), 3)
    assert (ex2.replicas, ex2.leader, ex2.isr, ex2.leader_epoch) == ((4, 5, 6), 4, (4, 5, 6), 15)
    assert got.states[("t", 1, 4)] == _R.OnlineReplica and ("t", 1, 1) not in got.states
    assert waiting == parts[2]
    assert got.keys(h.REASSIGNMENT_COMPLETED) == got.keys(h.LEADER_MOVED) == {("t", 0), ("t", 1)}
    assert {r.partition: r[h.ISR_SHRINKS] for r in got.rows} == {0: 1, 1: 3, 2: 0}


def test_target_broker_down_stays_in_phase_a_until_resumed(spark: SparkSession) -> None:
    """§10.5: O down ⇒ epoch 1 and in progress; O starts ⇒ phase A again (2); then 3 and 4."""
    parts = [_p(0, (1,), (1,), 0)]
    first = _start(spark, parts, _online(parts), {("t", 0): [2]}, _view({1}), 2)
    p = first.parts[("t", 0)]
    assert (p.replicas, p.leader_epoch, p.isr) == ((2, 1), 1, (1,))
    resumed = _start(spark, [p], first.states, {("t", 0): [2]}, _view({1, 2}), 2)
    p = resumed.parts[("t", 0)]
    assert (p.replicas, p.adding_replicas, p.leader_epoch) == ((2, 1), (2,), 2)
    assert resumed.states[("t", 0, 2)] == _R.NewReplica  # New → New is refused, only logged
    done = _complete(spark, [replace(p, isr=(1, 2))], resumed.states, _view({1, 2}))
    p = done.parts[("t", 0)]
    assert (p.replicas, p.leader, p.isr, p.leader_epoch) == ((2,), 2, (2,), 4)


# ---- §10.4 validation --------------------------------------------------------------------------


def test_validation_codes_match_reference(spark: SparkSession) -> None:
    """Every §10.4 code; 5 is shutting down (not live), 9 is dead, topic "d" is being deleted."""
    parts = [
        _p(0, (1, 2), (1, 2), 0),
        _p(1, (3, 1, 2), (1, 2), 0, adding_replicas=(3,), removing_replicas=(2,)),
        _p(2, (9, 1), (1,), 0),
        replace(_p(0, (1, 2), (1, 2), 0), topic="d"),
    ]
    live = {1, 2, 3, 4}  # 5 is shutting down: registered but not live
    plan: dict[tuple[str, int], list[int] | None] = {
        ("t", 0): [],
        ("t", 1): [2, 2],
        ("t", 2): [-3, 1],
        ("t", 3): [1, 4],  # unknown partition, live target
        ("t", 4): [1, 9],  # unknown partition, dead target: checked first
        ("t", 5): None,  # unknown partition, cancel
        ("d", 0): [1, 4],
    }
    rows = [(t, p, x) for (t, p), x in plan.items()]
    rows += [("t", 0, [2, 5]), ("t", 0, None), ("t", 1, None), ("t", 1, [4]), ("t", 2, [9])]
    df, topics = compact_frame(spark, parts, _online(parts))
    frame = spark.createDataFrame(
        [(topics[t], p, x, i) for i, (t, p, x) in enumerate(rows)], PLAN_SCHEMA + ", i int"
    )
    checked = plans.validate_reassignments(df, frame, BrokerSet.of(live), [topics["d"]]).collect()
    got = {r.i: r.error for r in checked}
    # Only t-1 has a reassignment in flight for a new plan to replace or cancel.
    assert {r.i for r in checked if r[plans.REASSIGNING]} == {1, 9, 10}
    # Cancels, and targets already in the ISR, may complete at once.
    assert {r.i for r in checked if r[plans.COMPLETES]} == {0, 1, 5, 8, 9}
    by_key = {(p.topic, p.partition): p for p in parts}
    want = {
        i: ref.validate_reassignment(by_key.get((t, p)), x, live, deleting=t == "d")
        for i, (t, p, x) in enumerate(rows)
    }
    assert got == want
    assert [want[i] for i in range(len(rows))] == [
        "INVALID_REPLICA_ASSIGNMENT",
        "INVALID_REPLICA_ASSIGNMENT",
        "INVALID_REPLICA_ASSIGNMENT",
        "UNKNOWN_TOPIC_OR_PARTITION",
        "INVALID_REPLICA_ASSIGNMENT",
        "NO_REASSIGNMENT_IN_PROGRESS",
        "UNKNOWN_TOPIC_OR_PARTITION",
        "INVALID_REPLICA_ASSIGNMENT",
        "NO_REASSIGNMENT_IN_PROGRESS",
        "NONE",
        "NONE",
        "NONE",  # 9 is already a replica: only the replicas to be added must be live
    ]


# ---- Spark equals the oracle on random small clusters ------------------------------------------


@dataclass(frozen=True)
class Cluster:
    parts: list[Partition]
    states: States
    live: frozenset[int]
    shutting_down: frozenset[int]
    plan: dict[tuple[str, int], tuple[int, ...] | None]


@st.composite
def clusters(draw: st.DrawFn) -> Cluster:
    parts: list[Partition] = []
    states: States = {}
    live: set[int] = set()
    sd: set[int] = set()
    plan: dict[tuple[str, int], tuple[int, ...] | None] = {}
    for c in range(draw(st.integers(1, 3))):
        brokers = [100 * c + b for b in range(draw(st.integers(2, 5)))]
        for b in brokers:
            fate = draw(st.sampled_from(["live", "live", "live", "dead", "shutting_down"]))
            (live if fate == "live" else sd if fate == "shutting_down" else set()).add(b)

        def some(at_least: int) -> tuple[int, ...]:
            n = draw(st.integers(at_least, len(brokers)))  # noqa: B023
            return tuple(draw(st.permutations(brokers))[:n])  # noqa: B023

        for pid in range(draw(st.integers(1, 4))):
            reps, adding, removing = some(1)[:3], (), ()
            if draw(st.booleans()):
                reps, adding, removing = ref.reassign_to(reps, (), (), some(1))
            isr = tuple(r for r in draw(st.permutations(reps)) if draw(st.booleans())) or reps[:1]
            p = Partition(f"c{c}", pid, reps, isr=isr, controller_epoch=1)
            if draw(st.integers(0, 5)) == 0:
                p = replace(p, state=PartitionState.NewPartition, zk_version=NO_ZK_VERSION)
            else:
                p = replace(
                    p,
                    leader=draw(st.sampled_from([-1, *isr])),
                    leader_epoch=draw(st.integers(0, 3)),
                    zk_version=draw(st.integers(0, 3)),
                    state=draw(
                        st.sampled_from(
                            [PartitionState.OnlinePartition] * 2 + [PartitionState.OfflinePartition]
                        )
                    ),
                )
            parts.append(replace(p, adding_replicas=adding, removing_replicas=removing))
            for r in reps:
                states[(p.topic, pid, r)] = draw(
                    st.sampled_from(
                        [
                            _R.OnlineReplica,
                            _R.NewReplica,
                            _R.OfflineReplica,
                            _R.ReplicaDeletionIneligible,
                            _R.ReplicaDeletionStarted,
                        ]
                    )
                )
            choice = draw(st.integers(0, 3))
            if choice:
                plan[(p.topic, pid)] = None if choice == 1 else some(1)
    return Cluster(parts, states, frozenset(live), frozenset(sd), plan)


_NEW_ONE_REPLICA = Partition(
    "c0", 0, (0,), isr=(0,), state=PartitionState.NewPartition, zk_version=NO_ZK_VERSION
)
# A partition with no leadership yet fails the reassignment but keeps phase U's new replica.
_NO_LEADERSHIP = Cluster(
    [_NEW_ONE_REPLICA],
    {("c0", 0, 0): _R.OnlineReplica},
    frozenset({0, 1}),
    frozenset(),
    {("c0", 0): (0, 1)},
)


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
@example(cluster=_NO_LEADERSHIP)
def test_start_reassignment_matches_reference(spark: SparkSession, cluster: Cluster) -> None:
    view = _view(set(cluster.live), cluster.shutting_down)
    got = _start(spark, cluster.parts, cluster.states, cluster.plan, view, 5)
    want = ref.on_partition_reassignment(
        {(p.topic, p.partition): p for p in cluster.parts},
        cluster.states,
        cluster.plan,
        View(cluster.live, cluster.shutting_down, 4),
    )
    assert got.parts == want.partitions
    assert _known(got.states) == _known(want.states)
    names = {i: t for t, i in got.topics.items()}
    assert {
        (names[r.topic_index], r.partition): r.error for r in got.rows if r.error
    } == want.errors
    assert got.keys(h.ASSIGNMENT_CHANGED) == want.assignment_changed
    assert got.keys(h.REASSIGNMENT_STARTED) == want.started
    assert got.keys(h.REASSIGNMENT_COMPLETED) == want.completed
    assert got.keys(h.LEADER_MOVED) == want.leader_moved
    assert got.keys(h.FAILED_ELECTION) == want.failed_election
    assert got.keys(h.WIDTH_EXCEEDED) == set()
    shrinks = {(names[r.topic_index], r.partition): r[h.ISR_SHRINKS] for r in got.rows}
    assert {k: v for k, v in shrinks.items() if v} == {
        k: v for k, v in want.isr_shrinks.items() if v
    }
    # The controller starts a plan from its partitions' rows alone.
    df, topics = compact_frame(spark, cluster.parts, cluster.states)
    out = h.start_reassignment(df, _plan(spark, cluster.plan, topics), view, width=5)
    planned = in_partitions((topics[t], p) for t, p in cluster.plan)
    assert_untouched_outside(df, out, planned, h.COUNTERS)


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_maybe_complete_reassignment_matches_reference(
    spark: SparkSession, cluster: Cluster
) -> None:
    view = _view(set(cluster.live), cluster.shutting_down)
    got = _complete(spark, cluster.parts, cluster.states, view)
    want = ref.maybe_complete_reassignment(
        {(p.topic, p.partition): p for p in cluster.parts},
        cluster.states,
        View(cluster.live, cluster.shutting_down, 4),
    )
    assert got.parts == want.partitions
    assert _known(got.states) == _known(want.states)
    assert got.keys(h.REASSIGNMENT_COMPLETED) == want.completed
    assert got.keys(h.LEADER_MOVED) == want.leader_moved
    assert got.keys(h.FAILED_ELECTION) == want.failed_election
    # The controller completes from the rows being reassigned alone.
    df, _ = compact_frame(spark, cluster.parts, cluster.states)
    out = h.maybe_complete_reassignment(df, view)
    assert_untouched_outside(df, out, plans.being_reassigned(), h.COUNTERS)
