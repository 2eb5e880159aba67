"""A ZooKeeper ensemble the emulated brokers connect to: sessions, expiry, a delivery barrier.

``EmulatedCluster`` needs four things of "the ZooKeeper" beyond one client's surface: open a
session per broker, expire one as the server would, wait until every triggered watch has run, and
close everything. ``Ensemble`` is that surface; ``MemoryEnsemble`` wraps an ``InMemoryZooKeeper``
and ``KazooEnsemble`` opens real kazoo sessions (``KazooZkClient``) to a ZooKeeper server.
(``controller.partition_store.ensembles`` adds each one's bulk partition-state store.)

Session expiry on a real server (``KazooEnsemble.expire_session``):

* ``reconnect=True``: the session is expired for real. A twin ``KazooClient`` attaches to the
  same session id and password (the server drops the original connection) and closes the
  session; the server deletes the ephemerals and fires other sessions' watches before the
  twin's close returns. The original client then sees SUSPENDED -> LOST (``EXPIRED_SESSION``) ->
  CONNECTED on a new session, the same transitions as the in-memory backend, and stays the same
  object, so whoever holds it (a controller) keeps a valid reference.
  kazoo waits >= 0.1 s before reconnecting, so the twin normally wins; if the original re-attaches
  to the old session first (seen as SUSPENDED -> CONNECTED), the twin is sent again.
  ``kazoo.testing``'s expiry only fakes the client side and leaves the server session alive.
* ``reconnect=False`` (a crashed broker): ``stop()``, which sends closeSession and returns after
  the server's reply. The server-side effects are those of an expiry (an expiry *is* a
  closeSession issued by the server); the client is CLOSED rather than EXPIRED_SESSION, which
  nobody observes since the process is gone.

The barrier (``KazooEnsemble.wait_idle``): ZooKeeper queues a watch notification on the watcher's
connection when it applies the write, before it answers the writer, and answers a later ``sync``
on the same connection after it; kazoo's connection thread hands a notification to the client's
callback queue before it reads the next reply. So once ``sync`` returns on a session, every
notification for writes completed earlier is in that session's queue, and draining the queue
runs it. A callback may write again, so this repeats until a round in which no callback ran at
all on any session (each client's handler counts finished callbacks). A session whose connection
is lost is waited for first: its notifications, and those of its re-armed watches (the server
sends them before it answers the re-arming), arrive once it is back; a client that stays
disconnected for its connection timeout ends the wait with ``ZooKeeperClientTimeoutError``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol, TypeVar

from kazoo.client import KazooClient
from kazoo.handlers.threading import SequentialThreadingHandler
from kazoo.protocol.states import Callback, KazooState

from controller.zk.kazoo_client import KazooZkClient
from controller.zk.memory import InMemoryZooKeeper
from controller.zk.memory_client import InMemoryClient
from controller.zk.protocol import ZkClient

C = TypeVar("C")


def owned_session(clients: list[C], client: ZkClient) -> C:
    """``client`` as one of ``clients`` (the sessions an ensemble opened), else ValueError."""
    owned = next((c for c in clients if c is client), None)
    if owned is None:
        raise ValueError("not a session of this ensemble")
    return owned


class Ensemble(Protocol):
    """Where the emulated brokers' ZooKeeper sessions live."""

    def client(self) -> ZkClient:
        """A new, started session."""
        ...

    def expire_session(self, client: ZkClient, reconnect: bool) -> ZkClient:
        """End ``client``'s session as a server-side expiry would (its ephemerals vanish, other
        sessions' watches fire). With ``reconnect`` the returned client is connected on a new
        session id; both implementations return the same object."""
        ...

    def wait_idle(self) -> None:
        """Return once every watch callback triggered by writes made so far has run."""
        ...

    def use_clock(self, clock_ms: Callable[[], int]) -> None:
        """Stamp znode times with ``clock_ms`` from now on (an emulation's virtual clock); a
        real server keeps its own clock."""
        ...

    def close(self) -> None:
        """End every session opened through this ensemble."""
        ...


class MemoryEnsemble:
    """Sessions of an ``InMemoryZooKeeper`` (a new one unless ``store`` is given)."""

    def __init__(self, store: InMemoryZooKeeper | None = None) -> None:
        self._owns_store = store is None
        self.store = store if store is not None else InMemoryZooKeeper()
        self._clients: list[InMemoryClient] = []

    def client(self) -> InMemoryClient:
        client = self.store.client()
        client.start()
        self._clients.append(client)
        return client

    def expire_session(self, client: ZkClient, reconnect: bool) -> InMemoryClient:
        owned = owned_session(self._clients, client)
        if owned.session_id is None:
            raise ValueError("the client has no live session")
        self.store.expire_session(owned.session_id, reconnect=reconnect)
        return owned

    def wait_idle(self) -> None:
        self.store.wait_idle()

    def use_clock(self, clock_ms: Callable[[], int]) -> None:
        self.store.use_clock(clock_ms)

    def close(self) -> None:
        """Stop this ensemble's sessions; a store created here is closed too, a given one not."""
        for client in self._clients:
            client.stop()
            client.close()
        self._clients.clear()
        if self._owns_store:
            self._owns_store = False
            self.store.close()


class _CountingHandler(SequentialThreadingHandler):
    """kazoo's default handler, counting watch callbacks that have returned (for the barrier)."""

    def __init__(self) -> None:
        super().__init__()
        self.finished = 0  # written only by the single callback worker thread

    def dispatch_callback(self, callback: Callback) -> None:
        def run() -> None:
            try:
                callback.func(*callback.args)
            finally:
                self.finished += 1

        self.callback_queue.put(run)

    def wait_drained(self, deadline: float) -> None:
        """Block until every callback queued so far (and any it queues) has returned."""
        q = self.callback_queue
        with q.all_tasks_done:
            while q.unfinished_tasks:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError("ZooKeeper watch callbacks did not finish")
                q.all_tasks_done.wait(remaining)


def split_connect(connect: str) -> tuple[str, str]:
    """Kafka's ``zookeeper.connect`` split into hosts and chroot (``""`` if none)."""
    hosts, slash, chroot = connect.partition("/")
    return hosts, (slash + chroot).rstrip("/")


class KazooEnsemble:
    """Real kazoo sessions to ``connect`` (``host:port[,host:port...][/chroot]``).

    A missing chroot is created on construction, as Kafka does. ``session_timeout`` is kazoo's
    requested session timeout (Kafka's ``zookeeper.session.timeout.ms``); ``connection_timeout``
    (``zookeeper.connection.timeout.ms``) bounds the wait for a session to connect, and each
    client's wait for a lost connection (``wait_timeout`` and the session timeout if None);
    ``wait_timeout`` bounds every other wait (expiry, barrier).
    ``wait_idle`` must not be called from a watch callback (it would wait for itself).
    """

    def __init__(
        self,
        connect: str,
        session_timeout: float = 10.0,
        wait_timeout: float = 30.0,
        connection_timeout: float | None = None,
    ) -> None:
        self.connect = connect
        self.hosts, self.chroot = split_connect(connect)
        self.session_timeout = session_timeout
        self.connection_timeout = connection_timeout
        self.wait_timeout = wait_timeout
        self._start_timeout = wait_timeout if connection_timeout is None else connection_timeout
        self._lock = threading.Lock()
        self._clients: list[KazooZkClient] = []
        if self.chroot:
            self._ensure_chroot()

    def _ensure_chroot(self) -> None:
        root = KazooClient(hosts=self.hosts, timeout=self.session_timeout)
        root.start(timeout=self._start_timeout)
        try:
            root.ensure_path(self.chroot)
        finally:
            root.stop()
            root.close()

    def client(self) -> KazooZkClient:
        client = KazooZkClient(
            self.connect, self.session_timeout, self.connection_timeout, handler=_CountingHandler()
        )
        client.start(timeout=self._start_timeout)
        with self._lock:
            self._clients.append(client)
        return client

    def expire_session(self, client: ZkClient, reconnect: bool) -> KazooZkClient:
        with self._lock:
            client = owned_session(self._clients, client)
        old = client.client_id
        if old is None or not client.connected:
            raise ValueError("the client has no live session")
        if not reconnect:
            client.stop()
            return client
        deadline = time.monotonic() + self.wait_timeout
        states: list[str] = []
        changed = threading.Condition()

        def listen(state: str) -> None:
            with changed:
                states.append(state)
                changed.notify_all()

        client.add_listener(listen)
        try:
            while True:
                with changed:
                    states.clear()
                self._close_from_twin(old)
                with changed:
                    _wait_for(changed, lambda: _lost(states) or _reattached(states), deadline)
                    if _lost(states):
                        break
                # kazoo re-attached to the old session before the twin closed it: close it again.
            with changed:
                _wait_for(changed, lambda: states[-1] == KazooState.CONNECTED, deadline)
        finally:
            client.remove_listener(listen)
        new = client.client_id
        if new is None or new[0] == old[0]:
            raise RuntimeError(f"session {old[0]:#x} did not expire")
        return client

    def _close_from_twin(self, client_id: tuple[int, bytes]) -> None:
        twin = KazooClient(hosts=self.hosts, client_id=client_id, timeout=self.session_timeout)
        twin.start(timeout=self.wait_timeout)  # on failure kazoo has stopped and closed it
        try:
            twin.stop()
        finally:
            twin.close()

    def wait_idle(self) -> None:
        deadline = time.monotonic() + self.wait_timeout
        while True:
            with self._lock:
                clients = list(self._clients)
            live = [c for c in clients if c.await_connected()]  # closed ones are skipped
            handlers = [_handler(c) for c in live]
            finished = sum(h.finished for h in handlers)
            syncs = [c.kazoo.sync_async("/") for c in live]
            for c, pending in zip(live, syncs, strict=True):
                c.settle(pending, lambda c=c: c.kazoo.sync_async("/"))  # type: ignore[misc]
            for handler in handlers:
                handler.wait_drained(deadline)
            if sum(h.finished for h in handlers) == finished:
                return

    def use_clock(self, clock_ms: Callable[[], int]) -> None:
        """Nothing to do: the server stamps znodes with its own clock."""

    def close(self) -> None:
        with self._lock:
            clients, self._clients = self._clients, []
        for client in clients:
            client.stop()
            client.close()


def _handler(client: KazooZkClient) -> _CountingHandler:
    handler = client.kazoo.handler
    assert isinstance(handler, _CountingHandler)
    return handler


def _lost(states: list[str]) -> bool:
    return KazooState.LOST in states


def _reattached(states: list[str]) -> bool:
    """Connected again without losing the session (the twin came too late)."""
    return states[-1:] == [KazooState.CONNECTED]


def _wait_for(cond: threading.Condition, predicate: Callable[[], bool], deadline: float) -> None:
    if not cond.wait_for(predicate, timeout=max(deadline - time.monotonic(), 0.0)):
        raise TimeoutError("ZooKeeper session did not reach the expected state")
