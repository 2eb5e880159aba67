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

# Kafka's Int and Long: broker ids, partition ids, counts and epochs are Int (IntegerType columns),
# offsets, sizes in bytes and times in ms are Long. An input beyond them is not a Kafka value.
INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1

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
        return isinstance(actual, ArrayType) and _same_type(
            actual.elementType, expected.elementType
        )
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


# ---------------------------------------------------------------------------------------------
# The compact layout: how the controller holds the partitions table in memory.
#
# Spark's in-memory cache reads primitive-only tables as column vectors and every other table
# row by row; comparisons over a few int columns also beat higher-order functions over arrays.
# So the working table has one int column per replica *position* and per ISR slot, with a width
# W that is a property of the DataFrame (the number of ``replica_k`` columns), not a constant:
# any replication factor fits, and a reassignment that needs a larger set widens the table.
#
#   topic_index                 int   index into the small topics table (name, config)
#   partition                   int
#   replica_0 .. replica_{W-1}  int   AR in order; EMPTY_SLOT past the end
#   isr_0 .. isr_{W-1}          int   the ISR as broker ids in ISR order; EMPTY_SLOT past the end
#   replica_state_0 .. _{W-1}   byte  ReplicaState code of the replica at that position
#   adding_mask, removing_mask  int   bit k set: replica_k is an adding / removing replica
#                                     (both lists are sub-sequences of AR in Kafka, so the
#                                     bit masks keep their order)
#   leader, leader_epoch, zk_version, controller_epoch   int
#   state_code                  byte  PartitionState code
#
# zk_version == NO_ZK_VERSION means no state znode exists yet (no cached leadership).
# ---------------------------------------------------------------------------------------------

TOPIC_INDEX = "topic_index"
ADDING_MASK = "adding_mask"
REMOVING_MASK = "removing_mask"
STATE_CODE = "state_code"
EMPTY_SLOT = -1
NO_ZK_VERSION = -1
MAX_WIDTH = 31  # position bit masks are ints

_REPLICA_PREFIX = "replica_"
_ISR_PREFIX = "isr_"
_REPLICA_STATE_PREFIX = "replica_state_"


def replica_col(k: int) -> str:
    return f"{_REPLICA_PREFIX}{k}"


def isr_col(k: int) -> str:
    return f"{_ISR_PREFIX}{k}"


def replica_state_col(k: int) -> str:
    return f"{_REPLICA_STATE_PREFIX}{k}"


def width(df: DataFrame) -> int:
    """The number of replica positions of a compact table (read from its schema; no job)."""
    return sum(
        1
        for name in df.columns
        if name.startswith(_REPLICA_PREFIX) and name[len(_REPLICA_PREFIX) :].isdigit()
    )


def compact_columns(w: int) -> list[str]:
    """The compact layout's columns, in order, for width ``w``."""
    return [
        TOPIC_INDEX,
        PARTITION,
        *(replica_col(k) for k in range(w)),
        *(isr_col(k) for k in range(w)),
        *(replica_state_col(k) for k in range(w)),
        ADDING_MASK,
        REMOVING_MASK,
        LEADER,
        LEADER_EPOCH,
        ZK_VERSION,
        CONTROLLER_EPOCH,
        STATE_CODE,
    ]


def compact_schema(w: int) -> StructType:
    from pyspark.sql.types import ByteType

    def kind(name: str) -> DataType:
        return (
            ByteType()
            if name == STATE_CODE or name.startswith(_REPLICA_STATE_PREFIX)
            else IntegerType()
        )

    return StructType([StructField(n, kind(n), nullable=False) for n in compact_columns(w)])


def check_compact(df: DataFrame) -> DataFrame:
    """Raise unless ``df`` is a compact partitions table of some width ≥ 1 (no job)."""
    w = width(df)
    if w < 1:
        raise SchemaMismatchError("compact partitions table: no replica_k columns")
    return check_schema(df, compact_schema(w), f"compact partitions (width {w})")


TOPICS_SCHEMA = StructType(
    [
        StructField(TOPIC_INDEX, IntegerType(), nullable=False),
        StructField(TOPIC, StringType(), nullable=False),
    ]
)
