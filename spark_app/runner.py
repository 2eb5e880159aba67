"""``kce run SCENARIO.yaml``: bootstrap a cluster into ZooKeeper, play the timeline, write outputs.

The controller processes events one at a time in virtual time (``controller.emulation``); this
module maps scenario events to what brokers and admins do, and writes ``--out``:
``partitions.parquet`` and ``replicas.parquet`` (final tables), ``final_state.json`` (up to
100K partitions), ``events.jsonl`` (one line per processed controller event), ``metrics.jsonl``
(the gauge timeline) and ``summary.json``.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from controller import events as ev
from controller.emulation import EmulatedCluster
from controller.records import ControllerSettings, EventRecord
from controller.zk import InMemoryZooKeeper
from controller.zk.bootstrap import bootstrap_cluster
from spark_app.cluster_builder import initial_partitions
from spark_app.scenario import Scenario
from spark_app.scenario import events as se
from statemachines import schemas as s
from statemachines.layout import to_public_partitions, to_public_replicas

log = logging.getLogger(__name__)

FINAL_STATE_MAX_PARTITIONS = 100_000
SUPPORTED = (
    se.BrokerFailure,
    se.BrokerStartup,
    se.ControlledShutdown,
    se.ElectLeaders,
    se.ZkSessionExpiry,
)


class UnsupportedScenarioError(ValueError):
    """The scenario uses an event the emulation does not run yet."""


def check_supported(scenario: Scenario) -> None:
    unsupported = sorted({e.type for e in scenario.events if not isinstance(e, SUPPORTED)})
    if unsupported:
        raise UnsupportedScenarioError(
            f"event types {unsupported} are not emulated yet; supported: "
            + ", ".join(sorted(t.model_fields["type"].default for t in SUPPORTED))
        )
    if scenario.zookeeper.mode != "emulated":
        raise UnsupportedScenarioError(
            "zookeeper.mode kazoo is not wired into `kce run` yet; use emulated"
        )


def settings_of(scenario: Scenario) -> ControllerSettings:
    c = scenario.config
    return ControllerSettings(
        auto_leader_rebalance_enable=bool(c.get("auto.leader.rebalance.enable")),
        leader_imbalance_per_broker_percentage=int(c.get("leader.imbalance.per.broker.percentage")),  # type: ignore[arg-type]
        leader_imbalance_check_interval_seconds=int(
            c.get("leader.imbalance.check.interval.seconds")
        ),  # type: ignore[arg-type]
        unclean_leader_election_enable=bool(c.get("unclean.leader.election.enable")),
        kafka_version=scenario.version(),
    )


def _apply(cluster: EmulatedCluster, event: se.ScenarioEvent) -> None:
    """What the brokers or an admin do for one scenario event."""
    if isinstance(event, se.BrokerFailure):
        for b in event.brokers:
            cluster.crash(b)
    elif isinstance(event, se.BrokerStartup):
        for b in event.brokers:
            cluster.start_broker(b)
    elif isinstance(event, se.ControlledShutdown):
        cluster.controlled_shutdown(event.broker)
    elif isinstance(event, se.ZkSessionExpiry):
        cluster.expire_session(event.broker)
    elif isinstance(event, se.ElectLeaders):
        active = cluster.active_controller()
        if active is None:
            return
        partitions = (
            None if event.partitions == "all" else frozenset(p.tp() for p in event.partitions)  # type: ignore[union-attr]
        )
        trigger = (
            ev.ElectionTrigger.ZkTriggered
            if event.via == "zk"
            else ev.ElectionTrigger.AdminClientTriggered
        )
        active.events.put(
            ev.ReplicaLeaderElection(partitions, event.kafka_election_type(), trigger)
        )
    cluster.drain()


def run(spark: SparkSession, scenario: Scenario, out: Path) -> dict[str, Any]:
    """Play ``scenario``; returns the summary (also written to ``out/summary.json``)."""
    check_supported(scenario)
    started = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    records: list[EventRecord] = []
    store = InMemoryZooKeeper()
    topics_config = {t.name: t.config for t in scenario.cluster.topics}
    default_unclean = bool(scenario.config.get("unclean.leader.election.enable"))
    cluster = EmulatedCluster(
        spark,
        store,
        settings_of(scenario),
        on_event=records.append,
        topic_unclean=lambda t: (
            topics_config[t].unclean_enabled(default_unclean)
            if t in topics_config
            else default_unclean
        ),
    )
    admin = store.client()
    admin.start()
    bootstrap_cluster(admin, {}, initial_partitions(spark, scenario))
    for b in scenario.brokers():
        cluster.add_broker(b.id, b.rack)
    live = scenario.initial_live_brokers()
    for b in live:
        cluster.start_broker(b, start_controller=False)
    first = scenario.cluster.controller if scenario.cluster.controller is not None else live[0]
    for b in [first, *[x for x in live if x != first]]:
        cluster.brokers[b].controller.startup()
        cluster.drain()
    for event in scenario.timeline():
        cluster.timer.schedule_at(event.at, lambda e=event: _apply(cluster, e))
    cluster.advance_to(scenario.until)
    summary = _write_outputs(cluster, scenario, records, out)
    summary["wall_seconds"] = round(time.perf_counter() - started, 3)
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    store.close()
    return summary


def _record_json(r: EventRecord) -> dict[str, Any]:
    return {
        "virtual_time_ms": r.at_ms,
        "controller": r.controller_id,
        "type": r.event,
        "controller_state": r.state,
        "queue_time_ms": r.queue_time_ms,
        "processing_ms": round(r.processing_ms, 3),
        "partitions_changed": r.zk_writes,
        "elections": r.counters.get("elected", 0),
        "unclean_elections": r.counters.get("unclean_elected", 0),
        "failed_elections": r.counters.get("failed_election", 0),
        "isr_shrinks": r.counters.get("isr_shrinks", 0),
        "error": r.failed,
    }


def _write_outputs(
    cluster: EmulatedCluster, scenario: Scenario, records: list[EventRecord], out: Path
) -> dict[str, Any]:
    with (out / "events.jsonl").open("w") as f:
        for r in records:
            f.write(json.dumps(_record_json(r)) + "\n")
    with (out / "metrics.jsonl").open("w") as f:
        for r in records:
            if r.gauges is not None:
                f.write(json.dumps({"virtual_time_ms": r.at_ms, **asdict(r.gauges)}) + "\n")
    active = cluster.active_controller()
    summary: dict[str, Any] = {
        "name": scenario.name,
        "events_processed": len(records),
        "elections": sum(r.counters.get("elected", 0) for r in records),
        "unclean_elections": sum(r.counters.get("unclean_elected", 0) for r in records),
        "errors": [r.failed for r in records if r.failed],
        "controller": None,
    }
    if active is None or active.ctx.partitions is None:
        return summary
    ctx = active.ctx
    topics = ctx.topics_frame()
    partitions = to_public_partitions(ctx.partitions, topics)
    replicas = to_public_replicas(ctx.partitions, topics)
    partitions.write.mode("overwrite").parquet(str(out / "partitions.parquet"))
    replicas.write.mode("overwrite").parquet(str(out / "replicas.parquet"))
    last = next((r.gauges for r in reversed(records) if r.gauges is not None), None)
    summary["controller"] = {
        "id": active.broker_id,
        "epoch": ctx.epoch,
        "epoch_zk_version": ctx.epoch_zk_version,
    }
    summary["metrics"] = asdict(last) if last is not None else {}
    total = sum(t.partitions for t in ctx.topics.values()) or None
    count = partitions.count() if total is None else total
    if count <= FINAL_STATE_MAX_PARTITIONS:
        final = {
            "controller": summary["controller"],
            "brokers": {
                "live": sorted(ctx.live_brokers),
                "shutting_down": sorted(ctx.shutting_down),
            },
            "partitions": [r.asDict() for r in partitions.orderBy(s.TOPIC, s.PARTITION).collect()],
            "replicas": [
                r.asDict() for r in replicas.orderBy(s.TOPIC, s.PARTITION, s.BROKER).collect()
            ],
            "topics": sorted(ctx.topics),
            "metrics": summary["metrics"],
        }
        (out / "final_state.json").write_text(json.dumps(final, indent=2))
    return summary
