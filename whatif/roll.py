"""``kce whatif roll``: a rolling restart in batches, and whether it keeps min.insync.replicas.

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
rolled are the live ones. During batch b a partition's ISR is its live ISR minus b:

* ``offline``: no ISR member left; ``under_min_isr``: some left, but fewer than the topic's
  ``min.insync.replicas``;
* ``min_margin``: the smallest ``|ISR during b| − min.insync.replicas`` over all partitions;
* ``leaders_moved``: partitions whose leader at the start of b is in b and has a successor.

**Safe batchings.** A batching is safe when no partition drops under min ISR in any batch; since
the ISR is restored between batches, the order of the batches does not matter, only which
brokers share one. A batching "of size N" splits the live brokers into ⌈n/N⌉ batches of at most N
brokers. A partition with ISR slack ``s = |live ISR| − min.insync.replicas`` allows at most ``s``
of its ISR members in the same batch, so a partition with ``s ≤ 0`` (at min ISR already, below
it, or offline) makes every batching unsafe. ``max_safe_batch`` is the most brokers one batch of a
safe batching restarts together — the largest batch of the greedy's batching for the largest N
it succeeds at (0 when some partition makes every batching unsafe); ``max_safe_batch_others``
the same over the partitions with ``s ≥ 1``.

Finding a safe batching is graph colouring: brokers sharing a tight partition may not share a
batch. The planner collects, per pair of brokers, the smallest slack of the partitions whose ISR
holds both (aggregated in Spark: at most brokers² rows) and places the brokers, most conflicted
first, into the first batch that keeps, for every broker x of the batch, ``1 + (batch members
sharing a partition with x) ≤ (the smallest slack among those pairs)`` — a sufficient condition
for ``|batch ∩ ISR| ≤ s`` of every partition. It is a greedy: when it finds no safe batching,
one may still exist (``batches_from`` says "id order": the brokers in id order, N at a time).
Every batching reported is then evaluated exactly, all batches in one Spark job.

``unsafe_partitions``: the partitions that make a safe batching impossible on their own at the
requested size (``--batch N``: their ISR does not fit in ⌈n/N⌉ batches at ``min(s, N)`` per
batch; ``--batch rack``: a rack holds more than ``s`` of their ISR). ``--batch rack`` rolls one
rack per batch, racks in name order, then every rackless broker on its own.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    IntegerType,
    StringType,
    StructField,
    StructType,
)

from statemachines import schemas as s
from statemachines.columns import literal_array
from whatif.answer import Answer
from whatif.cluster import WhatIfCluster, WhatIfInputError
from whatif.options import RollOptions
from whatif.report import Section, bars_before_after, margins_per_batch

ISR_LIVE = "isr_live"
LIVE_ISR_SIZE = "live_isr_size"
MIN_ISR = "min_isr"
SLACK = "slack"
LEADER_BEFORE = "leader_before"
LEADER_AFTER = "leader_after"
CHANGES = "leader_changes"
BATCH = "batch"
ISR_DURING = "isr_during"
MARGIN = "margin"
OFFLINE = "offline"
UNDER = "under_min_isr"
MOVED = "leader_moved"
REASON = "reason"

# Broker ids up to this are looked up in an array literal indexed by id (``batch_lookup``).
MAX_DENSE_ID = 1 << 16
# The summary lists at most this many unsafe partitions (the count is always exact).
MAX_LISTED = 1000
NO_LEADER = s.NO_LEADER
ASSUMPTION = (
    "Assumes each batch's replicas have caught up and rejoined the ISR before the next batch "
    "starts; every batch starts from the snapshot's ISR."
)

_I = IntegerType()
_MIN_ISR_SCHEMA = StructType(
    [StructField(s.TOPIC, StringType(), nullable=False), StructField(MIN_ISR, _I, nullable=False)]
)


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
    """(topic, partition, replicas, isr, leader, isr_live, live_isr_size, min_isr, slack). No job.

    ``isr_live``: the ISR members on live brokers, in ISR order; ``slack``: ``live_isr_size −
    min_isr``.
    """
    live = batch_lookup([cluster.brokers])
    default = cluster.broker_defaults.min_insync_replicas
    frame = cluster.partitions.select(s.TOPIC, s.PARTITION, s.REPLICAS, s.ISR, s.LEADER)
    overrides = {
        t: c.min_insync_replicas
        for t, c in cluster.topic_configs.items()
        if c.min_insync_replicas != default
    }
    if overrides:
        table = pa.table(
            {
                s.TOPIC: pa.array(list(overrides), pa.string()),
                MIN_ISR: pa.array(list(overrides.values()), pa.int32()),
            }
        )
        by_topic = spark.createDataFrame(table, _MIN_ISR_SCHEMA)
        frame = frame.join(F.broadcast(by_topic), s.TOPIC, "left").withColumn(
            MIN_ISR, F.coalesce(F.col(MIN_ISR), F.lit(default))
        )
    else:
        frame = frame.withColumn(MIN_ISR, F.lit(default))
    return (
        frame.withColumn(ISR_LIVE, F.filter(s.ISR, lambda b: live(b) >= 0))
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
    during = F.filter(ISR_LIVE, lambda r: batch_of(r) != batch)
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


# -- choosing batches ----------------------------------------------------------------------------


def conflict_pairs(form: DataFrame) -> tuple[dict[tuple[int, int], int], int]:
    """(pairs, always unsafe): for each pair of brokers (a < b) both in the live ISR of some
    partition with slack ≥ 1, the smallest such slack; and how many partitions have slack ≤ 0
    (no batching keeps them at or above min ISR). One Spark job."""
    slack = F.col(SLACK)
    # A partition of slack ≤ 0 is one (-1, -1) row: the same aggregation counts them.
    first = (
        F.when(slack <= 0, F.array(F.lit(-1)))
        .when(F.col(LIVE_ISR_SIZE) >= 2, F.col(ISR_LIVE))
        .otherwise(F.array().cast("array<int>"))
    )
    rows = form.select(F.explode(first).alias("a"), ISR_LIVE, SLACK)
    second = F.when(F.col("a") == -1, F.array(F.lit(-1))).otherwise(
        F.filter(ISR_LIVE, lambda x: x > F.col("a"))
    )
    found = (
        rows.select("a", F.explode(second).alias("b"), SLACK)
        .groupBy("a", "b")
        .agg(F.min(SLACK).alias(SLACK), F.count(F.lit(1)).alias("n"))
        .collect()
    )
    out: dict[tuple[int, int], int] = {}
    unsafe = 0
    for r in found:
        if r["a"] == -1:
            unsafe = int(r["n"])
        else:
            out[(int(r["a"]), int(r["b"]))] = int(r[SLACK])
    return out, unsafe


def greedy_batches(
    brokers: Sequence[int], size: int, pairs: Mapping[tuple[int, int], int]
) -> list[list[int]] | None:
    """A batching of ``brokers`` into ⌈n/size⌉ batches of at most ``size`` that the pair slacks
    prove safe, or None when the greedy finds none.

    Welsh–Powell order (most conflicting pairs first, then id), first batch that fits. A broker
    x fits batch B when, after adding it, every member y of B still has ``1 + (members sharing a
    partition with y) ≤ (smallest pair slack of y within B)``: any partition's ISR members in
    B are y and some of those neighbours, and the partition's slack is at least that smallest
    pair slack, so the batch holds at most slack of them.
    """
    n = len(brokers)
    if n == 0:
        return []
    count = math.ceil(n / size)
    neighbours: dict[int, dict[int, int]] = {b: {} for b in brokers}
    for (a, b), slack in pairs.items():
        if a in neighbours and b in neighbours:
            neighbours[a][b] = slack
            neighbours[b][a] = slack
    order = sorted(brokers, key=lambda b: (-len(neighbours[b]), b))
    members: list[list[int]] = [[] for _ in range(count)]
    # Per batch and member: how many neighbours it has in the batch, and their smallest slack.
    degree: list[dict[int, int]] = [{} for _ in range(count)]
    tightest: list[dict[int, int]] = [{} for _ in range(count)]
    for x in order:
        for i in range(count):
            if len(members[i]) >= size:
                continue
            linked = [y for y in members[i] if y in neighbours[x]]
            if linked:
                own = min(neighbours[x][y] for y in linked)
                if len(linked) + 1 > own:
                    continue
                if any(degree[i][y] + 2 > min(tightest[i][y], neighbours[x][y]) for y in linked):
                    continue
            members[i].append(x)
            degree[i][x] = len(linked)
            tightest[i][x] = min((neighbours[x][y] for y in linked), default=n)
            for y in linked:
                degree[i][y] += 1
                tightest[i][y] = min(tightest[i][y], neighbours[x][y])
            break
        else:
            return None
    batches = [sorted(m) for m in members if m]
    return sorted(batches, key=lambda m: m[0])


def id_order_batches(brokers: Sequence[int], size: int) -> list[list[int]]:
    ordered = sorted(brokers)
    return [ordered[i : i + size] for i in range(0, len(ordered), size)]


def rack_batches(brokers: Sequence[int], racks: Mapping[int, str | None]) -> list[list[int]]:
    """One batch per rack (racks by name), then each rackless broker alone."""
    by_rack: dict[str, list[int]] = {}
    rackless: list[int] = []
    for b in sorted(brokers):
        rack = racks.get(b)
        if rack is None:
            rackless.append(b)
        else:
            by_rack.setdefault(rack, []).append(b)
    if not by_rack:
        raise WhatIfInputError(
            "--batch rack: no live broker has a rack — give the racks with --rack-map FILE "
            "(CSV id,rack) or roll N brokers at a time with --batch N"
        )
    return [by_rack[r] for r in sorted(by_rack)] + [[b] for b in rackless]


def max_safe_batch(brokers: Sequence[int], pairs: Mapping[tuple[int, int], int]) -> int:
    """The most brokers one batch restarts in a safe batching the greedy finds: the largest
    batch of its batching for the largest N it succeeds at (1 at least, one broker at a time
    being safe for every partition of slack ≥ 1).

    Batchings of at most N brokers, for every N giving the same number of batches, are the same
    problem: the answer is the batch actually formed, not the loosest N (for racks of 34, 33
    and 33 brokers and cross-rack conflicts, N = 49 also gives three batches, of 34, 33, 33).
    """
    for size in range(len(brokers), 1, -1):
        found = greedy_batches(brokers, size, pairs)
        if found is not None:
            return max(len(b) for b in found)
    return min(1, len(brokers))


def unsafe_rows(form: DataFrame, batches: Sequence[Sequence[int]], size: int | None) -> DataFrame:
    """The partitions that no batching of the requested kind keeps at or above min ISR, with a
    reason. ``size``: ``--batch N`` (any batching of N; ``batches`` unused), None: exactly
    ``batches`` (``--batch rack``). No job."""
    m, slack = F.col(LIVE_ISR_SIZE), F.col(SLACK)
    if size is not None:
        count = math.ceil(sum(len(b) for b in batches) / size)
        # Each of the batches can take at most min(slack, size) of the partition's ISR members;
        # the other brokers fill the rest (count × size ≥ n).
        capacity = F.least(slack, F.lit(size)) * count
        spread = "its ISR cannot be spread over the batches"
    else:
        ids = F.transform(ISR_LIVE, batch_lookup(batches))
        most = F.array_max(
            F.transform(F.array_distinct(ids), lambda b: F.size(F.filter(ids, lambda x: x == b)))
        )
        capacity = m - F.coalesce(most, F.lit(0)) + slack
        spread = "a rack holds more of its ISR than its slack"
    reason = (
        F.when(m == 0, F.lit("offline before the roll"))
        .when(slack < 0, F.lit("under min ISR before the roll"))
        .when(slack == 0, F.lit("at min ISR: any ISR member down drops it"))
        .otherwise(F.lit(spread))
    )
    return form.where((m == 0) | (capacity < m)).select(
        s.TOPIC, s.PARTITION, s.ISR, MIN_ISR, reason.alias(REASON)
    )


# -- the answer ----------------------------------------------------------------------------------


def answer(spark: SparkSession, cluster: WhatIfCluster, options: RollOptions) -> Answer:
    """Batches, their min-ISR impact and leader moves, the largest safe batch size."""
    brokers = list(cluster.brokers)
    if not brokers:
        raise WhatIfInputError("roll: the snapshot has no live brokers to restart")
    size = options.batch
    if not options.by_rack:
        if size is None or size < 1:
            raise WhatIfInputError("roll: give --batch N (N ≥ 1) or --batch rack")
        if size > len(brokers):
            raise WhatIfInputError(
                f"--batch {size} is more than the {len(brokers)} live brokers — "
                f"use at most --batch {len(brokers)}"
            )
    # Before any Spark job: a cluster without racks is an input error.
    by_rack = rack_batches(brokers, cluster.racks) if options.by_rack else None
    form = partition_form(spark, cluster)
    pairs, always_unsafe = conflict_pairs(form)
    largest = max_safe_batch(brokers, pairs)
    if by_rack is not None:
        batches, chosen_by = by_rack, "racks"
    else:
        assert size is not None
        greedy = greedy_batches(brokers, size, pairs)
        if greedy is not None:
            batches, chosen_by = greedy, "greedy"
        else:
            batches, chosen_by = id_order_batches(brokers, size), "id order"
    results, at_risk = evaluate_batches(form, batches)
    unsafe = unsafe_rows(form, batches, None if options.by_rack else size)
    listed = unsafe.orderBy(s.TOPIC, s.PARTITION).limit(MAX_LISTED + 1).collect()
    unsafe_count = len(listed) if len(listed) <= MAX_LISTED else unsafe.count()
    unsafe_list = [
        {
            "topic": r[s.TOPIC],
            "partition": int(r[s.PARTITION]),
            "isr": [int(b) for b in r[s.ISR]],
            "min_isr": int(r[MIN_ISR]),
            "reason": r[REASON],
        }
        for r in listed[:MAX_LISTED]
    ]
    chained = with_leader_chain(form, batches)
    before, after = _leaders_per_broker(chained, brokers)
    safe = all(r.under_min_isr == 0 and r.offline == 0 for r in results)
    summary: dict[str, Any] = {
        "batch_size": "rack" if options.by_rack else size,
        "max_safe_batch": 0 if always_unsafe else largest,
        "max_safe_batch_others": largest,
        "batches": [list(b) for b in batches],
        "batches_from": chosen_by,
        "safe": safe,
        "unsafe_partitions": unsafe_list,
        "unsafe_partition_count": unsafe_count,
        "per_batch": [r.as_json() for r in results],
        "leaders_per_broker_before": {str(b): before.get(b, 0) for b in brokers},
        "leaders_per_broker_after": {str(b): after.get(b, 0) for b in brokers},
        "assumption": ASSUMPTION,
    }
    return Answer(
        question="roll",
        summary=summary,
        lines=_lines(summary, results, unsafe_list, always_unsafe),
        tables=_tables(spark, cluster, batches, chained, at_risk, before, after),
        sections=_sections(summary, results, unsafe_list, before, after),
    )


def _leaders_per_broker(
    chained: DataFrame, brokers: Sequence[int]
) -> tuple[dict[int, int], dict[int, int]]:
    """Leaders per broker in the snapshot and after the roll (one job)."""
    kinds = F.array(
        F.struct(F.lit(0).alias("after"), F.col(s.LEADER).alias("b")),
        F.struct(F.lit(1).alias("after"), F.col(LEADER_AFTER).alias("b")),
    )
    rows = (
        chained.select(F.explode(kinds).alias("k"))
        .where(F.col("k.b") >= 0)
        .groupBy("k.after", "k.b")
        .count()
        .collect()
    )
    before = {int(r["b"]): int(r["count"]) for r in rows if r["after"] == 0}
    after = {int(r["b"]): int(r["count"]) for r in rows if r["after"] == 1}
    return before, after


def _batch_label(i: int, brokers: Sequence[int]) -> str:
    shown = ",".join(map(str, brokers[:4])) + ("…" if len(brokers) > 4 else "")
    return f"{i + 1}: {shown}"


def _lines(
    summary: Mapping[str, Any],
    results: Sequence[BatchResult],
    unsafe: Sequence[Mapping[str, Any]],
    always_unsafe: int,
) -> list[str]:
    how = {
        "racks": "one rack per batch",
        "greedy": f"batches of at most {summary['batch_size']}, ordered by the greedy",
        "id order": f"batches of {summary['batch_size']} in id order (the greedy found no safe "
        "batching)",
    }[summary["batches_from"]]
    lines = [f"Rolling restart in {len(results)} batches, {how}."]
    if summary["safe"]:
        lines.append("Every partition stays at or above min.insync.replicas in every batch.")
    else:
        worst = min(results, key=lambda r: r.min_margin if r.min_margin is not None else 0)
        lines.append(
            f"Not safe: worst batch {list(worst.brokers)} leaves {worst.under_min_isr} "
            f"partitions under min ISR and {worst.offline} offline (margin {worst.min_margin})."
        )
    lines.append(
        f"Largest safe batch size: {summary['max_safe_batch']} (greedy; "
        f"{summary['max_safe_batch_others']} for the partitions that can be kept safe)."
    )
    moved = sum(r.leaders_moved for r in results)
    lines.append(f"Leaders moved by controlled shutdowns: {moved} over the whole roll.")
    if unsafe:
        shown = ", ".join(f"{u['topic']}-{u['partition']}" for u in unsafe[:3])
        more = summary["unsafe_partition_count"] - min(3, len(unsafe))
        lines.append(
            f"Unsafe partitions: {summary['unsafe_partition_count']} ({shown}"
            + (f" and {more} more" if more > 0 else "")
            + f"); {always_unsafe} unsafe at any batch size."
        )
    lines.append(ASSUMPTION)
    return lines[:10]


def _sections(
    summary: Mapping[str, Any],
    results: Sequence[BatchResult],
    unsafe: Sequence[Mapping[str, Any]],
    before: Mapping[int, int],
    after: Mapping[int, int],
) -> list[Section]:
    labels = [_batch_label(i, r.brokers) for i, r in enumerate(results)]
    margins = [r.min_margin if r.min_margin is not None else 0 for r in results]
    rows = [
        {
            "batch": i + 1,
            "brokers": list(r.brokers),
            "under min ISR": r.under_min_isr,
            "offline": r.offline,
            "leaders moved": r.leaders_moved,
            "min margin": r.min_margin,
        }
        for i, r in enumerate(results)
    ]
    sections = [
        Section(
            "Batches",
            f"Batches from: {summary['batches_from']}. Margin = ISR size while the batch is down "
            f"− min.insync.replicas; below 0 the partition rejects acks=all writes. {ASSUMPTION}",
            charts=[margins_per_batch("Smallest min-ISR margin per batch", labels, margins)],
            tables=[rows],
        ),
        Section(
            "Leaders per broker",
            "In the snapshot and after the roll: controlled shutdowns move leaders off each "
            "batch, preferred elections bring them back where the preferred replica is in sync.",
            charts=[bars_before_after("Leaders per broker", before, after, "leaders")],
        ),
    ]
    if unsafe:
        sections.append(
            Section(
                "Unsafe partitions",
                "No batching of the requested kind keeps these at or above min ISR.",
                tables=[[dict(u) for u in unsafe]],
            )
        )
    return sections


_BATCHES_SCHEMA = StructType(
    [StructField(BATCH, _I, nullable=False), StructField(s.BROKER, _I, nullable=False)]
)
_BROKERS_SCHEMA = StructType(
    [
        StructField(s.BROKER, _I, nullable=False),
        StructField("rack", StringType(), nullable=True),
        StructField(BATCH, _I, nullable=False),
        StructField("leaders_before", _I, nullable=False),
        StructField("leaders_after", _I, nullable=False),
    ]
)


def _tables(
    spark: SparkSession,
    cluster: WhatIfCluster,
    batches: Sequence[Sequence[int]],
    chained: DataFrame,
    at_risk: DataFrame,
    before: Mapping[int, int],
    after: Mapping[int, int],
) -> dict[str, DataFrame]:
    index = [i for i, batch in enumerate(batches) for _ in batch]
    members = [b for batch in batches for b in batch]
    batch_table = pa.table(
        {BATCH: pa.array(index, pa.int32()), s.BROKER: pa.array(members, pa.int32())}
    )
    broker_table = pa.table(
        {
            s.BROKER: pa.array(members, pa.int32()),
            "rack": pa.array([cluster.racks.get(b) for b in members], pa.string()),
            BATCH: pa.array(index, pa.int32()),
            "leaders_before": pa.array([before.get(b, 0) for b in members], pa.int32()),
            "leaders_after": pa.array([after.get(b, 0) for b in members], pa.int32()),
        }
    )
    partitions = chained.select(
        s.TOPIC,
        s.PARTITION,
        s.REPLICAS,
        s.ISR,
        MIN_ISR,
        SLACK,
        F.col(s.LEADER).alias(LEADER_BEFORE),
        LEADER_AFTER,
    )
    return {
        "batches": spark.createDataFrame(batch_table, _BATCHES_SCHEMA),
        "brokers": spark.createDataFrame(broker_table, _BROKERS_SCHEMA).orderBy(s.BROKER),
        "partitions_at_risk": at_risk,
        "partitions": partitions,
    }
