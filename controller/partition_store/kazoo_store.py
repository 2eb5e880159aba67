"""``KazooStateStore``: the partition-state store of a real ZooKeeper server, through kazoo.

Rows reach the driver as Arrow (converted to Python one batch at a time) and go out as pipelined
multis of ``check(/controller_epoch)`` and the rows' ops (``controller.zk.kazoo_bulk``); reads
use pipelined ``multiRead`` requests and build the result through Arrow.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Sequence

import pyarrow as pa
from kazoo.exceptions import NodeExistsError, NoNodeError
from pyspark.sql import DataFrame, SparkSession

from controller.partition_store.states import (
    FAILED_SCHEMA,
    NEW_PARTITION_VERSION,
    STATE_COLUMNS,
    STATES_SCHEMA,
    StateRow,
    arrow_rows,
    with_writes,
)
from controller.zk.fencing import FencedWriter
from controller.zk.kazoo_bulk import GET_CHILDREN, GET_DATA, multi_read, write_batches
from controller.zk.kazoo_client import KazooZkClient
from controller.zk.paths import (
    BROKER_TOPICS,
    PartitionStateZNode,
    TopicPartitionsZNode,
    TopicZNode,
)
from statemachines.local_rows import local_frame
from statemachines.schemas import (
    CONTROLLER_EPOCH,
    ISR,
    LEADER,
    LEADER_EPOCH,
    PARTITION,
    TOPIC,
    ZK_VERSION,
)

_ARROW_SCHEMA = pa.schema(
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


class KazooStateStore:
    """``PartitionStateStore`` over ``client``'s session to a real server."""

    def __init__(
        self,
        client: KazooZkClient,
        max_ops: int = 1000,
        max_bytes: int = 512 * 1024,
        window: int = 8,
    ) -> None:
        self.client = client
        self.max_ops = max_ops
        self.max_bytes = max_bytes
        self.window = window

    def prefetch(self, keys: Sequence[tuple[str, int]]) -> None:
        """Nothing to do: single ops go to the server one by one."""

    # -- reads ------------------------------------------------------------------------------
    def _all_keys(self) -> Iterator[tuple[str, int]]:
        client = self.client
        topics = sorted(client.get_children(BROKER_TOPICS)) if client.exists(BROKER_TOPICS) else []
        paths = [TopicPartitionsZNode.path(t) for t in topics]
        reads = multi_read(
            client.kazoo, GET_CHILDREN, paths, self.max_ops, self.window, client.settle
        )
        for (_path, result), topic in zip(reads, topics, strict=True):
            if isinstance(result, list):
                for name in sorted(result, key=int):
                    yield topic, int(name)
            elif not isinstance(result, NoNodeError):
                raise result

    def read_states(
        self, spark: SparkSession, selection: DataFrame | None = None, rows: int | None = None
    ) -> DataFrame:
        kz = self.client.kazoo
        if selection is None:
            keys: Iterator[tuple[str, int]] = self._all_keys()
        else:
            keys = arrow_rows(selection.select(TOPIC, PARTITION).distinct())
        paths = (PartitionStateZNode.path(t, p) for t, p in keys)
        columns: dict[str, list] = {c: [] for c in STATE_COLUMNS}
        tables: list[pa.Table] = []
        reads = multi_read(kz, GET_DATA, paths, self.max_ops, self.window, self.client.settle)
        for path, result in reads:
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
                tables.append(pa.table(columns, schema=_ARROW_SCHEMA))
                columns = {c: [] for c in STATE_COLUMNS}
        tables.append(pa.table(columns, schema=_ARROW_SCHEMA))
        return spark.createDataFrame(pa.concat_tables(tables), STATES_SCHEMA)

    # -- writes -----------------------------------------------------------------------------
    def write_states(
        self, states: DataFrame, expected_epoch_zk_version: int, rows: int | None = None
    ) -> DataFrame:
        states = with_writes(states)
        failed = self.write_state_rows(arrow_rows(states), expected_epoch_zk_version)
        rows = [(*row[:-1], error) for row, error in failed]
        return local_frame(states.sparkSession, rows, FAILED_SCHEMA)

    def write_state_rows(
        self, rows: Iterable[StateRow], expected_epoch_zk_version: int
    ) -> list[tuple[StateRow, str]]:
        fenced = FencedWriter(self.client, expected_epoch_zk_version)
        topic_ok: dict[str, bool] = {}
        failed: list[tuple[StateRow, str]] = []

        def to_write() -> Iterator[StateRow]:
            for row in rows:
                if row[6] == NEW_PARTITION_VERSION:
                    if row[0] not in topic_ok:
                        topic_ok[row[0]] = self._ensure_partitions_node(fenced, row[0])
                    if not topic_ok[row[0]]:
                        failed.append((row, "NONODE"))
                        continue
                yield row

        failed += write_batches(
            self.client.kazoo,
            to_write(),
            expected_epoch_zk_version,
            self.max_ops,
            self.max_bytes,
            self.window,
            self.client.settle,
        )
        return failed

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
