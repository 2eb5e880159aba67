"""The real backend: a thin adapter over ``kazoo.client.KazooClient``, plus ``connect``.

``KazooZkClient`` exposes exactly the surface of ``ZkClient`` (``controller.zk.protocol``);
``.kazoo`` is the underlying client for bulk stores that pipeline async requests (they wait
through ``settle``). ``connect()`` returns a started client of either backend.

A lost connection behaves as in Kafka's ``ZooKeeperClient`` (ZooKeeper's Java client):

* a request that fails with ``ConnectionLoss`` is sent again once the client is connected
  (``KafkaZkClient.retryRequestsUntilConnected``); one made while disconnected waits for the
  connection;
* watches survive the disconnection and are re-armed on reconnection (``kazoo_watches``);
* a wait never lasts forever: once the client has been disconnected for ``connection_timeout``
  seconds (Kafka's ``zookeeper.connection.timeout.ms``), the request raises
  ``ZooKeeperClientTimeoutError``. Kafka waits indefinitely there; an emulation run ends instead.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from kazoo.client import KazooClient, TransactionRequest
from kazoo.exceptions import ConnectionLoss
from kazoo.handlers.threading import SequentialThreadingHandler
from kazoo.interfaces import IAsyncResult
from kazoo.protocol.serialization import Transaction
from kazoo.protocol.states import KazooState, WatchedEvent, ZnodeStat
from kazoo.retry import KazooRetry

from controller.zk.errors import ZooKeeperClientTimeoutError
from controller.zk.kazoo_bulk import GET_DATA, multi_read
from controller.zk.kazoo_watches import PathWatch, WatchKeeper
from controller.zk.memory import InMemoryClient, InMemoryZooKeeper

WatchFn = Callable[[WatchedEvent], Any]

# How often a waiting request looks at the connection's state (it wakes at once on its reply).
_POLL_S = 0.05

log = logging.getLogger(__name__)
# kazoo logs every failed reconnection attempt (several a second during an outage); the client
# logs the loss and the return once instead, and the timeout error says the rest.
_KAZOO_LOG = logging.getLogger(f"{__name__}.kazoo")
_KAZOO_LOG.setLevel(logging.ERROR)


class KazooZkClient:
    """``ZkClient`` over a real ZooKeeper ensemble (``hosts`` may end in a chroot).

    ``timeout`` is the session timeout asked of the server (seconds); ``connection_timeout``
    bounds every wait for a lost connection (default: the session timeout, as Kafka's
    ``zookeeper.connection.timeout.ms``). See the module docstring.
    """

    def __init__(
        self,
        hosts: str,
        timeout: float = 10.0,
        connection_timeout: float | None = None,
        **kazoo_args: Any,
    ) -> None:
        handler = kazoo_args.setdefault("handler", SequentialThreadingHandler())
        # kazoo's default backs off to an hour between attempts: a server back after an outage
        # would wait that long. Kafka's client retries within a second.
        kazoo_args.setdefault("logger", _KAZOO_LOG)
        kazoo_args.setdefault(
            "connection_retry",
            KazooRetry(max_tries=-1, delay=0.05, max_delay=0.5, sleep_func=handler.sleep_func),
        )
        self.kazoo = KazooClient(hosts=hosts, timeout=timeout, **kazoo_args)
        self.hosts = hosts
        self.connection_timeout = timeout if connection_timeout is None else connection_timeout
        self.watches = WatchKeeper(self.kazoo)
        self._disconnected_at: float | None = None
        self.kazoo.add_listener(self._on_state)
        self.kazoo.add_listener(self.watches.listen)

    def _on_state(self, state: str) -> None:
        if state == KazooState.CONNECTED:
            if self._disconnected_at is not None:
                log.info("ZooKeeper %s: connected again", self.hosts)
            self._disconnected_at = None
        elif self._disconnected_at is None:
            self._disconnected_at = time.monotonic()
            log.info(
                "ZooKeeper %s: connection lost (%s); waiting for it up to %d ms",
                self.hosts, state, self.connection_timeout * 1000,
            )  # fmt: skip

    def start(self, timeout: float = 15) -> None:
        self.kazoo.start(timeout=timeout)

    def stop(self) -> None:
        self.kazoo.stop()

    def close(self) -> None:
        self.kazoo.close()

    def restart(self) -> None:
        self.kazoo.restart()

    @property
    def connected(self) -> bool:
        return bool(self.kazoo.connected)

    @property
    def state(self) -> str:
        return str(self.kazoo.state)

    @property
    def client_state(self) -> str:
        return str(self.kazoo.client_state)

    @property
    def client_id(self) -> tuple[int, bytes] | None:
        return self.kazoo.client_id

    @property
    def closed(self) -> bool:
        """Stopped, or never started: nothing will connect again."""
        return bool(self.kazoo._stopped.is_set())

    def add_listener(self, listener: Callable[[str], Any]) -> None:
        self.kazoo.add_listener(listener)

    def remove_listener(self, listener: Callable[[str], Any]) -> None:
        self.kazoo.remove_listener(listener)

    # -- waiting ---------------------------------------------------------------------------------
    def _check_reachable(self) -> None:
        since = self._disconnected_at
        if since is not None and time.monotonic() - since >= self.connection_timeout:
            raise ZooKeeperClientTimeoutError(
                self.hosts, self.client_state, int(self.connection_timeout * 1000)
            )

    def await_connected(self) -> bool:
        """Block until connected with the watches re-armed (True), or the client is closed
        (False); ``ZooKeeperClientTimeoutError`` once disconnected for ``connection_timeout``."""
        while not self.watches.ready.is_set():
            if self.closed:
                return False
            self._check_reachable()
            self.watches.ready.wait(_POLL_S)
        return True

    def _await(self, pending: IAsyncResult) -> Any:
        while not pending.ready():
            pending.wait(_POLL_S)
            if not pending.ready():
                self._check_reachable()
        return pending.get()

    def settle(self, pending: IAsyncResult, resend: Callable[[], IAsyncResult]) -> Any:
        """``pending``'s result; after a lost connection, ``resend()``'s once connected again."""
        while True:
            try:
                return self._await(pending)
            except ConnectionLoss:
                if not self.await_connected():
                    raise
                pending = resend()

    def _request(self, send: Callable[[], IAsyncResult]) -> Any:
        return self.settle(send(), send)

    # -- requests --------------------------------------------------------------------------------
    def exists(self, path: str, watch: WatchFn | None = None) -> ZnodeStat | None:
        wrapped = None if watch is None else PathWatch(watch)
        stat: ZnodeStat | None = self._request(lambda: self.kazoo.exists_async(path, wrapped))
        if watch is not None:
            self.watches.note_exists(path, stat is not None)
        return stat

    def get(self, path: str, watch: WatchFn | None = None) -> tuple[bytes, ZnodeStat]:
        wrapped = None if watch is None else PathWatch(watch)
        return self._request(lambda: self.kazoo.get_async(path, wrapped))  # type: ignore[no-any-return]

    def get_children(
        self, path: str, watch: WatchFn | None = None, include_data: bool = False
    ) -> list[str] | tuple[list[str], ZnodeStat]:
        wrapped = None if watch is None else PathWatch(watch)
        return self._request(  # type: ignore[no-any-return]
            lambda: self.kazoo.get_children_async(path, wrapped, include_data)
        )

    def get_many(self, paths: Iterable[str]) -> Iterator[tuple[str, Any]]:
        """``(path, (data, stat))`` per path, or ``(path, exception)``: pipelined multiReads."""
        yield from multi_read(self.kazoo, GET_DATA, paths, 1000, 8, self.settle)

    def sync(self, path: str) -> str:
        return str(self._request(lambda: self.kazoo.sync_async(path)))

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
        return self._request(  # type: ignore[no-any-return]
            lambda: self.kazoo.create_async(
                path, value, acl=acl, ephemeral=ephemeral, sequence=sequence,
                makepath=makepath, include_data=include_data,
            )
        )  # fmt: skip

    def ensure_path(self, path: str, acl: Any = None) -> bool:
        return bool(self._request(lambda: self.kazoo.ensure_path_async(path, acl)))

    def set(self, path: str, value: bytes, version: int = -1) -> ZnodeStat:
        return self._request(lambda: self.kazoo.set_async(path, value, version))  # type: ignore[no-any-return]

    def delete(self, path: str, version: int = -1, recursive: bool = False) -> bool:
        if recursive:  # kazoo walks the tree with one request per node
            self.kazoo.delete(path, version=version, recursive=True)
        else:
            self._request(lambda: self.kazoo.delete_async(path, version))
        return True  # kazoo's recursive delete returns None; failures raise either way

    def transaction(self) -> KazooTransaction:
        return KazooTransaction(self)


class KazooTransaction:
    """kazoo's ``TransactionRequest`` (which checks and chroots each op), committed as one
    ``multi`` that is sent again after a lost connection like any other request."""

    def __init__(self, client: KazooZkClient) -> None:
        self._client = client
        self._ops: TransactionRequest = client.kazoo.transaction()
        self.create = self._ops.create
        self.delete = self._ops.delete
        self.set_data = self._ops.set_data
        self.check = self._ops.check

    def _send(self) -> IAsyncResult:
        kz = self._client.kazoo
        pending = kz.handler.async_result()
        kz._call(Transaction(self._ops.operations), pending)
        return pending

    def commit(self) -> list[Any]:
        self._ops._check_tx_state()  # kazoo's ValueError for a second commit
        self._ops.committed = True
        return list(self._client._request(self._send))


def connect(
    hosts: str | None = None,
    store: InMemoryZooKeeper | None = None,
    timeout: float = 10.0,
) -> InMemoryClient | KazooZkClient:
    """A started client: the embedded in-memory store by default, else a real ensemble.

    ``hosts=None`` (or ``"emulated"``) uses ``store`` (a fresh ``InMemoryZooKeeper`` if none);
    anything else is a kazoo connect string such as ``"127.0.0.1:2181/kafka"``.
    """
    client: InMemoryClient | KazooZkClient
    if hosts is None or hosts == "emulated":
        client = (store or InMemoryZooKeeper()).client()
    else:
        client = KazooZkClient(hosts, timeout=timeout)
    client.start(timeout=timeout)
    return client
