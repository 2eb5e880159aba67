"""Kafka's ``TopicDeletionManager`` (spec §9.5) over ``CompactRow`` values: the twin of
``controller.handlers.deletion``, step for step, with the same request batches, counters and
per-topic facts.

Each entry point changes the step's rows (completed topics' rows leave them) and returns what
the Spark step's two collected frames hold: the per-topic facts ``commit_facts`` applies and the
StopReplica(delete=true) count per broker. As on the Spark path, ``resumeDeletions`` decides per
queued topic from its rows as the entry point's first transitions left them, and every
state-machine call takes a request batch whether or not a row needs it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from controller.handlers.deletion import ISR_SHRINKS, STOP_REPLICA_DELETES
from controller.row_handlers.event_rows import EventRows, Key
from controller.topic_deletion_state import (
    COMPLETED,
    IN_PROGRESS,
    INELIGIBLE,
    STARTED,
    TopicDeletionState,
)
from statemachines import schemas as s
from statemachines.compact_rows import CompactRow
from statemachines.partition_states import PartitionState
from statemachines.replica_states import ReplicaState
from statemachines.row_state_machines import (
    RowView,
    handle_partition_state_changes,
    handle_replica_state_changes,
)

_R = ReplicaState
# (row, broker) -> whether the replica is picked.
ReplicaTest = Callable[[CompactRow, int], bool]


@dataclass
class DeletionResult:
    """What a Spark deletion step's collected frames hold: one facts row per queued topic with
    rows (``commit_facts``'s input), and StopReplica(delete=true) partitions per broker."""

    topics: list[dict[str, int | bool]] = field(default_factory=list)
    stop_replica: dict[int, int] = field(default_factory=dict)


def _picks(row: CompactRow, test: ReplicaTest) -> bool:
    return any(test(row, b) for b in row.replicas)


class RowTopicDeletionManager:
    """``handlers.deletion.TopicDeletionManager``'s entry points over a step's rows."""

    def __init__(self, state: TopicDeletionState) -> None:
        self.state = state

    def enqueue_topics_for_deletion(
        self, step: EventRows, topics: Collection[int], view: RowView
    ) -> DeletionResult | None:
        if not self.state.enabled:
            return None
        self.state.topics_to_be_deleted |= set(topics)
        return self.resume_deletions(step, view)

    def resume_deletions(self, step: EventRows, view: RowView) -> DeletionResult:
        """``resumeDeletions`` over every queued topic (unguarded)."""
        return self._resume(step, view, gate=set(step.rows), hit=set())

    def on_brokers_started(
        self, step: EventRows, new: Collection[int], view: RowView
    ) -> DeletionResult | None:
        """§8.1: queued topics with a replica on a returning broker ⇒ resumeDeletionForTopics."""
        if not (self.state.enabled and self.state.topics_to_be_deleted):
            return None
        hit = set(step.where(lambda r: any(b in new for b in r.replicas)))
        return self._resume(step, view, gate=hit, hit=hit, clears=True)

    def fail_replica_deletion(
        self, step: EventRows, failed: ReplicaTest, view: RowView
    ) -> DeletionResult | None:
        """Replicas of queued topics → ReplicaDeletionIneligible; their topics ineligible."""
        return self._respond(step, view, failed=failed)

    def on_stop_replica_response(
        self, step: EventRows, broker: int, failed: Collection[Key] | None, view: RowView
    ) -> DeletionResult | None:
        """``TopicDeletionStopReplicaResponseReceived`` from ``broker`` for its Started
        replicas; ``failed``: the partitions answered with an error (None: all of them)."""

        def started(row: CompactRow, b: int) -> bool:
            return b == broker and row.state_of(b) == _R.ReplicaDeletionStarted

        def bad(row: CompactRow, b: int) -> bool:
            return started(row, b) and (failed is None or row.key in failed)

        return self._respond(step, view, bad, started, guard_ok=True)

    # -- the plan ------------------------------------------------------------------------------
    def _respond(
        self,
        step: EventRows,
        view: RowView,
        failed: ReplicaTest | None = None,
        succeeded: ReplicaTest | None = None,
        guard_ok: bool = False,
    ) -> DeletionResult | None:
        if not (self.state.enabled and self.state.topics_to_be_deleted):
            return None
        queued = self.state.topics_to_be_deleted

        def of_queued(test: ReplicaTest) -> ReplicaTest:
            return lambda row, b: row.topic_index in queued and test(row, b)

        hit: set[Key] = set()
        if failed is not None:
            hit = set(step.where(lambda r: _picks(r, of_queued(failed))))
            handle_replica_state_changes(
                step.rows, sorted(step.rows), of_queued(failed),
                _R.ReplicaDeletionIneligible, step.next_batch(),
            )  # fmt: skip
        gate = set(hit)
        if succeeded is not None:
            # Read after the failures' transitions, as Kafka completes only what is left.
            gated = (
                set(step.where(lambda r: _picks(r, of_queued(succeeded))))
                if guard_ok
                else set(step.rows)
            )
            gate = gated | hit
            handle_replica_state_changes(
                step.rows, sorted(step.rows), of_queued(succeeded),
                _R.ReplicaDeletionSuccessful, step.next_batch(),
            )  # fmt: skip
        return self._resume(step, view, gate, hit, marks=True)

    def _resume(
        self,
        step: EventRows,
        view: RowView,
        gate: set[Key],
        hit: set[Key],
        clears: bool = False,
        marks: bool = False,
    ) -> DeletionResult:
        """``handlers.deletion.TopicDeletionManager._resume`` over the step's rows."""
        state = self.state
        queued = state.topics_to_be_deleted
        counts: dict[int, list[int]] = {}  # topic → left, started, ineligible, dead, go, hit, gate
        for key, row in sorted(step.rows.items()):
            if row.topic_index not in queued:
                continue
            c = counts.setdefault(row.topic_index, [0] * 7)
            for b, st in zip(row.replicas, row.replica_states, strict=True):
                online = b in view.live
                c[0] += st != _R.ReplicaDeletionSuccessful
                c[1] += st == _R.ReplicaDeletionStarted
                c[2] += st == _R.ReplicaDeletionIneligible
                c[3] += not online
                c[4] += online and st != _R.ReplicaDeletionSuccessful
            c[5] |= key in hit
            c[6] |= key in gate
        go = any(c[6] for c in counts.values())
        result = DeletionResult()
        flags: dict[int, tuple[bool, bool, bool]] = {}  # topic → retry, start, first start
        completed: set[int] = set()
        for t, (left, started, inelig, dead, live_left, was_hit, _) in sorted(counts.items()):
            was_inelig = t in state.topics_ineligible_for_deletion
            inelig_now = (
                (was_inelig and not was_hit)
                if clears
                else (was_inelig or bool(was_hit))
                if marks
                else was_inelig
            )
            complete = go and left == 0
            no_started = started == 0
            start = go and not complete and no_started and not inelig_now
            if complete:
                completed.add(t)
            flags[t] = (
                go and not complete and no_started and inelig > 0,
                start,
                start and t not in state.topics_with_deletion_started,
            )
            result.topics.append(
                {
                    s.TOPIC_INDEX: t,
                    COMPLETED: complete,
                    STARTED: start or t in state.topics_with_deletion_started,
                    INELIGIBLE: (inelig_now or (start and dead > 0)) if go else was_inelig,
                    IN_PROGRESS: (not no_started and not complete) or (start and live_left > 0),
                }
            )
        for key in [k for k in step.rows if k[0] in completed]:
            del step.rows[key]  # completeDeleteTopic
        keys = sorted(step.rows)
        no = (False, False, False)

        def flag(i: int) -> Callable[[CompactRow], bool]:
            return lambda r: flags.get(r.topic_index, no)[i]

        retry, start, first = flag(0), flag(1), flag(2)
        shrinks = handle_replica_state_changes(
            step.rows,
            keys,
            lambda r, b: retry(r) and r.state_of(b) == _R.ReplicaDeletionIneligible,
            _R.OfflineReplica,
            step.next_batch(),
            view.controller_epoch,
        )
        first_keys = [k for k in keys if first(step.rows[k])]
        for target in (PartitionState.OfflinePartition, PartitionState.NonExistentPartition):
            handle_partition_state_changes(step.rows, first_keys, target, step.next_batch())
        handle_replica_state_changes(
            step.rows, keys, lambda r, b: start(r) and b not in view.live,
            _R.ReplicaDeletionIneligible, step.next_batch(),
        )  # fmt: skip

        def go_on(r: CompactRow, b: int) -> bool:
            return start(r) and b in view.live and r.state_of(b) != _R.ReplicaDeletionSuccessful

        writes = handle_replica_state_changes(
            step.rows, keys, go_on, _R.OfflineReplica, step.next_batch(), view.controller_epoch
        )
        handle_replica_state_changes(
            step.rows, keys, go_on, _R.ReplicaDeletionStarted, step.next_batch()
        )
        step.count(ISR_SHRINKS, shrinks)
        step.count(ISR_SHRINKS, writes)
        deletes: dict[Key, int] = {}
        for key in keys:
            row = step.rows[key]
            if not start(row):
                continue
            for b, st in zip(row.replicas, row.replica_states, strict=True):
                if b in view.live and st == _R.ReplicaDeletionStarted:
                    deletes[key] = deletes.get(key, 0) + 1
                    result.stop_replica[b] = result.stop_replica.get(b, 0) + 1
        step.count(STOP_REPLICA_DELETES, deletes)
        return result
