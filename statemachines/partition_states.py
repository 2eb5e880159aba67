"""Kafka's partition state machine (``ZkPartitionStateMachine``), in bulk.

States and the states each may be entered from (spec §5.1):

| Target state          | code | Valid previous states                               |
|-----------------------|------|-----------------------------------------------------|
| NewPartition          | 0    | NonExistentPartition                                |
| OnlinePartition       | 1    | NewPartition, OnlinePartition, OfflinePartition     |
| OfflinePartition      | 2    | NewPartition, OnlinePartition, OfflinePartition     |
| NonExistentPartition  | 3    | OfflinePartition                                    |

``handle_state_changes`` applies one target state to the selected rows of a compact partitions
table (see ``schemas``). Invalid transitions are reported in ``result.invalid`` with the current,
target and allowed states and leave the row untouched, as Kafka logs and skips them. Moving to
OnlinePartition initialises leader and ISR for NewPartition rows (§5.3a) and runs the given
election strategy for Online/Offline rows (§5.3b); a failed election leaves the row as it was.
Both kinds are also appended to the row's ``state_change_errors`` (see ``state_change_errors``),
and every transition applied to the row's ``state_change_trail`` (see ``state_change_trail``),
which is how they reach the controller's state-change log and broker requests.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import IntEnum
from functools import cached_property, lru_cache
from types import MappingProxyType

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from statemachines import schemas as s
from statemachines import state_change_trail as trail
from statemachines.brokers import BrokerView, ClusterView
from statemachines.election import (
    SELECTED,
    ElectionStrategy,
    LeadershipChange,
    Stages,
    initial_leadership,
    stage_online,
)
from statemachines.state_change_errors import ERRORS, appended, entry, existing
from statemachines.states import allowed_names, state_name_column, valid_previous_column


class PartitionState(IntEnum):
    NewPartition = 0
    OnlinePartition = 1
    OfflinePartition = 2
    NonExistentPartition = 3


_P = PartitionState
VALID_PREVIOUS_STATES: MappingProxyType[PartitionState, frozenset[PartitionState]] = (
    MappingProxyType(
        {
            _P.NewPartition: frozenset({_P.NonExistentPartition}),
            _P.OnlinePartition: frozenset(
                {_P.NewPartition, _P.OnlinePartition, _P.OfflinePartition}
            ),
            _P.OfflinePartition: frozenset(
                {_P.NewPartition, _P.OnlinePartition, _P.OfflinePartition}
            ),
            _P.NonExistentPartition: frozenset({_P.OfflinePartition}),
        }
    )
)


class Outcome(IntEnum):
    """What ``handle_state_changes`` did to a row (column ``outcome`` of ``result.outcomes``)."""

    UNTOUCHED = 0  # not selected
    STATE_CHANGED = 1  # state recorded, no leadership write
    LEADERSHIP_WRITTEN = 2  # new leader/ISR written (init or election): epoch and zk version +1
    FAILED = 3  # valid transition whose init/election failed; row unchanged
    INVALID = 4  # transition not allowed from the current state; row unchanged


OUTCOME = "outcome"
FAILURE = "failure"
TARGET = "target"


class StateChangeResult:
    """The lazy outputs of one bulk transition; the controller materialises ``outcomes`` once.

    ``outcomes`` is the whole new table plus ``outcome`` (an ``Outcome`` code), ``failure`` (why
    an init/election failed), ``lair_recipients`` (bit k: replica_k gets a LeaderAndIsr) and
    ``unclean`` (the leader came from outside the ISR), ``state_change_errors`` and
    ``state_change_trail``. The other views
    are projections of it.
    """

    def __init__(self, build: Callable[[bool], DataFrame], target: PartitionState) -> None:
        self._build = build
        self.target = target

    @cached_property
    def outcomes(self) -> DataFrame:
        return self._build(False)

    @cached_property
    def attempted(self) -> DataFrame:
        """``outcomes`` of the selected rows only, computed from them alone."""
        return self._build(True)

    @property
    def partitions(self) -> DataFrame:
        return self.outcomes.select(*s.compact_columns(s.width(self.outcomes)))

    @property
    def invalid(self) -> DataFrame:
        """Rows whose transition Kafka would reject: key, current state, target, allowed states."""
        return self.attempted.where(F.col(OUTCOME) == int(Outcome.INVALID)).select(
            s.TOPIC_INDEX,
            s.PARTITION,
            state_name_column(F.col(s.STATE_CODE), PartitionState).alias("current_state"),
            F.lit(self.target.name).alias("target_state"),
            F.lit(allowed_names(self.target, VALID_PREVIOUS_STATES)).alias("valid_previous_states"),
        )

    @property
    def decisions(self) -> DataFrame:
        """Rows with a new leadership or a failed init/election, in one frame (one job)."""
        decided = F.col(OUTCOME).isin(int(Outcome.LEADERSHIP_WRITTEN), int(Outcome.FAILED))
        return self.attempted.where(decided)

    @property
    def changed_leadership(self) -> DataFrame:
        return self.attempted.where(F.col(OUTCOME) == int(Outcome.LEADERSHIP_WRITTEN))

    @property
    def failed(self) -> DataFrame:
        return self.attempted.where(F.col(OUTCOME) == int(Outcome.FAILED)).select(
            s.TOPIC_INDEX, s.PARTITION, FAILURE
        )


def _selection(df: DataFrame, targets: Column | DataFrame, extra: dict[str, Column]) -> DataFrame:
    """``df`` with a boolean ``_selected`` (a predicate, or a DataFrame of (topic_index,
    partition)) and the ``extra`` columns, added in one projection."""
    if isinstance(targets, Column):
        return df.withColumns({SELECTED: F.coalesce(targets, F.lit(False)), **extra})
    keys = targets.select(s.TOPIC_INDEX, s.PARTITION).distinct().withColumn(SELECTED, F.lit(True))
    # Event-sized keys: broadcast, so the table is never shuffled to meet them.
    joined = df.join(F.broadcast(keys), [s.TOPIC_INDEX, s.PARTITION], "left")
    return joined.withColumns({SELECTED: F.coalesce(F.col(SELECTED), F.lit(False)), **extra})


def handle_state_changes(
    state_df: DataFrame,
    targets: Column | DataFrame,
    target_state: PartitionState,
    view: ClusterView | None = None,
    strategy: ElectionStrategy | None = None,
) -> StateChangeResult:
    """Move the selected partitions to ``target_state`` (Kafka's ``handleStateChanges``).

    ``targets`` is a boolean Column over the table or a DataFrame of (topic_index, partition)
    keys. ``view`` (live / shutting-down brokers, controller epoch) is needed for
    OnlinePartition; ``strategy`` is needed when Online/Offline partitions are to be elected.
    """
    s.check_compact(state_df)
    view_columns: BrokerView | None = None
    literals: dict[str, Column] = {}
    if target_state == PartitionState.OnlinePartition:
        if view is None:
            raise ValueError(
                "OnlinePartition needs the cluster view (live and shutting-down brokers)"
            )
        # Read from columns, the view leaves the Columns the same from one event to the next:
        # they are built once (hundreds of JVM round trips) and the view's sets added as data.
        view_columns, literals = view.as_columns() or (view, {})
    # One call, one batch of requests (§15.1): its entries carry the row's next batch number.
    df = _selection(
        state_df,
        targets,
        {
            **literals,
            trail.REQUEST_BATCH: trail.next_batch(trail.REQUEST_BATCH in state_df.columns),
        },
    )

    # The views of what was attempted are computed from the selected rows alone: filtering first
    # keeps the election off the (usually many) rows an event does not touch.
    def build(only_selected: bool) -> DataFrame:
        rows = df.where(F.col(SELECTED)) if only_selected else df
        return _transition(rows, state_df, target_state, view_columns, strategy)

    return StateChangeResult(build, target_state)


def _transition(
    df: DataFrame,
    state_df: DataFrame,
    target_state: PartitionState,
    view: BrokerView | None,
    strategy: ElectionStrategy | None,
) -> DataFrame:
    """``df`` (``_selection``'s, with the view's columns) moved to ``target_state``."""
    w = s.width(state_df)
    keep = tuple(_carried(state_df, w))
    errors = ERRORS in df.columns
    trailed = trail.TRAIL in df.columns
    stages, out = _transition_columns(w, target_state, view, strategy, errors, trailed, keep)
    for stage in stages:
        df = df.withColumns(stage)
    return df.select(*out)


@lru_cache(maxsize=64)
def _transition_columns(
    w: int,
    target_state: PartitionState,
    view: BrokerView | None,
    strategy: ElectionStrategy | None,
    errors: bool,
    trailed: bool,
    keep: tuple[str, ...],
) -> tuple[Stages, list[Column | str]]:
    """The stages to add to a selected table (``_selection``), and the output's Columns."""
    current = F.col(s.STATE_CODE)
    valid = valid_previous_column(current, target_state, VALID_PREVIOUS_STATES)
    selected = F.col(SELECTED)
    target = int(target_state)
    invalid_entry = (selected & ~valid, entry(None, current, target, None))
    before = existing(errors)
    moved = trail.entry(None, current, target)

    if target_state != PartitionState.OnlinePartition:
        state = (
            F.when(selected & valid, F.lit(int(target_state)).cast("byte"))
            .otherwise(current)
            .alias(s.STATE_CODE)
        )
        return [], [
            *(state if c == s.STATE_CODE else c for c in s.compact_columns(w)),
            *keep,
            F.when(~selected, int(Outcome.UNTOUCHED))
            .when(valid, int(Outcome.STATE_CHANGED))
            .otherwise(int(Outcome.INVALID))
            .alias(OUTCOME),
            F.lit(None).cast("string").alias(FAILURE),
            F.lit(0).alias(LeadershipChange.RECIPIENTS),
            F.lit(False).alias(LeadershipChange.UNCLEAN),
            appended(before, [invalid_entry]),
            trail.appended(trail.existing(trailed), [(selected & valid, moved)]),
            trail.REQUEST_BATCH,
        ]

    assert view is not None
    from_new = current == int(PartitionState.NewPartition)
    init_stage, init = initial_leadership(w)
    stages: Stages = [stage_online(w, view), init_stage]
    # Without a strategy only NewPartition rows can move; Kafka requires one for elections.
    elect = None
    if strategy is not None:
        elected, elect = strategy.change(w, view)
        stages += elected
    change = LeadershipChange.choose(from_new, init, elect)
    stages.append({"_attempted": selected & valid, "_ok": change.ok})
    written = F.col("_attempted") & F.col("_ok")  # an AND of two flags: inlined, not staged
    out = [
        s.TOPIC_INDEX,
        s.PARTITION,
        *(s.replica_col(k) for k in range(w)),
        *(
            F.when(written, change.isr[k]).otherwise(F.col(s.isr_col(k))).alias(s.isr_col(k))
            for k in range(w)
        ),
        *(s.replica_state_col(k) for k in range(w)),
        s.ADDING_MASK,
        s.REMOVING_MASK,
        F.when(written, change.leader).otherwise(F.col(s.LEADER)).alias(s.LEADER),
        F.when(written, change.leader_epoch).otherwise(F.col(s.LEADER_EPOCH)).alias(s.LEADER_EPOCH),
        F.when(written, change.zk_version).otherwise(F.col(s.ZK_VERSION)).alias(s.ZK_VERSION),
        F.when(written, view.epoch_column())
        .otherwise(F.col(s.CONTROLLER_EPOCH))
        .alias(s.CONTROLLER_EPOCH),
        F.when(written, F.lit(int(PartitionState.OnlinePartition)).cast("byte"))
        .otherwise(current)
        .alias(s.STATE_CODE),
        *keep,
        F.when(~selected, int(Outcome.UNTOUCHED))
        .when(~valid, int(Outcome.INVALID))
        .when(F.col("_ok"), int(Outcome.LEADERSHIP_WRITTEN))
        .otherwise(int(Outcome.FAILED))
        .alias(OUTCOME),
        F.when(F.col("_attempted") & ~F.col("_ok"), change.failure).alias(FAILURE),
        F.when(written, change.recipients).otherwise(0).alias(LeadershipChange.RECIPIENTS),
        (written & change.unclean).alias(LeadershipChange.UNCLEAN),
        appended(
            before,
            [
                invalid_entry,
                (F.col("_attempted") & ~F.col("_ok"), entry(None, current, target, change.failure)),
            ],
        ),
        trail.appended(trail.existing(trailed), [(written, moved)]),
        trail.REQUEST_BATCH,
    ]
    return stages, out


def _carried(df: DataFrame, w: int) -> list[str]:
    """Columns a caller attached to the table; they pass through a transition untouched."""
    model = set(s.compact_columns(w)) | set(_RESULT_COLS)
    model |= {SELECTED, ERRORS, trail.TRAIL, trail.REQUEST_BATCH}
    return [c for c in df.columns if c not in model]


_RESULT_COLS = (OUTCOME, FAILURE, LeadershipChange.RECIPIENTS, LeadershipChange.UNCLEAN)
