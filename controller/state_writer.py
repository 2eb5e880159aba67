"""Mirror a committed generation's changed partition states into ZooKeeper (fenced, bulk)."""

from __future__ import annotations

import logging

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from controller.zk.partition_store import STATE_COLUMNS, PartitionStateStore
from statemachines import schemas as s
from statemachines.layout import to_public_partitions

log = logging.getLogger(__name__)


def write_changed_states(
    store: PartitionStateStore,
    topics: DataFrame,
    previous: DataFrame | None,
    new: DataFrame,
    epoch_zk_version: int,
) -> int:
    """Mirror the partitions whose state znode changed into ZooKeeper (fenced, bulk).

    A partition written d times in one event (an election, then ISR removals) goes out in d
    conditional writes, so its znode version matches ``zk_version`` as in Kafka.
    """
    if previous is None:
        return 0
    old = previous.select(s.TOPIC_INDEX, s.PARTITION, F.col(s.ZK_VERSION).alias("_old"))
    joined = new.join(old, [s.TOPIC_INDEX, s.PARTITION], "left").withColumn(
        "_old", F.coalesce(F.col("_old"), F.lit(s.NO_ZK_VERSION))
    )
    changed = joined.where(F.col(s.ZK_VERSION) != F.col("_old")).withColumn(
        "_writes", F.col(s.ZK_VERSION) - F.col("_old")
    )
    rounds = changed.agg(F.max("_writes").alias("n"), F.count(F.lit(1)).alias("rows")).first()
    assert rounds is not None
    for r in range(1, int(rounds["n"] or 0) + 1):
        batch = changed.where(F.col("_writes") >= r)
        public = to_public_partitions(
            batch.select(*s.compact_columns(s.width(new)), "_old"), topics, ("_old",)
        )
        states = public.select(
            *[c for c in STATE_COLUMNS if c != s.ZK_VERSION],
            (F.col("_old") + (r - 1)).alias(s.ZK_VERSION),
        ).select(*STATE_COLUMNS)
        failed = store.write_states(states, epoch_zk_version)
        if failed.limit(1).count():
            log.warning("some partition-state writes failed")
    return int(rounds["rows"] or 0)
