"""Column builders of ``statemachines.columns`` that select rows by driver-side key sets."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from statemachines import schemas as s
from statemachines.columns import in_partitions

KEYS = st.tuples(st.integers(0, 2**31 - 1), st.integers(0, 2**31 - 1))


@settings(max_examples=5, deadline=None)
@given(rows=st.lists(KEYS, min_size=1, max_size=30), chosen=st.lists(KEYS, max_size=30))
def test_in_partitions_matches_exactly_the_listed_pairs(
    spark: SparkSession, rows: list[tuple[int, int]], chosen: list[tuple[int, int]]
) -> None:
    # Swapped pairs share their numbers but not their keys: the packing must keep them apart.
    chosen = chosen + [(p, t) for t, p in rows[:3]]
    df = spark.createDataFrame(rows, f"{s.TOPIC_INDEX} int, {s.PARTITION} int")
    got = sorted(tuple(r) for r in df.where(in_partitions(chosen)).collect())
    assert got == sorted(k for k in rows if k in set(chosen))


def test_in_partitions_of_nothing_selects_nothing(spark: SparkSession) -> None:
    df = spark.createDataFrame([(0, 0)], f"{s.TOPIC_INDEX} int, {s.PARTITION} int")
    assert df.where(in_partitions([])).count() == 0
