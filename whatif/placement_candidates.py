"""The placement planner's Spark side: per-broker counts and the candidate replicas it samples.

Spark aggregates the replicas and preferred leaders per broker (``broker_stats``) and samples, per
broker, the share of its replicas (``sample_replicas``) or of the partitions it leads
(``sample_led``) that ``whatif.planner`` asks for. The sample is a hash of seed, partition and
broker, so it is deterministic, and it needs no shuffle: the driver gets only the candidates.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from statemachines import schemas as s
from whatif.placement_greedy import PartitionKey

_BYTES = "bytes"
_U = "_sample_u"
_POS = "_pos"
_HASH_RANGE = 1 << 30


@dataclass(frozen=True)
class BrokerStats:
    """What ``broker_stats`` collects: replicas and preferred leaders per broker, the partition
    count and the replication factors present."""

    replicas: dict[int, int]
    leaders: dict[int, int]
    partitions: int
    replication_factors: frozenset[int]


def broker_stats(partitions: DataFrame) -> BrokerStats:
    """Replicas and preferred leaders per broker, the partition count and the RFs (one job)."""
    rows = (
        partitions.select(
            F.posexplode(s.REPLICAS).alias(_POS, s.BROKER), F.size(s.REPLICAS).alias("rf")
        )
        .groupBy(s.BROKER, "rf")
        .agg(F.count(F.lit(1)).alias("n"), F.sum((F.col(_POS) == 0).cast("long")).alias("lead"))
        .collect()
    )
    replicas: Counter[int] = Counter()
    leaders: Counter[int] = Counter()
    for row in rows:
        replicas[row[s.BROKER]] += row["n"]
        leaders[row[s.BROKER]] += row["lead"]
    return BrokerStats(
        dict(replicas), dict(leaders), sum(leaders.values()), frozenset(r["rf"] for r in rows)
    )


def with_bytes(partitions: DataFrame, sizes: DataFrame | None) -> DataFrame:
    """topic, partition, replicas, bytes (0 where the sizes file has no row)."""
    base = partitions.select(s.TOPIC, s.PARTITION, s.REPLICAS)
    if sizes is None:
        return base.withColumn(_BYTES, F.lit(0).cast("long"))
    sized = sizes.select(s.TOPIC, s.PARTITION, F.col(_BYTES).cast("long"))
    return base.join(sized, [s.TOPIC, s.PARTITION], "left").fillna(0, [_BYTES])


def _fraction_column(broker: Column, fractions: Mapping[int, float]) -> Column:
    pairs: list[Column] = []
    for b, f in sorted(fractions.items()):
        pairs += [F.lit(b), F.lit(float(f))]
    return F.coalesce(F.element_at(F.create_map(*pairs), broker), F.lit(0.0))


def _u(seed: int, broker: Column) -> Column:
    h = F.xxhash64(F.lit(seed).cast("long"), F.col(s.TOPIC), F.col(s.PARTITION), broker)
    return (F.pmod(h, F.lit(_HASH_RANGE)) / F.lit(float(_HASH_RANGE))).alias(_U)


def sample_replicas(
    sized: DataFrame, fractions: Mapping[int, float], seed: int
) -> list[tuple[int, PartitionKey, list[int], int, float]]:
    """(broker, key, replicas, bytes, u) for a deterministic ``fractions[broker]`` share of each
    broker's replicas; no shuffle, one job."""
    if not fractions:
        return []
    exploded = sized.select("*", F.explode(s.REPLICAS).alias(s.BROKER))
    u = _u(seed, F.col(s.BROKER))
    picked = exploded.select("*", u).where(F.col(_U) < _fraction_column(F.col(s.BROKER), fractions))
    table = picked.select(s.BROKER, s.TOPIC, s.PARTITION, s.REPLICAS, _BYTES, _U).toArrow()
    cols = [table.column(i).to_pylist() for i in range(table.num_columns)]
    return [(b, (t, p), r, n, x) for b, t, p, r, n, x in zip(*cols, strict=True)]


def sample_led(
    sized: DataFrame, fractions: Mapping[int, float], seed: int
) -> list[tuple[PartitionKey, list[int], int]]:
    """(key, replicas, bytes) for a ``fractions[leader]`` share of the partitions each broker
    leads (preferred leader = first replica)."""
    if not fractions:
        return []
    leader = F.get(F.col(s.REPLICAS), 0)
    picked = sized.where(_u(seed + 1, leader) < _fraction_column(leader, fractions))
    table = picked.select(s.TOPIC, s.PARTITION, s.REPLICAS, _BYTES).toArrow()
    cols = [table.column(i).to_pylist() for i in range(table.num_columns)]
    return [((t, p), r, n) for t, p, r, n in zip(*cols, strict=True)]
