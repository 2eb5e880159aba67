"""``kce whatif roll``: a rolling restart in batches, and whether it keeps min.insync.replicas.

``--batch N``: the live brokers in the fewest batches of at most N brokers that keep every
partition at or above min ISR (``whatif.roll_solver``: exact, or the best found in the time
limit, said so); ``--batch rack`` rolls one rack per batch. Each batch goes through Kafka's
controlled shutdown, restart and catch-up, and preferred election (``whatif.roll_evaluation``,
spec §8.4, §11).

The answer: per batch, the partitions under min ISR or offline, the smallest min-ISR margin and
the leaders moved; ``max_safe_batch`` (the most brokers that can be down together, with one such
batch); whether ⌈n/N⌉ batches suffice; the ``unsafe_partitions`` no batching keeps safe; leaders
per broker before and after the roll. ``ASSUMPTION`` says what every figure takes for granted.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, StringType, StructField, StructType

from html_report.charts import bars_before_after, margins_per_batch
from html_report.page import Section
from statemachines import schemas as s
from whatif.answer import Answer
from whatif.cluster import WhatIfCluster, WhatIfInputError
from whatif.options import RollOptions
from whatif.roll_batches import REASON, batch_constraints, rack_batches, unsafe_rows
from whatif.roll_evaluation import (
    BATCH,
    LEADER_AFTER,
    MIN_ISR,
    SLACK,
    BatchResult,
    evaluate_batches,
    partition_form,
    with_leader_chain,
)
from whatif.roll_solver import RollPlan, plan_roll

LEADER_BEFORE = "leader_before"
# The summary lists at most this many unsafe partitions (the count is always exact).
MAX_LISTED = 1000
ASSUMPTION = (
    "Assumes each batch's replicas have caught up and rejoined the ISR before the next batch "
    "starts; every batch starts from the snapshot's ISR."
)

_I = IntegerType()


# -- the answer ----------------------------------------------------------------------------------


def check_batches(
    brokers: Sequence[int], racks: Mapping[int, str | None], options: RollOptions
) -> list[list[int]] | None:
    """``--batch`` against the live ``brokers`` (no Spark: ``whatif.preflight`` runs it first);
    the rack batches of ``--batch rack`` (a cluster without racks is an input error)."""
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
    return rack_batches(brokers, racks) if options.by_rack else None


def answer(spark: SparkSession, cluster: WhatIfCluster, options: RollOptions) -> Answer:
    """Batches, their min-ISR impact and leader moves, the largest safe batch size."""
    brokers = list(cluster.brokers)
    size = options.batch
    by_rack = check_batches(brokers, cluster.racks, options)
    form = partition_form(spark, cluster)
    constraints = batch_constraints(form)
    plan = plan_roll(brokers, None if by_rack else size, constraints, options.solver_seconds)
    if plan.batching is None:
        assert by_rack is not None
        batches = by_rack
    else:
        batches = plan.batching.batches
    results, at_risk = evaluate_batches(form, batches)
    unsafe = unsafe_rows(form, batches if options.by_rack else None)
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
        **_plan_summary(plan, len(brokers), size, constraints.always_unsafe),
        "batches": [list(b) for b in batches],
        "safe": safe,
        "unsafe_partitions": unsafe_list,
        "unsafe_partition_count": unsafe_count,
        "per_batch": [r.as_json() for r in results],
        "leaders_per_broker_before": {str(b): before.get(b, 0) for b in brokers},
        "leaders_per_broker_after": {str(b): after.get(b, 0) for b in brokers},
        "solver_seconds": options.solver_seconds,
        "assumption": ASSUMPTION,
    }
    return Answer(
        question="roll",
        summary=summary,
        lines=_lines(summary, results, unsafe_list, constraints.always_unsafe),
        tables=_tables(spark, cluster, batches, chained, at_risk, before, after),
        sections=_sections(summary, results, unsafe_list, before, after),
    )


def _plan_summary(
    plan: RollPlan, brokers: int, size: int | None, always_unsafe: int
) -> dict[str, Any]:
    """The batching's figures: how the batches were chosen, what is proven."""
    largest = plan.largest
    out: dict[str, Any] = {
        "max_safe_batch": 0 if always_unsafe else len(largest.brokers),
        "max_safe_batch_others": len(largest.brokers),
        "max_safe_batch_brokers": list(largest.brokers),
        "max_safe_batch_upper_bound": largest.upper_bound,
        "max_safe_batch_proven": largest.proven,
    }
    if plan.batching is None:
        return {**out, "batches_from": "racks"}
    batching = plan.batching
    assert size is not None
    return {
        **out,
        "batches_from": "fewest" if batching.proven else "best found (time limit)",
        "batches_proven_fewest": batching.proven,
        "batches_lower_bound": batching.lower_bound,
        "batches_at_n": math.ceil(brokers / size),
        "fits_batches_at_n": len(batching.batches) <= math.ceil(brokers / size),
    }


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
    n, count = summary["batch_size"], len(results)
    if summary["batches_from"] == "racks":
        lines = [f"Rolling restart in {count} batches, one rack per batch."]
    elif summary["batches_proven_fewest"]:
        lines = [f"Rolling restart in {count} batches of at most {n}: the fewest that keep "
                 "every partition that can be kept at min ISR (proven)."]  # fmt: skip
    else:
        lines = [
            f"Rolling restart in {count} batches of at most {n}: the fewest found in "
            f"{summary['solver_seconds']:g} s; at least {summary['batches_lower_bound']} needed "
            "(not proven optimal)."
        ]
    if summary["batches_from"] != "racks" and not summary["fits_batches_at_n"]:
        at_n = summary["batches_at_n"]
        if summary["batches_lower_bound"] > at_n:
            lines.append(f"No safe batching of at most {n} fits in {at_n} batches (proven).")
        else:
            lines.append(f"No safe batching in {at_n} batches found in the time limit.")
    if summary["safe"]:
        lines.append("Every partition stays at or above min.insync.replicas in every batch.")
    else:
        worst = min(results, key=lambda r: r.min_margin if r.min_margin is not None else 0)
        lines.append(
            f"Not safe: worst batch {list(worst.brokers)} leaves {worst.under_min_isr} "
            f"partitions under min ISR and {worst.offline} offline (margin {worst.min_margin})."
        )
    largest = summary["max_safe_batch_brokers"]
    shown = ",".join(map(str, largest[:8])) + ("…" if len(largest) > 8 else "")
    bound = (
        "proven"
        if summary["max_safe_batch_proven"]
        else f"at most {summary['max_safe_batch_upper_bound']}: not proven"
    )
    lines.append(
        f"Largest safe batch: {summary['max_safe_batch_others']} brokers ({shown}; {bound})"
        + (
            f" for the partitions that can be kept safe; 0 counting the {always_unsafe} "
            "that cannot."
            if always_unsafe
            else "."
        )
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
