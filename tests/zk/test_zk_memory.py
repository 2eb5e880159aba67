"""Behaviour specific to the in-memory store, plus concurrency on both backends."""

from __future__ import annotations

import threading

import pytest
from kazoo.exceptions import ConnectionClosedError, SessionExpiredError, UnimplementedError
from kazoo.protocol.states import KazooState

from controller.zk import InMemoryZooKeeper, connect


def test_many_threads_share_one_store(zk) -> None:
    clients = [zk.client() for _ in range(4)]
    clients[0].create("/q")
    created: list[str] = []
    lock = threading.Lock()

    def work(c) -> None:
        for _ in range(25):
            path = c.create("/q/item-", b"", sequence=True)
            with lock:
                created.append(path)

    threads = [threading.Thread(target=work, args=(c,)) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(created)) == 100
    assert sorted(clients[1].get_children("/q")) == sorted(p.rsplit("/", 1)[1] for p in created)
    assert clients[2].exists("/q").cversion == 100


def test_expired_without_reconnect_raises_session_expired_until_restarted() -> None:
    store = InMemoryZooKeeper()
    client = connect(store=store)
    states: list[str] = []
    client.add_listener(states.append)
    client.create("/eph", ephemeral=True)
    store.expire_session(client.client_id[0], reconnect=False)
    with pytest.raises(SessionExpiredError):
        client.get("/")
    client.start()
    assert client.exists("/eph") is None
    store.wait_idle()
    assert states == [KazooState.SUSPENDED, KazooState.LOST, KazooState.CONNECTED]
    client.stop()
    with pytest.raises(ConnectionClosedError):
        client.get("/")
    store.close()


def test_wait_idle_waits_for_callbacks_that_rearm_watches() -> None:
    store = InMemoryZooKeeper()
    a, b = connect(store=store), connect(store=store)
    a.create("/n", b"0")
    seen: list[bytes] = []

    def watch(event) -> None:
        seen.append(a.get("/n", watch=watch)[0])

    a.get("/n", watch=watch)
    for i in range(1, 4):
        b.set("/n", str(i).encode())
        store.wait_idle()
        assert seen[-1] == str(i).encode()
    assert threading.current_thread() is threading.main_thread()
    store.close()


def test_partition_znodes_reject_what_kafka_never_does() -> None:
    store = InMemoryZooKeeper()
    c = connect(store=store)
    c.create("/brokers/topics/t/partitions/0", makepath=True)
    with pytest.raises(UnimplementedError):
        c.create("/brokers/topics/t/partitions/0/other")
    with pytest.raises(UnimplementedError):
        c.create("/brokers/topics/t/partitions/1", ephemeral=True)
    c.create("/brokers/topics/t/partitions/0/state", b"{}")
    assert c.get_children("/brokers/topics/t/partitions/0") == ["state"]
    assert c.exists("/brokers/topics/t/partitions").numChildren == 1
    store.close()
