"""Preferred-replica imbalance (spec §11.2, §11.3) as DataFrame transforms.

The per-broker ratio is what the auto leader rebalance compares against
``leader.imbalance.per.broker.percentage`` (strictly greater triggers). One pass over three int
columns of the compact table and a tiny aggregation keyed by broker.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from statemachines import schemas as s
from statemachines.columns import has_leadership

PREFERRED = "broker"
TOTAL = "partitions"
NOT_PREFERRED = "not_preferred_leader"
RATIO = "imbalance_ratio"


def _not_preferred() -> Column:
    preferred = F.col(s.replica_col(0))
    return has_leadership() & (F.col(s.LEADER) != preferred)


def imbalance_ratios(partitions: DataFrame, excluded: Column | None = None) -> DataFrame:
    """(broker, partitions, not_preferred_leader, imbalance_ratio) per preferred broker.

    ``excluded`` marks rows left out entirely (Kafka leaves out topics queued for deletion).
    """
    df = partitions.where(F.col(s.replica_col(0)) != s.EMPTY_SLOT)
    if excluded is not None:
        df = df.where(~F.coalesce(excluded, F.lit(False)))
    grouped = df.groupBy(F.col(s.replica_col(0)).alias(PREFERRED)).agg(
        F.sum(F.lit(1)).cast("int").alias(TOTAL),
        F.sum(_not_preferred().cast("int")).cast("int").alias(NOT_PREFERRED),
    )
    return grouped.withColumn(RATIO, F.col(NOT_PREFERRED) / F.col(TOTAL))


def preferred_replica_imbalance(w: int, excluded: Column | None = None) -> Column:
    """Kafka's PreferredReplicaImbalanceCount over a compact table of width ``w``, as an
    aggregate Column (§11.3), for a metrics job.

    A partition being reassigned whose preferred replica is still an adding replica counts only
    once that replica is in the ISR.
    """
    preferred = F.col(s.replica_col(0))
    adding_head = F.col(s.ADDING_MASK).bitwiseAND(F.lit(1)) != 0
    head_in_isr = F.lit(False)
    for k in range(w):
        head_in_isr = head_in_isr | (F.col(s.isr_col(k)) == preferred)
    has_leader = has_leadership() & (F.col(s.LEADER) != preferred)
    counted = has_leader & (~adding_head | head_in_isr)
    if excluded is not None:
        counted = counted & ~F.coalesce(excluded, F.lit(False))
    return F.sum(counted.cast("int"))
