"""Spec §11 elections in bulk: §11.2's worked example, version differences, §11.1's result codes,
and hypothesis comparisons with the oracle in ``statemachines.reference_election``.

Several cases share one table and one Spark job where they can (a ``case`` label column).
"""

from __future__ import annotations

from functools import reduce

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import Column, DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from controller.handlers import election as h
from statemachines import reference_election as ref
from statemachines import schemas as s
from statemachines.brokers import BrokerSet, ClusterView
from statemachines.election_kinds import ElectionTrigger, ElectionType
from statemachines.partition_states import PartitionState
from statemachines.reference import Partition, View
from tests.frames import assert_untouched_outside, compact_frame, read_back
from tests.strategies import Batch, W, batches

SETTINGS = settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
Online = PartitionState.OnlinePartition
Offline = PartitionState.OfflinePartition


def _p(
    topic: str,
    pid: int,
    reps: tuple[int, ...],
    leader: int,
    isr: tuple[int, ...] | None = None,
    state: PartitionState = Online,
) -> Partition:
    return Partition(
        topic,
        pid,
        reps,
        isr=reps if isr is None else isr,
        leader=leader,
        leader_epoch=3,
        zk_version=7,
        controller_epoch=1,
        state=state,
    )


def _by_key(parts: list[Partition]) -> dict[tuple[str, int], Partition]:
    return {(p.topic, p.partition): p for p in parts}


def _labelled(frames: dict[str, DataFrame]) -> DataFrame:
    return reduce(
        DataFrame.unionByName, [df.withColumn("case", F.lit(k)) for k, df in frames.items()]
    )


def _split(rows: list[Row]) -> dict[str, list[Row]]:
    out: dict[str, list[Row]] = {}
    for r in rows:
        out.setdefault(r["case"], []).append(r)
    return out


def _keys(rows: list[Row], topics: dict[str, int], column: str) -> set[tuple[str, int]]:
    names = {i: t for t, i in topics.items()}
    return {(names[r[s.TOPIC_INDEX]], r[s.PARTITION]) for r in rows if r[column]}


def _errors(rows: list[Row], topics: dict[str, int]) -> dict[tuple[str, int], str]:
    names = {i: t for t, i in topics.items()}
    return {
        (names[r[s.TOPIC_INDEX]], r[s.PARTITION]): r[h.ELECTION_ERROR]
        for r in rows
        if r[h.ELECTION_ERROR] is not None
    }


# ---- §11.2 worked example ----------------------------------------------------------------------

WORKED = [
    _p("t", 0, (1, 2, 3), 2),
    _p("t", 1, (1, 3, 2), 1),
    _p("t", 2, (1, 2, 3), 1),
    _p("t", 3, (1, 2, 3), 3),
    _p("t", 4, (2, 1, 3), 2),
    Partition("u", 0, (3, 1, 2), zk_version=s.NO_ZK_VERSION, state=PartitionState.NewPartition),
]
ALL_LIVE = ClusterView(BrokerSet.of([1, 2, 3, 4, 5]), controller_epoch=4)
ALL_LIVE_REF = View(frozenset({1, 2, 3, 4, 5}), controller_epoch=4)


def test_worked_example_elects_t0_and_t3_only(spark: SparkSession) -> None:
    df, topics = compact_frame(spark, WORKED, w=3)
    rows = h.check_and_trigger_auto_leader_rebalance(df, ALL_LIVE, 10).collect()
    got, _ = read_back(rows, topics, 3)
    assert _keys(rows, topics, h.REBALANCE_CANDIDATE) == {("t", 0), ("t", 3)}
    assert _keys(rows, topics, h.ELECTED) == {("t", 0), ("t", 3)}
    for key in [("t", 0), ("t", 3)]:
        p = got[key]
        assert (p.leader, p.leader_epoch, p.zk_version, p.controller_epoch) == (1, 4, 8, 4)
    assert {k: got[k] for k in got if k not in {("t", 0), ("t", 3)}} == {
        k: v for k, v in _by_key(WORKED).items() if k not in {("t", 0), ("t", 3)}
    }
    want = ref.check_and_trigger_auto_leader_rebalance(_by_key(WORKED), ALL_LIVE_REF, 10)
    assert got == want.partitions and want.elected == {("t", 0), ("t", 3)}


def test_threshold_is_strict_one_in_ten_stays_two_in_ten_elected(spark: SparkSession) -> None:
    """Broker 1 leads 9 of its 10 (ratio 0.1, no action); broker 3 leads 8 of 10 (0.2)."""
    parts = [_p("a", i, (1, 2), 2 if i < 1 else 1) for i in range(10)]
    parts += [_p("b", i, (3, 4), 4 if i < 2 else 3) for i in range(10)]
    df, topics = compact_frame(spark, parts, w=2)
    rows = h.check_and_trigger_auto_leader_rebalance(df, ALL_LIVE, 10).collect()
    assert _keys(rows, topics, h.ELECTED) == {("b", 0), ("b", 1)}
    got, _ = read_back(rows, topics, 2)
    assert got[("b", 0)].leader == 3 and got[("a", 0)].leader == 2


# ---- §0 version differences ---------------------------------------------------------------------

VERSIONED = [
    _p("v", 0, (1, 2), 2),  # preferred live and in ISR
    _p("v", 1, (1, 2), 2, isr=(2,)),  # preferred live, not in ISR
    _p("v", 2, (5, 2), 2),  # preferred dead
]
CASES = {  # label: (kafka version, any reassignment in progress)
    "2.5": ((2, 5), False),
    "2.6": ((2, 6), False),
    "2.8-reassigning": ((2, 8), True),
    "3.4-reassigning": ((3, 4), True),
}


def test_candidate_filter_and_reassignment_blocking_by_version(spark: SparkSession) -> None:
    df, topics = compact_frame(spark, VERSIONED, w=2)
    view = ClusterView(BrokerSet.of([1, 2]), controller_epoch=4)
    frames = {
        label: h.check_and_trigger_auto_leader_rebalance(df, view, 10, (), busy, version)
        for label, (version, busy) in CASES.items()
    }
    by_case = _split(_labelled(frames).collect())
    v0, v1 = ("v", 0), ("v", 1)
    # 2.5 only asks for a live preferred broker; the election of v-1 then fails.
    assert _keys(by_case["2.5"], topics, h.REBALANCE_CANDIDATE) == {v0, v1}
    assert _keys(by_case["2.5"], topics, h.FAILED_ELECTION) == {v1}
    # 2.6+ also asks for the preferred replica to be in the ISR (KAFKA-9866).
    assert _keys(by_case["2.6"], topics, h.REBALANCE_CANDIDATE) == {v0}
    assert _keys(by_case["2.6"], topics, h.FAILED_ELECTION) == set()
    # Any reassignment blocks every candidate up to 3.3, not from 3.4 (KAFKA-10149).
    assert _keys(by_case["2.8-reassigning"], topics, h.ELECTED) == set()
    assert _keys(by_case["3.4-reassigning"], topics, h.ELECTED) == {v0}
    ref_view = View(frozenset({1, 2}), controller_epoch=4)
    for label, (version, busy) in CASES.items():
        want = ref.check_and_trigger_auto_leader_rebalance(
            _by_key(VERSIONED), ref_view, 10, (), busy, version
        )
        rows = by_case[label]
        assert read_back(rows, topics, 2)[0] == want.partitions, label
        assert _keys(rows, topics, h.ELECTED) == want.elected, label
        assert _keys(rows, topics, h.FAILED_ELECTION) == want.failed, label


# ---- §11.1 ElectLeaders result codes ------------------------------------------------------------

CODES = [
    _p("p", 0, (1, 2), 2),  # elected
    _p("p", 1, (1, 2), 1),  # already preferred
    _p("p", 2, (1, 2), 2, isr=(2,)),  # preferred not in ISR
    _p("p", 3, (5, 2), 2),  # preferred dead
    _p("p", 4, (1, 2), 2),  # not requested
    _p("d", 0, (1, 2), 2),  # topic queued for deletion
    Partition("n", 0, (1, 2), zk_version=s.NO_ZK_VERSION, state=PartitionState.NewPartition),
    _p("u", 0, (1, 2), 1),  # leader live
    _p("u", 1, (4, 1), 4, isr=(4,)),  # leader shutting down; only an unclean choice is left
    _p("u", 2, (5, 6), -1, isr=(5,), state=Offline),  # no live replica
    _p("u", 3, (5, 2), -1, state=Offline),  # a live ISR member: clean
]
CODES_VIEW = ClusterView(BrokerSet.of([1, 2, 3]), BrokerSet.of([4]), controller_epoch=4)


def test_elect_leaders_result_codes(spark: SparkSession) -> None:
    df, topics = compact_frame(spark, CODES, w=2)
    requested = [("p", i) for i in range(4)] + [("d", 0), ("n", 0)]
    keys = spark.createDataFrame(
        [(topics[t], i) for t, i in requested] + [(topics["p"], 9)],
        "topic_index int, partition int",
    )
    topic_u = F.col(s.TOPIC_INDEX) == topics["u"]
    preferred = ElectionType.PREFERRED, ElectionTrigger.AdminClientTriggered
    unclean = ElectionType.UNCLEAN, ElectionTrigger.AdminClientTriggered
    d = [topics["d"]]
    frames = {
        "preferred": h.on_replica_election(df, keys, *preferred, CODES_VIEW, d),
        "preferred-2.3": h.on_replica_election(df, keys, *preferred, CODES_VIEW, d, None, (2, 3)),
        "unclean": h.on_replica_election(df, topic_u, *unclean, CODES_VIEW, d),
        # Not admin-triggered: no forced unclean choice; the topic config (off here) decides.
        "unclean-zk": h.on_replica_election(
            df,
            topic_u,
            ElectionType.UNCLEAN,
            ElectionTrigger.ZkTriggered,
            CODES_VIEW,
            d,
            F.lit(False),
        ),
    }
    by_case = _split(_labelled(frames).collect())
    assert _errors(by_case["preferred"], topics) == {
        ("p", 0): "NONE",
        ("p", 1): "ELECTION_NOT_NEEDED",
        ("p", 2): "PREFERRED_LEADER_NOT_AVAILABLE",
        ("p", 3): "PREFERRED_LEADER_NOT_AVAILABLE",
        ("d", 0): "INVALID_TOPIC_EXCEPTION",
        ("n", 0): "UNKNOWN_SERVER_ERROR",
    }
    assert _errors(by_case["preferred-2.3"], topics)[("p", 1)] == "NONE"
    assert _errors(by_case["unclean"], topics) == {
        ("u", 0): "ELECTION_NOT_NEEDED",
        ("u", 1): "NONE",
        ("u", 2): "ELIGIBLE_LEADERS_NOT_AVAILABLE",
        ("u", 3): "NONE",
    }
    assert _keys(by_case["unclean"], topics, h.UNCLEAN_ELECTED) == {("u", 1)}
    assert _errors(by_case["unclean-zk"], topics)[("u", 1)] == "ELIGIBLE_LEADERS_NOT_AVAILABLE"
    got = read_back(by_case["unclean"], topics, 2)[0]
    assert (got[("u", 1)].leader, got[("u", 1)].isr) == (1, (1,))
    assert (got[("u", 3)].leader, got[("u", 3)].isr) == (2, (2,))
    assert read_back(by_case["preferred"], topics, 2)[0][("p", 0)].leader == 1
    unknown = h.unknown_partitions(df, keys).collect()
    assert [(r.topic_index, r.partition, r.election_error) for r in unknown] == [
        (topics["p"], 9, "UNKNOWN_TOPIC_OR_PARTITION")
    ]
    for case, (etype, trig, config) in {
        "preferred": (*preferred, {}),
        "unclean": (*unclean, {}),
        "unclean-zk": (ElectionType.UNCLEAN, ElectionTrigger.ZkTriggered, {}),
    }.items():
        asked = requested if etype is ElectionType.PREFERRED else [("u", i) for i in range(4)]
        want = ref.on_replica_election(
            _by_key(CODES),
            asked,
            etype,
            trig,
            View(frozenset({1, 2, 3}), frozenset({4}), 4),
            {"d"},
            config,
        )
        assert _errors(by_case[case], topics) == want.errors, case
        assert read_back(by_case[case], topics, 2)[0] == want.partitions, case


# ---- hypothesis: Spark equals the oracle --------------------------------------------------------


def _views(batch: Batch) -> tuple[ClusterView, View]:
    return (
        ClusterView(BrokerSet.of(batch.live), BrokerSet.of(batch.shutting_down), 4),
        View(batch.live, batch.shutting_down, 4),
    )


def _unclean(topics: dict[str, int], batch: Batch) -> Column:
    return F.col(s.TOPIC_INDEX).isin([topics[t] for t in sorted(batch.unclean_topics)])


def _deleting(data: st.DataObject, batch: Batch) -> set[str]:
    return {t for t in sorted({p.topic for p in batch.parts}) if data.draw(st.integers(0, 3)) == 0}


@SETTINGS
@given(batches(), st.data())
def test_replica_election_matches_reference(
    spark: SparkSession, batch: Batch, data: st.DataObject
) -> None:
    etype = data.draw(st.sampled_from(list(ElectionType)))
    trigger = data.draw(st.sampled_from(list(ElectionTrigger)))
    version = (
        (2, 8) if etype is ElectionType.UNCLEAN else data.draw(st.sampled_from([(2, 3), (2, 8)]))
    )
    deleting = _deleting(data, batch)
    df, topics = compact_frame(spark, batch.parts, w=W)
    selected = sorted(batch.selected)
    if data.draw(st.booleans()):
        # A key DataFrame, with a key the table does not have (it must not matter).
        rows = [(topics[t], i) for t, i in selected] + [(0, 99)]
        selection: Column | DataFrame = spark.createDataFrame(
            rows, "topic_index int, partition int"
        )
    else:
        flat = F.col(s.TOPIC_INDEX) * 1000 + F.col(s.PARTITION)
        selection = flat.isin([topics[t] * 1000 + i for t, i in selected])
    view, ref_view = _views(batch)
    out = h.on_replica_election(
        df,
        selection,
        etype,
        trigger,
        view,
        [topics[t] for t in sorted(deleting)],
        _unclean(topics, batch),
        version,
    )
    rows = out.collect()
    want = ref.on_replica_election(
        _by_key(batch.parts),
        selected,
        etype,
        trigger,
        ref_view,
        deleting,
        {t: True for t in batch.unclean_topics},
        version,
    )
    assert read_back(rows, topics, W)[0] == want.partitions
    assert _errors(rows, topics) == want.errors
    assert _keys(rows, topics, h.ELECTED) == want.elected
    assert _keys(rows, topics, h.FAILED_ELECTION) == want.failed
    assert _keys(rows, topics, h.UNCLEAN_ELECTED) == want.unclean
    # The controller elects from the scope's rows alone: outside it only result codes.
    scope = h.replica_election_scope(etype, view)
    assert_untouched_outside(df, out, scope, (h.ELECTED, h.FAILED_ELECTION, h.UNCLEAN_ELECTED))


@SETTINGS
@given(batches(), st.data())
def test_auto_rebalance_matches_reference(
    spark: SparkSession, batch: Batch, data: st.DataObject
) -> None:
    threshold = data.draw(st.sampled_from([0, 10, 25, 50, 100]))
    version = data.draw(st.sampled_from([(2, 5), (2, 6), (2, 8), (3, 4)]))
    busy = data.draw(st.booleans())
    deleting = _deleting(data, batch)
    df, topics = compact_frame(spark, batch.parts, w=W)
    view, ref_view = _views(batch)
    args = (threshold, [topics[t] for t in sorted(deleting)], busy, version)
    out = h.check_and_trigger_auto_leader_rebalance(df, view, *args)
    rows = out.collect()
    ref_args = (threshold, deleting, busy, version)
    want = ref.check_and_trigger_auto_leader_rebalance(_by_key(batch.parts), ref_view, *ref_args)
    candidates = ref.auto_rebalance_candidates(_by_key(batch.parts), ref_view, *ref_args)
    assert read_back(rows, topics, W)[0] == want.partitions
    assert _keys(rows, topics, h.REBALANCE_CANDIDATE) == candidates
    assert _keys(rows, topics, h.ELECTED) == want.elected
    assert _keys(rows, topics, h.FAILED_ELECTION) == want.failed
    # Only partitions off their preferred leader can move; the ratios still count every one.
    counters = (h.ELECTED, h.FAILED_ELECTION, h.UNCLEAN_ELECTED, h.REBALANCE_CANDIDATE)
    assert_untouched_outside(df, out, h.not_preferred(), counters)
    scoped = h.check_and_trigger_auto_leader_rebalance(
        df.where(h.not_preferred()), view, *args, whole=df
    ).collect()
    got = read_back(scoped, topics, W)[0]
    assert got == {k: v for k, v in want.partitions.items() if k in got}


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches(), st.data())
def test_unclean_enable_matches_reference(
    spark: SparkSession, batch: Batch, data: st.DataObject
) -> None:
    topic = data.draw(st.sampled_from([None, *sorted({p.topic for p in batch.parts})]))
    deleting = _deleting(data, batch)
    df, topics = compact_frame(spark, batch.parts, w=W)
    view, ref_view = _views(batch)
    rows = h.on_unclean_leader_election_enable(
        df,
        view,
        _unclean(topics, batch),
        [topics[t] for t in sorted(deleting)],
        None if topic is None else topics[topic],
    ).collect()
    want = ref.on_unclean_leader_election_enable(
        _by_key(batch.parts), ref_view, {t: True for t in batch.unclean_topics}, deleting, topic
    )
    assert read_back(rows, topics, W)[0] == want.partitions
    assert _keys(rows, topics, h.ELECTED) == want.elected
    assert _keys(rows, topics, h.FAILED_ELECTION) == want.failed
    assert _keys(rows, topics, h.UNCLEAN_ELECTED) == want.unclean
