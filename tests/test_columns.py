"""Column builders of ``statemachines.columns``: key-set selections and slot arrays."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from statemachines import schemas as s
from statemachines.columns import in_partitions, present

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


SLOT = st.one_of(st.none(), st.just(s.EMPTY_SLOT), st.integers(0, 5))


@settings(max_examples=5, deadline=None)
@given(rows=st.lists(st.tuples(SLOT, SLOT, SLOT, SLOT), min_size=1, max_size=20))
def test_present_keeps_the_set_slots_in_order(
    spark: SparkSession, rows: list[tuple[int | None, ...]]
) -> None:
    df = spark.createDataFrame(rows, "a int, b int, c int, d int")
    got = [r[0] for r in df.select(present([F.col(c) for c in "abcd"])).collect()]
    assert got == [[v for v in row if v is not None and v != s.EMPTY_SLOT] for row in rows]
