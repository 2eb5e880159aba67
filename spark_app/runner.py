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
import random
import shutil
import time
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from controller import events as ev
from controller.emulation import EmulatedCluster
from controller.kafka_controller import KafkaController
from controller.partition_store import Ensemble, bootstrap_cluster, open_ensemble
from controller.records import ControllerSettings, EventRecord
from controller.state_change_store import EventStateChangeLog, StateChangeLog
from controller.zk import admin_zk_client as admin
from controller.zk.kafka_zk_client import get_all_brokers
from controller.zk.paths import BROKER_TOPICS
from spark_app.cluster_builder import initial_partitions
from spark_app.progress import Progress
from spark_app.scenario import Scenario
from spark_app.scenario import events as se
from statemachines import schemas as s
from statemachines.assignment import BrokerMetadata, assign_replicas_to_brokers
from statemachines.layout import to_public_partitions, to_public_replicas
from statemachines.state_change_errors import ERRORS

log = logging.getLogger(__name__)

FINAL_STATE_MAX_PARTITIONS = 100_000
STATE_CHANGE_TEXT_MAX_PARTITIONS = 10_000


class ZooKeeperUnavailableError(ValueError):
    """The scenario's (or ``--zk``'s) ZooKeeper cannot be used."""


def open_zookeeper(scenario: Scenario, override: str | None = None) -> Ensemble:
    """The scenario's ZooKeeper: emulated in-process, or a real ensemble through kazoo."""
    connect = getattr(scenario.zookeeper, "connect", None)
    mode = scenario.zookeeper.mode
    if override is not None:
        mode, connect = ("emulated", None) if override == "emulated" else ("kazoo", override)
    try:
        ensemble = open_ensemble(mode, connect)
    except Exception as err:  # kazoo raises its timeouts and connection errors
        raise ZooKeeperUnavailableError(
            f"cannot use ZooKeeper {connect or mode!r}: {type(err).__name__}: {err}; start the "
            "ensemble or run with --zk emulated"
        ) from err
    # A scenario bootstraps its own cluster: never mix it into (or overwrite) an existing one.
    probe = ensemble.client()
    try:
        occupied = probe.exists(BROKER_TOPICS) is not None and bool(
            probe.get_children(BROKER_TOPICS)
        )
    finally:
        probe.stop()
    if occupied:
        ensemble.close()
        raise ZooKeeperUnavailableError(
            f"ZooKeeper {connect!r} already holds a Kafka cluster ({BROKER_TOPICS} has topics); "
            "point the scenario at an empty chroot, e.g. host:port/kce-<name>"
        )
    return ensemble


def settings_of(scenario: Scenario) -> ControllerSettings:
    c = scenario.config
    return ControllerSettings(
        auto_leader_rebalance_enable=bool(c.get("auto.leader.rebalance.enable")),
        delete_topic_enable=bool(c.get("delete.topic.enable")),
        leader_imbalance_per_broker_percentage=int(c.get("leader.imbalance.per.broker.percentage")),  # type: ignore[arg-type]
        leader_imbalance_check_interval_seconds=int(
            c.get("leader.imbalance.check.interval.seconds")
        ),  # type: ignore[arg-type]
        unclean_leader_election_enable=bool(c.get("unclean.leader.election.enable")),
        kafka_version=scenario.version(),
    )


class Admin:
    """What operators and admin clients do: ZooKeeper writes (Kafka's ``AdminZkClient``) and API
    requests to the active controller. Assignments use Kafka's algorithm over the registered
    brokers with the scenario's seeded random draws."""

    def __init__(self, cluster: EmulatedCluster, seed: int) -> None:
        self.cluster = cluster
        self.zk = cluster.admin
        self.rng = random.Random(seed)

    def registered_brokers(self) -> list[BrokerMetadata]:
        brokers = get_all_brokers(self.zk)
        return [BrokerMetadata(b, brokers[b].rack) for b in sorted(brokers)]

    def create_topic(self, spec: se.TopicSpec) -> None:
        listed = dict(spec.assignment or {})
        placed: dict[int, list[int]] = {}
        if len(listed) < spec.partitions:
            placed = assign_replicas_to_brokers(
                self.registered_brokers(), spec.partitions, spec.replication_factor, rng=self.rng
            )
        assignment = {p: list(listed.get(p, placed.get(p, []))) for p in range(spec.partitions)}
        admin.create_topic(self.zk, spec.name, assignment, spec.config.overrides())

    def add_partitions(self, event: se.AddPartitions) -> None:
        current = admin.read_topic_assignment(self.zk, event.topic).partitions
        first = current["0"]
        brokers = self.registered_brokers()
        ids = [b.id for b in brokers]
        fixed = next((i for i, b in enumerate(ids) if b >= first[0]), 0)  # §9.2
        n_new = event.total - len(current)
        listed = dict(event.assignment or {})
        placed = assign_replicas_to_brokers(
            brokers, n_new, len(first), fixed_start_index=fixed, start_partition_id=len(current)
        )
        added = {p: list(listed.get(p, placed[p])) for p in range(len(current), event.total)}
        admin.add_partitions(self.zk, event.topic, added)

    def controller(self) -> KafkaController | None:
        return self.cluster.active_controller()

    def alter_reassignments(self, entries: dict[ev.TopicPartition, tuple[int, ...] | None]) -> None:
        active = self.controller()
        if active is not None:
            active.events.put(ev.ApiPartitionReassignment(entries))

    def apply(self, event: se.ScenarioEvent) -> None:
        """What the brokers or an admin do for one scenario event."""
        cluster = self.cluster
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
        elif isinstance(event, se.CreateTopic):
            self.create_topic(event.topic)
        elif isinstance(event, se.AddPartitions):
            self.add_partitions(event)
        elif isinstance(event, se.DeleteTopic):
            admin.request_topic_deletion(self.zk, event.topic)
        elif isinstance(event, se.SetTopicConfig):
            merged = admin.set_topic_config(self.zk, event.topic, event.config.overrides())
            active = self.controller()
            # The controller broker's config handler raises the event when unclean turns on.
            if active is not None and merged.get("unclean.leader.election.enable") == "true":
                active.events.put(ev.TopicUncleanLeaderElectionEnable(event.topic))
        elif isinstance(event, se.ReassignPartitions):
            entries = [(e.topic, e.partition, e.replicas) for e in event.plan.partitions]
            if event.via == "zk":
                admin.request_reassignment(self.zk, entries)
            else:
                self.alter_reassignments({ev.TopicPartition(t, p): tuple(r) for t, p, r in entries})
        elif isinstance(event, se.CancelReassignment):
            self.alter_reassignments({p.tp(): None for p in event.partitions})
        elif isinstance(event, se.IsrChange):
            cluster.isr_change(event.topic, event.partition, list(event.isr))
        elif isinstance(event, se.LogDirFailure):
            cluster.log_dir_failure(event.broker)
        elif isinstance(event, se.ElectLeaders):
            active = self.controller()
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


def run(
    spark: SparkSession, scenario: Scenario, out: Path, zookeeper: Ensemble | None = None
) -> dict[str, Any]:
    """Play ``scenario``; returns the summary (also written to ``out/summary.json``)."""
    ensemble = zookeeper if zookeeper is not None else open_zookeeper(scenario)
    try:
        return _play(spark, scenario, out, ensemble)
    finally:  # a real ensemble must not keep our sessions (and their ephemerals) alive
        ensemble.close()


def _play(spark: SparkSession, scenario: Scenario, out: Path, ensemble: Ensemble) -> dict[str, Any]:
    started = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    records: list[EventRecord] = []
    text = sum(scenario.topic_partition_counts().values()) <= STATE_CHANGE_TEXT_MAX_PARTITIONS
    if (out / "state-change").exists():
        shutil.rmtree(out / "state-change")
    (out / "state-change.log").unlink(missing_ok=True)
    changes = EventStateChangeLog(StateChangeLog(out, text))
    progress = Progress(scenario.until)

    def on_event(record: EventRecord) -> None:
        records.append(record)
        progress.update(record.at_ms, len(records))

    cluster = EmulatedCluster(
        spark,
        ensemble,
        settings_of(scenario),
        on_event=on_event,
        catch_up_ms=scenario.emulation.catch_up_ms,
        alter_isr=scenario.config.ibp_at_least("2.7-IV2"),
        state_change_log=changes,
    )
    bootstrap_cluster(cluster.admin, {}, initial_partitions(spark, scenario), cluster.states)
    for topic in scenario.cluster.topics:
        if topic.config.overrides():
            admin.set_topic_config(cluster.admin, topic.name, topic.config.overrides())
    for b in scenario.brokers():
        cluster.add_broker(b.id, b.rack)
    live = scenario.initial_live_brokers()
    for b in live:
        cluster.start_broker(b, start_controller=False)
    first = scenario.cluster.controller if scenario.cluster.controller is not None else live[0]
    for b in [first, *[x for x in live if x != first]]:
        cluster.brokers[b].controller.startup()
        cluster.drain()
    actor = Admin(cluster, scenario.seed)
    # Events due at one virtual time are applied in file order, then the controllers drain once,
    # so a burst (e.g. many ISR changes) reaches the controller as one batch of queued events.
    for event in scenario.timeline():
        cluster.timer.schedule_at(event.at, lambda e=event: actor.apply(e))
    cluster.advance_to(scenario.until)
    progress.close(scenario.until, len(records))
    summary = _write_outputs(cluster, scenario, records, out)
    summary["wall_seconds"] = round(time.perf_counter() - started, 3)
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary


def _record_json(r: EventRecord) -> dict[str, Any]:
    return {
        "virtual_time_ms": r.at_ms,
        "controller": r.controller_id,
        "type": r.event,
        "controller_state": r.state,
        "queue_time_ms": r.queue_time_ms,
        "processing_ms": round(r.processing_ms, 3),
        "partitions_changed": r.partitions_changed,
        "elections": r.counters.get("elected", 0),
        "unclean_elections": r.counters.get("unclean_elected", 0),
        "failed_elections": r.counters.get("failed_election", 0),
        "isr_shrinks": r.counters.get("isr_shrinks", 0),
        "state_change_errors": r.counters.get(ERRORS, 0),
        "requests": r.requests,
        "zk_writes": r.zk_writes,
        "commits": r.commits,
        "counters": r.counters,
        "error": r.failed,
    }


def _summed(dicts: Iterable[dict[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for d in dicts:
        for k, v in d.items():
            total[k] = total.get(k, 0) + v
    return total


def _rate_and_time(cluster: EmulatedCluster) -> dict[str, dict[str, float]]:
    """Kafka's per-state timers (§4.2, §16.1) summed over every controller module of the run."""
    out: dict[str, dict[str, float]] = {}
    for broker in cluster.brokers.values():
        for timer in broker.controller.events.metrics.rate_and_time.values():
            if timer.count == 0:
                continue
            entry = out.setdefault(timer.metric_name, {"count": 0, "total_ms": 0.0, "max_ms": 0.0})
            entry["count"] += timer.count
            entry["total_ms"] = round(entry["total_ms"] + timer.time_ms.total, 3)
            entry["max_ms"] = round(max(entry["max_ms"], timer.time_ms.max or 0.0), 3)
    return dict(sorted(out.items()))


def _write_outputs(
    cluster: EmulatedCluster, scenario: Scenario, records: list[EventRecord], out: Path
) -> dict[str, Any]:
    with (out / "events.jsonl").open("w") as f:
        for r in records:
            f.write(json.dumps(_record_json(r)) + "\n")
    unclean = 0
    with (out / "metrics.jsonl").open("w") as f:
        for r in records:
            unclean += r.counters.get("unclean_elected", 0)
            if r.gauges is not None:
                line = {
                    "virtual_time_ms": r.at_ms,
                    "controller": r.controller_id,
                    "ActiveControllerCount": 1,
                    "ControllerState": r.state,
                    "EventQueueSize": r.queue_size,
                    "EventQueueTimeMs": r.queue_time_ms,
                    "UncleanLeaderElections": unclean,  # the meter's count
                    **asdict(r.gauges),
                }
                f.write(json.dumps(line) + "\n")
    active = cluster.active_controller()
    summary: dict[str, Any] = {
        "name": scenario.name,
        "events_processed": len(records),
        "elections": sum(r.counters.get("elected", 0) for r in records),
        "unclean_elections": sum(r.counters.get("unclean_elected", 0) for r in records),
        "errors": [r.failed for r in records if r.failed],
        "requests": _summed(r.requests for r in records),
        "zk_writes": sum(r.zk_writes for r in records),
        "rate_and_time": _rate_and_time(cluster),
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
