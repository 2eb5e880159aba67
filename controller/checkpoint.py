"""Local checkpoints that cut both halves of a plan's history: its lineage and its size estimate.

Spark's checkpoint keeps the estimated statistics of the plan it replaces, and Spark estimates a
join's size as the product of its inputs' sizes. A table rebuilt from itself through a join at
every generation — the controller's partitions, the diff of two generations, the in-memory
ZooKeeper's partition region — would carry an estimate whose digits grow exponentially with the
generations, and planning one event would take minutes after a few dozen events. Here the
checkpointed rows are re-wrapped as a plain RDD relation, whose estimate is Spark's default.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql.classic.dataframe import DataFrame as ClassicDataFrame


def local_checkpoint(df: DataFrame, eager: bool = True) -> DataFrame:
    """``df.localCheckpoint(eager)``, forgetting ``df``'s size estimate (see the module doc)."""
    checkpointed = df.localCheckpoint(eager)
    spark = df.sparkSession
    jspark = spark._jsparkSession  # type: ignore[attr-defined]
    rows = checkpointed._jdf.queryExecution().toRdd()  # type: ignore[attr-defined]
    schema = jspark.parseDataType(df.schema.json())
    return ClassicDataFrame(jspark.internalCreateDataFrame(rows, schema, False), spark)
