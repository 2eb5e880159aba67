"""Kafka's own answer: ``kafka-reassign-partitions.sh --generate`` over the cluster's topics.

``ReassignPartitionsCommand.calculateAssignment`` places every listed topic afresh with
``AdminUtils.assignReplicasToBrokers(brokers, partitionCount, replicationFactor)`` (spec §9.3)
over the ``--broker-list`` brokers, rack-aware when every one has a rack (§9.4), with a new
``java.util.Random`` start index and shift per topic. Here the placement is
``statemachines.assignment.with_assigned_replicas`` and the two draws are hashes of (seed, topic,
draw), so the same seed gives the same proposal. Each row keeps its own RF (Kafka takes one
partition's RF for the whole topic; they differ only after a reassignment changed some).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from statemachines import schemas as s
from statemachines.assignment import (
    REPLICA_SHIFT,
    START_INDEX,
    BrokerMetadata,
    RackAwareMode,
    get_broker_metadatas,
    with_assigned_replicas,
)

GENERATED = "generated_replicas"
START_DRAW = 0
SHIFT_DRAW = 1


def generate_brokers(
    brokers: Iterable[int], racks: Mapping[int, str | None]
) -> list[BrokerMetadata]:
    """The ``--broker-list`` as the tool reads it: sorted by id, racks only if all have one."""
    return get_broker_metadatas(
        [BrokerMetadata(b, racks.get(b)) for b in brokers], RackAwareMode.SAFE
    )


def topic_draw(seed: int | Column, draw: int, n_brokers: int) -> Column:
    """A stand-in for one of Kafka's per-topic ``rand.nextInt(n)`` calls (``seed`` a number, or
    a Column to draw for many seeds at once)."""
    seed_col = seed if isinstance(seed, Column) else F.lit(seed)
    hashed = F.xxhash64(seed_col.cast("long"), F.col(s.TOPIC), F.lit(draw).cast("int"))
    return F.pmod(hashed, F.lit(n_brokers)).cast("int")


def with_generated(
    partitions: DataFrame,
    brokers: Sequence[BrokerMetadata],
    replication_factors: Iterable[int],
    seed: int,
) -> DataFrame:
    """``partitions`` plus ``generated_replicas``: Kafka's ``--generate`` placement of each row.

    ``replication_factors`` are the RFs present (one placement call each, as RF is fixed per
    call); the caller checks they do not exceed the broker count. No job runs.
    """
    n = len(brokers)
    drawn = partitions.withColumns(
        {
            START_INDEX: topic_draw(seed, START_DRAW, n),
            REPLICA_SHIFT: topic_draw(seed, SHIFT_DRAW, n),
        }
    )
    parts = []
    for rf in sorted(set(replication_factors)):
        rows = drawn.where(F.size(s.REPLICAS) == rf).withColumnRenamed(s.REPLICAS, "_current")
        placed = with_assigned_replicas(rows, brokers, rf)
        parts.append(
            placed.withColumnRenamed(s.REPLICAS, GENERATED).withColumnRenamed(
                "_current", s.REPLICAS
            )
        )
    if not parts:
        return partitions.withColumn(GENERATED, F.col(s.REPLICAS))
    joined = reduce(lambda a, b: a.unionByName(b), parts)
    return joined.drop(START_INDEX, REPLICA_SHIFT)


@dataclass(frozen=True)
class PlacementFigures:
    """Per-broker counts after a placement and how much it moves."""

    replicas_after: dict[int, int]
    leaders_after: dict[int, int]
    replicas_moved: int
    partitions_moved: int
    leaders_moved: int
    bytes_moved: int


def placement_figures(frame: DataFrame, before: str, after: str) -> PlacementFigures:
    """Figures of the ``after`` array column against ``before`` (and ``bytes`` if present), in
    one job: per-partition figures ride on the first replica's row of the exploded table."""
    added = F.size(F.array_except(F.col(after), F.col(before)))
    size = F.col("bytes") if "bytes" in frame.columns else F.lit(0)
    per_partition = frame.select(
        F.posexplode(after).alias("_pos", s.BROKER),
        added.alias("_added"),
        (F.get(F.col(after), 0) != F.get(F.col(before), 0)).cast("long").alias("_lead"),
        (added * size).alias("_bytes"),
    )
    first = F.col("_pos") == 0
    rows = (
        per_partition.groupBy(s.BROKER)
        .agg(
            F.count(F.lit(1)).alias("n"),
            F.sum(first.cast("long")).alias("lead"),
            F.sum(F.when(first, F.col("_added"))).alias("moved"),
            F.sum(F.when(first, (F.col("_added") > 0).cast("long"))).alias("partitions"),
            F.sum(F.when(first, F.col("_lead"))).alias("leaders_moved"),
            F.sum(F.when(first, F.col("_bytes"))).alias("bytes"),
        )
        .collect()
    )

    def total(name: str) -> int:
        return sum(int(r[name] or 0) for r in rows)

    return PlacementFigures(
        replicas_after={r[s.BROKER]: int(r["n"]) for r in rows},
        leaders_after={r[s.BROKER]: int(r["lead"]) for r in rows if r["lead"]},
        replicas_moved=total("moved"),
        partitions_moved=total("partitions"),
        leaders_moved=total("leaders_moved"),
        bytes_moved=total("bytes"),
    )
