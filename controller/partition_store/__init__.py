"""The bulk store of partition-state znodes, and clusters read from or written to ZooKeeper as
DataFrames.

* ``PartitionStateStore`` (``states``): ``read_states`` / ``write_states`` / ``prefetch``; two
  implementations, ``SparkStateStore`` (the emulated ensemble, over a Spark ``PartitionRegion``
  that the in-memory ZooKeeper serves its partition znodes from) and ``KazooStateStore`` (a real
  server, pipelined kazoo requests).
* ``ensembles``: ``EmulatedEnsemble`` / ``ServerEnsemble`` / ``open_ensemble``; each ensemble
  gives the store that fits it (``state_store(client)``), chosen once.
* ``bootstrap``: write a cluster into ZooKeeper in Kafka's layout, or read one back.
"""

from controller.partition_store.bootstrap import (
    ClusterRows,
    ClusterSnapshot,
    bootstrap_cluster,
    read_cluster,
    read_cluster_rows,
)
from controller.partition_store.ensembles import (
    EmulatedEnsemble,
    Ensemble,
    ServerEnsemble,
    open_ensemble,
)
from controller.partition_store.kazoo_store import KazooStateStore
from controller.partition_store.region import PartitionRegion
from controller.partition_store.spark_store import SparkStateStore
from controller.partition_store.states import (
    NEW_PARTITION_VERSION,
    STATE_COLUMNS,
    STATES_SCHEMA,
    WRITES,
    PartitionStateStore,
    changed_states,
)

__all__ = [
    "NEW_PARTITION_VERSION",
    "STATES_SCHEMA",
    "STATE_COLUMNS",
    "WRITES",
    "ClusterRows",
    "ClusterSnapshot",
    "EmulatedEnsemble",
    "Ensemble",
    "KazooStateStore",
    "PartitionRegion",
    "PartitionStateStore",
    "ServerEnsemble",
    "SparkStateStore",
    "bootstrap_cluster",
    "changed_states",
    "open_ensemble",
    "read_cluster",
    "read_cluster_rows",
]
