"""Kafka's ``TopicDeletionManager`` (spec §9.5): driver-side sets plus bulk transforms.

The manager keeps Kafka's three sets by topic index (``ControllerContext.topics`` maps names):
queued (``topics_to_be_deleted``), ``topics_with_deletion_started`` and
``topics_ineligible_for_deletion``, plus the topics with a replica in ReplicaDeletionStarted as of
the last commit (Kafka's "in progress"). Every entry point returns a ``DeletionStep``: the next
generation, a per-broker StopReplica(delete=true) count and a small per-topic facts table. The
controller commits the step, collects the facts (one row per queued topic) and hands them to
``commit_facts``, which updates the sets — the driver never needs per-partition data.

``resumeDeletions`` runs as data: its per-topic tests (all replicas ReplicaDeletionSuccessful,
any Started, any Ineligible, any replica on a dead broker) are one aggregate over the rows of
queued topics, joined back by topic index, so one lazy plan does, for every queued topic at once:

    all Successful                        → completeDeleteTopic: rows removed
    no Started, some Ineligible           → retry: Ineligible replicas → OfflineReplica
    eligible (no Started, not ineligible) → onTopicDeletion: partitions → Offline → NonExistent
        (first start only); dead replicas → ReplicaDeletionIneligible; live, not yet successful
        replicas → OfflineReplica → ReplicaDeletionStarted (StopReplica delete=true); a topic
        with a dead replica becomes ineligible.

Entry points whose Kafka body is guarded by "if some replicas/topics qualify" carry that guard
as a data flag (``_trigger``), so a call that matches nothing changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from controller.handlers.tracked import tracked
from controller.topic_deletion_state import (
    COMPLETED,
    IN_PROGRESS,
    INELIGIBLE,
    STARTED,
    TOPIC_FACTS,
    TopicDeletionState,
)
from statemachines import schemas as s
from statemachines.brokers import BrokerSet, ClusterView
from statemachines.columns import any_of, count_of
from statemachines.partition_states import PartitionState
from statemachines.partition_states import handle_state_changes as partition_changes
from statemachines.replica_states import ISR_WRITES, ReplicaState
from statemachines.replica_states import handle_state_changes as replica_changes
from statemachines.state_change_errors import with_errors
from statemachines.state_change_trail import with_trail

ReplicaPredicate = Callable[[Column, int], Column]

STOP_REPLICA_DELETES = "stop_replica_deletes"
ISR_SHRINKS = "isr_shrinks"

_GATE, _HIT = "_gate_row", "_hit"
_STEP = ("_complete", "_retry", "_start", "_first_start")
_R = ReplicaState


def _started_on(broker: int) -> ReplicaPredicate:
    return lambda b, k: (b == broker) & (_code(k) == int(_R.ReplicaDeletionStarted))


def _code(k: int) -> Column:
    return F.col(s.replica_state_col(k))


def _present(k: int) -> Column:
    return F.col(s.replica_col(k)) != s.EMPTY_SLOT


def _in(indices: Iterable[int]) -> Column:
    ids = sorted(set(indices))
    return F.col(s.TOPIC_INDEX).isin(ids) if ids else F.lit(False)


@dataclass(frozen=True)
class DeletionStep:
    """Lazy outputs of one deletion entry point (nothing has run).

    ``partitions``: next generation (compact + ``state_change_errors``, ``state_change_trail``,
    ``stop_replica_deletes``, ``isr_shrinks`` per row).
    ``stop_replica``: (broker, stop_replica_deletes) — StopReplica(delete=true) per broker.
    ``topics``: one row per queued topic: topic_index, completed, started, ineligible,
    in_progress — to collect after the commit and pass to ``commit_facts``.
    """

    partitions: DataFrame
    stop_replica: DataFrame
    topics: DataFrame


class TopicDeletionManager:
    """Kafka's ``TopicDeletionManager`` entry points over the context's deletion sets
    (``TopicDeletionState``): each returns a lazy ``DeletionStep`` and moves the sets only
    where Kafka does before any work runs (enqueue, resume)."""

    def __init__(self, state: TopicDeletionState | None = None) -> None:
        self.state = state if state is not None else TopicDeletionState()

    # -- entry points (each returns a lazy step) --------------------------------------------
    def enqueue_topics_for_deletion(
        self, partitions: DataFrame, topics: Iterable[int], view: ClusterView
    ) -> DeletionStep | None:
        if not self.state.enabled:
            return None
        self.state.topics_to_be_deleted |= set(topics)
        return self.resume_deletions(partitions, view)

    def resume_deletion_for_topics(
        self, partitions: DataFrame, topics: Iterable[int], view: ClusterView
    ) -> DeletionStep | None:
        resumed = set(topics) & self.state.topics_to_be_deleted if self.state.enabled else set()
        if not resumed:
            return None
        self.state.topics_ineligible_for_deletion -= resumed
        return self.resume_deletions(partitions, view)

    def on_brokers_started(
        self, partitions: DataFrame, new: BrokerSet, view: ClusterView
    ) -> DeletionStep | None:
        """§8.1: queued topics with a replica on a returning broker ⇒ resumeDeletionForTopics."""
        if not (self.state.enabled and self.state.topics_to_be_deleted):
            return None
        w = s.width(partitions)
        hit = any_of([new.contains(F.col(s.replica_col(k))) for k in range(w)])
        df = partitions.select(*s.compact_columns(w), *tracked(partitions))
        df = df.withColumns({_GATE: hit, _HIT: hit})
        return self._resume(df, view, clears=True)

    def fail_replica_deletion(
        self, partitions: DataFrame, replicas: ReplicaPredicate, view: ClusterView
    ) -> DeletionStep | None:
        """Replicas of queued topics → ReplicaDeletionIneligible; their topics ineligible."""
        return self._respond(partitions, view, failed=replicas)

    def complete_replica_deletion(
        self, partitions: DataFrame, replicas: ReplicaPredicate, view: ClusterView
    ) -> DeletionStep | None:
        """Replicas of queued topics → ReplicaDeletionSuccessful; then resumeDeletions."""
        return self._respond(partitions, view, succeeded=replicas)

    def on_stop_replica_response(
        self,
        partitions: DataFrame,
        broker: int,
        failed: ReplicaPredicate | None,
        view: ClusterView,
    ) -> DeletionStep | None:
        """``TopicDeletionStopReplicaResponseReceived`` from ``broker`` for its Started replicas.

        ``failed`` picks the partitions answered with an error (None = top-level error: all).
        Kafka's failReplicaDeletion then completeReplicaDeletion (only if some succeeded) each end
        in resumeDeletions; one resumeDeletions after both transitions gives the same state.
        """
        bad: ReplicaPredicate = _started_on(broker)
        if failed is not None:
            f = failed
            bad = lambda b, k: _started_on(broker)(b, k) & f(b, k)  # noqa: E731
        return self._respond(partitions, view, bad, _started_on(broker), guard_ok=True)

    def resume_deletions(self, partitions: DataFrame, view: ClusterView) -> DeletionStep:
        """Kafka's ``resumeDeletions`` over every queued topic (unguarded)."""
        w = s.width(partitions)
        df = partitions.select(*s.compact_columns(w), *tracked(partitions)).withColumns(
            {_GATE: F.lit(True), _HIT: F.lit(False)}
        )
        return self._resume(df, view)

    try_topic_deletion = resume_deletions

    # -- the bulk plan ---------------------------------------------------------------------
    def _respond(
        self,
        partitions: DataFrame,
        view: ClusterView,
        failed: ReplicaPredicate | None = None,
        succeeded: ReplicaPredicate | None = None,
        guard_ok: bool = False,
    ) -> DeletionStep | None:
        if not (self.state.enabled and self.state.topics_to_be_deleted):
            return None
        w = s.width(partitions)
        queued = _in(self.state.topics_to_be_deleted)

        def chosen(pred: ReplicaPredicate) -> Column:
            return any_of([pred(F.col(s.replica_col(k)), k) & _present(k) for k in range(w)])

        df = partitions.select(*s.compact_columns(w), *tracked(partitions))
        # Kafka's mark and guards use the replicas handed in, whatever their transition does.
        hit = chosen(failed) & queued if failed is not None else F.lit(False)
        gate = hit
        df = df.withColumns({_HIT: hit})
        if failed is not None:
            f = failed
            out = replica_changes(df, lambda b, k: f(b, k) & queued, _R.ReplicaDeletionIneligible)
            df = out.outcomes.select(*s.compact_columns(w), *tracked(out.outcomes), _HIT)
        if succeeded is not None:
            ok = succeeded
            df = df.withColumn(_GATE, chosen(ok) & queued if guard_ok else F.lit(True))
            gate = F.col(_GATE) | F.col(_HIT)
            out = replica_changes(df, lambda b, k: ok(b, k) & queued, _R.ReplicaDeletionSuccessful)
            df = out.outcomes.select(*s.compact_columns(w), *tracked(out.outcomes), _HIT, _GATE)
        return self._resume(df.withColumn(_GATE, gate), view, marks=True)

    def _resume(
        self, df: DataFrame, view: ClusterView, clears: bool = False, marks: bool = False
    ) -> DeletionStep:
        """resumeDeletions if any row has ``_gate``; a topic with a ``_hit`` row first leaves the
        ineligible set (``clears``: resumeDeletionForTopics) or joins it (``marks``:
        failReplicaDeletion)."""
        w = s.width(df)
        df = with_trail(with_errors(df))
        cols = [*s.compact_columns(w), *tracked(df)]
        queued = _in(self.state.topics_to_be_deleted)
        succ, started, inelig = (
            int(_R.ReplicaDeletionSuccessful),
            int(_R.ReplicaDeletionStarted),
            int(_R.ReplicaDeletionIneligible),
        )
        per_row = df.where(queued).select(
            s.TOPIC_INDEX,
            count_of([_present(k) & (_code(k) != succ) for k in range(w)]).alias("n_left"),
            count_of([_present(k) & (_code(k) == started) for k in range(w)]).alias("n_started"),
            count_of([_present(k) & (_code(k) == inelig) for k in range(w)]).alias("n_inelig"),
            count_of([_present(k) & ~view.online(k) for k in range(w)]).alias("n_dead"),
            count_of([_present(k) & view.online(k) & (_code(k) != succ) for k in range(w)]).alias(
                "n_go"
            ),
            F.col(_HIT).cast("int").alias("hit"),
            F.col(_GATE).cast("int").alias("gated"),
        )
        agg = per_row.groupBy(s.TOPIC_INDEX).agg(
            *(F.sum(c).alias(c) for c in ("n_left", "n_started", "n_inelig", "n_dead", "n_go")),
            F.max("hit").alias("hit"),
            F.max("gated").alias("gated"),
        )
        gate = agg.agg(F.max("gated").alias("_gate"))
        t = agg.crossJoin(gate)
        go, hit = F.coalesce(F.col("_gate") == 1, F.lit(False)), F.col("hit") == 1
        was_inelig = _in(self.state.topics_ineligible_for_deletion)
        inelig_now = (was_inelig & ~hit) if clears else (was_inelig | hit) if marks else was_inelig
        complete = go & (F.col("n_left") == 0)
        no_started = F.col("n_started") == 0
        start = go & ~complete & no_started & ~inelig_now
        facts = t.select(
            s.TOPIC_INDEX,
            complete.alias("_complete"),
            (go & ~complete & no_started & (F.col("n_inelig") > 0)).alias("_retry"),
            start.alias("_start"),
            (start & ~_in(self.state.topics_with_deletion_started)).alias("_first_start"),
            complete.alias(COMPLETED),
            (start | _in(self.state.topics_with_deletion_started)).alias(STARTED),
            F.when(go, inelig_now | (start & (F.col("n_dead") > 0)))
            .otherwise(was_inelig)
            .alias(INELIGIBLE),
            ((~no_started & ~complete) | (start & (F.col("n_go") > 0))).alias(IN_PROGRESS),
        )
        joined = df.select(*cols).join(
            F.broadcast(facts.select(s.TOPIC_INDEX, *_STEP)), s.TOPIC_INDEX, "left"
        )
        df = joined.select(*cols, *(F.coalesce(F.col(c), F.lit(False)).alias(c) for c in _STEP))
        df = df.where(~F.col("_complete"))
        keep = [*cols, *_STEP]
        retry = replica_changes(
            df,
            lambda _b, k: F.col("_retry") & (_code(k) == inelig),
            _R.OfflineReplica,
            view.controller_epoch,
        ).outcomes.select(*keep, F.col(ISR_WRITES).alias("_shrinks_a"))
        keep.append("_shrinks_a")
        first = F.col("_first_start")
        df = partition_changes(retry, first, PartitionState.OfflinePartition).outcomes.select(*keep)
        df = partition_changes(df, first, PartitionState.NonExistentPartition).outcomes.select(
            *keep
        )
        start_col = F.col("_start")
        df = replica_changes(
            df, lambda _b, k: start_col & ~view.online(k), _R.ReplicaDeletionIneligible
        ).outcomes.select(*keep)

        def go_on(_b: Column, k: int) -> Column:
            return start_col & view.online(k) & (_code(k) != succ)

        df = replica_changes(df, go_on, _R.OfflineReplica, view.controller_epoch).outcomes.select(
            *keep, (F.col("_shrinks_a") + F.col(ISR_WRITES)).alias(ISR_SHRINKS)
        )
        df = replica_changes(df, go_on, _R.ReplicaDeletionStarted).outcomes
        newly = [start_col & view.online(k) & (_code(k) == started) for k in range(w)]
        out = df.select(*cols, count_of(newly).alias(STOP_REPLICA_DELETES), ISR_SHRINKS)
        entries = F.array(
            *[
                F.struct(n.alias("n"), F.col(s.replica_col(k)).alias(s.BROKER))
                for k, n in enumerate(newly)
            ]
        )
        stop = (
            df.select(F.explode(entries).alias("e"))
            .where(F.col("e.n"))
            .groupBy(F.col("e." + s.BROKER).alias(s.BROKER))
            .agg(F.count(F.lit(1)).cast("int").alias(STOP_REPLICA_DELETES))
        )
        return DeletionStep(out, stop, facts.select(s.TOPIC_INDEX, *TOPIC_FACTS))
