"""ControllerContext.commit: one action swaps the generation and yields the gauges."""

from __future__ import annotations

from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F

from controller.commit.diff import KEY, with_previous
from controller.commit.gauges import Gauges
from controller.context import ControllerContext, LiveBroker
from statemachines import schemas as s
from statemachines.layout import widen
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
    ctx.set_live_brokers(LiveBroker(b) for b in (1, 2))
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
    ctx.mark_shutting_down(2)
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


def _gauges_of(spark: SparkSession, ctx: ControllerContext) -> Gauges:
    """The gauges of ``ctx``'s committed rows, counted afresh by a new context."""
    fresh = _context(spark)
    fresh.live_brokers, fresh.shutting_down = dict(ctx.live_brokers), set(ctx.shutting_down)
    assert ctx.partitions is not None
    return fresh.commit(ctx.partitions)


def test_a_stamped_commit_writes_only_the_rows_it_changed(spark: SparkSession) -> None:
    ctx = _context(spark)
    ctx.load(compact_frame(spark, PARTS)[0])
    base = ctx.store.base
    a1 = (F.col("topic_index") == 0) & (F.col("partition") == 1)
    moved = with_previous(ctx.partitions, 0).withColumn(
        "leader", F.when(a1, F.lit(2)).otherwise(F.col("leader"))
    )
    ctx.commit(moved)
    # The base stays; the delta holds a-1 alone, and the table reads it in place of the base's.
    assert ctx.stamped and ctx.store.base is base and ctx.store.delta is not None
    assert [(r[0], r[1], r[2]) for r in ctx.store.delta.select(*KEY, "leader").collect()] == [
        (0, 1, 2)
    ]
    assert sorted(r[0] for r in ctx.partitions.select("leader").collect()) == [-1, -1, 1, 2]
    assert ctx.partitions.count() == len(PARTS)
    # The rows of named keys read the delta's row in place of the base's, once per key.
    named = spark.createDataFrame(
        [(0, 1), (0, 1), (1, 0), (5, 0)], "topic_index int, partition int"
    )
    for small in (True, False):  # the keys broadcast, or joined by a shuffle
        rows = ctx.store.rows_named(named, small).select(*KEY, "leader").collect()
        assert sorted(tuple(r) for r in rows) == [(0, 1, 2), (1, 0, -1)]


def test_gauges_moved_by_the_changed_rows_equal_a_recount(spark: SparkSession) -> None:
    # Same brokers and deletions from one commit to the next: the gauges are the last ones moved
    # by what the changed rows add and what their replaced values took away.
    ctx = _context(spark)
    ctx.load(compact_frame(spark, PARTS)[0])
    changes = [
        ("leader", (F.col("topic_index") == 0) & (F.col("partition") == 1), F.lit(2)),
        ("isr_1", F.col("topic_index") == 0, F.lit(-1)),  # a-0, a-1 under-replicated
        ("state_code", F.col("topic_index") == 1, F.lit(1).cast("byte")),  # b online
    ]
    for column, where, value in changes:
        table = with_previous(ctx.partitions, ctx.generation)
        changed = F.when(where, value).otherwise(F.col(column))
        gauges = ctx.commit(table.withColumn(column, changed))
        assert ctx.stamped and gauges == _gauges_of(spark, ctx)


def test_a_partial_commit_keeps_the_rows_it_leaves_out(spark: SparkSession) -> None:
    ctx = _context(spark)
    ctx.load(compact_frame(spark, PARTS)[0])
    a0 = (F.col("topic_index") == 0) & (F.col("partition") == 0)
    scoped = with_previous(ctx.partitions.where(a0), 0).withColumn("leader_epoch", F.lit(7))
    gauges = ctx.commit(scoped, partial=True)
    assert ctx.stamped and ctx.rows == len(PARTS) and ctx.partitions.count() == len(PARTS)
    epochs = {(r[0], r[1]): r[2] for r in ctx.partitions.select(*KEY, "leader_epoch").collect()}
    assert epochs[(0, 0)] == 7 and sorted(epochs.values()).count(7) == 1
    assert gauges == _gauges_of(spark, ctx)
    # A delta past its bound folds into a new base.
    ctx.store.delta_rows = 10**9
    scoped = with_previous(ctx.partitions.where(a0), 1).withColumn("leader_epoch", F.lit(8))
    assert ctx.commit(scoped, partial=True) == _gauges_of(spark, ctx)
    assert ctx.stamped and ctx.store.delta is None and ctx.partitions.count() == len(PARTS)
    # Rows carried from an older generation (their previous values unknown): every row is
    # written, those left out too.
    stale = with_previous(ctx.partitions.where(a0), 1).withColumn("leader_epoch", F.lit(9))
    ctx.commit(stale, partial=True)
    assert not ctx.stamped and ctx.store.delta is None and ctx.partitions.count() == len(PARTS)
    epochs = {(r[0], r[1]): r[2] for r in ctx.partitions.select(*KEY, "leader_epoch").collect()}
    assert epochs[(0, 0)] == 9 and sorted(epochs.values()).count(9) == 1


def test_a_table_is_read_without_the_positions_no_row_uses(spark: SparkSession) -> None:
    ctx = _context(spark)
    ctx.load(compact_frame(spark, PARTS)[0])  # width 2
    a0 = (F.col("topic_index") == 0) & (F.col("partition") == 0)

    def commit(column: str, value: object, where: Column = a0) -> Gauges:
        table = with_previous(ctx.partitions, ctx.generation)
        return ctx.commit(table.withColumn(column, F.when(where, value).otherwise(F.col(column))))

    # A move widens the table to 4 (every row written); only 3 positions are in use.
    table = widen(with_previous(ctx.partitions, 0), 4)
    ctx.commit(table.withColumn("replica_2", F.when(a0, 3).otherwise(F.col("replica_2"))))
    assert s.width(ctx.partitions) == 3 and not ctx.stamped
    # The move's replica leaves a-0 (a row of the delta, still 3 wide): 2 positions again.
    gauges = commit("replica_2", F.lit(s.EMPTY_SLOT))
    assert ctx.stamped and ctx.store.delta is not None and s.width(ctx.partitions) == 2
    assert gauges == _gauges_of(spark, ctx)
    # The next commit's delta joins the narrowed one.
    gauges = commit("leader_epoch", F.lit(5), F.col("topic_index") == 1)
    assert ctx.stamped and gauges == _gauges_of(spark, ctx)
    rows = ctx.partitions.select(*KEY, "replica_0", "replica_1", "leader_epoch").collect()
    assert sorted(tuple(r) for r in rows) == [
        (0, 0, 1, 2, 0),
        (0, 1, 2, 1, 0),
        (1, 0, 3, -1, 5),
        (1, 1, 3, 1, 5),
    ]
