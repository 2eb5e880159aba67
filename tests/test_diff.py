"""The generation diff keeps exactly the changed, created and deleted rows, old beside new."""

from __future__ import annotations

from dataclasses import replace

from pyspark.sql import SparkSession

from controller.diff import diff_columns, generation_diff, prev
from statemachines import schemas as s
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
