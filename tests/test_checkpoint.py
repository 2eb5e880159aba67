"""Checkpointed generations forget the size estimate of the plan they replace, and free their
blocks when released."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from controller.commit.checkpoint import _BLOCKS, local_checkpoint, release

LONG_MAX_DIGITS = len(str(2**63 - 1))


def estimate_digits(df: DataFrame) -> int:
    stats = df._jdf.queryExecution().optimizedPlan().stats()  # type: ignore[attr-defined]
    return len(str(stats.sizeInBytes()))


def test_a_table_rebuilt_through_joins_keeps_a_bounded_estimate(spark: SparkSession) -> None:
    names = spark.createDataFrame([(i, f"n{i}") for i in range(7)], "v long, name string")
    table = spark.range(1_000).withColumn("v", F.col("id") % 7)
    for generation in range(12):
        joined = table.join(F.broadcast(names), "v", "left").select("id", "v")
        table = local_checkpoint(joined, eager=generation % 2 == 0)
    # Spark's own checkpoint would carry 7^12 times the first estimate by now.
    assert estimate_digits(table) <= LONG_MAX_DIGITS
    assert table.count() == 1_000
    assert table.agg(F.sum("v")).first()[0] == sum(i % 7 for i in range(1_000))


def persisted_rdd_ids(spark: SparkSession) -> set[int]:
    return {i.id() for i in spark.sparkContext._jsc.sc().getRDDStorageInfo()}  # type: ignore[union-attr]


def checkpointed_rdd_id(df: DataFrame) -> int:
    return _BLOCKS[df]


def test_release_frees_the_blocks_at_once_and_only_of_checkpointed_frames(
    spark: SparkSession,
) -> None:
    kept = local_checkpoint(spark.range(100).withColumn("v", F.col("id") * 2))
    dropped = local_checkpoint(spark.range(100).withColumn("v", F.col("id") * 3))
    ids = checkpointed_rdd_id(kept), checkpointed_rdd_id(dropped)
    assert set(ids) <= persisted_rdd_ids(spark)
    release(dropped)
    release(dropped)  # a second release, and frames never checkpointed, are no-ops
    release(spark.range(3))
    release(None)
    assert ids[0] in persisted_rdd_ids(spark)
    assert ids[1] not in persisted_rdd_ids(spark)
    assert kept.agg(F.sum("v")).first()[0] == 2 * sum(range(100))


def test_checkpointed_rows_are_held_serialized(spark: SparkSession) -> None:
    """One object per row filled the old generation at 1e7 rows (see the module doc): the blocks
    are bytes, kept in memory and spilled to disk, and read back whole."""
    df = local_checkpoint(spark.range(1000).withColumn("v", F.col("id") * 5))
    rdd_id = checkpointed_rdd_id(df)
    persisted = spark.sparkContext._jsc.sc().getPersistentRDDs()
    level = persisted.apply(rdd_id).getStorageLevel()
    assert (level.useMemory(), level.useDisk(), level.deserialized()) == (True, True, False)
    assert df.agg(F.sum("v")).first()[0] == 5 * sum(range(1000))
