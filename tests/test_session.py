"""The session factory's defaults that the controller's speed and results depend on."""

from __future__ import annotations

from pyspark.errors.utils import is_debugging_enabled
from pyspark.sql import SparkSession


def test_session_runs_in_utc_without_dataframe_debugging(spark: SparkSession) -> None:
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    # Debugging records every Column call's Python call site with extra JVM round trips.
    assert spark.conf.get("spark.python.sql.dataFrameDebugging.enabled") == "false"
    assert not is_debugging_enabled()
