"""Preferred/unclean elections, the auto leader rebalance and unclean-enable events (spec §11,
§4.3) over ``CompactRow`` values: the twins of ``controller.handlers.election``."""

from __future__ import annotations

from collections.abc import Collection

from controller.handlers import election as he
from controller.row_handlers.brokers import (
    Unclean,
    count_elections,
    trigger_online_partition_state_change,
)
from controller.row_handlers.event_rows import EventRows, Key
from statemachines.compact_rows import CompactRow
from statemachines.election_kinds import ElectionTrigger, ElectionType
from statemachines.partition_states import Outcome, PartitionState
from statemachines.row_state_machines import (
    PREFERRED,
    RowView,
    handle_partition_state_changes,
    offline_strategy,
)

KafkaVersion = tuple[int, int]


def _not_needed(row: CompactRow, election_type: ElectionType, view: RowView) -> bool:
    if election_type is ElectionType.PREFERRED:
        return bool(row.replicas) and row.leader == row.replicas[0]
    return row.leader != -1 and row.leader in view.live


def on_replica_election(
    step: EventRows,
    requested: Collection[Key] | None,
    election_type: ElectionType,
    trigger: ElectionTrigger,
    view: RowView,
    deleting: Collection[int],
    unclean: Unclean,
    kafka_version: KafkaVersion = he.BASELINE,
) -> dict[Key, str]:
    """§11.1 steps 4–8 over the ``requested`` rows (None: every row); returns each requested
    row's ElectLeaders result code (``handlers.election.on_replica_election``)."""
    pre_kip460 = kafka_version < (2, 4)
    if pre_kip460 and election_type is ElectionType.UNCLEAN:
        raise ValueError("UNCLEAN elections exist from Kafka 2.4 (KIP-460)")
    keys = sorted(step.rows if requested is None else set(requested) & set(step.rows))
    errors: dict[Key, str] = {}
    electable = []
    for key in keys:
        row = step.rows[key]
        if row.topic_index in deleting:
            errors[key] = he.INVALID_TOPIC_EXCEPTION
        elif not row.has_leadership:
            errors[key] = he.UNKNOWN_SERVER_ERROR
        elif _not_needed(row, election_type, view):
            errors[key] = he.NONE if pre_kip460 else he.ELECTION_NOT_NEEDED
        else:
            electable.append(key)
    strategy = (
        PREFERRED
        if election_type is ElectionType.PREFERRED
        else offline_strategy(trigger is ElectionTrigger.AdminClientTriggered)
    )
    result = handle_partition_state_changes(
        step.rows, electable, PartitionState.OnlinePartition, step.next_batch(), view, strategy,
        unclean,
    )  # fmt: skip
    failed = (
        he.PREFERRED_LEADER_NOT_AVAILABLE
        if election_type is ElectionType.PREFERRED
        else he.ELIGIBLE_LEADERS_NOT_AVAILABLE
    )
    for key, outcome in result.outcome.items():
        if outcome == Outcome.LEADERSHIP_WRITTEN:
            errors[key] = he.NONE
        elif outcome == Outcome.FAILED:
            errors[key] = failed
    count_elections(step, result.outcome, result.unclean)
    return errors


def auto_rebalance_candidates(
    step: EventRows,
    whole: Collection[CompactRow],
    view: RowView,
    threshold_percentage: int,
    deleting: Collection[int] = (),
    any_reassignment_in_progress: bool = False,
    kafka_version: KafkaVersion = he.BASELINE,
) -> list[Key]:
    """§11.2: the auto rebalance's elections among the step's rows; the imbalance ratios are
    over ``whole`` (``handlers.election.auto_rebalance_candidates``)."""
    if any_reassignment_in_progress and kafka_version < (3, 4):
        return []
    total: dict[int, int] = {}
    off: dict[int, int] = {}
    for r in whole:
        if not r.replicas or r.topic_index in deleting:
            continue
        head = r.replicas[0]
        total[head] = total.get(head, 0) + 1
        off[head] = off.get(head, 0) + (r.has_leadership and r.leader != head)
    over = {b for b, n in total.items() if off[b] * 100 > n * threshold_percentage}

    def candidate(r: CompactRow) -> bool:
        head = r.replicas[0] if r.replicas else None
        eligible = head in view.live and (kafka_version < (2, 6) or head in r.isr)
        return (
            head in over
            and r.topic_index not in deleting
            and r.has_leadership
            and r.leader != head
            and eligible
        )

    return step.where(candidate)


def check_and_trigger_auto_leader_rebalance(
    step: EventRows,
    whole: Collection[CompactRow],
    view: RowView,
    threshold_percentage: int,
    deleting: Collection[int] = (),
    any_reassignment_in_progress: bool = False,
    kafka_version: KafkaVersion = he.BASELINE,
) -> None:
    """§11.2 ``checkAndTriggerAutoLeaderRebalance``: preferred elections of the candidates."""
    candidates = auto_rebalance_candidates(
        step, whole, view, threshold_percentage, deleting, any_reassignment_in_progress,
        kafka_version,
    )  # fmt: skip
    result = handle_partition_state_changes(
        step.rows, candidates, PartitionState.OnlinePartition, step.next_batch(), view, PREFERRED
    )
    count_elections(step, result.outcome, result.unclean)
    step.count(he.REBALANCE_CANDIDATE, candidates)


def on_unclean_leader_election_enable(
    step: EventRows,
    view: RowView,
    unclean: Unclean,
    deleting: Collection[int] = (),
    topic_index: int | None = None,
) -> None:
    """§4.3 (Topic)UncleanLeaderElectionEnable: ``triggerOnlinePartitionStateChange``."""
    trigger_online_partition_state_change(step, view, unclean, deleting, topic_index)
