"""Fixtures for the ZooKeeper suite: every ``zk`` test runs on the in-memory store and on a real
ZooKeeper 3.8 server (one per test session, one chroot per test, marked ``zk``)."""

from __future__ import annotations

import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.protocol.states import KazooState

from controller.partition_store import (
    KazooStateStore,
    PartitionRegion,
    PartitionStateStore,
    SparkStateStore,
)
from controller.zk import InMemoryZooKeeper, KazooZkClient, ZkClient

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from zk_server import ZooKeeperServer

_SERVER: dict[str, ZooKeeperServer] = {}


@pytest.fixture(scope="session")
def zk_server() -> Iterator[ZooKeeperServer]:
    server = ZooKeeperServer().start()
    _SERVER["server"] = server
    yield server
    server.stop()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    server = _SERVER.get("server")
    if report.failed and server is not None and "zk_server" in getattr(item, "fixturenames", ()):
        report.sections.append(("ZooKeeper server log (tail)", server.log()[-20_000:]))


class ZkHarness:
    """Clients of one isolated ZooKeeper namespace, on either backend."""

    def __init__(self, backend: str, server: ZooKeeperServer | None = None) -> None:
        self.backend = backend
        self.clients: list[Any] = []
        self.store: InMemoryZooKeeper | None = None
        self.region: PartitionRegion | None = None
        self.hosts = ""
        if backend == "memory":
            self.region = PartitionRegion()
            self.store = InMemoryZooKeeper(region=self.region)
        else:
            assert server is not None
            chroot = f"/test-{uuid.uuid4().hex[:12]}"
            root = KazooClient(server.hosts)
            root.start()
            root.ensure_path(chroot)
            root.stop()
            root.close()
            self.hosts = server.hosts + chroot

    def client(self) -> ZkClient:
        client: Any
        client = self.store.client() if self.store is not None else KazooZkClient(self.hosts)
        client.start()
        self.clients.append(client)
        return client

    def state_store(self, client: Any) -> PartitionStateStore:
        """The bulk partition-state store for one of this harness's clients."""
        if self.region is not None:
            return SparkStateStore(client, self.region)
        return KazooStateStore(client)

    def expire(self, client: Any, timeout: float = 10.0) -> None:
        """Expire ``client``'s session for real and wait until it has reconnected (LOST, CONNECTED)."""
        lost, back = threading.Event(), threading.Event()

        def listen(state: str) -> None:
            if state == KazooState.LOST:
                lost.set()
            elif state == KazooState.CONNECTED and lost.is_set():
                back.set()

        client.add_listener(listen)
        session_id, password = client.client_id
        if self.store is not None:
            self.store.expire_session(session_id)
        else:
            twin = KazooClient(self.hosts.split("/")[0], client_id=(session_id, password))
            twin.start()
            twin.stop()
            twin.close()
        assert back.wait(timeout), "client did not see LOST then CONNECTED"
        client.remove_listener(listen)

    def settle(self) -> None:
        if self.store is not None:
            self.store.wait_idle(10)

    def close(self) -> None:
        for client in self.clients:
            try:
                client.stop()
                client.close()
            except Exception:
                pass
        if self.store is not None:
            self.store.close()


@pytest.fixture(params=["memory", pytest.param("real", marks=pytest.mark.zk)])
def zk(request: pytest.FixtureRequest) -> Iterator[ZkHarness]:
    server = request.getfixturevalue("zk_server") if request.param == "real" else None
    harness = ZkHarness(request.param, server)
    yield harness
    harness.close()
