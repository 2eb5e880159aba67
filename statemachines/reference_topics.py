"""The oracle for topics (spec §9.1, §9.5): plain Python, one partition and one replica at a time.

Builds on ``reference`` (the partition and replica state machines over dicts). A replica with
no recorded state is absent from the states dict, as in Kafka; the compact table shows it as
NonExistentReplica. ``DeletionModel`` is ``TopicDeletionManager`` transliterated: topic names,
loops over replicas, and a per-broker count of StopReplica(delete=true) requests.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from statemachines.partition_states import PartitionState
from statemachines.reference import (
    Partition,
    View,
    handle_partition_state_changes,
    handle_replica_state_changes,
)
from statemachines.replica_states import ReplicaState
from statemachines.schemas import NO_EPOCH, NO_LEADER, NO_ZK_VERSION

Key = tuple[str, int]
ReplicaKey = tuple[str, int, int]
_R = ReplicaState


def new_partitions(topic: str, assignment: Mapping[int, Sequence[int]]) -> dict[Key, Partition]:
    """Partitions of a new topic (or added ones) before the controller records any state."""
    return {
        (topic, pid): Partition(
            topic,
            pid,
            tuple(reps),
            leader=NO_LEADER,
            leader_epoch=NO_EPOCH,
            zk_version=NO_ZK_VERSION,
            controller_epoch=NO_EPOCH,
            state=PartitionState.NonExistentPartition,
        )
        for pid, reps in assignment.items()
    }


@dataclass
class CreationOutcome:
    partitions: dict[Key, Partition]
    states: dict[ReplicaKey, ReplicaState]
    initialized: set[Key] = field(default_factory=set)
    init_failed: set[Key] = field(default_factory=set)


def on_new_partition_creation(
    partitions: Mapping[Key, Partition],
    states: Mapping[ReplicaKey, ReplicaState],
    new: Collection[Key],
    view: View,
) -> CreationOutcome:
    """§9.1 controller steps 1–4 for the partitions ``new``."""
    keys = [k for k in partitions if k in new]
    replicas = [(t, p, r) for (t, p) in keys for r in partitions[(t, p)].replicas]
    step = handle_partition_state_changes(partitions, keys, PartitionState.NewPartition)
    rstep = handle_replica_state_changes(step.partitions, states, replicas, _R.NewReplica)
    online = handle_partition_state_changes(
        rstep.partitions, keys, PartitionState.OnlinePartition, view
    )
    done = handle_replica_state_changes(online.partitions, rstep.states, replicas, _R.OnlineReplica)
    return CreationOutcome(done.partitions, done.states, set(online.elected), set(online.failed))


@dataclass
class DeletionModel:
    """``TopicDeletionManager`` over dicts (delete.topic.enable = true)."""

    partitions: dict[Key, Partition]
    states: dict[ReplicaKey, ReplicaState]
    view: View
    topics_to_be_deleted: set[str] = field(default_factory=set)
    topics_with_deletion_started: set[str] = field(default_factory=set)
    topics_ineligible_for_deletion: set[str] = field(default_factory=set)
    stop_replica_deletes: dict[int, int] = field(default_factory=dict)
    deleted: set[str] = field(default_factory=set)

    # -- queries -------------------------------------------------------------------------------
    def replicas_of(self, topic: str) -> list[ReplicaKey]:
        return [
            (t, p, r) for (t, p), q in self.partitions.items() if t == topic for r in q.replicas
        ]

    def _in_state(self, topic: str, state: ReplicaState) -> list[ReplicaKey]:
        return [k for k in self.replicas_of(topic) if self.states.get(k) == state]

    def is_topic_eligible_for_deletion(self, topic: str) -> bool:
        return (
            topic in self.topics_to_be_deleted
            and not self._in_state(topic, _R.ReplicaDeletionStarted)
            and topic not in self.topics_ineligible_for_deletion
        )

    def gauges(self) -> dict[str, int]:
        queued = [k for t in self.topics_to_be_deleted for k in self.replicas_of(t)]
        return {
            "TopicsToDeleteCount": len(self.topics_to_be_deleted),
            "ReplicasToDeleteCount": sum(
                1 for k in queued if self.states.get(k) != _R.ReplicaDeletionSuccessful
            ),
            "TopicsIneligibleToDeleteCount": len(self.topics_ineligible_for_deletion),
            "ReplicasIneligibleToDeleteCount": sum(
                1 for k in queued if self.states.get(k) == _R.ReplicaDeletionIneligible
            ),
        }

    # -- state machine helpers -----------------------------------------------------------------
    def _replicas_to(self, keys: Iterable[ReplicaKey], target: ReplicaState) -> None:
        step = handle_replica_state_changes(
            self.partitions, self.states, list(keys), target, self.view.controller_epoch
        )
        self.partitions, self.states = step.partitions, step.states

    def _partitions_to(self, keys: list[Key], target: PartitionState) -> None:
        self.partitions = handle_partition_state_changes(self.partitions, keys, target).partitions

    # -- Kafka's entry points ------------------------------------------------------------------
    def enqueue_topics_for_deletion(self, topics: Iterable[str]) -> None:
        self.topics_to_be_deleted |= set(topics)
        self.resume_deletions()

    def resume_deletion_for_topics(self, topics: Iterable[str]) -> None:
        resumed = set(topics) & self.topics_to_be_deleted
        if resumed:
            self.topics_ineligible_for_deletion -= resumed
            self.resume_deletions()

    def on_brokers_started(self, new: Collection[int]) -> None:
        topics = {t for (t, _, r) in self.states if r in new and t in self.topics_to_be_deleted}
        if topics:
            self.resume_deletion_for_topics(topics)

    def mark_topic_ineligible_for_deletion(self, topics: Iterable[str]) -> None:
        self.topics_ineligible_for_deletion |= set(topics) & self.topics_to_be_deleted

    def fail_replica_deletion(self, replicas: Iterable[ReplicaKey]) -> None:
        failed = [k for k in replicas if k[0] in self.topics_to_be_deleted]
        if failed:
            self._replicas_to(failed, _R.ReplicaDeletionIneligible)
            self.mark_topic_ineligible_for_deletion({k[0] for k in failed})
            self.resume_deletions()

    def complete_replica_deletion(self, replicas: Iterable[ReplicaKey]) -> None:
        done = [k for k in replicas if k[0] in self.topics_to_be_deleted]
        self._replicas_to(done, _R.ReplicaDeletionSuccessful)
        self.resume_deletions()

    def on_stop_replica_response(self, broker: int, failed: Collection[Key] | None) -> None:
        """The broker answers for all its Started replicas; ``failed`` None = top-level error."""
        asked = [
            k for k, st in self.states.items() if k[2] == broker and st == _R.ReplicaDeletionStarted
        ]
        bad = [k for k in asked if failed is None or (k[0], k[1]) in failed]
        self.fail_replica_deletion(bad)
        if len(bad) != len(asked):
            self.complete_replica_deletion([k for k in asked if k not in set(bad)])

    def resume_deletions(self) -> None:
        retry: set[str] = set()
        start: set[str] = set()
        for t in sorted(self.topics_to_be_deleted):
            reps = self.replicas_of(t)
            if all(self.states.get(k) == _R.ReplicaDeletionSuccessful for k in reps):
                self.complete_delete_topic(t)
            elif not self._in_state(t, _R.ReplicaDeletionStarted) and self._in_state(
                t, _R.ReplicaDeletionIneligible
            ):
                retry.add(t)
            if self.is_topic_eligible_for_deletion(t):
                start.add(t)
        if retry:
            keys = [
                k for t in sorted(retry) for k in self._in_state(t, _R.ReplicaDeletionIneligible)
            ]
            self._replicas_to(keys, _R.OfflineReplica)
        if start:
            self.on_topic_deletion(start)

    def on_topic_deletion(self, topics: set[str]) -> None:
        fresh = [k for k in self.partitions if k[0] in topics - self.topics_with_deletion_started]
        self._partitions_to(fresh, PartitionState.OfflinePartition)
        self._partitions_to(fresh, PartitionState.NonExistentPartition)
        self.topics_with_deletion_started |= topics
        dead: list[ReplicaKey] = []
        retry: list[ReplicaKey] = []
        ineligible: set[str] = set()
        for t in sorted(topics):
            for k in self.replicas_of(t):
                if self.view.online(self.partitions[(k[0], k[1])], k[2]):
                    if self.states.get(k) != _R.ReplicaDeletionSuccessful:
                        retry.append(k)
                else:
                    dead.append(k)
                    ineligible.add(t)
        self._replicas_to(dead, _R.ReplicaDeletionIneligible)
        self._replicas_to(retry, _R.OfflineReplica)
        before = dict(self.states)
        self._replicas_to(retry, _R.ReplicaDeletionStarted)
        for k in retry:
            if self.states.get(k) == _R.ReplicaDeletionStarted != before.get(k):
                self.stop_replica_deletes[k[2]] = self.stop_replica_deletes.get(k[2], 0) + 1
        self.mark_topic_ineligible_for_deletion(ineligible)

    def complete_delete_topic(self, topic: str) -> None:
        keys = [(t, p) for (t, p) in self.partitions if t == topic]
        self._replicas_to(self.replicas_of(topic), _R.NonExistentReplica)
        for k in keys:
            del self.partitions[k]
        for kept in (
            self.topics_to_be_deleted,
            self.topics_with_deletion_started,
            self.topics_ineligible_for_deletion,
        ):
            kept.discard(topic)
        self.deleted.add(topic)
