"""The controller context: driver-side facts, and the current generation of the partitions table.

Everything that grows with partitions lives in the generation (a persisted compact DataFrame, see
``statemachines.schemas``); the driver keeps only brokers, topics and in-flight admin work.
``commit`` is the one place a generation is swapped: it checkpoints the new table locally (which
persists it and cuts its lineage), runs ONE Spark action that both materialises it and computes
the controller gauges (spec §16.1) and, for its caller, the event's diff with its totals, and
drops the previous generation.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from pyspark.sql import Column, DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from controller.checkpoint import local_checkpoint, release
from controller.diff import CHANGE, CREATED, can_stamp, stale_rows, stamp_changes, stamped_diff
from controller.handlers.deletion import TopicDeletionManager, deletion_gauges
from controller.handlers.reassignment import being_reassigned
from statemachines import schemas as s
from statemachines.brokers import BrokerSet, BrokerView, ClusterView
from statemachines.columns import any_of, has_leadership, in_list, in_topics
from statemachines.local_rows import local_frame
from statemachines.partition_states import PartitionState
from statemachines.rebalance import preferred_replica_imbalance
from statemachines.replica_states import ReplicaState
from statemachines.state_change_errors import ERRORS, error_count

log = logging.getLogger(__name__)

# Given an event's diff: the frame (the diff with derived columns) and the aggregates over it that
# the committer reads (``ControllerContext.commit``).
DiffTotals = Callable[[DataFrame], tuple[DataFrame, Sequence[Column]]]


@dataclass(frozen=True)
class LiveBroker:
    """A registered broker: id, rack, and its epoch (the czxid of ``/brokers/ids/<id>``)."""

    id: int
    rack: str | None = None
    epoch: int = -1


@dataclass
class TopicEntry:
    """A topic known to the controller; ``index`` keys it in the compact table."""

    name: str
    index: int
    partitions: int
    config: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Gauges:
    """The controller gauges of spec §16.1 computed over one generation.

    ``under_replicated_partitions`` is the cluster-wide sum of Kafka's broker gauge (led
    partitions whose ISR is smaller than the replica set without adding replicas);
    ``lagging_followers`` counts partitions with a live follower outside the ISR, which the
    emulated brokers bring back (``emulation.catch_up_ms``).
    """

    global_partition_count: int
    offline_partitions_count: int
    preferred_replica_imbalance_count: int
    global_topic_count: int
    topics_to_delete_count: int = 0
    replicas_to_delete_count: int = 0
    topics_ineligible_to_delete_count: int = 0
    replicas_ineligible_to_delete_count: int = 0
    under_replicated_partitions: int = 0
    reassigning_partitions: int = 0
    lagging_followers: int = 0
    counters: dict[str, int] = field(default_factory=dict)


class ControllerContext:
    """Kafka's ``ControllerContext`` for a bulk controller (spec Appendix A)."""

    def __init__(
        self,
        spark: SparkSession,
        checkpoint_interval: int = 20,
        delete_topic_enable: bool = True,
    ) -> None:
        self.spark = spark
        self.delete_topic_enable = delete_topic_enable
        self.epoch = 0
        self.epoch_zk_version = 0
        self.live_brokers: dict[int, LiveBroker] = {}
        self.shutting_down: set[int] = set()
        # Brokers whose (single, emulated) log directory failed: their replicas are not online
        # until the broker registers again (spec §8.6).
        self.offline_dir_brokers: set[int] = set()
        self.topics: dict[str, TopicEntry] = {}
        self._next_index = 0  # of the next topic added
        self._topics_frame: DataFrame | None = None  # built once per change of ``topics``
        self.deletion = TopicDeletionManager(enabled=delete_topic_enable)
        self.partitions: DataFrame | None = None
        self._persisted: DataFrame | None = None
        self.generation = 0
        self.checkpoint_interval = checkpoint_interval
        self.rows: int | None = None  # of the committed generation
        self.stamped = False  # the last commit's diff is a filter of it (``stamped_diff``)
        # The last stamped commit's diff, materialised by its job, and its ``diff_totals``.
        self.diff: DataFrame | None = None
        self.diff_totals: Row | None = None

    @property
    def committed(self) -> DataFrame | None:
        """The committed generation as persisted, with the counters of the event that made it."""
        return self._persisted

    # -- brokers -------------------------------------------------------------------------------
    @property
    def live_broker_ids(self) -> BrokerSet:
        """Registered brokers that are not shutting down (spec §0 "live")."""
        return BrokerSet.of(set(self.live_brokers) - self.shutting_down)

    @property
    def deleting(self) -> list[int]:
        """Indices of the topics queued for deletion."""
        return sorted(self.deletion.topics_to_be_deleted) if self.deletion.enabled else []

    @property
    def live_or_shutting_down_ids(self) -> BrokerSet:
        return BrokerSet.of(self.live_brokers)

    def view(self) -> ClusterView:
        # Replicas on a failed log directory are never online (§8.6); with one directory per
        # emulated broker that is every replica of the broker, which stays registered.
        offline_dirs = self.offline_dir_brokers
        return ClusterView(
            live=BrokerSet.of(set(self.live_brokers) - self.shutting_down - offline_dirs),
            shutting_down=BrokerSet.of(self.shutting_down & set(self.live_brokers) - offline_dirs),
            controller_epoch=self.epoch,
        )

    # -- topics --------------------------------------------------------------------------------
    def add_topic(
        self, name: str, partitions: int, config: dict[str, str] | None = None
    ) -> TopicEntry:
        if name in self.topics:
            raise ValueError(f"topic {name} already exists")
        # A counter, not max(index) + 1: a failover adds every topic, and a scan per topic
        # would make it quadratic in the topic count. Indices of deleted topics are not reused.
        entry = TopicEntry(name, self._next_index, partitions, dict(config or {}))
        self._next_index += 1
        self.topics[name] = entry
        self._topics_frame = None
        return entry

    def topics_frame(self) -> DataFrame:
        """(topic_index, topic): small, built from the driver's topic list."""
        if self._topics_frame is None:
            rows = [(t.index, t.name) for t in self.topics.values()]
            self._topics_frame = local_frame(self.spark, rows, s.TOPICS_SCHEMA)
        return self._topics_frame

    def topic_indices(self, names: set[str]) -> list[int]:
        return sorted(self.topics[n].index for n in names if n in self.topics)

    def topic_names(self, indices: set[int]) -> list[str]:
        return sorted(t.name for t in self.topics.values() if t.index in indices)

    def remove_topics(self, names: set[str]) -> None:
        for n in names:
            self.topics.pop(n, None)
        self._topics_frame = None

    # -- generations ---------------------------------------------------------------------------
    def load(self, table: DataFrame) -> None:
        """Install ``table`` (compact: what ZooKeeper holds, read at failover) as generation 0.

        It is read once, into a local checkpoint; the failover's own changes are then committed
        against it like any event's, so its diff needs no join of two generations.
        """
        s.check_compact(table)
        loaded = local_checkpoint(table.select(*s.compact_columns(s.width(table))), eager=False)
        self.rows = loaded.count()  # the one pass over ZooKeeper's rows
        self.generation = 0
        self._persisted = loaded
        self.partitions = loaded

    def commit(
        self,
        new_partitions: DataFrame,
        label: str = "",
        counters: Sequence[str] = (),
        kept: Sequence[str] = (),
        diff_totals: DiffTotals | None = None,
    ) -> Gauges:
        """Swap in ``new_partitions`` (compact) as the next generation; one Spark action.

        The action materialises the persisted table and computes the gauges, and the sums of
        the per-partition ``counters`` columns a handler attached (``Gauges.counters``), in the
        same pass. The counters stay in the cached frame; ``partitions`` projects them away.
        So do the rows' ``state_change_errors``, whose number is counted under that name, and
        the ``kept`` columns (per-row results the handler reads back off ``committed``).

        ``diff_totals``: when the generation is ``stamped``, the same action also checkpoints its
        diff and computes these aggregates over it, into ``diff`` and ``diff_totals`` (else
        both are None and the caller diffs the generations itself).
        """
        s.check_compact(new_partitions)
        w = s.width(new_partitions)
        errors = [ERRORS] if ERRORS in new_partitions.columns else []
        same_width = self.partitions is not None and s.width(self.partitions) == w
        stamps = (
            stamp_changes(new_partitions, self.generation)
            if same_width and can_stamp(new_partitions)
            else []
        )
        table = new_partitions.select(*s.compact_columns(w), *counters, *errors, *kept, *stamps)
        self.generation += 1
        # A local checkpoint cuts the logical plan at every generation: without it each plan
        # would carry every ancestor's expressions and planning time would grow per event. The
        # controller frees replaced generations (``release``); the periodic JVM GC lets Spark's
        # cleaner free other dropped checkpoints.
        table = local_checkpoint(table, eager=False)
        if self.checkpoint_interval and self.generation % self.checkpoint_interval == 0:
            self.spark.sparkContext._jvm.System.gc()  # type: ignore[union-attr]
        # The view's brokers are data the cached Columns read (``ClusterView.as_columns``).
        view: BrokerView = self.view()
        view, literals = view.as_columns() or (view, {})
        aggregates = _gauge_columns(
            w,
            view,
            tuple(self.deleting),
            tuple(sorted(self.deletion.topics_with_deletion_started)),
            tuple(counters),
            bool(errors),
            bool(stamps),
        )
        aggregated = table.withColumns(literals).agg(*aggregates)
        diff = None
        if stamps and diff_totals is not None:
            # The diff is a filter of the new rows: materialised and totalled by the same job
            # (a second action would plan and run a pass of its own). Dropped below when the
            # generation turns out not stamped.
            diff = local_checkpoint(stamped_diff(table), eager=False)
            frame, totals = diff_totals(diff)
            aggregated = aggregated.crossJoin(frame.agg(*totals))
        row = aggregated.first()
        assert row is not None
        # The join-free diff holds when every row of the replaced generation is still here (no
        # row dropped) and every changed row knows its previous values.
        rows = int(row["_rows"])
        self.stamped = (
            bool(stamps)
            and self.rows is not None
            and rows == self.rows + int(row["_created"] or 0)
            and not row["_stale"]
        )
        self.rows = rows
        if diff is not None and not self.stamped:
            release(diff)
            diff = None
        self.diff, self.diff_totals = diff, row if diff is not None else None
        self._persisted = table
        self.partitions = table.select(*s.compact_columns(w))
        gauges = Gauges(
            global_partition_count=int(row["with_leadership"] or 0),
            offline_partitions_count=int(row["offline"] or 0),
            preferred_replica_imbalance_count=int(row["imbalance"] or 0),
            global_topic_count=len(self.topics),
            topics_to_delete_count=len(self.deleting),
            replicas_to_delete_count=int(row["ReplicasToDeleteCount"] or 0),
            topics_ineligible_to_delete_count=len(self.deletion.topics_ineligible_for_deletion),
            replicas_ineligible_to_delete_count=int(row["ReplicasIneligibleToDeleteCount"] or 0),
            under_replicated_partitions=int(row["urp"] or 0),
            reassigning_partitions=int(row["reassigning"] or 0),
            lagging_followers=int(row["lagging"] or 0),
            counters={c: int(row[c] or 0) for c in (*counters, *errors)},
        )
        log.debug("generation %d committed (%s): %s", self.generation, label, gauges)
        return gauges

    def reset(self) -> None:
        """Kafka's context reset on resignation: epoch 0, every map emptied."""
        self.__init__(self.spark, self.checkpoint_interval, self.delete_topic_enable)  # type: ignore[misc]


@lru_cache(maxsize=16)
def _gauge_columns(
    w: int,
    view: BrokerView,
    deleting: tuple[int, ...],
    started: tuple[int, ...],
    counters: tuple[str, ...],
    errors: bool,
    stamps: bool,
) -> tuple[Column, ...]:
    """The commit's aggregates, built once per key: an event's are otherwise ~1,000 JVM calls.

    ``deleting``: topics queued for deletion (left out of the imbalance); ``started``: those
    whose deletion has started (§16.1: their partitions are not counted offline).
    """
    excluded = in_topics(deleting) if deleting else None
    offline = F.col(s.STATE_CODE) == int(PartitionState.OfflinePartition)
    if started:
        offline = offline & ~in_topics(started)
    return (
        F.sum(has_leadership().cast("long")).alias("with_leadership"),
        F.sum(offline.cast("long")).alias("offline"),
        preferred_replica_imbalance(w, excluded).alias("imbalance"),
        F.sum(_under_replicated(w).cast("long")).alias("urp"),
        F.sum(_lagging(w, view).cast("long")).alias("lagging"),
        F.sum(being_reassigned().cast("long")).alias("reassigning"),
        *[a.alias(n) for n, a in deletion_gauges(w, deleting).items()],
        *[F.sum(F.col(c).cast("long")).alias(c) for c in counters],
        *([F.sum(error_count()).alias(ERRORS)] if errors else []),
        F.count(F.lit(1)).alias("_rows"),
        *(_stamp_totals() if stamps else ()),
    )


def _stamp_totals() -> tuple[Column, ...]:
    """Created rows, and rows whose previous values are unknown (see ``stamp_changes``)."""
    return (
        F.sum((F.col(CHANGE) == CREATED).cast("long")).alias("_created"),
        stale_rows().alias("_stale"),
    )


def _in_isr(k: int, w: int) -> Column:
    return in_list(F.col(s.replica_col(k)), [F.col(s.isr_col(j)) for j in range(w)])


def _under_replicated(w: int) -> Column:
    """Kafka's UnderReplicatedPartitions for a led partition: |ISR| < |replicas − adding|."""
    adding = F.col(s.ADDING_MASK)
    missing = [
        (F.col(s.replica_col(k)) != s.EMPTY_SLOT)
        & (adding.bitwiseAND(F.lit(1 << k)) == 0)
        & ~_in_isr(k, w)
        for k in range(w)
    ]
    return has_leadership() & (F.col(s.LEADER) >= 0) & any_of(missing)


def lagging_positions(w: int, view: BrokerView) -> list[Column]:
    """Per position: a live follower in an online state outside the ISR (it will catch up).

    Followers on shutting-down brokers do not: they stop fetching and the broker exits."""
    return [
        view.online(k)
        & (F.col(s.replica_col(k)) != F.col(s.LEADER))
        & F.col(s.replica_state_col(k)).isin(
            int(ReplicaState.NewReplica), int(ReplicaState.OnlineReplica)
        )
        & ~_in_isr(k, w)
        for k in range(w)
    ]


def _lagging(w: int, view: BrokerView) -> Column:
    """A partition led by a live broker with a lagging follower."""
    leader_live = view.live_or_shutting_down.contains(F.col(s.LEADER))
    return has_leadership() & leader_live & any_of(lagging_positions(w, view))
