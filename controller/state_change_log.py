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

The before/after pairs of the diff become Kafka's transitions as ``controller.transitions``
describes (shortest valid chains, replicas matched by broker id, elections told apart).

Where this differs from Kafka's own log:

* The LeaderAndIsr and ISR-removal records show the event's final leadership. Kafka renders the
  value written at that step, so when an event writes a partition twice (election, then ISR
  removal of another replica) its first line shows the intermediate value.
* Same-state transitions (Online → Online replica re-announcements at failover, a repeated
  OfflinePartition) leave no trace in a diff and are not logged.

Invalid and failed transitions change nothing, so they are not in the diff either: their ERROR
lines come from ``controller.state_change_error_lines``, and a line's ``exception`` column holds
the throwable Kafka logs with it (null on every other line).

``controller.state_change_store.StateChangeLog`` stores the lines of each event as Parquet under
``<out>/state-change/event=<index>/`` (one dataset with an ``event`` column) and, optionally,
appends them to ``<out>/state-change.log`` in Kafka's log4j layout.
"""

from __future__ import annotations

from itertools import pairwise

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from controller.diff import prev
from controller.transitions import (
    ELECTION_KEY,
    ELECTION_VIA_OFFLINE_KEY,
    KEY_BASE,
    PARTITION_CHAINS,
    REPLICA_CHAINS,
    check_diff,
    partition_codes,
    slot_key,
    slots_of,
    with_replica_slots,
)
from statemachines import schemas as s
from statemachines.columns import any_of, present
from statemachines.local_rows import local_frame
from statemachines.partition_states import PartitionState
from statemachines.replica_states import ReplicaState

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
_UNIT, _KIND, _KEY = "_unit", "_kind", "_key"
_FROM, _TO, _TO_CODE = "_from", "_to", "_to_code"
_CHAIN_SCHEMA = (
    f"{_UNIT} string, {_KEY} int, {_KIND} string, {STEP} int, "
    f"{_FROM} string, {_TO} string, {_TO_CODE} int"
)


def _chain_rows() -> list[tuple[str, int, str, int, str, str, int]]:
    """One row per line a path key produces: partition steps, replica steps and, before a
    replica's step into OfflineReplica, its ISR-removal line (kept only with leadership)."""
    rows = []
    for key, chain in sorted(PARTITION_CHAINS.items()):
        for i, (a, b) in enumerate(pairwise(chain)):
            rows.append((_PARTITION, key, _PARTITION, i, a.name, b.name, int(b)))
    for key, chain in sorted(REPLICA_CHAINS.items()):
        for i, (a, b) in enumerate(pairwise(chain)):
            if b == _R.OfflineReplica:
                rows.append((_REPLICA, key, _REMOVAL, 2 * i, a.name, b.name, int(b)))
            rows.append((_REPLICA, key, _REPLICA, 2 * i + 1, a.name, b.name, int(b)))
    return rows


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


def _partition_key(w: int) -> Column:
    """The partition's path key; an election of a partition Online before and after gets a key
    of its own (see the module docstring), and no other unchanged state gets one."""
    before, after = partition_codes()
    online, offline = int(_P.OnlinePartition), int(_R.OfflineReplica)
    elected = ~F.col(s.LEADER).eqNullSafe(F.col(prev(s.LEADER))) & (F.col(s.LEADER) >= 0)
    election = (before == online) & (after == online) & elected
    old_leader_offline = any_of(
        [
            F.coalesce(
                (e.broker == F.col(prev(s.LEADER)))
                & (e.current == offline)
                & (e.previous != offline),
                F.lit(False),
            )
            for e in slots_of(w)
        ]
    )
    return (
        F.when(election & old_leader_offline, ELECTION_VIA_OFFLINE_KEY)
        .when(election, ELECTION_KEY)
        .when(before != after, before * KEY_BASE + after)
    )


def state_change_lines(
    diff: DataFrame, topics: DataFrame, controller_id: int, epoch: int
) -> DataFrame:
    """Every state-change log line of one event (see the module docstring); lazy.

    ``topics`` is (topic_index, topic) and must name every topic of the diff, including topics
    removed by the event (an unnamed index renders as ``topic_index=<n>``). Each partition and
    each changed replica becomes a row keyed by its (previous, current) path; a join with the
    small table of Kafka's chains gives one row per line, rendered by one expression.
    """
    w = check_diff(diff)
    names = topics.select(s.TOPIC_INDEX, s.TOPIC)
    df = with_replica_slots(diff.join(F.broadcast(names), s.TOPIC_INDEX, "left"), w)
    topic = F.coalesce(
        F.col(s.TOPIC), F.concat(F.lit("topic_index="), F.col(s.TOPIC_INDEX).cast("string"))
    )
    # The partition's unit, then one per changed replica (nulls dropped).
    units = F.array_compact(
        F.array(
            F.struct(
                F.lit(None).cast("int").alias(s.BROKER),
                F.lit(_PARTITION).alias(_UNIT),
                _partition_key(w).alias(_KEY),
            ),
            *[
                F.when(
                    e.previous != e.current,
                    F.struct(
                        e.broker.alias(s.BROKER),
                        F.lit(_REPLICA).alias(_UNIT),
                        slot_key(e).alias(_KEY),
                    ),
                )
                for e in slots_of(w)
            ],
        )
    )
    leadership = F.col(s.ZK_VERSION).isNotNull() & (F.col(s.ZK_VERSION) != s.NO_ZK_VERSION)
    per_unit = df.select(
        topic.alias(s.TOPIC),
        F.col(s.PARTITION),
        F.concat(topic, F.lit("-"), F.col(s.PARTITION).cast("string")).alias("_tp"),
        _leader_and_isr(w).alias("_lair"),
        _leadership_record(w, epoch).alias("_record"),
        _joined([F.col(s.replica_col(k)) for k in range(w)], ",").alias("_assigned"),
        leadership.alias("_leadership"),
        F.inline(units),
    )
    chains = F.broadcast(local_frame(diff.sparkSession, _chain_rows(), _CHAIN_SCHEMA))
    steps = per_unit.join(chains, [_UNIT, _KEY]).where(
        (F.col(_KIND) != _REMOVAL) | F.col("_leadership")
    )
    return steps.select(*LINE_COLUMNS[:3], *_render(controller_id, epoch))


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
    """(level, line, step) of a joined chain row."""
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
        F.col(STEP),
        F.lit(None).cast("string").alias(EXCEPTION),
    ]
