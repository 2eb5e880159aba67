"""``kce run SCENARIO.yaml``: bootstrap a cluster into ZooKeeper, play the timeline, write outputs.

The controller processes events one at a time in virtual time (``controller.emulation.cluster``);
``actions`` maps scenario events to what brokers and admins do, and ``playback`` plays the
timeline (a checkpoint saves it whole: ``run_checkpoint``). An admin request Kafka rejects is
reported as the admin tool sees it (Kafka's exception name and message: a warning line, an
``events.jsonl`` line, an entry of ``summary.json``'s ``errors``) and the run goes on. The outputs
(``run_outputs``, and ``run_report``'s page) are written into a staging directory beside
``--out`` that replaces it when the run has finished (``staged_output``).
"""

from __future__ import annotations

import functools
import json
import logging
import time
from pathlib import Path
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession

from controller.commit.state_change_store import EventStateChangeLog, StateChangeLog
from controller.emulation.cluster import EmulatedCluster
from controller.partition_store import Ensemble, bootstrap_cluster, open_ensemble
from controller.records import ControllerSettings
from controller.zk import ZkClient
from controller.zk import admin_zk_client as admin
from controller.zk.paths import BROKER_IDS, BROKER_TOPICS, CONTROLLER, CONTROLLER_EPOCH
from spark_app.actions import Actor
from spark_app.cluster_builder import initial_partitions
from spark_app.playback import Playback
from spark_app.progress import Progress
from spark_app.replication_outputs import replication_settings
from spark_app.run_checkpoint import CheckpointError, CheckpointManifest, RunCheckpoints, load
from spark_app.run_outputs import write_outputs
from spark_app.run_report import write_run_report
from spark_app.scenario import Scenario
from spark_app.staged_output import staged_output
from spark_app.validate import validate_partitions

log = logging.getLogger(__name__)

STATE_CHANGE_TEXT_MAX_PARTITIONS = 10_000


class ZooKeeperUnavailableError(ValueError):
    """The scenario's (or ``--zk``'s) ZooKeeper cannot be used."""


def open_zookeeper(scenario: Scenario, override: str | None = None) -> Ensemble:
    """The scenario's ZooKeeper: emulated in-process, or a real ensemble through kazoo."""
    connect = getattr(scenario.zookeeper, "connect", None)
    mode = scenario.zookeeper.mode
    if override is not None:
        mode, connect = ("emulated", None) if override == "emulated" else ("kazoo", override)
    config = scenario.config
    try:
        ensemble = open_ensemble(
            mode,
            connect,
            config.zookeeper_session_timeout_ms,
            config.zookeeper_connection_timeout_ms,
        )
    except Exception as err:  # kazoo raises its timeouts and connection errors
        raise ZooKeeperUnavailableError(
            f"cannot use ZooKeeper {connect or mode!r}: {type(err).__name__}: {err}; start the "
            "ensemble or run with --zk emulated"
        ) from err
    # A scenario bootstraps its own cluster: never mix it into (or overwrite) an existing one,
    # nor start it over another cluster's controller epoch or registered brokers.
    probe = ensemble.client()
    try:
        occupied = _kafka_state(probe)
    finally:
        probe.stop()
    if occupied is not None:
        ensemble.close()
        raise ZooKeeperUnavailableError(
            f"ZooKeeper {connect!r} already holds a Kafka cluster ({occupied}); point the "
            "scenario at an empty chroot, e.g. host:port/kce-<name>"
        )
    return ensemble


def _kafka_state(probe: ZkClient) -> str | None:
    """What shows a Kafka cluster under the chroot, or None when there is none."""
    for parent, what in ((BROKER_TOPICS, "has topics"), (BROKER_IDS, "has registered brokers")):
        if probe.exists(parent) is not None and probe.get_children(parent):
            return f"{parent} {what}"
    for path in (CONTROLLER, CONTROLLER_EPOCH):
        if probe.exists(path) is not None:
            return f"{path} exists"
    return None


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
        topic_ids=scenario.config.ibp_at_least("2.8-IV0"),
        seed=scenario.seed,
        driver_rows=scenario.execution.driver_rows,
    )


def run(
    spark: SparkSession,
    scenario: Scenario,
    out: Path,
    zookeeper: Ensemble | None = None,
    checkpoints: RunCheckpoints | None = None,
) -> dict[str, Any]:
    """Play ``scenario``; returns the summary (also written to ``out/summary.json``). With
    ``checkpoints``, the run is saved every so many scenario events (``run_checkpoint``)."""
    ensemble = zookeeper if zookeeper is not None else open_zookeeper(scenario)
    if checkpoints is not None:
        checkpoints.remove()  # an earlier run's: this one starts afresh
    try:
        started = time.perf_counter()
        with Progress(scenario.until) as progress:
            # The scenario's state rows may break the model where Kafka's algorithm placed the
            # replicas (the load-time checks cannot see those): refuse them before anything is
            # written.
            progress.step("setup", "building and checking the starting partitions table")
            starting, rows = starting_table(spark, scenario)
            # Everything, the state-change log written during the run included, goes to a
            # staging directory that replaces ``out`` only when the run has finished (a failed,
            # interrupted or killed run leaves the previous ``out`` as it was; checkpoints live
            # apart).
            with staged_output(out, "run") as staged:
                progress.step("bootstrap", "bootstrapping the cluster into ZooKeeper")
                playback = _start(spark, scenario, staged, ensemble, starting, rows, progress)
                return _finish(playback, scenario, staged, started, checkpoints)
    finally:  # a real ensemble must not keep our sessions (and their ephemerals) alive
        ensemble.close()


def resume(
    spark: SparkSession,
    scenario: Scenario,
    out: Path,
    checkpoints: RunCheckpoints,
    manifest: CheckpointManifest,
) -> dict[str, Any]:
    """Continue the run saved in ``checkpoints.directory`` (``manifest``, as ``read_manifest``
    checked it) to its end, into ``out``: the outputs of a run never interrupted (wall times
    aside), checkpointed on at ``checkpoints.every``."""
    started = time.perf_counter()
    with staged_output(out, "run") as staged, Progress(scenario.until) as progress:
        writer = StateChangeLog(staged, _text_log(scenario))
        externals = _externals(spark, progress, writer)
        playback = load(checkpoints.directory, manifest, spark, externals, _outputs(writer))
        if not isinstance(playback, Playback):
            raise CheckpointError(f"{checkpoints.directory}: its state is not a kce run")
        checkpoints.saved_at = playback.played
        try:
            return _finish(playback, scenario, staged, started, checkpoints)
        finally:
            playback.cluster.zookeeper.close()


def _text_log(scenario: Scenario) -> bool:
    return sum(scenario.topic_partition_counts().values()) <= STATE_CHANGE_TEXT_MAX_PARTITIONS


def _externals(
    spark: SparkSession, progress: Progress | None, writer: StateChangeLog
) -> dict[str, Any]:
    """What a checkpoint names rather than saves: this process's (``run_checkpoint``)."""
    return {"spark": spark, "progress": progress, "state_change_writer": writer}


def _outputs(writer: StateChangeLog) -> dict[str, Path]:
    """The outputs written while the run goes (the others are written at its end)."""
    return {"state-change": writer.parquet_dir, "state-change.log": writer.text_path}


def _start(
    spark: SparkSession,
    scenario: Scenario,
    out: Path,
    ensemble: Ensemble,
    starting: DataFrame,
    rows: list[dict[str, Any]] | None,
    progress: Progress,
) -> Playback:
    """Bootstrap the scenario's cluster and schedule its timeline, the state-change log going
    to ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    writer = StateChangeLog(out, _text_log(scenario))
    return start_playback(
        spark, scenario, ensemble, starting, rows, EventStateChangeLog(writer), progress
    )


def starting_table(
    spark: SparkSession, scenario: Scenario, persist: bool = False
) -> tuple[DataFrame, list[dict[str, Any]] | None]:
    """The starting partitions table, checked against the cluster-state model, and its rows
    when the driver path holds a table that small; ``persist`` keeps a larger one (memory, then
    disk) for a caller that bootstraps it more than once (and unpersists it)."""
    starting = initial_partitions(spark, scenario)
    small = sum(scenario.topic_partition_counts().values()) <= scenario.execution.driver_rows
    if persist and not small:
        starting = starting.persist(StorageLevel.MEMORY_AND_DISK)
    # A starting table the driver path would hold is checked and written from the driver.
    rows = [r.asDict() for r in starting.collect()] if small else None
    validate_partitions(starting if rows is None else rows, scenario.broker_ids())
    return starting, rows


def start_playback(
    spark: SparkSession,
    scenario: Scenario,
    ensemble: Ensemble,
    starting: DataFrame,
    rows: list[dict[str, Any]] | None,
    changes: EventStateChangeLog | None = None,
    progress: Progress | None = None,
) -> Playback:
    """The cluster at t=0 (``starting`` in ZooKeeper, the brokers registered, the first
    controller elected) with the scenario's events on its timer, in a ``Playback`` that records
    the controller events from the first."""
    cluster = EmulatedCluster(
        spark,
        ensemble,
        settings_of(scenario),
        catch_up_ms=scenario.emulation.catch_up_ms,
        alter_isr=scenario.config.ibp_at_least("2.7-IV2"),
        state_change_log=changes,
        session_timeout_ms=scenario.config.zookeeper_session_timeout_ms,
    )
    timeline = list(scenario.timeline())
    playback = Playback(cluster, Actor(cluster, scenario.seed), timeline, progress)
    cluster.on_event = playback.on_event
    if scenario.replication_enabled():
        cluster.model_replication(replication_settings(scenario))
    bootstrap_cluster(cluster.admin, {}, starting, cluster.states, rows=rows)
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
    # Events due at one virtual time are applied in file order, then the controllers drain once,
    # so a burst (e.g. many ISR changes) reaches the controller as one batch of queued events.
    for index, event in enumerate(timeline):
        cluster.timer.schedule_at(event.at, functools.partial(playback.play, index))
    return playback


def _finish(
    playback: Playback,
    scenario: Scenario,
    out: Path,
    started: float,
    checkpoints: RunCheckpoints | None,
) -> dict[str, Any]:
    """Play the rest of the timeline (saved at quiet points when due), then write the outputs."""
    cluster, records = playback.cluster, playback.records

    def quiet(now_ms: int) -> None:
        if checkpoints is None or not checkpoints.due(playback.played):
            return
        changes = cluster.state_change_log
        assert changes is not None
        externals = _externals(cluster.spark, playback.progress, changes.log)
        progress = (playback.played, len(records), now_ms)
        checkpoints.save(playback, externals, _outputs(changes.log), progress)

    if playback.progress is not None:
        playback.progress.step("run", "playing the timeline")
    cluster.advance_to(scenario.until, quiet)
    if playback.progress is not None:
        playback.progress.update(scenario.until, len(records), force=True)
        playback.progress.step("outputs", f"writing the outputs of {len(records)} events")
    summary = write_outputs(cluster, scenario, records, playback.rejected, out)
    summary["wall_seconds"] = round(time.perf_counter() - started, 3)
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    # Last, from the files just written: the page shows exactly what the run's outputs hold.
    timeline = [e.model_dump(mode="json") for e in scenario.timeline()]
    write_run_report(out, summary, scenario.until, timeline)
    if checkpoints is not None:
        checkpoints.remove()
    return summary
