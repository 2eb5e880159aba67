"""Broker failure, startup and controlled shutdown (spec §8.1, §8.2, §8.4) over ``CompactRow``
values: the twins of ``controller.handlers.brokers``, step for step, with the same counters."""

from __future__ import annotations

from collections.abc import Callable, Collection

from controller.handlers.brokers import (
    ELECTED,
    FAILED_ELECTION,
    ISR_SHRINKS,
    UNCLEAN_ELECTED,
)
from controller.row_handlers.event_rows import EventRows
from statemachines.compact_rows import CompactRow
from statemachines.partition_states import Outcome, PartitionState
from statemachines.replica_states import ReplicaState
from statemachines.row_state_machines import (
    CONTROLLED_SHUTDOWN,
    RowView,
    Strategy,
    handle_partition_state_changes,
    handle_replica_state_changes,
    offline_strategy,
)

# The row's effective unclean.leader.election.enable (topic config over broker default).
Unclean = Callable[[CompactRow], bool]


def _electable(row: CompactRow) -> bool:
    return row.state in (PartitionState.OfflinePartition, PartitionState.NewPartition)


def count_elections(
    step: EventRows, outcome: dict[tuple[int, int], Outcome], unclean: Collection
) -> None:
    """``handlers.brokers.election_counters`` of one OnlinePartition call."""
    step.count(ELECTED, [k for k, o in outcome.items() if o == Outcome.LEADERSHIP_WRITTEN])
    step.count(FAILED_ELECTION, [k for k, o in outcome.items() if o == Outcome.FAILED])
    step.count(UNCLEAN_ELECTED, unclean)


def trigger_online_partition_state_change(
    step: EventRows,
    view: RowView,
    unclean: Unclean,
    deleting: Collection[int],
    topic_index: int | None = None,
    strategy: Strategy | None = None,
) -> None:
    """§5.4: every New/Offline partition (of ``topic_index``) not queued for deletion → Online
    under the offline strategy; counts the elections."""
    keys = step.where(
        lambda r: (
            _electable(r)
            and r.topic_index not in deleting
            and (topic_index is None or r.topic_index == topic_index)
        )
    )
    result = handle_partition_state_changes(
        step.rows,
        keys,
        PartitionState.OnlinePartition,
        step.next_batch(),
        view,
        strategy or offline_strategy(),
        unclean,
    )
    count_elections(step, result.outcome, result.unclean)


def on_broker_failure(
    step: EventRows,
    dead: Collection[int],
    view: RowView,
    unclean: Unclean,
    deleting: Collection[int],
) -> None:
    """§8.2 step 2 (b–e) for replicas of topics not queued for deletion."""

    def leader_offline(r: CompactRow) -> bool:
        return not any(x == r.leader and x in view.live for x in r.replicas)

    offline = step.where(
        lambda r: r.has_leadership and leader_offline(r) and r.topic_index not in deleting
    )
    handle_partition_state_changes(
        step.rows, offline, PartitionState.OfflinePartition, step.next_batch()
    )
    trigger_online_partition_state_change(step, view, unclean, deleting)
    shrinks = handle_replica_state_changes(
        step.rows,
        step.where(lambda r: r.topic_index not in deleting),
        lambda _r, b: b in dead,
        ReplicaState.OfflineReplica,
        step.next_batch(),
        view.controller_epoch,
    )
    step.count(ISR_SHRINKS, shrinks)


def on_broker_startup(
    step: EventRows,
    new: Collection[int],
    view: RowView,
    unclean: Unclean,
    deleting: Collection[int],
) -> None:
    """§8.1 steps 4–5: replicas on the new brokers → OnlineReplica, then elect New/Offline ones."""
    handle_replica_state_changes(
        step.rows, sorted(step.rows), lambda _r, b: b in new, ReplicaState.OnlineReplica,
        step.next_batch(),
    )  # fmt: skip
    trigger_online_partition_state_change(step, view, unclean, deleting)
    step.count(ISR_SHRINKS)


def on_controlled_shutdown(
    step: EventRows, broker: int, view: RowView, deleting: Collection[int]
) -> None:
    """§8.4 steps 5–7 for a broker already in ``view.shutting_down``; counts ``remaining``
    (the partitions it still leads)."""

    def acted_on(r: CompactRow) -> bool:
        return (
            broker in r.replicas
            and len(r.replicas) > 1
            and r.has_leadership
            and r.topic_index not in deleting
        )

    acting = set(step.where(acted_on))
    led = [k for k in sorted(acting) if step.rows[k].leader == broker]
    followed = acting - set(led)
    result = handle_partition_state_changes(
        step.rows, led, PartitionState.OnlinePartition, step.next_batch(), view,
        CONTROLLED_SHUTDOWN,
    )  # fmt: skip
    count_elections(step, result.outcome, result.unclean)
    shrinks = handle_replica_state_changes(
        step.rows, sorted(followed), lambda _r, b: b == broker, ReplicaState.OfflineReplica,
        step.next_batch(), view.controller_epoch,
    )  # fmt: skip
    step.count(ISR_SHRINKS, shrinks)
    step.count("remaining", [k for k in acting if step.rows[k].leader == broker])


def on_controller_failover(
    step: EventRows, view: RowView, unclean: Unclean, deleting: Collection[int]
) -> None:
    """§6.4 step 3 and §5.4 over the rows a new controller loaded: the replicas that are not
    online go OfflineReplica (ISR removals), then ``triggerOnlinePartitionStateChange``."""
    shrinks = handle_replica_state_changes(
        step.rows, sorted(step.rows), lambda _r, b: b not in view.live,
        ReplicaState.OfflineReplica, step.next_batch(), view.controller_epoch,
    )  # fmt: skip
    step.count(ISR_SHRINKS, shrinks)
    trigger_online_partition_state_change(step, view, unclean, deleting)
