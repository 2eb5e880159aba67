"""An event's staged rows carry each step's per-row results to the commit
(``controller.commit.pending``): counters add up over the steps, a kept value is the latest."""

from __future__ import annotations

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from controller.commit.pending import RESULTS, fold, unfold


def test_counters_add_up_and_kept_values_are_the_latest_steps(spark: SparkSession) -> None:
    first = spark.createDataFrame(
        [(0, 1, True, "A"), (1, 0, False, None)], "k int, elected int, moved boolean, error string"
    )
    folded = fold(first, ("elected", "moved"), ("error",))
    assert RESULTS in folded.columns and "elected" not in folded.columns
    # The next step sets its own counters and kept values beside the folded ones.
    second = folded.withColumns(
        {"elected": F.lit(1), "shrinks": F.col("k") * 2, "error": F.lit(None).cast("string")}
    )
    rows = {
        r.k: r.asDict()
        for r in unfold(second, ("elected", "moved", "shrinks"), ("error",)).collect()
    }
    assert rows[0] == {"k": 0, "elected": 2, "moved": 1, "shrinks": 0, "error": "A"}
    assert rows[1] == {"k": 1, "elected": 1, "moved": 0, "shrinks": 2, "error": None}


def test_rows_without_results_are_unchanged(spark: SparkSession) -> None:
    df = spark.createDataFrame([(0, 3)], "k int, elected int")
    assert fold(df, (), ()).columns == ["k", "elected"]
    assert unfold(df, ("elected",), ()).collect()[0].elected == 3
