"""In-process ZooKeeper with ZooKeeper's semantics and kazoo's client surface.

``InMemoryZooKeeper()`` is the shared store (the "ensemble"); ``.client()`` returns an
``InMemoryClient`` that behaves like a ``kazoo.client.KazooClient`` for the calls the controller
makes, raising kazoo's own exceptions. Many clients (brokers, admin tools, controllers) share one
store from any threads: every op runs under the store's lock, and every callback (watches of all
clients, connection-state listeners) runs on one dispatcher thread in commit order.
``wait_idle()`` returns once all of them have run.

State transitions of a client (``KazooState`` seen by listeners):

* ``start()``: LOST -> CONNECTED on a new session.
* ``stop()``: CONNECTED -> LOST; the session closes (its ephemerals vanish, others' watches fire),
  and the client's own pending watches get a ``NONE`` event with ``KeeperState.CLOSED``.
* ``InMemoryZooKeeper.expire_session(id)``: CONNECTED -> SUSPENDED (its watches get a ``NONE`` /
  ``CONNECTING`` event, as when a real server drops the connection) -> LOST; its ephemerals vanish; then, like kazoo, the client reconnects on a new
  session (LOST -> CONNECTED). With ``reconnect=False`` it stays expired and every call raises
  ``SessionExpiredError`` until ``start()``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import EventType, KeeperState, WatchedEvent
from pyspark.sql import DataFrame

from controller.zk.errors import ControllerMovedError
from controller.zk.memory_client import InMemoryClient, WatchFn
from controller.zk.memory_partitions import PartitionRegion
from controller.zk.memory_rows import parse
from controller.zk.memory_tree import (
    CHANGED,
    CHILD,
    CREATED,
    DELETED,
    Event,
    Staging,
    Znode,
    ZnodeTree,
)
from controller.zk.memory_watches import Dispatcher
from controller.zk.paths import BROKER_TOPICS, CONTROLLER_EPOCH, PartitionStateZNode

_EVENT_TYPES = {
    CREATED: EventType.CREATED,
    DELETED: EventType.DELETED,
    CHANGED: EventType.CHANGED,
    CHILD: EventType.CHILD,
}


def _wall_clock_ms() -> int:
    return int(time.time() * 1000)


class InMemoryZooKeeper:
    """The shared in-memory store. Thread-safe."""

    def __init__(self, clock_ms: Callable[[], int] = _wall_clock_ms) -> None:
        self.lock = threading.RLock()
        self.tree = ZnodeTree(clock_ms)
        self.partitions = PartitionRegion()
        self.tree.region = self.partitions
        self.dispatcher = Dispatcher()
        self._clients: list[InMemoryClient] = []

    def client(self) -> InMemoryClient:
        """A new, not yet started client of this store."""
        client = InMemoryClient(self)
        with self.lock:
            self._clients.append(client)
        return client

    def expire_session(self, session_id: int, reconnect: bool = True) -> None:
        """Expire a session as the server would; the owning client sees LOST (then CONNECTED)."""
        with self.lock:
            owner = next((c for c in self._clients if c.session_id == session_id), None)
            if owner is None:
                raise ValueError(f"no live session {session_id:#x}")
            # kazoo first sees the server drop the connection (SUSPENDED; its watches get a
            # NONE/CONNECTING event), then learns the session expired (LOST).
            owner._suspend()
            owner._lose(KeeperState.EXPIRED_SESSION)
            self.close_session(session_id)
            if reconnect:
                owner._open_session()

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until every watch and listener callback queued so far has run."""
        return self.dispatcher.wait_idle(timeout)

    def close(self) -> None:
        with self.lock:
            for client in list(self._clients):
                client.stop()
            self.partitions.close()
        self.dispatcher.stop()

    # -- used by clients ---------------------------------------------------------------------
    def run(self, op: Callable[[Staging], Any]) -> Any:
        """Run ``op`` as one transaction: commit on success, fire its watches; nothing on error."""
        with self.lock:
            staging = Staging(self.tree)
            result = op(staging)
            self.fire(staging.commit())
            return result

    def close_session(self, session_id: int) -> None:
        with self.lock:
            paths = sorted(self.tree.ephemerals.pop(session_id, ()), reverse=True)
            if paths:
                self.run(lambda st: [st.delete(p) for p in paths])

    def fire(self, events: list[Event]) -> None:
        for kind, path in events:
            event = WatchedEvent(_EVENT_TYPES[kind], KeeperState.CONNECTED, path)
            for client in self._clients:
                fns: list[WatchFn] = []
                if kind != CHILD:
                    fns += client._data_watchers.pop(path, {})
                if kind in (CHILD, DELETED):
                    fns += client._child_watchers.pop(path, {})
                for fn in fns:
                    self.dispatcher.submit(fn, event)

    def forget(self, client: InMemoryClient) -> None:
        with self.lock:
            if client in self._clients:
                self._clients.remove(client)

    # -- bulk partition states (used by controller.zk.partition_store) -----------------------
    def bulk_write_states(
        self, updates: DataFrame, expected_epoch_zk_version: int, rows: int | None = None
    ) -> DataFrame:
        """Fenced bulk merge of partition states; returns the rows that failed (with ``error``)."""
        with self.lock:
            epoch = self.tree.lookup(CONTROLLER_EPOCH)
            if epoch is None:
                raise NoNodeError(CONTROLLER_EPOCH)
            if epoch.version != expected_epoch_zk_version:
                raise ControllerMovedError(expected_epoch_zk_version)
            zxid, now = self.tree.next_zxid(), self.tree.clock_ms()
            topics = self.tree.children(BROKER_TOPICS) if self.tree.lookup(BROKER_TOPICS) else []
            watched = [
                parsed[0]
                for client in self._clients
                for path in [*client._data_watchers, *client._child_watchers]
                if (parsed := parse(path)) is not None
            ]
            outcome = self.partitions.bulk_write(updates, zxid, now, topics, watched, rows)
            events: list[Event] = []
            for (topic, result), n in sorted(outcome.counts.items()):
                if result == "created":
                    events += self._add_partition_children(topic, n, zxid, now)
            for topic, partition, result in outcome.touched:
                state = PartitionStateZNode.path(topic, partition)
                if result == "created":
                    node = state.rsplit("/", 1)[0]
                    events += [(CREATED, node), (CHILD, node), (CREATED, state)]
                else:
                    events.append((CHANGED, state))
            self.fire(events)
            return outcome.failed

    def _add_partition_children(self, topic: str, n: int, zxid: int, now: int) -> list[Event]:
        """Account ``n`` bulk-created partition nodes on ``/brokers/topics/T/partitions``."""
        path = f"{BROKER_TOPICS}/{topic}/partitions"
        events: list[Event] = []
        node = self.tree.nodes.get(path)
        if node is None:
            parent = self.tree.nodes[f"{BROKER_TOPICS}/{topic}"]
            parent.children["partitions"] = None
            parent.cversion += 1
            parent.child_creates += 1
            parent.pzxid = zxid
            node = self.tree.nodes[path] = Znode(b"", zxid, zxid, now, now, pzxid=zxid)
            events += [(CREATED, path), (CHILD, f"{BROKER_TOPICS}/{topic}")]
        node.cversion += n
        node.child_creates += n
        node.pzxid = zxid
        return [*events, (CHILD, path)]

    def prefetch_partitions(self, keys: list[tuple[str, int]]) -> None:
        """Load the partition znodes single ops on ``keys`` will touch in one Spark job: one
        by one, a burst over many topics would read the whole table once per topic."""
        with self.lock:
            self.partitions.prefetch(keys)

    def read_states(self, selection: DataFrame | None = None) -> DataFrame | None:
        with self.lock:
            return self.partitions.states(selection)
