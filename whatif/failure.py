"""``kce whatif fail``: what Kafka's controller does when brokers fail, computed offline.

``--brokers`` / ``--rack`` apply Kafka's broker-failure handling (spec §8.2) to the snapshot with
``whatif.broker_failure.after_failure``: the outcome of the controller's own
``controller.handlers.brokers.on_broker_failure`` (a test compares them) in one pass, then the
figures below from the table it gives.

Then it says what the return of the brokers does (§8.1, §11.2): partitions still offline are
elected again with every broker live; the returned brokers catch up and rejoin the ISRs they were
in; the auto leader rebalance makes preferred elections for the brokers whose ratio is strictly
above ``leader.imbalance.per.broker.percentage`` (none while any partition is being reassigned,
as in Kafka 2.6–3.3).

The figures (issue 37, ``docs/whatif.md``): ``offline_partitions`` have no leader after the
failure; ``unclean_elections_needed`` have no live ISR member but a live replica (elected only
where the topic allows unclean election); ``under_min_isr_partitions`` have a leader and fewer ISR
members than their ``min.insync.replicas``; ``leaders_moved`` got a new leader. Partitions of topics
queued for deletion are left alone and counted in none, as Kafka leaves them.

``--any K`` asks the same of every K-subset of live brokers (or ``--samples`` random ones):
``whatif.failure_sets``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BooleanType,
    DoubleType,
    IntegerType,
    StringType,
    StructField,
    StructType,
)

from html_report.charts import bars_before_after, ratios_against_threshold
from html_report.page import Section
from statemachines import schemas as s
from whatif import broker_balance as bb
from whatif.answer import Answer
from whatif.broker_failure import (
    FLAGS,
    LEADER_BEFORE,
    LEADER_MOVED,
    LEADER_RETURN,
    OFFLINE,
    PREFERRED,
    REBALANCE_CANDIDATE,
    UNCLEAN_NEEDED,
    UNDER_MIN_ISR,
    Snapshot,
    after_failure,
    snapshot_facts,
)
from whatif.cluster import WhatIfCluster, WhatIfInputError, columns_frame
from whatif.failure_sets import any_failures
from whatif.options import FailOptions

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


# -- which brokers fail --------------------------------------------------------------------------


def failed_brokers(cluster: WhatIfCluster, options: FailOptions) -> tuple[int, ...]:
    """The brokers ``--brokers`` or ``--rack`` names, checked against the live brokers."""
    return named_brokers(
        cluster.brokers, cluster.racks, cluster.source, options, cluster.down_brokers
    )


def named_brokers(
    brokers: Sequence[int],
    racks: Mapping[int, str | None],
    source: str,
    options: FailOptions,
    down_brokers: Sequence[int] = (),
) -> tuple[int, ...]:
    """``failed_brokers`` of a snapshot's live ``brokers``, their ``racks``, its ``source`` name
    and the brokers it proves down: needs no Spark, so ``whatif.preflight`` checks it before
    Spark starts."""
    live = set(brokers)
    listed = ",".join(map(str, brokers))
    if options.rack is not None:
        chosen = tuple(b for b in brokers if racks.get(b) == options.rack)
        if not chosen:
            names = sorted({r for b, r in racks.items() if r is not None and b in live})
            known = (
                f"its racks are {', '.join(names)}"
                if names
                else "no broker has a rack — give --rack-map FILE (CSV id,rack)"
            )
            raise WhatIfInputError(
                f"--rack {options.rack}: no live broker of {source or 'the cluster'} is "
                f"in that rack; {known}"
            )
        return chosen
    if options.brokers is None:
        raise WhatIfInputError("fail: give --brokers, --rack or --any")
    unknown = sorted(set(options.brokers) - live)
    down = [b for b in unknown if b in down_brokers]
    if down:
        raise WhatIfInputError(
            f"--brokers {','.join(map(str, options.brokers))}: broker "
            f"{','.join(map(str, down))} is already down in {source or 'the snapshot'} "
            "(in the ISR of a partition Kafka left without a leader) — name live broker ids "
            f"({listed})"
        )
    if unknown:
        raise WhatIfInputError(
            f"--brokers {','.join(map(str, options.brokers))}: broker "
            f"{','.join(map(str, unknown))} is not a live broker of "
            f"{source or 'the cluster'} (live: {listed}) — name live broker ids"
        )
    return tuple(sorted(set(options.brokers)))


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
