"""The state-change log of an event (spec §16.2), rendered in bulk from its generation diff.

``state_change_lines(diff, topics, controller_id, epoch)`` gives one row per line of Kafka's
``state.change.logger`` for every transition the event made, as Spark Column expressions: columns
``topic``, ``partition``, ``broker`` (null for partition lines), ``level``, ``line``, ``step``
(the order of the lines of one partition or replica) and ``exception``. Every line starts with
``[Controller id=<me> epoch=<epoch>] ``.

| Level | What | Line (after the prefix) |
|-------|------|-------------------------|
| INFO  | → NewPartition | ``Changed partition <t-p> state from <S> to NewPartition with assigned replicas <r1,r2>`` |
| INFO  | → OnlinePartition (init or election) | ``Changed partition <t-p> from <S> to OnlinePartition with state LeaderAndIsr(leader=<l>, leaderEpoch=<e>, isr=List(<i, j>), zkVersion=<v>)`` |
| TRACE | → OfflinePartition, → NonExistentPartition | ``Changed partition <t-p> state from <S> to <T>`` |
| TRACE | any replica transition | ``Changed state of replica <r> for partition <t-p> from <S> to <T>`` |
| INFO  | ISR removal of → OfflineReplica | ``Partition <t-p> state changed to (Leader:<l>,ISR:<i,j>,LeaderEpoch:<e>,ZkVersion:<v>,ControllerEpoch:<c>) after removing replica <r> from the ISR as part of transition to OfflineReplica`` |

Each transition of the event's trail (``controller.commit.transitions.event_trail``: what the state
machines applied, in Kafka's order) is one line; a replica's transition to OfflineReplica in a
partition with leadership is preceded by its ISR-removal line. ``step`` orders the lines of one
partition or replica: the partition's n-th transition is step n, a replica's n-th is 2n + 1
(its ISR removal, 2n).

Where this differs from Kafka's own log:

* The LeaderAndIsr and ISR-removal records show the event's final leadership. Kafka renders the
  value written at that step, so when an event writes a partition twice (election, then ISR
  removal of another replica) its first line shows the intermediate value.
* Rows that did not change are not in the diff: their same-state transitions (Online → Online
  replica re-announcements at failover) are not logged.

Invalid and failed transitions change nothing, so they are not in the diff either: their ERROR
lines come from ``controller.commit.state_change_error_lines``, and a line's ``exception`` column holds
the throwable Kafka logs with it (null on every other line).

``controller.commit.state_change_store.StateChangeLog`` stores the lines of each event as Parquet under
``<out>/state-change/event=<index>/`` (one dataset with an ``event`` column) and, optionally,
appends them to ``<out>/state-change.log`` in Kafka's log4j layout.
"""

from __future__ import annotations

from functools import lru_cache

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from controller.commit.transitions import check_diff, event_trail
from statemachines import schemas as s
from statemachines import state_change_trail as t
from statemachines.columns import present
from statemachines.partition_states import PartitionState
from statemachines.replica_states import ReplicaState
from statemachines.states import state_name_column

LEVEL = "level"
LINE = "line"
STEP = "step"
EXCEPTION = "exception"  # an ERROR line's throwable, ``<class>: <message>``; null otherwise
EVENT = "event"
LINE_COLUMNS = (s.TOPIC, s.PARTITION, s.BROKER, LEVEL, LINE, STEP, EXCEPTION)
LOGGER = "state.change.logger"

_P = PartitionState
_R = ReplicaState

_PARTITION, _REPLICA, _REMOVAL = "partition", "replica", "removal"
_TRAIL, _POS, _ENTRY, _NTH, _KIND = "_trail", "_pos", "_entry", "_nth", "_kind"
_FROM, _TO, _TO_CODE = "_from", "_to", "_to_code"


def _joined(values: list[Column], sep: str) -> Column:
    return F.array_join(present(values).cast("array<string>"), sep)


def _leader_and_isr(w: int) -> Column:
    """Kafka 2.8 ``LeaderAndIsr.toString`` of the new generation."""
    return F.concat(
        F.lit("LeaderAndIsr(leader="),
        F.col(s.LEADER).cast("string"),
        F.lit(", leaderEpoch="),
        F.col(s.LEADER_EPOCH).cast("string"),
        F.lit(", isr=List("),
        _joined([F.col(s.isr_col(k)) for k in range(w)], ", "),
        F.lit("), zkVersion="),
        F.col(s.ZK_VERSION).cast("string"),
        F.lit(")"),
    )


def _leadership_record(w: int, epoch: int) -> Column:
    """``LeaderIsrAndControllerEpoch.toString``; Kafka pairs it with its own epoch here."""
    return F.concat(
        F.lit("(Leader:"),
        F.col(s.LEADER).cast("string"),
        F.lit(",ISR:"),
        _joined([F.col(s.isr_col(k)) for k in range(w)], ","),
        F.lit(",LeaderEpoch:"),
        F.col(s.LEADER_EPOCH).cast("string"),
        F.lit(",ZkVersion:"),
        F.col(s.ZK_VERSION).cast("string"),
        F.lit(f",ControllerEpoch:{epoch})"),
    )


@lru_cache(maxsize=1)
def _transitions() -> Column:
    """The row's trail without the controller's leader-epoch bumps, which are no transitions
    (Kafka traces them apart, §10)."""

    def transition(e: Column) -> Column:
        return (t.broker_of(e) != t.PARTITION_UNIT) | (t.to_of(e) != t.LEADER_EPOCH_BUMP)

    return F.filter(F.col(_TRAIL), transition)


@lru_cache(maxsize=1)
def _nth() -> Column:
    """How many earlier entries of the row's trail belong to the same partition or replica."""
    trail, pos = F.col(_TRAIL), F.col(_POS)
    unit = t.broker_of(F.col(_ENTRY))
    earlier = F.slice(trail, F.lit(1), pos)
    return F.size(F.filter(earlier, lambda e: t.broker_of(e) == unit))


def state_change_lines(
    diff: DataFrame, topics: DataFrame, controller_id: int, epoch: int
) -> DataFrame:
    """Every state-change log line of one event (see the module docstring); lazy.

    ``topics`` is (topic_index, topic) and must name every topic of the diff, including topics
    removed by the event (an unnamed index renders as ``topic_index=<n>``). Each entry of a
    row's trail becomes a row, and a replica's entry into OfflineReplica in a partition with
    leadership two (its ISR removal first), rendered by one expression.
    """
    w = check_diff(diff)
    names = topics.select(s.TOPIC_INDEX, s.TOPIC)
    df = diff.join(F.broadcast(names), s.TOPIC_INDEX, "left")
    topic = F.coalesce(
        F.col(s.TOPIC), F.concat(F.lit("topic_index="), F.col(s.TOPIC_INDEX).cast("string"))
    )
    leadership = F.col(s.ZK_VERSION).isNotNull() & (F.col(s.ZK_VERSION) != s.NO_ZK_VERSION)
    per_row = df.select(
        topic.alias(s.TOPIC),
        F.col(s.PARTITION),
        F.concat(topic, F.lit("-"), F.col(s.PARTITION).cast("string")).alias("_tp"),
        _leader_and_isr(w).alias("_lair"),
        _leadership_record(w, epoch).alias("_record"),
        _joined([F.col(s.replica_col(k)) for k in range(w)], ",").alias("_assigned"),
        leadership.alias("_leadership"),
        event_trail(diff, w).alias(_TRAIL),
    ).withColumn(_TRAIL, _transitions())
    per_row = per_row.where(F.col(_TRAIL).isNotNull())
    entries = per_row.select("*", F.posexplode(_TRAIL).alias(_POS, _ENTRY))
    return entries.select(
        *LINE_COLUMNS[:2], *_decoded(), _nth().alias(_NTH), "_tp", "_lair", "_record", "_assigned"
    ).select(*LINE_COLUMNS[:3], *_render(controller_id, epoch))


def _decoded() -> list[Column]:
    """Broker (null for the partition), kind, state names and target code of a trail entry;
    a replica's entry into OfflineReplica in a partition with leadership gives two rows."""
    e = F.col(_ENTRY)
    broker, start, end = t.broker_of(e), t.from_of(e), t.to_of(e)
    is_partition = broker == t.PARTITION_UNIT
    removal = ~is_partition & (end == int(_R.OfflineReplica)) & F.col("_leadership")
    kinds = (
        F.when(is_partition, F.array(F.lit(_PARTITION)))
        .when(removal, F.array(F.lit(_REMOVAL), F.lit(_REPLICA)))
        .otherwise(F.array(F.lit(_REPLICA)))
    )

    def name(code: Column) -> Column:
        return F.when(is_partition, state_name_column(code, _P)).otherwise(
            state_name_column(code, _R)
        )

    return [
        F.when(~is_partition, broker.cast("int")).alias(s.BROKER),
        F.explode(kinds).alias(_KIND),
        name(start).alias(_FROM),
        name(end).alias(_TO),
        end.alias(_TO_CODE),
    ]


def replica_transition(broker: Column, tp: Column, start: Column, end: Column) -> Column:
    """``replica <r> for partition <t-p> from <S> to <T>``, as Kafka's replica lines say it."""
    return F.concat(
        F.lit("replica "),
        broker.cast("string"),
        F.lit(" for partition "),
        tp,
        F.lit(" from "),
        start,
        F.lit(" to "),
        end,
    )


def _render(controller_id: int, epoch: int) -> list[Column]:
    """(level, line, step, exception) of a decoded trail entry."""
    kind, to = F.col(_KIND), F.col(_TO_CODE)
    tp, start, end = F.col("_tp"), F.col(_FROM), F.col(_TO)
    prefix = F.lit(f"[Controller id={controller_id} epoch={epoch}] ")
    broker = F.col(s.BROKER).cast("string")
    partition = kind == _PARTITION
    new, online = int(_P.NewPartition), int(_P.OnlinePartition)
    level = F.when(kind == _REMOVAL, "INFO").when(partition & to.isin(new, online), "INFO")
    line = (
        F.when(
            kind == _REMOVAL,
            F.concat(
                F.lit("Partition "),
                tp,
                F.lit(" state changed to "),
                F.col("_record"),
                F.lit(" after removing replica "),
                broker,
                F.lit(" from the ISR as part of transition to OfflineReplica"),
            ),
        )
        .when(
            kind == _REPLICA,
            F.concat(F.lit("Changed state of "), replica_transition(broker, tp, start, end)),
        )
        .when(
            to == new,
            F.concat(
                F.lit("Changed partition "),
                tp,
                F.lit(" state from "),
                start,
                F.lit(" to NewPartition with assigned replicas "),
                F.col("_assigned"),
            ),
        )
        .when(
            to == online,
            F.concat(
                F.lit("Changed partition "),
                tp,
                F.lit(" from "),
                start,
                F.lit(" to OnlinePartition with state "),
                F.col("_lair"),
            ),
        )
        .otherwise(
            F.concat(
                F.lit("Changed partition "), tp, F.lit(" state from "), start, F.lit(" to "), end
            )
        )
    )
    return [
        level.otherwise("TRACE").alias(LEVEL),
        F.concat(prefix, line).alias(LINE),
        F.when(partition, F.col(_NTH))
        .when(kind == _REMOVAL, 2 * F.col(_NTH))
        .otherwise(2 * F.col(_NTH) + 1)
        .alias(STEP),
        F.lit(None).cast("string").alias(EXCEPTION),
    ]
