"""The real backend: a thin adapter over ``kazoo.client.KazooClient``, plus ``connect``.

``KazooZkClient`` exposes exactly the surface of ``ZkClient`` (``controller.zk.protocol``) and
delegates each call; ``.kazoo`` is the underlying client for bulk stores that pipeline async
requests. ``connect()`` returns a started client of either backend.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from kazoo.client import KazooClient, TransactionRequest
from kazoo.protocol.states import WatchedEvent, ZnodeStat

from controller.zk.kazoo_bulk import GET_DATA, multi_read
from controller.zk.memory import InMemoryClient, InMemoryZooKeeper

WatchFn = Callable[[WatchedEvent], Any]


class KazooZkClient:
    """``ZkClient`` over a real ZooKeeper ensemble (``hosts`` may end in a chroot)."""

    def __init__(self, hosts: str, timeout: float = 10.0, **kazoo_args: Any) -> None:
        self.kazoo = KazooClient(hosts=hosts, timeout=timeout, **kazoo_args)

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

    def add_listener(self, listener: Callable[[str], Any]) -> None:
        self.kazoo.add_listener(listener)

    def remove_listener(self, listener: Callable[[str], Any]) -> None:
        self.kazoo.remove_listener(listener)

    def exists(self, path: str, watch: WatchFn | None = None) -> ZnodeStat | None:
        return self.kazoo.exists(path, watch=watch)

    def get(self, path: str, watch: WatchFn | None = None) -> tuple[bytes, ZnodeStat]:
        return self.kazoo.get(path, watch=watch)

    def get_children(
        self, path: str, watch: WatchFn | None = None, include_data: bool = False
    ) -> list[str] | tuple[list[str], ZnodeStat]:
        return self.kazoo.get_children(path, watch=watch, include_data=include_data)

    def get_many(self, paths: Iterable[str]) -> Iterator[tuple[str, Any]]:
        """``(path, (data, stat))`` per path, or ``(path, exception)``: pipelined multiReads."""
        yield from multi_read(self.kazoo, GET_DATA, paths, 1000, 8)

    def sync(self, path: str) -> str:
        return self.kazoo.sync(path)

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
        return self.kazoo.create(
            path, value, acl=acl, ephemeral=ephemeral, sequence=sequence,
            makepath=makepath, include_data=include_data,
        )  # fmt: skip

    def ensure_path(self, path: str, acl: Any = None) -> bool:
        return bool(self.kazoo.ensure_path(path, acl=acl))

    def set(self, path: str, value: bytes, version: int = -1) -> ZnodeStat:
        return self.kazoo.set(path, value, version=version)

    def delete(self, path: str, version: int = -1, recursive: bool = False) -> bool:
        self.kazoo.delete(path, version=version, recursive=recursive)
        return True  # kazoo's recursive delete returns None; failures raise either way

    def transaction(self) -> TransactionRequest:
        return self.kazoo.transaction()


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
