"""Leader-election events (spec §11, §7): manual and automatic preferred elections, and the
unclean elections that follow turning ``unclean.leader.election.enable`` on.

``ReplicaLeaderElection`` comes from the admin znode or the ElectLeaders API (preferred or
unclean); the auto leader rebalance reschedules itself every
``leader.imbalance.check.interval.seconds``.

``/admin/preferred_replica_election`` (the legacy tool's request) is watched for creation. An
election it asked for, and the one every failover runs on what it still lists (§3.3 step 13),
end as Kafka's ``removePartitionsFromPreferredReplicaElection``: once the event's rows are
committed the znode is deleted (fenced) and the watch armed again.
"""

from __future__ import annotations

from typing import Any

from kazoo.exceptions import NoNodeError
from pyspark.sql import functions as F

from controller.commit.driver_path import Scope
from controller.events import controller_events as ev
from controller.handlers import election as he
from controller.processors.parts import ControllerParts
from controller.row_handlers import election as re_
from controller.row_handlers.event_rows import EventRows
from controller.scheduler.timer import Timer
from controller.zk.admin_zk_client import read_topic_config
from controller.zk.kafka_zk_client import fenced_delete
from controller.zk.paths import PREFERRED_REPLICA_ELECTION, PreferredReplicaElectionZNode
from statemachines.election_kinds import ElectionTrigger, ElectionType
from statemachines.local_rows import local_frame

FIRST_AUTO_REBALANCE_DELAY_MS = 5_000


class ElectionEvents:
    """``process_*`` for ReplicaLeaderElection, AutoPreferredReplicaLeaderElection and the two
    unclean-enable events."""

    def __init__(self, parts: ControllerParts, timer: Timer) -> None:
        self.ctx, self.zk, self.spark = parts.ctx, parts.zk, parts.spark
        self.committer, self.settings = parts.committer, parts.settings
        self.put, self.is_active, self.broker_id = parts.put, parts.is_active, parts.broker_id
        self.timer = timer
        self._rebalance_task: Any = None

    # -- manual elections (spec §11.1) -----------------------------------------------------------
    def process_replica_leader_election(self, event: ev.ReplicaLeaderElection) -> None:
        reply = event.callback or (lambda *a: None)
        if not self.is_active():
            reply({p: "NOT_CONTROLLER" for p in event.partitions or ()})
            return
        partitions = event.partitions
        if event.election_trigger is not ElectionTrigger.AdminClientTriggered:
            # Looking for the znode arms the watch for the next request; none: nothing to do.
            if not self.register_preferred_election_watch():
                return
            if partitions is None:
                partitions = self.requested_preferred_elections()
        self.elect(partitions, event.election_type, event.election_trigger)
        if event.election_trigger is ElectionTrigger.ZkTriggered:
            self.committer.on_commit(self.remove_preferred_election_request)
        reply("NONE")

    def elect(
        self,
        partitions: frozenset[ev.TopicPartition] | None,
        election_type: ElectionType,
        trigger: ElectionTrigger,
        label: str = "ReplicaLeaderElection",
    ) -> None:
        """§11.1 steps 4-7 for ``partitions`` (None: all)."""
        ctx, c = self.ctx, self.committer
        keys = None
        if partitions is not None:
            keys = {
                (ctx.topics[p.topic].index, p.partition)
                for p in partitions
                if p.topic in ctx.topics
            }
        step = self.driver_step(label, keys)
        if step is not None:
            re_.on_replica_election(
                step,
                keys,
                election_type,
                trigger,
                c.row_view(),
                ctx.deleting,
                c.unclean_rule(),
                self.settings.kafka_version,
            )
            return
        # Only the listed partitions that need the election can change: a partial commit.
        scope = he.replica_election_scope(election_type, ctx.view())
        named = None
        if keys is not None:
            named = local_frame(self.spark, sorted(keys), "topic_index int, partition int")
        table = he.on_replica_election(
            c.table(scope, named=named),
            F.lit(True),
            election_type,
            trigger,
            ctx.view(),
            ctx.deleting,
            c.unclean_column(),
            self.settings.kafka_version,
        )
        c.stage(table, label, partial=True)

    # -- /admin/preferred_replica_election (spec §2.1, §3.3 steps 3 and 13) -----------------------
    def preferred_election_watch(self, watched: Any) -> None:
        if getattr(watched, "type", None) == "CREATED":  # Kafka's handler reacts to creation only
            self.put(ev.ReplicaLeaderElection(None, ElectionType.PREFERRED))

    def register_preferred_election_watch(self) -> bool:
        """Exists watch on ``/admin/preferred_replica_election``; True if the znode is there."""
        return (
            self.zk.exists(PREFERRED_REPLICA_ELECTION, watch=self.preferred_election_watch)
            is not None
        )

    def requested_preferred_elections(self) -> frozenset[ev.TopicPartition]:
        """The znode's partitions (none when it is gone): one read, as Kafka's."""
        try:
            data, _stat = self.zk.get(PREFERRED_REPLICA_ELECTION)
        except NoNodeError:
            return frozenset()
        request = PreferredReplicaElectionZNode.decode(data)
        return frozenset(ev.TopicPartition(p.topic, p.partition) for p in request.partitions)

    def resume_preferred_elections(self) -> None:
        """Failover step 13: a preferred election for what the znode still lists. Partitions of
        gone topics or led by their preferred replica already, and topics queued for deletion,
        are left out (Kafka's ``fetchPendingPreferredReplicaElections``)."""
        pending = self.requested_preferred_elections()
        if pending:
            trigger = ElectionTrigger.ZkTriggered
            self.elect(pending, ElectionType.PREFERRED, trigger, "pending preferred elections")
        self.committer.on_commit(self.remove_preferred_election_request)

    def remove_preferred_election_request(self, _committed: object, _gauges: object) -> None:
        """After the election's commit, even of nothing (``onReplicaElection``'s finally): the
        znode goes and the watch is armed again. Kafka queues a ``ReplicaLeaderElection`` for
        that; armed here, at once: an event would race the watch events this one's writes cause
        (as for ``/admin/reassign_partitions``). One created meanwhile is processed as Kafka's
        event would."""
        fenced_delete(self.zk, [PREFERRED_REPLICA_ELECTION], self.ctx.epoch_zk_version)
        if self.register_preferred_election_watch():
            self.put(ev.ReplicaLeaderElection(None, ElectionType.PREFERRED))

    def driver_step(self, label: str, keys: set[tuple[int, int]] | None = None) -> EventRows | None:
        """The event's rows on the driver (``Committer.driver_step``; ``keys``: the only rows
        it may touch) unless a deletion or a reassignment is in flight on a table the driver
        does not hold (``Committer.admin_work_in_flight``)."""
        if self.committer.admin_work_in_flight():
            return None
        return self.committer.driver_step(label, scope=None if keys is None else Scope.named(keys))

    # -- auto leader rebalance (spec §11.2) -------------------------------------------------------
    def schedule_auto_rebalance(self, delay_ms: int = FIRST_AUTO_REBALANCE_DELAY_MS) -> None:
        if self.settings.auto_leader_rebalance_enable:
            self._rebalance_task = self.timer.schedule_once(
                delay_ms, lambda: self.put(ev.AutoPreferredReplicaLeaderElection())
            )

    def cancel_auto_rebalance(self) -> None:
        if self._rebalance_task is not None:
            self._rebalance_task.cancel()
            self._rebalance_task = None

    def process_auto_preferred_replica_leader_election(
        self, _: ev.AutoPreferredReplicaLeaderElection
    ) -> None:
        if not self.is_active():
            return
        c = self.committer
        try:
            step = self.driver_step("AutoPreferredReplicaLeaderElection")
            if step is not None:
                re_.check_and_trigger_auto_leader_rebalance(
                    step,
                    list(step.rows.values()),
                    c.row_view(),
                    self.settings.leader_imbalance_per_broker_percentage,
                    self.ctx.deleting,
                    c.reassigning_partitions() > 0,
                    self.settings.kafka_version,
                )
                return
            # Only partitions off their preferred leader can move: a partial commit.
            table = he.check_and_trigger_auto_leader_rebalance(
                c.table(he.not_preferred()),
                self.ctx.view(),
                self.settings.leader_imbalance_per_broker_percentage,
                self.ctx.deleting,
                # 2.6-3.3: nothing is elected while any partition is being reassigned.
                c.reassigning_partitions() > 0,
                self.settings.kafka_version,
                whole=self.ctx.partitions,
            )
            c.stage(table, "AutoPreferredReplicaLeaderElection", partial=True)
        finally:
            self.schedule_auto_rebalance(
                self.settings.leader_imbalance_check_interval_seconds * 1000
            )

    # -- unclean leader election enabled (spec §7) ------------------------------------------------
    def process_topic_unclean_leader_election_enable(
        self, event: ev.TopicUncleanLeaderElectionEnable
    ) -> None:
        if not self.is_active():
            return
        entry = self.ctx.topics.get(event.topic)
        if entry is None:
            return
        self.ctx.set_topic_config(event.topic, read_topic_config(self.zk, event.topic))
        c = self.committer
        step = self.driver_step("TopicUncleanLeaderElectionEnable")
        if step is not None:
            re_.on_unclean_leader_election_enable(
                step, c.row_view(), c.unclean_rule(), self.ctx.deleting, entry.index
            )
            return
        table = he.on_unclean_leader_election_enable(
            c.table(), self.ctx.view(), c.unclean_column(), self.ctx.deleting, entry.index
        )
        c.stage(table, "TopicUncleanLeaderElectionEnable")

    def process_unclean_leader_election_enable(self, _: ev.UncleanLeaderElectionEnable) -> None:
        if not self.is_active():
            return
        c = self.committer
        step = self.driver_step("UncleanLeaderElectionEnable")
        if step is not None:
            re_.on_unclean_leader_election_enable(
                step, c.row_view(), c.unclean_rule(), self.ctx.deleting
            )
            return
        table = he.on_unclean_leader_election_enable(
            c.table(), self.ctx.view(), c.unclean_column(), self.ctx.deleting
        )
        c.stage(table, "UncleanLeaderElectionEnable")
