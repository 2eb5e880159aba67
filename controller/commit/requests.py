"""The controller-to-broker requests of one event (spec §15.1), read off its generation diff.

Kafka collects requests in a batch per state-machine call (``ControllerBrokerRequestBatch``) and
sends it when the call ends: one request per broker and kind per batch, a partition at most once
in each. The state machines stamp every transition of the row's trail with its call's batch
(``statemachines.state_change_trail``), so each entry names the requests it adds, and the
event's requests are the distinct (batch, broker, kind) among them.

``request_batches(diff, live_or_shutting_down, deleting_topics)`` gives one row per (batch,
broker, kind) with the number of partitions in that request; ``request_totals`` sums them for
the event's metrics line, and ``request_count`` gives the same sums as one aggregation for the
commit's pass over the diff. Requests to brokers that are neither live nor shutting down are
dropped, as ``sendRequestsToBrokers`` drops them.

What each entry of the trail adds to its batch:

| Entry | LeaderAndIsr | UpdateMetadata | StopReplica |
|---|---|---|---|
| partition New → Online (leadership created, §5.3a, §9.1) | the new ISR | the partition | |
| partition → Online from Offline/Online (an election, §5.3b) or the controller's leader-epoch bump (§10.3 A1/B3) | every replica of the assignment not in an Offline/deletion state | the partition | |
| a replica → OfflineReplica in a partition with leadership (§6.3, also when nothing was written) | the other replicas, as above | the partition | delete=false to that replica |
| a replica → OnlineReplica from Offline/DeletionIneligible, or NonExistent → NewReplica (reassignment A2), in a partition that had leadership (§6.3, §8.1 step 4) | that replica | the partition | |
| a replica → ReplicaDeletionStarted (§9.5, §10.3 B5) | | | delete=true to that replica |

For topics queued for deletion (``deleting_topics``), leadership changes send no LeaderAndIsr and
no UpdateMetadata of their own (their only source is the ISR removal of deletion, which Kafka
does not announce); the deletion's UpdateMetadata broadcast (§9.5 onTopicDeletion) goes with the
row's last ReplicaDeletionStarted (or its partition's → NonExistent). A leadership record that
changed with no entry above (an AlterIsr, an ISR read back after a notification, §12.4–12.5) sends
UpdateMetadata alone, in a batch of the controller's own. UpdateMetadata carries only partitions
that have leadership, and goes to every live-or-shutting-down broker.

Where this differs from Kafka:

* Rows that did not change are not in the diff, so their same-state transitions send nothing:
  the Online → Online replica re-announcement at failover (§6.4). The broker-list-only
  UpdateMetadata of broker startup/failure/metadata change (§8.1 step 2, §8.2 step g, §8.5) and
  the full-metadata UpdateMetadata to a starting broker (§8.1 step 3) do not depend on changed
  partitions and are not derived here.
* Recipients are read from the row's states at the end of the event: elections of the
  offline/preferred strategies send only to live replicas, here a replica on a shutting-down
  broker that is not Offline gets the LeaderAndIsr too (the controlled-shutdown and reassign
  strategies include it, as here).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache, reduce
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from controller.commit.diff import prev
from controller.commit.transitions import check_diff, event_trail, slots_of, with_replica_slots
from statemachines import schemas as s
from statemachines import state_change_trail as t
from statemachines.brokers import BrokerSet, in_words
from statemachines.columns import in_topics, literal_array
from statemachines.local_rows import local_frame
from statemachines.partition_states import PartitionState
from statemachines.replica_states import ReplicaState

LEADER_AND_ISR = "LeaderAndIsr"
UPDATE_METADATA = "UpdateMetadata"
STOP_REPLICA = "StopReplica"
KINDS = (LEADER_AND_ISR, UPDATE_METADATA, STOP_REPLICA)

KIND = "kind"
PARTITIONS = "partitions"
BECOME_LEADER = "become_leader"
BECOME_FOLLOWER = "become_follower"
DELETES = "deletes"

BATCHES_SCHEMA = StructType(
    [
        StructField(t.REQUEST_BATCH, IntegerType(), nullable=False),
        StructField(s.BROKER, IntegerType(), nullable=False),
        StructField(KIND, StringType(), nullable=False),
        StructField(PARTITIONS, LongType(), nullable=False),
        StructField(BECOME_LEADER, LongType(), nullable=False),
        StructField(BECOME_FOLLOWER, LongType(), nullable=False),
        StructField(DELETES, LongType(), nullable=False),
    ]
)

_R = ReplicaState
_P = PartitionState
# A replica here got (or gets) StopReplica, not LeaderAndIsr.
_STOPPED = [
    int(_R.OfflineReplica),
    int(_R.ReplicaDeletionStarted),
    int(_R.ReplicaDeletionSuccessful),
    int(_R.ReplicaDeletionIneligible),
]
_TRAIL = "_trail"  # the event's trail of the row (``transitions.event_trail``)
_SENDS = "_sends"  # a row's requests: (batch, broker or null for UpdateMetadata, flags) structs
_LIVE = "_live"  # the live-or-shutting-down brokers' words (``BrokerSet.words``), per event
# The batch of the UpdateMetadata of a leadership record no state machine changed.
_CONTROLLER_BATCH = 0


def _leadership(zk_version: Column) -> Column:
    return zk_version.isNotNull() & (zk_version != s.NO_ZK_VERSION)


def _leadership_changed(w: int) -> Column:
    same = reduce(
        lambda acc, c: acc & F.col(c).eqNullSafe(F.col(prev(c))),
        [s.LEADER, s.LEADER_EPOCH, s.ZK_VERSION, *(s.isr_col(k) for k in range(w))],
        F.lit(True),
    )
    return ~same


def request_batches(
    diff: DataFrame, live_or_shutting_down: Collection[int], deleting_topics: Sequence[int] = ()
) -> DataFrame:
    """One row per (batch, broker, kind) of the event's requests (``BATCHES_SCHEMA``); lazy.

    ``partitions``: partitions in the request; ``become_leader``/``become_follower``:
    LeaderAndIsr partitions the broker leads / follows (0 for other kinds); ``deletes``:
    StopReplica partitions with deletePartition=true (0 for other kinds). ``deleting_topics``
    are the topic indices queued for deletion.
    """
    w = check_diff(diff)
    live = BrokerSet.of(live_or_shutting_down)
    if not live.ids:
        # Every request would be dropped at send time.
        return local_frame(diff.sparkSession, [], BATCHES_SCHEMA)
    counted = _per_batch(diff, w, live, deleting_topics)
    broker = F.col(s.BROKER)
    recipients = F.when(broker.isNull(), literal_array(sorted(live.ids))).otherwise(F.array(broker))
    return (
        counted.withColumn("_to", F.explode(recipients))
        .select(F.inline(_batches()))
        .where(F.col(PARTITIONS) > 0)
    )


def _per_batch(
    diff: DataFrame, w: int, live: BrokerSet, deleting_topics: Sequence[int]
) -> DataFrame:
    """Per (batch, broker) the partitions of each kind (broker null: the UpdateMetadata, which
    every live broker gets)."""
    deleting = tuple(sorted(set(deleting_topics)))
    if live.in_word_range:
        sends, staged = _sends(w, None), {_LIVE: live.words()}
    else:
        sends, staged = _sends(w, live), {}
    # One row per (partition, batch) it took part in, with what the batch did to it: the
    # requests of each then read the replica slots without a lambda (whose code Spark inlines
    # per slot, past the JVM's method limit at width 6).
    steps = _steps(w, deleting)
    rows = (
        with_replica_slots(diff, w)
        .withColumns({_TRAIL: event_trail(diff, w), **staged})
        .select(*steps.row, *staged, F.inline(steps.batches))
    )
    return (
        rows.select(F.inline(sends))
        .groupBy(t.REQUEST_BATCH, s.BROKER)
        .agg(
            F.count_if(F.col("lair")).alias("_lair"),
            F.count_if(F.col("lair") & F.col("leads")).alias("_leads"),
            F.count_if(F.col("stop")).alias("_stop"),
            F.count_if(F.col("stop") & F.col("delete")).alias("_deletes"),
            F.count_if(F.col("metadata")).alias("_metadata"),
        )
    )


@dataclass(frozen=True)
class _Steps:
    """The per-row columns the requests read (``row``) and the row's batches (``batches``, an
    array of structs: the batch, and per batch whether it initialised the leadership
    (``init``), elected or bumped the leader epoch (``elected``), announces by UpdateMetadata
    alone (``metadata_only``), and the brokers whose replica went Offline (``offline``), came
    back or was added (``returned``), or started its deletion (``started``))."""

    row: tuple[Column, ...]
    batches: Column


_HAS, _HAD, _DELETING, _ISR = "_has", "_had", "_deleting", "_isr"


@lru_cache(maxsize=16)
def _steps(w: int, deleting_topics: tuple[int, ...]) -> _Steps:
    """Built once per key: its lambdas' variables are named afresh at each build, and the
    names reach the generated code."""
    has = _leadership(F.col(s.ZK_VERSION))
    had = _leadership(F.col(prev(s.ZK_VERSION)))
    deleting = in_topics(deleting_topics)
    trail = F.coalesce(F.col(_TRAIL), F.array().cast(t.TRAIL_TYPE))

    def replica(e: Column) -> Column:
        return t.broker_of(e) != t.PARTITION_UNIT

    def partition_to(e: Column, *states: int) -> Column:
        return ~replica(e) & t.to_of(e).isin(*states)

    online, bump = int(_P.OnlinePartition), t.LEADER_EPOCH_BUMP
    # A leadership record no state machine changed: an ISR the leader changed (AlterIsr, or
    # one read back after a notification), which the controller announces by UpdateMetadata
    # alone, in a batch of its own.
    explained = F.exists(
        trail,
        lambda e: (
            partition_to(e, online, bump) | (replica(e) & (t.to_of(e) == int(_R.OfflineReplica)))
        ),
    )
    isr_changed = has & had & ~deleting & _leadership_changed(w) & ~explained
    # onTopicDeletion's UpdateMetadata, with the deletion's StopReplica(delete=true).
    deletion = F.filter(
        trail,
        lambda e: (
            (replica(e) & (t.to_of(e) == int(_R.ReplicaDeletionStarted)))
            | partition_to(e, int(_P.NonExistentPartition))
        ),
    )
    broadcast = F.when(deleting & has, F.array_max(F.transform(deletion, t.batch_of)))
    numbers = F.array_distinct(
        F.concat(
            F.transform(trail, t.batch_of),
            F.when(isr_changed, F.array(F.lit(_CONTROLLER_BATCH))).otherwise(
                F.array().cast("array<int>")
            ),
        )
    )

    def at(batch: Column) -> Column:
        entries = F.filter(trail, lambda e: t.batch_of(e) == batch)

        def brokers(test: Callable[[Column, Column], Column]) -> Column:
            hit = F.filter(entries, lambda e: replica(e) & test(t.from_of(e), t.to_of(e)))
            return F.transform(hit, lambda e: t.broker_of(e).cast("int"))

        initialised = F.exists(entries, lambda e: partition_to(e, online))
        return F.struct(
            batch.alias(t.REQUEST_BATCH),
            (initialised & ~had).alias("init"),
            (
                ((initialised & had) | F.exists(entries, lambda e: partition_to(e, bump)))
                & ~deleting
            ).alias("elected"),
            (
                (isr_changed & (batch == _CONTROLLER_BATCH))
                | F.coalesce(broadcast == batch, F.lit(False))
            ).alias("metadata_only"),
            brokers(lambda _a, b: b == int(_R.OfflineReplica)).alias("offline"),
            brokers(_returned).alias("returned"),
            brokers(lambda _a, b: b == int(_R.ReplicaDeletionStarted)).alias("started"),
        )

    row = (
        # Only the new assignment's replicas get LeaderAndIsr: its w slots.
        *(c for slot in slots_of(w)[:w] for c in (slot.broker, slot.current)),
        F.col(s.LEADER),
        F.array(*(F.col(s.isr_col(k)) for k in range(w))).alias(_ISR),
        has.alias(_HAS),
        had.alias(_HAD),
        deleting.alias(_DELETING),
    )
    return _Steps(row, F.transform(numbers, at))


def _returned(start: Column, end: Column) -> Column:
    """Replica transitions that send LeaderAndIsr when the partition has leadership (§6.3)."""
    offline, ineligible = int(_R.OfflineReplica), int(_R.ReplicaDeletionIneligible)
    return ((end == int(_R.OnlineReplica)) & start.isin(offline, ineligible)) | (
        (start == int(_R.NonExistentReplica)) & (end == int(_R.NewReplica))
    )


@lru_cache(maxsize=16)
def _sends(w: int, live: BrokerSet | None) -> Column:
    """The requests of one (partition, batch) row of ``_steps``, each partition once per
    (batch, broker, kind). ``live``: the brokers, or None to read them off ``_LIVE``."""
    no = F.lit(False)
    batch = F.col(t.REQUEST_BATCH)
    has, had, deleting = F.col(_HAS), F.col(_HAD), F.col(_DELETING)
    init, elected = F.col("init"), F.col("elected")
    offline, returned, started = F.col("offline"), F.col("returned"), F.col("started")
    removal = (F.size(offline) > 0) & has & ~deleting
    came_back = has & had & (F.size(returned) > 0)

    def reaches(broker: Column) -> Column:
        return live.contains(broker) if live is not None else in_words(F.col(_LIVE), broker)

    def send(broker: Column, lair: Column = no, stop: Column = no, delete: Column = no) -> Column:
        return F.struct(
            batch.alias(t.REQUEST_BATCH),
            broker.cast("int").alias(s.BROKER),
            lair.alias("lair"),
            (lair & (broker == F.col(s.LEADER))).alias("leads"),
            stop.alias("stop"),
            delete.alias("delete"),
            broker.isNull().alias("metadata"),
        )

    def lair_to(slot: Any) -> Column:
        unstopped = ~slot.current.isin(_STOPPED)
        wanted = (
            (init & F.array_contains(F.col(_ISR), slot.broker))
            | ((elected | removal) & unstopped & ~F.array_contains(offline, slot.broker))
            | (came_back & F.array_contains(returned, slot.broker))
        )
        return F.coalesce(wanted & reaches(slot.broker), no)

    yes = F.lit(True)
    assigned = slots_of(w)[:w]
    to_replicas = [F.when(lair_to(slot), send(slot.broker, lair=yes)) for slot in assigned]
    metadata = has & (init | elected | removal | came_back) | F.col("metadata_only")
    stops = F.concat(
        F.transform(F.filter(offline, reaches), lambda b: send(b, stop=yes)),
        F.transform(F.filter(started, reaches), lambda b: send(b, stop=yes, delete=yes)),
    )
    own = F.array(*to_replicas, F.when(metadata, send(F.lit(None).cast("int"))))
    return F.concat(F.array_compact(own), stops)


def _batches() -> Column:
    """The (batch, broker) groups of ``_per_batch`` as ``BATCHES_SCHEMA`` rows (the null
    broker's group exploded to one row per live broker, ``_to``, before this)."""
    zero = F.lit(0).cast("long")
    batch, broker = F.col(t.REQUEST_BATCH), F.col(s.BROKER)

    def row(to: Column, kind: str, n: Column, leads: Column, deletes: Column) -> Column:
        return F.struct(
            batch.alias(t.REQUEST_BATCH),
            to.cast("int").alias(s.BROKER),
            F.lit(kind).alias(KIND),
            n.alias(PARTITIONS),
            leads.alias(BECOME_LEADER),
            (n - leads if kind == LEADER_AND_ISR else zero).alias(BECOME_FOLLOWER),
            deletes.alias(DELETES),
        )

    per_broker = F.array(
        row(broker, LEADER_AND_ISR, F.col("_lair"), F.col("_leads"), zero),
        row(broker, STOP_REPLICA, F.col("_stop"), zero, F.col("_deletes")),
    )
    to_all = F.array(row(F.col("_to"), UPDATE_METADATA, F.col("_metadata"), zero, zero))
    return F.when(broker.isNull(), to_all).otherwise(per_broker)


def _no_requests() -> dict[str, int]:
    """Every key of ``request_totals``, at 0."""
    totals = {key: 0 for kind in KINDS for key in (kind, f"{kind}_{PARTITIONS}")}
    totals[f"{STOP_REPLICA}_{DELETES}"] = 0
    return totals


@lru_cache(maxsize=1)
def _totals() -> tuple[Column, ...]:
    """The aggregates of ``RequestCount`` over ``_per_batch``'s groups."""
    return (
        F.sum("_lair").alias("_rq_lair"),
        F.count_if(F.col("_lair") > 0).alias("_rq_lair_requests"),
        F.sum("_stop").alias("_rq_stop"),
        F.count_if(F.col("_stop") > 0).alias("_rq_stop_requests"),
        F.sum("_deletes").alias("_rq_deletes"),
        F.sum("_metadata").alias("_rq_metadata"),
        F.count_if(F.col("_metadata") > 0).alias("_rq_metadata_batches"),
    )


@dataclass(frozen=True)
class RequestCount:
    """An event's ``request_totals`` as one aggregation, for a job that reads the diff anyway:
    aggregate ``aggregates`` over ``frame`` (the diff's requests per batch and broker) and pass
    the row to ``totals``."""

    frame: DataFrame
    aggregates: tuple[Column, ...]
    brokers: int  # live or shutting down: each gets every UpdateMetadata

    def totals(self, row: Mapping[str, Any]) -> dict[str, int]:
        totals = _no_requests()
        if not self.aggregates:
            return totals
        totals[LEADER_AND_ISR] = int(row["_rq_lair_requests"] or 0)
        totals[f"{LEADER_AND_ISR}_{PARTITIONS}"] = int(row["_rq_lair"] or 0)
        totals[UPDATE_METADATA] = int(row["_rq_metadata_batches"] or 0) * self.brokers
        totals[f"{UPDATE_METADATA}_{PARTITIONS}"] = int(row["_rq_metadata"] or 0) * self.brokers
        totals[STOP_REPLICA] = int(row["_rq_stop_requests"] or 0)
        totals[f"{STOP_REPLICA}_{PARTITIONS}"] = int(row["_rq_stop"] or 0)
        totals[f"{STOP_REPLICA}_{DELETES}"] = int(row["_rq_deletes"] or 0)
        return totals

    def aggregated(self) -> DataFrame:
        """The one-row frame of ``aggregates`` (an empty aggregation if no broker is live)."""
        if not self.aggregates:
            return self.frame.agg(F.count(F.lit(1)).alias("_rq_none"))
        return self.frame.agg(*self.aggregates)


def request_count(
    diff: DataFrame, live_or_shutting_down: Collection[int], deleting_topics: Sequence[int] = ()
) -> RequestCount:
    """``request_totals(request_batches(...))`` as an aggregation (see ``RequestCount``)."""
    w = check_diff(diff)
    live = BrokerSet.of(live_or_shutting_down)
    if not live.ids:
        return RequestCount(diff, (), 0)
    return RequestCount(_per_batch(diff, w, live, deleting_topics), _totals(), len(live.ids))


def request_totals(batches: DataFrame) -> dict[str, int]:
    """The event's requests in one small collect, for its metrics line.

    ``<kind>``: requests sent (one per (batch, broker) row); ``<kind>_partitions``: partition
    entries over those requests (an UpdateMetadata for n partitions to b brokers counts n·b);
    ``StopReplica_deletes``: StopReplica entries with deletePartition=true. Every key is present.
    The batches are at most three rows per broker and batch, so they are summed on the driver.
    """
    totals = _no_requests()
    for row in batches.select(KIND, PARTITIONS, DELETES).collect():
        totals[row[KIND]] += 1
        totals[f"{row[KIND]}_{PARTITIONS}"] += int(row[PARTITIONS])
        if row[KIND] == STOP_REPLICA:
            totals[f"{STOP_REPLICA}_{DELETES}"] += int(row[DELETES])
    return totals
