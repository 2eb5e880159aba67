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

import contextlib
import itertools
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from kazoo.exceptions import (
    ConnectionClosedError,
    NodeExistsError,
    NoNodeError,
    SessionExpiredError,
)
from kazoo.protocol.states import EventType, KazooState, KeeperState, WatchedEvent, ZnodeStat
from pyspark.sql import DataFrame

from controller.zk.errors import ControllerMovedError
from controller.zk.memory_partitions import PartitionRegion, parse
from controller.zk.memory_transaction import InMemoryTransaction
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

WatchFn = Callable[[WatchedEvent], Any]
_EVENT_TYPES = {
    CREATED: EventType.CREATED,
    DELETED: EventType.DELETED,
    CHANGED: EventType.CHANGED,
    CHILD: EventType.CHILD,
}
_session_ids = itertools.count(0x1_0000_0000)


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
    def bulk_write_states(self, updates: DataFrame, expected_epoch_zk_version: int) -> DataFrame:
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
            outcome = self.partitions.bulk_write(updates, zxid, now, topics, watched)
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

    def read_states(self) -> DataFrame | None:
        with self.lock:
            return self.partitions.states()


class InMemoryClient:
    """A kazoo-shaped client of an ``InMemoryZooKeeper``; see the module docstring."""

    def __init__(self, store: InMemoryZooKeeper) -> None:
        self.store = store
        self.session_id: int | None = None
        self._password = b""
        self.client_state: str = KeeperState.CLOSED
        self.state: str = KazooState.LOST
        self.state_listeners: dict[Callable[[str], Any], None] = {}
        self._data_watchers: dict[str, dict[WatchFn, None]] = {}
        self._child_watchers: dict[str, dict[WatchFn, None]] = {}

    # -- lifecycle --------------------------------------------------------------------------
    def start(self, timeout: float = 15) -> None:
        with self.store.lock:
            if self.client_state != KeeperState.CONNECTED:
                if self not in self.store._clients:
                    self.store._clients.append(self)
                self._open_session()

    def stop(self) -> None:
        with self.store.lock:
            if self.session_id is not None:
                session = self.session_id
                self._lose(KeeperState.CLOSED)
                self.store.close_session(session)
            self.client_state = KeeperState.CLOSED

    def close(self) -> None:
        self.store.forget(self)

    def restart(self) -> None:
        self.stop()
        self.start()

    @property
    def connected(self) -> bool:
        return self.client_state == KeeperState.CONNECTED

    @property
    def client_id(self) -> tuple[int, bytes] | None:
        return None if self.session_id is None else (self.session_id, self._password)

    def add_listener(self, listener: Callable[[str], Any]) -> None:
        self.state_listeners[listener] = None

    def remove_listener(self, listener: Callable[[str], Any]) -> None:
        self.state_listeners.pop(listener, None)

    def _open_session(self) -> None:
        self.session_id = next(_session_ids)
        self._password = os.urandom(16)
        self.client_state = KeeperState.CONNECTED
        self._change_state(KazooState.CONNECTED)

    def _suspend(self) -> None:
        self.client_state = KeeperState.CONNECTING
        self._change_state(KazooState.SUSPENDED)
        self._flush_watches(KeeperState.CONNECTING)

    def _lose(self, keeper_state: str) -> None:
        """Session gone: tell listeners, then flush this client's watches with a NONE event."""
        self.session_id = None
        self.client_state = keeper_state
        self._change_state(KazooState.LOST)
        self._flush_watches(keeper_state)

    def _flush_watches(self, keeper_state: str) -> None:
        event = WatchedEvent(EventType.NONE, keeper_state, None)
        watchers = [*self._child_watchers.values(), *self._data_watchers.values()]
        self._child_watchers, self._data_watchers = {}, {}
        for fns in watchers:
            for fn in fns:
                self.store.dispatcher.submit(fn, event)

    def _change_state(self, state: str) -> None:
        if state == self.state:
            return
        self.state = state
        for listener in list(self.state_listeners):
            self.store.dispatcher.submit(self._call_listener, listener, state)

    def _call_listener(self, listener: Callable[[str], Any], state: str) -> None:
        if listener(state) is True:
            self.remove_listener(listener)

    def _live(self) -> int:
        if self.client_state == KeeperState.EXPIRED_SESSION:
            raise SessionExpiredError()
        if self.session_id is None:
            raise ConnectionClosedError("Connection has been closed")
        return self.session_id

    # -- reads ------------------------------------------------------------------------------
    def _watch(self, table: dict[str, dict[WatchFn, None]], path: str, fn: WatchFn | None) -> None:
        if fn is not None:
            table.setdefault(path, {})[fn] = None

    def exists(self, path: str, watch: WatchFn | None = None) -> ZnodeStat | None:
        with self.store.lock:
            self._live()
            stat = self.store.tree.stat(path)
            self._watch(self._data_watchers, path, watch)
            return stat

    def get(self, path: str, watch: WatchFn | None = None) -> tuple[bytes, ZnodeStat]:
        with self.store.lock:
            self._live()
            node = self.store.tree.lookup(path)
            if node is None:
                raise NoNodeError(path)
            self._watch(self._data_watchers, path, watch)
            return node.data, node.stat(self.store.tree.extra_children(path))

    def get_children(
        self, path: str, watch: WatchFn | None = None, include_data: bool = False
    ) -> list[str] | tuple[list[str], ZnodeStat]:
        with self.store.lock:
            self._live()
            children = self.store.tree.children(path)
            self._watch(self._child_watchers, path, watch)
            if include_data:
                stat = self.store.tree.stat(path)
                assert stat is not None
                return children, stat
            return children

    def sync(self, path: str) -> str:
        return path

    # -- writes -----------------------------------------------------------------------------
    def create(
        self,
        path: str,
        value: bytes = b"",
        acl: Any = None,
        ephemeral: bool = False,
        sequence: bool = False,
        makepath: bool = False,
        include_data: bool = False,
    ) -> str | tuple[str, ZnodeStat]:
        if not isinstance(value, bytes):
            raise TypeError("Invalid type for 'value' (must be a byte string)")
        with self.store.lock:
            owner = self._live() if ephemeral else 0
            self._live()
            if makepath:
                parent = path.rsplit("/", 1)[0]
                if parent and self.store.tree.lookup(parent) is None:
                    self.ensure_path(parent)
            created = self.store.run(lambda st: st.create(path, value, owner, sequence))
            if include_data:
                stat = self.store.tree.stat(created)
                assert stat is not None
                return created, stat
            return created

    def ensure_path(self, path: str, acl: Any = None) -> bool:
        with self.store.lock:
            self._live()
            prefix = ""
            for part in path.strip("/").split("/"):
                prefix = f"{prefix}/{part}"
                if self.store.tree.lookup(prefix) is None:
                    with contextlib.suppress(NodeExistsError):
                        self.store.run(lambda st, p=prefix: st.create(p, b""))
            return True

    def set(self, path: str, value: bytes, version: int = -1) -> ZnodeStat:
        if not isinstance(value, bytes):
            raise TypeError("Invalid type for 'value' (must be a byte string)")
        with self.store.lock:
            self._live()
            return self.store.run(lambda st: st.set(path, value, version))

    def delete(self, path: str, version: int = -1, recursive: bool = False) -> bool:
        with self.store.lock:
            self._live()
            if recursive:
                return self._delete_recursive(path)
            self.store.run(lambda st: st.delete(path, version))
            return True

    def _delete_recursive(self, path: str) -> bool:
        tree = self.store.tree
        if tree.lookup(path) is None:
            return True
        # Partition znodes of whole topics go in one DataFrame step, not one op per znode.
        for node_path in sorted(tree.nodes):
            if (node_path == path or node_path.startswith(f"{path}/")) and node_path.endswith(
                "/partitions"
            ):
                topic = node_path.split("/")[3] if node_path.count("/") == 4 else None
                if topic is not None and node_path == f"{BROKER_TOPICS}/{topic}/partitions":
                    self._drop_partition_nodes(topic)
        order: list[str] = []
        stack = [path]
        while stack:
            current = stack.pop()
            order.append(current)
            stack += [f"{current.rstrip('/')}/{c}" for c in tree.children(current)]
        for node_path in reversed(order):
            self.store.run(lambda st, p=node_path: st.delete(p))
        return True

    def _drop_partition_nodes(self, topic: str) -> None:
        prefix = f"{BROKER_TOPICS}/{topic}/partitions/"
        watched = [
            p
            for c in self.store._clients
            for p in [*c._data_watchers, *c._child_watchers]
            if p.startswith(prefix) and self.store.tree.lookup(p) is not None
        ]
        self.store.partitions.drop_topic(topic)
        self.store.fire([(DELETED, p) for p in sorted(set(watched), reverse=True)])

    def transaction(self) -> InMemoryTransaction:
        return InMemoryTransaction(self)
