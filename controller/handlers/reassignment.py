"""KIP-455 partition reassignment (spec §10, 2.4+) as bulk transforms over the compact table.

Plans are validated first (``handlers.reassignment_plans``). ``start_reassignment``
is ``onPartitionReassignment`` for the accepted entries (phase U, then A or B, §10.3);
``maybe_complete_reassignment`` is phase B for reassigning partitions whose target replicas are
all in the ISR. Results are the next compact generation plus per-partition counters
(``assignment_changed`` marks rows whose topic znode must be rewritten). Kafka's order of steps
is kept: B3 elects before B4 removes the old replicas from the ISR, which decides the epochs.

The full replica set RS = distinct(TRS ++ ORS) can exceed the table's width; the caller, which
holds the (small) plan on the driver, passes the output width, and a row whose RS would not fit
is left unchanged and flagged ``width_exceeded`` rather than truncated.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import pairwise

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from controller.handlers.reassignment_plans import (
    ERROR,
    KEY,
    NONE,
    TARGET,
    UNKNOWN_SERVER_ERROR,
    being_reassigned,
    listed,
    occupied,
    replica_at,
)
from controller.handlers.tracked import tracked
from statemachines import schemas as s
from statemachines.brokers import ClusterView
from statemachines.columns import (
    any_of,
    bit,
    first_of,
    has_leadership,
    in_list,
    mask_of,
    runtime_int,
)
from statemachines.election import LeadershipChange, ReassignPartitionLeaderElectionStrategy
from statemachines.layout import widen
from statemachines.partition_states import FAILURE, OUTCOME, Outcome, PartitionState
from statemachines.partition_states import handle_state_changes as partition_changes
from statemachines.replica_states import ISR_WRITES, ReplicaState
from statemachines.replica_states import handle_state_changes as replica_changes
from statemachines.state_change_errors import ERRORS, existing
from statemachines.state_change_trail import (
    REQUEST_BATCH,
    TRAIL,
    appended,
    leader_epoch_bump,
    with_trail,
)
from statemachines.state_change_trail import entry as trail_entry

ASSIGNMENT_CHANGED = "assignment_changed"
REASSIGNMENT_STARTED = "reassignment_started"
REASSIGNMENT_COMPLETED = "reassignment_completed"
LEADER_MOVED = "leader_moved"
FAILED_ELECTION = "failed_election"
ISR_SHRINKS = "isr_shrinks"
WIDTH_EXCEEDED = "width_exceeded"
COUNTERS = (
    ASSIGNMENT_CHANGED,
    REASSIGNMENT_STARTED,
    REASSIGNMENT_COMPLETED,
    LEADER_MOVED,
    FAILED_ELECTION,
    ISR_SHRINKS,
    WIDTH_EXCEEDED,
)

_NON_EXISTENT = int(ReplicaState.NonExistentReplica)


def _with_counters(df: DataFrame, w: int, **extra: Column) -> DataFrame:
    """The compact columns of ``df`` at width ``w`` (and its tracked ones), zeroed ``COUNTERS``,
    its errors (an empty column if it has none) and ``extra``, in one projection."""
    return df.select(
        *s.compact_columns(w),
        *[c for c in tracked(df) if c != ERRORS],
        *[F.lit(0).alias(c) for c in COUNTERS],
        existing(ERRORS in df.columns).alias(ERRORS),
        *[c.alias(name) for name, c in extra.items()],
    )


def _bumped(where: Column, view: ClusterView) -> dict[str, Column]:
    """``updateLeaderEpochAndSendRequest``: same leader and ISR, epoch+1, written with my
    controller epoch, and announced in a request batch of its own (the row carries a trail).

    ``where`` is read four times: callers pass a cheap predicate (a flag column or two)."""
    return {
        s.LEADER_EPOCH: F.col(s.LEADER_EPOCH) + where.cast("int"),
        s.ZK_VERSION: F.col(s.ZK_VERSION) + where.cast("int"),
        s.CONTROLLER_EPOCH: F.when(where, runtime_int(view.controller_epoch)).otherwise(
            F.col(s.CONTROLLER_EPOCH)
        ),
        **leader_epoch_bump(where, F.col(s.STATE_CODE)),
    }


def _replaced(df: DataFrame, changes: dict[str, Column], dropped: Iterable[str] = ()) -> DataFrame:
    """``df`` with ``changes`` in place of their columns and without ``dropped``: one select."""
    gone = set(dropped)
    return df.select(
        *[changes[c].alias(c) if c in changes else c for c in df.columns if c not in gone]
    )


def _step(
    df: DataFrame, picked: Column, target: ReplicaState, controller_epoch: int | None = None
) -> DataFrame:
    """One replica transition for positions whose bit is set in the mask ``picked``."""

    def is_picked(_b: Column, k: int) -> Column:
        return bit(picked, k)

    out = replica_changes(df, is_picked, target, controller_epoch).outcomes
    shrinks = F.col(ISR_SHRINKS) + F.col(ISR_WRITES)
    return _replaced(out, {ISR_SHRINKS: shrinks}, [ISR_WRITES])


def _stop_and_delete(df: DataFrame, w: int, picked: Column, view: ClusterView) -> DataFrame:
    """→ Offline (ISR removal, one write each) → DeletionStarted → Successful → NonExistent.

    Only the Offline step changes anything but the replica's own state, and the positions leave
    the assignment whether or not the chain was legal (Kafka has already written the new
    assignment, U2/B2; here a state exists only for an assigned replica), so the deletion
    states are not staged one by one: the replicas are dropped after the ISR removal, and the
    transitions from OfflineReplica on are appended to the trail as Kafka makes them.
    ``picked`` must read no column the Offline step changes (states, ISR, leadership).
    """
    df = _step(df, picked, ReplicaState.OfflineReplica, view.controller_epoch)
    adding, removing = F.col(s.ADDING_MASK), F.col(s.REMOVING_MASK)
    # The kept positions in order, one array: each slot then reads its element, so the code
    # grows with the width, not with its square.
    kept = F.array_compact(
        F.array(
            *[
                F.when(
                    occupied(k) & ~bit(picked, k),
                    F.struct(
                        replica_at(k).alias("r"),
                        F.col(s.replica_state_col(k)).alias("s"),
                        bit(adding, k).alias("a"),
                        bit(removing, k).alias("m"),
                    ),
                )
                for k in range(w)
            ]
        )
    )
    df = df.withColumn("_kept", kept)
    slot = [F.get(F.col("_kept"), j) for j in range(w)]
    no = F.lit(False)
    changes = {
        s.replica_col(j): F.coalesce(e["r"], F.lit(s.EMPTY_SLOT)) for j, e in enumerate(slot)
    }
    changes |= {
        s.replica_state_col(j): F.coalesce(e["s"], F.lit(_NON_EXISTENT).cast("byte"))
        for j, e in enumerate(slot)
    }
    changes[s.ADDING_MASK] = mask_of([F.coalesce(e["a"], no) for e in slot])
    changes[s.REMOVING_MASK] = mask_of([F.coalesce(e["m"], no) for e in slot])
    changes[TRAIL] = appended(F.col(TRAIL), _deletion_chain(w, picked))
    changes[REQUEST_BATCH] = F.col(REQUEST_BATCH) + len(_DELETION_CHAIN) - 1
    return _replaced(df, changes, ["_kept"])


_DELETION_CHAIN = (
    ReplicaState.OfflineReplica,
    ReplicaState.ReplicaDeletionStarted,
    ReplicaState.ReplicaDeletionSuccessful,
    ReplicaState.NonExistentReplica,
)


def _deletion_chain(w: int, picked: Column) -> list[tuple[Column, Column]]:
    """The trail of the picked replicas that reached OfflineReplica, from there to
    NonExistentReplica: the transitions Kafka makes one call each (B4, B5)."""
    offline = int(ReplicaState.OfflineReplica)
    went = [
        occupied(k) & bit(picked, k) & (F.col(s.replica_state_col(k)) == offline) for k in range(w)
    ]
    # One call per transition: the batches after the Offline step's.
    return [
        (went[k], trail_entry(replica_at(k), F.lit(int(a)), int(b), F.col(REQUEST_BATCH) + n))
        for n, (a, b) in enumerate(pairwise(_DELETION_CHAIN), start=1)
        for k in range(w)
    ]


def _complete(df: DataFrame, w: int, selected: str, view: ClusterView) -> DataFrame:
    """Phase B (§10.3) for rows where column ``selected`` holds; they all have leadership."""
    sel = F.col(selected)
    adding, removing = F.col(s.ADDING_MASK), F.col(s.REMOVING_MASK)
    df = _step(df, F.when(sel, adding).otherwise(0), ReplicaState.OnlineReplica)  # B1
    # B3 against RS = TRS: keep the leader (epoch bump) if it is a target replica and online.
    leader_ok = any_of(
        [
            occupied(k) & ~bit(removing, k) & (replica_at(k) == F.col(s.LEADER)) & view.online(k)
            for k in range(w)
        ]
    )
    df = df.withColumn("_leader_ok", leader_ok)
    df = df.withColumns(_bumped(sel & F.col("_leader_ok"), view))
    elected = partition_changes(
        df,
        sel & ~F.col("_leader_ok"),
        PartitionState.OnlinePartition,
        view,
        ReassignPartitionLeaderElectionStrategy(),
    ).outcomes
    outcome = F.col(OUTCOME)
    counted = {
        LEADER_MOVED: F.col(LEADER_MOVED)
        + (outcome == int(Outcome.LEADERSHIP_WRITTEN)).cast("int"),
        FAILED_ELECTION: F.col(FAILED_ELECTION) + (outcome == int(Outcome.FAILED)).cast("int"),
    }
    result = (OUTCOME, FAILURE, LeadershipChange.RECIPIENTS, LeadershipChange.UNCLEAN)
    df = _replaced(elected, counted, result)
    df = _stop_and_delete(df, w, F.when(sel, removing).otherwise(0), view)  # B4, B5
    return df.withColumns(
        {
            s.ADDING_MASK: F.when(sel, 0).otherwise(F.col(s.ADDING_MASK)),
            s.REMOVING_MASK: F.when(sel, 0).otherwise(F.col(s.REMOVING_MASK)),
            ASSIGNMENT_CHANGED: F.greatest(F.col(ASSIGNMENT_CHANGED), sel.cast("int")),  # B6
            REASSIGNMENT_COMPLETED: sel.cast("int"),
        }
    )


def _trs_in_isr(w: int) -> Column:
    isr = [F.col(s.isr_col(j)) for j in range(w)]
    return ~any_of(
        [
            occupied(k) & ~bit(F.col(s.REMOVING_MASK), k) & ~in_list(replica_at(k), isr)
            for k in range(w)
        ]
    )


def start_reassignment(
    partitions: DataFrame,
    plan: DataFrame,
    view: ClusterView,
    width: int | None = None,
    replaces_ongoing: bool = True,
    may_complete: bool = True,
) -> DataFrame:
    """``onPartitionReassignment`` for accepted plan rows; ``width`` is the output width.

    The caller knows from validation which steps its rows need, and each step left out makes
    the plan (whose generated code grows with the width) smaller. ``replaces_ongoing=False``
    promises that no row replaces or cancels a reassignment in flight (no ``reassigning`` row;
    a resumed reassignment does neither): U3 has no replica to stop and is left out.
    ``may_complete=False`` promises that no row completes at once (no ``completes`` row):
    phase B is left out.

    Returns the compact table at width ``max(width, current)`` with ``COUNTERS`` and ``error``
    (null for rows not in the plan; ``UNKNOWN_SERVER_ERROR`` where the partition has no state
    znode, after the assignment update, as Kafka's exception comes after U1/U2).
    """
    s.check_compact(partitions)
    w = max(s.width(partitions), width or 0)
    df = _with_counters(widen(partitions, w), w)
    targets = plan.select(*KEY, F.col(TARGET).alias("_target"), F.lit(True).alias("_planned"))
    df = df.join(targets, KEY, "left")
    adding_mask = F.col(s.ADDING_MASK)
    being = being_reassigned()
    df = df.withColumns(
        {
            "_cur": listed(w, lambda k: F.lit(True)),
            "_cur_adding": listed(w, lambda k: bit(adding_mask, k)),
            "_cur_removing": listed(w, lambda k: bit(F.col(s.REMOVING_MASK), k)),
            "_ors": listed(w, lambda k: ~bit(adding_mask, k)),
            # A cancel of a partition that is not reassigning is NO_REASSIGNMENT_IN_PROGRESS.
            "_applies": F.coalesce(F.col("_planned"), F.lit(False))
            & (F.col("_target").isNotNull() | being),
        }
    )
    # reassignTo(TRS) where a cancel's TRS is the origin (§10.1).
    trs = F.coalesce(F.col("_target"), F.col("_ors"))
    df = df.withColumn("_full", F.array_distinct(F.concat(trs, F.col("_ors"))))
    # U3: replicas of a replaced or cancelled reassignment go after RS until deleted.
    replaced = F.array_except(F.col("_cur"), F.col("_full"))
    fits = F.size(F.col("_full")) + F.size(replaced) <= w
    df = df.withColumns(
        {
            "_adding": F.array_except(F.col("_full"), F.col("_ors")),
            "_removing": F.array_except(F.col("_full"), trs),
            "_ext": F.concat(F.col("_full"), replaced),
            "_apply": F.col("_applies") & fits,
            "_overflow": F.col("_applies") & ~fits,
        }
    )
    df = df.withColumns(
        {f"_nr_{j}": F.coalesce(F.get(F.col("_ext"), j), F.lit(s.EMPTY_SLOT)) for j in range(w)}
    )
    new = [F.col(f"_nr_{j}") for j in range(w)]
    states = [F.col(s.replica_state_col(k)).cast("int") for k in range(w)]
    apply = F.col("_apply")
    n_full = F.size(F.col("_full"))
    changed = ~(
        (F.col("_full") == F.col("_cur"))
        & (F.col("_adding") == F.col("_cur_adding"))
        & (F.col("_removing") == F.col("_cur_removing"))
    )
    updates: dict[str, Column] = {}
    for j in range(w):
        old_state = first_of([(replica_at(k) == new[j], states[k]) for k in range(w)])
        state = F.coalesce(old_state, F.lit(_NON_EXISTENT)).cast("byte")
        updates[s.replica_col(j)] = F.when(apply, new[j]).otherwise(replica_at(j))
        updates[s.replica_state_col(j)] = F.when(apply, state).otherwise(
            F.col(s.replica_state_col(j))
        )
    for mask, members in ((s.ADDING_MASK, "_adding"), (s.REMOVING_MASK, "_removing")):
        bits = mask_of([F.array_contains(F.col(members), r) for r in new])
        updates[mask] = F.when(apply, bits).otherwise(F.col(mask))
    updates[ASSIGNMENT_CHANGED] = (apply & changed).cast("int")
    updates[WIDTH_EXCEEDED] = F.col("_overflow").cast("int")
    picked = []
    if replaces_ongoing:  # U3 stops RS's replicas past TRS ++ ORS (a replaced reassignment's)
        unneeded = mask_of([(F.lit(j) >= n_full) & (new[j] != s.EMPTY_SLOT) for j in range(w)])
        picked = [F.when(apply, unneeded).otherwise(0).alias("_pick")]
    df = df.select(
        *[updates.get(c, F.col(c)).alias(c) for c in s.compact_columns(w)],
        *[updates.get(c, F.col(c)).alias(c) for c in COUNTERS],
        *tracked(df),
        "_apply",
        *picked,
    )
    if replaces_ongoing:
        df = _stop_and_delete(df, w, F.col("_pick"), view)  # U3
    has = has_leadership()
    complete = ~being_reassigned() | (has & _trs_in_isr(w))
    df = df.withColumns({"_phase_a": apply & has & ~complete, "_phase_b": apply & has & complete})
    phase_a = F.col("_phase_a")
    df = with_trail(df).withColumns(
        {**_bumped(phase_a, view), REASSIGNMENT_STARTED: phase_a.cast("int")}
    )  # A1
    adding = F.when(phase_a, F.col(s.ADDING_MASK)).otherwise(0)
    # A2; its zero ``isr_writes`` is replaced by phase B's first step.
    df = replica_changes(df, lambda _b, k: bit(adding, k), ReplicaState.NewReplica).outcomes
    if may_complete:
        df = _complete(df, w, "_phase_b", view)
    error = F.when(apply & has, NONE).when(apply, UNKNOWN_SERVER_ERROR)
    return df.select(*s.compact_columns(w), *tracked(df), *COUNTERS, error.alias(ERROR))


def maybe_complete_reassignment(partitions: DataFrame, view: ClusterView) -> DataFrame:
    """``maybeCompleteReassignment`` for every reassigning row whose TRS is in the ISR (§10.3 B).

    Returns the compact table with ``COUNTERS`` (``reassignment_completed``, ``leader_moved``,
    ``failed_election``, ``isr_shrinks``, ``assignment_changed`` for the B6 znode write).
    """
    s.check_compact(partitions)
    w = s.width(partitions)
    phase_b = being_reassigned() & has_leadership() & _trs_in_isr(w)
    df = _complete(_with_counters(partitions, w, _phase_b=phase_b), w, "_phase_b", view)
    return df.select(*s.compact_columns(w), *tracked(df), *COUNTERS)
