"""The cluster-state model: column names and ``StructType`` constants, defined once.

partitions — one row per partition:
    topic, partition, replicas (AR, ordered; during a reassignment the full set RS),
    adding_replicas, removing_replicas, isr (ordered), leader (-1 = none), leader_epoch,
    zk_version (the state znode's data version), controller_epoch, state (Kafka's state name).
replicas — one row per (partition, broker): topic, partition, broker, state.

This is the public shape: what outputs, importers and users see. ``check_schema`` compares a
DataFrame's schema against it without running a Spark job.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql.types import (
    ArrayType,
    DataType,
    IntegerType,
    StringType,
    StructField,
    StructType,
)

TOPIC = "topic"
PARTITION = "partition"
REPLICAS = "replicas"
ADDING_REPLICAS = "adding_replicas"
REMOVING_REPLICAS = "removing_replicas"
ISR = "isr"
LEADER = "leader"
LEADER_EPOCH = "leader_epoch"
ZK_VERSION = "zk_version"
CONTROLLER_EPOCH = "controller_epoch"
STATE = "state"
BROKER = "broker"

NO_LEADER = -1
LEADER_DURING_DELETE = -2
NO_EPOCH = -1
EPOCH_DURING_DELETE = -2
INITIAL_LEADER_EPOCH = 0
INITIAL_ZK_VERSION = 0

_BROKER_LIST = ArrayType(IntegerType(), containsNull=False)

PARTITIONS_SCHEMA = StructType(
    [
        StructField(TOPIC, StringType(), nullable=False),
        StructField(PARTITION, IntegerType(), nullable=False),
        StructField(REPLICAS, _BROKER_LIST, nullable=False),
        StructField(ADDING_REPLICAS, _BROKER_LIST, nullable=False),
        StructField(REMOVING_REPLICAS, _BROKER_LIST, nullable=False),
        StructField(ISR, _BROKER_LIST, nullable=False),
        StructField(LEADER, IntegerType(), nullable=False),
        StructField(LEADER_EPOCH, IntegerType(), nullable=False),
        StructField(ZK_VERSION, IntegerType(), nullable=False),
        StructField(CONTROLLER_EPOCH, IntegerType(), nullable=False),
        StructField(STATE, StringType(), nullable=False),
    ]
)

REPLICAS_SCHEMA = StructType(
    [
        StructField(TOPIC, StringType(), nullable=False),
        StructField(PARTITION, IntegerType(), nullable=False),
        StructField(BROKER, IntegerType(), nullable=False),
        StructField(STATE, StringType(), nullable=False),
    ]
)

PARTITION_KEY = (TOPIC, PARTITION)
REPLICA_KEY = (TOPIC, PARTITION, BROKER)


class SchemaMismatchError(ValueError):
    """A DataFrame does not have the columns and types of the cluster-state model."""


def _same_type(actual: DataType, expected: DataType) -> bool:
    # Nullability is not part of the contract: Spark widens it freely across unions and joins.
    if isinstance(expected, ArrayType):
        return isinstance(actual, ArrayType) and _same_type(actual.elementType, expected.elementType)
    return type(actual) is type(expected)


def schema_problems(actual: StructType, expected: StructType) -> list[str]:
    """Every missing or mistyped column of ``expected`` in ``actual``; extra columns are allowed."""
    fields = {f.name: f.dataType for f in actual.fields}
    problems = []
    for field in expected.fields:
        if field.name not in fields:
            problems.append(f"missing column '{field.name}' ({field.dataType.simpleString()})")
        elif not _same_type(fields[field.name], field.dataType):
            problems.append(
                f"column '{field.name}' is {fields[field.name].simpleString()}, "
                f"expected {field.dataType.simpleString()}"
            )
    return problems


def check_schema(df: DataFrame, expected: StructType, what: str) -> DataFrame:
    """Return ``df`` unchanged if it has every column of ``expected``; raise otherwise. No job runs."""
    problems = schema_problems(df.schema, expected)
    if problems:
        raise SchemaMismatchError(f"{what} table: " + "; ".join(problems))
    return df


def check_partitions(df: DataFrame) -> DataFrame:
    return check_schema(df, PARTITIONS_SCHEMA, "partitions")


def check_replicas(df: DataFrame) -> DataFrame:
    return check_schema(df, REPLICAS_SCHEMA, "replicas")
