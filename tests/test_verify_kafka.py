"""``kce verify`` against real Apache Kafka 2.8.2 (``.ci/setup --kafka``): the harness starts
and stops brokers cleanly and leaves no process behind, and the short verify set (every event
type a real cluster plays, ``tests/data/verify``) ends every step in the same ZooKeeper state on
real Kafka and on the emulator."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from spark_app.cli import main
from statemachines.assignment import BrokerMetadata
from verify.kafka_install import DEFAULT_RELEASE, KafkaMissingError, kafka_libs
from verify.real_cluster import RealClusterError, RealKafkaCluster

pytestmark = pytest.mark.kafka
VERIFY = Path(__file__).resolve().parent / "data" / "verify"


@pytest.fixture(scope="module", autouse=True)
def installed() -> None:
    try:
        kafka_libs(DEFAULT_RELEASE)
    except KafkaMissingError as err:  # CI installs it: a missing release is a broken setup
        pytest.fail(str(err))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split()[2] != "Z"


def test_the_harness_stops_every_process_it_started() -> None:
    """A broker registers ``/brokers/ids/<id>`` with its ``broker.rack``; SIGKILL is a crash
    ZooKeeper notices after the session timeout; ``close`` ends the rest (ZooKeeper too)."""
    cluster = RealKafkaCluster(
        DEFAULT_RELEASE, [BrokerMetadata(1, "a"), BrokerMetadata(2, "b")],
        {"zookeeper.session.timeout.ms": "6000"}, session_timeout_ms=6000,
    )  # fmt: skip
    try:
        zk = cluster.start_zookeeper()
        cluster.start_broker(1)
        cluster.start_broker(2)
        assert json.loads(zk.get("/brokers/ids/2")[0])["rack"] == "b"
        pids = [b.process.pid for b in cluster.members.values() if b.process is not None]
        cluster.kill(2)
        assert not cluster.registered(2) and cluster.registered(1)
    finally:
        cluster.close()
    assert not any(_alive(pid) for pid in pids)
    assert cluster.zookeeper.process is not None and cluster.zookeeper.process.poll() is not None
    assert not cluster.root.exists()


def test_a_broker_that_cannot_start_is_reported_with_its_log() -> None:
    """Kafka refuses a config value it cannot parse and exits; the harness says so with the
    broker's log and leaves nothing running."""
    cluster = RealKafkaCluster(
        DEFAULT_RELEASE, [BrokerMetadata(1, None)], {"zookeeper.session.timeout.ms": "soon"}
    )
    try:
        cluster.start_zookeeper()
        with pytest.raises(RealClusterError, match="broker 1 exited while starting"):
            cluster.start_broker(1)
    finally:
        cluster.close()
    process = cluster.members[1].process
    assert process is not None and process.poll() is not None


@pytest.mark.parametrize("name", ["core", "rebalance", "failover"])
def test_the_short_set_is_identical_on_real_kafka(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    """Issue #56: every step of the short set ends in the same ZooKeeper state (leader, ISR,
    leader and controller epochs, assignments, topic ids, live brokers, admin znodes) on Kafka
    2.8.2 and on the emulator; ``verify.json`` and ``report.html`` say so."""
    out = tmp_path / "out"
    code = main(["verify", str(VERIFY / f"{name}.yaml"), "--out", str(out)])
    report = json.loads((out / "verify.json").read_text())
    differing = [r for r in report["results"] if not r["identical"]]
    assert code == 0, json.dumps(differing, indent=1)[:4000]
    assert report["failure"] is None
    assert report["steps"] == report["identical_steps"] == len(report["results"]) > 1
    assert "identical" in capsys.readouterr().out
    assert (out / "report.html").exists()
