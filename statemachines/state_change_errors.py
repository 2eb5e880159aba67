"""The transitions an event tried and Kafka would log as ERRORs, carried per partition row.

Kafka's state machines leave a partition or replica unchanged when its transition is invalid
(wrong previous state) or fails (no leader could be elected, no live replica to initialise, a
leader asked to become NewReplica), and write an ERROR line to the state-change log (spec §16.2).
Such a transition leaves no trace in the next generation, so both state machines append one
entry per rejected transition to the array column ``state_change_errors`` of their outcomes
(appending to the input's, when a handler chains several transitions). The controller commits
the column with the generation and renders the ERROR lines from it.

An entry is ``(broker, current, target, failure)``: ``broker`` is null for a partition
transition; ``current``/``target`` are state codes; ``failure`` is null for an invalid transition
(Kafka's IllegalStateException, whose message the log renders from the states) and otherwise the
StateChangeFailedException message, in which the log substitutes ``PLACEHOLDERS``. The column is
null on rows without errors, so carrying it costs nothing where nothing failed.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, ByteType, IntegerType, StringType, StructField, StructType

from statemachines import schemas as s

ERRORS = "state_change_errors"
BROKER, CURRENT, TARGET, FAILURE = s.BROKER, "current", "target", "failure"
ERROR_TYPE = StructType(
    [
        StructField(BROKER, IntegerType()),
        StructField(CURRENT, ByteType()),
        StructField(TARGET, ByteType()),
        StructField(FAILURE, StringType()),
    ]
)
ERRORS_TYPE = ArrayType(ERROR_TYPE)

# Filled in when the line is rendered: the statemachines know neither names nor the controller.
PARTITION = "{partition}"  # the topic-partition, e.g. orders-0
CONTROLLER = "{controller}"  # the controller's broker id
EPOCH = "{epoch}"  # the controller epoch
LIVE = "{live}"  # the live broker ids, rendered as Scala's Set(1, 2, 3)
PLACEHOLDERS = (PARTITION, CONTROLLER, EPOCH, LIVE)

# How the ERROR lines render an entry: after any transition line of the same partition or
# replica (their ``step``), with the exception Kafka logs beside them.
ERROR_STEP = 1000
ILLEGAL_STATE = "java.lang.IllegalStateException"
STATE_CHANGE_FAILED = "kafka.common.StateChangeFailedException"


def entry(broker: Column | None, current: Column, target: int, failure: Column | None) -> Column:
    """One error entry (``broker`` None for a partition transition, ``failure`` None if invalid)."""
    return F.struct(
        (F.lit(None) if broker is None else broker).cast("int").alias(BROKER),
        current.cast("byte").alias(CURRENT),
        F.lit(target).cast("byte").alias(TARGET),
        (F.lit(None) if failure is None else failure).cast("string").alias(FAILURE),
    )


def existing(carried: bool) -> Column:
    """The errors a row already carries: the column if the table ``carried`` it, else null."""
    return F.col(ERRORS) if carried else F.lit(None).cast(ERRORS_TYPE)


def appended(before: Column, entries: Sequence[tuple[Column, Column]]) -> Column:
    """``before`` plus the entries whose flag holds, in order; unchanged (maybe null) if none."""
    flags = [flag for flag, _ in entries]
    any_flag = reduce(lambda a, b: a | b, flags)
    new = F.array_compact(F.array(*[F.when(flag, e) for flag, e in entries]))
    combined = F.concat(F.coalesce(before, F.array().cast(ERRORS_TYPE)), new)
    return F.when(any_flag, combined).otherwise(before).alias(ERRORS)


def error_count() -> Column:
    """Entries in a row's errors (0 for null: ``size`` of null depends on a legacy setting)."""
    errors = F.col(ERRORS)
    return F.when(errors.isNotNull(), F.size(errors)).otherwise(0)


def with_errors(df: DataFrame) -> DataFrame:
    """``df`` with an (empty) errors column if it has none, so a handler can list it."""
    return df if ERRORS in df.columns else df.withColumn(ERRORS, existing(False))
