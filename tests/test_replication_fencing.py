"""A follower rejoins the ISR only through fetches its leader accepts (Kafka 2.8).

* ``ReplicaStateMachine`` (spec §6.3): OfflineReplica and the deletion states send the replica
  StopReplica, and ``ReplicaManager.stopReplicas`` removes its fetcher: it copies nothing more
  until a LeaderAndIsr makes it a follower again.
* ``ControllerChannelManager.sendRequest``: the controller sends nothing to a broker that is not
  in its live set (its registration is gone until it registers again).
* KIP-320, ``Partition.checkCurrentLeaderEpoch``: a fetch that carries an older leader epoch
  is refused with ``FENCED_LEADER_EPOCH``; ``AbstractFetcherThread.onPartitionFenced`` drops the
  partition until the next LeaderAndIsr. So only ``Partition.maybeExpandIsr`` on an accepted
  fetch adds a follower back, and a replica fenced this way never is.

Each rule is checked on the rows (the driver path) and on the Spark transforms, and end to end
through ``kce run`` on small scenarios, on the driver and with the tables in Spark.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from spark_app.runner import run
from spark_app.scenario import scenario_from_data
from statemachines import isr_expiration as ie
from statemachines import isr_expiration_rows as ier
from statemachines import leader_and_isr as lai
from statemachines import leader_and_isr_rows as lair
from statemachines import replication as r
from tests.test_replication_table import (
    _conditions,
    _decided_columns,
    _decided_schema,
    _frame,
    _row,
    _schema,
    _slot,
)

RULE = ie.IsrRule(lag_ms=10_000)


def _out_of_isr(known: int) -> dict[str, Any]:
    """Leader 1 of epoch 3 at 100 alone in the ISR; follower 2 at the same end, holding epoch
    ``known``: it would rejoin at once on an accepted fetch (§12.3)."""
    epochs = [(3, 0)]
    return _row(
        [1, 2],
        [1],
        1,
        [_slot(100, 100, epochs), _slot(100, 100, epochs, known=known)],
        leader_epoch=3,
    )


def _joins_on_both_paths(spark: SparkSession, row: dict[str, Any]) -> tuple[bool, bool]:
    c = _conditions()
    driver = ier.isr_updates([row], c, RULE, frozenset(), 20_000)
    on_spark = ie.isr_updates(_frame(spark, [row], _schema(2)), c, RULE, frozenset(), 20_000)
    return bool(driver), bool(on_spark.collect())


@pytest.mark.parametrize(
    ("known", "joins"),
    [(3, True), (r.STOPPED, False), (2, False)],
    ids=["current-epoch", "stopped-by-stop-replica", "fenced-older-epoch"],
)
def test_only_a_fetch_with_the_leaders_epoch_lets_a_follower_rejoin(
    spark: SparkSession, known: int, joins: bool
) -> None:
    assert _joins_on_both_paths(spark, _out_of_isr(known)) == (joins, joins)


def _receive_both(
    spark: SparkSession, row: dict[str, Any], sent: list[int | None], restarted: frozenset[int]
) -> tuple[list[int], list[int]]:
    """``known_epoch`` of both positions after the brokers receive leader 1's epoch 4 with
    ``sent`` per position, on the rows and in Spark."""
    decided = {k: row.get(k) for k in _decided_columns(2)}
    decided.update({"leader_epoch": 4, "zk_version": 1})
    decided.update({lai.sent_epoch_col(k): sent[k] for k in range(2)})
    [driver] = lair.receive([row], [decided], restarted, True, 30_000)
    [got] = lai.receive(
        _frame(spark, [row], _schema(2)),
        _frame(spark, [decided], _decided_schema(2)),
        restarted,
        True,
        30_000,
    ).collect()
    cols = [r.known_epoch_col(k) for k in range(2)]
    return [driver[c] for c in cols], [got[c] for c in cols]


def test_a_replica_keeps_the_epoch_it_was_sent_and_nothing_else(spark: SparkSession) -> None:
    row = _out_of_isr(3)
    # LeaderAndIsr of epoch 4 to both: both hold it.
    assert _receive_both(spark, row, [4, 4], frozenset()) == ([4, 4], [4, 4])
    # StopReplica to 2 (controlled shutdown, deletion, reassignment away): stopped.
    assert _receive_both(spark, row, [4, r.STOPPED], frozenset()) == ([4, -1], [4, -1])
    # Nothing reaches 2 (unregistered): it keeps epoch 3, which leader 1 now fences.
    assert _receive_both(spark, row, [4, None], frozenset()) == ([4, 3], [4, 3])
    # A restarted broker that nothing reached knows no epoch at all.
    assert _receive_both(spark, row, [4, None], frozenset({2})) == ([4, -1], [4, -1])


# -- end to end ------------------------------------------------------------------------------


def _play(spark: SparkSession, data: dict[str, Any], out: Path) -> tuple[dict[str, Any], ...]:
    summary = run(spark, scenario_from_data(data), out)
    (p,) = json.loads((out / "final_state.json").read_text())["partitions"]
    events = [json.loads(x) for x in (out / "events.jsonl").read_text().splitlines()]
    return summary, p, {"events": events}


def _scenario(events: list[dict[str, Any]], driver_rows: int) -> dict[str, Any]:
    return {
        "name": "fencing",
        "kafka_version": "2.8",
        "config": {"auto.leader.rebalance.enable": False},
        "cluster": {
            "brokers": [{"id": 1}, {"id": 2}, {"id": 3}],
            "topics": [
                {
                    "name": "orders",
                    "partitions": 1,
                    "replication_factor": 3,
                    "assignment": {"0": [1, 2, 3]},
                }
            ],
            "controller": 1,
        },
        "events": [
            {"at": "0s", "type": "set_produce_rate", "topic": "orders", "records_per_s": 100},
            *events,
        ],
        "until": "60s",
        "execution": {"driver_rows": driver_rows},
    }


def _times(events: list[dict[str, Any]], kind: str) -> list[int]:
    return sorted({e["virtual_time_ms"] for e in events if e.get("type") == kind})


@pytest.mark.parametrize("driver_rows", [10_000, 0], ids=["driver", "spark"])
def test_a_follower_in_controlled_shutdown_is_not_added_back(
    spark: SparkSession, tmp_path: Path, driver_rows: int
) -> None:
    """§8.4 step 7: follower 3 gets StopReplica and leaves the ISR (epoch 1); its fetcher is
    gone, so leader 1 never adds it back before it deregisters. Then nothing more is written:
    it is no longer in the ISR when its registration goes."""
    events = [{"at": "10s", "type": "controlled_shutdown", "broker": 3}]
    summary, p, seen = _play(spark, _scenario(events, driver_rows), tmp_path)
    assert summary["isr_expands"] == 0
    assert _times(seen["events"], "AlterIsrReceived") == []
    assert (p["isr"], p["leader"], p["leader_epoch"], p["zk_version"]) == ([1, 2], 1, 1, 1)


@pytest.mark.parametrize("driver_rows", [10_000, 0], ids=["driver", "spark"])
def test_an_unregistered_broker_is_fenced_until_it_registers_again(
    spark: SparkSession, tmp_path: Path, driver_rows: int
) -> None:
    """Broker 3 loses ZooKeeper at 10 s and its session expires at 28 s: the controller drops
    it from the ISR (epoch 1) and sends it nothing. Its fetches carry epoch 0 and leader 1
    fences them (KIP-320) until it registers again at 40 s and is sent epoch 1; it then copies
    the 1,200 records it missed, a few ms, and rejoins."""
    events = [
        {"at": "10s", "type": "network_partition", "brokers": [3], "from": "zookeeper",
         "duration": "30s"},
    ]  # fmt: skip
    summary, p, seen = _play(spark, _scenario(events, driver_rows), tmp_path)
    assert _times(seen["events"], "BrokerChange") == [28_000, 40_000]
    [rejoined] = _times(seen["events"], "AlterIsrReceived")
    assert 40_000 < rejoined < 40_100
    assert summary["isr_expands"] == 1
    assert (p["isr"], p["leader_epoch"], p["zk_version"]) == ([1, 2, 3], 1, 2)
