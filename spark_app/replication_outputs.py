"""What ``kce run`` reports of replication below the controller: the settings the scenario
gives the emulated brokers, and their metrics, totals and per-partition logs in Kafka's names."""

from __future__ import annotations

from typing import Any

from controller.emulation.replication import Replication
from controller.emulation.replication_records import ReplicationSettings, Snapshot
from spark_app.scenario import Scenario
from statemachines.isr_expiration import IsrRule

LONG_MAX = 2**63 - 1
LOG_STATE_KEYS = ("high_watermark", "log_end_offsets", "acked_records_lost", "diverged")


def replication_settings(scenario: Scenario) -> ReplicationSettings:
    c, e = scenario.config, scenario.emulation
    flush_periods = tuple(
        p for p in (e.page_cache_flush_ms, c.log_flush_interval_ms) if p is not None and p > 0
    )
    messages = c.log_flush_interval_messages
    return ReplicationSettings(
        rule=IsrRule(
            lag_ms=c.replica_lag_time_max_ms,
            count_rule=e.isr_rule == "count",
            max_messages=c.replica_lag_max_messages,
        ),
        alter_isr=c.ibp_at_least("2.7-IV2"),
        use_epochs=c.message_format_at_least("0.11.0"),
        fetch_bytes_per_s=e.fetch_mb_per_s * 1_000_000,
        fetch_wait_ms=c.replica_fetch_wait_max_ms,
        flush_periods_ms=flush_periods,
        flush_messages=None if messages >= LONG_MAX else messages,
        page_cache_flush_ms=e.page_cache_flush_ms,
        min_isr=c.min_insync_replicas,
        driver_rows=scenario.execution.driver_rows,
    )


def metric_line(g: Snapshot) -> dict[str, Any]:
    """One broker-side line of ``metrics.jsonl`` (the meters hold their counts)."""
    return {
        "virtual_time_ms": g.at_ms,
        "source": "brokers",
        "UnderReplicatedPartitions": g.under_replicated,
        "UnderMinIsrPartitionCount": g.under_min_isr,
        "AtMinIsrPartitionCount": g.at_min_isr,
        "OfflinePartitionsCount": g.offline,
        "leader_down_partitions": g.leader_down,
        "IsrShrinksPerSec": g.isr_shrinks,
        "IsrExpandsPerSec": g.isr_expands,
        "FailedIsrUpdatesPerSec": g.failed_isr_updates,
        "IsrChangeNotifications": g.isr_change_notifications,
    }


def summary(rep: Replication, partitions: list[dict[str, Any]] | None) -> dict[str, Any]:
    """The top-level ``summary.json`` keys of replication; ``partitions``: the per-partition
    results when the run lists them (else they are counted in Spark)."""
    n = rep.totals
    if partitions is None:
        lost, divergent = rep.loss_totals()
    else:
        lost = sum(p["acked_records_lost"] for p in partitions)
        divergent = sum(1 for p in partitions if p["diverged"])
    refused, leaderless = rep.produce_totals()
    return {
        "isr_shrinks": n.isr_shrinks,
        "isr_expands": n.isr_expands,
        "failed_isr_updates": n.failed_isr_updates,
        "isr_change_notifications": n.isr_change_notifications,
        "under_min_isr_partition_seconds": round(n.under_min_isr_partition_ms / 1000, 3),
        "offline_partition_seconds": round(n.offline_partition_ms / 1000, 3),
        "leader_down_partition_seconds": round(n.leader_down_partition_ms / 1000, 3),
        "acked_records_lost": lost,
        "divergent_partitions": divergent,
        "records_refused_not_enough_replicas": refused,
        "records_without_leader": leaderless,
    }
