"""``audit PLAN.json``: check a Kafka reassignment plan against the cluster, and what it leaves.

The plan is read strictly (``plan_check.parse_plan``) and checked by ``plan_check.check_plan``,
the same validator every plan of the planner passes. Then the cluster after the plan, taken as
complete (each listed partition has exactly the plan's replicas, which are all in sync):

* replicas and preferred leaders (first replicas) per broker, before and after;
* rack loss: per rack, the partitions that would go offline if every broker of that rack failed,
  as ``fail --rack`` counts them (``isr_rules.rack_loss``: the whole live ISR in the rack and
  unclean election off), before and after (a moved partition's planned replicas all in sync);
* copyset exposure: ``distinct_replica_sets``, the number of distinct replica sets; fewer sets
  mean fewer broker combinations whose loss loses data.

Entries naming unknown partitions are reported and left out of the after state. Only the plan's
partitions are collected to the driver; the per-broker and per-rack figures are Spark
aggregations.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    IntegerType,
    StringType,
    StructField,
    StructType,
)

from html_report.charts import bars_before_after
from html_report.page import Section
from statemachines import schemas as s
from whatif.answer import Answer
from whatif.cluster import WhatIfCluster
from whatif.isr_rules import rack_loss, with_topic_configs
from whatif.new_brokers import with_new_brokers
from whatif.options import AuditOptions
from whatif.plan_check import ERROR, PartitionKey, ReassignmentPlan, check_plan, parse_plan

PLANNED = "planned_replicas"
MOVED = "_moved"
MAX_PROBLEMS = 1000


def plan_partitions(
    spark: SparkSession, cluster: WhatIfCluster, plan: ReassignmentPlan
) -> dict[PartitionKey, list[int]]:
    """Current replicas of the partitions the plan names (those the cluster has)."""
    keys = sorted({(p.topic, p.partition) for p in plan.partitions})
    table = pa.table(
        {
            s.TOPIC: pa.array([k[0] for k in keys], pa.string()),
            s.PARTITION: pa.array([k[1] for k in keys], pa.int32()),
        }
    )
    schema = StructType(
        [
            StructField(s.TOPIC, StringType(), nullable=False),
            StructField(s.PARTITION, IntegerType(), nullable=False),
        ]
    )
    wanted = spark.createDataFrame(table, schema)
    found = (
        cluster.partitions.select(s.TOPIC, s.PARTITION, s.REPLICAS)
        .join(F.broadcast(wanted), [s.TOPIC, s.PARTITION], "left_semi")
        .toArrow()
    )
    cols = [found.column(i).to_pylist() for i in range(3)]
    return {(t, p): r for t, p, r in zip(*cols, strict=True)}


def answer(spark: SparkSession, cluster: WhatIfCluster, options: AuditOptions) -> Answer:
    """Validate ``options.plan`` and report the cluster after it."""
    cluster = with_new_brokers(cluster, options.new_brokers)
    plan = parse_plan(options.plan)
    current = plan_partitions(spark, cluster, plan)
    problems = check_plan(plan, current, cluster.brokers, cluster.racks, cluster.deleting_topics)
    valid = not any(p.severity == ERROR for p in problems)
    # The after state applies the entries Kafka would run (per partition, as the
    # AlterPartitionReassignments API does); the last entry of a partition listed twice wins.
    # (Unknown partitions are not in ``current``; a partition listed twice is not refused here.)
    refused = {
        (p.topic, p.partition) for p in problems if p.refused_by_kafka and p.field != "partition"
    }
    target = {
        (p.topic, p.partition): p.replicas
        for p in plan.partitions
        if (p.topic, p.partition) in current and (p.topic, p.partition) not in refused
    }
    moved = {k: v for k, v in target.items() if set(v) != set(current[k])}
    replicas_moved = sum(len(set(v) - set(current[k])) for k, v in moved.items())
    frame = _after_frame(spark, cluster, target, set(moved))
    before = _per_broker(frame, s.REPLICAS)
    after = _per_broker(frame, PLANNED)
    racks = {b: r for b, r in cluster.racks.items() if r is not None}
    loss_before = rack_loss(frame, cluster.brokers, racks)
    loss_after = rack_loss(_as_planned(frame), cluster.brokers, racks)
    sets = frame.agg(
        F.countDistinct(F.sort_array(s.REPLICAS)).alias("before"),
        F.countDistinct(F.sort_array(PLANNED)).alias("after"),
    ).first()
    assert sets is not None
    errors = sum(1 for p in problems if p.severity == ERROR)
    summary: dict[str, Any] = {
        "plan": str(options.plan),
        "valid": valid,
        "problems": [p.as_json() for p in problems[:MAX_PROBLEMS]],
        "problem_count": len(problems),
        "error_count": errors,
        "partitions_in_plan": len(plan.partitions),
        "partitions_moved": len(moved),
        "replicas_moved": replicas_moved,
        "leaders_moved": sum(1 for k, v in target.items() if v[0] != current[k][0]),
        "rack_loss_offline": {r: loss_after.get(r, 0) for r in sorted(set(racks.values()))},
        "rack_loss_offline_before": {r: loss_before.get(r, 0) for r in sorted(set(racks.values()))},
        "distinct_replica_sets": {"before": int(sets["before"]), "after": int(sets["after"])},
        "replicas_per_broker_before": _by_id(before[0], cluster.brokers),
        "replicas_per_broker_after": _by_id(after[0], cluster.brokers),
        "preferred_leaders_per_broker_before": _by_id(before[1], cluster.brokers),
        "preferred_leaders_per_broker_after": _by_id(after[1], cluster.brokers),
    }
    verdict = "valid" if valid else f"INVALID ({errors} error(s))"
    lines = [
        f"audit {options.plan}: {verdict}, {len(problems) - errors} warning(s)",
        *[f"  {p.line()}" for p in problems[:5]],
        f"moves {replicas_moved} replica(s) in {len(moved)} partition(s); distinct replica sets "
        f"{sets['before']} → {sets['after']}",
    ]
    if racks:
        worst = max(loss_after.items(), key=lambda kv: (kv[1], kv[0]), default=("-", 0))
        lines.append(f"rack loss after the plan: worst rack {worst[0]} takes {worst[1]} offline")
    tables = {
        "partitions_after": frame.select(
            s.TOPIC,
            s.PARTITION,
            F.col(s.REPLICAS).alias("replicas_before"),
            F.col(PLANNED).alias("replicas_after"),
        ),
        "brokers": _brokers_table(spark, before, after, cluster),
    }
    sections = [
        Section(
            "Problems",
            "Kafka's checks (§10.4 and kafka-reassign-partitions.sh) plus rack safety.",
            tables=[[p.as_json() for p in problems[:50]]] if problems else [],
        ),
        Section(
            "Placement after the plan",
            "Replicas and preferred leaders per broker if the plan completes.",
            charts=[
                bars_before_after("Replicas per broker", before[0], after[0], "replicas"),
                bars_before_after(
                    "Preferred leaders per broker", before[1], after[1], "preferred leaders"
                ),
            ],
        ),
    ]
    if racks:
        sections.append(
            Section(
                "Rack loss",
                "Partitions offline if the rack fails: their whole live ISR in it, unclean election "
                "off (or every live replica in it).",
                tables=[
                    [
                        {"rack": r, "before": loss_before.get(r, 0), "after": loss_after.get(r, 0)}
                        for r in sorted(set(racks.values()))
                    ]
                ],
            )
        )
    return Answer("audit", summary, lines, tables, {}, sections)


def _after_frame(
    spark: SparkSession,
    cluster: WhatIfCluster,
    target: dict[PartitionKey, list[int]],
    moved: set[PartitionKey],
) -> DataFrame:
    """The public partitions with their topic configs (``isr_rules.with_topic_configs``), the
    plan's ``planned_replicas`` (the current ones where the plan has none) and ``_moved`` (the
    plan changes the replica set)."""
    keys = sorted(target)
    table = pa.table(
        {
            s.TOPIC: pa.array([k[0] for k in keys], pa.string()),
            s.PARTITION: pa.array([k[1] for k in keys], pa.int32()),
            PLANNED: pa.array([target[k] for k in keys], pa.list_(pa.int32())),
            MOVED: pa.array([k in moved for k in keys], pa.bool_()),
        }
    )
    schema = StructType(
        [
            StructField(s.TOPIC, StringType(), nullable=False),
            StructField(s.PARTITION, IntegerType(), nullable=False),
            StructField(PLANNED, ArrayType(IntegerType(), containsNull=False), nullable=False),
            StructField(MOVED, BooleanType(), nullable=False),
        ]
    )
    planned = spark.createDataFrame(table, schema)
    joined = with_topic_configs(cluster, cluster.partitions).join(
        F.broadcast(planned), [s.TOPIC, s.PARTITION], "left"
    )
    return joined.withColumns(
        {
            PLANNED: F.coalesce(F.col(PLANNED), F.col(s.REPLICAS)),
            MOVED: F.coalesce(F.col(MOVED), F.lit(False)),
        }
    )


def _as_planned(frame: DataFrame) -> DataFrame:
    """The partitions once the plan has completed: the planned replicas, all in sync where
    the replica set changed (a reassignment completes when they have joined the ISR); a leader
    outside them hands over to the first (the reassign election, §10.3)."""
    leader, planned = F.col(s.LEADER), F.col(PLANNED)
    return frame.withColumns(
        {
            s.REPLICAS: planned,
            s.ISR: F.when(F.col(MOVED), planned).otherwise(F.col(s.ISR)),
            s.LEADER: F.when(
                F.col(MOVED) & (leader >= 0) & ~F.array_contains(planned, leader),
                F.get(planned, 0),
            ).otherwise(leader),
        }
    )


def _per_broker(frame: DataFrame, column: str) -> tuple[dict[int, int], dict[int, int]]:
    rows = (
        frame.select(F.posexplode(column).alias("_pos", s.BROKER))
        .groupBy(s.BROKER)
        .agg(F.count(F.lit(1)).alias("n"), F.sum((F.col("_pos") == 0).cast("long")).alias("lead"))
        .collect()
    )
    return (
        {r[s.BROKER]: int(r["n"]) for r in rows},
        {r[s.BROKER]: int(r["lead"]) for r in rows},
    )


def _by_id(counts: dict[int, int], brokers: tuple[int, ...]) -> dict[str, int]:
    """Every live broker (0 when it holds nothing) and every broker the counts name."""
    return {str(b): counts.get(b, 0) for b in sorted(set(counts) | set(brokers))}


def _brokers_table(
    spark: SparkSession,
    before: tuple[dict[int, int], dict[int, int]],
    after: tuple[dict[int, int], dict[int, int]],
    cluster: WhatIfCluster,
) -> DataFrame:
    ids = sorted(set(before[0]) | set(after[0]) | set(cluster.brokers))
    names = ("replicas_before", "preferred_leaders_before", "replicas_after",
             "preferred_leaders_after")  # fmt: skip
    counts = (before[0], before[1], after[0], after[1])
    table = pa.table(
        {
            s.BROKER: pa.array(ids, pa.int32()),
            "rack": pa.array([cluster.racks.get(b) for b in ids], pa.string()),
            **{
                n: pa.array([c.get(b, 0) for b in ids], pa.int64())
                for n, c in zip(names, counts, strict=True)
            },
        }
    )
    return spark.createDataFrame(table)
