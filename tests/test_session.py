"""The session factory's defaults that the controller's speed and results depend on."""

from __future__ import annotations

from pyspark.errors.utils import is_debugging_enabled
from pyspark.sql import SparkSession
from pyspark.sql import functions as F


def test_session_runs_in_utc_without_dataframe_debugging(spark: SparkSession) -> None:
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    # Debugging records every Column call's Python call site with extra JVM round trips.
    assert spark.conf.get("spark.python.sql.dataFrameDebugging.enabled") == "false"
    assert not is_debugging_enabled()


def test_compiled_plans_stay_cached_beyond_sparks_default_hundred(spark: SparkSession) -> None:
    # The controller's events use more than 100 distinct plans between two of the same kind;
    # with Spark's default cache each event compiled its unchanged plans again.
    metrics = spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics  # type: ignore[union-attr]
    plans = [spark.range(3).select((F.col("id") * k).alias(f"c{k}")) for k in range(120)]
    for plan in plans:
        plan.collect()
    before = metrics.METRIC_COMPILATION_TIME().getCount()
    plans[0].collect()  # the least recently used of 120
    assert metrics.METRIC_COMPILATION_TIME().getCount() == before
