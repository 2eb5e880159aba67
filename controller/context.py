"""The controller context: driver-side facts, and the current generation of the partitions table.

Everything that grows with partitions lives in the generation (a persisted compact DataFrame, see
``statemachines.schemas``); the driver keeps only brokers, topics and in-flight admin work.
````commit`` is the one place a generation is swapped: it checkpoints the new table locally (which
persists it and cuts its lineage), runs ONE Spark action that both materialises it and computes
the controller gauges (spec §16.1), and drops the previous generation.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from statemachines import schemas as s
from statemachines.brokers import BrokerSet, ClusterView
from statemachines.columns import has_leadership, in_topics
from statemachines.partition_states import PartitionState
from statemachines.rebalance import preferred_replica_imbalance

log = logging.getLogger(__name__)


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
    """The controller gauges of spec §16.1 computed over one generation."""

    global_partition_count: int
    offline_partitions_count: int
    preferred_replica_imbalance_count: int
    global_topic_count: int
    counters: dict[str, int] = field(default_factory=dict)


class ControllerContext:
    """Kafka's ``ControllerContext`` for a bulk controller (spec Appendix A)."""

    def __init__(
        self,
        spark: SparkSession,
        checkpoint_interval: int = 20,
    ) -> None:
        self.spark = spark
        self.epoch = 0
        self.epoch_zk_version = 0
        self.live_brokers: dict[int, LiveBroker] = {}
        self.shutting_down: set[int] = set()
        self.topics: dict[str, TopicEntry] = {}
        self.topics_queued_for_deletion: set[str] = set()
        self.partitions: DataFrame | None = None
        self._persisted: DataFrame | None = None
        self.generation = 0
        self.checkpoint_interval = checkpoint_interval

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
    def live_or_shutting_down_ids(self) -> BrokerSet:
        return BrokerSet.of(self.live_brokers)

    def view(self) -> ClusterView:
        return ClusterView(
            live=self.live_broker_ids,
            shutting_down=BrokerSet.of(self.shutting_down & set(self.live_brokers)),
            controller_epoch=self.epoch,
        )

    # -- topics --------------------------------------------------------------------------------
    def add_topic(
        self, name: str, partitions: int, config: dict[str, str] | None = None
    ) -> TopicEntry:
        if name in self.topics:
            raise ValueError(f"topic {name} already exists")
        index = max((t.index for t in self.topics.values()), default=-1) + 1
        entry = TopicEntry(name, index, partitions, dict(config or {}))
        self.topics[name] = entry
        return entry

    def topics_frame(self) -> DataFrame:
        """(topic_index, topic): small, built from the driver's topic list."""
        rows = [(t.index, t.name) for t in self.topics.values()]
        return self.spark.createDataFrame(rows, s.TOPICS_SCHEMA)

    def topic_indices(self, names: set[str]) -> list[int]:
        return sorted(self.topics[n].index for n in names if n in self.topics)

    # -- generations ---------------------------------------------------------------------------
    def commit(
        self, new_partitions: DataFrame, label: str = "", counters: Sequence[str] = ()
    ) -> Gauges:
        """Swap in ``new_partitions`` (compact) as the next generation; one Spark action.

        The action materialises the persisted table and computes the gauges, and the sums of
        the per-partition ``counters`` columns a handler attached (``Gauges.counters``), in the
        same pass. The counters stay in the cached frame; ``partitions`` projects them away.
        """
        s.check_compact(new_partitions)
        w = s.width(new_partitions)
        table = new_partitions.select(*s.compact_columns(w), *counters)
        self.generation += 1
        # A local checkpoint cuts the logical plan at every generation: without it each plan
        # would carry every ancestor's expressions and planning time would grow per event. The
        # checkpointed blocks of dropped generations are freed by Spark's cleaner on JVM GC.
        table = table.localCheckpoint(eager=False)
        if self.checkpoint_interval and self.generation % self.checkpoint_interval == 0:
            self.spark.sparkContext._jvm.System.gc()  # type: ignore[union-attr]
        deleting = self.topic_indices(self.topics_queued_for_deletion)
        excluded = in_topics(deleting) if deleting else None
        offline = F.col(s.STATE_CODE) == int(PartitionState.OfflinePartition)
        if excluded is not None:
            offline = offline & ~excluded
        row = table.agg(
            F.sum(has_leadership().cast("long")).alias("with_leadership"),
            F.sum(offline.cast("long")).alias("offline"),
            preferred_replica_imbalance(table, excluded).alias("imbalance"),
            *[F.sum(F.col(c).cast("long")).alias(c) for c in counters],
        ).first()
        assert row is not None
        self._persisted = table
        self.partitions = table.select(*s.compact_columns(w))
        gauges = Gauges(
            global_partition_count=int(row["with_leadership"] or 0),
            offline_partitions_count=int(row["offline"] or 0),
            preferred_replica_imbalance_count=int(row["imbalance"] or 0),
            global_topic_count=len(self.topics),
            counters={c: int(row[c] or 0) for c in counters},
        )
        log.debug("generation %d committed (%s): %s", self.generation, label, gauges)
        return gauges

    def reset(self) -> None:
        """Kafka's context reset on resignation: epoch 0, every map emptied."""
        self.__init__(self.spark, self.checkpoint_interval)  # type: ignore[misc]
