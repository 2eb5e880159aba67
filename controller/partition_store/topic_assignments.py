"""Replica assignments from ``/brokers/topics/<t>`` payloads, decoded by Spark.

A failover reads every topic znode. Decoded one by one with ``TopicZNode`` on the driver, a
cluster of 1e7 partitions would become 1e7 Python lists there (and then Arrow rows). Instead the
raw payloads go to Spark, one row per topic, and ``from_json`` decodes them in parallel.

Spark's JSON reader is more lenient than the model (it ignores unknown keys, reads a number as
a string, stops after the first value, takes a key twice), so the model stays the judge: Spark
vouches only for a payload that is the exact serialization of what it decoded (whitespace
aside) and that passes the model's rules. Every other payload goes to ``TopicZNode.decode`` on
the driver: its error is raised as it always was, and the rare odd payload that the model
accepts is read there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from controller.commit.checkpoint import local_checkpoint, release
from controller.zk.paths import TopicZNode
from statemachines.local_rows import local_frame
from statemachines.schemas import (
    ADDING_REPLICAS,
    PARTITION,
    PARTITIONS_SCHEMA,
    REMOVING_REPLICAS,
    REPLICAS,
    TOPIC,
)

_MOVING = (ADDING_REPLICAS, REMOVING_REPLICAS)
# The nested objects are read as text first: a map with a key twice fails Spark's whole job.
_OUTER = (
    "version int, partitions string, adding_replicas string, removing_replicas string, "
    "topic_id string"
)
_MAP = "map<string,array<int>>"
_COLUMNS = (TOPIC, PARTITION, REPLICAS, ADDING_REPLICAS, REMOVING_REPLICAS)
_ARROW_INTS = pa.list_(pa.int32())


@dataclass(frozen=True)
class Assignments:
    """Every partition's assignment (``_COLUMNS``), the partitions per topic, the longest
    replica list; ``rows`` reads ``decoded`` (see ``release``)."""

    rows: DataFrame
    counts: dict[str, int]
    width: int
    decoded: DataFrame
    topic_ids: dict[str, str] = field(default_factory=dict)  # of the topics that have one

    def release(self) -> None:
        """Free the decoded payloads once ``rows`` has been read into something else."""
        release(self.decoded)


def topic_assignments(
    spark: SparkSession, payloads: Sequence[tuple[str, bytes | None]]
) -> Assignments:
    """The assignments of the topics' (name, payload) pairs. Raises ``MalformedZnodeError`` as
    ``TopicZNode.decode`` does for the first payload the model rejects."""
    # The bytes as they are (a text copy of every payload would double the driver's share:
    # about 1.5 GB at 1e8 partitions), read as text in Spark: null, left to the model, where
    # not UTF-8. Repartitioned first: over a local relation, Spark would decode on the driver
    # while planning.
    raw = (
        local_frame(spark, payloads, "topic string, payload binary")
        .repartition(spark.sparkContext.defaultParallelism)
        .select(TOPIC, F.expr("try_validate_utf8(cast(payload as string))").alias("payload"))
    )
    # Decoded once: the summary's job materialises it, and the caller reads it.
    decoded = local_checkpoint(_decoded(raw), eager=False)
    longest = F.expr("array_max(transform(map_values(partitions), v -> size(v)))")
    summary = decoded.select(TOPIC, F.size("_keys"), "_vouched", longest, "_topic_id").collect()
    counts = {r[0]: int(r[1]) for r in summary if r[2]}
    topic_ids = {r[0]: r[4] for r in summary if r[2] and r[4] is not None}
    doubted = {r[0] for r in summary if not r[2]}
    width = max((int(r[3] or 0) for r in summary if r[2]), default=0)
    vouched = _exploded(decoded.filter(F.col("_vouched")))
    if not doubted:
        return Assignments(vouched, counts, width, decoded, topic_ids)
    # Decoded by the model (in topic order, so the first bad payload is the one reported).
    cols: dict[str, list[Any]] = {c: [] for c in _COLUMNS}
    for topic, payload in sorted(p for p in payloads if p[0] in doubted):
        n, longest, topic_id = _append_rows(cols, topic, payload)
        counts[topic] = n
        if topic_id is not None:
            topic_ids[topic] = topic_id
        width = max(width, longest)
    schema = pa.schema(
        [(TOPIC, pa.string()), (PARTITION, pa.int32())] + [(c, _ARROW_INTS) for c in _COLUMNS[2:]]
    )
    fields = StructType([PARTITIONS_SCHEMA[c] for c in _COLUMNS])
    read = spark.createDataFrame(pa.table(cols, schema=schema), fields)
    return Assignments(vouched.unionByName(read), counts, width, decoded, topic_ids)


def _append_rows(
    cols: dict[str, list[Any]], topic: str, payload: bytes | None
) -> tuple[int, int, str | None]:
    """The model's decoding of one payload, appended to ``cols``; (partitions, widest list,
    topic id)."""
    assignment = TopicZNode.decode(payload, TopicZNode.path(topic))
    keys = list(assignment.partitions)
    cols[TOPIC] += [topic] * len(keys)
    cols[PARTITION] += map(int, keys)
    cols[REPLICAS] += assignment.partitions.values()
    for column, moving in zip(
        _MOVING, (assignment.adding_replicas, assignment.removing_replicas), strict=True
    ):
        cols[column] += [moving.get(k, []) for k in keys] if moving else [[]] * len(keys)
    widest = max(map(len, assignment.partitions.values()), default=0)
    return len(keys), widest, assignment.topic_id


_ID = r"^(?:0|[1-9][0-9]{0,8})$"  # a partition id that fits an int


def _decoded(raw: DataFrame) -> DataFrame:
    """Per topic: ``partitions`` (a map, where vouched), ``_keys`` (the keys of the payload's
    partitions object) and ``_vouched``, true where Spark's decoding is the model's.

    Vouched: the payload (whitespace aside) is the outer fields written back in the model's
    order (no unknown key, no key twice, no trailing text, each value of its type); the
    partitions object has distinct partition-id keys and lists of ints (no null); the
    reassignment maps are absent or empty (a topic being reassigned is read by the model).
    """
    z = F.from_json("payload", _OUTER)
    df = raw.select(TOPIC, "payload", z.alias("z"))
    df = df.select(TOPIC, "payload", "z", F.json_object_keys("z.partitions").alias("_keys"))
    text, keys, version = F.col("z.partitions"), F.col("_keys"), F.col("z.version")
    distinct = F.size(F.array_distinct(keys)) == F.size(keys)
    # Parsed only with distinct keys: Spark fails the whole job on a map key given twice.
    df = df.withColumn("_map", F.when(distinct, F.from_json(text, _MAP)))

    def field(name: str, value: Column) -> Column:
        present = F.col(f"z.{name}").isNotNull()
        return F.coalesce(F.when(present, F.concat(F.lit(f',"{name}":'), value)), F.lit(""))

    written = F.concat(
        F.lit("{"),
        F.concat_ws(
            ",",
            F.when(version.isNotNull(), F.concat(F.lit('"version":'), version.cast("string"))),
            F.concat(F.lit('"partitions":'), text),
        ),
        *[field(m, F.col(f"z.{m}")) for m in _MOVING],
        field("topic_id", F.concat(F.lit('"'), F.col("z.topic_id"), F.lit('"'))),
        F.lit("}"),
    )
    effective = F.coalesce(version, F.lit(3))  # the model's default
    vouched = (
        (F.regexp_replace("payload", r"\s", "") == written)
        & (version.isNull() | version.isin(1, 2, 3))
        & F.col("_map").isNotNull()  # else a value is not a list of ints
        & ~text.contains("null")
        # One match per key: a single pattern over a topic's joined keys recursed once per key
        # in Java's regex engine and overflowed a task's stack at a few thousand partitions.
        & F.forall(keys, lambda k: k.rlike(_ID))
        & (F.col("z.topic_id").isNull() | (effective == 3))
    )
    for m in _MOVING:
        vouched = vouched & (
            F.col(f"z.{m}").isNull() | ((F.col(f"z.{m}") == "{}") & (effective >= 2))
        )
    df = df.select(
        TOPIC,
        "_map",
        "_keys",
        F.coalesce(vouched, F.lit(False)).alias("_vouched"),
        F.col("z.topic_id").alias("_topic_id"),
    )
    partitions = F.when(F.col("_vouched"), F.col("_map")).alias("partitions")
    return df.select(TOPIC, partitions, "_keys", "_vouched", "_topic_id")


def _exploded(decoded: DataFrame) -> DataFrame:
    """One row per partition of the vouched topics (whose reassignment maps are empty)."""
    empty = F.array().cast("array<int>")
    # explode_outer: Spark infers no filter from it, which would decode every payload again.
    rows = decoded.select(TOPIC, F.explode_outer("partitions").alias("_key", REPLICAS))
    return rows.where(F.col("_key").isNotNull()).select(
        TOPIC,
        F.col("_key").cast("int").alias(PARTITION),
        REPLICAS,
        *[empty.alias(m) for m in _MOVING],
    )
