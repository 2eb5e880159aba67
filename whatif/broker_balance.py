"""Per-broker leader and replica counts and Kafka's imbalance ratio over the public partitions table.

Every what-if question that moves leaders or replicas reports them per broker, before and after;
this module is the one place they are counted. The imbalance ratio is spec §11.2's, computed by
``statemachines.rebalance.imbalance_ratios`` over a three-column view of the public table:

    ratio(b) = |{p : replicas(p)[0] = b, p has leadership, leader(p) ≠ b}|
               / |{p : replicas(p)[0] = b}|

"Has leadership" is a state znode (``zk_version`` ≠ -1): a partition whose leader is -1 after a
failure still counts in the numerator, as in Kafka. Partitions of topics queued for deletion
(``deleting``) are left out, as ``checkAndTriggerAutoLeaderRebalance`` leaves them out. Auto-rebalance
fires for a broker whose ratio is strictly above ``leader.imbalance.per.broker.percentage`` / 100.

The DataFrame functions are lazy; the ``dict`` ones run one small job and return per-broker values
keyed by broker id, with 0 for every broker of ``brokers`` that has none.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from statemachines import rebalance
from statemachines import schemas as s
from statemachines.columns import has_leadership
from whatif.isr_rules import DELETING

BROKER = s.BROKER
LEADERS = "leaders"
REPLICAS = "replicas"
PREFERRED = rebalance.TOTAL  # partitions whose preferred (first) replica is the broker
NOT_PREFERRED = rebalance.NOT_PREFERRED
RATIO = rebalance.RATIO


def deleting(partitions: DataFrame) -> Column:
    """True for a row of a topic queued for deletion: the table's ``deleting`` column
    (``isr_rules.with_topic_configs``, ``WhatIfCluster.being_deleted``) where it has one, else
    leader -2 (``LeaderAndIsr.duringDelete``)."""
    if DELETING in partitions.columns:
        return F.col(DELETING)
    return F.col(s.LEADER) == s.LEADER_DURING_DELETE


def leaders_per_broker(partitions: DataFrame, leader: str = s.LEADER) -> DataFrame:
    """(broker, leaders): partitions led by each broker that leads any, by the ``leader``
    column (the public ``leader`` unless another column of the table is named)."""
    led = partitions.where(F.col(leader) >= 0)
    return led.groupBy(F.col(leader).alias(BROKER)).agg(F.count(F.lit(1)).alias(LEADERS))


def replicas_per_broker(partitions: DataFrame) -> DataFrame:
    """(broker, replicas): replicas held by each broker that holds any."""
    held = partitions.select(F.explode(s.REPLICAS).alias(BROKER))
    return held.groupBy(BROKER).agg(F.count(F.lit(1)).alias(REPLICAS))


def preferred_imbalance(partitions: DataFrame, leader: str = s.LEADER) -> DataFrame:
    """(broker, partitions, not_preferred_leader, imbalance_ratio) per preferred broker (§11.2),
    with the leader read from the ``leader`` column."""
    compact_view = partitions.select(
        F.coalesce(F.get(F.col(s.REPLICAS), 0), F.lit(s.EMPTY_SLOT)).alias(s.replica_col(0)),
        F.col(leader).alias(s.LEADER),
        F.col(s.ZK_VERSION),
        deleting(partitions).alias(DELETING),
    )
    return rebalance.imbalance_ratios(compact_view, excluded=F.col(DELETING))


def broker_counts(partitions: DataFrame, leaders: Sequence[str] = (s.LEADER,)) -> DataFrame:
    """Every per-broker count in one pass over the replicas: (broker, replicas, partitions) and,
    for each leader column ``c`` of ``leaders``, ``c_leaders`` (partitions it leads by ``c``) and
    ``c_not_preferred`` (§11.2's numerator with the leader read from ``c``), for every broker
    holding a replica. ``partitions`` counts the partitions it is the preferred replica of
    (§11.2's denominator); partitions of topics queued for deletion are left out of both, as
    in ``preferred_imbalance`` (a test checks they agree)."""
    broker, position = F.col(BROKER), F.col("_position")
    rows = partitions.select(
        F.posexplode(s.REPLICAS).alias("_position", BROKER),
        deleting(partitions).alias("_deleting"),
        has_leadership().alias("_has_leadership"),
        *[F.col(c) for c in dict.fromkeys(leaders)],
    )
    preferred = (position == 0) & ~F.col("_deleting")
    sums = [
        F.count(F.lit(1)).alias(REPLICAS),
        F.sum(preferred.cast("long")).alias(PREFERRED),
    ]
    for c in leaders:
        not_preferred = preferred & F.col("_has_leadership") & (F.col(c) != broker)
        sums.append(F.sum((F.col(c) == broker).cast("long")).alias(f"{c}_{LEADERS}"))
        sums.append(F.sum(not_preferred.cast("long")).alias(f"{c}_{NOT_PREFERRED}"))
    return rows.groupBy(BROKER).agg(*sums)


def ratio(not_preferred: int, preferred: int) -> float:
    """§11.2's ratio from its two counts; 0.0 for a broker preferred for no partition."""
    return not_preferred / preferred if preferred else 0.0


def imbalance_ratios(partitions: DataFrame, brokers: Iterable[int] = ()) -> dict[int, float]:
    """§11.2's ratio of every broker that is the preferred replica of some partition, and 0.0
    for each broker of ``brokers`` that is the preferred replica of none (one job)."""
    rows = preferred_imbalance(partitions).select(BROKER, RATIO).collect()
    ratios = {int(b): 0.0 for b in brokers}
    ratios.update({int(r[BROKER]): float(r[RATIO]) for r in rows})
    return dict(sorted(ratios.items()))


def over_threshold(ratios: Mapping[int, float], percentage: int) -> list[int]:
    """The brokers whose ratio is strictly above ``percentage`` / 100 (Kafka's comparison)."""
    return sorted(b for b, r in ratios.items() if r > percentage / 100)


def counts(rows: DataFrame, value: str, brokers: Iterable[int] = ()) -> dict[int, int]:
    """A (broker, ``value``) frame collected as broker → count, 0 for absent ``brokers``."""
    found = {int(r[BROKER]): int(r[value]) for r in rows.select(BROKER, value).collect()}
    return dict(sorted(({int(b): 0 for b in brokers} | found).items()))


def by_broker_id(values: Mapping[int, object]) -> dict[str, object]:
    """Broker-keyed values as summary.json writes them: ascending ids, as strings."""
    return {str(b): values[b] for b in sorted(values)}
