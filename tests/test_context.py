"""ControllerContext.commit: one action swaps the generation and yields the gauges."""

from __future__ import annotations

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from controller.context import ControllerContext, LiveBroker
from controller.diff import with_previous
from statemachines.partition_states import PartitionState
from statemachines.reference import Partition
from tests.frames import compact_frame

PARTS = [
    Partition("a", 0, (1, 2), isr=(1, 2), leader=1),
    Partition("a", 1, (2, 1), isr=(2, 1), leader=1),  # not on its preferred replica
    Partition("b", 0, (3,), isr=(3,), leader=-1, state=PartitionState.OfflinePartition),
    Partition("b", 1, (3, 1), state=PartitionState.NewPartition, zk_version=-1),
]


def _context(spark: SparkSession) -> ControllerContext:
    ctx = ControllerContext(spark, checkpoint_interval=2)
    for name, n in (("a", 2), ("b", 2)):
        ctx.add_topic(name, n)
    ctx.live_brokers = {b: LiveBroker(b) for b in (1, 2)}
    return ctx


def test_commit_computes_gauges_and_swaps_generations(spark: SparkSession) -> None:
    ctx = _context(spark)
    df, _ = compact_frame(spark, PARTS)
    gauges = ctx.commit(df, "bootstrap")
    assert ctx.generation == 1 and ctx.partitions is not None
    assert gauges.global_partition_count == 3  # b-1 has no state znode
    assert gauges.offline_partitions_count == 1
    assert gauges.preferred_replica_imbalance_count == 2  # a-1 and leaderless b-0
    assert gauges.global_topic_count == 2
    gauges = ctx.commit(ctx.partitions.withColumn("elected", F.lit(1)), "again", ["elected"])
    assert gauges.counters == {"elected": 4} and ctx.generation == 2
    # Each generation's plan starts at its checkpoint: lineage does not grow per event.
    assert "LogicalRDD" in ctx.partitions._jdf.queryExecution().logical().toString()
    assert ctx.partitions.count() == 4


def test_topics_queued_for_deletion_leave_the_gauges(spark: SparkSession) -> None:
    ctx = _context(spark)
    b = ctx.topics["b"].index
    ctx.deletion.topics_to_be_deleted.add(b)
    df, _ = compact_frame(spark, PARTS)
    gauges = ctx.commit(df)
    # Queued: out of the imbalance count at once; still offline until deletion starts (§16.1).
    assert gauges.preferred_replica_imbalance_count == 1
    assert gauges.offline_partitions_count == 1
    assert (gauges.topics_to_delete_count, gauges.replicas_to_delete_count) == (1, 3)
    ctx.deletion.topics_with_deletion_started.add(b)
    assert ctx.commit(df).offline_partitions_count == 0


def test_under_replicated_and_lagging_followers(spark: SparkSession) -> None:
    ctx = _context(spark)
    parts = [
        Partition("a", 0, (1, 2), isr=(1,), leader=1),  # 2 is live and out of the ISR: lagging
        Partition("a", 1, (1, 3), isr=(1,), leader=1),  # 3 is not live: under-replicated only
        Partition("b", 0, (2, 1), isr=(2, 1), leader=2),
    ]
    gauges = ctx.commit(compact_frame(spark, parts)[0])
    assert (gauges.under_replicated_partitions, gauges.lagging_followers) == (2, 1)


def test_view_excludes_shutting_down_brokers(spark: SparkSession) -> None:
    ctx = _context(spark)
    ctx.shutting_down.add(2)
    view = ctx.view()
    assert view.live.ids == frozenset({1}) and view.shutting_down.ids == frozenset({2})
    ctx.reset()
    assert ctx.epoch == 0 and not ctx.live_brokers and ctx.partitions is None


def test_a_deleted_topics_index_is_not_given_to_the_next_topic(spark: SparkSession) -> None:
    ctx = _context(spark)
    ctx.remove_topics({"b"})
    assert ctx.add_topic("c", 1).index == 2  # "b" had 1: rows still keyed by it stay apart
    assert ctx.topic_indices({"a", "c"}) == [0, 2]


def test_load_installs_a_generation_zero_that_the_next_commit_diffs_without_a_join(
    spark: SparkSession,
) -> None:
    ctx = _context(spark)
    ctx.load(compact_frame(spark, PARTS)[0])
    assert (ctx.generation, ctx.rows) == (0, len(PARTS)) and ctx.committed is not None
    ctx.commit(with_previous(ctx.partitions, 0).withColumn("leader_epoch", F.lit(9)))
    assert ctx.stamped and ctx.generation == 1
