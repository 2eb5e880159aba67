"""The bulk store of partition-state znodes ``/brokers/topics/T/partitions/P/state``: its
interface, schemas and row helpers.

    store = ensemble.state_store(client)               # chosen once, with the ensemble
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

``prefetch(keys)`` hints that single znode ops on those partitions follow (a burst of ISR
changes); a store may load them in one pass.

Two implementations: ``SparkStateStore`` (the emulated ensemble's partition subtree is a
persisted DataFrame merged with one join) and ``KazooStateStore`` (a real server: pipelined
multis of the rows, pipelined ``multiRead``s, results built through Arrow).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from controller.zk.kazoo_bulk import StateRow
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
KEY_SCHEMA = StructType([PARTITIONS_SCHEMA[TOPIC], PARTITIONS_SCHEMA[PARTITION]])


def changed_states(current: DataFrame, new: DataFrame) -> DataFrame:
    """Rows of ``new`` whose leader, epochs or ISR differ from ``current`` (or are absent there)."""
    data = [LEADER, LEADER_EPOCH, ISR, CONTROLLER_EPOCH]
    old = current.select(TOPIC, PARTITION, *[F.col(c).alias(f"_old_{c}") for c in data])
    joined = new.join(old, [TOPIC, PARTITION], "left")
    same = F.lit(True)
    for c in data:
        same = same & F.col(c).eqNullSafe(F.col(f"_old_{c}"))
    return joined.filter(~same).select(*new.columns)


def arrow_rows(df: DataFrame, batch_rows: int = 20_000) -> Iterator[Any]:
    """Rows of ``df`` as tuples, built one Arrow batch at a time (only changed rows come here)."""
    table = df.toArrow()
    for batch in table.to_batches(max_chunksize=batch_rows):
        yield from zip(
            *(batch.column(i).to_pylist() for i in range(batch.num_columns)), strict=True
        )


class PartitionStateStore(Protocol):
    """Bulk reads and fenced bulk writes of partition states; see the module docstring."""

    def read_states(
        self, spark: SparkSession, selection: DataFrame | None = None, rows: int | None = None
    ) -> DataFrame:
        """``rows`` is the row count of ``selection`` when the caller knows it (the emulated
        store counts the reads by it)."""
        ...

    def write_states(
        self, states: DataFrame, expected_epoch_zk_version: int, rows: int | None = None
    ) -> DataFrame:
        """``rows`` is the row count of ``states`` when the caller knows it."""
        ...

    def write_state_rows(
        self, rows: Sequence[StateRow], expected_epoch_zk_version: int
    ) -> list[tuple[StateRow, str]]:
        """``write_states`` for rows on the driver (the driver path's commits): the failed rows
        with their error codes."""
        ...

    def prefetch(self, keys: Sequence[tuple[str, int]]) -> None: ...


def with_writes(states: DataFrame) -> DataFrame:
    """``states`` checked against ``STATES_SCHEMA``, in its column order, with ``writes``
    (1 where absent)."""
    check_schema(states.drop(WRITES), STATES_SCHEMA, "partition states")
    writes = F.col(WRITES) if WRITES in states.columns else F.lit(1)
    return states.select(*STATE_COLUMNS, writes.cast("int").alias(WRITES))
