"""Partition reassignment events of the controller (spec §10, KIP-455).

Both entry points — the legacy
``/admin/reassign_partitions`` znode and the AlterPartitionReassignments API — become a small plan
DataFrame, are validated (§10.4) and started in bulk (``handlers.reassignment``); completion
(phase B) runs when the target replicas are in the ISR, after an ISR change. After each commit that
changed assignments, the topic znodes are rewritten from the committed table, and completed
partitions leave ``/admin/reassign_partitions`` (the znode goes when empty).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from controller.events import controller_events as ev
from controller.handlers import reassignment as hr
from controller.handlers import reassignment_plans as rp
from controller.partition_store.bootstrap import topic_znode_json
from controller.processors.parts import ControllerParts
from controller.row_handlers import reassignment as rr
from controller.row_handlers.event_rows import EventRows
from controller.zk.fencing import Delete, FencedWriter, SetData
from controller.zk.paths import REASSIGN_PARTITIONS, ReassignPartitionsZNode, TopicZNode
from statemachines import schemas as s
from statemachines.brokers import BrokerSet
from statemachines.compact_rows import CompactRow
from statemachines.layout import to_public_partitions
from statemachines.local_rows import local_frame

log = logging.getLogger(__name__)

PLAN_SCHEMA = f"{s.TOPIC_INDEX} int, {s.PARTITION} int, {rp.TARGET} array<int>"
Entry = tuple[str, int, Sequence[int] | None]


class ReassignmentEvents:
    """``process_*`` for the reassignment events (§10) and the post-commit znode upkeep."""

    def __init__(self, parts: ControllerParts) -> None:
        self.ctx, self.zk, self.spark = parts.ctx, parts.zk, parts.spark
        self.committer, self.settings = parts.committer, parts.settings
        self.put, self.is_active, self.broker_id = parts.put, parts.is_active, parts.broker_id

    def reassign_watch(self, watched: Any) -> None:
        # Kafka's handler reacts to creation only; our own rewrites just re-arm the watch.
        if getattr(watched, "type", None) == "CREATED":
            self.put(ev.ZkPartitionReassignment())
        elif getattr(watched, "type", None) == "CHANGED":
            self.zk.exists(REASSIGN_PARTITIONS, watch=self.reassign_watch)

    def register_reassignment_watch(self) -> bool:
        """Exists watch on ``/admin/reassign_partitions``; True if the znode is there."""
        return self.zk.exists(REASSIGN_PARTITIONS, watch=self.reassign_watch) is not None

    # -- entry points --------------------------------------------------------------------------
    def process_zk_partition_reassignment(self, _: ev.ZkPartitionReassignment) -> None:
        self.reassign_from_zk()

    def reassign_from_zk(self) -> set[ev.TopicPartition]:
        """``/admin/reassign_partitions``, if there (re-arming its watch): start its entries;
        the partitions it started (Kafka's ``processZkPartitionReassignment``)."""
        if not self.is_active() or not self.register_reassignment_watch():
            return set()
        data, _stat = self.zk.get(REASSIGN_PARTITIONS)
        request = ReassignPartitionsZNode.decode_lenient(data)
        entries = [(e.topic, e.partition, e.replicas) for e in request.partitions]
        errors = self.reassign(entries, api=False, label="ZkPartitionReassignment")
        failed = {tp for tp, error in errors.items() if error != rp.NONE}
        if failed:
            log.warning("Failed to reassign partitions from ZooKeeper: %s", sorted(failed))
            self.maybe_remove_from_zk_reassignment(failed)
        return set(errors) - failed

    def process_api_partition_reassignment(self, event: ev.ApiPartitionReassignment) -> None:
        reply = event.callback or (lambda *a: None)
        if not self.is_active():
            reply("NOT_CONTROLLER")
            return
        entries = [(tp.topic, tp.partition, t) for tp, t in event.reassignments.items()]
        errors = self.reassign(entries, api=True, label="ApiPartitionReassignment")
        # An API request replaces the same partitions' ZooKeeper-submitted reassignment.
        self.maybe_remove_from_zk_reassignment({tp for tp, e in errors.items() if e == rp.NONE})
        reply(errors)

    def process_partition_reassignment_isr_change(
        self, _: ev.PartitionReassignmentIsrChange
    ) -> None:
        if self.is_active():
            self.maybe_complete_reassignments()

    def process_list_partition_reassignments(self, event: ev.ListPartitionReassignments) -> None:
        reply = event.callback or (lambda *a: None)
        if not self.is_active():
            reply("NOT_CONTROLLER")
            return
        names = {t.index: t.name for t in self.ctx.topics.values()}
        held = self.committer.held_rows()
        if held is not None:
            listing = [
                (k, list(r.replicas), rr.positions(r.adding_mask, r),
                 rr.positions(r.removing_mask, r))
                for k, r in sorted(held.items()) if rr.being_reassigned(r)
            ]  # fmt: skip
        else:
            (rows,) = self.committer.read(rp.list_reassignments(self.committer.table()))
            listing = [
                ((r[s.TOPIC_INDEX], r[s.PARTITION]), r[rp.REPLICAS_LIST], r[rp.ADDING_LIST],
                 r[rp.REMOVING_LIST])
                for r in rows
            ]  # fmt: skip
        listed = {}
        for (topic_index, partition), replicas, adding, removing in listing:
            tp = ev.TopicPartition(names[topic_index], partition)
            if event.partitions is None or tp in event.partitions:
                listed[tp] = (replicas, adding, removing)
        reply(listed)

    # -- the bulk work -------------------------------------------------------------------------
    def reassign(
        self, entries: Iterable[Entry], api: bool, label: str
    ) -> dict[ev.TopicPartition, str]:
        """Validate and start a plan held on the driver; per-partition Kafka error names."""
        rows = [
            (
                self.ctx.topics[t].index if t in self.ctx.topics else -1,
                p,
                None if r is None else list(r),
            )
            for t, p, r in entries
        ]
        if not rows:
            return {}
        names = {t.index: t.name for t in self.ctx.topics.values()}
        keyed = {(i, p): t for (t, p, _), (i, _, _) in zip(entries, rows, strict=True)}
        held = self.committer.held_rows()
        if held is not None:
            return self._reassign_on_driver(held, rows, keyed, names, api, label)
        plan = local_frame(self.spark, rows, PLAN_SCHEMA)
        # Only the plan's partitions can change: a partial commit, unless the table widens.
        table = self.committer.table(named=plan.select(s.TOPIC_INDEX, s.PARTITION))
        checked = rp.validate_reassignments(
            table, plan, self.ctx.view().live, self.ctx.deleting, api
        )
        (results,) = self.committer.read(checked)
        errors = {
            ev.TopicPartition(keyed[(r[s.TOPIC_INDEX], r[s.PARTITION])], r[s.PARTITION]): r[
                rp.ERROR
            ]
            for r in results
        }
        accepted = [r for r in results if r[rp.ERROR] == rp.NONE]
        if not accepted:
            return errors
        width = max(s.width(table), *(int(r[rp.WIDTH_NEEDED]) for r in accepted))
        if width > s.MAX_WIDTH:
            raise ValueError(
                f"a reassignment needs {width} replica positions; at most {s.MAX_WIDTH}"
            )
        start = local_frame(
            self.spark,
            [(r[s.TOPIC_INDEX], r[s.PARTITION], r[rp.TARGET]) for r in accepted],
            PLAN_SCHEMA,
        )
        widens = width > s.width(table)  # every row gets the new width
        out = hr.start_reassignment(
            self.committer.table() if widens else table,
            start,
            self.ctx.view(),
            width,
            replaces_ongoing=any(r[rp.REASSIGNING] for r in accepted),
            may_complete=any(r[rp.COMPLETES] for r in accepted),
        )
        self.committer.stage(out.drop(rp.ERROR), label, extra=hr.COUNTERS, partial=not widens)
        log.info(
            "[Controller id=%d] Reassigning %d partitions of topics %s",
            self.broker_id, len(accepted), sorted({names[r[s.TOPIC_INDEX]] for r in accepted}),
        )  # fmt: skip
        return errors

    def _reassign_on_driver(
        self,
        held: dict[tuple[int, int], CompactRow],
        rows: list[tuple[int, int, list[int] | None]],
        keyed: dict[tuple[int, int], str],
        names: dict[int, str],
        api: bool,
        label: str,
    ) -> dict[ev.TopicPartition, str]:
        """``reassign`` on the driver's rows: the same checks and steps, no job."""
        plan = [(i, p, None if r is None else tuple(r)) for i, p, r in rows]
        live = self.committer.row_view().live
        checked = rr.validate_reassignments(held, plan, live, self.ctx.deleting, api)
        errors = {ev.TopicPartition(keyed[c.key], c.key[1]): c.error for c in checked}
        accepted = [c for c in checked if c.error == rp.NONE]
        if not accepted:
            return errors
        width = max(c.width_needed for c in accepted)
        if width > s.MAX_WIDTH:
            raise ValueError(
                f"a reassignment needs {width} replica positions; at most {s.MAX_WIDTH}"
            )
        step = self.committer.driver_step(label, extra=hr.COUNTERS)
        assert step is not None, "the driver holds the table"
        rr.start_reassignment(
            step,
            {c.key: c.target for c in accepted},
            self.committer.row_view(),
            replaces_ongoing=any(c.reassigning for c in accepted),
            may_complete=any(c.completes for c in accepted),
        )
        log.info(
            "[Controller id=%d] Reassigning %d partitions of topics %s",
            self.broker_id, len(accepted), sorted({names[c.key[0]] for c in accepted}),
        )  # fmt: skip
        return errors

    def _resume_on_driver(
        self,
        label: str,
        started: BrokerSet | None = None,
        skip: set[tuple[int, int]] | frozenset[()] = frozenset(),
    ) -> bool:
        """Restart the reassignments in flight (those targeting ``started``, if given; not those
        of ``skip``) on the driver's rows; False when the driver does not hold them."""
        held = self.committer.held_rows()
        if held is None:
            return False
        plan = {k: t for k, t in rr.ongoing_plan(held).items() if k not in skip}
        if started is not None:
            plan = {k: t for k, t in plan.items() if t and set(t) & started.ids}
        if plan:
            step = self.committer.driver_step(label, extra=hr.COUNTERS)
            assert step is not None, "the driver holds the table"
            # The targets are the reassignments' own: none is replaced.
            rr.start_reassignment(step, plan, self.committer.row_view(), replaces_ongoing=False)
        return True

    def resume_reassignments(self) -> None:
        """Failover (§10.6): the ZooKeeper request first (it may have come while no controller
        was there), then every other in-flight reassignment; a partition the request started is
        not restarted again (Kafka's ``initializePartitionReassignments``)."""
        started = self.reassign_from_zk()
        skip = {(self.ctx.topics[tp.topic].index, tp.partition) for tp in started}
        if not self._resume_on_driver("resume reassignments", skip=skip):
            # Only partitions being reassigned can change: a partial step. The plan is read
            # off the rows it joins back to: settled.
            self._resume(rp.being_reassigned(), "resume reassignments", skip)

    def on_brokers_started(self, started: BrokerSet, label: str) -> None:
        """§8.1 step 6: every reassignment whose target replicas include a started broker runs
        ``onPartitionReassignment`` again (its epoch moves on, the adding replicas hear of it)."""
        if not self.committer.reassigning_partitions():
            return
        if not self._resume_on_driver(label, started):
            # Only those partitions can change: a partial step, settled (as above).
            self._resume(rp.targets_any(started, self.committer.width()), label)

    def _resume(
        self, scope: Column, label: str, skip: set[tuple[int, int]] | frozenset[()] = frozenset()
    ) -> None:
        """Restart the reassignments in flight among the rows of ``scope``, in Spark, but those
        of ``skip`` (keys)."""
        table = self.committer.table(scope, settled=True)
        plan = rp.ongoing_plan(table)
        if skip:
            skipped = local_frame(
                self.spark, sorted(skip), f"{s.TOPIC_INDEX} int, {s.PARTITION} int"
            )
            plan = plan.join(skipped, [s.TOPIC_INDEX, s.PARTITION], "left_anti")
        if self.committer.exists(plan):
            # The targets are the reassignments' own: none is replaced.
            out = hr.start_reassignment(table, plan, self.ctx.view(), replaces_ongoing=False)
            self.committer.stage(out.drop(rp.ERROR), label, extra=hr.COUNTERS, partial=True)

    def maybe_complete_reassignments(self) -> None:
        """Phase B for every reassignment whose targets are all in the ISR."""
        step = self.committer.driver_step("maybeCompleteReassignment", extra=hr.COUNTERS)
        if step is not None:
            rr.maybe_complete_reassignment(step, self.committer.row_view())
            return
        table = self.committer.table(rp.being_reassigned())  # the only rows it may touch
        out = hr.maybe_complete_reassignment(table, self.ctx.view())
        self.committer.stage(out, "maybeCompleteReassignment", extra=hr.COUNTERS, partial=True)

    # -- after a commit ------------------------------------------------------------------------
    def after_commit(
        self, committed: DataFrame | None, counters: dict[str, int], rows: EventRows | None
    ) -> None:
        """Rewrite changed topic znodes (U2/B6); drop completed partitions from the ZK request.
        ``committed`` holds the Spark path's rows, ``rows`` the driver path's."""
        changed: set[tuple[int, int]] = set()
        done: set[tuple[int, int]] = set()
        if rows is not None:
            changed = set(rows.counters.get(hr.ASSIGNMENT_CHANGED, {}))
            done = set(rows.counters.get(hr.REASSIGNMENT_COMPLETED, {}))
        elif committed is not None:
            if counters.get(hr.ASSIGNMENT_CHANGED, 0):
                self.write_topic_assignments(committed.where(F.col(hr.ASSIGNMENT_CHANGED) > 0))
            if counters.get(hr.REASSIGNMENT_COMPLETED, 0):
                done_rows = committed.where(F.col(hr.REASSIGNMENT_COMPLETED) > 0)
                done = {(r[0], r[1]) for r in done_rows.select(*rp.KEY).collect()}
        if changed:
            held = self.ctx.table.driver
            assert held is not None, "a driver step's commit leaves the rows on the driver"
            topics = {k[0] for k in changed}
            names = {t.index: t.name for t in self.ctx.topics.values()}
            self._write_topic_znodes(
                (names[i], rr.topic_znode_json([r for k, r in sorted(held.items()) if k[0] == i]))
                for i in sorted(topics)
            )
        if done and self.zk.exists(REASSIGN_PARTITIONS):
            names = {t.index: t.name for t in self.ctx.topics.values()}
            self.maybe_remove_from_zk_reassignment(
                {ev.TopicPartition(names[i], p) for i, p in done}
            )

    def write_topic_assignments(self, changed: DataFrame) -> None:
        """Rewrite ``/brokers/topics/<t>`` of every topic with a row in ``changed`` (fenced)."""
        indices = [r[0] for r in changed.select(s.TOPIC_INDEX).distinct().collect()]
        if not indices:
            return
        committed = self.ctx.partitions
        assert committed is not None
        table = committed.where(F.col(s.TOPIC_INDEX).isin(indices))
        public = to_public_partitions(table, self.ctx.topics_frame())
        self._write_topic_znodes((r[0], r[1]) for r in topic_znode_json(public).collect())

    def _write_topic_znodes(self, payloads: Iterable[tuple[str, str]]) -> None:
        """Set each (topic, assignment JSON) znode, with the topic's id, in fenced multis."""
        ops = [
            SetData(
                TopicZNode.path(topic), _with_topic_id(payload, self.ctx.topics[topic].topic_id)
            )
            for topic, payload in payloads
        ]
        writer = FencedWriter(self.zk, self.ctx.epoch_zk_version)
        for i in range(0, len(ops), 100):
            writer.multi(ops[i : i + 100])

    def maybe_remove_from_zk_reassignment(self, partitions: set[ev.TopicPartition]) -> None:
        """Drop ``partitions`` from ``/admin/reassign_partitions``; delete it when empty (§10.3
        B7)."""
        if not partitions or self.zk.exists(REASSIGN_PARTITIONS) is None:
            return
        data, stat = self.zk.get(REASSIGN_PARTITIONS)
        request = ReassignPartitionsZNode.decode_lenient(data)
        kept = [
            e
            for e in request.partitions
            if ev.TopicPartition(e.topic, e.partition) not in partitions
        ]
        if len(kept) == len(request.partitions):
            return
        writer = FencedWriter(self.zk, self.ctx.epoch_zk_version)
        if kept:
            value = request.model_copy(update={"partitions": kept})
            writer.multi(
                [SetData(REASSIGN_PARTITIONS, ReassignPartitionsZNode.encode(value), stat.version)]
            )
        else:
            writer.multi([Delete(REASSIGN_PARTITIONS, stat.version)])
            # The exists-watch went with the znode: arm it again so that the next request is seen
            # (Kafka enqueues a ZkPartitionReassignment for that, "Ensure we detect future
            # reassignments"). Armed here, at once: an event would race the watch events this
            # one's writes cause. One created meanwhile is processed as Kafka's event would.
            if self.register_reassignment_watch():
                self.put(ev.ZkPartitionReassignment())


def _with_topic_id(payload: str, topic_id: str | None) -> bytes:
    """A topic znode's JSON with the topic's id as its last field (``TopicZNode``'s order)."""
    if topic_id is not None:
        payload = f'{payload[:-1]},"topic_id":"{topic_id}"}}'
    return payload.encode()
