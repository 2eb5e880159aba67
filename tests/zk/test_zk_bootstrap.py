"""Bootstrap a cluster into Kafka's layout and read it back, on both backends."""

from __future__ import annotations

import json

import pytest

from controller.partition_store import bootstrap_cluster, read_cluster
from controller.partition_store.bootstrap import topic_znode_json
from controller.zk.models import BrokerRegistration
from controller.zk.paths import PERSISTENT_PATHS, PartitionStateZNode, TopicZNode
from statemachines.schemas import PARTITIONS_SCHEMA

ROWS = [
    # topic, partition, replicas, adding, removing, isr, leader, leader_epoch, zk_version,
    # controller_epoch, state
    (
        "orders",
        0,
        [4, 5, 6, 1, 2, 3],
        [4, 5, 6],
        [1, 2, 3],
        [1, 2, 3],
        1,
        3,
        0,
        1,
        "OnlinePartition",
    ),
    ("orders", 1, [2, 3, 1], [], [], [2, 3], 2, 0, 0, 1, "OnlinePartition"),
    ("audit", 0, [3, 1], [], [], [3], 3, 5, 0, 1, "OfflinePartition"),
    ("audit", 1, [1, 3], [], [], [], -1, -1, -1, -1, "NewPartition"),
]


def _broker(i: int) -> BrokerRegistration:
    return BrokerRegistration(
        host=f"b{i}",
        port=9092,
        timestamp="1700000000000",
        endpoints=[f"PLAINTEXT://b{i}:9092"],
        listener_security_protocol_map={"PLAINTEXT": "PLAINTEXT"},
        rack=f"r{i % 2}",
    )


@pytest.mark.parametrize("on_driver", [False, True], ids=["spark", "driver"])
def test_bootstrap_writes_kafka_layout_and_read_cluster_restores_it(zk, spark, on_driver) -> None:
    """The same tree whether Spark writes it or the driver does (a small cluster's rows)."""
    client = zk.client()
    partitions = spark.createDataFrame(ROWS, PARTITIONS_SCHEMA)
    brokers = {1: _broker(1), 2: _broker(2)}
    store = zk.state_store(client)
    if on_driver:
        rows = [r.asDict() for r in partitions.collect()]
        assert bootstrap_cluster(client, brokers, partitions, store, rows=rows) is None
    else:
        assert bootstrap_cluster(client, brokers, partitions, store).count() == 0
    spark_json = {r[0]: r[1] for r in topic_znode_json(partitions.coalesce(1)).collect()}
    for topic, payload in spark_json.items():
        assert client.get(TopicZNode.path(topic))[0] == payload.encode()

    for path in PERSISTENT_PATHS:
        assert client.exists(path) is not None
    assert sorted(client.get_children("/brokers/ids")) == ["1", "2"]
    assert client.exists("/brokers/ids/1").ephemeralOwner == client.client_id[0]
    orders = TopicZNode.decode(client.get("/brokers/topics/orders")[0], "/brokers/topics/orders")
    assert orders.version == 3 and orders.partitions == {"0": [4, 5, 6, 1, 2, 3], "1": [2, 3, 1]}
    assert orders.adding_replicas == {"0": [4, 5, 6]} and orders.removing_replicas == {
        "0": [1, 2, 3]
    }
    raw = json.loads(client.get("/brokers/topics/audit")[0])
    assert raw["adding_replicas"] == {} and raw["removing_replicas"] == {}
    state_path = PartitionStateZNode.path("orders", 0)
    assert json.loads(client.get(state_path)[0]) == {
        "controller_epoch": 1, "leader": 1, "version": 1, "leader_epoch": 3, "isr": [1, 2, 3],
    }  # fmt: skip
    assert client.exists(PartitionStateZNode.path("audit", 1)) is None  # NewPartition: no state

    snapshot = read_cluster(client, spark, store)
    assert sorted(snapshot.brokers) == [1, 2] and snapshot.brokers[1].rack == "r1"
    assert (snapshot.controller_id, snapshot.controller_epoch) == (-1, 0)
    got = sorted(tuple(r) for r in snapshot.partitions.collect())
    # Broker 3 is not registered: audit-0 is offline; the rest comes back as written.
    assert got == sorted(tuple(r) for r in ROWS)
    # The topic znodes alone give the partition counts and the widest replica list.
    counts: dict[str, int] = {}
    for row in ROWS:
        counts[row[0]] = counts.get(row[0], 0) + 1
    assert snapshot.topic_partitions == counts
    assert snapshot.width == max(len(row[2]) for row in ROWS) == 6
