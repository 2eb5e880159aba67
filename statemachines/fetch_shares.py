"""How a broker's fetch throughput is shared (``replication.Motion.fetch_rate``): per broker,
what its followers at the leader's end need, how many are behind, how many it follows."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from statemachines import schemas as s
from statemachines.replication import _LEADER_LEO, Conditions, Motion, _lookup, leo_col

BROKER_DEMAND = "demand"
BROKER_BEHIND = "behind"
BROKER_FOLLOWED = "followed"


def fetch_stats(table: DataFrame, c: Conditions) -> DataFrame:
    """Per broker: the bytes/s its followers at the leader's end need, how many followers are
    behind, and how many it follows, under ``c`` (one row per broker that follows anything)."""
    w = s.width(table)
    m = Motion(c, w)
    table = m.prepare(table)
    leader_leo = F.col(_LEADER_LEO)
    rate = m.rate
    size = _lookup(c.bytes_per_record, "int", F.col(s.TOPIC_INDEX))
    slots = F.array(
        *[
            F.struct(
                F.col(s.replica_col(k)).alias("b"),
                (F.col(leo_col(k)) >= leader_leo).alias("end"),
            )
            for k in range(w)
        ]
    )
    fetchers = F.filter(
        F.array(*[F.when(m.fetching(k), F.get(slots, k)) for k in range(w)]),
        lambda x: x.isNotNull(),
    )
    rows = table.select(F.explode(fetchers).alias("f"), (rate * size).alias("_need"))
    return rows.groupBy(F.col("f.b").alias(s.BROKER)).agg(
        F.sum(F.when(F.col("f.end"), F.col("_need")).otherwise(0.0)).alias(BROKER_DEMAND),
        F.sum((~F.col("f.end")).cast("long")).alias(BROKER_BEHIND),
        F.count(F.lit(1)).alias(BROKER_FOLLOWED),
    )
