"""The controller's own ZooKeeper operations, named after Kafka's ``KafkaZkClient``.

Broker registration (a multi of create-ephemeral + setData so the czxid is the broker epoch),
the controller election multi (spec §3.2), and reading live brokers with their epochs.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from controller.zk.errors import ControllerMovedError
from controller.zk.fencing import Delete, FencedWriter
from controller.zk.models import BrokerRegistration
from controller.zk.paths import (
    BROKER_IDS,
    PERSISTENT_PATHS,
    BrokerIdZNode,
    ControllerEpochZNode,
    ControllerZNode,
    DeleteTopicZNode,
    TopicConfigZNode,
    TopicPartitionsZNode,
    TopicZNode,
)
from controller.zk.protocol import WatchFn, ZkClient


@dataclass(frozen=True)
class RegisteredBroker:
    id: int
    rack: str | None
    epoch: int  # czxid of /brokers/ids/<id>


def create_persistent_paths(client: ZkClient) -> None:
    """What every broker creates at startup (spec §3.1 step 1)."""
    for path in PERSISTENT_PATHS:
        client.ensure_path(path)


def registration(broker_id: int, rack: str | None, now_ms: int) -> BrokerRegistration:
    host = f"broker-{broker_id}.kce"
    return BrokerRegistration(
        version=5,
        host=host,
        port=9092,
        timestamp=str(now_ms),
        endpoints=[f"PLAINTEXT://{host}:9092"],
        listener_security_protocol_map={"PLAINTEXT": "PLAINTEXT"},
        rack=rack,
        features={},
    )


def register_broker(client: ZkClient, broker_id: int, rack: str | None, now_ms: int) -> int:
    """Create ``/brokers/ids/<id>`` (ephemeral) as Kafka does; returns the broker epoch (czxid)."""
    path = BrokerIdZNode.path(broker_id)
    txn = client.transaction()
    txn.create(path, b"", ephemeral=True)
    txn.set_data(path, BrokerIdZNode.encode(registration(broker_id, rack, now_ms)), 0)
    results = txn.commit()
    for r in results:
        if isinstance(r, Exception):
            raise r
    return client.exists(path).czxid  # type: ignore[union-attr]


def get_all_brokers(client: ZkClient, watch: WatchFn | None = None) -> dict[int, RegisteredBroker]:
    """Registered brokers with their epochs; a child watch may be set on ``/brokers/ids``."""
    brokers = {}
    for child in client.get_children(BROKER_IDS, watch=watch):
        path = f"{BROKER_IDS}/{child}"
        try:
            data, stat = client.get(path)
        except NoNodeError:  # vanished between the listing and the read
            continue
        reg = BrokerIdZNode.decode(data, path)
        brokers[int(child)] = RegisteredBroker(int(child), reg.rack, stat.czxid)
    return brokers


def get_controller_id(client: ZkClient, watch: WatchFn | None = None) -> int:
    """``/controller``'s broker id, or -1; an exists watch is (re)registered either way."""
    stat = client.exists(ControllerZNode.path(), watch=watch)
    if stat is None:
        return -1
    try:
        data, _ = client.get(ControllerZNode.path())
    except NoNodeError:
        return -1
    return ControllerZNode.decode(data).brokerid


def register_controller_and_increment_controller_epoch(
    client: ZkClient, broker_id: int, now_ms: int | None = None
) -> tuple[int, int]:
    """Spec §3.2: (new epoch, its zk version); raises ``ControllerMovedError`` if another won."""
    epoch_path = ControllerEpochZNode.path()
    try:
        data, stat = client.get(epoch_path)
        current, version = ControllerEpochZNode.decode(data), stat.version
    except NoNodeError:
        try:
            client.create(epoch_path, ControllerEpochZNode.encode(0))
            current, version = 0, 0
        except NodeExistsError:
            data, stat = client.get(epoch_path)
            current, version = ControllerEpochZNode.decode(data), stat.version
    stamp = now_ms if now_ms is not None else int(time.time() * 1000)
    txn = client.transaction()
    txn.create(ControllerZNode.path(), ControllerZNode.encode(broker_id, stamp), ephemeral=True)
    txn.set_data(epoch_path, ControllerEpochZNode.encode(current + 1), version)
    results = txn.commit()
    failure = next((r for r in results if isinstance(r, Exception)), None)
    if failure is None:
        new_stat = client.exists(epoch_path)
        assert new_stat is not None
        return current + 1, new_stat.version
    if isinstance(failure, NodeExistsError | BadVersionError):
        # Our earlier attempt may have won across a connection loss: check before giving up.
        if get_controller_id(client) == broker_id:
            data, stat = client.get(epoch_path)
            if ControllerEpochZNode.decode(data) == current + 1:
                return current + 1, stat.version
        raise ControllerMovedError(f"broker {broker_id} lost the controller election")
    raise failure


def fenced_delete(
    client: ZkClient, paths: Iterable[str], epoch_zk_version: int, max_ops: int = 1000
) -> int:
    """Delete ``paths`` (children before parents, as given) in fenced multis; returns how many.

    Paths that no longer exist are skipped; a deposed controller gets ``ControllerMovedError``.
    """
    writer = FencedWriter(client, epoch_zk_version)
    present = [p for p in paths if client.exists(p) is not None]
    for i in range(0, len(present), max_ops):
        writer.multi([Delete(p) for p in present[i : i + max_ops]])
    return len(present)


def topic_znode_paths(client: ZkClient, topic: str) -> list[str]:
    """Every znode of ``topic`` (``deleteTopicZNode`` + configs + deletion request), bottom-up."""
    partitions = TopicPartitionsZNode.path(topic)
    paths: list[str] = []
    if client.exists(partitions) is not None:
        for p in client.get_children(partitions):
            node = f"{partitions}/{p}"
            paths += [f"{node}/{c}" for c in client.get_children(node)] + [node]
        paths.append(partitions)
    return [
        *paths,
        TopicZNode.path(topic),
        TopicConfigZNode.path(topic),
        DeleteTopicZNode.path(topic),
    ]
