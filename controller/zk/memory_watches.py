"""Ordered, single-threaded delivery of watch events and connection-state changes.

ZooKeeper delivers a client's events in the order of the transactions that caused them. The
in-memory store funnels every callback (watches of all clients, state listeners) through one
dispatcher thread, so callbacks never run concurrently and run in commit order. ``wait_idle``
blocks until everything queued so far has run: tests use it instead of sleeping.
"""

from __future__ import annotations

import logging
import pickle
import queue
import threading
from collections.abc import Callable
from typing import Any

from kazoo.protocol.states import WatchedEvent

from controller.zk.memory_tree import CHILD, DELETED

log = logging.getLogger(__name__)

_STOP = object()


class Dispatcher:
    """One daemon thread running queued callbacks in FIFO order; a failing callback is logged."""

    def __init__(self, name: str = "zk-memory-dispatch") -> None:
        self._queue: queue.Queue[Any] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        self._queue.put((fn, args))

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until every callback submitted so far has run; False on timeout.

        Callbacks may submit more callbacks (a watch re-arming itself); those are waited for too.
        Called from the dispatcher thread itself it returns at once (waiting would deadlock).
        """
        if threading.current_thread() is self._thread:
            return True
        if timeout is None:
            self._queue.join()
            return True
        done = threading.Event()
        waiter = threading.Thread(target=lambda: (self._queue.join(), done.set()), daemon=True)
        waiter.start()
        return done.wait(timeout)

    def stop(self) -> None:
        self._queue.put(_STOP)

    def __reduce__(self) -> tuple[type[Dispatcher], tuple[str]]:
        """Pickled idle, as a store saved between events is: loaded, it is a new dispatcher with
        a thread of its own (a queued callback could not be carried over)."""
        if self._queue.unfinished_tasks:
            raise pickle.PicklingError("the ZooKeeper dispatcher still has callbacks to run")
        return (Dispatcher, (self._thread.name,))

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is _STOP:
                    return
                fn, args = item
                try:
                    fn(*args)
                except Exception:
                    log.exception("error in ZooKeeper callback %r", fn)
            finally:
                self._queue.task_done()


WatchFn = Callable[[WatchedEvent], Any]


class Watches:
    """One session's pending one-shot watches: data watches (``exists``/``get``) and child
    watches (``get_children``), by path, each in the order they were set."""

    def __init__(self) -> None:
        self.data: dict[str, dict[WatchFn, None]] = {}
        self.child: dict[str, dict[WatchFn, None]] = {}

    def paths(self) -> list[str]:
        """Every watched path (data watches first), for bulk writes that must fire them."""
        return [*self.data, *self.child]

    def triggered(self, kind: str, path: str) -> list[WatchFn]:
        """Remove and return the watches an event of ``kind`` on ``path`` triggers."""
        fns: list[WatchFn] = []
        if kind != CHILD:
            fns += self.data.pop(path, {})
        if kind in (CHILD, DELETED):
            fns += self.child.pop(path, {})
        return fns

    def clear(self) -> list[WatchFn]:
        """Remove and return every pending watch (child watches first)."""
        fns = [fn for table in (*self.child.values(), *self.data.values()) for fn in table]
        self.data, self.child = {}, {}
        return fns
