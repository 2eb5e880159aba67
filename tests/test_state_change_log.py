"""The state-change log of an event in Kafka's line formats (spec §16.2), and its storage.

The events are those of ``test_requests`` (broker failure, controlled shutdown, creation,
reassignment, deletion start); lines are compared as full strings in log order.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from controller.commit.state_change_log import LINE_COLUMNS, state_change_lines
from controller.commit.state_change_store import StateChangeLog, log4j_time
from statemachines import schemas as s
from statemachines.partition_states import PartitionState
from statemachines.reference import Partition
from statemachines.replica_states import ReplicaState
from statemachines.state_change_trail import (
    batch_number,
    batch_of,
    broker_of,
    decode,
    encode,
    from_of,
    to_of,
)
from tests.frames import compact_frame
from tests.test_requests import (
    Event,
    broker_failure,
    controlled_shutdown,
    deletion_start,
    event_of,
    reassignment,
    topic_creation,
)

ME = "[Controller id=3 epoch=1] "
Line = tuple[str, int, int | None, str, str]  # topic, partition, broker, level, line


def lines_of(event: Event) -> list[Line]:
    lines = state_change_lines(event.diff, event.topics, controller_id=3, epoch=1)
    ordered = lines.orderBy(
        s.TOPIC, s.PARTITION, F.col(s.BROKER).asc_nulls_first(), "step"
    ).collect()
    return [(r.topic, r.partition, r.broker, r.level, r.line) for r in ordered]


def _removal(tp: str, record: str, r: int) -> str:
    return (
        f"{ME}Partition {tp} state changed to {record} after removing replica {r} "
        "from the ISR as part of transition to OfflineReplica"
    )


def _replica(tp: str, r: int, a: str, b: str) -> str:
    return f"{ME}Changed state of replica {r} for partition {tp} from {a} to {b}"


def test_broker_failure_offline_then_elected_and_isr_removals(spark: SparkSession) -> None:
    # a-0's leader died: Online → Offline → Online (the previous leader's replica went
    # Offline in the same event); a-1 and a-2 only lose replica 1 from their ISR.
    def removed(p: int, record: str) -> list[Line]:
        tp = f"a-{p}"
        return [
            ("a", p, 1, "INFO", _removal(tp, record, 1)),
            ("a", p, 1, "TRACE", _replica(tp, 1, "OnlineReplica", "OfflineReplica")),
        ]

    assert lines_of(broker_failure(spark)) == [
        (
            "a",
            0,
            None,
            "TRACE",
            f"{ME}Changed partition a-0 state from OnlinePartition to OfflinePartition",
        ),
        (
            "a",
            0,
            None,
            "INFO",
            f"{ME}Changed partition a-0 from OfflinePartition to OnlinePartition with state "
            "LeaderAndIsr(leader=2, leaderEpoch=1, isr=List(2, 3), zkVersion=1)",
        ),
        *removed(0, "(Leader:2,ISR:2,3,LeaderEpoch:1,ZkVersion:1,ControllerEpoch:1)"),
        *removed(1, "(Leader:2,ISR:2,3,LeaderEpoch:1,ZkVersion:1,ControllerEpoch:1)"),
        *removed(2, "(Leader:3,ISR:3,LeaderEpoch:1,ZkVersion:1,ControllerEpoch:1)"),
    ]


def test_controlled_shutdown_election_stays_online(spark: SparkSession) -> None:
    lines = lines_of(controlled_shutdown(spark))
    partition_lines = [(t, p, level, text) for t, p, b, level, text in lines if b is None]
    assert partition_lines == [
        (
            "a",
            0,
            "INFO",
            f"{ME}Changed partition a-0 from OnlinePartition to OnlinePartition with state "
            "LeaderAndIsr(leader=2, leaderEpoch=1, isr=List(2, 3), zkVersion=1)",
        )
    ]
    # The epoch bumps of a-1, a-2 (ISR removals) log the removal, not a partition transition.
    assert [(p, b, level) for _, p, b, level, _ in lines if b is not None] == [
        (1, 1, "INFO"),
        (1, 1, "TRACE"),
        (2, 1, "INFO"),
        (2, 1, "TRACE"),
    ]


def test_topic_creation_logs_new_then_online_for_partitions_and_replicas(
    spark: SparkSession,
) -> None:
    lines = lines_of(topic_creation(spark))
    assert len(lines) == 15
    created = [
        f"{ME}Changed partition t-0 state from NonExistentPartition to NewPartition "
        "with assigned replicas 1,2",
        f"{ME}Changed partition t-0 from NewPartition to OnlinePartition with state "
        "LeaderAndIsr(leader=1, leaderEpoch=0, isr=List(1, 2), zkVersion=0)",
        _replica("t-0", 1, "NonExistentReplica", "NewReplica"),
        _replica("t-0", 1, "NewReplica", "OnlineReplica"),
        _replica("t-0", 2, "NonExistentReplica", "NewReplica"),
        _replica("t-0", 2, "NewReplica", "OnlineReplica"),
    ]
    assert [text for t, p, *_, text in lines if p == 0] == created
    assert [level for t, p, _, level, _ in lines if p == 0] == ["INFO", "INFO", *["TRACE"] * 4]
    # No live replica: the partition stays New; its replica is still marked Online (§9.1).
    assert [text for t, p, *_, text in lines if p == 2] == [
        f"{ME}Changed partition t-2 state from NonExistentPartition to NewPartition "
        "with assigned replicas 3",
        _replica("t-2", 3, "NonExistentReplica", "NewReplica"),
        _replica("t-2", 3, "NewReplica", "OnlineReplica"),
    ]


def test_reassignment_phases(spark: SparkSession) -> None:
    phase_a, phase_b = reassignment(spark)
    # The A1 epoch bump is no partition transition; A2 makes 3 a NewReplica.
    assert lines_of(phase_a) == [
        ("r", 0, 3, "TRACE", _replica("r-0", 3, "NonExistentReplica", "NewReplica"))
    ]
    record = "(Leader:2,ISR:2,3,LeaderEpoch:3,ZkVersion:4,ControllerEpoch:1)"
    assert lines_of(phase_b) == [
        (
            "r",
            0,
            None,
            "INFO",
            f"{ME}Changed partition r-0 from OnlinePartition to OnlinePartition with state "
            "LeaderAndIsr(leader=2, leaderEpoch=3, isr=List(2, 3), zkVersion=4)",
        ),
        ("r", 0, 1, "INFO", _removal("r-0", record, 1)),
        ("r", 0, 1, "TRACE", _replica("r-0", 1, "OnlineReplica", "OfflineReplica")),
        ("r", 0, 1, "TRACE", _replica("r-0", 1, "OfflineReplica", "ReplicaDeletionStarted")),
        (
            "r",
            0,
            1,
            "TRACE",
            _replica("r-0", 1, "ReplicaDeletionStarted", "ReplicaDeletionSuccessful"),
        ),
        (
            "r",
            0,
            1,
            "TRACE",
            _replica("r-0", 1, "ReplicaDeletionSuccessful", "NonExistentReplica"),
        ),
        ("r", 0, 3, "TRACE", _replica("r-0", 3, "NewReplica", "OnlineReplica")),
    ]


def test_deletion_start(spark: SparkSession) -> None:
    record = "(Leader:-1,ISR:3,LeaderEpoch:3,ZkVersion:3,ControllerEpoch:1)"

    def started(r: int) -> list[Line]:
        return [
            ("d", 0, r, "INFO", _removal("d-0", record, r)),
            ("d", 0, r, "TRACE", _replica("d-0", r, "OnlineReplica", "OfflineReplica")),
            ("d", 0, r, "TRACE", _replica("d-0", r, "OfflineReplica", "ReplicaDeletionStarted")),
        ]

    assert lines_of(deletion_start(spark)) == [
        (
            "d",
            0,
            None,
            "TRACE",
            f"{ME}Changed partition d-0 state from OnlinePartition to OfflinePartition",
        ),
        (
            "d",
            0,
            None,
            "TRACE",
            f"{ME}Changed partition d-0 state from OfflinePartition to NonExistentPartition",
        ),
        *started(1),
        (
            "d",
            0,
            2,
            "TRACE",
            _replica("d-0", 2, "OfflineReplica", "ReplicaDeletionIneligible"),
        ),
        *started(3),
    ]


def test_isr_expansion_logs_nothing(spark: SparkSession) -> None:
    # The leader adds a follower to the ISR: only the ISR and zkVersion change.
    p = Partition("x", 0, (1, 2), (1,), leader=1, controller_epoch=1)
    before, topics = compact_frame(spark, [p])
    after, _ = compact_frame(spark, [replace(p, isr=(1, 2), zk_version=1)])
    assert lines_of(event_of(spark, before, after, topics, [1, 2])) == []


def test_trail_entries_round_trip() -> None:
    _P, _R = PartitionState, ReplicaState
    for broker, a, b in [
        (None, _P.OfflinePartition, _P.NonExistentPartition),
        (None, _P.NonExistentPartition, _P.NewPartition),
        (0, _R.NonExistentReplica, _R.NewReplica),
        (2_000_000, _R.ReplicaDeletionSuccessful, _R.NonExistentReplica),
    ]:
        for batch in (0, 1, 65, 1 << 20):
            entry = encode(broker, int(a), int(b), batch)
            assert decode(entry) == (broker, int(a), int(b))
            assert batch_number(entry) == batch
    assert encode(None, 3, 3) < 256 <= encode(0, 1, 1)


def test_trail_entries_read_as_columns(spark: SparkSession) -> None:
    # The Column readers agree with the Python ones, the batch in the high bits included.
    entries = [encode(b, 2, 5, n) for b in (None, 0, 7, 2_000_000) for n in (0, 3, 1 << 20)]
    df = spark.createDataFrame([(e,) for e in entries], "e long")
    e = F.col("e")
    rows = df.select(broker_of(e), from_of(e), to_of(e), batch_of(e)).collect()
    expected = [
        (-1 if b is None else b, a, z, batch_number(x))
        for x, (b, a, z) in zip(entries, map(decode, entries), strict=True)
    ]
    assert [tuple(r) for r in rows] == expected


def test_log4j_time_is_utc_with_milliseconds() -> None:
    assert log4j_time(1_700_000_000_123) == "2023-11-14 22:13:20,123"
    assert log4j_time(5) == "1970-01-01 00:00:00,005"


def _lines_frame(spark: SparkSession, rows: list[tuple]) -> DataFrame:
    schema = (
        "topic string, partition int, broker int, level string, line string, step int, "
        "exception string"
    )
    return spark.createDataFrame([(*r, None)[:7] for r in rows], schema).select(*LINE_COLUMNS)


@pytest.mark.parametrize("text", [True, False])
def test_append_stores_parquet_per_event_and_optionally_text(
    spark: SparkSession, tmp_path: Path, text: bool
) -> None:
    log = StateChangeLog(tmp_path, text=text)
    first = _lines_frame(
        spark,
        [
            ("b", 0, 2, "TRACE", f"{ME}replica line", 1),
            ("b", 0, 2, "ERROR", f"{ME}replica failed", 1000, "E: why"),
            ("b", 0, None, "INFO", f"{ME}partition line", 0),
            ("a", 1, None, "TRACE", f"{ME}other partition", 0),
        ],
    )
    assert log.append(first, event_index=0, virtual_time_ms=1_700_000_000_123) == 4
    empty = _lines_frame(spark, [])
    assert log.append(empty, event_index=1, virtual_time_ms=1_700_000_001_000) == 0
    second = _lines_frame(spark, [("a", 0, 1, "TRACE", f"{ME}later", 1)])
    assert log.append(second, event_index=2, virtual_time_ms=1_700_000_002_000) == 1

    assert not log.event_dir(1).exists()
    stored = spark.read.parquet(str(log.parquet_dir))
    got = sorted((r.event, r.topic, r.partition, r.line) for r in stored.collect())
    assert got == [
        (0, "a", 1, f"{ME}other partition"),
        (0, "b", 0, f"{ME}partition line"),
        (0, "b", 0, f"{ME}replica failed"),
        (0, "b", 0, f"{ME}replica line"),
        (2, "a", 0, f"{ME}later"),
    ]
    if not text:
        assert not log.text_path.exists()
        return
    assert log.text_path.read_text().splitlines() == [
        f"[2023-11-14 22:13:20,123] TRACE {ME}other partition (state.change.logger)",
        f"[2023-11-14 22:13:20,123] INFO {ME}partition line (state.change.logger)",
        f"[2023-11-14 22:13:20,123] TRACE {ME}replica line (state.change.logger)",
        # log4j prints an ERROR's throwable below its line
        f"[2023-11-14 22:13:20,123] ERROR {ME}replica failed (state.change.logger)",
        "E: why",
        f"[2023-11-14 22:13:22,000] TRACE {ME}later (state.change.logger)",
    ]


def test_append_overwrites_a_rewritten_event(spark: SparkSession, tmp_path: Path) -> None:
    log = StateChangeLog(tmp_path, text=False)
    log.append(_lines_frame(spark, [("a", 0, None, "INFO", "x", 0)] * 2), 4, 0)
    assert log.append(_lines_frame(spark, [("a", 0, None, "INFO", "y", 0)]), 4, 0) == 1
    assert [r.line for r in spark.read.parquet(str(log.event_dir(4))).collect()] == ["y"]
