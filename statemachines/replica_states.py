"""Kafka's replica state machine (``ZkReplicaStateMachine``), in bulk.

States and the states each may be entered from (spec §6.1):

| Target state               | code | Valid previous states                                              |
|----------------------------|------|--------------------------------------------------------------------|
| NewReplica                 | 1    | NonExistentReplica                                                 |
| OnlineReplica              | 2    | NewReplica, OnlineReplica, OfflineReplica, ReplicaDeletionIneligible |
| OfflineReplica             | 3    | NewReplica, OnlineReplica, OfflineReplica, ReplicaDeletionIneligible |
| ReplicaDeletionStarted     | 4    | OfflineReplica                                                     |
| ReplicaDeletionSuccessful  | 5    | ReplicaDeletionStarted                                             |
| ReplicaDeletionIneligible  | 6    | OfflineReplica, ReplicaDeletionStarted                             |
| NonExistentReplica         | 7    | ReplicaDeletionSuccessful                                          |

Replica states live in the compact partitions table, one ``replica_state_k`` column per replica
position, so a transition is a per-row expression over W positions instead of a join with a
table of 3× as many rows. Side effects on the partition (§6.3):

* → OfflineReplica removes the replica from the ISR of partitions with leadership: leader -1 if
  it led, the last ISR member is never removed, and every removal is one ZK write (epoch+1,
  zk version+1). Several replicas of one partition are removed in ascending broker order, as the
  controller handles them broker by broker.
* → NewReplica fails (logged, state unchanged) for a replica that is its partition's leader.
* → NonExistentReplica removes the replica from the assignment (and adding/removing lists).

Invalid transitions come back in ``result.invalid`` and leave the replica untouched. Invalid and
failed transitions are also appended to the row's ``state_change_errors`` (see
``state_change_errors``) for the controller's state-change log, and every applied transition to
its ``state_change_trail`` (see ``state_change_trail``), for the log and the broker requests.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from functools import lru_cache, reduce
from types import MappingProxyType

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from statemachines import schemas as s
from statemachines import state_change_trail as trail
from statemachines.brokers import BrokerSet
from statemachines.columns import compact, has_leadership, in_list, runtime_int
from statemachines.state_change_errors import ERRORS, appended, entry, existing
from statemachines.state_change_errors import PARTITION as PARTITION_NAME
from statemachines.states import allowed_names, state_name_column, valid_previous_column


class ReplicaState(IntEnum):
    NewReplica = 1
    OnlineReplica = 2
    OfflineReplica = 3
    ReplicaDeletionStarted = 4
    ReplicaDeletionSuccessful = 5
    ReplicaDeletionIneligible = 6
    NonExistentReplica = 7


_R = ReplicaState
VALID_PREVIOUS_STATES: MappingProxyType[ReplicaState, frozenset[ReplicaState]] = MappingProxyType(
    {
        _R.NewReplica: frozenset({_R.NonExistentReplica}),
        _R.OnlineReplica: frozenset(
            {_R.NewReplica, _R.OnlineReplica, _R.OfflineReplica, _R.ReplicaDeletionIneligible}
        ),
        _R.OfflineReplica: frozenset(
            {_R.NewReplica, _R.OnlineReplica, _R.OfflineReplica, _R.ReplicaDeletionIneligible}
        ),
        _R.ReplicaDeletionStarted: frozenset({_R.OfflineReplica}),
        _R.ReplicaDeletionSuccessful: frozenset({_R.ReplicaDeletionStarted}),
        _R.ReplicaDeletionIneligible: frozenset({_R.OfflineReplica, _R.ReplicaDeletionStarted}),
        _R.NonExistentReplica: frozenset({_R.ReplicaDeletionSuccessful}),
    }
)

ISR_WRITES = "isr_writes"
_TARGET_BROKERS = "_target_brokers"
_EPOCH = "_writer_epoch"

ReplicaSelector = BrokerSet | Callable[[Column, int], Column] | DataFrame


def _selected(df: DataFrame, targets: ReplicaSelector, w: int) -> tuple[DataFrame, list[Column]]:
    """Per position k, whether replica_k is a target; a DataFrame of keys is joined in once."""
    reps = [F.col(s.replica_col(k)) for k in range(w)]
    if isinstance(targets, BrokerSet):
        return df, [targets.contains(r) for r in reps]
    if isinstance(targets, DataFrame):
        keys = targets.groupBy(s.TOPIC_INDEX, s.PARTITION).agg(
            F.collect_set(s.BROKER).alias(_TARGET_BROKERS)
        )
        joined = df.join(F.broadcast(keys), [s.TOPIC_INDEX, s.PARTITION], "left")
        arr = F.coalesce(F.col(_TARGET_BROKERS), F.array().cast("array<int>"))
        return joined, [F.array_contains(arr, r) for r in reps]
    return df, [F.coalesce(targets(r, k), F.lit(False)) for k, r in enumerate(reps)]


@dataclass(frozen=True)
class ReplicaStateChangeResult:
    """Lazy outputs of one bulk replica transition; ``outcomes`` carries ``isr_writes``,
    ``state_change_errors`` and ``state_change_trail`` per row. The reports are built when
    read: each DataFrame operation is analysed as it is made, and handlers read only
    ``outcomes``."""

    outcomes: DataFrame
    target: ReplicaState
    _staged: DataFrame
    _plan: _Plan

    @property
    def partitions(self) -> DataFrame:
        return self.outcomes.select(*s.compact_columns(s.width(self.outcomes)))

    @property
    def invalid(self) -> DataFrame:
        """Key, broker, current state, target and allowed states of each rejected transition."""
        return self._plan.invalid.of(self._staged)

    @property
    def failed(self) -> DataFrame:
        """Key, broker, current state and failure of each transition that failed."""
        return self._plan.failed.of(self._staged)


@dataclass(frozen=True)
class _Report:
    """One row per flagged (partition, position): the filter, the exploded entries, the output."""

    any_flag: Column
    entries: Column
    output: tuple[Column | str, ...]

    def of(self, df: DataFrame) -> DataFrame:
        exploded = (
            df.where(self.any_flag)
            .select(s.TOPIC_INDEX, s.PARTITION, F.explode(self.entries).alias("e"))
            .where(F.col("e.flag"))
        )
        return exploded.select(*self.output)


def _per_replica_report(w: int, flag: str, extra: dict[str, Column]) -> _Report:
    """Key, broker, current state and ``extra`` of each position whose ``{flag}_k`` holds."""
    flags = [F.col(f"{flag}_{k}") for k in range(w)]
    entries = F.array(
        *[
            F.struct(
                flags[k].alias("flag"),
                F.col(s.replica_col(k)).alias(s.BROKER),
                F.col(s.replica_state_col(k)).alias("code"),
            )
            for k in range(w)
        ]
    )
    output = (
        s.TOPIC_INDEX,
        s.PARTITION,
        F.col("e." + s.BROKER).alias(s.BROKER),
        state_name_column(F.col("e.code"), ReplicaState).alias("current_state"),
        *[v.alias(k) for k, v in extra.items()],
    )
    return _Report(reduce(lambda a, b: a | b, flags, F.lit(False)), entries, output)


def handle_state_changes(
    state_df: DataFrame,
    targets: ReplicaSelector,
    target_state: ReplicaState,
    controller_epoch: int | None = None,
) -> ReplicaStateChangeResult:
    """Move the selected replicas to ``target_state`` (Kafka's ``handleStateChanges``).

    ``targets``: a ``BrokerSet`` (every replica on those brokers), a predicate
    ``(broker Column, position) -> Column``, or a DataFrame of (topic_index, partition, broker).
    ``controller_epoch``: the writer's epoch, stamped on ISR removals (None keeps the old one).
    """
    s.check_compact(state_df)
    w = s.width(state_df)
    model = set(s.compact_columns(w)) | {ISR_WRITES, ERRORS, trail.TRAIL, trail.REQUEST_BATCH}
    carried = tuple(c for c in state_df.columns if c not in model)
    df, chosen = _selected(state_df, targets, w)
    # The event's own values are data: the rest of the plan's Columns are built once per shape.
    first = {f"_chosen_{k}": c for k, c in enumerate(chosen)}
    # One call, one batch of requests (§15.1): its entries carry the row's next batch number.
    first[trail.REQUEST_BATCH] = trail.next_batch(trail.REQUEST_BATCH in df.columns)
    if controller_epoch is not None:
        first[_EPOCH] = runtime_int(controller_epoch)
    df = df.withColumns(first)
    tracked = (ERRORS in df.columns, trail.TRAIL in df.columns)
    plan = _plan(w, target_state, controller_epoch is not None, tracked, carried)
    for stage in plan.stages:
        df = df.withColumns(stage)
    return ReplicaStateChangeResult(df.select(*plan.outcomes), target_state, df, plan)


@dataclass(frozen=True)
class _Plan:
    stages: tuple[dict[str, Column], ...]
    outcomes: tuple[Column | str, ...]
    invalid: _Report
    failed: _Report


@lru_cache(maxsize=64)
def _plan(
    w: int,
    target_state: ReplicaState,
    stamp_epoch: bool,
    tracked: tuple[bool, bool],
    carried: tuple[str, ...],
) -> _Plan:
    """The Columns of a transition over a table with ``_chosen_k`` (and ``_writer_epoch``);
    ``tracked``: whether it carries errors and a trail."""
    errors, trailed = tracked
    codes = [F.col(s.replica_state_col(k)) for k in range(w)]
    leadership = has_leadership()
    staged: dict[str, Column] = {}
    for k in range(w):
        present = F.col(s.replica_col(k)) != s.EMPTY_SLOT
        valid = valid_previous_column(codes[k], target_state, VALID_PREVIOUS_STATES)
        sel = F.col(f"_chosen_{k}") & present
        fails = F.lit(False)
        if target_state == ReplicaState.NewReplica:
            fails = leadership & (F.col(s.LEADER) == F.col(s.replica_col(k)))
        staged[f"_invalid_{k}"] = sel & ~valid
        staged[f"_failed_{k}"] = sel & valid & fails
        staged[f"_apply_{k}"] = sel & valid & ~fails
    # Staged flags keep later expressions small (each is referenced many times).
    stages = [staged]
    apply = [F.col(f"_apply_{k}") for k in range(w)]

    target_code = F.lit(int(target_state)).cast("byte")
    new_states = [F.when(a, target_code).otherwise(c) for a, c in zip(apply, codes, strict=True)]
    columns: dict[str, Column] = {c: F.col(c) for c in s.compact_columns(w)}
    for k in range(w):
        columns[s.replica_state_col(k)] = new_states[k]
    columns[ISR_WRITES] = F.lit(0)

    if target_state == ReplicaState.OfflineReplica:
        more, changes = _remove_from_isr(w, apply, leadership, stamp_epoch)
        stages += more
        columns.update(changes)
    elif target_state == ReplicaState.NonExistentReplica:
        more, changes = _remove_from_assignment(w, apply, new_states)
        stages += more
        columns.update(changes)

    columns[ERRORS] = appended(existing(errors), _error_entries(w, target_state))
    # Read before the transition: the replica's broker and the state it leaves.
    moves = [
        (apply[k], trail.entry(F.col(s.replica_col(k)), codes[k], int(target_state)))
        for k in range(w)
    ]
    columns[trail.TRAIL] = trail.appended(trail.existing(trailed), moves)
    columns[trail.REQUEST_BATCH] = F.col(trail.REQUEST_BATCH)
    allowed = allowed_names(target_state, VALID_PREVIOUS_STATES)
    invalid = _per_replica_report(
        w,
        "_invalid",
        {
            "target_state": F.lit(target_state.name),
            "valid_previous_states": F.lit(allowed),
        },
    )
    failed = _per_replica_report(
        w,
        "_failed",
        {"failure": F.lit("Replica is the partition's leader and cannot become NewReplica")},
    )
    outcomes = (*[v.alias(k) for k, v in columns.items()], *carried)
    return _Plan(tuple(stages), outcomes, invalid, failed)


def _error_entries(w: int, target_state: ReplicaState) -> list[tuple[Column, Column]]:
    """Per position, the invalid and the failed transition as ``state_change_errors`` entries."""
    out = []
    for k in range(w):
        broker, code = F.col(s.replica_col(k)), F.col(s.replica_state_col(k))
        out.append((F.col(f"_invalid_{k}"), entry(broker, code, int(target_state), None)))
        if target_state != ReplicaState.NewReplica:
            continue  # only NewReplica can fail
        # Kafka logs this failure as a transition to OfflineReplica, not NewReplica.
        why = F.concat(
            F.lit("Replica "),
            broker.cast("string"),
            F.lit(
                f" for partition {PARTITION_NAME} cannot be moved to NewReplica state as it is "
                "being requested to become leader"
            ),
        )
        out.append(
            (F.col(f"_failed_{k}"), entry(broker, code, int(ReplicaState.OfflineReplica), why))
        )
    return out


def _remove_from_isr(
    w: int, apply: list[Column], leadership: Column, stamp_epoch: bool
) -> tuple[list[dict[str, Column]], dict[str, Column]]:
    """Closed form of removing each applied replica from the ISR in ascending broker order.

    Every removed replica that is in the ISR costs one write. Members not removed keep their
    order; if all ISR members are removed, the last one processed (the largest id) stays, and
    the leader becomes -1 if it was removed; with ``stamp_epoch`` a write carries the epoch in
    ``_writer_epoch``.
    """
    reps = [F.col(s.replica_col(k)) for k in range(w)]
    isr = [F.col(s.isr_col(k)) for k in range(w)]
    # Each stage is a projection the analyser, optimiser and planner walk: a cheap flag read
    # W times is inlined. ``_stays_j`` is staged: the compaction reads each of them O(W²) times.
    removed = [leadership & a for a in apply]

    def is_removed(broker: Column) -> Column:
        return reduce(
            lambda acc, k: acc | (removed[k] & (reps[k] == broker)), range(w), F.lit(False)
        )

    stages = [{f"_gone_{j}": (x != s.EMPTY_SLOT) & is_removed(x) for j, x in enumerate(isr)}]
    gone = [F.col(f"_gone_{j}") for j in range(w)]
    stages.append(
        {
            f"_stays_{j}": (x != s.EMPTY_SLOT) & ~g
            for j, (x, g) in enumerate(zip(isr, gone, strict=True))
        }
        | {"_writes": reduce(lambda a, g: a + g.cast("int"), gone, F.lit(0))}
    )
    stays = [F.col(f"_stays_{j}") for j in range(w)]
    writes = F.col("_writes")
    any_stays = reduce(lambda a, b: a | b, stays, F.lit(False))
    survivor = (
        F.greatest(*[F.when(g, x) for x, g in zip(isr, gone, strict=True)]) if w > 1 else isr[0]
    )
    kept = compact(isr, stays)
    alone = [survivor] + [F.lit(s.EMPTY_SLOT)] * (w - 1)
    new_isr = [F.when(any_stays, a).otherwise(b) for a, b in zip(kept, alone, strict=True)]
    leader = F.col(s.LEADER)
    leader_removed = in_list(leader, [F.when(r, reps[k]) for k, r in enumerate(removed)])
    touched = writes > 0
    out = {s.isr_col(k): F.when(touched, new_isr[k]).otherwise(isr[k]) for k in range(w)}
    out[s.LEADER] = F.when(touched & leader_removed, F.lit(s.NO_LEADER)).otherwise(leader)
    out[s.LEADER_EPOCH] = F.col(s.LEADER_EPOCH) + writes
    out[s.ZK_VERSION] = F.col(s.ZK_VERSION) + writes
    out[ISR_WRITES] = writes
    if stamp_epoch:
        out[s.CONTROLLER_EPOCH] = F.when(touched, F.col(_EPOCH)).otherwise(
            F.col(s.CONTROLLER_EPOCH)
        )
    return stages, out


def _remove_from_assignment(
    w: int, apply: list[Column], new_states: list[Column]
) -> tuple[list[dict[str, Column]], dict[str, Column]]:
    """Drop the applied positions from the assignment, shifting later positions left."""
    stage = {
        f"_keep_{k}": ~a & (F.col(s.replica_col(k)) != s.EMPTY_SLOT) for k, a in enumerate(apply)
    } | {f"_new_state_{k}": st.cast("int") for k, st in enumerate(new_states)}
    keep = [F.col(f"_keep_{k}") for k in range(w)]
    reps = compact([F.col(s.replica_col(k)) for k in range(w)], keep)
    states = compact([F.col(f"_new_state_{k}") for k in range(w)], keep)

    def shifted(mask: str) -> Column:
        bits = compact(
            [F.col(mask).bitwiseAND(F.lit(1 << k)).cast("boolean").cast("int") for k in range(w)],
            keep,
        )
        return reduce(
            lambda acc, j: acc.bitwiseOR(F.when(bits[j] == 1, F.lit(1 << j)).otherwise(F.lit(0))),
            range(w),
            F.lit(0),
        )

    out = {s.replica_col(k): reps[k] for k in range(w)}
    # Emptied slots read as NonExistentReplica: there is no replica there any more.
    for k in range(w):
        out[s.replica_state_col(k)] = (
            F.when(reps[k] == s.EMPTY_SLOT, F.lit(int(ReplicaState.NonExistentReplica)))
            .otherwise(states[k])
            .cast("byte")
        )
    out[s.ADDING_MASK] = shifted(s.ADDING_MASK)
    out[s.REMOVING_MASK] = shifted(s.REMOVING_MASK)
    return [stage], out
