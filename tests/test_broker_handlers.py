"""Broker failure, startup and controlled shutdown in bulk equal the oracle's §8 sequences."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import Row, SparkSession
from pyspark.sql import functions as F

from controller.handlers import brokers as h
from statemachines import reference_brokers as reference
from statemachines.brokers import BrokerSet, ClusterView
from statemachines.reference import View
from statemachines.replica_states import ReplicaState
from tests.frames import assert_untouched_outside, compact_frame, read_back
from tests.strategies import Batch, W, batches

COUNTERS = (h.ELECTED, h.FAILED_ELECTION, h.UNCLEAN_ELECTED, h.ISR_SHRINKS)
# An example plans and runs a handler and its scope check (about 4 s on 2 cores); each run draws
# new examples, so the search widens over runs.
SETTINGS = settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _states(batch: Batch) -> dict:
    return {
        (p.topic, p.partition, r): ReplicaState.OnlineReplica
        for p in batch.parts
        for r in p.replicas
    }


def _keys(rows: list[Row], topics: dict[str, int], column: str) -> set[tuple[str, int]]:
    names = {i: t for t, i in topics.items()}
    return {(names[r.topic_index], r.partition) for r in rows if r[column]}


@SETTINGS
@given(batches())
def test_broker_failure_matches_reference(spark: SparkSession, batch: Batch) -> None:
    brokers = {r for p in batch.parts for r in p.replicas}
    dead = brokers - batch.live - batch.shutting_down
    states = _states(batch)
    df, topics = compact_frame(spark, batch.parts, states, w=W)
    unclean = F.col("topic_index").isin([topics[t] for t in batch.unclean_topics])
    view = ClusterView(BrokerSet.of(batch.live), BrokerSet.of(batch.shutting_down), 4)
    out = h.on_broker_failure(df, BrokerSet.of(dead), view, unclean, deleting=[])
    rows = out.collect()
    want = reference.on_broker_failure(
        {(p.topic, p.partition): p for p in batch.parts},
        states,
        dead,
        View(batch.live, batch.shutting_down, 4),
        {t: True for t in batch.unclean_topics},
    )
    got_parts, got_states = read_back(rows, topics, W)
    assert got_parts == want.partitions
    assert got_states == want.states
    assert _keys(rows, topics, h.ELECTED) == want.elected
    assert _keys(rows, topics, h.FAILED_ELECTION) == want.failed
    assert _keys(rows, topics, h.UNCLEAN_ELECTED) == want.unclean
    scope = h.broker_failure_scope(BrokerSet.of(dead), view, W)
    assert_untouched_outside(df, out, scope, COUNTERS)


@SETTINGS
@given(batches(), st.data())
def test_broker_startup_matches_reference(
    spark: SparkSession, batch: Batch, data: st.DataObject
) -> None:
    new = {b for b in batch.live if data.draw(st.booleans())}
    states = {k: data.draw(st.sampled_from(list(ReplicaState)[:-1])) for k in _states(batch)}
    df, topics = compact_frame(spark, batch.parts, states, w=W)
    view = ClusterView(BrokerSet.of(batch.live), BrokerSet.of(batch.shutting_down), 4)
    out = h.on_broker_startup(df, BrokerSet.of(new), view, F.lit(False), deleting=[])
    rows = out.collect()
    want = reference.on_broker_startup(
        {(p.topic, p.partition): p for p in batch.parts},
        states,
        new,
        View(batch.live, batch.shutting_down, 4),
        {},
    )
    got_parts, got_states = read_back(rows, topics, W)
    assert got_parts == want.partitions
    assert got_states == want.states
    assert _keys(rows, topics, h.ELECTED) == want.elected
    assert_untouched_outside(df, out, h.broker_startup_scope(BrokerSet.of(new), W), COUNTERS)


@SETTINGS
@given(batches(), st.data())
def test_controlled_shutdown_matches_reference(
    spark: SparkSession, batch: Batch, data: st.DataObject
) -> None:
    brokers = sorted({r for p in batch.parts for r in p.replicas})
    broker = data.draw(st.sampled_from(brokers))
    live = batch.live - {broker}
    sd = batch.shutting_down | {broker}
    states = _states(batch)
    df, topics = compact_frame(spark, batch.parts, states, w=W)
    view = ClusterView(BrokerSet.of(live), BrokerSet.of(sd), 4)
    out = h.on_controlled_shutdown(df, broker, view, deleting=[])
    rows = out.collect()
    want = reference.on_controlled_shutdown(
        {(p.topic, p.partition): p for p in batch.parts}, states, broker, View(live, sd, 4)
    )
    got_parts, got_states = read_back(rows, topics, W)
    assert got_parts == want.partitions
    assert got_states == want.states
    assert _keys(rows, topics, "remaining") == want.remaining
    assert _keys(rows, topics, h.ELECTED) == want.elected
    scope = h.controlled_shutdown_scope(broker, W)
    assert_untouched_outside(df, out, scope, (*COUNTERS, "remaining"))
