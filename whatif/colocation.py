"""Failure domains of the broker co-location graph: which brokers a broker's failure touches.

Two brokers are linked when they hold a replica of the same partition: when one fails, the other
loses a partner of that partition (its ISR shrinks, its leaderships may move, the partition's
redundancy drops). The graph's connected components are the failure domains (a failure never
reaches outside its component), and a broker's degree is how many other brokers its failure
touches.

The edges come from the distinct replica sets (a DataFrame of ``replicas`` arrays, usually far
fewer rows than partitions), aggregated in Spark to at most ``brokers²`` pairs. Components come
from GraphFrames' ``connectedComponents`` when its Python package and jar are both available,
else from the equivalent DataFrame implementation here: min-label propagation (every broker
starts with its own id as label, takes the smallest label among itself and its neighbours, until
no label changes), one action per iteration: the labels (one row per broker) are collected and
handed to the next iteration as a local relation, so the lineage never grows. Both give each broker the smallest broker id of its component.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, StructField, StructType

from statemachines.schemas import REPLICAS

SRC = "src"
DST = "dst"
ID = "id"
COMPONENT = "component"
DEGREE = "degree"
_NEW = "_new_component"

EDGES_SCHEMA = StructType(
    [
        StructField(SRC, IntegerType(), nullable=False),
        StructField(DST, IntegerType(), nullable=False),
    ]
)
_VERTICES_SCHEMA = StructType([StructField(ID, IntegerType(), nullable=False)])
_LABELS_SCHEMA = StructType(
    [
        StructField(ID, IntegerType(), nullable=False),
        StructField(COMPONENT, IntegerType(), nullable=False),
    ]
)

# A co-location graph's diameter is small (every partition links RF brokers at once); the bound
# only stops a runaway loop on a malformed graph.
MAX_ITERATIONS = 1000


@dataclass(frozen=True)
class FailureDomains:
    """``component``: broker → the smallest broker id of its connected component;
    ``touched``: broker → how many other brokers share a partition with it (its degree)."""

    component: dict[int, int]
    touched: dict[int, int]
    engine: str

    @property
    def components(self) -> list[list[int]]:
        """The components' brokers, each ascending, ordered by their smallest broker."""
        groups: dict[int, list[int]] = {}
        for broker in sorted(self.component):
            groups.setdefault(self.component[broker], []).append(broker)
        return [groups[c] for c in sorted(groups)]

    @property
    def max_touched(self) -> int:
        return max(self.touched.values(), default=0)


def colocation_edges(replica_sets: DataFrame) -> DataFrame:
    """(src, dst): every ordered pair of distinct brokers that share a replica set, once.

    ``replica_sets`` has a ``replicas`` array column (partitions or their distinct sets). No job.
    """
    pairs = replica_sets.select(F.array_distinct(REPLICAS).alias(REPLICAS)).where(
        F.size(REPLICAS) > 1
    )
    return (
        pairs.select(F.explode(REPLICAS).alias(SRC), REPLICAS)
        .select(SRC, F.explode(REPLICAS).alias(DST))
        .where(F.col(SRC) != F.col(DST))
        .distinct()
    )


def failure_domains(
    spark: SparkSession,
    replica_sets: DataFrame,
    brokers: Sequence[int],
    *,
    use_graphframes: bool | None = None,
) -> FailureDomains:
    """Components and brokers touched of the co-location graph over ``brokers`` (every broker is
    a vertex, linked or not; a broker named in ``replica_sets`` is added when missing).

    The edges are derived from ``replica_sets`` once. ``use_graphframes``: None picks GraphFrames when it
    is available, False forces the DataFrame implementation, True requires GraphFrames.
    """
    # Materialised once (at most brokers² rows): every iteration joins it again.
    edges = colocation_edges(replica_sets).localCheckpoint(eager=True)
    if use_graphframes is None:
        use_graphframes = graphframes_available(spark)
    if use_graphframes:
        degree_rows = edges.groupBy(SRC).agg(F.count(F.lit(1)).alias(DEGREE)).collect()
        touched = {int(r[SRC]): int(r[DEGREE]) for r in degree_rows}
        component = _graphframes_components(spark, sorted(set(brokers) | set(touched)), edges)
        engine = "graphframes"
    else:
        component, touched = label_propagation_components(spark, brokers, edges)
        engine = "dataframe"
    everyone = sorted(set(brokers) | set(component) | set(touched))
    return FailureDomains(
        {b: component.get(b, b) for b in everyone},
        {b: touched.get(b, 0) for b in everyone},
        engine,
    )


def label_propagation_components(
    spark: SparkSession, vertices: Sequence[int], edges: DataFrame
) -> tuple[dict[int, int], dict[int, int]]:
    """(broker → smallest broker id of its component, broker → degree), by min-label propagation
    over ``edges`` (src, dst, both directions, each pair once).

    One action per iteration: the new labels (one row per broker) are collected and become the
    next iteration's input as a local relation, so the lineage never grows. The first iteration
    also counts each broker's offers, which is its degree.
    """
    labels = {int(v): int(v) for v in vertices}
    for _ in range(MAX_ITERATIONS):
        current = _labels_frame(spark, labels)
        offers = edges.join(F.broadcast(current), edges[SRC] == current[ID]).select(
            F.col(DST).alias(ID), F.col(COMPONENT).alias(_NEW)
        )
        best = offers.groupBy(ID).agg(F.min(_NEW).alias(_NEW), F.count(F.lit(1)).alias(DEGREE))
        rows = (
            current.join(best, ID, "full")
            .select(
                ID,
                F.least(F.coalesce(COMPONENT, ID), F.coalesce(_NEW, ID)).alias(COMPONENT),
                F.coalesce(DEGREE, F.lit(0)).alias(DEGREE),
            )
            .collect()
        )
        # The same every iteration: the edges do not change.
        degree = {int(r[ID]): int(r[DEGREE]) for r in rows}
        step = {int(r[ID]): int(r[COMPONENT]) for r in rows}
        if step == labels:
            return labels, degree
        labels = step
    raise RuntimeError(f"label propagation did not settle in {MAX_ITERATIONS} iterations")


def graphframes_available(spark: SparkSession) -> bool:
    """GraphFrames' Python package is installed and its jar is on the Spark classpath."""
    if importlib.util.find_spec("graphframes") is None:
        return False
    try:
        jvm = spark.sparkContext._jvm  # type: ignore[attr-defined]
        jvm.java.lang.Class.forName(
            "org.graphframes.GraphFrame", True, jvm.Thread.currentThread().getContextClassLoader()
        )
    except Exception:  # the JVM raises Py4JJavaError(ClassNotFoundException)
        return False
    return True


def _graphframes_components(
    spark: SparkSession, vertices: Sequence[int], edges: DataFrame
) -> dict[int, int]:
    from graphframes import GraphFrame  # optional extra "graph"

    # The GraphX algorithm labels a component with its smallest vertex id, as the DataFrame
    # implementation does, and needs no checkpoint directory.
    graph = GraphFrame(_vertices(spark, vertices), edges)
    found = graph.connectedComponents(algorithm="graphx").collect()
    return {int(r[ID]): int(r[COMPONENT]) for r in found}


def _vertices(spark: SparkSession, vertices: Sequence[int]) -> DataFrame:
    table = pa.table({ID: pa.array(list(vertices), pa.int32())})
    return spark.createDataFrame(table, _VERTICES_SCHEMA)


def _labels_frame(spark: SparkSession, labels: dict[int, int]) -> DataFrame:
    table = pa.table(
        {
            ID: pa.array(list(labels), pa.int32()),
            COMPONENT: pa.array(list(labels.values()), pa.int32()),
        }
    )
    return spark.createDataFrame(table, _LABELS_SCHEMA)
