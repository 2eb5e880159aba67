"""The controlled shutdown of brokers being decommissioned, all at once (spec §8.4).

Each partition the shutting-down brokers B lead, RF > 1, its topic not being deleted, gets the
first replica that is live, in the ISR and not shutting down as its leader (the
ControlledShutdown election, §7.1; new ISR = ISR − B). A partition with no such replica stays
led by B (Kafka reports it as remaining). Then B stops: ``whatif.broker_failure.on_failure``
applies §8.2 — the partitions B still leads have the offline election (unclean only where the
topic allows it), and B leaves every ISR except as its last member (``whatif.isr_rules``), so
the offline and under-min-ISR counts are ``fail``'s. ``controlled_shutdown`` gives the figures
``decommission`` reports before its plan moves every replica off B (``whatif.placement``), and a
report section.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from html_report.charts import bars_before_after
from html_report.page import Section
from statemachines import schemas as s
from statemachines.brokers import BrokerSet
from statemachines.columns import has_leadership
from statemachines.election import controlled_shutdown_leader
from whatif import broker_balance as bb
from whatif.broker_failure import (
    LEADER_BEFORE,
    failure_rows,
    on_failure,
    slot_columns,
    snapshot_facts,
)
from whatif.cluster import WhatIfCluster
from whatif.isr_rules import DELETING, MIN_ISR, is_offline, is_under_min_isr

MOVED = "_csd_moved"
REMAINING = "_remaining"


def on_controlled_shutdown(
    rows: DataFrame, w: int, everyone: BrokerSet, down: BrokerSet
) -> DataFrame:
    """§8.4 steps 5–6 over ``broker_failure.failure_rows``: the ControlledShutdown election of
    the partitions ``down`` leads (RF > 1, topic not being deleted), with ``_csd_moved`` (a
    successor took over) and ``_remaining`` (none did: Kafka reports it remaining)."""
    reps, isr = slot_columns(s.REPLICAS, w), slot_columns(s.ISR, w)
    leader = F.col(s.LEADER)
    acting = has_leadership() & ~F.col(DELETING) & (F.size(s.REPLICAS) > 1) & down.contains(leader)
    successor = controlled_shutdown_leader(
        reps, isr, [everyone.contains(r) for r in reps], [down.contains(r) for r in reps]
    )
    moved = acting & successor.isNotNull()
    return rows.withColumns({MOVED: moved, REMAINING: acting & successor.isNull()}).withColumns(
        {
            s.LEADER: F.when(F.col(MOVED), successor).otherwise(leader),
            s.ISR: F.when(F.col(MOVED), F.filter(s.ISR, lambda b: ~down.contains(b))).otherwise(
                F.col(s.ISR)
            ),
            s.LEADER_EPOCH: F.col(s.LEADER_EPOCH) + F.col(MOVED).cast("int"),
            s.ZK_VERSION: F.col(s.ZK_VERSION) + F.col(MOVED).cast("int"),
        }
    )


def after_shutdown(cluster: WhatIfCluster, shutting_down: Sequence[int]) -> DataFrame:
    """The public partitions (lazy, with ``failure_rows``' columns, ``_csd_moved`` and
    ``_remaining``) once ``shutting_down`` have shut down and stopped."""
    width = snapshot_facts(cluster).width
    everyone = BrokerSet.of(cluster.brokers)
    down = BrokerSet.of(shutting_down)
    shut = on_controlled_shutdown(failure_rows(cluster), width, everyone | down, down)
    return on_failure(shut, width, everyone - down, down)


def controlled_shutdown(
    cluster: WhatIfCluster, shutting_down: Sequence[int]
) -> tuple[dict[str, Any], Section]:
    """Summary figures and a report section of the controlled shutdown of ``shutting_down``."""
    live = [b for b in cluster.brokers if b not in set(shutting_down)]
    after = after_shutdown(cluster, shutting_down)
    leader, before, deleting = F.col(s.LEADER), F.col(LEADER_BEFORE), F.col(DELETING)
    flags = after.select(
        leader.alias("_after"),
        F.col(MOVED),
        F.col(REMAINING),
        is_offline(leader, deleting).alias("_off"),
        is_under_min_isr(leader, F.size(s.ISR), F.col(MIN_ISR), deleting).alias("_under"),
        ((leader >= 0) & (leader != before) & ~deleting).alias("_changed"),
    )

    def total(flag: str) -> Any:
        return F.sum(F.col(flag).cast("long")).alias(flag)

    rows = (
        flags.groupBy("_after")
        .agg(
            F.count(F.lit(1)).alias("n"),
            *[total(f) for f in (MOVED, REMAINING, "_off", "_under", "_changed")],
        )
        .collect()
    )
    leaders = {
        r["_after"]: int(r["n"]) for r in rows if r["_after"] is not None and r["_after"] >= 0
    }
    sums = {
        k: sum(int(r[k] or 0) for r in rows)
        for k in (MOVED, REMAINING, "_off", "_under", "_changed")
    }
    before_rows = cluster.partitions.where(F.col(s.LEADER) >= 0).groupBy(s.LEADER).count().collect()
    leaders_before = {r[s.LEADER]: int(r["count"]) for r in before_rows}
    figures = {
        "shutdown_leaders_moved": sums["_changed"],
        "shutdown_remaining_partitions": sums[REMAINING],
        "shutdown_offline_partitions": sums["_off"],
        "shutdown_under_min_isr_partitions": sums["_under"],
        "leaders_per_broker_after_shutdown": bb.by_broker_id(
            {b: leaders.get(b, 0) for b in {*leaders, *live}}
        ),
    }
    section = Section(
        "Controlled shutdown",
        f"The ControlledShutdown election moves {sums[MOVED]} leader(s) off "
        f"{_ids(shutting_down)}; {sums[REMAINING]} partition(s) have no other live ISR member "
        f"(Kafka reports them as remaining); once the brokers stop, {sums['_off']} are offline "
        f"and {sums['_under']} under min.insync.replicas until the plan has run.",
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


def _ids(ids: Sequence[int] | set[int]) -> str:
    return ",".join(str(b) for b in sorted(ids)) or "none"
