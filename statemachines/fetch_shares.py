"""How a broker's fetch throughput is shared (``replication.Motion.fetch_rate``): per broker,
what its followers at the leader's end need, how many are behind, how many it follows, grouped
by the replication throttles that count their bytes and whether they can hold them back
(``replication_throttles``)."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from statemachines import replication_throttles as rt
from statemachines import schemas as s
from statemachines.replication import _LEADER_LEO, Conditions, Motion, _lookup, in_isr, leo_col

BROKER_DEMAND = "demand"
BROKER_BEHIND = "behind"
BROKER_FOLLOWED = "followed"
THROTTLED_LEADER = "throttled_leader"  # the leader whose rate counts the group, or NO_LEADER
THROTTLED_FOLLOWER = "throttled_follower"  # the follower broker's rate counts the group
HELD = "held"  # the rates that count the group can hold it back (it lags outside the ISR)


def fetch_stats(table: DataFrame, c: Conditions) -> DataFrame:
    """Per broker that follows anything and per group of its followers by throttle (broker,
    ``THROTTLED_LEADER``, ``THROTTLED_FOLLOWER``, ``HELD``): the bytes/s its followers at the
    leader's end need, how many followers are behind, and how many it follows, under ``c``.
    Without throttled replicas, one group per broker (NO_LEADER, false, false)."""
    w = s.width(table)
    m = Motion(c, w)
    table = m.prepare(table)
    leader_leo = F.col(_LEADER_LEO)
    rate = m.rate
    size = _lookup(c.bytes_per_record, "int", F.col(s.TOPIC_INDEX))
    slots = []
    for k in range(w):
        broker = s.replica_col(k)
        end = F.col(leo_col(k)) >= leader_leo
        slot = F.struct(
            F.col(broker).alias("b"),
            end.alias("end"),
            rt.counting_leader(c.throttles).alias("led"),
            rt.counting_follower(c.throttles, broker).alias("follows"),
            rt.held(c.throttles, ~end & ~in_isr(k, w)).alias("held"),
        )
        slots.append(F.when(m.fetching(k), slot))
    fetchers = F.filter(F.array(*slots), lambda x: x.isNotNull())
    rows = table.select(F.explode(fetchers).alias("f"), (rate * size).alias("_need"))
    return rows.groupBy(
        F.col("f.b").alias(s.BROKER),
        F.col("f.led").alias(THROTTLED_LEADER),
        F.col("f.follows").alias(THROTTLED_FOLLOWER),
        F.col("f.held").alias(HELD),
    ).agg(
        F.sum(F.when(F.col("f.end"), F.col("_need")).otherwise(0.0)).alias(BROKER_DEMAND),
        F.sum((~F.col("f.end")).cast("long")).alias(BROKER_BEHIND),
        F.count(F.lit(1)).alias(BROKER_FOLLOWED),
    )
