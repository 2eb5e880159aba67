"""The ERROR lines of the state-change log (spec §16.2): transitions Kafka rejected or failed.

``error_lines(committed, topics, controller_id, epoch, live)`` renders the
``state_change_errors`` the state machines attached to the rows of a committed generation (see
``statemachines.state_change_errors``) as lines in the shape of ``state_change_lines``. Kafka
logs each with ``error(message, throwable)``; the throwable's first line (``<class>: <message>``)
goes to the ``exception`` column, and the text log prints it on the line below.

| Transition | Line (after the prefix) | Exception |
|------------|-------------------------|-----------|
| partition, invalid | ``Controller <me> epoch <e> failed to change state for partition <t-p> from <S> to <T>`` | ``java.lang.IllegalStateException: Partition <t-p> should be in one of <states> states before moving to <T> state. Instead it is in <S> state`` |
| partition, failed | the same | ``kafka.common.StateChangeFailedException: <why>`` |
| replica, invalid | ``Controller <me> epoch <e> initiated state change of replica <r> for partition <t-p> from <S> to <T> failed`` | ``java.lang.IllegalStateException: Replica [Topic=<t>,Partition=<p>,Replica=<r>] should be in the <states> states before moving to <T> state. Instead it is in <S> state`` |
| replica, failed | the same (Kafka names OfflineReplica as the target) | ``kafka.common.StateChangeFailedException: <why>`` |

A partition's ERROR lines follow its transition lines (``step`` from ``ERROR_STEP``), in the
order the event's transitions ran. Scala prints the live broker set in hash order; it is sorted
here.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import IntEnum

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from controller.commit.state_change_log import (
    EXCEPTION,
    LEVEL,
    LINE,
    LINE_COLUMNS,
    STEP,
    replica_transition,
)
from statemachines import schemas as s
from statemachines import state_change_errors as e
from statemachines.partition_states import VALID_PREVIOUS_STATES as PARTITION_PREVIOUS
from statemachines.partition_states import PartitionState
from statemachines.replica_states import VALID_PREVIOUS_STATES as REPLICA_PREVIOUS
from statemachines.replica_states import ReplicaState
from statemachines.state_change_errors import ERROR_STEP, ILLEGAL_STATE, STATE_CHANGE_FAILED
from statemachines.states import allowed_names, state_name_column


def _allowed(target: Column, states: type[IntEnum], table: object) -> Column:
    """Kafka's ``validPreviousStates.mkString(",")`` of a target-state code."""
    expr = None
    for state in states:
        text = F.lit(allowed_names(state, table))  # type: ignore[arg-type]
        expr = (F.when if expr is None else expr.when)(target == int(state), text)
    assert expr is not None
    return expr


def _scala_set(ids: Iterable[int]) -> str:
    return "Set(" + ", ".join(str(b) for b in sorted(ids)) + ")"


def error_lines(
    committed: DataFrame,
    topics: DataFrame,
    controller_id: int,
    epoch: int,
    live: Iterable[int],
) -> DataFrame:
    """One ERROR line per entry of the rows' ``state_change_errors``; lazy."""
    names = topics.select(s.TOPIC_INDEX, s.TOPIC)
    rows = committed.where(F.col(e.ERRORS).isNotNull()).select(
        s.TOPIC_INDEX, s.PARTITION, F.posexplode(e.ERRORS).alias("_pos", "_e")
    )
    df = rows.join(F.broadcast(names), s.TOPIC_INDEX, "left")
    topic = F.coalesce(
        F.col(s.TOPIC), F.concat(F.lit("topic_index="), F.col(s.TOPIC_INDEX).cast("string"))
    )
    tp = F.concat(topic, F.lit("-"), F.col(s.PARTITION).cast("string"))
    broker = F.col("_e." + e.BROKER)
    current, target = F.col("_e." + e.CURRENT), F.col("_e." + e.TARGET)
    failure = F.col("_e." + e.FAILURE)
    is_partition = broker.isNull()
    start = F.when(is_partition, state_name_column(current, PartitionState)).otherwise(
        state_name_column(current, ReplicaState)
    )
    end = F.when(is_partition, state_name_column(target, PartitionState)).otherwise(
        state_name_column(target, ReplicaState)
    )
    allowed = F.when(is_partition, _allowed(target, PartitionState, PARTITION_PREVIOUS)).otherwise(
        _allowed(target, ReplicaState, REPLICA_PREVIOUS)
    )
    me = f"Controller {controller_id} epoch {epoch}"
    who = F.when(
        is_partition, F.concat(F.lit("Partition "), tp, F.lit(" should be in one of "))
    ).otherwise(
        F.concat(
            F.lit("Replica [Topic="),
            topic,
            F.lit(",Partition="),
            F.col(s.PARTITION).cast("string"),
            F.lit(",Replica="),
            broker.cast("string"),
            F.lit("] should be in the "),
        )
    )
    illegal = F.concat(
        F.lit(ILLEGAL_STATE + ": "),
        who,
        allowed,
        F.lit(" states before moving to "),
        end,
        F.lit(" state. Instead it is in "),
        start,
        F.lit(" state"),
    )
    why = failure
    for placeholder, value in (
        (e.PARTITION, tp),
        (e.CONTROLLER, F.lit(str(controller_id))),
        (e.EPOCH, F.lit(str(epoch))),
        (e.LIVE, F.lit(_scala_set(live))),
    ):
        why = F.replace(why, F.lit(placeholder), value)
    line = F.when(
        is_partition,
        F.concat(
            F.lit(f"{me} failed to change state for partition "),
            tp,
            F.lit(" from "),
            start,
            F.lit(" to "),
            end,
        ),
    ).otherwise(
        F.concat(
            F.lit(f"{me} initiated state change of "),
            replica_transition(broker, tp, start, end),
            F.lit(" failed"),
        )
    )
    out = df.select(
        topic.alias(s.TOPIC),
        F.col(s.PARTITION),
        broker.alias(s.BROKER),
        F.lit("ERROR").alias(LEVEL),
        F.concat(F.lit(f"[Controller id={controller_id} epoch={epoch}] "), line).alias(LINE),
        (F.col("_pos") + ERROR_STEP).alias(STEP),
        F.when(failure.isNull(), illegal)
        .otherwise(F.concat(F.lit(STATE_CHANGE_FAILED + ": "), why))
        .alias(EXCEPTION),
    )
    return out.select(*LINE_COLUMNS)
