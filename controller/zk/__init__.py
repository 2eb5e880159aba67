"""ZooKeeper for the controller: one kazoo-shaped client over two backends, Kafka's layout.

* ``InMemoryZooKeeper`` (embedded default) and ``KazooZkClient`` (real ensemble); ``connect``.
* ``paths``: Kafka's znode paths and one codec per znode kind; ``models``: the JSON payloads.
* ``FencedWriter``: controller writes fenced by the ``/controller_epoch`` version.
* ``ensemble``: where emulated brokers open, expire and close their sessions.

This package knows znodes only: the bulk store of partition states, and the reading and writing
of whole clusters as DataFrames, live in ``controller.partition_store``.
"""

from controller.zk.errors import ControllerMovedError, MalformedZnodeError
from controller.zk.fencing import FencedWriter
from controller.zk.kazoo_client import KazooZkClient, connect
from controller.zk.memory import InMemoryZooKeeper
from controller.zk.memory_client import InMemoryClient
from controller.zk.protocol import ZkClient

__all__ = [
    "ControllerMovedError",
    "FencedWriter",
    "InMemoryClient",
    "InMemoryZooKeeper",
    "KazooZkClient",
    "MalformedZnodeError",
    "ZkClient",
    "connect",
]
