"""ZooKeeper semantics, run on the in-memory store and on a real server alike."""

from __future__ import annotations

import queue

import pytest
from kazoo.exceptions import (
    BadVersionError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    RolledBackError,
    RuntimeInconsistency,
)
from kazoo.protocol.states import EventType, KazooState, KeeperState, WatchedEvent
from zk_helpers import elect

from controller.zk import ControllerMovedError, FencedWriter
from controller.zk.fencing import Create, Delete, SetData


def _events() -> tuple[queue.Queue[WatchedEvent], object]:
    q: queue.Queue[WatchedEvent] = queue.Queue()
    return q, q.put


def _next(q: queue.Queue[WatchedEvent]) -> WatchedEvent:
    return q.get(timeout=10)


def test_create_get_set_versions_and_stat(zk) -> None:
    c = zk.client()
    assert c.create("/a", b"one") == "/a"
    data, stat = c.get("/a")
    assert data == b"one"
    assert (stat.version, stat.cversion, stat.numChildren, stat.dataLength) == (0, 0, 0, 3)
    assert stat.czxid == stat.mzxid == stat.pzxid and stat.ephemeralOwner == 0
    stat2 = c.set("/a", b"two!")
    assert stat2.version == 1 and stat2.czxid == stat.czxid and stat2.mzxid > stat.mzxid
    assert stat2.dataLength == 4
    c.create("/a/b")
    parent = c.exists("/a")
    assert (parent.cversion, parent.numChildren, parent.version) == (1, 1, 1)
    assert parent.pzxid == c.exists("/a/b").czxid
    c.delete("/a/b")
    assert c.exists("/a").cversion == 2
    assert c.exists("/a/b") is None


def test_missing_and_existing_nodes_raise_kazoo_errors(zk) -> None:
    c = zk.client()
    with pytest.raises(NoNodeError):
        c.get("/missing")
    with pytest.raises(NoNodeError):
        c.create("/missing/child")
    with pytest.raises(NoNodeError):
        c.set("/missing", b"")
    with pytest.raises(NoNodeError):
        c.delete("/missing")
    c.create("/x")
    with pytest.raises(NodeExistsError):
        c.create("/x")
    assert c.create("/deep/er/path", b"v", makepath=True) == "/deep/er/path"
    assert c.get("/deep/er/path")[0] == b"v"
    assert c.ensure_path("/deep/er/path/more")
    assert c.get_children("/deep/er/path") == ["more"]


def test_sequential_suffix_counts_child_creations_per_parent(zk) -> None:
    c = zk.client()
    c.create("/seq")
    assert c.create("/seq/isr_change_", b"", sequence=True) == "/seq/isr_change_0000000000"
    c.create("/seq/plain")
    assert c.create("/seq/isr_change_", b"", sequence=True) == "/seq/isr_change_0000000002"
    c.delete("/seq/plain")
    assert c.exists("/seq").cversion == 4  # the stat counts deletions, the suffix does not
    assert c.create("/seq/log_dir_event_", b"", sequence=True) == "/seq/log_dir_event_0000000003"
    c.create("/other")
    assert c.create("/other/x", sequence=True) == "/other/x0000000000"


def test_ephemerals_cannot_have_children_and_parents_must_be_empty(zk) -> None:
    c = zk.client()
    c.create("/e", ephemeral=True)
    assert c.exists("/e").ephemeralOwner == c.client_id[0]
    with pytest.raises(NoChildrenForEphemeralsError):
        c.create("/e/child")
    c.create("/p/q/r", makepath=True)
    with pytest.raises(NotEmptyError):
        c.delete("/p")
    assert c.delete("/p", recursive=True)
    assert c.exists("/p") is None
    assert c.delete("/never-there", recursive=True)


def test_conditional_set_and_delete(zk) -> None:
    c = zk.client()
    c.create("/v", b"0")
    c.set("/v", b"1", version=0)
    with pytest.raises(BadVersionError):
        c.set("/v", b"2", version=0)
    with pytest.raises(BadVersionError):
        c.delete("/v", version=0)
    assert c.get("/v")[0] == b"1"
    c.delete("/v", version=1)
    assert c.exists("/v") is None


def test_multi_is_all_or_nothing_with_kazoo_results(zk) -> None:
    c = zk.client()
    c.create("/m", b"0")
    t = c.transaction()
    t.create("/m/new", b"n")
    t.set_data("/m", b"1", 7)
    t.delete("/m/new")
    assert [type(r) for r in t.commit()] == [RolledBackError, BadVersionError, RuntimeInconsistency]
    assert c.exists("/m/new") is None and c.get("/m")[0] == b"0"

    t = c.transaction()
    t.check("/m", 0)
    t.create("/m/new", b"n")
    t.create("/m/s-", b"", sequence=True)
    t.set_data("/m/new", b"n2", 0)
    t.delete("/m/new", 1)
    results = t.commit()
    assert results[0] is True and results[1] == "/m/new" and results[2] == "/m/s-0000000001"
    assert results[3].version == 1 and results[4] is True
    assert c.get_children("/m") == ["s-0000000001"]
    with pytest.raises(ValueError):
        t.commit()


def test_watches_are_one_shot_and_ordered(zk) -> None:
    c, other = zk.client(), zk.client()
    q, put = _events()
    c.create("/w", b"0")
    c.get("/w", watch=put)
    other.set("/w", b"1")
    other.set("/w", b"2")  # no watch left: one-shot
    assert _next(q) == WatchedEvent(EventType.CHANGED, KeeperState.CONNECTED, "/w")
    c.exists("/w/new", watch=put)
    c.get_children("/w", watch=put)
    other.create("/w/new")
    assert [_next(q).type, _next(q).type] == [EventType.CREATED, EventType.CHILD]
    c.get("/w/new", watch=put)
    c.get_children("/w/new", watch=put)
    c.get_children("/w", watch=put)
    other.delete("/w/new")
    got = [(e.type, e.path) for e in (_next(q), _next(q), _next(q))]
    assert sorted(got) == sorted(
        [(EventType.DELETED, "/w/new"), (EventType.DELETED, "/w/new"), (EventType.CHILD, "/w")]
    )
    assert got[-1] == (EventType.CHILD, "/w")
    for i in range(5):  # many changes, each re-armed: delivered in commit order
        c.get("/w", watch=put)
        other.set("/w", str(i).encode())
        assert _next(q).type == EventType.CHANGED
        assert c.get("/w")[0] == str(i).encode()
    zk.settle()
    assert q.empty()


def test_session_expiry_removes_ephemerals_and_fires_watches(zk) -> None:
    broker, controller = zk.client(), zk.client()
    broker.ensure_path("/brokers/ids")
    broker.create("/brokers/ids/1", b"{}", ephemeral=True)
    q, put = _events()
    controller.get_children("/brokers/ids", watch=put)
    controller.exists("/brokers/ids/1", watch=put)
    own, own_put = _events()
    broker.exists("/somewhere", watch=own_put)
    states: list[str] = []
    broker.add_listener(states.append)
    old_session = broker.client_id[0]
    zk.expire(broker)
    got = {(e.type, e.path) for e in (_next(q), _next(q))}
    assert got == {(EventType.DELETED, "/brokers/ids/1"), (EventType.CHILD, "/brokers/ids")}
    assert controller.get_children("/brokers/ids") == []
    assert _next(own) == WatchedEvent(EventType.NONE, KeeperState.CONNECTING, None)
    zk.settle()
    assert states[:3] == [KazooState.SUSPENDED, KazooState.LOST, KazooState.CONNECTED]
    assert broker.client_id[0] != old_session
    broker.create("/brokers/ids/1", b"{}", ephemeral=True)  # re-registration: new czxid
    assert controller.exists("/brokers/ids/1").ephemeralOwner == broker.client_id[0]


def test_stop_closes_the_session(zk) -> None:
    a, b = zk.client(), zk.client()
    a.create("/eph", ephemeral=True)
    q, put = _events()
    b.exists("/eph", watch=put)
    a.stop()
    assert _next(q).type == EventType.DELETED
    assert b.exists("/eph") is None


def test_fenced_write_fails_after_another_controller_bumps_the_epoch(zk) -> None:
    a, b = zk.client(), zk.client()
    version = elect(a, 1)
    assert version == 1
    fenced = FencedWriter(a, version)
    assert fenced.create("/admin", b"") == "/admin"
    assert fenced.set("/admin", b"x").version == 1
    results = fenced.multi([Create("/admin/s-", sequence=True), SetData("/admin", b"y", 1)])
    assert results[0] == "/admin/s-0000000000" and results[1].version == 2
    with pytest.raises(NoNodeError):  # the real op's own error, not ControllerMoved
        fenced.delete("/admin/missing")

    zk.expire(a)  # a loses /controller; b wins with a newer epoch
    version_b = elect(b, 2)
    assert version_b == 2
    with pytest.raises(ControllerMovedError):
        fenced.set("/admin", b"zombie")
    with pytest.raises(ControllerMovedError):
        fenced.multi([Delete("/admin/s-0000000000")])
    assert a.get("/admin")[0] == b"y"
    assert FencedWriter(b, version_b).set("/admin", b"new").version == 3
