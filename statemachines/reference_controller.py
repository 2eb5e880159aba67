"""The reference controller: Kafka's event handlers over the plain-Python rules, one controller.

``ReferenceController`` holds what one active controller knows (partitions, replica states, live
and shutting-down brokers, per-topic unclean flags, the topic deletion manager's sets) and has
Kafka's event entry points. Each runs the per-partition rules of ``reference_brokers``,
``reference_election``, ``reference_topics`` and ``reference_reassignment`` in the order Kafka's
``KafkaController`` does, and keeps their result. It follows one controller for as long as it
stays active; a failover starts a new one (``after_failover``).

Outside it, for want of plain-Python rules: LeaderAndIsr response errors, broker
modifications, feature updates and ``delete.topic.enable=false``; a failover resumes no
reassignment or deletion (``after_failover`` starts from partitions without either).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from statemachines import reference_brokers as ref_brokers
from statemachines import reference_election as ref_election
from statemachines import reference_isr as ref_isr
from statemachines import reference_reassignment as ref_reassignment
from statemachines import reference_topics as ref_topics
from statemachines.election_kinds import ElectionTrigger, ElectionType
from statemachines.reference import Partition, View
from statemachines.replica_states import ReplicaState

Key = tuple[str, int]
ReplicaKey = tuple[str, int, int]

CONTROLLED_SHUTDOWN_MAX_RETRIES = 3
"""Kafka's default ``controlled.shutdown.max.retries``."""

LEADER_IMBALANCE_PER_BROKER_PERCENTAGE = 10
"""Kafka's default ``leader.imbalance.per.broker.percentage``."""


@dataclass
class ReferenceController:
    """One active controller's context and Kafka's event handlers over it.

    ``live`` are the registered brokers, including those shutting down; ``view()`` gives the
    rules the live (not shutting down) ones. Every handler replaces ``partitions`` and ``states``
    with its result and returns the per-partition facts of the reference rule it ran.
    """

    partitions: dict[Key, Partition]
    states: dict[ReplicaKey, ReplicaState]
    live: set[int]
    controller_epoch: int
    unclean_by_topic: dict[str, bool] = field(default_factory=dict)
    shutting_down: set[int] = field(default_factory=set)
    kafka_version: tuple[int, int] = (2, 8)
    # TopicDeletionManager (delete.topic.enable=true)
    topics_to_be_deleted: set[str] = field(default_factory=set)
    topics_with_deletion_started: set[str] = field(default_factory=set)
    topics_ineligible_for_deletion: set[str] = field(default_factory=set)
    stop_replica_deletes: dict[int, int] = field(default_factory=dict)
    deleted_topics: set[str] = field(default_factory=set)
    # Brokers whose log directory failed (§8.6), until they register again.
    offline_dir_brokers: set[int] = field(default_factory=set)

    @classmethod
    def after_failover(
        cls,
        partitions: Iterable[Partition],
        live: Collection[int],
        controller_epoch: int,
        unclean_by_topic: Mapping[str, bool] | None = None,
        kafka_version: tuple[int, int] = (2, 8),
    ) -> ReferenceController:
        """A new controller over the partitions ZooKeeper holds, ``live`` the registered brokers:
        ``reference_brokers.on_controller_failover`` (§5.4 states, §6.4 replicas), then
        ``triggerOnlinePartitionStateChange()``."""
        start = ref_brokers.on_controller_failover(partitions, live, controller_epoch)
        flags = {t: False for t, _ in start.partitions} | dict(unclean_by_topic or {})
        rc = cls(
            start.partitions,
            start.states,
            set(live),
            controller_epoch,
            flags,
            kafka_version=kafka_version,
        )
        rc._absorb_election(
            ref_election.on_unclean_leader_election_enable(
                rc.partitions, rc.view(), rc.unclean_by_topic
            )
        )
        return rc

    # -- queries ---------------------------------------------------------------------------------
    def view(self) -> View:
        """The brokers as the election rules see them: live ones exclude those shutting down."""
        sd = frozenset(self.shutting_down)
        return View(frozenset(self.live) - sd, sd, self.controller_epoch)

    @property
    def topics(self) -> set[str]:
        return {t for t, _ in self.partitions}

    def list_partition_reassignments(
        self, partitions: Collection[Key] | None = None
    ) -> dict[Key, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]]:
        """ListPartitionReassignments: (replicas, adding, removing) of each reassigning partition
        among ``partitions`` (None = all)."""
        return {
            k: (p.replicas, p.adding_replicas, p.removing_replicas)
            for k, p in sorted(self.partitions.items())
            if ref_reassignment.is_being_reassigned(p) and (partitions is None or k in partitions)
        }

    # -- §8 broker events ------------------------------------------------------------------------
    def process_broker_change(
        self, new: Collection[int] = (), dead: Collection[int] = (), bounced: Collection[int] = ()
    ) -> None:
        """BrokerChange: new brokers start, bounced ones fail and start (§8.3), dead ones fail."""
        if new:
            self.on_broker_startup(new)
        if bounced:
            self.on_broker_bounce(bounced)
        if dead:
            self.on_broker_failure(dead)

    def on_broker_startup(self, brokers: Collection[int]) -> ref_brokers.BrokerEventOutcome:
        """§8.1: the brokers join; their replicas go online, New/Offline partitions are elected,
        reassignments whose targets include them run again, and deletion resumes for topics with
        replicas on them."""
        new = set(brokers)
        self.live |= new
        self._set_offline_dirs(self.offline_dir_brokers - new)  # §8.6: registered again
        out = ref_brokers.on_broker_startup(
            self.partitions,
            self.states,
            new,
            self.view(),
            self.unclean_by_topic,
            self.topics_to_be_deleted,
        )
        self.partitions, self.states = out.partitions, out.states
        # Step 6: reassignments whose target replicas include a started broker run again.
        resumed = {
            k: ref_reassignment.target_replicas(p)
            for k, p in sorted(self.partitions.items())
            if ref_reassignment.is_being_reassigned(p)
            and new & set(ref_reassignment.target_replicas(p))
        }
        if resumed:
            again = ref_reassignment.on_partition_reassignment(
                self.partitions, self.states, resumed, self.view()
            )
            self.partitions, self.states = again.partitions, again.states
        if self.topics_to_be_deleted:
            self._deletion(lambda d: d.on_brokers_started(new))
        return out

    def on_broker_failure(self, brokers: Collection[int]) -> ref_brokers.BrokerEventOutcome:
        """§8.2: the brokers leave (and stop shutting down); ``onReplicasBecomeOffline``, whose
        replicas of topics queued for deletion fail their deletion."""
        dead = set(brokers)
        self.live -= dead
        self.shutting_down -= dead
        out = ref_brokers.on_broker_failure(
            self.partitions,
            self.states,
            dead,
            self.view(),
            self.unclean_by_topic,
            self.topics_to_be_deleted,
        )
        self.partitions, self.states = out.partitions, out.states
        if self.topics_to_be_deleted:
            failed = [k for k in self.states if k[2] in dead]
            self._deletion(lambda d: d.fail_replica_deletion(failed))
        return out

    def on_log_dir_failure(self, brokers: Collection[int]) -> ref_brokers.BrokerEventOutcome:
        """§8.6 LogDirEventNotification from ``brokers`` (each with one log directory): their
        replicas answer LeaderAndIsr with KAFKA_STORAGE_ERROR and ``onReplicasBecomeOffline``
        follows, as for a failed broker, except that the brokers stay registered. Brokers
        already failed, or not live, are left alone."""
        failed = (set(brokers) & self.live) - self.offline_dir_brokers
        self._set_offline_dirs(self.offline_dir_brokers | failed)
        out = ref_brokers.on_broker_failure(
            self.partitions,
            self.states,
            failed,
            self.view(),
            self.unclean_by_topic,
            self.topics_to_be_deleted,
        )
        self.partitions, self.states = out.partitions, out.states
        if self.topics_to_be_deleted and failed:
            replicas = [k for k in self.states if k[2] in failed]
            self._deletion(lambda d: d.fail_replica_deletion(replicas))
        return out

    def _set_offline_dirs(self, brokers: set[int]) -> None:
        """Every partition's replicas on failed log directories are those of ``brokers``."""
        self.offline_dir_brokers = set(brokers)
        for k, p in self.partitions.items():
            offline = frozenset(brokers & set(p.replicas))
            if offline != p.offline_dir_replicas:
                self.partitions[k] = replace(p, offline_dir_replicas=offline)

    def on_broker_bounce(self, brokers: Collection[int]) -> None:
        """§8.3: a broker registered again with a new epoch: failure, then startup."""
        self.on_broker_failure(brokers)
        self.on_broker_startup(brokers)

    def on_controlled_shutdown(self, broker: int) -> ref_brokers.BrokerEventOutcome:
        """§8.4, one ControlledShutdown request: the broker joins the shutting-down brokers, its
        led partitions move away, its followers go OfflineReplica. ``remaining`` in the result
        are the partitions it still leads. Raises ValueError for a broker that is not live
        (Kafka's BROKER_NOT_AVAILABLE)."""
        if broker not in self.live:
            raise ValueError(f"BROKER_NOT_AVAILABLE: broker {broker} is not live")
        self.shutting_down.add(broker)
        out = ref_brokers.on_controlled_shutdown(
            self.partitions, self.states, broker, self.view(), self.topics_to_be_deleted
        )
        self.partitions, self.states = out.partitions, out.states
        return out

    def shut_down_broker(
        self, broker: int, max_retries: int = CONTROLLED_SHUTDOWN_MAX_RETRIES
    ) -> set[Key]:
        """A broker's clean shutdown: ControlledShutdown requests until none of its partitions
        remain or ``max_retries`` attempts are spent, then it exits (BrokerChange, dead).

        Returns the partitions it still led after the last attempt.
        """
        remaining: set[Key] = set()
        for _attempt in range(max_retries):
            remaining = self.on_controlled_shutdown(broker).remaining
            if not remaining:
                break
        self.on_broker_failure({broker})
        return remaining

    # -- §11 elections and the unclean-enable events ---------------------------------------------
    def _absorb_election(self, out: ref_election.ElectionOutcome) -> ref_election.ElectionOutcome:
        self.partitions = out.partitions
        return out

    def on_replica_election(
        self,
        partitions: Iterable[Key] | None,
        election_type: ElectionType,
        trigger: ElectionTrigger,
    ) -> ref_election.ElectionOutcome:
        """§11.1 ReplicaLeaderElection for ``partitions`` (None = every partition); ``errors`` in
        the result are the ElectLeaders callback's."""
        requested = list(self.partitions) if partitions is None else list(partitions)
        return self._absorb_election(
            ref_election.on_replica_election(
                self.partitions,
                requested,
                election_type,
                trigger,
                self.view(),
                self.topics_to_be_deleted,
                self.unclean_by_topic,
                self.kafka_version,
            )
        )

    def check_and_trigger_auto_leader_rebalance(
        self, threshold_percentage: int = LEADER_IMBALANCE_PER_BROKER_PERCENTAGE
    ) -> ref_election.ElectionOutcome:
        """§11.2 one scheduled check: preferred elections for imbalanced brokers' partitions."""
        reassigning = any(ref_reassignment.is_being_reassigned(p) for p in self.partitions.values())
        return self._absorb_election(
            ref_election.check_and_trigger_auto_leader_rebalance(
                self.partitions,
                self.view(),
                threshold_percentage,
                self.topics_to_be_deleted,
                reassigning,
                self.kafka_version,
            )
        )

    def on_unclean_leader_election_enable(
        self, unclean_by_topic: Mapping[str, bool]
    ) -> ref_election.ElectionOutcome:
        """UncleanLeaderElectionEnable: the topics' effective flags after the broker-level change,
        then ``triggerOnlinePartitionStateChange()``."""
        self.unclean_by_topic |= dict(unclean_by_topic)
        return self._absorb_election(
            ref_election.on_unclean_leader_election_enable(
                self.partitions, self.view(), self.unclean_by_topic, self.topics_to_be_deleted
            )
        )

    def on_topic_unclean_leader_election_enable(self, topic: str) -> ref_election.ElectionOutcome:
        """TopicUncleanLeaderElectionEnable: ``topic`` turns unclean election on, then
        ``triggerOnlinePartitionStateChange(topic)``."""
        self.unclean_by_topic[topic] = True
        return self._absorb_election(
            ref_election.on_unclean_leader_election_enable(
                self.partitions,
                self.view(),
                self.unclean_by_topic,
                self.topics_to_be_deleted,
                topic=topic,
            )
        )

    # -- §9 topics -----------------------------------------------------------------------------
    def _create(self, new: Mapping[Key, Partition]) -> ref_topics.CreationOutcome:
        out = ref_topics.on_new_partition_creation(
            self.partitions | dict(new), self.states, set(new), self.view()
        )
        self.partitions, self.states = out.partitions, out.states
        return out

    def on_new_topics(
        self, assignments: Mapping[str, Mapping[int, Sequence[int]]]
    ) -> ref_topics.CreationOutcome:
        """TopicChange (§9.1): topics that appeared, partition id → replicas; known ones are
        skipped. ``onNewPartitionCreation`` for all their partitions."""
        known = self.topics
        new: dict[Key, Partition] = {}
        for topic, assignment in sorted(assignments.items()):
            if topic not in known:
                new |= ref_topics.new_partitions(topic, assignment)
                self.unclean_by_topic.setdefault(topic, False)
        return self._create(new)

    def on_partition_modifications(
        self, topic: str, assignment: Mapping[int, Sequence[int]]
    ) -> ref_topics.CreationOutcome | None:
        """PartitionModifications (§9.2): ``assignment`` is the topic's znode; its partitions
        the controller lacks are created, unless the topic is queued for deletion (None)."""
        if topic not in self.topics or topic in self.topics_to_be_deleted:
            return None
        added = {pid: r for pid, r in assignment.items() if (topic, pid) not in self.partitions}
        return self._create(ref_topics.new_partitions(topic, added))

    # -- §9.5 topic deletion ---------------------------------------------------------------------
    def _deletion(self, run: Callable[[ref_topics.DeletionModel], object]) -> None:
        """Run one ``TopicDeletionManager`` entry point over this context."""
        d = ref_topics.DeletionModel(
            dict(self.partitions),
            dict(self.states),
            self.view(),
            set(self.topics_to_be_deleted),
            set(self.topics_with_deletion_started),
            set(self.topics_ineligible_for_deletion),
            dict(self.stop_replica_deletes),
            set(self.deleted_topics),
        )
        run(d)
        self.partitions, self.states = d.partitions, d.states
        self.topics_to_be_deleted = d.topics_to_be_deleted
        self.topics_with_deletion_started = d.topics_with_deletion_started
        self.topics_ineligible_for_deletion = d.topics_ineligible_for_deletion
        self.stop_replica_deletes = d.stop_replica_deletes
        self.deleted_topics = d.deleted

    def on_topic_deletion(self, topics: Iterable[str]) -> set[str]:
        """TopicDeletion: queue the known topics for deletion and resume deletions; returns the
        unknown ones, whose requests Kafka removes."""
        requested = set(topics)
        unknown = requested - self.topics
        if requested - unknown:
            self._deletion(lambda d: d.enqueue_topics_for_deletion(requested - unknown))
        return unknown

    def on_stop_replica_response(self, broker: int, failed: Collection[Key] | None = ()) -> None:
        """TopicDeletionStopReplicaResponseReceived from ``broker`` for all its replicas being
        deleted: ``failed`` partitions (None = a top-level error) fail, the others succeed."""
        self._deletion(lambda d: d.on_stop_replica_response(broker, failed))

    # -- §12 ISR changes ---------------------------------------------------------------------------
    def update_leader_and_isr_cache(self, states: Mapping[Key, ref_isr.ZkLeadership]) -> set[Key]:
        """§12.4 IsrChangeNotification: the leadership each partition's state znode holds
        replaces the cached one; returns the partitions updated (those the controller knows)."""
        self.partitions = ref_isr.update_leader_and_isr_cache(self.partitions, states)
        return set(states) & set(self.partitions)

    def on_alter_isr(
        self, broker: int, items: Mapping[Key, ref_isr.AlterIsrItem]
    ) -> dict[Key, str]:
        """§12.5 step 2 (``reference_isr.alter_isr``); returns each partition's error name."""
        self.partitions, errors = ref_isr.alter_isr(
            self.partitions, broker, items, self.controller_epoch
        )
        return errors

    # -- §10 reassignment ------------------------------------------------------------------------
    def on_partition_reassignment(
        self, plan: Mapping[Key, Sequence[int] | None], api: bool = True
    ) -> ref_reassignment.ReassignmentOutcome:
        """AlterPartitionReassignments (``api``) or ``/admin/reassign_partitions``: validate each
        entry (None = cancel), then start or complete the valid ones. ``errors`` in the result
        hold every entry's error name."""
        view = self.view()
        errors = {
            key: ref_reassignment.validate_reassignment(
                self.partitions.get(key),
                target,
                view.live,
                key[0] in self.topics_to_be_deleted,
                api,
            )
            for key, target in plan.items()
        }
        accepted = {k: t for k, t in plan.items() if errors[k] == ref_reassignment.NONE}
        out = ref_reassignment.on_partition_reassignment(
            self.partitions, self.states, accepted, view
        )
        out.errors = errors | out.errors
        self.partitions, self.states = out.partitions, out.states
        return out

    def maybe_complete_reassignment(self) -> ref_reassignment.ReassignmentOutcome:
        """After an ISR change: complete every reassignment whose target replicas are in the ISR."""
        out = ref_reassignment.maybe_complete_reassignment(
            self.partitions, self.states, self.view()
        )
        self.partitions, self.states = out.partitions, out.states
        return out
