"""``kce whatif fail --any K [--samples N]``: offline partitions over many K-subsets of brokers.

Every K-subset of live brokers (or ``--samples`` random ones, drawn with ``--seed``) is evaluated
in one Spark job: a partition is offline after failing S exactly when it has no live leader
outside S and every broker it could elect is in S, so each partition reduces to one sorted array
``need`` (``isr_rules.needed_to_fail``: its electable live brokers, plus its live leader; none
for a partition already offline) and is offline iff ``need ⊆ S``.
Partitions are grouped by ``need`` first, groups larger than K can never go offline, and only the
remaining distinct arrays meet the broadcast sets. The election rules are those of
``whatif.broker_failure`` (§7.1, §8.2); partitions of topics queued for deletion are left alone.

The answer: ``p_any_offline`` (the share of sets that leave some partition offline), the
distribution of offline partitions per set and the ``worst_sets``.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Iterable, Sequence
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, IntegerType, LongType, StructField, StructType

from html_report.charts import distribution
from html_report.page import Section
from statemachines.brokers import BrokerSet
from whatif.answer import Answer
from whatif.cluster import WhatIfCluster, WhatIfInputError, columns_frame
from whatif.isr_rules import DELETING, needed_to_fail, with_topic_configs

SETS_SCHEMA = StructType(
    [
        StructField("set_id", IntegerType(), nullable=False),
        StructField("brokers", ArrayType(IntegerType(), containsNull=False), nullable=False),
    ]
)
WORST_SETS = 10


def check_any(brokers: Sequence[int], k: int) -> None:
    """``--any K`` names 1 to all of the live ``brokers`` (no Spark: ``whatif.preflight``)."""
    if not 1 <= k <= len(brokers):
        raise WhatIfInputError(
            f"--any {k}: the cluster has {len(brokers)} live brokers — give K between 1 and "
            f"{len(brokers)}"
        )


def failure_sets(
    brokers: tuple[int, ...], k: int, samples: int, seed: int
) -> tuple[list[tuple[int, ...]], bool]:
    """Every K-subset of ``brokers`` when there are at most ``samples`` of them (True), else
    ``samples`` distinct random ones drawn with ``seed`` (False), in a deterministic order."""
    check_any(brokers, k)
    ordered = tuple(sorted(brokers))
    if math.comb(len(ordered), k) <= samples:
        return list(itertools.combinations(ordered, k)), True
    rng = random.Random(seed)
    chosen: dict[tuple[int, ...], None] = {}
    while len(chosen) < samples:
        chosen.setdefault(tuple(sorted(rng.sample(ordered, k))), None)
    return list(chosen), False


NEED = "need"


def offline_per_set(
    spark: SparkSession, cluster: WhatIfCluster, sets: list[tuple[int, ...]], k: int
) -> list[int]:
    """Offline partitions after each set fails, in the order of ``sets`` (one Spark job)."""
    rows = with_topic_configs(cluster, cluster.partitions)
    # Topics queued for deletion are left alone.
    rows = rows.where(~F.col(DELETING))
    # Distinct ``need`` arrays, not partitions, meet the sets; larger than K never go offline.
    need = needed_to_fail(BrokerSet.of(cluster.brokers), F.col(DELETING))
    groups = (
        rows.groupBy(need.alias(NEED))
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


def _ids(ids: Iterable[int]) -> str:
    return ",".join(map(str, ids))
