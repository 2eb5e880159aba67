"""Leader-election events of the controller (spec §11): manual and automatic preferred elections.

``ElectionEvents`` is part of ``KafkaController``: ``ReplicaLeaderElection`` (the admin znode
or the ElectLeaders API, preferred or unclean) and the periodic auto leader rebalance, which
reschedules itself every ``leader.imbalance.check.interval.seconds``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from controller import events as ev
from controller.handlers import election as he
from statemachines.local_rows import local_frame

if TYPE_CHECKING:
    from controller.kafka_controller import KafkaController as _Controller
else:
    _Controller = object


class ElectionEvents(_Controller):
    """``process_*`` for ReplicaLeaderElection and AutoPreferredReplicaLeaderElection."""

    # -- manual elections (spec §11.1) -----------------------------------------------------------
    def process_replica_leader_election(self, event: ev.ReplicaLeaderElection) -> None:
        reply = event.callback or (lambda *a: None)
        if not self.is_active:
            reply({p: "NOT_CONTROLLER" for p in event.partitions or ()})
            return
        # Only the listed partitions that need the election can change: a partial commit.
        scope = he.replica_election_scope(event.election_type, self.ctx.view())
        named = None
        if event.partitions is not None:
            keys = {
                (self.ctx.topics[p.topic].index, p.partition)
                for p in event.partitions
                if p.topic in self.ctx.topics
            }
            named = local_frame(self.spark, sorted(keys), "topic_index int, partition int")
        table = he.on_replica_election(
            self._table(scope, named=named),
            F.lit(True),
            event.election_type,
            event.election_trigger,
            self.ctx.view(),
            self.ctx.deleting,
            self._unclean_column(),
            self.settings.kafka_version,
        )
        self._commit(table, "ReplicaLeaderElection", partial=True)
        reply("NONE")

    # -- auto leader rebalance (spec §11.2) -------------------------------------------------------
    def _schedule_auto_rebalance(self, delay_ms: int) -> None:
        self._rebalance_task = self.timer.schedule_once(
            delay_ms, lambda: self.events.put(ev.AutoPreferredReplicaLeaderElection())
        )

    def process_auto_preferred_replica_leader_election(
        self, _: ev.AutoPreferredReplicaLeaderElection
    ) -> None:
        if not self.is_active:
            return
        try:
            # Only partitions off their preferred leader can move: a partial commit.
            table = he.check_and_trigger_auto_leader_rebalance(
                self._table(he.not_preferred()),
                self.ctx.view(),
                self.settings.leader_imbalance_per_broker_percentage,
                self.ctx.deleting,
                False,
                self.settings.kafka_version,
                whole=self.ctx.partitions,
            )
            self._commit(table, "AutoPreferredReplicaLeaderElection", partial=True)
        finally:
            if self.settings.auto_leader_rebalance_enable:
                self._schedule_auto_rebalance(
                    self.settings.leader_imbalance_check_interval_seconds * 1000
                )
