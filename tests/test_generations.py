"""The committed partitions table as a base and a delta (``controller.commit.generations``): rows
in place of their keys', and the delta's keys broadcast only while the delta is within its bound.
One commit may change more rows than the bound (a rack failing changes every row): broadcasting
those keys built a hash table of ten million keys on the driver and ran it out of memory."""

from __future__ import annotations

import pytest
from pyspark.sql import DataFrame, SparkSession

from controller.commit import generations
from controller.commit.checkpoint import local_checkpoint
from controller.commit.generations import Generations

SCHEMA = "topic_index int, partition int, leader int"


def _frame(spark: SparkSession, rows: list[tuple[int, int, int]]) -> DataFrame:
    return local_checkpoint(spark.createDataFrame(rows, SCHEMA))


def _broadcasts(df: DataFrame) -> bool:
    """Whether ``df``'s plan asks to broadcast a side (the hint, before Spark's own choice)."""
    return "strategy=broadcast" in df._jdf.queryExecution().analyzed().toString()


def _leaders(df: DataFrame) -> dict[tuple[int, int], int]:
    return {(r[0], r[1]): r[2] for r in df.collect()}


@pytest.mark.parametrize("changed", [3, 12])
def test_changed_rows_replace_theirs_broadcast_only_within_the_bound(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch, changed: int
) -> None:
    monkeypatch.setattr(generations, "DELTA_MAX_ROWS", 5)
    store = Generations()
    base = _frame(spark, [(0, p, 1) for p in range(20)])
    store.install(base, base.columns)
    first = _frame(spark, [(0, p, 2) for p in range(2)])
    store.extend(first, first, 2)
    assert store.fits(20) and _broadcasts(store.table)
    rows = _frame(spark, [(0, p, 3) for p in range(1, 1 + changed)])
    store.extend(rows, rows, changed)
    table = store.table
    expected = {(0, p): 1 for p in range(20)} | {(0, 0): 2}
    expected |= {(0, p): 3 for p in range(1, 1 + changed)}
    assert _leaders(table) == expected
    # Past the bound the keys meet the base (and the old delta) by a shuffle.
    assert _broadcasts(table) == (2 + changed <= 5)
    if not store.fits(20):
        store.fold(local_checkpoint(table))
        assert store.delta is None and _leaders(store.table) == expected


def test_a_delta_past_the_cores_share_of_rows_keeps_its_partitions_bounded(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit that changes every row of 1e8 must not put them all in two tasks' blocks: the
    delta keeps at most ``DELTA_PARTITION_ROWS`` per partition (where it has that many)."""
    monkeypatch.setattr(generations, "DELTA_PARTITION_ROWS", 4)
    store = Generations()
    base = _frame(spark, [(0, p, 1) for p in range(40)])
    store.install(base, base.columns)
    few = local_checkpoint(
        spark.createDataFrame([(0, p, 2) for p in range(6)], SCHEMA).repartition(8)
    )
    store.extend(few, few, 6)
    assert store.delta is not None
    assert store.delta.rdd.getNumPartitions() == spark.sparkContext.defaultParallelism
    every = local_checkpoint(
        spark.createDataFrame([(0, p, 3) for p in range(40)], SCHEMA).repartition(16)
    )
    store.extend(every, every, 40)
    assert store.delta.rdd.getNumPartitions() == (6 + 40 + 3) // 4
    assert _leaders(store.table) == {(0, p): 3 for p in range(40)}
