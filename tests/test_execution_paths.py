"""The two execution paths give the same outputs: random scenarios of every event type, failover
included, on small clusters, played with ``execution.driver_rows`` 0 (every event in Spark) and
unbounded (every event with a driver path on the driver); ``final_state.json`` byte for byte,
every ``events.jsonl`` field but the timings, and the state-change log must be equal.

Each example plays a scenario twice (tens of seconds): few run in CI, and
``bench/equivalence.py`` runs the same comparison for as long as asked."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, note, settings
from pyspark.sql import SparkSession

from tests.random_scenarios import compare, scenarios

EXAMPLES = int(os.environ.get("KCE_INVARIANT_EXAMPLES", "3")) // 3 or 1
pytestmark = pytest.mark.both_paths


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
)
@given(scenarios())
def test_random_scenarios_give_the_same_outputs_on_both_paths(
    spark: SparkSession, data: dict[str, Any]
) -> None:
    note(f"events: {data['events']}")
    with tempfile.TemporaryDirectory() as out:
        problems = compare(spark, data, Path(out))
    assert not problems, "\n".join(problems)


def test_every_handler_gives_the_same_outputs_on_both_paths(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The scenario with one event of every handler family, both ways."""
    import yaml

    path = Path(__file__).resolve().parent.parent / "configs/scenarios/every-handler.yaml"
    problems = compare(spark, yaml.safe_load(path.read_text()), tmp_path)
    assert not problems, "\n".join(problems)


def test_named_events_on_a_larger_table_take_the_driver_path_with_their_rows(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A table larger than ``driver_rows``: events naming few rows (ElectLeaders of listed
    partitions, AlterIsr, topic creation, partition addition) fetch those rows, run on the
    driver and join the delta; broad ones run in Spark. The outputs equal the Spark path's."""
    data = {
        "name": "named",
        "config": {"auto.leader.rebalance.enable": False},
        "emulation": {"catch_up_ms": 1000},
        "cluster": {
            "brokers": [{"id": b, "rack": "abc"[b % 3]} for b in (1, 2, 3, 4)],
            "topics": [{"name": "big", "partitions": 24, "replication_factor": 3}],
            "controller": 1,
        },
        "events": [
            {"at": "1s", "type": "isr_change", "topic": "big", "partition": 0, "isr": [1]},
            {"at": "2s", "type": "broker_failure", "brokers": [2]},
            {"at": "3s", "type": "broker_startup", "brokers": [2]},
            {"at": "6s", "type": "elect_leaders", "via": "api", "election_type": "preferred",
             "partitions": [{"topic": "big", "partition": p} for p in range(4)]},
            {"at": "7s", "type": "create_topic",
             "topic": {"name": "small", "partitions": 2, "replication_factor": 2}},
            {"at": "8s", "type": "add_partitions", "topic": "small", "total": 3},
            {"at": "9s", "type": "create_topic",
             "topic": {"name": "wide", "partitions": 1, "replication_factor": 4}},
        ],
        "until": "20s",
    }  # fmt: skip
    problems = compare(spark, data, tmp_path, driver_rows=8)
    assert not problems, "\n".join(problems)
    lines = (tmp_path / "driver" / "events.jsonl").read_text().splitlines()
    where: dict[str, set[str]] = {}
    for line in lines:
        event = json.loads(line)
        where.setdefault(event["type"], set()).add(event["execution"])
    # The AlterIsr of one partition's ISR change; the catch-up of all of broker 2's is broad.
    assert where["AlterIsrReceived"] == {"driver", "spark"}
    assert where["ReplicaLeaderElection"] == {"driver"}
    assert where["TopicChange"] == {"driver"}
    assert where["PartitionModifications"] >= {"driver"}
    assert where["BrokerChange"] == {"spark"}


def test_broker_events_of_few_replicas_on_a_larger_table_take_the_driver_path(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A broker failure, its return and a controlled shutdown on a table larger than
    ``driver_rows``, each touching fewer rows (sized by the per-broker counts), run on the
    driver with the rows they may touch; the outputs equal the Spark path's."""
    data = {
        "name": "brokers",
        "config": {"auto.leader.rebalance.enable": False},
        "emulation": {"catch_up_ms": 1000},
        "cluster": {
            "brokers": [{"id": b, "rack": "abc"[b % 3]} for b in range(1, 11)],
            "topics": [{"name": "big", "partitions": 40, "replication_factor": 2}],
            "controller": 1,
        },
        "events": [
            {"at": "1s", "type": "broker_failure", "brokers": [3]},
            {"at": "5s", "type": "broker_startup", "brokers": [3]},
            {"at": "9s", "type": "controlled_shutdown", "broker": 4},
            {"at": "12s", "type": "broker_startup", "brokers": [4]},
        ],
        "until": "20s",
    }
    problems = compare(spark, data, tmp_path, driver_rows=14)
    assert not problems, "\n".join(problems)
    lines = (tmp_path / "driver" / "events.jsonl").read_text().splitlines()
    ran = [(e["type"], e["execution"]) for e in map(json.loads, lines) if e["commits"]]
    assert ("BrokerChange", "driver") in ran
    assert ("ControlledShutdown", "driver") in ran
