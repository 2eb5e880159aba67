"""Kafka's four leader-election algorithms as Column expressions, and their strategy wrappers.

Selection functions (spec §7.1) mirror ``PartitionLeaderElectionAlgorithms`` and the oracle in
``statemachines.reference`` — same names, same argument order, Columns instead of values. The
assignment order is the priority order. ``assignment`` and ``isr`` are sequences of broker-id
Columns (EMPTY_SLOT past the end); ``live`` is a sequence of boolean Columns, one per assignment
position ("replica k is live"), so callers decide what live means (online, or online-or-shutting-
down). A result of null means "no leader" (Kafka's ``None``).

Strategy wrappers (§7.2) give the stages of columns to add to a compact partitions table and the
``LeadershipChange`` over them: leader, new ISR, epoch+1, zk version+1, the LeaderAndIsr
recipients as a position bit mask, and whether the choice was unclean. No UDFs: everything is a
fused CASE over a few int columns. They read the brokers through a ``BrokerView`` (see
``statemachines.brokers``), and build Columns only, no DataFrame, so a caller may build them
once and apply them to every generation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import Column
from pyspark.sql import functions as F

from statemachines import columns as c
from statemachines import schemas as s
from statemachines.brokers import BrokerView
from statemachines.columns import any_of, bit, compact, first_of, in_list, mask_of, present
from statemachines.state_change_errors import CONTROLLER, EPOCH, LIVE, PARTITION


def offline_leader(
    assignment: Sequence[Column],
    isr: Sequence[Column],
    live: Sequence[Column],
    unclean_enabled: Column,
) -> Column:
    """First live ISR member in assignment order; else, if unclean is enabled, first live replica."""
    clean = first_of([(ok & in_list(r, isr), r) for r, ok in zip(assignment, live, strict=True)])
    unclean = first_of(list(zip(live, assignment, strict=True)))
    return F.coalesce(clean, F.when(unclean_enabled, unclean))


def reassign_leader(
    target_replicas: Sequence[Column], isr: Sequence[Column], live: Sequence[Column]
) -> Column:
    """First target replica that is live and in the ISR."""
    return first_of(
        [(ok & in_list(r, isr), r) for r, ok in zip(target_replicas, live, strict=True)]
    )


def preferred_leader(
    assignment: Sequence[Column], isr: Sequence[Column], live: Sequence[Column]
) -> Column:
    """The head of the assignment if it is live and in the ISR; nobody else is considered."""
    head = assignment[0]
    return F.when(live[0] & in_list(head, isr), head).otherwise(F.lit(None).cast("int"))


def controlled_shutdown_leader(
    assignment: Sequence[Column],
    isr: Sequence[Column],
    live_or_shutting_down: Sequence[Column],
    shutting_down: Sequence[Column],
) -> Column:
    """First replica that is live-or-shutting-down, in the ISR and not shutting down."""
    return first_of(
        [
            (ok & in_list(r, isr) & ~sd, r)
            for r, ok, sd in zip(assignment, live_or_shutting_down, shutting_down, strict=True)
        ]
    )


# --------------------------------------------------------------------------------------------
# Strategy wrappers
# --------------------------------------------------------------------------------------------


SELECTED = "_selected"

# Columns to add to the table, in order: each stage may read the columns of the ones before.
Stages = list[dict[str, Column]]


def staged(cols: dict[str, Column]) -> dict[str, Column]:
    """Intermediate columns, evaluated only on the rows of the ``_selected`` selection.

    CASE WHEN short-circuits, so rows outside the selection (most of them, in a typical event)
    skip the election work entirely.
    """
    return {k: F.when(F.col(SELECTED), v) for k, v in cols.items()}


def _online(k: int) -> Column:
    return F.col(f"_online_{k}")


def stage_online(w: int, view: BrokerView) -> dict[str, Column]:
    """``_online_k`` (``isReplicaOnline`` of position k), staged once for every later expression.

    Staging shared sub-expressions as columns keeps each expression small: Spark does not inline
    a non-trivial column that is referenced more than once, so nothing is duplicated W² times.
    """
    return staged({f"_online_{k}": view.online(k) for k in range(w)})


def _broker_online(broker: Column, w: int, view: BrokerView) -> Column:
    """``isReplicaOnline`` for an ISR member: a live broker whose replica here is not on a failed
    log directory (an ISR member outside the assignment counts by liveness alone)."""
    on_failed_dir = any_of(
        [(F.col(s.replica_col(k)) == broker) & ~view.dir_online(k) for k in range(w)]
    )
    return view.live.contains(broker) & ~on_failed_dir


@dataclass(frozen=True)
class LeadershipChange:
    """A proposed new leadership per row, as Columns over staged columns of the table.

    ``failure`` is Kafka's StateChangeFailedException message for a row where ``ok`` is false,
    with ``state_change_errors.PLACEHOLDERS`` for what only the controller knows.
    """

    RECIPIENTS = "lair_recipients"
    UNCLEAN = "unclean"

    ok: Column
    leader: Column
    isr: tuple[Column, ...]
    leader_epoch: Column
    zk_version: Column
    recipients: Column
    unclean: Column
    failure: Column

    @staticmethod
    def choose(
        use_first: Column, first: LeadershipChange, second: LeadershipChange | None
    ) -> LeadershipChange:
        """Row-wise ``first if use_first else second`` (a missing ``second`` always fails)."""
        if second is None:
            second = _failed(len(first.isr), "no election strategy was given")

        def pick(a: Column, b: Column) -> Column:
            return F.when(use_first, a).otherwise(b)

        return LeadershipChange(
            ok=pick(first.ok, second.ok),
            leader=pick(first.leader, second.leader),
            isr=tuple(pick(a, b) for a, b in zip(first.isr, second.isr, strict=True)),
            leader_epoch=pick(first.leader_epoch, second.leader_epoch),
            zk_version=pick(first.zk_version, second.zk_version),
            recipients=pick(first.recipients, second.recipients),
            unclean=pick(first.unclean, second.unclean),
            failure=pick(first.failure, second.failure),
        )


def _failed(w: int, why: str) -> LeadershipChange:
    return LeadershipChange(
        ok=F.lit(False),
        leader=F.col(s.LEADER),
        isr=tuple(c.isr(w)),
        leader_epoch=F.col(s.LEADER_EPOCH),
        zk_version=F.col(s.ZK_VERSION),
        recipients=F.lit(0),
        unclean=F.lit(False),
        failure=F.lit(why),
    )


def _stage(prefix: str, leader: Column, isr: list[Column]) -> dict[str, Column]:
    cols = {f"{prefix}leader": leader}
    cols |= {f"{prefix}isr_{k}": x for k, x in enumerate(isr)}
    return staged(cols)


def _elected(
    prefix: str, name: str, w: int, recipients: Column, unclean: Column
) -> LeadershipChange:
    """A successful election is written as epoch+1 with a conditional set (zk version+1)."""
    leader = F.col(f"{prefix}leader")
    return LeadershipChange(
        ok=leader.isNotNull(),
        leader=leader,
        isr=tuple(F.col(f"{prefix}isr_{k}") for k in range(w)),
        leader_epoch=F.col(s.LEADER_EPOCH) + 1,
        zk_version=F.col(s.ZK_VERSION) + 1,
        recipients=recipients,
        unclean=unclean,
        failure=F.lit(f"Failed to elect leader for partition {PARTITION} under strategy {name}"),
    )


def initial_leadership(w: int) -> tuple[dict[str, Column], LeadershipChange]:
    """NewPartition → OnlinePartition (§5.3a): leader = first online replica, ISR = online ones.

    Needs ``stage_online`` first.
    """
    online = [_online(k) for k in range(w)]
    live = compact(c.replicas(w), online)
    return _stage("_init_", live[0], live), LeadershipChange(
        ok=any_of(online),
        leader=F.col("_init_leader"),
        isr=tuple(F.col(f"_init_isr_{k}") for k in range(w)),
        leader_epoch=F.lit(s.INITIAL_LEADER_EPOCH),
        zk_version=F.lit(s.INITIAL_ZK_VERSION),
        recipients=mask_of(online),
        unclean=F.lit(False),
        failure=F.concat(
            F.lit(
                f"Controller {CONTROLLER} epoch {EPOCH} encountered error during state change of "
                f"partition {PARTITION} from New to Online, assigned replicas are ["
            ),
            F.array_join(present(c.replicas(w)), ","),
            F.lit(f"], live brokers are [{LIVE}]. No assigned replica is alive."),
        ),
    )


class ElectionStrategy:
    """One of Kafka's ``PartitionLeaderElectionStrategy`` values.

    ``change(w, view)`` returns the strategy's stages and the proposed ``LeadershipChange`` over
    them; they follow the stage of ``stage_online``.
    """

    name: str

    def change(self, w: int, view: BrokerView) -> tuple[Stages, LeadershipChange]:
        raise NotImplementedError


_E = "_elect_"


@dataclass(frozen=True)
class OfflinePartitionLeaderElectionStrategy(ElectionStrategy):
    """Offline election; ``unclean_column`` names the per-topic effective unclean flag column.

    With ``allow_unclean`` (the ElectLeaders UNCLEAN path) every partition may go unclean;
    otherwise the table's ``unclean_column`` decides (topic config over broker default), or
    unclean election is off when no column is given.
    """

    allow_unclean: bool = False
    unclean_column: str | None = None

    @property
    def name(self) -> str:  # type: ignore[override]
        return f"OfflinePartitionLeaderElectionStrategy({str(self.allow_unclean).lower()})"

    def change(self, w: int, view: BrokerView) -> tuple[Stages, LeadershipChange]:
        reps, isr = c.replicas(w), c.isr(w)
        online = [_online(k) for k in range(w)]
        if self.allow_unclean:
            unclean_ok = F.lit(True)
        elif self.unclean_column is not None:
            unclean_ok = F.coalesce(F.col(self.unclean_column), F.lit(False))
        else:
            unclean_ok = F.lit(False)
        first = staged(
            {
                "_offline_leader": offline_leader(reps, isr, online, unclean_ok),
                **{f"_isr_online_{j}": _broker_online(x, w, view) for j, x in enumerate(isr)},
            }
        )
        leader = F.col("_offline_leader")
        was_in_isr = F.col("_was_in_isr")
        kept = compact(isr, [F.col(f"_isr_online_{j}") for j in range(w)])
        only_leader = [leader] + [F.lit(s.EMPTY_SLOT)] * (w - 1)
        new_isr = [
            F.when(was_in_isr, a).otherwise(b) for a, b in zip(kept, only_leader, strict=True)
        ]
        stages = [first, staged({"_was_in_isr": in_list(leader, isr)}), _stage(_E, leader, new_isr)]
        return stages, _elected(_E, self.name, w, mask_of(online), ~was_in_isr)


@dataclass(frozen=True)
class ReassignPartitionLeaderElectionStrategy(ElectionStrategy):
    name: str = "ReassignPartitionLeaderElectionStrategy"

    def change(self, w: int, view: BrokerView) -> tuple[Stages, LeadershipChange]:
        isr = c.isr(w)
        target = [
            ~bit(F.col(s.REMOVING_MASK), k) & (F.col(s.replica_col(k)) != s.EMPTY_SLOT)
            for k in range(w)
        ]
        # T = A − removing keeps A's order, so "first of T" is "first of A that is a target".
        live_targets = [t & _online(k) for k, t in enumerate(target)]
        stage = _stage(_E, reassign_leader(c.replicas(w), isr, live_targets), isr)
        return [stage], _elected(_E, self.name, w, mask_of(target), F.lit(False))


@dataclass(frozen=True)
class PreferredReplicaPartitionLeaderElectionStrategy(ElectionStrategy):
    name: str = "PreferredReplicaPartitionLeaderElectionStrategy"

    def change(self, w: int, view: BrokerView) -> tuple[Stages, LeadershipChange]:
        reps, isr = c.replicas(w), c.isr(w)
        stage = _stage(_E, preferred_leader(reps, isr, [_online(k) for k in range(w)]), isr)
        assigned = [r != s.EMPTY_SLOT for r in reps]
        return [stage], _elected(_E, self.name, w, mask_of(assigned), F.lit(False))


@dataclass(frozen=True)
class ControlledShutdownPartitionLeaderElectionStrategy(ElectionStrategy):
    name: str = "ControlledShutdownPartitionLeaderElectionStrategy"

    def change(self, w: int, view: BrokerView) -> tuple[Stages, LeadershipChange]:
        reps, isr = c.replicas(w), c.isr(w)
        first = staged(
            {f"_online_sd_{k}": view.online_or_shutting_down(k) for k in range(w)}
            | {
                f"_isr_stays_{j}": ~view.shutting_down.contains(x) & (x != s.EMPTY_SLOT)
                for j, x in enumerate(isr)
            }
        )
        ls = [F.col(f"_online_sd_{k}") for k in range(w)]
        sd = [view.shutting_down.contains(r) for r in reps]
        leader = controlled_shutdown_leader(reps, isr, ls, sd)
        new_isr = compact(isr, [F.col(f"_isr_stays_{j}") for j in range(w)])
        return [first, _stage(_E, leader, new_isr)], _elected(
            _E, self.name, w, mask_of(ls), F.lit(False)
        )
