"""Build compact DataFrames from reference records and read them back, for comparing the paths.

Rows are built in Python (one small ``createDataFrame``) rather than through the public-to-compact
conversion, so each check costs one Spark job; ``test_layout`` covers the conversion itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pyspark.sql import Column, DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from statemachines import schemas as s
from statemachines.partition_states import PartitionState
from statemachines.reference import Partition
from statemachines.replica_states import ReplicaState
from statemachines.state_change_errors import ERRORS

ReplicaStates = Mapping[tuple[str, int, int], ReplicaState]


def _mask(listed: Sequence[int], replicas: Sequence[int]) -> int:
    return sum(1 << k for k, r in enumerate(replicas) if r in listed)


def compact_rows(
    parts: Sequence[Partition], topic_index: Mapping[str, int], w: int, states: ReplicaStates
) -> list[tuple]:
    rows = []
    for p in parts:
        pad = [s.EMPTY_SLOT] * (w - len(p.replicas))
        isr_pad = [s.EMPTY_SLOT] * (w - len(p.isr))
        rstates = [
            int(states.get((p.topic, p.partition, r), ReplicaState.OnlineReplica))
            for r in p.replicas
        ] + [int(ReplicaState.NonExistentReplica)] * len(pad)
        rows.append(
            (
                topic_index[p.topic],
                p.partition,
                *p.replicas,
                *pad,
                *p.isr,
                *isr_pad,
                *rstates,
                _mask(p.adding_replicas, p.replicas),
                _mask(p.removing_replicas, p.replicas),
                p.leader,
                p.leader_epoch,
                p.zk_version,
                p.controller_epoch,
                int(p.state),
            )
        )
    return rows


def topic_indices(parts: Sequence[Partition]) -> dict[str, int]:
    return {t: i for i, t in enumerate(sorted({p.topic for p in parts}))}


def compact_frame(
    spark: SparkSession,
    parts: Sequence[Partition],
    replica_states: ReplicaStates | None = None,
    w: int | None = None,
) -> tuple[DataFrame, dict[str, int]]:
    """(compact table, topic name -> index) for reference partitions."""
    width = w or max(len(p.replicas) for p in parts)
    topics = topic_indices(parts)
    rows = compact_rows(parts, topics, width, replica_states or {})
    return spark.createDataFrame(rows, s.compact_schema(width)), topics


def partition_of(r: Row, names: Mapping[int, str], w: int) -> Partition:
    reps = tuple(x for x in (r[s.replica_col(k)] for k in range(w)) if x != s.EMPTY_SLOT)
    return Partition(
        topic=names[r[s.TOPIC_INDEX]],
        partition=r[s.PARTITION],
        replicas=reps,
        isr=tuple(x for x in (r[s.isr_col(k)] for k in range(w)) if x != s.EMPTY_SLOT),
        leader=r[s.LEADER],
        leader_epoch=r[s.LEADER_EPOCH],
        zk_version=r[s.ZK_VERSION],
        controller_epoch=r[s.CONTROLLER_EPOCH],
        state=PartitionState(r[s.STATE_CODE]),
        adding_replicas=tuple(x for k, x in enumerate(reps) if r[s.ADDING_MASK] & (1 << k)),
        removing_replicas=tuple(x for k, x in enumerate(reps) if r[s.REMOVING_MASK] & (1 << k)),
    )


def replica_states_of(
    r: Row, names: Mapping[int, str], w: int
) -> dict[tuple[str, int, int], ReplicaState]:
    return {
        (names[r[s.TOPIC_INDEX]], r[s.PARTITION], r[s.replica_col(k)]): ReplicaState(
            r[s.replica_state_col(k)]
        )
        for k in range(w)
        if r[s.replica_col(k)] != s.EMPTY_SLOT
    }


def read_back(
    rows: Sequence[Row], topics: Mapping[str, int], w: int
) -> tuple[dict[tuple[str, int], Partition], dict[tuple[str, int, int], ReplicaState]]:
    """Partitions and replica states of collected compact rows, keyed like the reference."""
    names = {i: t for t, i in topics.items()}
    parts, states = {}, {}
    for r in rows:
        p = partition_of(r, names, w)
        parts[(p.topic, p.partition)] = p
        states.update(replica_states_of(r, names, w))
    return parts, states


def assert_untouched_outside(
    before: DataFrame, after: DataFrame, scope: Column, counters: Sequence[str] = ()
) -> None:
    """A handler's ``scope`` is a superset of the rows it touches: every row of ``before`` out of
    it (or where it is null) comes out in ``after`` as it went in, no counter set, no error."""
    key = [s.TOPIC_INDEX, s.PARTITION]
    columns = s.compact_columns(s.width(before))
    outside = before.where(~F.coalesce(scope, F.lit(False))).select(*key)
    want = sorted(tuple(r) for r in before.join(outside, key).select(*columns).collect())
    rows = after.join(outside, key).collect()
    assert sorted(tuple(r[c] for c in columns) for r in rows) == want
    assert not [r for r in rows for c in counters if r[c]]
    if ERRORS in after.columns:
        assert not [r for r in rows if r[ERRORS]]
