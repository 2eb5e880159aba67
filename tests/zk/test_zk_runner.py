"""``kce run`` on both ZooKeeper backends: the same scenario, the same final state.

The scenario uses the pre-AlterIsr ISR path (IBP 2.6): the leader writes the state znode and an
``/isr_change_notification`` node, which the controller reads back — through real watches on the
real server.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from pyspark.sql import SparkSession
from zk_server import ZooKeeperServer

from controller.partition_store import EmulatedEnsemble, Ensemble, ServerEnsemble
from spark_app.runner import ZooKeeperUnavailableError, open_zookeeper, run
from spark_app.scenario import scenario_from_data

SCENARIO = {
    "name": "zk-backends",
    "seed": 1,
    "config": {"auto.leader.rebalance.enable": False, "inter.broker.protocol.version": "2.6"},
    "cluster": {
        "brokers": [{"id": 1}, {"id": 2}, {"id": 3}],
        "topics": [
            {"name": "t", "partitions": 2, "replication_factor": 3,
             "assignment": {"0": [2, 3, 1], "1": [3, 1, 2]}}
        ],
        "controller": 1,
    },
    "events": [
        {"at": "1s", "type": "broker_failure", "brokers": [2]},
        {"at": "2s", "type": "broker_startup", "brokers": [2]},
        {"at": "3s", "type": "isr_change", "topic": "t", "partition": 1, "isr": [3, 1]},
        {"at": "4s", "type": "zk_session_expiry", "broker": 1},
    ],
    "until": "10s",
}  # fmt: skip


@pytest.fixture(params=["memory", pytest.param("real", marks=pytest.mark.zk)])
def ensemble(request: pytest.FixtureRequest) -> Ensemble:
    if request.param == "memory":
        return EmulatedEnsemble()
    server: ZooKeeperServer = request.getfixturevalue("zk_server")
    return ServerEnsemble(f"{server.hosts}/kce-run-{uuid.uuid4().hex[:8]}")


def test_scenario_on_both_backends(spark: SparkSession, tmp_path: Path, ensemble: Ensemble) -> None:
    summary = run(spark, scenario_from_data(SCENARIO), tmp_path, ensemble)
    assert summary["errors"] == []
    final = json.loads((tmp_path / "final_state.json").read_text())
    got = {p["partition"]: (p["leader"], p["isr"]) for p in final["partitions"]}
    # t-0: 2 fails (3 leads), returns and catches up (appended). t-1: the leader's own ISR write
    # drops 2, which then catches up again; the controller moved with the session expiry, whose
    # failover took 1 out of the ISRs until it caught up again (appended, spec §3.6).
    assert got == {0: (3, [3, 2, 1]), 1: (3, [3, 2, 1])}
    assert final["controller"]["epoch"] == 2
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    refreshed = [e for e in events if e["type"] == "IsrChangeNotification" and e["commits"]]
    assert refreshed and all(e["counters"]["isr_updated"] >= 1 for e in refreshed)


@pytest.mark.zk
def test_occupied_chroot_is_refused(zk_server: ZooKeeperServer) -> None:
    chroot = f"/kce-busy-{uuid.uuid4().hex[:8]}"
    root = KazooClient(zk_server.hosts)
    root.start()
    try:
        root.create(f"{chroot}/brokers/topics/orders", b"{}", makepath=True)
        scenario = scenario_from_data(SCENARIO)
        with pytest.raises(ZooKeeperUnavailableError, match="already holds"):
            open_zookeeper(scenario, zk_server.hosts + chroot)
    finally:
        root.stop()
        root.close()
