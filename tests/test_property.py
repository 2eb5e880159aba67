"""Hypothesis: the Spark path equals the reference oracle on random clusters.

Each hypothesis example is a batch of independent small clusters merged into one DataFrame: every
cluster gets its own broker-id range and topics, so one live/shutting-down set serves them all and
each example costs one Spark job.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from statemachines import election, reference
from statemachines import partition_states as ps
from statemachines import replica_states as rs
from statemachines.brokers import BrokerSet, ClusterView
from statemachines.partition_states import PartitionState
from statemachines.rebalance import imbalance_ratios
from statemachines.reference import View
from statemachines.replica_states import ReplicaState
from tests.frames import compact_frame, read_back
from tests.strategies import Batch, W, batches

SETTINGS = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])


STRATEGIES = {
    "offline": (
        lambda: election.OfflinePartitionLeaderElectionStrategy(unclean_column="unclean"),
        lambda b: reference.offline_strategy(unclean_by_topic={t: True for t in b.unclean_topics}),
    ),
    "offline_allow_unclean": (
        lambda: election.OfflinePartitionLeaderElectionStrategy(allow_unclean=True),
        lambda b: reference.offline_strategy(allow_unclean=True),
    ),
    "reassign": (
        election.ReassignPartitionLeaderElectionStrategy,
        lambda b: reference.elect_reassign,
    ),
    "preferred": (
        election.PreferredReplicaPartitionLeaderElectionStrategy,
        lambda b: reference.elect_preferred,
    ),
    "controlled_shutdown": (
        election.ControlledShutdownPartitionLeaderElectionStrategy,
        lambda b: reference.elect_controlled_shutdown,
    ),
}


def _check_online(spark: SparkSession, batch: Batch, kind: str) -> None:
    spark_strategy, ref_strategy = STRATEGIES[kind]
    df, topics = compact_frame(spark, batch.parts, w=W)
    unclean_idx = [topics[t] for t in batch.unclean_topics]
    df = df.withColumn("unclean", F.col("topic_index").isin(unclean_idx))
    sel = [(topics[t], p) for t, p in batch.selected]
    targets = F.lit(False)
    for ti, p in sel:
        targets = targets | ((F.col("topic_index") == ti) & (F.col("partition") == p))
    view = ClusterView(BrokerSet.of(batch.live), BrokerSet.of(batch.shutting_down), 7)
    result = ps.handle_state_changes(
        df, targets, PartitionState.OnlinePartition, view, spark_strategy()
    )
    rows = result.outcomes.collect()
    got, _ = read_back(rows, topics, W)

    parts = {(p.topic, p.partition): p for p in batch.parts}
    want = reference.handle_partition_state_changes(
        parts,
        sorted(batch.selected),
        PartitionState.OnlinePartition,
        View(batch.live, batch.shutting_down, 7),
        ref_strategy(batch),
    )
    assert got == want.partitions
    names = {i: t for t, i in topics.items()}
    by_key = {(names[r.topic_index], r.partition): r for r in rows}
    assert {k for k, r in by_key.items() if r.outcome == ps.Outcome.INVALID} == set(want.invalid)
    assert {k for k, r in by_key.items() if r.outcome == ps.Outcome.FAILED} == set(want.failed)
    for key, e in want.elected.items():
        r = by_key[key]
        recipients = tuple(r[f"replica_{k}"] for k in range(W) if r.lair_recipients & (1 << k))
        assert recipients == tuple(e.recipients), key
        assert r.unclean == e.unclean, key


@SETTINGS
@given(batches())
def test_offline_election_matches_reference(spark: SparkSession, batch: Batch) -> None:
    _check_online(spark, batch, "offline")


@SETTINGS
@given(batches())
def test_offline_election_allow_unclean_matches_reference(
    spark: SparkSession, batch: Batch
) -> None:
    _check_online(spark, batch, "offline_allow_unclean")


@SETTINGS
@given(batches())
def test_reassign_election_matches_reference(spark: SparkSession, batch: Batch) -> None:
    _check_online(spark, batch, "reassign")


@SETTINGS
@given(batches())
def test_preferred_election_matches_reference(spark: SparkSession, batch: Batch) -> None:
    _check_online(spark, batch, "preferred")


@SETTINGS
@given(batches())
def test_controlled_shutdown_election_matches_reference(spark: SparkSession, batch: Batch) -> None:
    _check_online(spark, batch, "controlled_shutdown")


@st.composite
def replica_batches(draw: st.DrawFn) -> tuple[Batch, dict, ReplicaState]:
    batch = draw(batches())
    states = {
        (p.topic, p.partition, r): draw(st.sampled_from(list(ReplicaState)[:-1]))
        for p in batch.parts
        for r in p.replicas
    }
    return batch, states, draw(st.sampled_from(list(ReplicaState)))


@SETTINGS
@given(replica_batches())
def test_replica_transitions_match_reference(spark: SparkSession, case: tuple) -> None:
    """The failed brokers' replicas (dead and shutting-down ids) move to a random target state."""
    batch, states, target = case
    gone = BrokerSet.of({r for p in batch.parts for r in p.replicas} - batch.live)
    df, topics = compact_frame(spark, batch.parts, states, w=W)
    result = rs.handle_state_changes(df, gone, target)
    got_parts, got_states = read_back(result.partitions.collect(), topics, W)
    # Positions emptied by NonExistentReplica are not replicas any more.
    got_states = {k: v for k, v in got_states.items()}
    keys = sorted(k for k in states if k[2] in gone)
    want = reference.handle_replica_state_changes(
        {(p.topic, p.partition): p for p in batch.parts}, states, keys, target
    )
    assert got_parts == want.partitions
    assert got_states == want.states
    names = {i: t for t, i in topics.items()}
    invalid = {
        (names[r.topic_index], r.partition, r.broker): r.current_state
        for r in result.invalid.collect()
    }
    assert invalid == {k: v.name for k, v in want.invalid.items()}
    failed = {(names[r.topic_index], r.partition, r.broker) for r in result.failed.collect()}
    assert failed == want.failed


@SETTINGS
@given(batches())
def test_imbalance_ratios_match_reference(spark: SparkSession, batch: Batch) -> None:
    parts = [replace(p, state=PartitionState.OnlinePartition) for p in batch.parts]
    df, _ = compact_frame(spark, parts, w=W)
    got = {r.broker: r.imbalance_ratio for r in imbalance_ratios(df).collect()}
    assert got == reference.imbalance_ratios(parts)
