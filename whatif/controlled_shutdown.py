"""The controlled shutdown of brokers being decommissioned, all at once (spec §8.4).

Each partition the shutting-down brokers B lead, RF > 1, gets the first replica that is live, in
the ISR and not shutting down as its leader (the ControlledShutdown election, §7.1); B leaves every
ISR. A partition with no such replica stays led by B (Kafka reports it as remaining) and, when B
stops, has the offline election (§8.2: unclean only where the topic allows it); RF=1 partitions on
B go offline. ``controlled_shutdown`` gives the figures ``decommission`` reports before its plan
moves every replica off B (``whatif.placement``), and a report section.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, IntegerType, StringType, StructField, StructType

from html_report.charts import bars_before_after
from html_report.page import Section
from statemachines import schemas as s
from statemachines.columns import literal_array
from statemachines.election import controlled_shutdown_leader, offline_leader
from whatif import broker_balance as bb
from whatif.cluster import WhatIfCluster


def controlled_shutdown(
    cluster: WhatIfCluster, shutting_down: Sequence[int]
) -> tuple[dict[str, Any], Section]:
    """Summary figures and a report section of the controlled shutdown of ``shutting_down``."""
    spark = cluster.partitions.sparkSession
    parts = cluster.partitions
    w_row = parts.agg(F.max(F.size(s.REPLICAS)).alias("w")).first()
    w = int(w_row["w"] or 1) if w_row is not None else 1
    live = [b for b in cluster.brokers if b not in set(shutting_down)]
    live_lit, down_lit = literal_array(live), literal_array(list(shutting_down))
    assignment = [F.get(F.col(s.REPLICAS), k) for k in range(w)]
    isr = [F.get(F.col(s.ISR), k) for k in range(w)]

    def member(arr: Any, r: Any) -> Any:
        return F.coalesce(F.array_contains(arr, r), F.lit(False))

    live_or_sd = [member(live_lit, r) | member(down_lit, r) for r in assignment]
    is_sd = [member(down_lit, r) for r in assignment]
    live_only = [member(live_lit, r) for r in assignment]
    configs = _topic_configs_frame(spark, cluster)
    led = F.array_contains(down_lit, F.col(s.LEADER))
    csd = controlled_shutdown_leader(assignment, isr, live_or_sd, is_sd)
    # The partition keeps leader B (remaining) and, once B stops, has the offline election.
    unclean = F.coalesce(
        F.col("_unclean"), F.lit(cluster.broker_defaults.unclean_leader_election_enable)
    )
    stopped = offline_leader(assignment, isr, live_only, unclean)
    rf1 = F.size(s.REPLICAS) == 1
    leader_after = (
        F.when(~led, F.col(s.LEADER))
        .when(~rf1 & csd.isNotNull(), csd)
        .otherwise(F.coalesce(stopped, F.lit(s.NO_LEADER)))
    )
    isr_after = F.array_except(F.col(s.ISR), down_lit)
    frame = parts.join(F.broadcast(configs), [s.TOPIC], "left").select(
        F.col(s.LEADER).alias("_before"),
        leader_after.alias("_after"),
        (led & ~rf1 & csd.isNotNull()).alias("_csd_moved"),
        (led & ~rf1 & csd.isNull()).alias("_remaining"),
        F.size(isr_after).alias("_isr"),
        F.coalesce(F.col("_min_isr"), F.lit(cluster.broker_defaults.min_insync_replicas)).alias(
            "_min"
        ),
    )
    rows = (
        frame.groupBy("_after")
        .agg(
            F.count(F.lit(1)).alias("n"),
            F.sum(F.col("_csd_moved").cast("long")).alias("moved"),
            F.sum(F.col("_remaining").cast("long")).alias("remaining"),
            F.sum(((F.col("_before") >= 0) & (F.col("_after") < 0)).cast("long")).alias("off"),
            F.sum(((F.col("_after") >= 0) & (F.col("_isr") < F.col("_min"))).cast("long")).alias(
                "under"
            ),
            F.sum(
                ((F.col("_after") >= 0) & (F.col("_after") != F.col("_before"))).cast("long")
            ).alias("changed"),
        )
        .collect()
    )
    leaders = {
        r["_after"]: int(r["n"]) for r in rows if r["_after"] is not None and r["_after"] >= 0
    }
    total = {k: sum(int(r[k] or 0) for r in rows) for k in ("moved", "remaining", "off", "under")}
    changed = sum(int(r["changed"] or 0) for r in rows)
    before_rows = parts.where(F.col(s.LEADER) >= 0).groupBy(s.LEADER).count().collect()
    leaders_before = {r[s.LEADER]: int(r["count"]) for r in before_rows}
    figures = {
        "shutdown_leaders_moved": changed,
        "shutdown_remaining_partitions": total["remaining"],
        "shutdown_offline_partitions": total["off"],
        "shutdown_under_min_isr_partitions": total["under"],
        "leaders_per_broker_after_shutdown": bb.by_broker_id(
            {b: leaders.get(b, 0) for b in {*leaders, *live}}
        ),
    }
    section = Section(
        "Controlled shutdown",
        f"The ControlledShutdown election moves {total['moved']} leader(s) off "
        f"{_ids(shutting_down)}; {total['remaining']} partition(s) have no other live ISR member "
        f"(Kafka reports them as remaining); {total['off']} go offline and {total['under']} "
        "fall under min.insync.replicas until the plan has run.",
        charts=[
            bars_before_after(
                "Leaders per broker, before and after the shutdown",
                leaders_before,
                leaders,
                "leaders",
            )
        ],
    )
    return figures, section


def _topic_configs_frame(spark: SparkSession, cluster: WhatIfCluster) -> DataFrame:
    topics = sorted(cluster.topic_configs)
    table = pa.table(
        {
            s.TOPIC: pa.array(topics, pa.string()),
            "_min_isr": pa.array(
                [cluster.topic_configs[t].min_insync_replicas for t in topics], pa.int32()
            ),
            "_unclean": pa.array(
                [cluster.topic_configs[t].unclean_leader_election_enable for t in topics],
                pa.bool_(),
            ),
        }
    )
    schema = StructType(
        [
            StructField(s.TOPIC, StringType(), nullable=False),
            StructField("_min_isr", IntegerType(), nullable=False),
            StructField("_unclean", BooleanType(), nullable=False),
        ]
    )
    return spark.createDataFrame(table, schema)


def _ids(ids: Sequence[int] | set[int]) -> str:
    return ",".join(str(b) for b in sorted(ids)) or "none"
