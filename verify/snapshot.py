"""Both ZooKeeper trees (the real cluster's and the emulator's) in one normalised form, and
their differences.

A snapshot is a flat map from a key (a znode path, ``#field`` for one field of its JSON) to a
JSON value, holding what the controller decides: every partition's leader, ISR, leader epoch and
controller epoch; every topic's assignment with its adding and removing replicas; topic ids;
``/controller_epoch``; the live brokers; the pending admin requests; the topics marked for
deletion. Topic ids are random UUIDs in Kafka, so a snapshot holds how a topic's id relates to
the previous snapshot's (``new``, ``kept``, ``changed``), not the id itself. Kafka's internal
topics (``__consumer_offsets``...) are created by brokers on a client's first use, not by the
controller, and are left out.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from kazoo.exceptions import NoNodeError

Snapshot = dict[str, Any]
PENDING_ADMIN = ("/admin/reassign_partitions", "/admin/preferred_replica_election")
STATE_FIELDS = ("leader", "isr", "leader_epoch", "controller_epoch")
TOPIC_FIELDS = ("partitions", "adding_replicas", "removing_replicas")


class TreeReader(Protocol):
    """What a snapshot reads: kazoo's ``KazooClient`` and the emulator's clients have it."""

    def get(self, path: str) -> tuple[bytes, Any]: ...
    def get_children(self, path: str) -> Any: ...


def _json(zk: TreeReader, path: str) -> Any:
    try:
        data, _ = zk.get(path)
    except NoNodeError:
        return None
    return json.loads(data) if data else None


def _children(zk: TreeReader, path: str) -> list[str]:
    try:
        return sorted(zk.get_children(path))
    except NoNodeError:
        return []


def _by_partition(mapping: Mapping[str, Any] | None) -> dict[str, Any]:
    # Partition ids as sorted decimal strings, the way both trees spell them.
    return {str(p): mapping[p] for p in sorted(mapping or {}, key=int)}


def take(zk: TreeReader, topic_ids: dict[str, str]) -> tuple[Snapshot, dict[str, str]]:
    """The normalised tree, and the topic ids it saw (give them to the next ``take``)."""
    snap: Snapshot = {
        "/controller_epoch": _json(zk, "/controller_epoch"),
        "/brokers/ids": [int(b) for b in sorted(_children(zk, "/brokers/ids"), key=int)],
        "/admin/delete_topics": _children(zk, "/admin/delete_topics"),
    }
    for path in PENDING_ADMIN:
        snap[path] = _json(zk, path)
    ids: dict[str, str] = {}
    for topic in _children(zk, "/brokers/topics"):
        if topic.startswith("__"):
            continue
        path = f"/brokers/topics/{topic}"
        znode = _json(zk, path) or {}
        for name in TOPIC_FIELDS:
            snap[f"{path}#{name}"] = _by_partition(znode.get(name))
        topic_id = znode.get("topic_id")
        if topic_id is not None:
            ids[topic] = topic_id
        before = topic_ids.get(topic)
        snap[f"{path}#topic_id"] = (
            None if topic_id is None
            else "new" if before is None
            else "kept" if before == topic_id
            else "changed"
        )  # fmt: skip
        for p in sorted(_children(zk, f"{path}/partitions"), key=int):
            state = _json(zk, f"{path}/partitions/{p}/state") or {}
            for name in STATE_FIELDS:
                snap[f"{path}/partitions/{p}/state#{name}"] = state.get(name)
    return snap, ids


@dataclass(frozen=True)
class Difference:
    """One key whose value differs; None where a side has no such znode."""

    path: str
    kafka: Any
    kce: Any

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "kafka": self.kafka, "kce": self.kce}


def differences(kafka: Snapshot, kce: Snapshot) -> list[Difference]:
    """Every key where the two snapshots differ, in key order."""
    keys: Iterable[str] = sorted(kafka.keys() | kce.keys())
    return [Difference(k, kafka.get(k), kce.get(k)) for k in keys if kafka.get(k) != kce.get(k)]
