"""In-process ZooKeeper with ZooKeeper's semantics and kazoo's client surface.

``InMemoryZooKeeper()`` is the shared store (the "ensemble"); ``.client()`` returns an
``InMemoryClient`` that behaves like a ``kazoo.client.KazooClient`` for the calls the controller
makes, raising kazoo's own exceptions. Many clients (brokers, admin tools, controllers) share one
store from any threads: every op runs under the store's lock, and every callback (watches of all
clients, connection-state listeners) runs on one dispatcher thread in commit order.
``wait_idle()`` returns once all of them have run. Znode times come from ``clock_ms`` (the wall
clock unless given); a ``region`` given at construction serves a subtree of znodes kept outside
Python objects (see ``memory_tree.Region``).

State transitions of a client (``KazooState`` seen by listeners):

* ``start()``: LOST -> CONNECTED on a new session.
* ``stop()``: CONNECTED -> LOST; the session closes (its ephemerals vanish, others' watches fire),
  and the client's own pending watches get a ``NONE`` event with ``KeeperState.CLOSED``.
* ``InMemoryZooKeeper.expire_session(id)``: CONNECTED -> SUSPENDED (its watches get a ``NONE`` /
  ``CONNECTING`` event, as when a real server drops the connection) -> LOST; its ephemerals vanish; then, like kazoo, the client reconnects on a new
  session (LOST -> CONNECTED). With ``reconnect=False`` it stays expired and every call raises
  ``SessionExpiredError`` until ``start()``.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from controller.zk.memory_client import InMemoryClient
from controller.zk.memory_server import Server
from controller.zk.memory_tree import Region


def wall_clock_ms() -> int:
    """Milliseconds since the epoch, as a real server stamps znodes."""
    return time.time_ns() // 1_000_000


class InMemoryZooKeeper(Server):
    """The shared in-memory store. Thread-safe."""

    def __init__(
        self, clock_ms: Callable[[], int] = wall_clock_ms, region: Region | None = None
    ) -> None:
        super().__init__(clock_ms, region)

    def client(self) -> InMemoryClient:
        """A new, not yet started client of this store."""
        client = InMemoryClient(self)
        self.attach(client)
        return client

    def expire_session(self, session_id: int, reconnect: bool = True) -> None:
        """Expire a session as the server would; the owning client sees LOST (then CONNECTED)."""
        with self.lock:
            owner = next((c for c in self.sessions if c.session_id == session_id), None)
            if owner is None:
                raise ValueError(f"no live session {session_id:#x}")
            owner.expire(reconnect)
