"""Watches that outlive a lost connection to a real server, as in ZooKeeper's Java client.

kazoo forgets every watch when its connection drops and calls each one with a ``NONE`` event; it
never tells the server about them again. ZooKeeper's Java client, the one Kafka uses, keeps them:
when it reconnects to the same session it sends ``SetWatches`` (opcode 101) with the last zxid it
saw, and the server fires at once each watch whose node changed meanwhile and re-arms the rest.
Kafka's handlers never see the disconnection (path-less events go to the session handler only),
and a reassignment written to ``/admin/reassign_partitions`` while the controller was cut off is
noticed when it is back. ``WatchKeeper`` gives a kazoo client the same behaviour.

State transitions (kazoo's ``KazooState`` as the keeper's listener sees them):

* CONNECTED -> SUSPENDED: the watches kazoo is about to drop are kept, with the last zxid seen;
  their ``NONE`` events (state ``CONNECTING``) are not passed on (``PathWatch``).
* SUSPENDED -> CONNECTED, same session: the kept watches go back into kazoo's tables and a
  ``SetWatches`` request is queued ahead of any other; then ``ready`` is set.
* -> CONNECTED on a new session: nothing to re-arm; ``ready`` is set.
* -> LOST (the session expired, or the client was closed): the kept watches get the ``NONE``
  event kazoo gave them when the connection dropped, and are forgotten.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient
from kazoo.protocol.serialization import int_struct, long_struct, write_string
from kazoo.protocol.states import Callback, EventType, KazooState, KeeperState, WatchedEvent

WatchFn = Callable[[WatchedEvent], Any]

SET_WATCHES = 101
# The Java client splits SetWatches so that one request stays far below jute.maxbuffer (1 MB).
SET_WATCHES_MAX_BYTES = 128 * 1024


@dataclass(frozen=True)
class PathWatch:
    """A watch function that does not see connection losses (they are re-armed instead).

    Equal to any other ``PathWatch`` of an equal function, so kazoo's watcher sets still hold
    one entry per handler however often it is registered."""

    fn: WatchFn

    def __call__(self, event: WatchedEvent) -> None:
        if event.type == EventType.NONE and event.state == KeeperState.CONNECTING:
            return
        self.fn(event)


@dataclass(frozen=True)
class SetWatches:
    """ZooKeeper's ``SetWatches`` request: re-arm watches, firing those whose node changed after
    ``relative_zxid`` (data: changed or deleted; exist: now there; child: children changed)."""

    relative_zxid: int
    data: tuple[str, ...]
    exist: tuple[str, ...]
    child: tuple[str, ...]

    type = SET_WATCHES

    def serialize(self) -> bytearray:
        b = bytearray(long_struct.pack(self.relative_zxid))
        for paths in (self.data, self.exist, self.child):
            b.extend(int_struct.pack(len(paths)))
            for path in paths:
                b.extend(write_string(path))
        return b

    def deserialize(self, data: bytes, offset: int) -> None:
        return None  # the reply is a bare header


def set_watches_requests(
    relative_zxid: int, data: list[str], exist: list[str], child: list[str]
) -> Iterator[SetWatches]:
    """The watches as requests of at most ``SET_WATCHES_MAX_BYTES`` of paths each."""
    lists: tuple[list[str], list[str], list[str]] = ([], [], [])
    size = 0
    for kind, paths in enumerate((data, exist, child)):
        for path in paths:
            if size + len(path) > SET_WATCHES_MAX_BYTES and size:
                yield SetWatches(relative_zxid, *(tuple(x) for x in lists))
                lists, size = ([], [], []), 0
            lists[kind].append(path)
            size += len(path) + int_struct.size
    if size:
        yield SetWatches(relative_zxid, *(tuple(x) for x in lists))


class WatchKeeper:
    """Keeps ``kazoo``'s watches across a lost connection (see the module docstring).

    Register it with ``kazoo.add_listener(keeper.listen)`` before ``start``; watch functions
    passed to kazoo must be wrapped in ``PathWatch``; ``note_exists`` tells which data watches
    are exists-watches on an absent node (``SetWatches`` lists those apart).
    """

    def __init__(self, kazoo: KazooClient) -> None:
        self.kazoo = kazoo
        self.ready = threading.Event()  # connected, with its watches re-armed
        self._absent: set[str] = set()  # full paths whose latest exists-watch found no node
        self._kept: tuple[dict[str, set[WatchFn]], dict[str, set[WatchFn]]] | None = None
        self._zxid = 0
        self._session: int | None = None
        self.rearmed = 0  # watches re-armed so far (SetWatches paths)

    def note_exists(self, path: str, found: bool) -> None:
        full = (self.kazoo.chroot or "") + path
        if found:
            self._absent.discard(full)
        else:
            self._absent.add(full)

    def listen(self, state: str) -> None:
        """kazoo's state listener; runs on its connection thread, so it never blocks."""
        kz = self.kazoo
        if state == KazooState.SUSPENDED:
            self.ready.clear()
            if self._kept is None:  # kazoo drops these right after its listeners return
                self._kept = (
                    {p: set(w) for p, w in kz._data_watchers.items() if w},
                    {p: set(w) for p, w in kz._child_watchers.items() if w},
                )
                self._zxid = kz.last_zxid
                self._session = kz._session_id  # ``client_id`` is None once disconnected
        elif state == KazooState.LOST:
            self.ready.clear()
            kept, self._kept = self._kept, None
            if kept is not None:
                # What kazoo gave them when the connection dropped (now known to be for good).
                event = WatchedEvent(EventType.NONE, KeeperState.CONNECTING, None)
                for fns in (*kept[0].values(), *kept[1].values()):
                    for fn in fns:
                        fn = fn.fn if isinstance(fn, PathWatch) else fn
                        kz.handler.dispatch_callback(Callback("watch", fn, (event,)))
        elif state == KazooState.CONNECTED:
            kept, self._kept = self._kept, None
            if kept is not None and kz._session_id == self._session:
                self._rearm(*kept)
            self.ready.set()

    def _rearm(self, data: dict[str, set[WatchFn]], child: dict[str, set[WatchFn]]) -> None:
        kz = self.kazoo
        for table, kept in ((kz._data_watchers, data), (kz._child_watchers, child)):
            for path, fns in kept.items():
                table[path].update(fns)
        exist = sorted(p for p in data if p in self._absent)
        requests = set_watches_requests(
            self._zxid, sorted(p for p in data if p not in self._absent), exist, sorted(child)
        )
        # Ahead of the requests queued while disconnected, as the Java client primes a connection.
        # kazoo's connection loop sends one queued request per wake-up byte.
        for request in reversed(list(requests)):
            kz._queue.appendleft((request, kz.handler.async_result()))
            kz._connection._write_sock.send(b"\0")
        self.rearmed += len(data) + len(child)
