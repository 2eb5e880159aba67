"""DataFrame-backed partition znodes of the emulated (in-memory) ZooKeeper.

``/brokers/topics/T/partitions/P`` and ``.../P/state`` number in the millions, so the emulated
ensemble is given this ``Region`` (``controller.zk.memory_tree.Region``) at construction and
keeps them as rows of one checkpointed DataFrame (one row per partition node, with its state
znode's payload decoded into columns and both nodes' stats), not as Python objects.

* Single ops (``get``/``set``/``create``/``delete`` on one of those paths) materialise the rows of
  that topic (of that one partition, for topics above ``TOPIC_LOAD_LIMIT``) as ``Znode`` objects
  on first touch (``prefetch`` loads many topics in one pass) and keep changes in a small
  driver-side overlay; the overlay is merged into the DataFrame before the next bulk operation.
* Bulk writes merge a DataFrame of new states with per-row version checks (``bulk_write``). A
  write of up to ``broadcast_rows`` rows (a million) is broadcast over the ``base`` and the
  ``delta`` (rows written since; a delta row supersedes the base row of its key), and only the
  base rows it names are merged, with the delta's, whose merge is the next delta (one pass):
  rewriting the whole table for each event's changed states would write every row. The delta
  folds into the base once it outgrows a quarter of the table (and ``DELTA_MIN_ROWS``) or
  ``broadcast_rows`` (its keys are broadcast), and at every larger write (a full outer join).
  Single-op changes reach the delta by a pass of their own when they delete no node. Base and
  delta are checkpointed locally, so every plan starts from materialised rows (a plan that grew
  with every write would make each write slower and, at a few dozen writes, exhaust the driver
  planning it); optionally every ``snapshot_every`` new bases the table is also written to
  Parquet under a temp dir and read back. A replaced base or delta is freed at once (Spark's
  cleaner would free it only after some JVM GC, and kept 350 MB bases of a 1e6 table): a frame
  read from the table is valid until the next write, which is when its readers (a context
  load, a read-modify-write) are done with it.
* Only ``state`` may live under a partition node, and partition znodes cannot be ephemeral or
  sequential (Kafka never does either).
"""

from __future__ import annotations

import re
import shutil
import tempfile
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from controller.commit.checkpoint import local_checkpoint, release
from controller.partition_store.merge import (
    failed_rows,
    merged_rows,
    named_rows,
    rows_where,
    superseded,
    without_base,
)
from controller.partition_store.rows import (
    INTERNAL_SCHEMA,
    KEY,
    ROW_COLUMNS,
    STATE_COLUMNS,
    Entry,
    Key,
    decode_state,
    from_row,
    parse,
    to_row,
)
from controller.zk.memory_tree import Znode
from statemachines.local_rows import local_frame
from statemachines.schemas import PARTITION, TOPIC, ZK_VERSION

_PARTITIONS = re.compile(r"^/brokers/topics/([^/]+)/partitions$")
TOPIC_LOAD_LIMIT = 10_000  # partitions of a topic read into the overlay on its first single op
DELTA_MIN_ROWS = 10_000  # a delta this small never forces a new base, however small the table
WRITTEN = ("created", "updated")  # bulk-write outcomes that changed a row
FROM_DELTA = "_from_delta"  # an aligned row of the delta (else of the base, or none)


@dataclass(frozen=True)
class BulkOutcome:
    """What one bulk write did: per-topic counts by outcome, failed rows, changed watched keys."""

    counts: dict[tuple[str, str], int]
    failed: DataFrame
    touched: list[tuple[str, int, str]]


class PartitionRegion:
    """The ``Region`` of partition znodes, plus bulk read/write (for ``SparkStateStore``)."""

    # A broker failure at 1e7 partitions (100 brokers, RF 3) writes ~300K states: with the write
    # broadcast the event took 20.7 s, with the full outer join of a 200K bound 36.6-40.5 s.
    # The bound caps the hash table of updates that the driver builds and broadcasts.
    def __init__(self, snapshot_every: int = 0, broadcast_rows: int = 1_000_000) -> None:
        self.base: DataFrame | None = None
        # Rows written since ``base`` was installed; ``delta_rows`` bounds their count from above.
        self.delta: DataFrame | None = None
        self.delta_rows = 0
        self._delta_backing: list[DataFrame] = []  # the checkpoints ``delta`` reads
        self.overlay: dict[Key, Entry] = {}
        self.dirty: set[Key] = set()
        self.counts: dict[str, int] = {}
        self.malformed: set[Key] = set()
        self.snapshot_every = snapshot_every
        self.broadcast_rows = broadcast_rows
        self._generation = 0
        self._workdir: str | None = None
        self._backing: DataFrame | None = None  # the checkpoint behind ``base``
        self._merges: list[DataFrame] = []  # the last write's merge results (behind ``failed``)
        self._known: tuple[tuple[str, ...], DataFrame] | None = None  # see ``_known_topics``

    # -- Region protocol -------------------------------------------------------------------
    def owns(self, path: str) -> bool:
        return parse(path) is not None

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
        rows = rows_where(self.base, self.delta, F.col(TOPIC) == topic, [PARTITION])
        names = {r[PARTITION] for r in rows}
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
        if entry is None:
            self.prefetch([key])
            entry = self.overlay[key]
        return entry

    def prefetch(self, keys: list[Key]) -> None:
        """Materialise the rows single ops on ``keys`` will touch, in one Spark job.

        A key's first touch loads its whole topic (one partition's row above
        ``TOPIC_LOAD_LIMIT``), as single ops come in bursts over a topic's partitions (leaders'
        ISR writes, admin reads); each load is a pass over the whole table.
        """
        missing = [k for k in dict.fromkeys(keys) if k not in self.overlay]
        stored = [k for k in missing if self.counts.get(k[0])]  # the topic has rows
        if stored:
            whole = {t for t, _ in stored if self.counts[t] <= TOPIC_LOAD_LIMIT}
            single = [f"{t}/{p}" for t, p in stored if t not in whole]
            wanted = F.col(TOPIC).isin(sorted(whole))
            if single:
                wanted = wanted | F.concat_ws("/", TOPIC, PARTITION).isin(single)
            for row in rows_where(self.base, self.delta, wanted, ROW_COLUMNS):
                self.overlay.setdefault((row[TOPIC], row[PARTITION]), from_row(row))
        for key in missing:  # not in the table: the node does not exist
            self.overlay.setdefault(key, Entry(None, None))

    # -- generations -----------------------------------------------------------------------
    @property
    def table(self) -> DataFrame | None:
        """Every partition row: the base, with the delta's rows in place of their keys'."""
        if self.base is None or self.delta is None:
            return self.base
        return superseded(self.base, self.delta)

    def _spark(self) -> SparkSession:
        # The emulation's session (``spark_app.session`` built it before any znode was written).
        return SparkSession.active()

    def _install(self, new_base: DataFrame, backing: DataFrame | None = None) -> None:
        """Make ``new_base`` (every row) the base, with an empty delta; free the replaced ones.

        ``backing``: the materialised checkpoint ``new_base`` is a lazy projection of (a full
        merge); without it ``new_base`` is checkpointed here. Every ``snapshot_every`` bases it
        goes through Parquet instead.
        """
        self._generation += 1
        if self.snapshot_every and self._generation % self.snapshot_every == 0:
            if self._workdir is None:
                self._workdir = tempfile.mkdtemp(prefix="zk-partitions-")
            target = f"{self._workdir}/gen-{self._generation}"
            new_base.write.parquet(target)
            new_base = new_base.sparkSession.read.schema(INTERNAL_SCHEMA).parquet(target)
        elif backing is None:
            new_base = local_checkpoint(new_base)
        retired = (self._backing, *self._delta_backing)
        self.base, self.delta, self.delta_rows = new_base, None, 0
        self._backing = new_base if backing is None else backing
        self._delta_backing = []
        for frame in retired:
            release(frame)

    def _supersede(self, rows: DataFrame, count: int) -> None:
        """Put ``rows`` (at most ``count``, distinct keys, existing nodes) in place of their
        keys' rows: into the delta, or — once the delta outgrows its bound — a new base."""
        delta = rows if self.delta is None else superseded(self.delta, rows)
        if not self._fold(delta, count):
            target = rows.sparkSession.sparkContext.defaultParallelism
            checkpointed = local_checkpoint(delta.coalesce(target))
            self._replace_delta(checkpointed, [checkpointed])

    def _fold(self, delta: DataFrame, count: int) -> bool:
        """Account ``count`` more delta rows; past the bound, install the base superseded by
        ``delta`` (the next delta) and say so."""
        self.delta_rows += count
        total = sum(self.counts.values())
        if self.delta_rows <= min(self.broadcast_rows, max(total // 4, DELTA_MIN_ROWS)):
            return False
        assert self.base is not None
        self._install(superseded(self.base, delta))
        return True

    def _replace_delta(self, delta: DataFrame, backing: list[DataFrame]) -> None:
        retired, self.delta, self._delta_backing = self._delta_backing, delta, backing
        for frame in retired:
            release(frame)

    def flush(self) -> None:
        """Merge single-op changes into the DataFrame; forget materialised rows."""
        if self.dirty:
            spark = self.base.sparkSession if self.base is not None else self._spark()
            keys = sorted(self.dirty)
            rows = [to_row(k, self.overlay[k]) for k in keys if self.overlay[k].partition]
            changed = local_frame(spark, rows, INTERNAL_SCHEMA)
            if self.base is not None and len(rows) == len(keys):
                self._supersede(changed, len(rows))  # no node deleted: the rows replace theirs
            else:
                key_df = local_frame(spark, keys, INTERNAL_SCHEMA[:2])
                table = self.table if self.base is not None else changed.limit(0)  # no rows yet
                self._install(
                    table.join(F.broadcast(key_df), KEY, "left_anti").unionByName(changed)
                )
        self.dirty.clear()
        self.overlay.clear()

    def drop_children(self, path: str) -> None:
        match = _PARTITIONS.match(path)
        if match is not None:
            self.drop_topic(match.group(1))

    def drop_topic(self, topic: str) -> None:
        self.flush()
        if (table := self.table) is not None and self.counts.get(topic):
            self._install(table.filter(F.col(TOPIC) != topic))
        self.counts.pop(topic, None)
        self.malformed = {k for k in self.malformed if k[0] != topic}

    def close(self) -> None:
        for frame in (self._backing, *self._delta_backing, *self._merges):
            release(frame)
        self._backing, self._delta_backing, self._merges = None, [], []
        self.base, self.delta, self.delta_rows = None, None, 0
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None

    # -- bulk ------------------------------------------------------------------------------
    def states(self, selection: DataFrame | None = None) -> DataFrame | None:
        """Current state rows (all columns of ``INTERNAL_SCHEMA``) after merging the overlay;
        only those of ``selection``'s keys when given."""
        self.flush()
        if self.base is None:
            return None
        table = self.table if selection is None else named_rows(self.base, self.delta, selection)
        return table.filter(F.col("has_state"))

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
        znode does not (``known_topics``); an update fails with NONODE or BADVERSION. The
        outcome's ``failed`` rows are valid until the next write.
        """
        self.flush()
        for frame in self._merges:
            release(frame)
        self._merges = []
        spark = updates.sparkSession
        # zxid and time join the updates as data (a one-row frame): literals would be folded
        # into the merge's code, making it new at every write (compiled again, and the pass over
        # the whole table run JIT-cold).
        clock = local_frame(spark, [(zxid, now_ms)], "u_zxid bigint, u_now bigint")
        upd = updates.select(
            TOPIC, PARTITION, *[F.col(c).alias(f"u_{c}") for c in STATE_COLUMNS],
            F.col(ZK_VERSION).alias("u_expected"), F.col("writes").alias("u_writes"),
        ).crossJoin(clock)  # fmt: skip
        # Whether the topic znode exists joins as data too: a literal list searched per row
        # would cost each create the length of the list (bootstrap: rows x topics).
        upd = upd.join(F.broadcast(self._known_topics(spark, known_topics)), TOPIC, "left")

        def merged(
            aligned: DataFrame, carry: tuple[str, ...] = ()
        ) -> tuple[DataFrame, dict[tuple[str, str], int]]:
            # Checkpointed lazily: the summary's pass materialises it, once.
            m = local_checkpoint(merged_rows(aligned, carry), eager=False)
            self._merges.append(m)
            summary = m.filter(F.col("outcome").isNotNull()).groupBy(TOPIC, "outcome").count()
            return m, {(r[0], r[1]): r[2] for r in summary.collect()}

        table = self.table if any(self.counts.values()) else None
        written = F.col("outcome").isin(*WRITTEN)
        n_updates = 0 if table is None else upd.count() if rows is None else rows
        small = table is not None and n_updates <= self.broadcast_rows
        if table is None:
            m, counts = merged(without_base(upd))
        elif not small:
            m, counts = merged(table.join(upd, KEY, "full_outer"))
        else:
            # The usual controller write: the updates are broadcast over the table, and only
            # the base rows they name are merged, with the delta's rows: the result holds the
            # next delta. Updates without a row (creates; NONODE) are merged apart, only when
            # the first pass did not account for every update.
            m, counts = merged(self._aligned(upd), (FROM_DELTA,))
            if sum(counts.values()) < n_updates:
                named = m.filter(F.col("u_expected").isNotNull()).select(*KEY)
                missing = upd.join(F.broadcast(named), KEY, "left_anti")
                unaligned = without_base(missing).withColumn(FROM_DELTA, F.lit(False))
                extra, more = merged(unaligned.coalesce(1), (FROM_DELTA,))
                m = m.unionByName(extra)
                counts = {k: counts.get(k, 0) + more.get(k, 0) for k in counts.keys() | more}
        failed = failed_rows(m, any(o not in WRITTEN for _, o in counts))
        touched: list[tuple[str, int, str]] = []
        # Watched keys need events; rewritten malformed keys become well-formed.
        interesting = set(watched) | self.malformed
        if interesting:
            keys = local_frame(spark, sorted(interesting), INTERNAL_SCHEMA[:2])
            touched = [
                (r[0], r[1], r[2])
                for r in m.filter(written)
                .join(F.broadcast(keys), KEY, "left_semi")
                .select(TOPIC, PARTITION, "outcome")
                .collect()
            ]
        # The merge result stays cached and backs the new rows (one pass per write).
        if small:
            # The next delta: the delta's rows and the written ones (a base row whose update
            # failed stays where it is).
            kept = F.col("p_czxid").isNotNull() & (F.col(FROM_DELTA) | written)
            target = spark.sparkContext.defaultParallelism
            delta = m.filter(kept).select(*ROW_COLUMNS).coalesce(target)
            if not self._fold(delta, sum(n for (_, o), n in counts.items() if o in WRITTEN)):
                self._replace_delta(delta, self._merges)  # they back the delta now
                self._merges = []
        else:
            self._merges.remove(m)  # it backs the new base
            self._install(m.filter(F.col("p_czxid").isNotNull()).select(*ROW_COLUMNS), m)
        for (topic, result), n in counts.items():
            if result == "created":
                self.counts[topic] = self.counts.get(topic, 0) + n
        self.malformed -= {(t, p) for t, p, _ in touched}
        return BulkOutcome(counts, failed, touched)

    def _known_topics(self, spark: SparkSession, names: list[str]) -> DataFrame:
        """(topic, ``u_topic_known``) of ``names``, rebuilt only when the topics change."""
        key = tuple(names)
        if self._known is None or self._known[0] != key:
            rows = [(t, True) for t in key]
            self._known = key, local_frame(spark, rows, "topic string, u_topic_known boolean")
        return self._known[1]

    def _aligned(self, upd: DataFrame) -> DataFrame:
        """Every delta row, beside its update where ``upd`` names it, and the base rows that
        ``upd`` names outside the delta, beside theirs; ``FROM_DELTA`` tells them apart. The
        updates drop the delta's keys before they meet the base, so each base row is probed
        once."""
        assert self.base is not None
        if self.delta is None:
            return self.base.join(F.broadcast(upd), KEY).withColumn(FROM_DELTA, F.lit(False))
        in_delta = self.delta.join(F.broadcast(upd), KEY, "left")
        matched = in_delta.filter(F.col("u_expected").isNotNull()).select(*KEY)
        named = upd.join(F.broadcast(matched), KEY, "left_anti")
        in_base = self.base.join(F.broadcast(named), KEY).withColumn(FROM_DELTA, F.lit(False))
        return in_base.unionByName(in_delta.withColumn(FROM_DELTA, F.lit(True)))
