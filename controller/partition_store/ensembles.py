"""The ZooKeeper a cluster is built on, with the bulk partition-state store that fits it.

The store is chosen once, with the ensemble: ``EmulatedEnsemble`` is an in-memory ZooKeeper
whose partition znodes live in a Spark ``PartitionRegion`` (``SparkStateStore``);
``ServerEnsemble`` opens kazoo sessions to a real server (``KazooStateStore``).
``ensemble.state_store(client)`` gives the store for one of the ensemble's sessions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from controller.partition_store.kazoo_store import KazooStateStore
from controller.partition_store.region import PartitionRegion
from controller.partition_store.spark_store import SparkStateStore
from controller.partition_store.states import PartitionStateStore
from controller.zk import ensemble as zk_ensemble
from controller.zk.ensemble import KazooEnsemble, MemoryEnsemble, owned_session
from controller.zk.memory import InMemoryZooKeeper, wall_clock_ms
from controller.zk.protocol import ZkClient


class Ensemble(zk_ensemble.Ensemble, Protocol):
    """An ensemble (sessions, expiry, a delivery barrier) and its partition-state store."""

    def state_store(self, client: ZkClient) -> PartitionStateStore:
        """The bulk partition-state store for ``client``, a session of this ensemble."""
        ...


class EmulatedEnsemble(MemoryEnsemble):
    """A new in-memory ZooKeeper whose partition znodes are a ``PartitionRegion``."""

    def __init__(
        self, clock_ms: Callable[[], int] = wall_clock_ms, region: PartitionRegion | None = None
    ) -> None:
        self.region = region if region is not None else PartitionRegion()
        super().__init__(InMemoryZooKeeper(clock_ms, self.region))
        self._owns_store = True

    def state_store(self, client: ZkClient) -> SparkStateStore:
        return SparkStateStore(owned_session(self._clients, client), self.region)


class ServerEnsemble(KazooEnsemble):
    """Kazoo sessions to a real server (see ``KazooEnsemble``)."""

    def state_store(self, client: ZkClient) -> KazooStateStore:
        with self._lock:
            return KazooStateStore(owned_session(self._clients, client))


def open_ensemble(
    mode: str,
    connect: str | None = None,
    session_timeout_ms: int = 10_000,
    connection_timeout_ms: int | None = None,
) -> Ensemble:
    """The ensemble a scenario's ``zookeeper`` section names: ``emulated`` or ``kazoo``; a real
    one with Kafka's ``zookeeper.session.timeout.ms`` and ``zookeeper.connection.timeout.ms``."""
    if mode == "emulated":
        return EmulatedEnsemble()
    if mode == "kazoo":
        if not connect:
            raise ValueError("zookeeper mode kazoo needs connect: 'host:port[/chroot]'")
        connection = None if connection_timeout_ms is None else connection_timeout_ms / 1000
        return ServerEnsemble(connect, session_timeout_ms / 1000, connection_timeout=connection)
    raise ValueError(f"unknown zookeeper mode {mode!r}; expected 'emulated' or 'kazoo'")
