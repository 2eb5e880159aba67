"""Ensembles: sessions, server-side expiry and the watch-delivery barrier, on both backends."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import SessionExpiredError
from kazoo.protocol.states import EventType, KazooState, WatchedEvent
from zk_server import ZooKeeperServer

from controller.partition_store import EmulatedEnsemble, open_ensemble
from controller.zk import InMemoryZooKeeper
from controller.zk.ensemble import (
    Ensemble,
    KazooEnsemble,
    MemoryEnsemble,
    split_connect,
)
from controller.zk.protocol import ZkClient


class Namespaces:
    """Ensembles over isolated namespaces: a store each in memory, a chroot each on the server."""

    def __init__(self, backend: str, server: ZooKeeperServer | None) -> None:
        self.backend = backend
        self.server = server
        self.stores: list[InMemoryZooKeeper] = []
        self.ensembles: list[Ensemble] = []
        self._observers: dict[int, Callable[[], Ensemble]] = {}  # by id of the ensemble

    def new(self) -> Ensemble:
        if self.server is None:
            store = InMemoryZooKeeper()
            self.stores.append(store)
            return self._track(MemoryEnsemble(store), lambda: MemoryEnsemble(store))
        connect = f"{self.server.hosts}/ens-{uuid.uuid4().hex[:12]}"
        return self._track(KazooEnsemble(connect), lambda: KazooEnsemble(connect))

    def same(self, ensemble: Ensemble) -> Ensemble:
        """Another ensemble on ``ensemble``'s namespace (an outside observer)."""
        observer = self._observers[id(ensemble)]
        return self._track(observer(), observer)

    def _track(self, ensemble: Ensemble, observer: Callable[[], Ensemble]) -> Ensemble:
        self.ensembles.append(ensemble)
        self._observers[id(ensemble)] = observer
        return ensemble

    def close(self) -> None:
        for ensemble in self.ensembles:
            ensemble.close()
        for store in self.stores:
            store.close()


@pytest.fixture(params=["memory", pytest.param("real", marks=pytest.mark.zk)])
def namespaces(request: pytest.FixtureRequest) -> Iterator[Namespaces]:
    server = request.getfixturevalue("zk_server") if request.param == "real" else None
    spaces = Namespaces(request.param, server)
    yield spaces
    spaces.close()


@pytest.fixture
def ensemble(namespaces: Namespaces) -> Ensemble:
    return namespaces.new()


def _session(client: ZkClient) -> int:
    client_id = client.client_id
    assert client_id is not None
    return client_id[0]


def test_expired_session_loses_ephemeral_and_child_watch_has_run_after_wait_idle(
    ensemble: Ensemble,
) -> None:
    observer, broker = ensemble.client(), ensemble.client()
    observer.ensure_path("/brokers/ids")
    broker.create("/brokers/ids/1", b"{}", ephemeral=True)
    seen: list[tuple[str, str, list[str]]] = []

    def on_children(event: WatchedEvent) -> None:
        # A round trip inside the callback: wait_idle must wait for it to return, not to start.
        seen.append((event.type, event.path, observer.get_children("/brokers/ids")))

    assert observer.get_children("/brokers/ids", watch=on_children) == ["1"]

    ensemble.expire_session(broker, reconnect=False)
    ensemble.wait_idle()

    assert seen == [(EventType.CHILD, "/brokers/ids", [])]
    assert observer.exists("/brokers/ids/1") is None
    with pytest.raises(SessionExpiredError):
        broker.exists("/brokers/ids")


def test_expire_with_reconnect_gives_a_new_session_that_can_own_ephemerals(
    ensemble: Ensemble,
) -> None:
    observer, broker = ensemble.client(), ensemble.client()
    broker.create("/controller", b"1", ephemeral=True)
    old_session = _session(broker)
    states: list[str] = []
    broker.add_listener(states.append)
    deleted: list[tuple[str, str]] = []
    assert observer.exists("/controller", watch=lambda e: deleted.append((e.type, e.path)))

    renewed = ensemble.expire_session(broker, reconnect=True)
    ensemble.wait_idle()

    assert renewed is broker and renewed.connected
    assert _session(renewed) != old_session
    assert states == [KazooState.SUSPENDED, KazooState.LOST, KazooState.CONNECTED]
    assert deleted == [(EventType.DELETED, "/controller")]
    assert observer.exists("/controller") is None
    renewed.create("/controller", b"2", ephemeral=True)
    stat = observer.exists("/controller")
    assert stat is not None and stat.ephemeralOwner == _session(renewed)


def test_wait_idle_covers_watches_triggered_by_watch_callbacks(ensemble: Ensemble) -> None:
    # The last watcher's session is opened before the relaying one, so a single pass over the
    # sessions in opening order would have drained it before the relay wrote.
    last, relay_session, writer = ensemble.client(), ensemble.client(), ensemble.client()
    writer.ensure_path("/a")
    writer.ensure_path("/b")
    relayed: list[tuple[str, list[str]]] = []

    def relay(event: WatchedEvent) -> None:
        # Slow on purpose (round trips, no sleep): still running when every sync has returned.
        for _ in range(20):
            relay_session.get_children("/a")
        relay_session.create("/b/relayed")  # a write made by a callback, watched elsewhere

    relay_session.get_children("/a", watch=relay)
    last.get_children("/b", watch=lambda e: relayed.append((e.path, last.get_children("/b"))))

    writer.create("/a/x")
    ensemble.wait_idle()

    assert relayed == [("/b", ["relayed"])]


def test_ensembles_in_different_namespaces_are_isolated(namespaces: Namespaces) -> None:
    one, two = namespaces.new(), namespaces.new()
    a, b = one.client(), two.client()
    a.create("/brokers/ids/1", b"a", makepath=True)
    assert b.exists("/brokers") is None
    b.create("/brokers/ids/1", b"b", makepath=True)
    assert a.get("/brokers/ids/1")[0] == b"a"
    assert b.get("/brokers/ids/1")[0] == b"b"


def test_close_ends_every_session(namespaces: Namespaces) -> None:
    ensemble = namespaces.new()
    observer = namespaces.same(ensemble).client()
    observer.ensure_path("/brokers/ids")
    clients = [ensemble.client() for _ in range(3)]
    for broker_id, client in enumerate(clients):
        client.create(f"/brokers/ids/{broker_id}", ephemeral=True)
    assert sorted(observer.get_children("/brokers/ids")) == ["0", "1", "2"]

    ensemble.close()

    assert observer.get_children("/brokers/ids") == []
    assert not any(client.connected for client in clients)


@pytest.mark.zk
def test_kazoo_ensemble_creates_a_missing_nested_chroot(zk_server: ZooKeeperServer) -> None:
    chroot = f"/kafka-{uuid.uuid4().hex[:12]}/cluster"
    ensemble = KazooEnsemble(zk_server.hosts + chroot)
    try:
        ensemble.client().create("/brokers", b"x")
        root = KazooClient(zk_server.hosts)
        root.start()
        try:
            assert root.get(f"{chroot}/brokers")[0] == b"x"
        finally:
            root.stop()
            root.close()
    finally:
        ensemble.close()


def test_split_connect_separates_hosts_and_chroot() -> None:
    assert split_connect("h1:2181,h2:2181/kafka/a") == ("h1:2181,h2:2181", "/kafka/a")
    assert split_connect("h1:2181/") == ("h1:2181", "")
    assert split_connect("h1:2181") == ("h1:2181", "")


def test_open_ensemble_by_mode() -> None:
    ensemble = open_ensemble("emulated", None)
    try:
        assert isinstance(ensemble, EmulatedEnsemble)
        assert ensemble.client().connected
    finally:
        ensemble.close()
    with pytest.raises(ValueError, match="needs connect"):
        open_ensemble("kazoo", None)
    with pytest.raises(ValueError, match="unknown zookeeper mode"):
        open_ensemble("zk", "h:1")


def test_expire_session_rejects_a_client_of_another_ensemble(namespaces: Namespaces) -> None:
    one, two = namespaces.new(), namespaces.new()
    stranger = two.client()
    with pytest.raises(ValueError, match="not a session of this ensemble"):
        one.expire_session(stranger, reconnect=True)
