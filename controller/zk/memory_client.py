"""The client side of the in-memory ZooKeeper: kazoo's ``KazooClient`` surface over a shared
``InMemoryZooKeeper`` (see ``controller.zk.memory`` for the state transitions)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from kazoo.exceptions import (
    ConnectionClosedError,
    NodeExistsError,
    NoNodeError,
    SessionExpiredError,
)
from kazoo.protocol.states import EventType, KazooState, KeeperState, WatchedEvent, ZnodeStat

from controller.zk.memory_server import BulkTransaction, Server
from controller.zk.memory_transaction import InMemoryTransaction
from controller.zk.memory_tree import DELETED
from controller.zk.memory_watches import Watches, WatchFn

T = TypeVar("T")


class InMemoryClient:
    """A kazoo-shaped client of an ``InMemoryZooKeeper``; see the module docstring."""

    def __init__(self, store: Server) -> None:
        self.store = store
        self.session_id: int | None = None
        self._password = b""
        self.client_state: str = KeeperState.CLOSED
        self.state: str = KazooState.LOST
        self.state_listeners: dict[Callable[[str], Any], None] = {}
        self.watches = Watches()

    # -- lifecycle --------------------------------------------------------------------------
    def start(self, timeout: float = 15) -> None:
        with self.store.lock:
            if self.client_state != KeeperState.CONNECTED:
                self.store.attach(self)
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

    def expire(self, reconnect: bool) -> None:
        """The server expired this client's session (``InMemoryZooKeeper.expire_session``)."""
        assert self.session_id is not None
        session = self.session_id
        # kazoo first sees the server drop the connection (SUSPENDED; its watches get a
        # NONE/CONNECTING event), then learns the session expired (LOST).
        self._suspend()
        self._lose(KeeperState.EXPIRED_SESSION)
        self.store.close_session(session)
        if reconnect:
            self._open_session()

    def _open_session(self) -> None:
        self.session_id = self.store.new_session_id()
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
        for fn in self.watches.clear():
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
            self.store.reads += 1
            stat = self.store.tree.stat(path)
            self._watch(self.watches.data, path, watch)
            return stat

    def get(self, path: str, watch: WatchFn | None = None) -> tuple[bytes, ZnodeStat]:
        with self.store.lock:
            self._live()
            self.store.reads += 1
            node = self.store.tree.lookup(path)
            if node is None:
                raise NoNodeError(path)
            self._watch(self.watches.data, path, watch)
            return node.data, node.stat(self.store.tree.extra_children(path))

    def get_children(
        self, path: str, watch: WatchFn | None = None, include_data: bool = False
    ) -> list[str] | tuple[list[str], ZnodeStat]:
        with self.store.lock:
            self._live()
            self.store.reads += 1
            children = self.store.tree.children(path)
            self._watch(self.watches.child, path, watch)
            if include_data:
                stat = self.store.tree.stat(path)
                assert stat is not None
                return children, stat
            return children

    def get_many(self, paths: Iterable[str]) -> Iterator[tuple[str, Any]]:
        """``(path, (data, stat))`` per path, or ``(path, NoNodeError)`` where it is missing."""
        for path in paths:
            try:
                yield path, self.get(path)
            except NoNodeError as exc:
                yield path, exc

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
        # A region's nodes below a tree node go in one bulk step, not one op per znode.
        region = self.store.region
        if region is not None:
            for node_path in sorted(tree.nodes):
                within = node_path == path or node_path.startswith(f"{path}/")
                if within and region.child_count(node_path):
                    self._drop_region_children(node_path)
        order: list[str] = []
        stack = [path]
        while stack:
            current = stack.pop()
            order.append(current)
            stack += [f"{current.rstrip('/')}/{c}" for c in tree.children(current)]
        for node_path in reversed(order):
            self.store.run(lambda st, p=node_path: st.delete(p))
        return True

    def _drop_region_children(self, path: str) -> None:
        assert self.store.region is not None
        prefix = f"{path}/"
        watched = [
            p
            for session in self.store.sessions
            for p in session.watches.paths()
            if p.startswith(prefix) and self.store.tree.lookup(p) is not None
        ]
        self.store.region.drop_children(path)
        self.store.fire([(DELETED, p) for p in sorted(set(watched), reverse=True)])

    def transaction(self) -> InMemoryTransaction:
        return InMemoryTransaction(self.store, self._live)

    def bulk(self, op: Callable[[BulkTransaction], T]) -> T:
        """Run ``op`` on the store's bulk hook (``Server.bulk``) in this client's session."""
        with self.store.lock:
            self._live()
            return self.store.bulk(op)
