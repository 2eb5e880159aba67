"""The valid-previous-state tables: as documented, and as the bulk transitions apply them (and
record them in the row's trail)."""

from __future__ import annotations

import itertools
import re

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from statemachines import partition_states, replica_states
from statemachines.brokers import BrokerSet, ClusterView
from statemachines.election import OfflinePartitionLeaderElectionStrategy
from statemachines.partition_states import VALID_PREVIOUS_STATES as P_TABLE
from statemachines.partition_states import PartitionState
from statemachines.reference import Partition
from statemachines.replica_states import VALID_PREVIOUS_STATES as R_TABLE
from statemachines.replica_states import ReplicaState
from statemachines.state_change_trail import TRAIL, decode
from tests.frames import compact_frame, read_back

# Spec §5.1 and §6.1 matrices (rows: from, columns: to), transcribed independently of the code.
PARTITION_MATRIX = {
    "NonExistentPartition": "✓✗✗✗",
    "NewPartition": "✗✓✓✗",
    "OnlinePartition": "✗✓✓✗",
    "OfflinePartition": "✗✓✓✓",
}
REPLICA_MATRIX = {
    "NonExistentReplica": "✓✗✗✗✗✗✗",
    "NewReplica": "✗✓✓✗✗✗✗",
    "OnlineReplica": "✗✓✓✗✗✗✗",
    "OfflineReplica": "✗✓✓✓✗✓✗",
    "ReplicaDeletionStarted": "✗✗✗✗✓✓✗",
    "ReplicaDeletionSuccessful": "✗✗✗✗✗✗✓",
    "ReplicaDeletionIneligible": "✗✓✓✗✗✗✗",
}


def _docstring_table(doc: str) -> dict[str, set[str]]:
    rows = {}
    for line in doc.splitlines():
        m = re.match(r"\|\s*(\w+)\s*\|\s*\d+\s*\|\s*([^|]+)\|", line)
        if m and m.group(1) not in ("Target",):
            rows[m.group(1)] = {x.strip() for x in m.group(2).split(",")}
    return rows


def test_state_codes_are_kafkas() -> None:
    assert {s.name: int(s) for s in PartitionState} == {
        "NewPartition": 0,
        "OnlinePartition": 1,
        "OfflinePartition": 2,
        "NonExistentPartition": 3,
    }
    assert [s.name for s in sorted(ReplicaState)] == [
        *list(REPLICA_MATRIX)[1:],
        "NonExistentReplica",
    ]
    assert int(ReplicaState.NewReplica) == 1 and int(ReplicaState.NonExistentReplica) == 7


def test_module_docstring_tables_match_the_data() -> None:
    for module, table in ((partition_states, P_TABLE), (replica_states, R_TABLE)):
        documented = _docstring_table(module.__doc__ or "")
        assert documented == {t.name: {s.name for s in prev} for t, prev in table.items()}


def test_tables_match_spec_matrices() -> None:
    for matrix, table, states in (
        (PARTITION_MATRIX, P_TABLE, list(PartitionState)),
        (REPLICA_MATRIX, R_TABLE, list(ReplicaState)),
    ):
        for src, marks in matrix.items():
            for target, mark in zip(states, marks, strict=True):
                assert (states[0].__class__[src] in table[target]) == (mark == "✓"), (src, target)


def test_every_partition_transition_pair(spark: SparkSession) -> None:
    """One table with a partition per (from, to) pair; each pair is applied and checked."""
    view = ClusterView(live=BrokerSet.of([1, 2]), controller_epoch=3)
    for target in PartitionState:
        parts = [
            Partition("t", int(src), (1, 2), isr=(1, 2), leader=1, state=src)
            for src in PartitionState
        ]
        df, topics = compact_frame(spark, parts)
        strategy = OfflinePartitionLeaderElectionStrategy()
        result = partition_states.handle_state_changes(df, F.lit(True), target, view, strategy)
        rows = result.outcomes.collect()
        after, _ = read_back(rows, topics, 2)
        trails = {r.partition: [decode(e) for e in r[TRAIL] or []] for r in rows}
        invalid = {r.partition: r for r in result.invalid.collect()}
        for src in PartitionState:
            p = after[("t", int(src))]
            if src in P_TABLE[target]:
                assert p.state == target, (src, target)
                assert int(src) not in invalid
                assert trails[int(src)] == [(None, int(src), int(target))]
            else:
                assert p.state == src, (src, target)
                assert trails[int(src)] == []
                row = invalid[int(src)]
                assert (row.current_state, row.target_state) == (src.name, target.name)
                assert set(row.valid_previous_states.split(",")) == {
                    s.name for s in P_TABLE[target]
                }


def test_every_replica_transition_pair(spark: SparkSession) -> None:
    """A partition per source state whose replica on broker 2 is in that state; all move at once."""
    for target in ReplicaState:
        parts = [
            Partition(
                "t", int(src), (1, 2), isr=(1,), leader=1, state=PartitionState.OnlinePartition
            )
            for src in ReplicaState
        ]
        states = {("t", int(src), 2): src for src in ReplicaState}
        states |= {("t", int(src), 1): ReplicaState.OnlineReplica for src in ReplicaState}
        df, topics = compact_frame(spark, parts, states)
        result = replica_states.handle_state_changes(df, BrokerSet.of([2]), target)
        rows = result.outcomes.collect()
        _, after = read_back(rows, topics, 2)
        trails = {r.partition: [decode(e) for e in r[TRAIL] or []] for r in rows}
        invalid = {r.partition: r for r in result.invalid.collect()}
        for src in ReplicaState:
            key = ("t", int(src), 2)
            if src in R_TABLE[target]:
                if target == ReplicaState.NonExistentReplica:
                    assert key not in after  # removed from the assignment
                else:
                    assert after[key] == target, (src, target)
                assert int(src) not in invalid
                assert trails[int(src)] == [(2, int(src), int(target))]
            else:
                assert after[key] == src, (src, target)
                assert trails[int(src)] == []
                row = invalid[int(src)]
                assert (row.broker, row.current_state, row.target_state) == (
                    2,
                    src.name,
                    target.name,
                )
            assert after[("t", int(src), 1)] == ReplicaState.OnlineReplica


def test_pairs_cover_the_whole_matrix() -> None:
    assert len(list(itertools.product(PartitionState, PartitionState))) == 16
    assert len(list(itertools.product(ReplicaState, ReplicaState))) == 49
