"""Driver-side rows as a DataFrame that Spark holds itself.

``spark.createDataFrame(list_of_tuples, schema)`` makes a Python RDD: every job that reads the
frame (each broadcast of a topic-name table, each key selection) starts Python workers to unpickle
it. Handed over as an Arrow table, the rows become a ``LocalRelation`` inside the JVM: no Python
worker, and an empty frame plans to nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType, _parse_datatype_string


def local_frame(
    spark: SparkSession, rows: Iterable[Sequence[Any]], schema: StructType | str
) -> DataFrame:
    """``rows`` (tuples in ``schema``'s field order) as a DataFrame of exactly ``schema``."""
    struct = schema if isinstance(schema, StructType) else _parse_datatype_string(schema)
    assert isinstance(struct, StructType)
    arrow = to_arrow_schema(struct)
    data = list(rows)
    columns = list(zip(*data, strict=True)) if data else [()] * len(arrow)
    arrays = [pa.array(values, type=f.type) for values, f in zip(columns, arrow, strict=True)]
    for array, f in zip(arrays, arrow, strict=True):
        if not f.nullable and array.null_count:
            raise ValueError(f"column {f.name!r} is not nullable but a row has no value for it")
    return spark.createDataFrame(pa.Table.from_arrays(arrays, schema=arrow), struct)
