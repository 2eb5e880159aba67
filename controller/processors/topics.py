"""Topic events (spec §9.1, §9.2): creation and partition addition.

These read what admins wrote to ZooKeeper (``controller.zk.admin_zk_client``), run the bulk
handlers of ``controller.handlers.topics`` and commit one generation.
"""

from __future__ import annotations

import base64
import logging
import random
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from kazoo.exceptions import NoNodeError
from pyspark.sql import functions as F

from controller.commit.driver_path import Scope
from controller.events import controller_events as ev
from controller.handlers.topics import (
    INIT_FAILED,
    INITIALIZED,
    add_partition_rows,
    assigned_partition_rows,
    on_new_partition_creation,
)
from controller.processors.parts import ControllerParts
from controller.row_handlers import topics as rt
from controller.zk.admin_zk_client import read_topic_assignment, read_topic_config
from controller.zk.fencing import FencedWriter, SetData
from controller.zk.paths import BROKER_TOPICS, TopicZNode
from statemachines import schemas as s
from statemachines.columns import in_topics

log = logging.getLogger(__name__)


class TopicEvents:
    """``process_*`` for TopicChange and PartitionModifications, and the topic watches."""

    def __init__(self, parts: ControllerParts) -> None:
        self.ctx, self.zk, self.spark = parts.ctx, parts.zk, parts.spark
        self.committer, self.settings = parts.committer, parts.settings
        self.put, self.is_active, self.broker_id = parts.put, parts.is_active, parts.broker_id
        # Kafka draws ids at random; here from the run's seed, so that runs repeat exactly.
        self._ids = random.Random(f"topic-ids:{parts.settings.seed}:{parts.broker_id}")

    # -- watches -------------------------------------------------------------------------------
    def topics_watch(self, _: Any) -> None:
        self.put(ev.TopicChange())

    def partitions_watch(self, topic: str) -> Callable[[Any], None]:
        def fire(watched: Any) -> None:
            if getattr(watched, "type", None) != "DELETED":
                self.put(ev.PartitionModifications(topic))

        return fire

    def register_watches(self) -> None:
        """Failover: a child watch on the topics, a data watch per topic."""
        for topic in self.zk.get_children(BROKER_TOPICS, watch=self.topics_watch):
            self.zk.exists(TopicZNode.path(topic), watch=self.partitions_watch(topic))

    # -- topic ids (IBP >= 2.8-IV0, spec §3.3 d) ---------------------------------------------------
    def new_topic_id(self) -> str:
        """A random version-4 UUID in Kafka's text form (URL-safe base64, no padding)."""
        drawn = uuid.UUID(bytes=self._ids.randbytes(16), version=4)
        return base64.urlsafe_b64encode(drawn.bytes).rstrip(b"=").decode()

    def assign_missing_topic_ids(self, names: Iterable[str]) -> None:
        """Give each of ``names`` without an id a random one, written back to its topic znode
        (fenced, as Kafka's ``setTopicIds``); nothing below inter.broker.protocol 2.8-IV0."""
        missing = sorted(n for n in names if self.ctx.topics[n].topic_id is None)
        if not self.settings.topic_ids or not missing:
            return
        ops = []
        for path, result in self.zk.get_many([TopicZNode.path(n) for n in missing]):
            if isinstance(result, Exception):  # deleted meanwhile: a later TopicChange says so
                continue
            name = path.rsplit("/", 1)[1]
            topic_id = self.new_topic_id()
            znode = TopicZNode.decode(result[0], path)
            update = {"version": 3, "topic_id": topic_id}
            ops.append(SetData(path, TopicZNode.encode(znode.model_copy(update=update))))
            self.ctx.set_topic_id(name, topic_id)
        writer = FencedWriter(self.zk, self.ctx.epoch_zk_version)
        for i in range(0, len(ops), 100):
            writer.multi(ops[i : i + 100])

    def load_topic_configs(self) -> None:
        for name in self.ctx.topics:
            self.ctx.update_topic_config(name, read_topic_config(self.zk, name))

    # -- creation and partition addition (§9.1, §9.2) ------------------------------------------
    def process_topic_change(self, _: ev.TopicChange) -> None:
        if not self.is_active():
            return
        ctx = self.ctx
        children = set(self.zk.get_children(BROKER_TOPICS, watch=self.topics_watch))
        gone = set(ctx.topics) - children
        if not gone:
            assignments = self._new_topics(children)
            if not assignments:
                return
            log.info("[Controller id=%d] New topics: %s", self.broker_id, sorted(assignments))
            rows = rt.assigned_partition_rows(assignments)
            keys = {r.key for r in rows}  # none is in the table: nothing to fetch
            step = self.committer.driver_step(
                "TopicChange", (INITIALIZED, INIT_FAILED), scope=Scope.named(keys)
            )
            if step is not None:
                rt.on_new_partition_creation(step, rows, self.committer.row_view())
                return
            table = self.committer.table()
        else:  # removed behind the controller's back: forget them, as Kafka's context does
            table = self.committer.table().where(~in_topics(ctx.topic_indices(gone)))
            ctx.remove_topics(gone)
            assignments = self._new_topics(children)
            if not assignments:
                self.committer.stage(table, "TopicChange")
                return
            log.info("[Controller id=%d] New topics: %s", self.broker_id, sorted(assignments))
        rows = assigned_partition_rows(self.spark, assignments, s.width(table))
        table = on_new_partition_creation(
            add_partition_rows(table, rows), in_topics(sorted(assignments)), ctx.view()
        )
        self.committer.stage(table, "TopicChange", extra=(INITIALIZED, INIT_FAILED))

    def _new_topics(self, children: set[str]) -> dict[int, dict[int, list[int]]]:
        """Add the topics in ``children`` the context does not know (their assignments, by
        index), with their configs and ids."""
        ctx = self.ctx
        assignments: dict[int, dict[int, list[int]]] = {}
        for name in sorted(children - set(ctx.topics)):
            try:
                znode = read_topic_assignment(self.zk, name, watch=self.partitions_watch(name))
            except NoNodeError:
                continue
            config = read_topic_config(self.zk, name)
            entry = ctx.add_topic(name, len(znode.partitions), config, znode.topic_id)
            assignments[entry.index] = {int(p): r for p, r in znode.partitions.items()}
        self.assign_missing_topic_ids(ctx.topic_names(set(assignments)))
        return assignments

    def process_partition_modifications(self, event: ev.PartitionModifications) -> None:
        if not self.is_active():
            return
        ctx = self.ctx
        entry = ctx.topics.get(event.topic)
        try:
            znode = read_topic_assignment(
                self.zk, event.topic, watch=self.partitions_watch(event.topic)
            )
        except NoNodeError:
            return
        if entry is None:
            return
        added = {int(p): r for p, r in znode.partitions.items() if int(p) >= entry.partitions}
        if not added:
            return
        if entry.index in ctx.deletion.topics_to_be_deleted:
            # §4.3: additions to a topic queued for deletion are reverted in ZooKeeper.
            log.info(
                "Skipping adding partitions %s for topic %s being deleted",
                sorted(added),
                entry.name,
            )
            kept = {p: r for p, r in znode.partitions.items() if int(p) < entry.partitions}
            restored = znode.model_copy(update={"partitions": kept})
            self.zk.set(TopicZNode.path(entry.name), TopicZNode.encode(restored))
            return
        rows = rt.assigned_partition_rows({entry.index: added})
        step = self.committer.driver_step(
            "PartitionModifications",
            (INITIALIZED, INIT_FAILED),
            scope=Scope.named({r.key for r in rows}),
        )
        if step is not None:
            rt.on_new_partition_creation(step, rows, self.committer.row_view())
            ctx.set_partition_count(entry.name, len(znode.partitions))
            return
        table = self.committer.table()
        rows = assigned_partition_rows(self.spark, {entry.index: added}, s.width(table))
        new = (F.col(s.TOPIC_INDEX) == entry.index) & (F.col(s.PARTITION) >= entry.partitions)
        table = on_new_partition_creation(add_partition_rows(table, rows), new, ctx.view())
        ctx.set_partition_count(entry.name, len(znode.partitions))
        self.committer.stage(table, "PartitionModifications", extra=(INITIALIZED, INIT_FAILED))
