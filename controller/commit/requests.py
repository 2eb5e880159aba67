"""The controller-to-broker requests of one event (spec §15.1), read off its generation diff.

``request_batches(diff, live_or_shutting_down, deleting_topics)`` gives one row per (broker,
kind) with the number of partitions in that broker's request; ``request_totals`` sums them for
the event's metrics line, and ``request_count`` gives the same sums as aggregates that the
controller's pass over the diff computes with its ZooKeeper write totals. Requests to brokers
that are neither live nor shutting down are dropped, as ``sendRequestsToBrokers`` drops them.

Which changes send what (a replica's moves are the transitions of the row's trail,
``controller.commit.transitions.event_trail``: what the state machines applied in the event):

| Change | LeaderAndIsr | UpdateMetadata | StopReplica |
|---|---|---|---|
| leadership created (New → Online init, §5.3a, §9.1) | the new ISR | the partition | |
| leadership record changed (election §5.3b, epoch bump §10.3 A1/B3, ISR removal §6.3) | every replica of the new assignment not in an Offline/deletion state | the partition | |
| a replica went → OfflineReplica in a partition with leadership (§6.3; also when nothing was written) | the other replicas, as above | the partition | delete=false to that replica |
| a replica → OnlineReplica from Offline/DeletionIneligible, or NonExistent → NewReplica (reassignment A2), in a partition that had leadership (§6.3, §8.1 step 4) | that replica | the partition | |
| a replica → ReplicaDeletionStarted (§9.5), or removed from the assignment through it (reassignment B4/B5, §10.3) | | | delete=true to that replica |
| deletion started: a replica → ReplicaDeletionStarted or the partition → NonExistentPartition, topic queued (§9.5 onTopicDeletion step 2) | | the partition | |

LeaderAndIsr recipients exclude replicas in OfflineReplica or a deletion state: that is
Kafka's ``assignment − {r}`` for an ISR removal, and Kafka's elections send only to online
replicas. New → Online of a replica sends nothing (§6.3). For topics queued for deletion
(``deleting_topics``), leadership changes send no LeaderAndIsr and no UpdateMetadata of their
own (their only source is the ISR removal of deletion, which Kafka does not announce); the
deletion's UpdateMetadata broadcast does. UpdateMetadata carries only partitions that have
leadership, and goes to every live-or-shutting-down broker.

Where the diff-based derivation differs from Kafka:

* Kafka flushes one batch per state-machine call, so one event may send a broker several
  requests of one kind (a deletion sends StopReplica delete=false, then delete=true). Here a
  broker gets at most one request per kind per event; a partition in both is delete=true.
* Rows that did not change are not in the diff, so their same-state transitions send nothing:
  the Online → Online replica re-announcement at failover (§6.4). The broker-list-only UpdateMetadata of broker
  startup/failure/metadata change (§8.1 step 2, §8.2 step g, §8.5) and the full-metadata
  UpdateMetadata to a starting broker (§8.1 step 3) do not depend on changed partitions and
  are not derived here.
* Elections of the offline/preferred strategies send only to live replicas; here a replica on
  a shutting-down broker that is not Offline gets the LeaderAndIsr too (the controlled-shutdown
  and reassign strategies include it, as here).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache, reduce
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from controller.commit.diff import prev
from controller.commit.transitions import (
    brokers_with,
    check_diff,
    event_trail,
    partition_entered,
    slots_of,
    with_replica_slots,
)
from statemachines import schemas as s
from statemachines.brokers import BrokerSet, distinct_brokers, in_words
from statemachines.columns import any_of, count_of, in_topics, literal_array, present
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
        StructField(s.BROKER, IntegerType(), nullable=False),
        StructField(KIND, StringType(), nullable=False),
        StructField(PARTITIONS, LongType(), nullable=False),
        StructField(BECOME_LEADER, LongType(), nullable=False),
        StructField(BECOME_FOLLOWER, LongType(), nullable=False),
        StructField(DELETES, LongType(), nullable=False),
    ]
)

_R = ReplicaState
# A replica here got (or gets) StopReplica, not LeaderAndIsr.
_STOPPED = [
    int(_R.OfflineReplica),
    int(_R.ReplicaDeletionStarted),
    int(_R.ReplicaDeletionSuccessful),
    int(_R.ReplicaDeletionIneligible),
]
_TRAIL = "_trail"  # the event's trail of the row (``transitions.event_trail``)


def _announced(start: Column, end: Column) -> Column:
    """Replica transitions that send LeaderAndIsr when the partition has leadership (§6.3)."""
    offline, ineligible = int(_R.OfflineReplica), int(_R.ReplicaDeletionIneligible)
    return ((end == int(_R.OnlineReplica)) & start.isin(offline, ineligible)) | (
        (start == int(_R.NonExistentReplica)) & (end == int(_R.NewReplica))
    )


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
    """One row per (broker, kind) of the event's requests (``BATCHES_SCHEMA``); lazy.

    ``partitions``: partitions in the broker's request; ``become_leader``/``become_follower``:
    LeaderAndIsr partitions the broker leads / follows (0 for other kinds); ``deletes``:
    StopReplica partitions with deletePartition=true (0 for other kinds). ``deleting_topics``
    are the topic indices queued for deletion.
    """
    w = check_diff(diff)
    live = BrokerSet.of(live_or_shutting_down)
    if not live.ids:
        # Every request would be dropped at send time.
        return local_frame(diff.sparkSession, [], BATCHES_SCHEMA)
    plan, staged = _plan_for(w, live, deleting_topics)
    counted = (
        _moved(diff, w, plan, staged)
        .select(F.inline(plan.sent))
        .groupBy(s.BROKER)
        .agg(*plan.counts)
    )
    broker = F.col(s.BROKER)
    recipients = F.when(broker.isNull(), literal_array(sorted(live.ids))).otherwise(F.array(broker))
    return (
        counted.withColumn("_to", F.explode(recipients))
        .select(F.inline(plan.batches))
        .where(F.col(PARTITIONS) > 0)
    )


def _moved(diff: DataFrame, w: int, plan: _BatchPlan, staged: dict[str, Column]) -> DataFrame:
    """The diff with its replica slots, its event's trail and the plan's per-row moves: what
    both the batches and the totals read."""
    return (
        with_replica_slots(diff, w)
        .withColumn(_TRAIL, event_trail(diff, w))
        .withColumns(plan.moves)
        .withColumns(staged)
    )


@dataclass(frozen=True)
class _BatchPlan:
    """The Columns of ``request_batches`` for one (width, brokers, deleting topics)."""

    moves: dict[str, Column]  # staged first, from the row's trail
    staged: dict[str, Column]
    recipients: dict[str, Column]  # staged after ``staged``: who each slot's request goes to
    sent: Column
    counts: tuple[Column, ...]
    batches: Column
    totals: tuple[Column, ...]


_LIVE = "_live"  # the live-or-shutting-down brokers' words (``BrokerSet.words``), per event
# Recipients are counted as bits of 64-bit words when the live ids span at most this many words.
_RECIPIENT_WORDS = 16


def _plan_for(
    w: int, live: BrokerSet, deleting_topics: Sequence[int]
) -> tuple[_BatchPlan, dict[str, Column]]:
    """The plan for the event, and the columns to stage before it: the brokers enter as a
    column, so one plan serves every event of a width, deleting topics and span of live ids
    (in 64-bit words)."""
    deleting = tuple(sorted(set(deleting_topics)))
    if not live.in_word_range:
        plan = _batch_plan(w, live, deleting, None)
        return plan, plan.staged
    lo, hi = min(live.ids) // 64, max(live.ids) // 64
    words = range(lo, hi + 1) if hi - lo < _RECIPIENT_WORDS else None
    plan = _batch_plan(w, None, deleting, words)
    return plan, {**plan.staged, _LIVE: live.words()}


@lru_cache(maxsize=16)
def _batch_plan(
    w: int, live: BrokerSet | None, deleting_topics: tuple[int, ...], words: range | None
) -> _BatchPlan:
    """Built once per key and reused: an event's plan is otherwise thousands of JVM calls.

    ``live``: the brokers, or None to read them off the staged ``_LIVE`` column. ``words``:
    the indices of the 64-bit words that hold every live id, to count distinct recipients in
    (None: collect them as a set)."""
    has = _leadership(F.col(s.ZK_VERSION))
    had = _leadership(F.col(prev(s.ZK_VERSION)))
    gone = int(PartitionState.NonExistentPartition)
    slots = slots_of(w)
    trail = F.col(_TRAIL)
    offline, deletion = int(_R.OfflineReplica), int(_R.ReplicaDeletionStarted)

    # The brokers whose replica made such a transition, each an array staged once per row.
    moves = {
        "_to_offline": brokers_with(trail, lambda _a, b: b == offline),
        "_to_deletion": brokers_with(trail, lambda _a, b: b == deletion),
        "_announced": brokers_with(trail, _announced),
    }

    def entered_offline(e: Column) -> Column:
        return F.array_contains(F.col("_to_offline"), e.broker)

    def entered_deletion(e: Column) -> Column:
        return F.array_contains(F.col("_to_deletion"), e.broker)

    staged = {
        "_has": has,
        "_had": had,
        "_init": has & ~had,
        # Kafka announces the value after an ISR removal even when nothing was written.
        "_announce": has
        & had
        & ~in_topics(deleting_topics)
        & (_leadership_changed(w) | (F.size(F.col("_to_offline")) > 0)),
        "_deletion_broadcast": in_topics(deleting_topics)
        & has
        & ((F.size(F.col("_to_deletion")) > 0) | partition_entered(trail, gone)),
        "_isr": F.array(*(F.col(s.isr_col(k)) for k in range(w))),
    }

    def wanted(e: Column) -> Column:
        """The replica is added to the LeaderAndIsr batch (whether or not it is reachable)."""
        return e.assigned & (
            (F.col("_init") & F.array_contains(F.col("_isr"), e.broker))
            | (F.col("_announce") & ~e.current.isin(_STOPPED))
            | (F.col("_has") & F.col("_had") & F.array_contains(F.col("_announced"), e.broker))
        )

    # A LeaderAndIsr added for a partition also adds it to the UpdateMetadata, whether or not
    # the LeaderAndIsr itself reaches a live broker.
    some_wanted = any_of([F.coalesce(wanted(e), F.lit(False)) for e in slots])
    metadata = F.col("_has") & (F.col("_announce") | F.col("_deletion_broadcast") | some_wanted)
    no = F.lit(False)

    def reaches(broker: Column) -> Column:
        return live.contains(broker) if live is not None else in_words(F.col(_LIVE), broker)

    reachable = [reaches(e.broker) for e in slots]
    lair = [F.coalesce(wanted(e) & r, no) for e, r in zip(slots, reachable, strict=True)]
    stop = [
        F.coalesce((entered_offline(e) | entered_deletion(e)) & r, no)
        for e, r in zip(slots, reachable, strict=True)
    ]
    delete = [F.coalesce(entered_deletion(e), no) for e in slots]

    def entry(k: int) -> Column:
        """Slot k's entry, where its replica gets a LeaderAndIsr or a StopReplica (else null)."""
        e = slots[k]
        return F.when(
            lair[k] | stop[k],
            F.struct(
                e.broker.alias(s.BROKER),
                lair[k].alias("lair"),
                (e.broker == F.col(s.LEADER)).alias("leads"),
                stop[k].alias("stop"),
                delete[k].alias("delete"),
                no.alias("metadata"),
            ),
        )

    # Each slot's recipient (null if none), staged once: every word's aggregate reads it.
    recipients = {
        f"_{kind}_to_{k}": F.when(f, e.broker)
        for kind, flags in (("lair", lair), ("stop", stop))
        for k, (f, e) in enumerate(zip(flags, slots, strict=True))
    }

    def recipients_of(kind: str) -> Column:
        """How many brokers the slots' requests of ``kind`` go to, over the rows aggregated."""
        to = [F.col(f"_{kind}_to_{k}") for k in range(len(slots))]
        if words is None:
            return F.size(F.array_distinct(F.flatten(F.collect_set(present(to)))))
        return distinct_brokers(to, words)

    def sent_to(kind: str) -> Column:
        return count_of([F.col(f"_{kind}_to_{k}").isNotNull() for k in range(len(slots))])

    totals = (
        F.sum(sent_to("lair")).alias("_rq_lair"),
        recipients_of("lair").alias("_rq_lair_brokers"),
        F.sum(sent_to("stop")).alias("_rq_stop"),
        recipients_of("stop").alias("_rq_stop_brokers"),
        F.sum(
            count_of([F.col(f"_stop_to_{k}").isNotNull() & d for k, d in enumerate(delete)])
        ).alias("_rq_deletes"),
        F.count_if(metadata).alias("_rq_metadata"),
    )

    # One entry per replica sent something, plus one (broker null) that carries the
    # UpdateMetadata flag: a single aggregation counts both, and the null group fans out to
    # every broker after it.
    update_metadata = F.struct(
        F.lit(None).cast("int").alias(s.BROKER),
        no.alias("lair"),
        no.alias("leads"),
        no.alias("stop"),
        no.alias("delete"),
        metadata.alias("metadata"),
    )
    sent = F.array_compact(
        F.array(*map(entry, range(len(slots))), F.when(metadata, update_metadata))
    )
    counts = (
        F.count_if(F.col("lair")).alias("_lair"),
        F.count_if(F.col("lair") & F.col("leads")).alias("_leads"),
        F.count_if(F.col("stop")).alias("_stop"),
        F.count_if(F.col("stop") & F.col("delete")).alias("_deletes"),
        F.count_if(F.col("metadata")).alias("_metadata"),
    )
    zero = F.lit(0).cast("long")

    def batch(broker: Column, kind: str, n: Column, leads: Column, deletes: Column) -> Column:
        return F.struct(
            broker.cast("int").alias(s.BROKER),
            F.lit(kind).alias(KIND),
            n.alias(PARTITIONS),
            leads.alias(BECOME_LEADER),
            (n - leads if kind == LEADER_AND_ISR else zero).alias(BECOME_FOLLOWER),
            deletes.alias(DELETES),
        )

    # The null group's row is exploded to one per live broker (``_to``) before this.
    broker = F.col(s.BROKER)
    per_broker = F.array(
        batch(broker, LEADER_AND_ISR, F.col("_lair"), F.col("_leads"), zero),
        batch(broker, STOP_REPLICA, F.col("_stop"), zero, F.col("_deletes")),
    )
    to_all = F.array(batch(F.col("_to"), UPDATE_METADATA, F.col("_metadata"), zero, zero))
    batches = F.when(broker.isNull(), to_all).otherwise(per_broker)
    return _BatchPlan(moves, staged, recipients, sent, counts, batches, totals)


def _no_requests() -> dict[str, int]:
    """Every key of ``request_totals``, at 0."""
    totals = {key: 0 for kind in KINDS for key in (kind, f"{kind}_{PARTITIONS}")}
    totals[f"{STOP_REPLICA}_{DELETES}"] = 0
    return totals


@dataclass(frozen=True)
class RequestCount:
    """An event's ``request_totals`` as aggregates over its diff, for a job that reads the diff
    anyway: aggregate ``aggregates`` over ``frame`` (the diff with the columns they read) and
    pass the row to ``totals``."""

    frame: DataFrame
    aggregates: tuple[Column, ...]
    brokers: int  # live or shutting down: each gets the UpdateMetadata

    def totals(self, row: Mapping[str, Any]) -> dict[str, int]:
        totals = _no_requests()
        if not self.aggregates:
            return totals
        metadata = int(row["_rq_metadata"] or 0)
        totals[LEADER_AND_ISR] = int(row["_rq_lair_brokers"])
        totals[f"{LEADER_AND_ISR}_{PARTITIONS}"] = int(row["_rq_lair"] or 0)
        totals[UPDATE_METADATA] = self.brokers if metadata else 0
        totals[f"{UPDATE_METADATA}_{PARTITIONS}"] = metadata * self.brokers
        totals[STOP_REPLICA] = int(row["_rq_stop_brokers"])
        totals[f"{STOP_REPLICA}_{PARTITIONS}"] = int(row["_rq_stop"] or 0)
        totals[f"{STOP_REPLICA}_{DELETES}"] = int(row["_rq_deletes"] or 0)
        return totals


def request_count(
    diff: DataFrame, live_or_shutting_down: Collection[int], deleting_topics: Sequence[int] = ()
) -> RequestCount:
    """``request_totals(request_batches(...))`` without a job of its own (see ``RequestCount``)."""
    w = check_diff(diff)
    live = BrokerSet.of(live_or_shutting_down)
    if not live.ids:
        return RequestCount(diff, (), 0)
    plan, staged = _plan_for(w, live, deleting_topics)
    frame = _moved(diff, w, plan, staged).withColumns(plan.recipients)
    return RequestCount(frame, plan.totals, len(live.ids))


def request_totals(batches: DataFrame) -> dict[str, int]:
    """The event's requests in one small collect, for its metrics line.

    ``<kind>``: requests sent (one per broker row); ``<kind>_partitions``: partition entries
    over those requests (an UpdateMetadata for n partitions to b brokers counts n·b);
    ``StopReplica_deletes``: StopReplica entries with deletePartition=true. Every key is present.
    The batches are at most three rows per broker, so they are summed on the driver.
    """
    totals = _no_requests()
    for row in batches.select(KIND, PARTITIONS, DELETES).collect():
        totals[row[KIND]] += 1
        totals[f"{row[KIND]}_{PARTITIONS}"] += int(row[PARTITIONS])
        if row[KIND] == STOP_REPLICA:
            totals[f"{STOP_REPLICA}_{DELETES}"] += int(row[DELETES])
    return totals
