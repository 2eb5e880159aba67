"""DataFrame-backed partition znodes of the in-memory ZooKeeper.

``/brokers/topics/T/partitions/P`` and ``.../P/state`` number in the millions, so the in-memory
store keeps them as rows of one checkpointed DataFrame (one row per partition node, with its state
znode's payload decoded into columns and both nodes' stats), not as Python objects.

* Single ops (``get``/``set``/``create``/``delete`` on one of those paths) materialise the rows of
  that topic (of that one partition, for topics above ``TOPIC_LOAD_LIMIT``) as ``Znode`` objects
  on first touch and keep changes in a small driver-side overlay; the overlay is merged into the
  DataFrame before the next bulk operation.
* Bulk writes merge a DataFrame of new states with per-row version checks (``bulk_write``): the
  updates are broadcast over the table in one pass (a full outer join when they are many), and
  updates without a node (creates, NONODE) are merged apart only when there are some. The merge
  result is checkpointed locally, so every generation's plan starts from materialised rows (a
  plan that grew with every write would make each write slower and, at a few dozen writes,
  exhaust the driver planning it); optionally every ``snapshot_every`` generations the table is
  also written to Parquet under a temp dir and read back. DataFrames handed out earlier stay
  valid until ``close``.
* Only ``state`` may live under a partition node, and partition znodes cannot be ephemeral or
  sequential (Kafka never does either).
"""

from __future__ import annotations

import re
import shutil
import tempfile
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from controller.checkpoint import local_checkpoint
from controller.zk.memory_rows import (
    INTERNAL_SCHEMA,
    ROW_COLUMNS,
    STATE_COLUMNS,
    Entry,
    Key,
    decode_state,
    from_row,
    to_row,
)
from controller.zk.memory_tree import Znode
from statemachines.schemas import (
    PARTITION,
    TOPIC,
    ZK_VERSION,
)

_NODE = re.compile(r"^/brokers/topics/([^/]+)/partitions/(0|[1-9][0-9]{0,8})(/state)?$")
_PARTITIONS = re.compile(r"^/brokers/topics/([^/]+)/partitions$")
KEY = [TOPIC, PARTITION]
TOPIC_LOAD_LIMIT = 10_000  # partitions of a topic read into the overlay on its first single op


def parse(path: str) -> tuple[Key, bool] | None:
    """(topic, partition), is_state — for a partition or state path; None otherwise."""
    match = _NODE.match(path)
    if match is None:
        return None
    return (match.group(1), int(match.group(2))), match.group(3) is not None


@dataclass(frozen=True)
class BulkOutcome:
    """What one bulk write did: per-topic counts by outcome, failed rows, changed watched keys."""

    counts: dict[tuple[str, str], int]
    failed: DataFrame
    touched: list[tuple[str, int, str]]


class PartitionRegion:
    """The ``Region`` of ``memory_tree`` for partition znodes, plus bulk read/write."""

    def __init__(self, snapshot_every: int = 0, broadcast_rows: int = 200_000) -> None:
        self.base: DataFrame | None = None
        self.overlay: dict[Key, Entry] = {}
        self.dirty: set[Key] = set()
        self.counts: dict[str, int] = {}
        self.malformed: set[Key] = set()
        self.snapshot_every = snapshot_every
        self.broadcast_rows = broadcast_rows
        self._generation = 0
        self._workdir: str | None = None

    # -- Region protocol -------------------------------------------------------------------
    def owns(self, path: str) -> bool:
        return _NODE.match(path) is not None

    def lookup(self, path: str) -> Znode | None:
        parsed = parse(path)
        if parsed is None:
            return None
        entry = self._entry(parsed[0])
        return entry.state if parsed[1] else entry.partition

    def child_names(self, path: str) -> list[str]:
        match = _PARTITIONS.match(path)
        if match is None or not self.counts.get(match.group(1)):
            return []
        topic = match.group(1)
        names: set[int] = set()
        if self.base is not None:
            rows = self.base.filter(F.col(TOPIC) == topic).select(PARTITION).collect()
            names = {r[0] for r in rows}
        for (t, p), entry in self.overlay.items():
            if t == topic:
                (names.add if entry.partition is not None else names.discard)(p)
        return [str(p) for p in sorted(names)]

    def child_count(self, path: str) -> int:
        match = _PARTITIONS.match(path)
        return self.counts.get(match.group(1), 0) if match else 0

    def commit(self, changes: dict[str, Znode | None]) -> None:
        for path, node in changes.items():
            parsed = parse(path)
            assert parsed is not None
            key, is_state = parsed
            entry = self._entry(key)
            if is_state:
                entry.state = node
                if node is not None and decode_state(key, node.data)[0] is None:
                    self.malformed.add(key)
                else:
                    self.malformed.discard(key)
            else:
                existed = entry.partition is not None
                entry.partition = node
                self.counts[key[0]] = self.counts.get(key[0], 0) + (node is not None) - existed
            self.dirty.add(key)

    # -- materialising single rows ---------------------------------------------------------
    def _entry(self, key: Key) -> Entry:
        entry = self.overlay.get(key)
        if entry is not None:
            return entry
        topic = key[0]
        if self.base is not None and self.counts.get(topic):
            # One Spark job materialises the whole topic (up to a limit): single ops come in
            # bursts over one topic's partitions (leaders' ISR writes, admin reads).
            wanted = F.col(TOPIC) == topic
            if self.counts[topic] > TOPIC_LOAD_LIMIT:
                wanted = wanted & (F.col(PARTITION) == key[1])
            for row in self.base.filter(wanted).collect():
                self.overlay.setdefault((row[TOPIC], row[PARTITION]), from_row(row.asDict()))
        return self.overlay.setdefault(key, Entry(None, None))

    # -- generations -----------------------------------------------------------------------
    def _spark(self) -> SparkSession:
        from spark_app.session import get_spark

        return get_spark()

    def _empty(self, spark: SparkSession) -> DataFrame:
        return spark.createDataFrame([], INTERNAL_SCHEMA)

    def _install(self, new_base: DataFrame, materialised: bool = False) -> None:
        """Make ``new_base`` the current generation.

        ``materialised``: ``new_base`` is a lazy projection of a checkpointed frame (the bulk
        merge); otherwise it is checkpointed here. Every ``snapshot_every`` generations it goes
        through Parquet instead. Blocks of earlier generations go when nothing references them.
        """
        self._generation += 1
        if self.snapshot_every and self._generation % self.snapshot_every == 0:
            if self._workdir is None:
                self._workdir = tempfile.mkdtemp(prefix="zk-partitions-")
            target = f"{self._workdir}/gen-{self._generation}"
            new_base.write.parquet(target)
            new_base = new_base.sparkSession.read.schema(INTERNAL_SCHEMA).parquet(target)
        elif not materialised:
            new_base = local_checkpoint(new_base)
        self.base = new_base

    def flush(self) -> None:
        """Merge single-op changes into the DataFrame; forget materialised rows."""
        if self.dirty:
            spark = self.base.sparkSession if self.base is not None else self._spark()
            keys = sorted(self.dirty)
            rows = [to_row(k, self.overlay[k]) for k in keys if self.overlay[k].partition]
            changed = spark.createDataFrame(rows, INTERNAL_SCHEMA)
            key_df = spark.createDataFrame(keys, INTERNAL_SCHEMA[:2])
            base = self.base if self.base is not None else self._empty(spark)
            self._install(base.join(F.broadcast(key_df), KEY, "left_anti").unionByName(changed))
        self.dirty.clear()
        self.overlay.clear()

    def drop_topic(self, topic: str) -> None:
        self.flush()
        if self.base is not None and self.counts.get(topic):
            self._install(self.base.filter(F.col(TOPIC) != topic))
        self.counts.pop(topic, None)
        self.malformed = {k for k in self.malformed if k[0] != topic}

    def close(self) -> None:
        self.base = None
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None

    # -- bulk ------------------------------------------------------------------------------
    def states(self) -> DataFrame | None:
        """Current state rows (all columns of ``INTERNAL_SCHEMA``) after merging the overlay."""
        self.flush()
        return None if self.base is None else self.base.filter(F.col("has_state"))

    def bulk_write(
        self,
        updates: DataFrame,
        zxid: int,
        now_ms: int,
        known_topics: list[str],
        watched: list[Key],
        rows: int | None = None,
    ) -> BulkOutcome:
        """Merge ``updates`` (state columns + expected ``zk_version``, -1 = create, + ``writes``)
        into the table; ``rows`` is their count when the caller knows it.

        Created rows get both nodes (zk version ``writes - 1``), updated rows zk version
        ``expected + writes``.
        A create fails with NODEEXISTS when the partition node exists and NONODE when the topic
        znode does not (``known_topics``); an update fails with NONODE or BADVERSION.
        """
        self.flush()
        spark = updates.sparkSession
        base = self.base if self.base is not None else self._empty(spark)
        upd = updates.select(
            TOPIC, PARTITION, *[F.col(c).alias(f"u_{c}") for c in STATE_COLUMNS],
            F.col(ZK_VERSION).alias("u_expected"), F.col("writes").alias("u_writes"),
        )  # fmt: skip
        # Topic names never contain a comma (Kafka's legal characters): one folded literal array.
        topic_known = F.array_contains(F.split(F.lit(",".join(known_topics)), ","), F.col(TOPIC))

        def merged(aligned: DataFrame) -> tuple[DataFrame, dict[tuple[str, str], int]]:
            # Checkpointed lazily: the summary's pass materialises it, once.
            m = local_checkpoint(self._merged(aligned, topic_known, zxid, now_ms), eager=False)
            summary = m.filter(F.col("outcome").isNotNull()).groupBy(TOPIC, "outcome").count()
            return m, {(r[0], r[1]): r[2] for r in summary.collect()}

        if not any(self.counts.values()):
            m, counts = merged(_without_base(upd))
        elif (n_updates := upd.count() if rows is None else rows) > self.broadcast_rows:
            m, counts = merged(base.join(upd, KEY, "full_outer"))
        else:
            # The usual controller write: the updates are broadcast and the large table is
            # scanned in place. Updates without a row (creates; NONODE) are merged apart, only
            # when the first pass did not account for every update.
            m, counts = merged(base.join(F.broadcast(upd), KEY, "left"))
            if sum(counts.values()) < n_updates:
                matched = m.filter(F.col("u_expected").isNotNull()).select(*KEY)
                missing = upd.join(F.broadcast(matched), KEY, "left_anti")
                extra, more = merged(_without_base(missing).coalesce(1))
                m = self._compacted(m.unionByName(extra))
                counts = {k: counts.get(k, 0) + more.get(k, 0) for k in counts.keys() | more}
        failed = self._failed(m, any(o not in ("created", "updated") for _, o in counts))
        touched: list[tuple[str, int, str]] = []
        # Watched keys need events; rewritten malformed keys become well-formed.
        interesting = set(watched) | self.malformed
        if interesting:
            keys = spark.createDataFrame(sorted(interesting), INTERNAL_SCHEMA[:2])
            touched = [
                (r[0], r[1], r[2])
                for r in m.filter(F.col("outcome").isin("created", "updated"))
                .join(F.broadcast(keys), KEY, "left_semi")
                .select(TOPIC, PARTITION, "outcome")
                .collect()
            ]
        # The merge result stays cached and backs the new generation (one pass per write).
        self._install(m.filter(F.col("p_czxid").isNotNull()).select(*ROW_COLUMNS), True)
        for (topic, result), n in counts.items():
            if result == "created":
                self.counts[topic] = self.counts.get(topic, 0) + n
        self.malformed -= {(t, p) for t, p, _ in touched}
        return BulkOutcome(counts, failed, touched)

    @staticmethod
    def _merged(m: DataFrame, topic_known: Column, zxid: int, now_ms: int) -> DataFrame:
        """Aligned rows (base columns, ``u_*`` update columns) after the write: new node
        columns, ``outcome`` (created/updated/error code; null where nothing was asked)."""
        exists, expected = F.col("p_czxid").isNotNull(), F.col("u_expected")
        error = (
            F.when(expected.isNull(), F.lit(None))
            .when(expected == -1, F.when(exists, "NODEEXISTS").when(~topic_known, "NONODE"))
            .when(~F.coalesce(F.col("has_state"), F.lit(False)), "NONODE")
            .when(F.col(ZK_VERSION) != expected, "BADVERSION")
        )
        m = m.withColumn("error", error)
        written = expected.isNotNull() & F.col("error").isNull()
        created = written & (expected == -1)

        def pick(if_created: Column, if_written: Column, name: str) -> Column:
            return F.when(created, if_created).when(written, if_written).otherwise(F.col(name))

        z, now, keep = F.lit(zxid), F.lit(now_ms), F.col
        cols = {
            "p_data": pick(F.lit(None).cast("binary"), keep("p_data"), "p_data"),
            "p_version": pick(F.lit(0), keep("p_version"), "p_version"),
            "p_czxid": pick(z, keep("p_czxid"), "p_czxid"),
            "p_mzxid": pick(z, keep("p_mzxid"), "p_mzxid"),
            "p_ctime": pick(now, keep("p_ctime"), "p_ctime"),
            "p_mtime": pick(now, keep("p_mtime"), "p_mtime"),
            "p_cversion": pick(F.lit(1), keep("p_cversion"), "p_cversion"),
            "p_pzxid": pick(z, keep("p_pzxid"), "p_pzxid"),
            "has_state": pick(F.lit(True), F.lit(True), "has_state"),
            **{c: pick(keep(f"u_{c}"), keep(f"u_{c}"), c) for c in STATE_COLUMNS},
            ZK_VERSION: pick(F.col("u_writes") - 1, expected + F.col("u_writes"), ZK_VERSION),
            "s_czxid": pick(z, keep("s_czxid"), "s_czxid"),
            "s_mzxid": pick(z, z, "s_mzxid"),
            "s_ctime": pick(now, keep("s_ctime"), "s_ctime"),
            "s_mtime": pick(now, now, "s_mtime"),
            "raw": pick(F.lit(None).cast("binary"), F.lit(None).cast("binary"), "raw"),
        }
        outcome = F.when(created, "created").when(written, "updated").otherwise(F.col("error"))
        return m.select(
            TOPIC, PARTITION, *[v.alias(k) for k, v in cols.items()], outcome.alias("outcome"),
            *[F.col(f"u_{c}") for c in STATE_COLUMNS], "u_expected", "error",
        )  # fmt: skip

    @staticmethod
    def _compacted(m: DataFrame) -> DataFrame:
        """``m`` (the merge plus a one-partition tail of new rows), coalesced to the default
        parallelism once the tails have doubled it: creates would otherwise add a partition each."""
        target = m.sparkSession.sparkContext.defaultParallelism
        if m.rdd.getNumPartitions() <= 2 * target:
            return m
        return local_checkpoint(m.coalesce(target))

    @staticmethod
    def _failed(m: DataFrame, any_failed: bool) -> DataFrame:
        failed = m.filter(F.col("error").isNotNull()).select(
            TOPIC, PARTITION, *[F.col(f"u_{c}").alias(c) for c in STATE_COLUMNS],
            F.col("u_expected").alias(ZK_VERSION), "error",
        )  # fmt: skip
        if not any_failed:
            return failed.sparkSession.createDataFrame([], failed.schema)
        return failed  # lazy over the cached merge result


def _without_base(upd: DataFrame) -> DataFrame:
    """Update rows aligned with no table row (every node column null)."""
    nulls = [F.lit(None).cast(f.dataType).alias(f.name) for f in INTERNAL_SCHEMA.fields[2:]]
    return upd.select(*KEY, *nulls, *[c for c in upd.columns if c not in KEY])
