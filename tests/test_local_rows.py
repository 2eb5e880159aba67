"""``statemachines.local_rows.local_frame``: driver rows as a DataFrame Spark holds itself."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from controller.partition_store.rows import INTERNAL_SCHEMA
from statemachines.local_rows import local_frame

SCHEMA = "k int, name string, isr array<int>, data binary, zxid bigint, ok boolean"
INTS = st.integers(-(2**31), 2**31 - 1)
ROWS = st.tuples(
    st.none() | INTS,
    st.none() | st.text(max_size=8),
    st.none() | st.lists(INTS, max_size=4),
    st.none() | st.binary(max_size=8),
    st.none() | st.integers(-(2**63), 2**63 - 1),
    st.none() | st.booleans(),
)


@settings(max_examples=5, deadline=None)
@given(rows=st.lists(ROWS, max_size=20))
def test_local_frame_holds_the_rows_spark_would(spark: SparkSession, rows: list[tuple]) -> None:
    ours = local_frame(spark, rows, SCHEMA)
    theirs = spark.createDataFrame(rows, SCHEMA)
    assert ours.schema == theirs.schema
    assert ours.collect() == theirs.collect()


def test_local_frame_keeps_a_schema_with_non_nullable_fields(spark: SparkSession) -> None:
    assert local_frame(spark, [], INTERNAL_SCHEMA).schema == INTERNAL_SCHEMA
    assert local_frame(spark, [], INTERNAL_SCHEMA[:2]).count() == 0
    with pytest.raises(ValueError, match="'partition' is not nullable"):
        local_frame(spark, [("a", None)], INTERNAL_SCHEMA[:2])
