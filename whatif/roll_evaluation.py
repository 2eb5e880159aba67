"""What each batch of a rolling restart does to every partition, all batches in one Spark job.

Each batch follows Kafka's sequence (spec §8.4, §11):

1. **Controlled shutdown** of the batch's brokers. A partition they lead moves its leadership to
   the first replica, in assignment order, that is in the ISR and not shutting down (the
   ControlledShutdown election, §7.1); with no such replica the leadership stays (Kafka reports the
   partition as remaining, the broker gives up and stops: the partition goes offline). The
   batch's replicas leave the ISR: new ISR = ISR − batch.
2. **Restart and catch-up**: the brokers return and their replicas rejoin the ISR. Assumed
   complete before the next batch starts: the ISR is back to the snapshot's. A partition that
   had no leader elects the first ISR replica (the offline election at broker startup, §8.1).
3. **Preferred election** (``kafka-leader-election.sh --election-type preferred``): a partition
   whose first replica is in the ISR gets it back as leader (§7.1 ``preferred``).

The snapshot's ISR is where every batch starts: an already under-replicated partition counts.
Only live ISR members count (a replica on a broker that is down gives no redundancy); the brokers
rolled are the live ones. During batch b a partition's ISR is its live ISR minus b, or — when
none is left and the topic allows unclean election — the live replica outside b that the offline
election picks (§8.2), alone. The counts are ``fail``'s (``whatif.isr_rules``):

* ``offline``: no live ISR member left, so no leader (Kafka keeps the last, stopped, member in
  the ISR); ``under_min_isr``: a leader, but fewer ISR members than the topic's
  ``min.insync.replicas``;
* ``min_margin``: the smallest ``|ISR during b| − min.insync.replicas`` over all partitions;
* ``leaders_moved``: partitions whose leader at the start of b is in b and has a successor.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from statemachines import schemas as s
from statemachines.columns import literal_array
from whatif.cluster import WhatIfCluster
from whatif.isr_rules import DELETING, UNCLEAN, left_offline, with_topic_configs
from whatif.isr_rules import MIN_ISR as RULES_MIN_ISR

ISR_LIVE = "isr_live"
LIVE_ISR_SIZE = "live_isr_size"
MIN_ISR = "min_isr"
SLACK = "slack"
LEADER_AFTER = "leader_after"
CHANGES = "leader_changes"
BATCH = "batch"
ISR_DURING = "isr_during"
MARGIN = "margin"
OFFLINE = "offline"
UNDER = "under_min_isr"
MOVED = "leader_moved"

# Broker ids up to this are looked up in an array literal indexed by id (``batch_lookup``).
MAX_DENSE_ID = 1 << 16
NO_LEADER = s.NO_LEADER


@dataclass(frozen=True)
class BatchResult:
    """One batch: its brokers and what its controlled shutdown does."""

    brokers: tuple[int, ...]
    under_min_isr: int
    offline: int
    leaders_moved: int
    min_margin: int | None  # None: no partitions at all

    def as_json(self) -> dict[str, Any]:
        return {
            "brokers": list(self.brokers),
            "under_min_isr": self.under_min_isr,
            "offline": self.offline,
            "leaders_moved": self.leaders_moved,
            "min_margin": self.min_margin,
        }


# -- the per-partition form ----------------------------------------------------------------------


def partition_form(spark: SparkSession, cluster: WhatIfCluster) -> DataFrame:
    """(topic, partition, replicas, isr, leader, isr_live, live_isr_size, min_isr, slack,
    unclean_leader_election_enable). No job.

    ``isr_live``: the ISR members on live brokers, in ISR order — none for a partition Kafka left
    without a leader (``isr_rules.left_offline``: its ISR is down); ``slack``: ``live_isr_size −
    min_isr``. Topics queued for deletion are left out: the controlled shutdown leaves them alone
    (§8.4 step 5) and they count in no figure.
    """
    live = batch_lookup([cluster.brokers])
    rows = with_topic_configs(cluster, cluster.partitions)
    deleting = F.col(DELETING)
    frame = rows.where(~deleting).select(
        s.TOPIC,
        s.PARTITION,
        s.REPLICAS,
        s.ISR,
        s.LEADER,
        F.col(RULES_MIN_ISR).alias(MIN_ISR),
        UNCLEAN,
        left_offline(deleting).alias("_left_offline"),
    )
    isr_live = F.when(F.col("_left_offline"), F.array().cast("array<int>")).otherwise(
        F.filter(s.ISR, lambda b: live(b) >= 0)
    )
    return (
        frame.withColumn(ISR_LIVE, isr_live)
        .drop("_left_offline")
        .withColumn(LIVE_ISR_SIZE, F.size(ISR_LIVE))
        .withColumn(SLACK, F.col(LIVE_ISR_SIZE) - F.col(MIN_ISR))
    )


BatchOf = Callable[[Column], Column]


def batch_lookup(batches: Sequence[Sequence[int]]) -> BatchOf:
    """broker Column → its batch index (0-based), -1 for a broker in no batch (not live, or no
    broker: -1).

    Broker ids are usually small: an array literal indexed by id is one bounds-checked read per
    lookup, where a map literal or ``array_contains`` scans every entry, per replica of every
    partition. Ids beyond ``MAX_DENSE_ID`` fall back to a map literal.
    """
    index = {b: i for i, batch in enumerate(batches) for b in batch}
    top = max(index, default=0)
    if top <= MAX_DENSE_ID:
        dense = literal_array([index.get(b, -1) for b in range(top + 1)])
        return lambda broker: F.coalesce(F.get(dense, broker), F.lit(-1))
    keyed = F.map_from_arrays(literal_array(list(index)), literal_array(list(index.values())))
    return lambda broker: F.coalesce(F.element_at(keyed, broker), F.lit(-1))


def _successor(batch_of: BatchOf, batch: Column) -> Column:
    """The ControlledShutdown election while ``batch`` is down: the first replica in assignment
    order that is in the (live) ISR and not in the batch; null when there is none."""
    candidates = F.filter(
        s.REPLICAS,
        lambda r: F.array_contains(ISR_LIVE, r) & (batch_of(r) != batch),
    )
    return F.get(candidates, 0)


def with_leader_chain(form: DataFrame, batches: Sequence[Sequence[int]]) -> DataFrame:
    """Add ``leader_changes`` (array of (at, leader): the leader from the start of batch at+1 on,
    after the returns of the batches up to ``at``) and ``leader_after`` (after the whole roll).
    No job.

    A partition whose first replica is in the ISR has it back after every batch's preferred
    election: one change, (0, preferred). Otherwise leadership only moves when the current leader
    is shut down, to its successor, at most once per replica: a fold of at most RF steps.
    """
    batch_of = batch_lookup(batches)
    live_leader = F.when(batch_of(F.col(s.LEADER)) >= 0, F.col(s.LEADER)).otherwise(
        F.lit(NO_LEADER)
    )
    preferred = F.get(F.col(s.REPLICAS), 0)
    first_isr = F.coalesce(
        F.get(F.filter(s.REPLICAS, lambda r: F.array_contains(ISR_LIVE, r)), 0), F.lit(NO_LEADER)
    )
    in_first = batch_of(live_leader) == 0
    during_first = F.when(
        in_first, F.coalesce(_successor(batch_of, F.lit(0)), live_leader)
    ).otherwise(live_leader)
    # Back from the first batch: a partition with no leader elects the first ISR replica.
    after_first = F.when(during_first == NO_LEADER, first_isr).otherwise(during_first)

    def change(at: Column, leader: Column) -> Column:
        return F.struct(at.cast("int").alias("at"), leader.cast("int").alias("leader"))

    def step(acc: Column, _: Column) -> Column:
        leader = acc["leader"]
        at = batch_of(leader)  # -1 for no leader: never after acc.at
        moves = at > acc["at"]
        successor = F.coalesce(_successor(batch_of, at), leader)
        return F.struct(
            F.when(moves, successor).otherwise(leader).alias("leader"),
            F.when(moves, at).otherwise(acc["at"]).alias("at"),
            F.when(
                moves & (successor != leader),
                F.concat(acc["changes"], F.array(change(at, successor))),
            )
            .otherwise(acc["changes"])
            .alias("changes"),
        )

    start = F.struct(
        after_first.alias("leader"),
        F.lit(0).alias("at"),
        F.array(change(F.lit(0), after_first)).alias("changes"),
    )
    folded = F.aggregate(F.sequence(F.lit(1), F.size(s.REPLICAS)), start, step)["changes"]
    changes = F.when(F.array_contains(ISR_LIVE, preferred), F.array(change(F.lit(0), preferred)))
    changes = changes.otherwise(folded)
    return form.withColumn(CHANGES, changes).withColumn(
        LEADER_AFTER, F.try_element_at(CHANGES, F.lit(-1))["leader"]
    )


def _leader_at_start(batch: Column) -> Column:
    """The leader when ``batch`` starts: the snapshot's for the first, else the last change made
    before it."""
    earlier = F.filter(CHANGES, lambda c: c["at"] < batch)
    return F.when(batch == 0, F.col(s.LEADER)).otherwise(
        F.try_element_at(earlier, F.lit(-1))["leader"]
    )


# -- evaluating batches --------------------------------------------------------------------------


def batch_rows(form: DataFrame, batches: Sequence[Sequence[int]]) -> DataFrame:
    """One row per (partition, batch that holds one of its live replicas), plus one row per
    partition with batch -1 (the snapshot, nothing shut down): isr_during, margin, offline,
    under_min_isr, leader_moved, and whether the partition was already offline or under min ISR.
    No job.
    """
    batch_of = batch_lookup(batches)
    chained = with_leader_chain(form, batches)
    # The batches holding a live replica, and -1 (the snapshot row) from replicas on no batch.
    hit = F.array_union(F.transform(s.REPLICAS, batch_of), F.array(F.lit(-1)))
    rows = chained.withColumn(BATCH, F.explode(hit))
    batch = F.col(BATCH)
    # With no live ISR member outside the batch, the batch's brokers stop still leading and the
    # offline election (§8.2) picks a live replica outside it where the topic allows unclean
    # election: that replica alone is the ISR. Otherwise the partition is offline, its ISR
    # keeping the last member (isr_rules.isr_after_removing) but none of it live.
    clean = F.filter(ISR_LIVE, lambda r: batch_of(r) != batch)
    unclean = F.when(
        (batch >= 0) & (F.size(clean) == 0) & (F.col(LIVE_ISR_SIZE) > 0) & F.col(UNCLEAN),
        # The batches hold every live broker: a replica in none is down.
        F.filter(s.REPLICAS, lambda r: (batch_of(r) != batch) & (batch_of(r) >= 0)),
    )
    during = F.coalesce(F.slice(unclean, 1, 1), clean)
    leader = _leader_at_start(batch)
    moved = (batch >= 0) & (batch_of(leader) == batch) & _successor(batch_of, batch).isNotNull()
    size = F.size(ISR_DURING)
    return (
        rows.withColumn(ISR_DURING, during)
        .withColumn(MARGIN, size - F.col(MIN_ISR))
        .withColumn(OFFLINE, size == 0)
        .withColumn(UNDER, (size > 0) & (size < F.col(MIN_ISR)))
        .withColumn(MOVED, moved)
        .withColumn("was_offline", F.col(LIVE_ISR_SIZE) == 0)
        .withColumn("was_under", (F.col(LIVE_ISR_SIZE) > 0) & (F.col(SLACK) < 0))
    )


def evaluate_batches(
    form: DataFrame, batches: Sequence[Sequence[int]]
) -> tuple[list[BatchResult], DataFrame]:
    """Each batch's figures, all batches in one Spark job, and the partitions at risk (lazy:
    batch, topic, partition, isr_during, min_isr, margin, offline; batch null = already so
    before the roll, hence in every batch).

    Only the batches that hold a replica of a partition are evaluated for it; a partition no
    batch touches keeps its snapshot margin, which the batch -1 rows give once for all.
    """
    rows = batch_rows(form, batches)

    def as_int(flag: str) -> Column:
        return F.sum(F.col(flag).cast("int"))

    found = (
        rows.groupBy(BATCH)
        .agg(
            as_int(UNDER).alias(UNDER),
            as_int(OFFLINE).alias(OFFLINE),
            as_int(MOVED).alias(MOVED),
            F.min(MARGIN).alias(MARGIN),
            as_int("was_under").alias("was_under"),
            as_int("was_offline").alias("was_offline"),
        )
        .collect()
    )
    by_batch = {int(r[BATCH]): r for r in found}
    base = by_batch.get(-1)
    base_under = int(base[UNDER]) if base else 0
    base_offline = int(base[OFFLINE]) if base else 0
    base_margin = int(base[MARGIN]) if base else None
    results = []
    for i, brokers in enumerate(batches):
        r = by_batch.get(i)
        if r is None:  # no replica on this batch: every partition as in the snapshot
            results.append(BatchResult(tuple(brokers), base_under, base_offline, 0, base_margin))
            continue
        # Partitions this batch does not touch count as they are in the snapshot.
        margins = [int(r[MARGIN])] + ([base_margin] if base_margin is not None else [])
        results.append(
            BatchResult(
                tuple(brokers),
                int(r[UNDER]) + base_under - int(r["was_under"]),
                int(r[OFFLINE]) + base_offline - int(r["was_offline"]),
                int(r[MOVED]),
                min(margins),
            )
        )
    at_risk = rows.where(F.col(MARGIN) < 0).select(
        F.when(F.col(BATCH) >= 0, F.col(BATCH)).cast("int").alias(BATCH),
        s.TOPIC,
        s.PARTITION,
        ISR_DURING,
        MIN_ISR,
        MARGIN,
        OFFLINE,
    )
    return results, at_risk
