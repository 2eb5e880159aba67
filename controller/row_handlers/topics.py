"""Topic creation and partition addition (spec §9.1–§9.3) over ``CompactRow`` values: the twin
of ``controller.handlers.topics``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from controller.handlers.topics import INIT_FAILED, INITIALIZED
from controller.row_handlers.event_rows import EventRows
from statemachines import schemas as s
from statemachines.compact_rows import CompactRow
from statemachines.partition_states import Outcome, PartitionState
from statemachines.replica_states import ReplicaState
from statemachines.row_state_machines import (
    RowView,
    handle_partition_state_changes,
    handle_replica_state_changes,
)


def assigned_partition_rows(
    assignments: Mapping[int, Mapping[int, Sequence[int]]],
) -> list[CompactRow]:
    """Rows of new partitions (topic index → partition → replicas) as the controller first
    sees them: no recorded state (NonExistent) and no state znode."""
    return [
        CompactRow(
            topic_index=t,
            partition=p,
            replicas=tuple(replicas),
            isr=(),
            replica_states=(ReplicaState.NonExistentReplica,) * len(replicas),
            adding_mask=0,
            removing_mask=0,
            leader=s.NO_LEADER,
            leader_epoch=s.NO_EPOCH,
            zk_version=s.NO_ZK_VERSION,
            controller_epoch=s.NO_EPOCH,
            state=PartitionState.NonExistentPartition,
        )
        for t, assignment in sorted(assignments.items())
        for p, replicas in sorted(assignment.items())
    ]


def on_new_partition_creation(
    step: EventRows, new_rows: Sequence[CompactRow], view: RowView
) -> None:
    """§9.1 for ``new_rows``, added to the step's rows: partitions → New, replicas → New,
    partitions → Online (leader and ISR initialised), replicas → Online; counts
    ``initialized`` and ``init_failed``."""
    for row in new_rows:
        step.rows[row.key] = row
    keys = sorted(r.key for r in new_rows)
    rows = step.rows
    handle_partition_state_changes(rows, keys, PartitionState.NewPartition, step.next_batch())
    everyone = lambda _r, _b: True  # noqa: E731
    handle_replica_state_changes(rows, keys, everyone, ReplicaState.NewReplica, step.next_batch())
    result = handle_partition_state_changes(
        rows, keys, PartitionState.OnlinePartition, step.next_batch(), view
    )
    outcome = result.outcome
    step.count(INITIALIZED, [k for k, o in outcome.items() if o == Outcome.LEADERSHIP_WRITTEN])
    step.count(INIT_FAILED, [k for k, o in outcome.items() if o == Outcome.FAILED])
    handle_replica_state_changes(
        rows, keys, everyone, ReplicaState.OnlineReplica, step.next_batch()
    )
