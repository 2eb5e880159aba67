"""Behaviour specific to the in-memory store, plus concurrency on both backends."""

from __future__ import annotations

import threading

import pytest
from kazoo.exceptions import ConnectionClosedError, SessionExpiredError, UnimplementedError
from kazoo.protocol.states import KazooState
from pyspark.sql import DataFrame

from controller.partition_store import STATES_SCHEMA, PartitionRegion, SparkStateStore
from controller.scheduler.clock import VirtualClock
from controller.zk import InMemoryZooKeeper, connect
from controller.zk.memory_tree import Znode


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


def test_partition_znodes_reject_what_kafka_never_does(spark) -> None:
    store = InMemoryZooKeeper(region=PartitionRegion())
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


def test_znode_times_follow_the_injected_clock() -> None:
    clock = VirtualClock(1_000)
    store = InMemoryZooKeeper(clock.now_ms)
    c = connect(store=store)
    c.create("/n", b"0")
    clock.advance_to(5_000)
    c.set("/n", b"1")
    stat = c.exists("/n")
    assert (stat.ctime, stat.mtime) == (1_000, 5_000)
    later = VirtualClock(9_000)
    store.use_clock(later.now_ms)
    c.set("/n", b"2")
    assert c.exists("/n").mtime == 9_000
    store.close()


def test_the_tree_holds_plain_znodes_and_no_dataframe(spark) -> None:
    # Partition znodes are served by the region the store was given; the tree itself holds
    # only plain Python znodes, whatever was written through single ops or bulk writes.
    region = PartitionRegion()
    store = InMemoryZooKeeper(region=region)
    c = connect(store=store)
    c.create("/brokers/topics/t", b"{}", makepath=True)
    c.create("/controller_epoch", b"1")
    rows = [("t", p, 1, 0, [1], 1, -1) for p in range(3)]
    states = SparkStateStore(c, region)
    assert states.write_states(spark.createDataFrame(rows, STATES_SCHEMA), 0).count() == 0
    c.set("/brokers/topics/t/partitions/1/state", b'{"version":1}')
    assert c.get_children("/brokers/topics/t/partitions") == ["0", "1", "2"]

    def plain(value: object) -> bool:
        if isinstance(value, DataFrame):
            return False
        if isinstance(value, dict | list | tuple | set):
            items = value.items() if isinstance(value, dict) else enumerate(value)
            return all(plain(k) and plain(v) for k, v in items)
        if isinstance(value, Znode):
            return all(plain(getattr(value, f)) for f in Znode.__slots__)
        return isinstance(value, str | bytes | int | type(None))

    tree = store.tree
    assert plain(tree.nodes) and plain(tree.ephemerals) and plain(tree.zxid)
    assert all(isinstance(node, Znode) for node in tree.nodes.values())
    assert not any("/partitions/" in path for path in tree.nodes)  # they live in the region
    store.close()
