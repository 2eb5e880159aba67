"""Topic creation, partition addition and topic deletion in bulk equal Kafka's §9 sequences."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from controller.commit.gauges import deletion_gauges
from controller.handlers import deletion as d
from controller.handlers import topics as h
from controller.topic_deletion_state import TopicDeletionState
from statemachines import reference_topics as ref
from statemachines import schemas as s
from statemachines.brokers import BrokerSet, ClusterView
from statemachines.partition_states import PartitionState
from statemachines.reference import Partition, View
from statemachines.replica_states import ReplicaState
from tests.frames import compact_frame, read_back

SETTINGS = settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ON, OFF = ReplicaState.OnlineReplica, ReplicaState.OfflineReplica
STARTED, DONE = ReplicaState.ReplicaDeletionStarted, ReplicaState.ReplicaDeletionSuccessful
INELIGIBLE = ReplicaState.ReplicaDeletionIneligible


def _online(topic: str, pid: int, reps: tuple[int, ...], live: set[int]) -> Partition:
    isr = tuple(r for r in reps if r in live) or reps[:1]
    leader = isr[0] if isr[0] in live else -1
    return Partition(topic, pid, reps, isr=isr, leader=leader, controller_epoch=1)


def _states(parts: Sequence[Partition], live: set[int]) -> dict:
    return {(p.topic, p.partition, r): ON if r in live else OFF for p in parts for r in p.replicas}


# ---- creation and addition (§9.1, §9.2, Appendix B.1) -------------------------------------


def test_create_topic_appendix_b1_and_topic_without_live_replica_stays_new(
    spark: SparkSession,
) -> None:
    live = {1, 2, 3}
    old = [_online("a", 0, (1, 2), live)]
    table, topics = compact_frame(spark, old, _states(old, live))
    t = h.new_partition_rows(spark, 1, 1, 3, [], 2, assignment={0: [2, 3, 1]})
    dead = h.new_partition_rows(spark, 2, 1, 2, [], 2, assignment={0: [4, 5]})
    both = h.add_partition_rows(h.add_partition_rows(table, t), dead)
    view = ClusterView(BrokerSet.of(live), controller_epoch=1)
    rows = h.on_new_partition_creation(both, F.col(s.TOPIC_INDEX) >= 1, view).collect()
    names = {**topics, "t": 1, "u": 2}
    parts, states = read_back(rows, names, 3)
    assert parts[("t", 0)] == Partition(
        "t", 0, (2, 3, 1), isr=(2, 3, 1), leader=2, leader_epoch=0, zk_version=0,
        controller_epoch=1, state=PartitionState.OnlinePartition,
    )  # fmt: skip
    assert parts[("u", 0)].state == PartitionState.NewPartition
    assert parts[("u", 0)].zk_version == s.NO_ZK_VERSION
    assert parts[("a", 0)] == old[0]
    # Replicas on dead brokers are marked Online too (§9.1 step 4).
    assert {k: v for k, v in states.items() if k[0] != "a"} == {
        ("t", 0, 2): ON, ("t", 0, 3): ON, ("t", 0, 1): ON, ("u", 0, 4): ON, ("u", 0, 5): ON,
    }  # fmt: skip
    by_topic = {r.topic_index: (r[h.INITIALIZED], r[h.INIT_FAILED]) for r in rows}
    assert by_topic == {0: (0, 0), 1: (1, 0), 2: (0, 1)}


def test_add_partitions_spec_example_fixed_start_2(spark: SparkSession) -> None:
    live = {0, 1, 2, 3}
    old = [_online("t", 0, (2, 3, 0, 1), live)]
    table, topics = compact_frame(spark, old, _states(old, live))
    added = h.new_partition_rows(
        spark, 0, 6, 4, [0, 1, 2, 3], 4, start_partition_id=1, fixed_start=2
    )
    view = ClusterView(BrokerSet.of(live), controller_epoch=3)
    both = h.add_partition_rows(table, added)
    rows = h.on_new_partition_creation(both, F.col(s.PARTITION) >= 1, view).collect()
    parts, _ = read_back(rows, topics, 4)
    want = {
        1: [3, 2, 0, 1],
        2: [0, 3, 1, 2],
        3: [1, 0, 2, 3],
        4: [2, 3, 0, 1],
        5: [3, 0, 1, 2],
        6: [0, 1, 2, 3],
    }
    assert {p: list(parts[("t", p)].replicas) for p in want} == want
    assert all(parts[("t", p)].isr == tuple(want[p]) for p in want)
    assert all(parts[("t", p)].controller_epoch == 3 for p in want)
    assert parts[("t", 0)] == old[0]


@st.composite
def creations(draw: st.DrawFn) -> tuple[list[int], set[int], dict[str, dict[int, list[int]]]]:
    brokers = list(range(draw(st.integers(1, 5))))
    live = {b for b in brokers if draw(st.booleans())}
    rf = draw(st.integers(1, len(brokers)))
    plan = {
        f"t{i}": {p: draw(st.permutations(brokers))[:rf] for p in range(draw(st.integers(1, 3)))}
        for i in range(draw(st.integers(1, 3)))
    }
    return brokers, live, plan


@SETTINGS
@given(creations())
def test_new_partition_creation_matches_reference(spark: SparkSession, case: tuple) -> None:
    _brokers, live, plan = case
    names = {t: i for i, t in enumerate(sorted(plan))}
    frames = [
        h.new_partition_rows(spark, names[t], 0, 0, [], 1, assignment=a) for t, a in plan.items()
    ]
    table = frames[0]
    for f in frames[1:]:
        table = h.add_partition_rows(table, f)
    w = s.width(table)
    rows = h.on_new_partition_creation(
        table, F.lit(True), ClusterView(BrokerSet.of(live))
    ).collect()
    start = {k: p for t, a in plan.items() for k, p in ref.new_partitions(t, a).items()}
    want = ref.on_new_partition_creation(start, {}, set(start), View(frozenset(live)))
    parts, states = read_back(rows, names, w)
    assert parts == want.partitions
    assert states == want.states
    inv = {i: t for t, i in names.items()}
    assert {(inv[r.topic_index], r.partition) for r in rows if r[h.INITIALIZED]} == want.initialized
    assert {(inv[r.topic_index], r.partition) for r in rows if r[h.INIT_FAILED]} == want.init_failed


# ---- deletion (§9.5) -------------------------------------------------------------------------


class Driver:
    """Commits deletion steps as the controller would: collect, feed facts back, cut lineage."""

    def __init__(self, spark: SparkSession, table: DataFrame, topics: dict[str, int]) -> None:
        self.spark, self.table, self.topics = spark, table, topics
        self.w = s.width(table)
        self.sets = TopicDeletionState()
        self.manager = d.TopicDeletionManager(self.sets)
        self.rows: list[Row] = table.collect()
        self.stops: dict[int, int] = {}
        self.count_stops = True

    def commit(self, step: d.DeletionStep | None, stops: bool | None = None) -> set[int]:
        """Two or three small jobs per step; ``stops`` skips the per-broker count."""
        if step is None:
            return set()
        self.rows = step.partitions.collect()
        for r in (
            step.stop_replica.collect() if (self.count_stops if stops is None else stops) else []
        ):
            self.stops[r.broker] = self.stops.get(r.broker, 0) + r[d.STOP_REPLICA_DELETES]
        done = self.sets.commit_facts([r.asDict() for r in step.topics.collect()])
        cols = s.compact_columns(self.w)
        self.table = self.spark.createDataFrame(
            [tuple(r[c] for c in cols) for r in self.rows], s.compact_schema(self.w)
        )
        return done

    def state(self) -> tuple[dict, dict]:
        return read_back(self.rows, self.topics, self.w)

    def gauges(self) -> dict[str, int]:
        cols = deletion_gauges(self.w, self.sets.topics_to_be_deleted)
        row = self.table.agg(*(c.alias(n) for n, c in cols.items())).first()
        assert row is not None
        return {n: int(row[n] or 0) for n in cols} | self.sets.topic_gauges()


def _cluster(spark: SparkSession, live: set[int]) -> tuple[Driver, list[Partition]]:
    parts = [_online("foo", p, (1, 2, 3), live) for p in range(2)] + [
        _online("keep", 0, (3, 1), live)
    ]
    table, topics = compact_frame(spark, parts, _states(parts, live))
    return Driver(spark, table, topics), parts


def test_deletion_happy_path_with_gauges(spark: SparkSession) -> None:
    live = {1, 2, 3}
    view = ClusterView(BrokerSet.of(live))
    drv, _ = _cluster(spark, live)
    foo = drv.topics["foo"]
    drv.commit(drv.manager.enqueue_topics_for_deletion(drv.table, {foo}, view))
    parts, states = drv.state()
    assert {parts[("foo", p)].state for p in (0, 1)} == {PartitionState.NonExistentPartition}
    assert {v for k, v in states.items() if k[0] == "foo"} == {STARTED}
    assert drv.stops == {1: 2, 2: 2, 3: 2}
    assert foo in drv.sets.topics_with_deletion_started
    assert drv.gauges() == {
        "ReplicasToDeleteCount": 6, "ReplicasIneligibleToDeleteCount": 0,
        "TopicsToDeleteCount": 1, "TopicsIneligibleToDeleteCount": 0,
    }  # fmt: skip
    for b in (1, 2):
        drv.commit(
            drv.manager.on_stop_replica_response(drv.table, b, lambda _b, _k: F.lit(False), view)
        )
    assert drv.gauges()["ReplicasToDeleteCount"] == 2
    done = drv.commit(
        drv.manager.on_stop_replica_response(drv.table, 3, lambda _b, _k: F.lit(False), view)
    )
    assert done == {foo}
    parts, _ = drv.state()
    assert set(parts) == {("keep", 0)}
    assert not drv.sets.topics_to_be_deleted
    assert drv.sets.topic_gauges()["TopicsToDeleteCount"] == 0


def test_deletion_isr_removals_carry_the_current_controller_epoch(spark: SparkSession) -> None:
    live = {1, 2, 3}
    view = ClusterView(BrokerSet.of(live), controller_epoch=5)
    drv, _ = _cluster(spark, live)
    drv.commit(drv.manager.enqueue_topics_for_deletion(drv.table, {drv.topics["foo"]}, view))
    parts, _ = drv.state()
    # Each replica's → OfflineReplica removes it from the ISR, written by controller epoch 5.
    assert {parts[("foo", p)].controller_epoch for p in (0, 1)} == {5}
    assert parts[("keep", 0)].controller_epoch == 1


def test_deletion_blocked_by_dead_broker_resumes_when_it_returns(spark: SparkSession) -> None:
    live = {1, 3}
    drv, parts = _cluster(spark, live)
    model = ref.DeletionModel(
        {(p.topic, p.partition): p for p in parts}, _states(parts, live), View(frozenset(live))
    )
    foo = drv.topics["foo"]
    view = ClusterView(BrokerSet.of(live))
    drv.commit(drv.manager.enqueue_topics_for_deletion(drv.table, {foo}, view))
    model.enqueue_topics_for_deletion({"foo"})
    _, states = drv.state()
    assert {states[("foo", p, 2)] for p in (0, 1)} == {INELIGIBLE}
    assert drv.sets.topics_ineligible_for_deletion == {foo}
    assert drv.gauges()["ReplicasIneligibleToDeleteCount"] == 2
    for b in (1, 3):
        drv.commit(
            drv.manager.on_stop_replica_response(drv.table, b, lambda _b, _k: F.lit(False), view)
        )
        model.on_stop_replica_response(b, set())
    _, states = drv.state()
    # No replica Started and some Ineligible ⇒ retry: broker 2's replicas go back Offline.
    assert {states[("foo", p, 2)] for p in (0, 1)} == {OFF}
    assert drv.sets.topics_ineligible_for_deletion == {foo}
    live, model.view = {1, 2, 3}, View(frozenset({1, 2, 3}))
    view = ClusterView(BrokerSet.of(live))
    drv.commit(drv.manager.on_brokers_started(drv.table, BrokerSet.of({2}), view))
    model.on_brokers_started({2})
    _, states = drv.state()
    assert {states[("foo", p, 2)] for p in (0, 1)} == {STARTED}
    assert drv.sets.topics_ineligible_for_deletion == set()
    done = drv.commit(
        drv.manager.on_stop_replica_response(drv.table, 2, lambda _b, _k: F.lit(False), view)
    )
    model.on_stop_replica_response(2, set())
    assert done == {foo}
    got_parts, got_states = drv.state()
    assert (got_parts, got_states) == (model.partitions, model.states)
    assert drv.stops == model.stop_replica_deletes == {1: 2, 3: 2, 2: 2}


def test_stop_replica_failure_makes_topic_ineligible_then_retried(spark: SparkSession) -> None:
    live = {1, 2, 3}
    view = ClusterView(BrokerSet.of(live))
    drv, _ = _cluster(spark, live)
    drv.count_stops = False
    foo = drv.topics["foo"]
    drv.commit(drv.manager.enqueue_topics_for_deletion(drv.table, {foo}, view))
    fail_p0 = lambda _b, _k: F.col(s.PARTITION) == 0  # noqa: E731
    drv.commit(drv.manager.on_stop_replica_response(drv.table, 1, fail_p0, view))
    _, states = drv.state()
    assert states[("foo", 0, 1)] == INELIGIBLE and states[("foo", 1, 1)] == DONE
    assert drv.sets.topics_ineligible_for_deletion == {foo}
    for b in (2, 3):
        drv.commit(
            drv.manager.on_stop_replica_response(drv.table, b, lambda _b, _k: F.lit(False), view)
        )
    _, states = drv.state()
    assert states[("foo", 0, 1)] == OFF  # retried: Ineligible → Offline, topic still ineligible
    assert not drv.sets.is_topic_eligible_for_deletion(foo)
    drv.commit(drv.manager.resume_deletion_for_topics(drv.table, {foo}, view))
    _, states = drv.state()
    assert states[("foo", 0, 1)] == STARTED
    done = drv.commit(
        drv.manager.on_stop_replica_response(drv.table, 1, lambda _b, _k: F.lit(False), view)
    )
    assert done == {foo}


@st.composite
def deletions(draw: st.DrawFn) -> tuple:
    brokers = list(range(1, draw(st.integers(2, 4)) + 1))
    live = {b for b in brokers if draw(st.integers(0, 3)) > 0}
    plan = {
        f"t{i}": {
            p: tuple(draw(st.permutations(brokers))[: draw(st.integers(1, len(brokers)))])
            for p in range(draw(st.integers(1, 2)))
        }
        for i in range(draw(st.integers(1, 3)))
    }
    queued = {t for t in plan if draw(st.booleans())} or {"t0"}
    ops = draw(
        st.lists(
            st.tuples(
                st.sampled_from(["ok", "fail", "error", "return", "resume"]),
                st.sampled_from(brokers),
            ),
            min_size=1,
            max_size=2,
        )
    )
    return brokers, live, plan, queued, ops


@SETTINGS
@given(deletions())
def test_deletion_matches_reference(spark: SparkSession, case: tuple) -> None:
    _brokers, live, plan, queued, ops = case
    parts = [_online(t, p, reps, live) for t, a in plan.items() for p, reps in a.items()]
    table, topics = compact_frame(spark, parts, _states(parts, live))
    drv = Driver(spark, table, topics)
    model = ref.DeletionModel(
        {(p.topic, p.partition): p for p in parts}, _states(parts, live), View(frozenset(live))
    )
    view = ClusterView(BrokerSet.of(live))
    drv.commit(
        drv.manager.enqueue_topics_for_deletion(drv.table, {topics[t] for t in queued}, view)
    )
    model.enqueue_topics_for_deletion(queued)
    for op, b in ops:
        if op == "return":
            live = live | {b}
            view, model.view = ClusterView(BrokerSet.of(live)), View(frozenset(live))
            drv.commit(drv.manager.on_brokers_started(drv.table, BrokerSet.of({b}), view))
            model.on_brokers_started({b})
        elif op == "resume":
            drv.commit(
                drv.manager.resume_deletion_for_topics(drv.table, {topics[t] for t in queued}, view)
            )
            model.resume_deletion_for_topics(queued)
        else:
            pick = {"ok": set(), "fail": {(t, 0) for t in plan}, "error": None}[op]
            pred = (
                None
                if pick is None
                else (lambda _b, _k, f=bool(pick): (F.col(s.PARTITION) == 0) & F.lit(f))
            )
            drv.commit(drv.manager.on_stop_replica_response(drv.table, b, pred, view))
            model.on_stop_replica_response(b, pick)
    got_parts, got_states = drv.state()
    assert got_parts == model.partitions
    assert got_states == model.states
    assert drv.stops == model.stop_replica_deletes
    names = {i: t for t, i in topics.items()}
    assert {
        names[t] for t in drv.sets.topics_ineligible_for_deletion
    } == model.topics_ineligible_for_deletion
    assert {names[t] for t in drv.sets.topics_to_be_deleted} == model.topics_to_be_deleted
    assert drv.gauges() == model.gauges()
