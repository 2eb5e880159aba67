"""Checkpointed generations forget the size estimate of the plan they replace."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from controller.checkpoint import local_checkpoint

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
