"""The shared side of the in-memory ZooKeeper: the znode tree, its lock, its sessions' watches.

``Server`` is what every client of one store shares (``InMemoryZooKeeper`` adds the making of
clients and session expiry on top). Every op runs under ``lock``; ``run`` applies one
transaction and fires the watches it triggered, in commit order, on the dispatcher thread.

``bulk`` is the hook for a component that writes many region znodes at once (the emulation's
partition-state store): it runs a function under the lock with a ``BulkTransaction``, through
which the function reads znode facts, allocates the zxid, accounts children it created and
records the watch events, fired when the function returns.

``reads`` counts the read requests the store served (exists, getData, getChildren, one per
partition-state znode of a bulk read), as a ZooKeeper server counts them: what the emulated
controller and brokers asked of ZooKeeper, for the scaling sweeps.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol, TypeVar

from kazoo.protocol.states import EventType, KeeperState, WatchedEvent, ZnodeStat

from controller.zk.memory_tree import (
    CHANGED,
    CHILD,
    CREATED,
    DELETED,
    Event,
    Region,
    Staging,
    Znode,
    ZnodeTree,
    split,
)
from controller.zk.memory_watches import Dispatcher, Watches

T = TypeVar("T")

_EVENT_TYPES = {
    CREATED: EventType.CREATED,
    DELETED: EventType.DELETED,
    CHANGED: EventType.CHANGED,
    CHILD: EventType.CHILD,
}


class Session(Protocol):
    """A client of the store as the store sees it: a session id and its pending watches."""

    session_id: int | None
    watches: Watches

    def stop(self) -> None: ...
    def expire(self, reconnect: bool) -> None: ...


class Server:
    """The state the clients of one in-memory store share. Thread-safe."""

    def __init__(self, clock_ms: Callable[[], int], region: Region | None = None) -> None:
        self.lock = threading.RLock()
        self.tree = ZnodeTree(clock_ms)
        self.region = region
        self.tree.region = region
        self.dispatcher = Dispatcher()
        self.sessions: list[Session] = []
        self.reads = 0  # read requests served, by every session (see the module docstring)
        # The server numbers sessions, as ZooKeeper does: ids stay unique within this store
        # however many stores a process runs, and a store saved and loaded keeps numbering on.
        self._next_session_id = 0x1_0000_0000

    def use_clock(self, clock_ms: Callable[[], int]) -> None:
        """Znode times come from ``clock_ms`` from now on."""
        with self.lock:
            self.tree.clock_ms = clock_ms

    def new_session_id(self) -> int:
        with self.lock:
            self._next_session_id += 1
            return self._next_session_id - 1

    def attach(self, session: Session) -> None:
        with self.lock:
            if session not in self.sessions:
                self.sessions.append(session)

    def forget(self, session: Session) -> None:
        with self.lock:
            if session in self.sessions:
                self.sessions.remove(session)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until every watch and listener callback queued so far has run."""
        return self.dispatcher.wait_idle(timeout)

    def close(self) -> None:
        with self.lock:
            for session in list(self.sessions):
                session.stop()
            if self.region is not None:
                self.region.close()
        self.dispatcher.stop()

    def run(self, op: Callable[[Staging], T]) -> T:
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
            for session in self.sessions:
                for fn in session.watches.triggered(kind, path):
                    self.dispatcher.submit(fn, event)

    def bulk(self, op: Callable[[BulkTransaction], T]) -> T:
        """Run ``op`` under the lock; fire the events it recorded once it returns."""
        with self.lock:
            txn = BulkTransaction(self)
            result = op(txn)
            self.fire(txn.events)
            return result


class BulkTransaction:
    """What a bulk writer of region znodes may do to the tree (see the module docstring)."""

    def __init__(self, server: Server) -> None:
        self._server = server
        self._tree = server.tree
        self.events: list[Event] = []

    def stat(self, path: str) -> ZnodeStat | None:
        return self._tree.stat(path)

    def children(self, path: str) -> list[str]:
        return self._tree.children(path)

    def count_reads(self, n: int) -> None:
        """``n`` znodes read in bulk: one getData each, as Kafka reads them."""
        self._server.reads += n

    def next_zxid(self) -> int:
        return self._tree.next_zxid()

    def skip_zxids(self, n: int) -> None:
        """Take ``n`` more zxids, as ``n`` more transactions would (none when ``n`` <= 0)."""
        self._tree.zxid += max(n, 0)

    def now_ms(self) -> int:
        return self._tree.clock_ms()

    def watched_paths(self) -> list[str]:
        """Every path some session watches (data or children)."""
        return [path for session in self._server.sessions for path in session.watches.paths()]

    def record(self, kind: str, path: str) -> None:
        """Queue a watch event (``CREATED``/``DELETED``/``CHANGED``/``CHILD``) on ``path``."""
        self.events.append((kind, path))

    def add_region_children(self, path: str, n: int, zxid: int, now: int) -> None:
        """Account ``n`` region nodes created under ``path`` (a tree node, created with an empty
        payload if missing, as its parent's child) at ``zxid``/``now``; records the events."""
        tree = self._tree
        node = tree.nodes.get(path)
        if node is None:
            parent_path, name = split(path)
            parent = tree.nodes[parent_path]
            parent.children[name] = None
            parent.cversion += 1
            parent.child_creates += 1
            parent.pzxid = zxid
            node = tree.nodes[path] = Znode(b"", zxid, zxid, now, now, pzxid=zxid)
            self.events += [(CREATED, path), (CHILD, parent_path)]
        node.cversion += n
        node.child_creates += n
        node.pzxid = zxid
        self.events.append((CHILD, path))
