"""Mirror a committed generation's changed partition states into ZooKeeper (fenced, bulk)."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from controller.diff import PREV, prev
from controller.zk.partition_store import STATE_COLUMNS, WRITES, PartitionStateStore
from statemachines import schemas as s
from statemachines.layout import to_public_partitions

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StateWrites:
    """What one event's diff changed: partitions (any column) and state-znode writes."""

    partitions_changed: int
    znode_writes: int


def write_changed_states(
    store: PartitionStateStore | None,
    topics: DataFrame,
    diff: DataFrame,
    epoch_zk_version: int,
) -> StateWrites:
    """Mirror the partitions whose state znode changed into ZooKeeper (fenced, bulk).

    ``diff`` is the event's ``generation_diff``. A partition written d times in one event (an
    election, then ISR removals) goes out as d conditional writes, so its znode version matches
    ``zk_version`` as in Kafka. Rows of deleted partitions are not written here. Without a
    ``store`` (the states came from ZooKeeper) nothing is written and the writes count 0.
    """
    old = F.coalesce(F.col(prev(s.ZK_VERSION)), F.lit(s.NO_ZK_VERSION))
    written = F.col(s.ZK_VERSION).isNotNull() & (F.col(s.ZK_VERSION) != old)
    totals = diff.agg(
        F.count(F.lit(1)).alias("changed"),
        F.count_if(written).alias("rows"),
        F.sum(F.when(written, F.col(s.ZK_VERSION) - old)).alias("writes"),
    ).first()
    assert totals is not None
    if store is None or not totals["rows"]:
        return StateWrites(int(totals["changed"]), 0)
    changed = diff.where(written).select(
        *[c for c in diff.columns if not c.startswith(PREV)],
        old.alias("_old"),
        (F.col(s.ZK_VERSION) - old).alias(WRITES),
    )
    w = s.width(changed)
    public = to_public_partitions(
        changed.select(*s.compact_columns(w), "_old", WRITES), topics, ("_old", WRITES)
    )
    states = public.select(
        *[c for c in STATE_COLUMNS if c != s.ZK_VERSION], F.col("_old").alias(s.ZK_VERSION), WRITES
    )
    failed = store.write_states(states, epoch_zk_version, rows=int(totals["rows"]))
    if failed.take(1):
        log.warning("some partition-state writes failed")
    return StateWrites(int(totals["changed"]), int(totals["writes"]))
