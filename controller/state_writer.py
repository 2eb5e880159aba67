"""Mirror a committed generation's changed partition states into ZooKeeper (fenced, bulk)."""

from __future__ import annotations

import logging

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from controller.diff import PREV, prev
from controller.zk.partition_store import STATE_COLUMNS, PartitionStateStore
from statemachines import schemas as s
from statemachines.layout import to_public_partitions

log = logging.getLogger(__name__)


def write_changed_states(
    store: PartitionStateStore,
    topics: DataFrame,
    diff: DataFrame,
    epoch_zk_version: int,
) -> int:
    """Mirror the partitions whose state znode changed into ZooKeeper (fenced, bulk).

    ``diff`` is the event's ``generation_diff``. A partition written d times in one event (an
    election, then ISR removals) goes out in d conditional writes, so its znode version matches
    ``zk_version`` as in Kafka. Rows of deleted partitions are not written here.
    """
    old = F.coalesce(F.col(prev(s.ZK_VERSION)), F.lit(s.NO_ZK_VERSION))
    changed = diff.where(F.col(s.ZK_VERSION).isNotNull() & (F.col(s.ZK_VERSION) != old)).select(
        *[c for c in diff.columns if not c.startswith(PREV)],
        old.alias("_old"),
        (F.col(s.ZK_VERSION) - old).alias("_writes"),
    )
    rounds = changed.agg(F.max("_writes").alias("n"), F.count(F.lit(1)).alias("rows")).first()
    assert rounds is not None
    w = s.width(changed)
    for r in range(1, int(rounds["n"] or 0) + 1):
        batch = changed.where(F.col("_writes") >= r)
        public = to_public_partitions(
            batch.select(*s.compact_columns(w), "_old"), topics, ("_old",)
        )
        states = public.select(
            *[c for c in STATE_COLUMNS if c != s.ZK_VERSION],
            (F.col("_old") + (r - 1)).alias(s.ZK_VERSION),
        ).select(*STATE_COLUMNS)
        failed = store.write_states(states, epoch_zk_version)
        if failed.limit(1).count():
            log.warning("some partition-state writes failed")
    return int(rounds["rows"] or 0)
