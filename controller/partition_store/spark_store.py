"""``SparkStateStore``: the partition-state store of the emulated ensemble.

The ensemble (``InMemoryZooKeeper``) serves the partition znodes from a ``PartitionRegion`` it was
given at construction; this store reads and merges that region's DataFrame directly, under the
store's lock through the client's bulk hook, which fences the write on ``/controller_epoch``'s
version, allocates the zxid and fires the watches of the znodes the write created or changed.
"""

from __future__ import annotations

from collections.abc import Sequence

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from pyspark.sql import DataFrame, SparkSession

from controller.partition_store.region import WRITTEN, PartitionRegion
from controller.partition_store.rows import parse
from controller.partition_store.states import (
    KEY_SCHEMA,
    NEW_PARTITION_VERSION,
    STATE_COLUMNS,
    STATES_SCHEMA,
    StateRow,
    with_writes,
)
from controller.zk.errors import ControllerMovedError, MalformedZnodeError
from controller.zk.fencing import Create, FencedWriter, Op, SetData
from controller.zk.memory_client import InMemoryClient
from controller.zk.memory_server import BulkTransaction
from controller.zk.memory_tree import CHANGED, CHILD, CREATED
from controller.zk.paths import (
    BROKER_TOPICS,
    CONTROLLER_EPOCH,
    PartitionStateZNode,
    TopicPartitionsZNode,
    TopicPartitionZNode,
)
from statemachines.local_rows import local_frame
from statemachines.schemas import PARTITION, TOPIC


class SparkStateStore:
    """``PartitionStateStore`` over ``region``, the partition subtree of ``client``'s store."""

    def __init__(self, client: InMemoryClient, region: PartitionRegion) -> None:
        self.client = client
        self.region = region

    def prefetch(self, keys: Sequence[tuple[str, int]]) -> None:
        """Load the partition znodes single ops on ``keys`` will touch in one Spark job: one
        by one, a burst over many topics would read the whole table once per topic."""
        with self.client.store.lock:
            self.region.prefetch(list(keys))

    def read_states(
        self, spark: SparkSession, selection: DataFrame | None = None, rows: int | None = None
    ) -> DataFrame:
        return self.client.bulk(lambda txn: self._read(txn, spark, selection, rows))

    def _read(
        self,
        txn: BulkTransaction,
        spark: SparkSession,
        selection: DataFrame | None,
        rows: int | None,
    ) -> DataFrame:
        # Kafka reads each state znode with its own getData: the whole table's, or the selection's.
        txn.count_reads(sum(self.region.counts.values()) if selection is None else rows or 0)
        keys = None if selection is None else selection.select(TOPIC, PARTITION)
        states = self.region.states(keys)
        if states is None:
            return local_frame(spark, [], STATES_SCHEMA)
        malformed = sorted(self.region.malformed)
        if malformed:
            bad = local_frame(spark, malformed, KEY_SCHEMA)
            if keys is not None:
                bad = bad.join(keys, [TOPIC, PARTITION], "left_semi")
            hit = bad.limit(1).collect()
            if hit:
                path = PartitionStateZNode.path(hit[0][0], hit[0][1])
                raise MalformedZnodeError(path, "not a partition state")
        return states.select(*STATE_COLUMNS)

    def write_states(
        self, states: DataFrame, expected_epoch_zk_version: int, rows: int | None = None
    ) -> DataFrame:
        updates = with_writes(states)
        return self.client.bulk(
            lambda txn: self._write(txn, updates, expected_epoch_zk_version, rows)
        )

    def write_state_rows(
        self, rows: Sequence[StateRow], expected_epoch_zk_version: int
    ) -> list[tuple[StateRow, str]]:
        """One fenced multi per row through the client's single ops: the region keeps them in
        its driver-side overlay (loading a topic's rows once, ``prefetch``), so a few rows cost
        no Spark job. A rejected row is returned with its error; a moved epoch raises."""
        self.prefetch(sorted({(r[0], r[1]) for r in rows}))
        fenced = FencedWriter(self.client, expected_epoch_zk_version)
        failed: list[tuple[StateRow, str]] = []
        for row in rows:
            topic, partition, leader, epoch, isr, cepoch, expected, writes = row
            data = PartitionStateZNode.encode_fields(leader, epoch, isr, cepoch)
            state = PartitionStateZNode.path(topic, partition)
            ops: list[Op]
            if expected == NEW_PARTITION_VERSION:
                node = TopicPartitionZNode.path(topic, partition)
                ops = [Create(node), Create(state, data)]
                ops += [SetData(state, data, v) for v in range(writes - 1)]
                if self.client.exists(TopicPartitionsZNode.path(topic)) is None:
                    ops.insert(0, Create(TopicPartitionsZNode.path(topic)))
            else:
                ops = [SetData(state, data, expected + i) for i in range(writes)]
            try:
                fenced.multi(ops)
            except BadVersionError:
                failed.append((row, "BADVERSION"))
            except NoNodeError:
                failed.append((row, "NONODE"))
            except NodeExistsError:
                failed.append((row, "NODEEXISTS"))
        return failed

    def _write(
        self, txn: BulkTransaction, updates: DataFrame, expected: int, rows: int | None
    ) -> DataFrame:
        """Fenced bulk merge of partition states; returns the rows that failed (with ``error``)."""
        epoch = txn.stat(CONTROLLER_EPOCH)
        if epoch is None:
            raise NoNodeError(CONTROLLER_EPOCH)
        if epoch.version != expected:
            raise ControllerMovedError(expected)
        zxid, now = txn.next_zxid(), txn.now_ms()
        topics = txn.children(BROKER_TOPICS) if txn.stat(BROKER_TOPICS) is not None else []
        watched = [parsed[0] for path in txn.watched_paths() if (parsed := parse(path)) is not None]
        outcome = self.region.bulk_write(updates, zxid, now, topics, watched, rows)
        # Kafka writes each partition's state in a transaction of its own (as the driver path's
        # one fenced multi per row does): the bulk write takes as many zxids, so the znodes
        # created after it (a broker's registration: its epoch) get the czxid they would. Its
        # rows keep the first as their mzxid.
        written = sum(n for (_, result), n in outcome.counts.items() if result in WRITTEN)
        txn.skip_zxids(written - 1)
        for (topic, result), n in sorted(outcome.counts.items()):
            if result == "created":
                txn.add_region_children(f"{BROKER_TOPICS}/{topic}/partitions", n, zxid, now)
        for topic, partition, result in outcome.touched:
            state = PartitionStateZNode.path(topic, partition)
            if result == "created":
                node = state.rsplit("/", 1)[0]
                for kind, path in ((CREATED, node), (CHILD, node), (CREATED, state)):
                    txn.record(kind, path)
            else:
                txn.record(CHANGED, state)
        return outcome.failed
