"""``kce whatif exposure``: copyset data-loss exposure of the replica placement, and its failure
domains, beside what Kafka's ``--generate`` placement of the same topics would give.

A partition loses data when every broker holding one of its replicas fails. Which partitions a
set of failed brokers destroys depends only on the distinct replica sets ("copysets"): the fewer
distinct sets, the fewer failure combinations lose anything. Figures:

* ``distinct_replica_sets``: how many distinct sets of brokers hold a partition.
* ``p_loss[K]`` for K = each replication factor present: the probability that K brokers failing
  together, every K-subset of the cluster's brokers equally likely, destroy some partition of
  replication factor K. A K-set destroys an RF-K partition exactly when it *is* that
  partition's replica set, so ``p_loss[K] = (distinct replica sets of size K) / C(n, K)`` —
  exact, in integers. Partitions of a lower replication factor that the same K-set would also
  destroy are counted under their own K, not here: counting the K-sets that contain any smaller
  set is an inclusion–exclusion over the sets and is left out on purpose. ``loss_sets[K]`` is
  the numerator. ``n`` is every broker of the snapshot (live, or named in a replica list).
* ``rack_loss``: rack → partitions offline if every broker of the rack fails, as ``fail --rack``
  counts them (``isr_rules.rack_loss``: the whole live ISR in the rack and unclean election off,
  or every live replica in it); for ``--generate``'s placement every replica is in sync.
* Failure domains (``whatif.colocation``): connected components of the broker co-location graph
  and, per broker, how many other brokers share a partition with it (``brokers_touched``).

``kafka_generate`` holds the same figures for ``kafka-reassign-partitions.sh --generate`` run
over every topic on the live brokers: Kafka's ``assignReplicasToBrokers`` per topic
(``statemachines.assignment``), each topic's two random draws taken in topic order from a
``random.Random(seed)``, racks used when every live broker has one (Kafka's tool would refuse a
partly racked cluster; here such a cluster is placed rack-unaware).

The distinct replica sets are aggregated in Spark and collected (at most one per partition, in
practice far fewer); the combinatorics run on the driver over them.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, IntegerType, StringType, StructField, StructType

from html_report.charts import distribution
from html_report.page import Section
from statemachines import schemas as s
from statemachines.assignment import (
    START_INDEX,
    RackAwareMode,
    get_broker_metadatas,
    with_assigned_replicas,
)
from whatif.answer import Answer
from whatif.cluster import WhatIfCluster, WhatIfInputError
from whatif.colocation import FailureDomains, failure_domains
from whatif.isr_rules import rack_loss, with_topic_configs
from whatif.options import ExposureOptions

PARTITIONS = "partitions"
RF = "replication_factor"
SHIFT = "shift"
GENERATED = "kafka_generate_replicas"

_TOPIC_DRAWS_SCHEMA = StructType(
    [
        StructField(s.TOPIC, StringType(), nullable=False),
        StructField(RF, IntegerType(), nullable=False),
        StructField(START_INDEX, IntegerType(), nullable=False),
        StructField(SHIFT, IntegerType(), nullable=False),
    ]
)


_SETS_SCHEMA = StructType(
    [StructField(s.REPLICAS, ArrayType(IntegerType(), containsNull=False), nullable=False)]
)


@dataclass(frozen=True)
class PlacementExposure:
    """The exposure figures of one placement over ``brokers`` (the universe failures draw from).

    ``replica_sets``: each distinct replica set (ascending ids) → partitions it holds;
    ``rack_loss``: rack → partitions offline if the rack fails (``isr_rules.rack_loss``).
    """

    brokers: tuple[int, ...]
    replica_sets: dict[tuple[int, ...], int]
    racks: dict[int, str | None]
    domains: FailureDomains
    rack_loss: dict[str, int] = field(default_factory=dict)

    @property
    def loss_sets(self) -> dict[int, int]:
        """K → the K-subsets of the brokers that destroy some partition of replication factor K
        (= the distinct replica sets of size K)."""
        return dict(sorted(Counter(len(r) for r in self.replica_sets).items()))

    @property
    def p_loss(self) -> dict[int, Fraction]:
        n = len(self.brokers)
        return {k: Fraction(c, math.comb(n, k)) for k, c in self.loss_sets.items()}

    def summary(self) -> dict[str, Any]:
        return {
            "distinct_replica_sets": len(self.replica_sets),
            "p_loss": {str(k): float(p) for k, p in self.p_loss.items()},
            "loss_sets": {str(k): c for k, c in self.loss_sets.items()},
            "rack_loss": self.rack_loss,
            "components": len(self.domains.components),
            "max_brokers_touched": self.domains.max_touched,
        }


def distinct_replica_sets(partitions: DataFrame) -> DataFrame:
    """(replicas, partitions): each distinct replica set, ids ascending, and how many partitions
    it holds. No job."""
    return partitions.groupBy(F.array_sort(F.array_distinct(s.REPLICAS)).alias(s.REPLICAS)).agg(
        F.count(F.lit(1)).alias(PARTITIONS)
    )


def placement_exposure(
    spark: SparkSession, cluster: WhatIfCluster, partitions: DataFrame, brokers: Sequence[int]
) -> PlacementExposure:
    """The figures of the placement in ``partitions``: the cluster's public table, or a
    (topic, partition, replicas) placement taken as complete (every replica in sync, the first
    leading)."""
    racks = cluster.racks
    rows = distinct_replica_sets(partitions).collect()
    collected = {tuple(int(b) for b in r[s.REPLICAS]): int(r[PARTITIONS]) for r in rows}
    universe = tuple(sorted(set(brokers).union(*collected)))
    # The label propagation reads the edges once per iteration: from the collected sets as a
    # local relation, not from the partitions again.
    sets = spark.createDataFrame(
        pa.table({s.REPLICAS: pa.array([list(r) for r in collected], pa.list_(pa.int32()))}),
        _SETS_SCHEMA,
    )
    domains = failure_domains(spark, sets, universe)
    if s.ISR not in partitions.columns:
        partitions = partitions.withColumns(
            {
                s.ISR: F.col(s.REPLICAS),
                s.LEADER: F.get(F.col(s.REPLICAS), 0),
                s.ZK_VERSION: F.lit(0),
            }
        )
    lost = rack_loss(with_topic_configs(cluster, partitions), cluster.brokers, racks)
    return PlacementExposure(
        universe, collected, {b: racks.get(b) for b in universe}, domains, lost
    )


def kafka_generate_placement(spark: SparkSession, cluster: WhatIfCluster, seed: int) -> DataFrame:
    """(topic, partition, replicas): ``--generate``'s placement of every topic of the cluster on
    its live brokers, each topic keeping its replication factor (that of its lowest partition).

    Raises ``WhatIfInputError`` when a topic's replication factor exceeds the live brokers
    (Kafka's tool refuses too).
    """
    brokers = cluster.brokers
    rows = (
        cluster.partitions.groupBy(s.TOPIC)
        .agg(F.min_by(F.size(s.REPLICAS), s.PARTITION).alias(RF))
        .collect()
    )
    rf_of = {str(r[s.TOPIC]): int(r[RF]) for r in rows}
    too_big = sorted(t for t, rf in rf_of.items() if rf > len(brokers))
    if too_big:
        raise WhatIfInputError(
            f"topic {too_big[0]} has replication factor {rf_of[too_big[0]]} but only "
            f"{len(brokers)} live brokers — --generate cannot place it"
        )
    metas = get_broker_metadatas([(b, cluster.racks.get(b)) for b in brokers], RackAwareMode.SAFE)
    rng = random.Random(seed)
    topics = sorted(rf_of)
    # Kafka draws the start index, then the shift, once per topic.
    draws = [(rng.randrange(len(brokers)), rng.randrange(len(brokers))) for _ in topics]
    table = pa.table(
        {
            s.TOPIC: pa.array(topics, pa.string()),
            RF: pa.array([rf_of[t] for t in topics], pa.int32()),
            START_INDEX: pa.array([d[0] for d in draws], pa.int32()),
            SHIFT: pa.array([d[1] for d in draws], pa.int32()),
        }
    )
    keyed = cluster.partitions.select(s.TOPIC, s.PARTITION).join(
        F.broadcast(spark.createDataFrame(table, _TOPIC_DRAWS_SCHEMA)), s.TOPIC
    )
    placed = [
        with_assigned_replicas(keyed.where(F.col(RF) == rf), metas, rf, shift=SHIFT)
        for rf in sorted(set(rf_of.values()))
    ]
    out = placed[0]
    for more in placed[1:]:
        out = out.unionByName(more)
    return out.select(s.TOPIC, s.PARTITION, s.REPLICAS)


def answer(spark: SparkSession, cluster: WhatIfCluster, options: ExposureOptions) -> Answer:
    """Copyset exposure, rack loss and failure domains, now and under Kafka's ``--generate``."""
    actual = placement_exposure(spark, cluster, cluster.partitions, cluster.brokers)
    summary: dict[str, Any] = {
        **actual.summary(),
        "brokers": len(actual.brokers),
        "brokers_touched": {str(b): t for b, t in actual.domains.touched.items()},
    }
    generated_frame: DataFrame | None = None
    generated: PlacementExposure | None = None
    not_generated = ""
    if not cluster.brokers:
        not_generated = "no live brokers to place on"
    else:
        try:
            generated_frame = kafka_generate_placement(spark, cluster, options.seed)
        except WhatIfInputError as err:
            not_generated = str(err)
    if generated_frame is not None:
        generated = placement_exposure(spark, cluster, generated_frame, actual.brokers)
    summary["kafka_generate"] = generated.summary() if generated is not None else None
    summary["failure_domains_engine"] = actual.domains.engine
    tables = _tables(spark, cluster, actual, generated, generated_frame)
    return Answer(
        question="exposure",
        summary=summary,
        lines=_lines(actual, generated, not_generated),
        tables=tables,
        sections=_sections(actual, generated),
    )


def _probability(p: Fraction) -> str:
    return f"{float(p):.4g}" if p else "0"


def _lines(
    actual: PlacementExposure, generated: PlacementExposure | None, not_generated: str
) -> list[str]:
    total = sum(actual.replica_sets.values())
    gen_sets = f" (Kafka --generate: {len(generated.replica_sets)})" if generated else ""
    lines = [
        f"{total} partitions on {len(actual.brokers)} brokers sit in "
        f"{len(actual.replica_sets)} distinct replica sets{gen_sets}."
    ]
    gen_p = generated.p_loss if generated else {}
    for k, p in actual.p_loss.items():
        other = f" (--generate: {_probability(gen_p[k])})" if k in gen_p else ""
        lines.append(
            f"P(some RF-{k} partition loses every replica | {k} random brokers fail) = "
            f"{_probability(p)}{other}."
        )
    lost = {r: n for r, n in actual.rack_loss.items() if n}
    if actual.rack_loss:
        lines.append(
            "Rack failure takes offline: "
            + (", ".join(f"{r}: {n} partitions" for r, n in lost.items()) or "no partition")
            + "."
        )
    gen_touch = f" (--generate: {generated.domains.max_touched})" if generated else ""
    lines.append(
        f"Failure domains: {len(actual.domains.components)} component(s); one broker's failure "
        f"touches up to {actual.domains.max_touched} other brokers{gen_touch}."
    )
    if not_generated:
        lines.append(f"No --generate comparison: {not_generated}.")
    return lines[:10]


def _sections(actual: PlacementExposure, generated: PlacementExposure | None) -> list[Section]:
    gen_p = generated.p_loss if generated else {}
    gen_sets = generated.loss_sets if generated else {}
    n = len(actual.brokers)
    loss_rows = [
        {
            "K (= RF)": k,
            "K-sets that lose data": c,
            "K-sets": math.comb(n, k),
            "P(loss)": float(actual.p_loss[k]),
            "--generate K-sets that lose data": gen_sets.get(k),
            "--generate P(loss)": float(gen_p[k]) if k in gen_p else None,
        }
        for k, c in actual.loss_sets.items()
    ]
    gen_rack = generated.rack_loss if generated else {}
    rack_rows = [
        {"rack": r, "partitions offline": n_lost, "--generate": gen_rack.get(r)}
        for r, n_lost in actual.rack_loss.items()
    ]
    sections = [
        Section(
            "Data-loss exposure",
            "K brokers fail together, every K-subset equally likely. A K-set destroys a "
            "partition of replication factor K when it is exactly that partition's replica "
            "set; partitions of a lower replication factor are counted under their own K.",
            tables=[loss_rows, *([rack_rows] if rack_rows else [])],
        )
    ]
    charts = [
        distribution(
            "Brokers touched by one broker's failure",
            Counter(actual.domains.touched.values()),
            "other brokers sharing a partition",
            ylabel="brokers",
        )
    ]
    if generated is not None:
        charts.append(
            distribution(
                "Brokers touched under Kafka's --generate placement",
                Counter(generated.domains.touched.values()),
                "other brokers sharing a partition",
                ylabel="brokers",
            )
        )
    gen_touched = generated.domains.touched if generated else {}
    gen_component = generated.domains.component if generated else {}
    broker_rows = [
        {
            "broker": b,
            "rack": actual.racks.get(b),
            "component": actual.domains.component[b],
            "brokers touched": actual.domains.touched[b],
            "--generate component": gen_component.get(b),
            "--generate brokers touched": gen_touched.get(b),
        }
        for b in actual.brokers
    ]
    sections.append(
        Section(
            "Failure domains",
            "Brokers are linked when they hold replicas of the same partition; a component is "
            "named by its smallest broker id.",
            charts=charts,
            tables=[broker_rows],
        )
    )
    return sections


_BROKERS_SCHEMA = StructType(
    [
        StructField(s.BROKER, IntegerType(), nullable=False),
        StructField("rack", StringType(), nullable=True),
        StructField("component", IntegerType(), nullable=False),
        StructField("brokers_touched", IntegerType(), nullable=False),
        StructField("kafka_generate_component", IntegerType(), nullable=True),
        StructField("kafka_generate_brokers_touched", IntegerType(), nullable=True),
    ]
)


def _tables(
    spark: SparkSession,
    cluster: WhatIfCluster,
    actual: PlacementExposure,
    generated: PlacementExposure | None,
    generated_frame: DataFrame | None,
) -> dict[str, DataFrame]:
    brokers = list(actual.brokers)
    gen_c = generated.domains.component if generated else {}
    gen_t = generated.domains.touched if generated else {}
    table = pa.table(
        {
            s.BROKER: pa.array(brokers, pa.int32()),
            "rack": pa.array([actual.racks.get(b) for b in brokers], pa.string()),
            "component": pa.array([actual.domains.component[b] for b in brokers], pa.int32()),
            "brokers_touched": pa.array([actual.domains.touched[b] for b in brokers], pa.int32()),
            "kafka_generate_component": pa.array([gen_c.get(b) for b in brokers], pa.int32()),
            "kafka_generate_brokers_touched": pa.array([gen_t.get(b) for b in brokers], pa.int32()),
        }
    )
    partitions = cluster.partitions.select(s.TOPIC, s.PARTITION, s.REPLICAS)
    if generated_frame is not None:
        partitions = partitions.join(
            generated_frame.withColumnRenamed(s.REPLICAS, GENERATED), [s.TOPIC, s.PARTITION], "left"
        )
    return {
        "brokers": spark.createDataFrame(table, _BROKERS_SCHEMA),
        "replica_sets": distinct_replica_sets(cluster.partitions),
        "partitions": partitions,
    }
