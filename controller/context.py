"""The controller context: driver-side facts, and the current generation of the partitions table.

Everything that grows with partitions lives in the generation (persisted compact rows, see
``statemachines.schemas``); the driver keeps only brokers, topics and in-flight admin work.
``commit`` (``controller.commit.generation_commits``) is the one place a generation is swapped.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, Row, SparkSession

from controller.commit.gauges import Gauges
from controller.commit.generation_commits import CommitFacts, DiffTotals, GenerationTable
from controller.commit.generations import Generations
from controller.topic_deletion_state import TopicDeletionState
from statemachines import schemas as s
from statemachines.brokers import BrokerSet, ClusterView
from statemachines.compact_rows import CompactRow
from statemachines.local_rows import local_frame


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
    topic_id: str | None = None  # base64 UUID (IBP >= 2.8-IV0)


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
        self.deletion = TopicDeletionState(enabled=delete_topic_enable)
        self.checkpoint_interval = checkpoint_interval
        self.table = GenerationTable(spark, checkpoint_interval)

    # -- the committed generation (``GenerationTable``) ------------------------------------------
    @property
    def partitions(self) -> DataFrame | None:
        """The committed generation: compact rows."""
        return self.table.partitions

    @property
    def committed(self) -> DataFrame | None:
        """The last commit's rows with its per-row results (counters, errors, kept columns):
        every row, or those the event touched (``commit``)."""
        return self.table.committed

    @property
    def store(self) -> Generations:
        return self.table.store

    @property
    def generation(self) -> int:
        return self.table.generation

    @property
    def rows(self) -> int | None:
        return self.table.rows

    @property
    def stamped(self) -> bool:
        return self.table.stamped

    @property
    def diff(self) -> DataFrame | None:
        return self.table.diff

    @property
    def diff_totals(self) -> Row | None:
        return self.table.diff_totals

    def commit(
        self,
        new_partitions: DataFrame,
        label: str = "",
        counters: Sequence[str] = (),
        kept: Sequence[str] = (),
        diff_totals: DiffTotals | None = None,
        partial: bool = False,
    ) -> Gauges:
        """Swap in ``new_partitions`` as the next generation (``GenerationTable.commit``), its
        gauges read against this context's brokers and deletion sets."""
        facts = CommitFacts(
            view=self.view(),
            deleting=tuple(self.deleting),
            started=tuple(sorted(self.deletion.topics_with_deletion_started)),
            ineligible=len(self.deletion.topics_ineligible_for_deletion),
            topics=len(self.topics),
        )
        return self.table.commit(new_partitions, facts, label, counters, kept, diff_totals, partial)

    # -- brokers -------------------------------------------------------------------------------
    @property
    def live_broker_ids(self) -> BrokerSet:
        """Registered brokers that are not shutting down (spec §0 "live")."""
        return BrokerSet.of(set(self.live_brokers) - self.shutting_down)

    @property
    def deleting(self) -> list[int]:
        """Indices of the topics queued for deletion."""
        return sorted(self.deletion.topics_to_be_deleted) if self.deletion.enabled else []

    def set_epoch(self, epoch: int, epoch_zk_version: int) -> None:
        """This controller won the election at ``epoch`` (``/controller_epoch`` at that version)."""
        self.epoch, self.epoch_zk_version = epoch, epoch_zk_version

    def set_live_brokers(self, brokers: Iterable[LiveBroker]) -> None:
        """Failover: the registered brokers, none of them shutting down."""
        self.live_brokers = {b.id: b for b in brokers}
        self.shutting_down.clear()

    def add_live_broker(self, broker: LiveBroker) -> None:
        self.live_brokers[broker.id] = broker

    def remove_live_brokers(self, ids: Iterable[int]) -> None:
        """Brokers gone from ``/brokers/ids`` (or bounced): a controlled shutdown in progress
        ends with them, as in Kafka's ``onBrokerFailure``."""
        for b in ids:
            del self.live_brokers[b]
            self.shutting_down.discard(b)

    def mark_shutting_down(self, broker: int) -> None:
        self.shutting_down.add(broker)

    def mark_log_dirs_offline(self, brokers: Iterable[int]) -> None:
        self.offline_dir_brokers.update(brokers)

    def restore_log_dirs(self, brokers: Iterable[int]) -> None:
        """A broker that registers again has its log directories back (§8.6)."""
        self.offline_dir_brokers -= set(brokers)

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
        self,
        name: str,
        partitions: int,
        config: dict[str, str] | None = None,
        topic_id: str | None = None,
    ) -> TopicEntry:
        if name in self.topics:
            raise ValueError(f"topic {name} already exists")
        # A counter, not max(index) + 1: a failover adds every topic, and a scan per topic
        # would make it quadratic in the topic count. Indices of deleted topics are not reused.
        entry = TopicEntry(name, self._next_index, partitions, dict(config or {}), topic_id)
        self._next_index += 1
        self.topics[name] = entry
        self._topics_frame = None
        return entry

    def update_topic_config(self, name: str, config: dict[str, str]) -> None:
        """Merge ``config`` into the topic's overrides."""
        self.topics[name].config.update(config)

    def set_topic_config(self, name: str, config: dict[str, str]) -> None:
        """The topic's overrides are ``config`` (as just read from ZooKeeper)."""
        self.topics[name].config = dict(config)

    def set_topic_id(self, name: str, topic_id: str) -> None:
        self.topics[name].topic_id = topic_id

    def set_partition_count(self, name: str, partitions: int) -> None:
        self.topics[name].partitions = partitions

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
        """Install ``table`` (what ZooKeeper holds, read at failover) as generation 0."""
        self.table.load(table)

    def load_rows(self, rows: dict[tuple[int, int], CompactRow]) -> None:
        """``load`` for rows read on the driver (a small cluster): no Spark job."""
        self.table.load_rows(rows)

    def reset(self) -> None:
        """Kafka's context reset on resignation: epoch 0, every map emptied."""
        self.__init__(self.spark, self.checkpoint_interval, self.delete_topic_enable)  # type: ignore[misc]
