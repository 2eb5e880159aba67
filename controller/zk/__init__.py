"""ZooKeeper for the controller: one kazoo-shaped client over two backends, Kafka's layout.

* ``InMemoryZooKeeper`` (embedded default) and ``KazooZkClient`` (real ensemble); ``connect``.
* ``paths``: Kafka's znode paths and one codec per znode kind; ``models``: the JSON payloads.
* ``FencedWriter``: controller writes fenced by the ``/controller_epoch`` version.
* ``PartitionStateStore``: bulk DataFrame reads/writes of partition-state znodes.
* ``bootstrap``: write a cluster into ZooKeeper in Kafka's layout, or read one back.
"""

from controller.zk.bootstrap import ClusterSnapshot, bootstrap_cluster, read_cluster
from controller.zk.errors import ControllerMovedError, MalformedZnodeError
from controller.zk.fencing import FencedWriter
from controller.zk.kazoo_client import KazooZkClient, connect
from controller.zk.memory import InMemoryClient, InMemoryZooKeeper
from controller.zk.partition_store import (
    NEW_PARTITION_VERSION,
    STATES_SCHEMA,
    PartitionStateStore,
    changed_states,
)
from controller.zk.protocol import ZkClient

__all__ = [
    "NEW_PARTITION_VERSION",
    "STATES_SCHEMA",
    "ClusterSnapshot",
    "ControllerMovedError",
    "FencedWriter",
    "InMemoryClient",
    "InMemoryZooKeeper",
    "KazooZkClient",
    "MalformedZnodeError",
    "PartitionStateStore",
    "ZkClient",
    "bootstrap_cluster",
    "changed_states",
    "connect",
    "read_cluster",
]
