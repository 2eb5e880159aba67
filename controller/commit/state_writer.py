"""Mirror a committed generation's changed partition states into ZooKeeper (fenced, bulk)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from controller.commit.diff import PREV, prev
from controller.partition_store.states import STATE_COLUMNS, WRITES, PartitionStateStore
from statemachines import schemas as s
from statemachines.layout import to_public_partitions

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StateWrites:
    """What one event's diff changed: partitions (any column) and state-znode writes."""

    partitions_changed: int
    znode_writes: int


def write_totals() -> tuple[Column, ...]:
    """What ``write_changed_states`` reads off a diff: rows changed, state rows and znode
    writes to mirror (a caller passing over the diff anyway aggregates them with its own)."""
    return (
        F.count(F.lit(1)).alias("changed"),
        F.count_if(_written()).alias("rows"),
        F.sum(F.when(_written(), F.col(s.ZK_VERSION) - _old())).alias("writes"),
    )


def _old() -> Column:
    return F.coalesce(F.col(prev(s.ZK_VERSION)), F.lit(s.NO_ZK_VERSION))


def _written() -> Column:
    return F.col(s.ZK_VERSION).isNotNull() & (F.col(s.ZK_VERSION) != _old())


def write_changed_states(
    store: PartitionStateStore | None,
    topics: DataFrame,
    diff: DataFrame,
    epoch_zk_version: int,
    totals: Mapping[str, Any],
) -> StateWrites:
    """Mirror the partitions whose state znode changed into ZooKeeper (fenced, bulk).

    ``diff`` is the event's ``generation_diff``; ``totals``, its ``write_totals`` (aggregated
    by the caller in its pass over the diff). A partition written d times in one event (an
    election, then ISR removals) goes out as d conditional writes, so its znode version matches
    ``zk_version`` as in Kafka. Rows of deleted partitions are not written here. Without a
    ``store`` (the states came from ZooKeeper) nothing is written and the writes count 0.
    """
    old, written = _old(), _written()
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
