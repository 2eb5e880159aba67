"""Bulk API for the partition-state znodes ``/brokers/topics/T/partitions/P/state``.

    store = PartitionStateStore(client)                  # InMemoryClient or KazooZkClient
    states = store.read_states(spark)                    # or read_states(spark, selection)
    failed = store.write_states(new_states, epoch_zk_version)

``read_states(spark, selection=None) -> DataFrame`` with ``STATES_SCHEMA`` columns topic,
partition, leader, leader_epoch, isr, controller_epoch, zk_version (the state znode's data
version). ``selection`` is any DataFrame with topic and partition columns; partitions without a
state znode are absent from the result. A payload that is not a partition state raises
``MalformedZnodeError`` naming its path.

``write_states(states, expected_epoch_zk_version) -> DataFrame`` writes every row of ``states``
(one row per partition; same columns; ``zk_version`` is the *expected* current version,
``NEW_PARTITION_VERSION`` (-1) to create the partition znode and its state). After success a row's
znode is at version ``zk_version + 1`` (0 for a created one). An optional ``writes`` column makes
a row that many conditional writes of the same payload (a controller that wrote the znode several
times in one event: version ``zk_version + writes``, ``writes - 1`` when created). The whole write is fenced by the ``/controller_epoch``
version: if another controller moved it, ``ControllerMovedError`` is raised. Returned: the rows
that were not written, with an ``error`` column — BADVERSION (someone else wrote it), NONODE (no
state znode to update, or no topic znode to create under), NODEEXISTS (creating an existing one).
Pass only rows that changed (``changed_states`` computes them).

In memory the subtree is a persisted DataFrame merged with one join. Against real ZooKeeper, rows
reach the driver as Arrow (converted to Python one batch at a time) and go out as pipelined multis;
reads use pipelined ``multiRead`` requests and build the result through Arrow.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from kazoo.exceptions import NodeExistsError, NoNodeError
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from controller.zk.errors import MalformedZnodeError
from controller.zk.fencing import FencedWriter
from controller.zk.kazoo_bulk import GET_CHILDREN, GET_DATA, StateRow, multi_read, write_batches
from controller.zk.kazoo_client import KazooZkClient
from controller.zk.memory import InMemoryClient
from controller.zk.paths import (
    BROKER_TOPICS,
    PartitionStateZNode,
    TopicPartitionsZNode,
    TopicZNode,
)
from controller.zk.protocol import ZkClient
from statemachines.local_rows import local_frame
from statemachines.schemas import (
    CONTROLLER_EPOCH,
    ISR,
    LEADER,
    LEADER_EPOCH,
    PARTITION,
    PARTITIONS_SCHEMA,
    TOPIC,
    ZK_VERSION,
    check_schema,
)

NEW_PARTITION_VERSION = -1
WRITES = "writes"
STATE_COLUMNS = (TOPIC, PARTITION, LEADER, LEADER_EPOCH, ISR, CONTROLLER_EPOCH, ZK_VERSION)
STATES_SCHEMA = StructType([PARTITIONS_SCHEMA[c] for c in STATE_COLUMNS])
FAILED_SCHEMA = StructType([*STATES_SCHEMA.fields, StructField("error", StringType(), False)])
_KEY_SCHEMA = StructType([PARTITIONS_SCHEMA[TOPIC], PARTITIONS_SCHEMA[PARTITION]])


def changed_states(current: DataFrame, new: DataFrame) -> DataFrame:
    """Rows of ``new`` whose leader, epochs or ISR differ from ``current`` (or are absent there)."""
    data = [LEADER, LEADER_EPOCH, ISR, CONTROLLER_EPOCH]
    old = current.select(TOPIC, PARTITION, *[F.col(c).alias(f"_old_{c}") for c in data])
    joined = new.join(old, [TOPIC, PARTITION], "left")
    same = F.lit(True)
    for c in data:
        same = same & F.col(c).eqNullSafe(F.col(f"_old_{c}"))
    return joined.filter(~same).select(*new.columns)


def _arrow_rows(df: DataFrame, batch_rows: int = 20_000) -> Iterator[Any]:
    """Rows of ``df`` as tuples, built one Arrow batch at a time (only changed rows come here)."""
    table = df.toArrow()
    for batch in table.to_batches(max_chunksize=batch_rows):
        yield from zip(
            *(batch.column(i).to_pylist() for i in range(batch.num_columns)), strict=True
        )


class PartitionStateStore:
    """Bulk reads and fenced bulk writes of partition states; see the module docstring."""

    def __init__(
        self, client: ZkClient, max_ops: int = 1000, max_bytes: int = 512 * 1024, window: int = 8
    ) -> None:
        self.client = client
        self.max_ops = max_ops
        self.max_bytes = max_bytes
        self.window = window

    # -- reads ------------------------------------------------------------------------------
    def read_states(self, spark: SparkSession, selection: DataFrame | None = None) -> DataFrame:
        if isinstance(self.client, InMemoryClient):
            return self._read_memory(spark, selection)
        return self._read_kazoo(spark, selection)

    def _read_memory(self, spark: SparkSession, selection: DataFrame | None) -> DataFrame:
        self.client._live()
        store = self.client.store
        keys = None if selection is None else selection.select(TOPIC, PARTITION)
        states = store.read_states(keys)
        if states is None:
            return local_frame(spark, [], STATES_SCHEMA)
        malformed = sorted(store.partitions.malformed)
        if malformed:
            bad = local_frame(spark, malformed, _KEY_SCHEMA)
            if keys is not None:
                bad = bad.join(keys, [TOPIC, PARTITION], "left_semi")
            hit = bad.limit(1).collect()
            if hit:
                path = PartitionStateZNode.path(hit[0][0], hit[0][1])
                raise MalformedZnodeError(path, "not a partition state")
        return states.select(*STATE_COLUMNS)

    def _kazoo(self) -> KazooZkClient:
        assert isinstance(self.client, KazooZkClient)
        return self.client

    def _all_keys(self) -> Iterator[tuple[str, int]]:
        kz = self._kazoo().kazoo
        topics = sorted(kz.get_children(BROKER_TOPICS)) if kz.exists(BROKER_TOPICS) else []
        paths = [TopicPartitionsZNode.path(t) for t in topics]
        for (_path, result), topic in zip(
            multi_read(kz, GET_CHILDREN, paths, self.max_ops, self.window), topics, strict=True
        ):
            if isinstance(result, list):
                for name in sorted(result, key=int):
                    yield topic, int(name)
            elif not isinstance(result, NoNodeError):
                raise result

    def _read_kazoo(self, spark: SparkSession, selection: DataFrame | None) -> DataFrame:
        kz = self._kazoo().kazoo
        if selection is None:
            keys: Iterator[tuple[str, int]] = self._all_keys()
        else:
            keys = _arrow_rows(selection.select(TOPIC, PARTITION).distinct())  # type: ignore[assignment]
        paths = (PartitionStateZNode.path(t, p) for t, p in keys)
        columns: dict[str, list] = {c: [] for c in STATE_COLUMNS}
        tables: list[pa.Table] = []
        for path, result in multi_read(kz, GET_DATA, paths, self.max_ops, self.window):
            if isinstance(result, NoNodeError):
                continue
            if isinstance(result, Exception):
                raise result
            data, stat = result
            state = PartitionStateZNode.decode(data, path)
            parts = path.split("/")
            columns[TOPIC].append(parts[3])
            columns[PARTITION].append(int(parts[5]))
            columns[LEADER].append(state.leader)
            columns[LEADER_EPOCH].append(state.leader_epoch)
            columns[ISR].append(state.isr)
            columns[CONTROLLER_EPOCH].append(state.controller_epoch)
            columns[ZK_VERSION].append(stat.version)
            if len(columns[TOPIC]) >= 100_000:
                tables.append(self._arrow(columns))
                columns = {c: [] for c in STATE_COLUMNS}
        tables.append(self._arrow(columns))
        return spark.createDataFrame(pa.concat_tables(tables), STATES_SCHEMA)

    @staticmethod
    def _arrow(columns: dict[str, list]) -> pa.Table:
        arrow_schema = pa.schema(
            [
                (TOPIC, pa.string()),
                (PARTITION, pa.int32()),
                (LEADER, pa.int32()),
                (LEADER_EPOCH, pa.int32()),
                (ISR, pa.list_(pa.int32())),
                (CONTROLLER_EPOCH, pa.int32()),
                (ZK_VERSION, pa.int32()),
            ]
        )
        return pa.table(columns, schema=arrow_schema)

    # -- writes -----------------------------------------------------------------------------
    def write_states(
        self, states: DataFrame, expected_epoch_zk_version: int, rows: int | None = None
    ) -> DataFrame:
        """See the module docstring; ``rows`` is the row count when the caller knows it."""
        check_schema(states.drop(WRITES), STATES_SCHEMA, "partition states")
        writes = F.col(WRITES) if WRITES in states.columns else F.lit(1)
        states = states.select(*STATE_COLUMNS, writes.cast("int").alias(WRITES))
        if isinstance(self.client, InMemoryClient):
            self.client._live()
            return self.client.store.bulk_write_states(states, expected_epoch_zk_version, rows)
        return self._write_kazoo(states, expected_epoch_zk_version)

    def _write_kazoo(self, states: DataFrame, epoch_zk_version: int) -> DataFrame:
        client = self._kazoo()
        fenced = FencedWriter(client, epoch_zk_version)
        topic_ok: dict[str, bool] = {}
        failed: list[tuple] = []

        def rows() -> Iterator[StateRow]:
            for row in _arrow_rows(states):
                if row[6] == NEW_PARTITION_VERSION:
                    if row[0] not in topic_ok:
                        topic_ok[row[0]] = self._ensure_partitions_node(fenced, row[0])
                    if not topic_ok[row[0]]:
                        failed.append((*row[:-1], "NONODE"))
                        continue
                yield row

        for row, error in write_batches(
            client.kazoo, rows(), epoch_zk_version, self.max_ops, self.max_bytes, self.window
        ):
            failed.append((*row[:-1], error))
        return local_frame(states.sparkSession, failed, FAILED_SCHEMA)

    def _ensure_partitions_node(self, fenced: FencedWriter, topic: str) -> bool:
        """Create ``/brokers/topics/T/partitions`` (fenced) if needed; False if T has no znode."""
        path = TopicPartitionsZNode.path(topic)
        if self.client.exists(path) is not None:
            return True
        if self.client.exists(TopicZNode.path(topic)) is None:
            return False
        with contextlib.suppress(NodeExistsError):
            fenced.create(path)
        return True
