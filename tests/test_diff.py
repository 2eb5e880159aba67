"""The generation diff keeps exactly the changed, created and deleted rows, old beside new; the
join-free diff of a stamped generation is the same frame."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from controller.commit.diff import (
    CHANGE,
    CHANGED,
    PREVIOUS,
    can_stamp,
    diff_columns,
    generation_diff,
    prev,
    stale_rows,
    stamp_changes,
    stamped_diff,
    with_previous,
)
from controller.context import ControllerContext
from statemachines import schemas as s
from statemachines.layout import widen
from statemachines.reference import Partition
from statemachines.replica_states import ReplicaState
from tests.frames import compact_frame


def _parts() -> list[Partition]:
    return [
        Partition("a", 0, (1, 2, 3), (1, 2, 3), leader=1),
        Partition("a", 1, (2, 3, 1), (2, 3, 1), leader=2),
        Partition("a", 2, (3, 1, 2), (3, 1, 2), leader=3),
    ]


def test_diff_has_changed_created_and_deleted_rows_only(spark: SparkSession) -> None:
    before = _parts()
    after = [
        before[0],
        replace(before[1], isr=(3, 1), leader=3, leader_epoch=1, zk_version=1),  # changed
        Partition("a", 3, (1, 2), (1, 2), leader=1),  # created (narrower row)
    ]  # a-2 deleted
    old, _ = compact_frame(spark, before)
    new, _ = compact_frame(spark, after, w=3)
    diff = generation_diff(old, new)
    assert diff.columns == diff_columns(3)
    rows = {r[s.PARTITION]: r for r in diff.collect()}
    assert sorted(rows) == [1, 2, 3]
    assert (rows[1][s.LEADER], rows[1][prev(s.LEADER)]) == (3, 2)
    assert rows[1][prev(s.isr_col(2))] == 1 and rows[1][s.isr_col(2)] == s.EMPTY_SLOT
    assert rows[2][s.LEADER] is None and rows[2][prev(s.LEADER)] == 3
    assert rows[3][prev(s.LEADER)] is None and rows[3][s.replica_col(2)] == s.EMPTY_SLOT


def test_replica_state_change_alone_is_a_change(spark: SparkSession) -> None:
    before = _parts()
    old, _ = compact_frame(spark, before)
    offline = {("a", 0, 3): ReplicaState.OfflineReplica}
    new, _ = compact_frame(spark, before, offline)
    rows = generation_diff(old, new).collect()
    assert [(r[s.PARTITION], r[s.replica_state_col(2)]) for r in rows] == [
        (0, int(ReplicaState.OfflineReplica))
    ]


def test_first_generation_is_all_new(spark: SparkSession) -> None:
    new, _ = compact_frame(spark, _parts())
    rows = generation_diff(None, new).collect()
    assert len(rows) == 3 and all(r[prev(s.LEADER)] is None for r in rows)


_EDITS = st.sampled_from(["same", "leader", "isr", "replica_state", "epoch"])


@settings(max_examples=8, deadline=None)
@given(
    edits=st.lists(_EDITS, min_size=6, max_size=6),
    created=st.integers(0, 2),
    stale=st.booleans(),
)
def test_stamped_diff_equals_the_join(
    spark: SparkSession, edits: list[str], created: int, stale: bool
) -> None:
    """Rows carrying their previous values give the join's diff as a filter of the committed
    rows; rows carried from another generation are changed, counted stale (the commit then
    joins)."""
    before = [
        Partition("a", p, (1 + p % 3, 1 + (p + 1) % 3), (1 + p % 3,), leader=1 + p % 3)
        for p in range(len(edits))
    ]
    after, states = [], {}
    for p, (part, edit) in enumerate(zip(before, edits, strict=True)):
        if edit == "leader":
            part = replace(part, leader=part.replicas[1], leader_epoch=1, zk_version=1)
        elif edit == "isr":
            part = replace(part, isr=part.replicas)
        elif edit == "epoch":
            part = replace(part, controller_epoch=2)
        elif edit == "replica_state":
            states[("a", p, part.replicas[1])] = ReplicaState.OfflineReplica
        after.append(part)
    after += [Partition("a", 10 + i, (2, 3), (2, 3), leader=2) for i in range(created)]
    old, _ = compact_frame(spark, before, w=2)
    new, _ = compact_frame(spark, after, states, w=2)
    carried = with_previous(old, 6 if stale else 7).select(s.TOPIC_INDEX, s.PARTITION, PREVIOUS)
    handled = new.join(carried, [s.TOPIC_INDEX, s.PARTITION], "left")
    assert can_stamp(handled)
    committed = handled.select(*s.compact_columns(2), *stamp_changes(handled, 7))
    candidates = {
        r[0] for r in committed.where(F.col(CHANGE) == CHANGED).select(s.PARTITION).collect()
    }
    edited = {p for p, e in enumerate(edits) if e != "same"}
    assert candidates == (set(range(len(edits))) if stale else edited)
    assert committed.agg(stale_rows()).first()[0] == (len(edits) if stale else 0)
    if stale:
        return

    def rows(df: DataFrame) -> list[tuple]:
        return sorted(tuple(r) for r in df.select(*diff_columns(2)).collect())

    assert rows(stamped_diff(committed)) == rows(generation_diff(old, new))


def test_commit_reads_the_diff_off_the_candidates_unless_rows_were_dropped(
    spark: SparkSession,
) -> None:
    ctx = ControllerContext(spark)
    ctx.add_topic("a", 3)
    ctx.commit(compact_frame(spark, _parts())[0])
    assert not ctx.stamped  # nothing to diff against
    assert ctx.partitions is not None
    kept = with_previous(ctx.partitions, ctx.generation).withColumn(s.LEADER, F.lit(2))
    ctx.commit(kept)
    assert ctx.stamped
    assert ctx.partitions is not None
    dropped = with_previous(ctx.partitions, ctx.generation).where(F.col(s.PARTITION) != 0)
    ctx.commit(dropped)
    assert not ctx.stamped
    assert ctx.partitions is not None
    ctx.commit(widen(with_previous(ctx.partitions, ctx.generation), 4))
    assert not ctx.stamped  # another width
    assert ctx.partitions is not None
    ctx.commit(with_previous(ctx.partitions, ctx.generation - 1))
    assert not ctx.stamped  # rows carried from another generation
    assert ctx.partitions is not None
    ctx.commit(ctx.partitions)  # no previous rows at all
    assert not ctx.stamped


def test_a_stamped_commit_totals_its_diff_in_the_same_action(spark: SparkSession) -> None:
    ctx = ControllerContext(spark)
    ctx.add_topic("a", 3)

    def totals(diff: DataFrame) -> DataFrame:
        return diff.agg(F.count(F.lit(1)).alias("n"), F.sum(s.LEADER).alias("leaders"))

    def rows(df: DataFrame) -> list[tuple]:
        return sorted(tuple(r) for r in df.select(*diff_columns(3)).collect())

    ctx.commit(compact_frame(spark, _parts())[0], diff_totals=totals)
    assert ctx.diff is None and ctx.diff_totals is None  # nothing to diff against
    previous = ctx.partitions
    assert previous is not None
    moved = F.when(F.col(s.PARTITION) == 1, 3).otherwise(F.col(s.LEADER))
    ctx.commit(
        with_previous(previous, ctx.generation).withColumn(s.LEADER, moved), "", (), (), totals
    )
    assert ctx.stamped and ctx.diff is not None and ctx.diff_totals is not None
    assert ctx.partitions is not None
    assert rows(ctx.diff) == rows(generation_diff(previous, ctx.partitions))
    assert (ctx.diff_totals["n"], ctx.diff_totals["leaders"]) == (1, 3)
    dropped = with_previous(ctx.partitions, ctx.generation).where(F.col(s.PARTITION) != 0)
    ctx.commit(dropped, diff_totals=totals)
    assert not ctx.stamped and ctx.diff is None and ctx.diff_totals is None
