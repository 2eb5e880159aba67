"""``kce whatif fail``: what Kafka's controller does when brokers fail, computed offline.

``--brokers`` / ``--rack`` apply Kafka's broker-failure handling (spec §8.2) to the snapshot, with
the outcome of the controller's own ``controller.handlers.brokers.on_broker_failure`` (a test
compares them) but none of its bookkeeping, so a million partitions take one pass:

1. partitions whose leader is not live go ``OfflinePartition``;
2. ``triggerOnlinePartitionStateChange`` elects every Offline partition with the offline strategy
   (§7.1: the first live ISR member in assignment order; else, only where the topic enables
   ``unclean.leader.election.enable``, the first live replica; the new ISR is the live part of the
   old one, or the unclean leader alone);
3. the failed brokers' replicas go ``OfflineReplica`` (§6.3): they leave the ISR, except that the
   last ISR member is never removed, and a partition whose leader failed without a successor
   ends with leader -1.

Then it says what the return of the brokers does (§8.1, §11.2): partitions still offline are
elected again with every broker live; the returned brokers catch up and rejoin the ISRs they were
in; the auto leader rebalance makes preferred elections for the brokers whose ratio is strictly
above ``leader.imbalance.per.broker.percentage`` (none while any partition is being reassigned,
as in Kafka 2.6–3.3).

The figures (issue 37, ``docs/whatif.md``): ``offline_partitions`` have no leader after the
failure; ``unclean_elections_needed`` have no live ISR member but a live replica (elected only
where the topic allows unclean election); ``under_min_isr_partitions`` have a leader and fewer ISR
members than their ``min.insync.replicas``; ``leaders_moved`` got a new leader. Partitions of topics
queued for deletion (leader -2) are left alone, as Kafka leaves them.

``--any K`` asks the same of every K-subset of live brokers (or ``--samples`` random ones), in
one Spark job: a partition is offline after failing S exactly when it has no live leader outside
S and every broker it could elect is in S, so each partition reduces to one sorted array ``need``
(its electable live brokers, plus its live leader) and is offline iff ``need ⊆ S``. Partitions
are grouped by ``need`` first, groups larger than K can never go offline, and only the remaining
distinct arrays meet the broadcast sets.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from statemachines import schemas as s
from statemachines.brokers import BrokerSet
from statemachines.columns import (
    any_of,
    compact,
    count_of,
    has_leadership,
    in_list,
    present,
)
from statemachines.election import offline_leader
from statemachines.partition_states import PartitionState
from whatif import broker_balance as bb
from whatif.answer import Answer
from whatif.cluster import WhatIfCluster, WhatIfInputError, columns_frame
from whatif.options import FailOptions
from whatif.report import Section, bars_before_after, distribution, ratios_against_threshold

# Flags of ``partitions_after`` (one per partition).
OFFLINE = "offline"
UNDER_MIN_ISR = "under_min_isr"
UNCLEAN_NEEDED = "unclean_needed"
LEADER_MOVED = "leader_moved"
FLAGS = (OFFLINE, UNDER_MIN_ISR, UNCLEAN_NEEDED, LEADER_MOVED)

MIN_ISR = "min_insync_replicas"
UNCLEAN = "unclean_leader_election_enable"
LEADER_BEFORE = "leader_before"
ISR_BEFORE = "isr_before"
# After the return of the brokers: the leader once offline partitions are elected again, and
# whether the auto rebalance may elect the preferred replica (the preferred broker's ratio decides).
LEADER_RETURN = "leader_on_return"
PREFERRED = "preferred"
REBALANCE_CANDIDATE = "rebalance_candidate"

TOPICS = StructType(
    [
        StructField(s.TOPIC_INDEX, IntegerType(), nullable=False),
        StructField(s.TOPIC, StringType(), nullable=False),
        StructField(MIN_ISR, IntegerType(), nullable=False),
        StructField(UNCLEAN, BooleanType(), nullable=False),
    ]
)
BROKERS_SCHEMA = StructType(
    [
        StructField(s.BROKER, IntegerType(), nullable=False),
        StructField("rack", StringType(), nullable=True),
        StructField("failed", BooleanType(), nullable=False),
        StructField("leaders_before", IntegerType(), nullable=False),
        StructField("leaders_after", IntegerType(), nullable=False),
        StructField("replicas", IntegerType(), nullable=False),
        StructField("imbalance_ratio_after", DoubleType(), nullable=False),
        StructField("leaders_after_return", IntegerType(), nullable=False),
    ]
)
SETS_SCHEMA = StructType(
    [
        StructField("set_id", IntegerType(), nullable=False),
        StructField("brokers", ArrayType(IntegerType(), containsNull=False), nullable=False),
    ]
)
WORST_SETS = 10


# -- the snapshot's facts ------------------------------------------------------------------------


@dataclass(frozen=True)
class Snapshot:
    """What the transforms need to know about the snapshot before they are built (one job)."""

    width: int
    controller_epoch: int
    deleting_topics: frozenset[str]
    reassigning: bool
    topics: tuple[str, ...]

    def topic_indices(self, names: Iterable[str]) -> list[int]:
        index = {t: i for i, t in enumerate(self.topics)}
        return sorted(index[t] for t in names if t in index)


def snapshot_facts(cluster: WhatIfCluster) -> Snapshot:
    """Width (largest replica list), controller epoch, topics being deleted, and whether any
    partition is being reassigned, in one small job."""
    p = cluster.partitions
    row = p.agg(
        F.max(F.size(s.REPLICAS)).alias("w"),
        F.max(s.CONTROLLER_EPOCH).alias("epoch"),
        F.collect_set(F.when(F.col(s.LEADER) == s.LEADER_DURING_DELETE, F.col(s.TOPIC))).alias(
            "deleting"
        ),
        F.max(F.size(s.ADDING_REPLICAS) + F.size(s.REMOVING_REPLICAS)).alias("moving"),
    ).first()
    assert row is not None
    topics = tuple(sorted(cluster.topic_configs))
    return Snapshot(
        width=max(1, int(row["w"] or 1)),
        controller_epoch=int(row["epoch"] or 0),
        deleting_topics=frozenset(row["deleting"] or ()),
        reassigning=int(row["moving"] or 0) > 0,
        topics=topics,
    )


def topics_frame(spark: SparkSession, cluster: WhatIfCluster, topics: tuple[str, ...]) -> DataFrame:
    """(topic_index, topic, min_insync_replicas, unclean_leader_election_enable) per topic."""
    configs = [cluster.configs_of(t) for t in topics]
    columns = {
        s.TOPIC_INDEX: list(range(len(topics))),
        s.TOPIC: list(topics),
        MIN_ISR: [c.min_insync_replicas for c in configs],
        UNCLEAN: [c.unclean_leader_election_enable for c in configs],
    }
    return columns_frame(spark, columns, TOPICS)


# -- which brokers fail --------------------------------------------------------------------------


def failed_brokers(cluster: WhatIfCluster, options: FailOptions) -> tuple[int, ...]:
    """The brokers ``--brokers`` or ``--rack`` names, checked against the live brokers."""
    live = set(cluster.brokers)
    listed = ",".join(map(str, cluster.brokers))
    if options.rack is not None:
        chosen = tuple(b for b in cluster.brokers if cluster.racks.get(b) == options.rack)
        if not chosen:
            racks = sorted({r for b, r in cluster.racks.items() if r is not None and b in live})
            known = (
                f"its racks are {', '.join(racks)}"
                if racks
                else "no broker has a rack — give --rack-map FILE (CSV id,rack)"
            )
            raise WhatIfInputError(
                f"--rack {options.rack}: no live broker of {cluster.source or 'the cluster'} is "
                f"in that rack; {known}"
            )
        return chosen
    if options.brokers is None:
        raise WhatIfInputError("fail: give --brokers, --rack or --any")
    unknown = sorted(set(options.brokers) - live)
    if unknown:
        raise WhatIfInputError(
            f"--brokers {','.join(map(str, options.brokers))}: broker "
            f"{','.join(map(str, unknown))} is not a live broker of "
            f"{cluster.source or 'the cluster'} (live: {listed}) — name live broker ids"
        )
    return tuple(sorted(set(options.brokers)))


# -- the failure, as Kafka's controller handles it ------------------------------------------------


def after_failure(
    spark: SparkSession, cluster: WhatIfCluster, failed: Iterable[int], facts: Snapshot
) -> DataFrame:
    """The public partitions table after ``failed`` fail (lazy), with the ``FLAGS`` and
    ``leader_before``, ``isr_before``, ``min_insync_replicas``, ``leader_on_return``,
    ``preferred`` and ``rebalance_candidate`` columns."""
    dead = BrokerSet.of(failed)
    everyone = BrokerSet.of(cluster.brokers)
    live = everyone - dead
    topics = topics_frame(spark, cluster, facts.topics).drop(s.TOPIC_INDEX)
    rows = cluster.partitions.join(F.broadcast(topics), s.TOPIC, "left").withColumns(
        {
            MIN_ISR: F.coalesce(F.col(MIN_ISR), F.lit(cluster.broker_defaults.min_insync_replicas)),
            UNCLEAN: F.coalesce(
                F.col(UNCLEAN), F.lit(cluster.broker_defaults.unclean_leader_election_enable)
            ),
            LEADER_BEFORE: F.col(s.LEADER),
            ISR_BEFORE: F.col(s.ISR),
        }
    )
    failed_rows = on_failure(rows, facts.width, live, dead)
    return _with_flags(failed_rows, live, everyone, dead, facts.width)


def _slots(array: str, w: int) -> list[Column]:
    return [F.coalesce(F.get(F.col(array), k), F.lit(s.EMPTY_SLOT)) for k in range(w)]


def _staged(names: str, w: int) -> list[Column]:
    return [F.col(f"{names}{k}") for k in range(w)]


def on_failure(rows: DataFrame, w: int, live: BrokerSet, dead: BrokerSet) -> DataFrame:
    """§8.2 steps b–e over public partitions rows of replication factor ≤ ``w`` with an
    ``unclean_leader_election_enable`` column: the same outcome as
    ``controller.handlers.brokers.on_broker_failure`` (a test compares them), in a few int
    expressions per row and without the controller's bookkeeping (requests, state-change log).

    Offline election (§7.1 via ``statemachines.election.offline_leader``) for partitions with
    leadership whose leader is not live; then each failed ISR member leaves the ISR in ascending
    broker order, one write (epoch+1) each, except that the last member stays (§6.3); a leader
    that failed without a successor becomes -1. Topics queued for deletion are left alone.
    """
    reps, isr = _staged("_r", w), _staged("_i", w)
    leader = F.col(s.LEADER)
    slots = {f"_r{k}": c for k, c in enumerate(_slots(s.REPLICAS, w))}
    slots |= {f"_i{k}": c for k, c in enumerate(_slots(s.ISR, w))}
    acting = has_leadership() & (leader != s.LEADER_DURING_DELETE)
    first = {
        "_acting": acting,
        "_elect": acting & ~((leader >= 0) & live.contains(leader)),
        **{f"_live_r{k}": live.contains(r) for k, r in enumerate(reps)},
        **{f"_live_i{k}": live.contains(x) for k, x in enumerate(isr)},
    }
    elected = F.when(
        F.col("_elect"),
        offline_leader(reps, isr, _staged("_live_r", w), F.col(UNCLEAN)),
    )
    second = {"_new_leader": elected}
    new_leader = F.col("_new_leader")
    was_in_isr = in_list(new_leader, isr)
    live_isr = compact(isr, _staged("_live_i", w))
    alone = [new_leader] + [F.lit(s.EMPTY_SLOT)] * (w - 1)
    isr_elected = [F.when(was_in_isr, a).otherwise(b) for a, b in zip(live_isr, alone, strict=True)]
    # Not elected: the failed ISR members leave, one write each; the largest id, processed last,
    # stays when no other member is left (Kafka never empties the ISR).
    gone = [F.col("_acting") & (x != s.EMPTY_SLOT) & dead.contains(x) for x in isr]
    third = {f"_gone{j}": g for j, g in enumerate(gone)}
    gone = _staged("_gone", w)
    stays = [(x != s.EMPTY_SLOT) & ~g for x, g in zip(isr, gone, strict=True)]
    survivor = (
        F.greatest(*[F.when(g, x) for x, g in zip(isr, gone, strict=True)]) if w > 1 else isr[0]
    )
    any_stays = any_of(stays)
    kept = compact(isr, stays)
    isr_shrunk = [
        F.when(any_stays, a).otherwise(b)
        for a, b in zip(kept, [survivor] + [F.lit(s.EMPTY_SLOT)] * (w - 1), strict=True)
    ]
    writes = count_of(gone)
    is_elected = new_leader.isNotNull()
    new_isr = [
        F.when(is_elected, a).otherwise(b) for a, b in zip(isr_elected, isr_shrunk, strict=True)
    ]
    leader_removed = any_of([g & (x == leader) for x, g in zip(isr, gone, strict=True)])
    final_leader = (
        F.when(is_elected, new_leader)
        .when(F.col("_elect") | leader_removed, F.lit(s.NO_LEADER))
        .otherwise(leader)
    )
    bumps = is_elected.cast("int") + F.when(is_elected, F.lit(0)).otherwise(writes)
    state = (
        F.when(is_elected, F.lit(PartitionState.OnlinePartition.name))
        .when(
            F.col("_acting") & (final_leader == s.NO_LEADER),
            F.lit(PartitionState.OfflinePartition.name),
        )
        .otherwise(F.col(s.STATE))
    )
    fourth = {
        s.ISR: present(new_isr),
        s.LEADER: final_leader,
        s.LEADER_EPOCH: F.col(s.LEADER_EPOCH) + bumps,
        s.ZK_VERSION: F.col(s.ZK_VERSION) + bumps,
        s.STATE: state,
    }
    out = rows.withColumns(slots).withColumns(first).withColumns(second).withColumns(third)
    out = out.withColumns(fourth)
    return out.drop(*slots, *first, *second, *third)


def _with_flags(
    public: DataFrame, live: BrokerSet, everyone: BrokerSet, dead: BrokerSet, w: int
) -> DataFrame:
    leader = F.col(s.LEADER)
    leader_before = F.col(LEADER_BEFORE)
    isr_before = F.col(ISR_BEFORE)
    not_deleting = leader != s.LEADER_DURING_DELETE
    flags = {
        OFFLINE: leader == s.NO_LEADER,
        UNDER_MIN_ISR: (leader >= 0) & (F.size(s.ISR) < F.col(MIN_ISR)),
        UNCLEAN_NEEDED: not_deleting
        & ~any_of([live.contains(x) for x in _slots(ISR_BEFORE, w)])
        & any_of([live.contains(r) for r in _slots(s.REPLICAS, w)]),
        LEADER_MOVED: (leader >= 0) & (leader != leader_before),
    }
    # The return: §8.1 elects the partitions still offline, every broker live again.
    replicas, isr = _slots(s.REPLICAS, w), _slots(s.ISR, w)
    elected = offline_leader(
        replicas, isr, [everyone.contains(r) for r in replicas], F.col(UNCLEAN)
    )
    offline_with_state = has_leadership() & (leader == s.NO_LEADER)
    on_return = F.when(offline_with_state, F.coalesce(elected, leader)).otherwise(leader)
    preferred = F.get(F.col(s.REPLICAS), 0)
    # The returned brokers catch up and rejoin the ISRs they were in before the failure.
    in_isr_on_return = F.array_contains(F.col(s.ISR), preferred) | (
        dead.contains(preferred) & F.array_contains(isr_before, preferred)
    )
    candidate = (
        has_leadership()
        & not_deleting
        & (F.col(LEADER_RETURN) != preferred)
        & everyone.contains(preferred)
        & in_isr_on_return
    )
    return (
        public.withColumns(flags)
        .withColumn(LEADER_RETURN, on_return)
        .withColumns({PREFERRED: preferred, REBALANCE_CANDIDATE: candidate})
    )


# -- per-broker figures -------------------------------------------------------------------------


@dataclass(frozen=True)
class Figures:
    """What ``fail --brokers/--rack`` collects from the table after the failure."""

    totals: dict[str, int]
    per_broker: dict[str, dict[int, float]]
    rebalance_pairs: dict[tuple[int, int], int]  # (preferred, leader on return) → partitions


def collect_figures(after: DataFrame) -> Figures:
    """Partition totals, per-broker counts and ratios (``broker_balance.broker_counts``, one
    pass), and the possible rebalance elections by (preferred broker, leader): two small jobs."""
    leaders = {"before": LEADER_BEFORE, "after": s.LEADER, "return": LEADER_RETURN}
    counts = bb.broker_counts(after, tuple(leaders.values())).collect()
    per_broker: dict[str, dict[int, float]] = {"replicas": {}}
    for name in leaders:
        per_broker[f"leaders_{name}"] = {}
        per_broker[f"ratio_{name}"] = {}
    for row in counts:
        b = int(row[bb.BROKER])
        per_broker["replicas"][b] = row[bb.REPLICAS]
        for name, column in leaders.items():
            per_broker[f"leaders_{name}"][b] = row[f"{column}_{bb.LEADERS}"]
            if row[bb.PREFERRED]:
                not_preferred = row[f"{column}_{bb.NOT_PREFERRED}"]
                per_broker[f"ratio_{name}"][b] = bb.ratio(not_preferred, row[bb.PREFERRED])
    no_broker = F.lit(None).cast("int")
    sums = after.agg(*[F.sum(F.col(f).cast("long")).alias(f) for f in FLAGS]).select(
        F.explode(
            F.array(
                *[
                    F.struct(
                        F.lit(f).alias("metric"),
                        no_broker.alias(PREFERRED),
                        no_broker.alias(LEADER_RETURN),
                        F.coalesce(F.col(f), F.lit(0)).alias("n"),
                    )
                    for f in FLAGS
                ]
            )
        ).alias("m")
    )
    pairs = (
        after.where(REBALANCE_CANDIDATE)
        .groupBy(PREFERRED, LEADER_RETURN)
        .agg(F.count(F.lit(1)).alias("n"))
        .select(F.lit("pairs").alias("metric"), PREFERRED, LEADER_RETURN, "n")
    )
    totals: dict[str, int] = {}
    rebalance: dict[tuple[int, int], int] = {}
    for row in sums.select("m.*").unionByName(pairs).collect():
        if row["metric"] == "pairs":
            rebalance[(int(row[PREFERRED]), int(row[LEADER_RETURN]))] = int(row["n"])
        else:
            totals[row["metric"]] = int(row["n"])
    return Figures(totals, per_broker, rebalance)


# -- the answers ---------------------------------------------------------------------------------


def answer(spark: SparkSession, cluster: WhatIfCluster, options: FailOptions) -> Answer:
    """``fail --brokers … | --rack … | --any K [--samples N]``."""
    if options.any_k is not None:
        return any_failures(spark, cluster, options.any_k, options.samples, options.seed)
    failed = failed_brokers(cluster, options)
    facts = snapshot_facts(cluster)
    # Materialised once: the figures and the Parquet output read it, not the controller's plan.
    after = after_failure(spark, cluster, failed, facts).localCheckpoint(eager=True)
    figures = collect_figures(after)
    return _failure_answer(spark, cluster, options, failed, facts, after, figures)


def _ints(values: Mapping[int, float], brokers: Iterable[int]) -> dict[int, int]:
    """``values`` of exactly ``brokers`` (0 where absent), ascending."""
    return {b: int(values.get(b, 0)) for b in sorted(brokers)}


def _return_elections(
    figures: Figures, over: list[int], leaders: dict[int, int]
) -> tuple[int, dict[int, int]]:
    """How many preferred elections the auto rebalance makes for the ``over`` brokers, and the
    leaders per broker once they are made."""
    after = dict(leaders)
    count = 0
    chosen = set(over)
    for (preferred, leader), n in figures.rebalance_pairs.items():
        if preferred not in chosen:
            continue
        count += n
        after[preferred] = after.get(preferred, 0) + n
        if leader >= 0:
            after[leader] = after.get(leader, 0) - n
    return count, dict(sorted(after.items()))


def _failure_answer(
    spark: SparkSession,
    cluster: WhatIfCluster,
    options: FailOptions,
    failed: tuple[int, ...],
    facts: Snapshot,
    after: DataFrame,
    figures: Figures,
) -> Answer:
    everyone = list(cluster.brokers)
    live_after = [b for b in everyone if b not in failed]
    pct = cluster.broker_defaults.leader_imbalance_per_broker_percentage
    per = figures.per_broker
    leaders_before = _ints(per.get("leaders_before", {}), everyone)
    leaders_after = _ints(per.get("leaders_after", {}), live_after)
    replicas = _ints(per.get("replicas", {}), everyone)
    ratios_after = {b: 0.0 for b in everyone} | dict(per.get("ratio_after", {}))
    ratios_after = dict(sorted(ratios_after.items()))
    over_after = bb.over_threshold(ratios_after, pct)
    ratios_return = {b: 0.0 for b in everyone} | dict(per.get("ratio_return", {}))
    # Kafka 2.6–3.3 skip the whole rebalance while any partition is being reassigned.
    over_return = [] if facts.reassigning else bb.over_threshold(ratios_return, pct)
    leaders_on_return = _ints(per.get("leaders_return", {}), everyone)
    elections, leaders_returned = _return_elections(figures, over_return, leaders_on_return)
    totals = figures.totals
    summary: dict[str, Any] = {
        "failed_brokers": list(failed),
        "offline_partitions": totals[OFFLINE],
        "under_min_isr_partitions": totals[UNDER_MIN_ISR],
        "unclean_elections_needed": totals[UNCLEAN_NEEDED],
        "leaders_moved": totals[LEADER_MOVED],
        "leaders_per_broker": bb.by_broker_id(leaders_after),
        "auto_rebalance_brokers": over_after,
        "leader_imbalance_per_broker_percentage": pct,
        "imbalance_ratio_after": bb.by_broker_id(ratios_after),
        "return_preferred_elections": elections,
        "return_leaders_per_broker": bb.by_broker_id(leaders_returned),
        "reassignment_in_progress": facts.reassigning,
    }
    if options.rack is not None:
        summary = {"failed_rack": options.rack, **summary}
    brokers = sorted(set(everyone) | set(leaders_before) | set(ratios_after))
    broker_rows = {
        s.BROKER: brokers,
        "rack": [cluster.racks.get(b) for b in brokers],
        "failed": [b in failed for b in brokers],
        "leaders_before": [leaders_before.get(b, 0) for b in brokers],
        "leaders_after": [leaders_after.get(b, 0) for b in brokers],
        "replicas": [replicas.get(b, 0) for b in brokers],
        "imbalance_ratio_after": [ratios_after.get(b, 0.0) for b in brokers],
        "leaders_after_return": [leaders_returned.get(b, 0) for b in brokers],
    }
    tables = {
        "partitions_after": after.select(*s.PARTITIONS_SCHEMA.fieldNames(), *FLAGS),
        "brokers": columns_frame(spark, broker_rows, BROKERS_SCHEMA),
    }
    what = f"rack {options.rack} ({_ids(failed)})" if options.rack else f"brokers {_ids(failed)}"
    lines = [
        f"If {what} fail:",
        f"  {totals[OFFLINE]} partitions offline, {totals[UNDER_MIN_ISR]} under "
        f"min.insync.replicas, {totals[UNCLEAN_NEEDED]} need an unclean election",
        f"  {totals[LEADER_MOVED]} leaders move; leaders per broker after: "
        f"{_spread(leaders_after)}",
        "  auto leader rebalance would fire for "
        + (f"brokers {_ids(over_after)}" if over_after else "no broker")
        + f" (imbalance ratio > {pct}%)",
        f"When they return: {elections} preferred elections"
        + (" (none while a reassignment is in progress)" if facts.reassigning else "")
        + f"; leaders per broker then: {_spread(leaders_returned)}",
    ]
    table_rows = [{name: broker_rows[name][i] for name in broker_rows} for i in range(len(brokers))]
    sections = [
        Section(
            "Leaders per broker",
            f"Leaders before and after {what} fail (failed brokers lead nothing after).",
            charts=[
                bars_before_after("Leaders per broker", leaders_before, leaders_after, "leaders")
            ],
        ),
        Section(
            "Imbalance ratios after the failure",
            "Kafka's per-broker preferred-leader imbalance (§11.2) over the state after the "
            f"failure, failed brokers included; above {pct}% the auto leader rebalance fires.",
            charts=[
                ratios_against_threshold("Imbalance ratio per broker", ratios_after, pct / 100)
            ],
        ),
        Section(
            "When the brokers return",
            f"Offline partitions are elected again, the brokers rejoin their ISRs, and the auto "
            f"leader rebalance makes {elections} preferred elections.",
            charts=[
                bars_before_after(
                    "Leaders per broker: after the failure (before) and after the return",
                    leaders_after,
                    leaders_returned,
                    "leaders",
                )
            ],
            tables=[table_rows],
        ),
    ]
    return Answer("fail", summary, lines, tables, {}, sections)


def _ids(ids: Iterable[int]) -> str:
    return ",".join(map(str, ids))


def _spread(per_broker: Mapping[int, int]) -> str:
    if not per_broker:
        return "no brokers"
    values = list(per_broker.values())
    return f"min {min(values)}, max {max(values)}"


# -- any K brokers -------------------------------------------------------------------------------


def failure_sets(
    brokers: tuple[int, ...], k: int, samples: int, seed: int
) -> tuple[list[tuple[int, ...]], bool]:
    """Every K-subset of ``brokers`` when there are at most ``samples`` of them (True), else
    ``samples`` distinct random ones drawn with ``seed`` (False), in a deterministic order."""
    if not 1 <= k <= len(brokers):
        raise WhatIfInputError(
            f"--any {k}: the cluster has {len(brokers)} live brokers — give K between 1 and "
            f"{len(brokers)}"
        )
    ordered = tuple(sorted(brokers))
    if math.comb(len(ordered), k) <= samples:
        return list(itertools.combinations(ordered, k)), True
    rng = random.Random(seed)
    chosen: dict[tuple[int, ...], None] = {}
    while len(chosen) < samples:
        chosen.setdefault(tuple(sorted(rng.sample(ordered, k))), None)
    return list(chosen), False


NEED = "need"


def need_column(cluster: WhatIfCluster, w: int) -> Column:
    """The sorted live brokers a partition needs to lose to go offline (over the public table
    with an ``unclean_leader_election_enable`` column): the live replicas its offline election
    may pick — ISR members, or every replica where the topic allows unclean election — and its
    leader while that is live (the leader is one of the replicas)."""
    live = BrokerSet.of(cluster.brokers)
    reps, isr = _slots(s.REPLICAS, w), _slots(s.ISR, w)
    unclean = F.col(UNCLEAN)
    leader = F.col(s.LEADER)
    needed = [
        F.when(live.contains(r) & (unclean | in_list(r, isr) | (r == leader)), r) for r in reps
    ]
    # Without leadership nothing is elected: such a partition keeps its leader (or none).
    kept = F.when(live.contains(leader), F.array(leader)).otherwise(F.array().cast("array<int>"))
    return F.when(has_leadership(), F.array_sort(present(needed))).otherwise(kept)


def offline_per_set(
    spark: SparkSession, cluster: WhatIfCluster, sets: list[tuple[int, ...]], k: int
) -> list[int]:
    """Offline partitions after each set fails, in the order of ``sets`` (one Spark job)."""
    facts = snapshot_facts(cluster)
    topics = topics_frame(spark, cluster, facts.topics)
    rows = cluster.partitions.join(F.broadcast(topics.select(s.TOPIC, UNCLEAN)), s.TOPIC, "left")
    default = cluster.broker_defaults.unclean_leader_election_enable
    rows = rows.withColumn(UNCLEAN, F.coalesce(F.col(UNCLEAN), F.lit(default)))
    # Topics queued for deletion are left alone.
    rows = rows.where(F.col(s.LEADER) != s.LEADER_DURING_DELETE)
    # Distinct ``need`` arrays, not partitions, meet the sets; larger than K never go offline.
    groups = (
        rows.groupBy(need_column(cluster, facts.width).alias(NEED))
        .agg(F.count(F.lit(1)).alias("partitions"))
        .where(F.size(NEED) <= k)
    )
    frame = columns_frame(
        spark,
        {"set_id": list(range(len(sets))), "brokers": [list(x) for x in sets]},
        SETS_SCHEMA,
    )
    hits = (
        groups.crossJoin(F.broadcast(frame))
        .where(F.size(F.array_except(F.col(NEED), F.col("brokers"))) == 0)
        .groupBy("set_id")
        .agg(F.sum("partitions").alias("offline"))
    )
    found = {int(r["set_id"]): int(r["offline"]) for r in hits.collect()}
    return [found.get(i, 0) for i in range(len(sets))]


def any_failures(
    spark: SparkSession, cluster: WhatIfCluster, k: int, samples: int, seed: int
) -> Answer:
    """``fail --any K [--samples N]``: offline partitions over many K-subsets of brokers."""
    sets, exhaustive = failure_sets(cluster.brokers, k, samples, seed)
    offline = offline_per_set(spark, cluster, sets, k)
    hist: dict[int, int] = {}
    for n in offline:
        hist[n] = hist.get(n, 0) + 1
    hist = dict(sorted(hist.items()))
    worst = sorted(
        ((n, x) for n, x in zip(offline, sets, strict=True) if n > 0),
        key=lambda e: (-e[0], e[1]),
    )[:WORST_SETS]
    exposed = sum(1 for n in offline if n > 0)
    p_any = exposed / len(sets)
    total = math.comb(len(cluster.brokers), k)
    summary: dict[str, Any] = {
        "k": k,
        "sets_evaluated": len(sets),
        "all_subsets": exhaustive,
        "subsets_total": total,
        "seed": seed,
        "p_any_offline": p_any,
        "offline_distribution": {str(n): c for n, c in hist.items()},
        "worst_sets": [{"brokers": list(x), "offline_partitions": n} for n, x in worst],
        "mean_offline_partitions": sum(offline) / len(sets),
    }
    how = "every subset" if exhaustive else f"{len(sets)} random subsets (seed {seed})"
    lines = [
        f"Any {k} of {len(cluster.brokers)} brokers failing — {how} of {total}:",
        f"  P(some partition offline) = {p_any:.4g} ({exposed} of {len(sets)} sets)",
        f"  offline partitions per set: mean {summary['mean_offline_partitions']:.4g}, "
        f"max {max(offline)}",
    ]
    if worst:
        lines.append(f"  worst set: brokers {_ids(worst[0][1])} → {worst[0][0]} offline")
    sets_table = columns_frame(
        spark,
        {
            "set_id": list(range(len(sets))),
            "brokers": [list(x) for x in sets],
            "offline_partitions": offline,
        },
        StructType([*SETS_SCHEMA.fields, StructField("offline_partitions", LongType(), False)]),
    )
    sections = [
        Section(
            "Offline partitions per failed set",
            f"How many partitions lose every electable replica when {k} brokers fail ({how}).",
            charts=[
                distribution(
                    "Offline partitions per set", hist, "offline partitions", ylabel="sets"
                )
            ],
            tables=[[{"brokers": list(x), "offline_partitions": n} for n, x in worst]],
        )
    ]
    return Answer("fail", summary, lines, {"sets": sets_table}, {}, sections)
