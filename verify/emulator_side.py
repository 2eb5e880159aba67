"""The emulator's side of ``kce verify``: ``kce run``'s playback on the emulated ZooKeeper,
moved forward one step at a time instead of to ``until`` at once."""

from __future__ import annotations

from pyspark.sql import SparkSession

from controller.zk import admin_zk_client as admin
from controller.zk.paths import BROKER_TOPICS
from spark_app.runner import open_zookeeper, start_playback, starting_table
from spark_app.scenario import Scenario
from verify.snapshot import Snapshot, take


class EmulatorSide:
    """The scenario's cluster at t=0 (bootstrapped, controller elected), its timeline scheduled."""

    def __init__(self, spark: SparkSession, scenario: Scenario) -> None:
        self.ensemble = open_zookeeper(scenario, "emulated")
        starting, rows = starting_table(spark, scenario)
        self.playback = start_playback(spark, scenario, self.ensemble, starting, rows)
        self.cluster = self.playback.cluster
        self.topic_ids: dict[str, str] = {}

    def advance_to(self, at_ms: int) -> list[str]:
        """Play every event due by ``at_ms`` and let the controllers finish; the admin requests
        the emulator refused meanwhile (the admin tools' and the API's), one line each."""
        rejected, api = len(self.playback.rejected), len(self.playback.actor.api_refusals)
        self.cluster.advance_to(at_ms)
        refused = [f.line() for f in self.playback.rejected[rejected:]]
        return refused + self.playback.actor.api_refusals[api:]

    def assignment(self, topic: str) -> dict[int, list[int]]:
        """The topic's replica assignment in the emulator's ZooKeeper (what its placement drew);
        empty when the emulator has no such topic (it refused to create it)."""
        if self.cluster.admin.exists(f"{BROKER_TOPICS}/{topic}") is None:
            return {}
        znode = admin.read_topic_assignment(self.cluster.admin, topic)
        return {int(p): list(r) for p, r in znode.partitions.items()}

    def controller(self) -> int | None:
        active = self.cluster.active_controller()
        return None if active is None else active.broker_id

    def snapshot(self) -> Snapshot:
        snap, self.topic_ids = take(self.cluster.admin, self.topic_ids)
        return snap

    def close(self) -> None:
        self.ensemble.close()
