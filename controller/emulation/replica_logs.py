"""Where the replication table lives: a Spark DataFrame, or plain rows on the driver.

Both hold the table of ``statemachines.replication`` and give ``Replication`` the same verbs; a
cluster of at most ``driver_rows`` partitions keeps its rows on the driver and steps them with
``statemachines.replication_rows`` (the same rules, held equal to the Spark transforms by the
tests), so a small scenario runs no Spark job per step.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from controller.commit.checkpoint import local_checkpoint, release
from controller.emulation.replication_quotas import FetchGroup
from statemachines import fetch_shares as fs
from statemachines import isr_expiration as ie
from statemachines import isr_expiration_rows as isr_rows
from statemachines import leader_and_isr as lai
from statemachines import leader_and_isr_rows as lai_rows
from statemachines import replication as r
from statemachines import replication_rows as rows_rules
from statemachines import schemas as s
from statemachines.compact_rows import CompactRow
from statemachines.local_rows import local_frame
from statemachines.replica_states import ReplicaState

Stats = list[FetchGroup]  # the followers per broker, grouped by the throttles that count them
Written = list[tuple[int, int, list[int], int]]  # topic index, partition, ISR, znode version
RESULTS_SCHEMA = (
    "topic string, partition int, high_watermark bigint, log_end_offsets map<string,bigint>, "
    "acked_records_lost bigint, diverged boolean"
)


class ReplicaLogs(Protocol):
    """The verbs ``Replication`` steps the table with (see ``statemachines.replication``)."""

    def empty(self) -> bool: ...
    def advance(self, c: r.Conditions, end_ms: int) -> None: ...
    def fetch_stats(self, c: r.Conditions) -> Stats: ...
    def isr_updates(
        self, c: r.Conditions, rule: ie.IsrRule, ticking: frozenset[int], now_ms: int
    ) -> list[dict[str, Any]]: ...
    def with_isr(self, written: Written) -> None: ...
    def outlook(
        self,
        c: r.Conditions,
        rule: ie.IsrRule,
        checking: frozenset[int],
        starts: Mapping[int, int],
        checked_ms: int,
        down: frozenset[int],
    ) -> dict[str, Any]: ...
    def receive(
        self,
        source: DataFrame | Mapping[tuple[int, int], CompactRow],
        index: Mapping[int, int],
        restarted: frozenset[int],
        use_epochs: bool,
        now_ms: int,
        running: frozenset[int],
        reachable: frozenset[int],
    ) -> None: ...
    def append(
        self,
        topics: Sequence[int],
        partition: int | None,
        serving: frozenset[int],
        records: int,
        acks: str,
        c: r.Conditions,
    ) -> None: ...
    def lose_unflushed(self, brokers: Sequence[int]) -> None: ...
    def results(self, names: Mapping[int, str]) -> DataFrame: ...
    def loss_totals(self) -> tuple[int, int]: ...
    def produce_totals(self) -> tuple[int, int]: ...


class SparkLogs:
    """The table as a checkpointed DataFrame: one Spark job per verb that answers."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self.table: DataFrame | None = None

    def empty(self) -> bool:
        return self.table is None

    def _swap(self, table: DataFrame) -> None:
        old, self.table = self.table, local_checkpoint(table)
        release(old)

    def _current(self) -> DataFrame:
        assert self.table is not None
        return self.table

    def advance(self, c: r.Conditions, end_ms: int) -> None:
        self._swap(r.advance(self._current(), c, end_ms))

    def fetch_stats(self, c: r.Conditions) -> Stats:
        return [_group(x.asDict()) for x in fs.fetch_stats(self._current(), c).collect()]

    def isr_updates(
        self, c: r.Conditions, rule: ie.IsrRule, ticking: frozenset[int], now_ms: int
    ) -> list[dict[str, Any]]:
        found = ie.isr_updates(self._current(), c, rule, ticking, now_ms).collect()
        return [x.asDict() for x in found]

    def with_isr(self, written: Written) -> None:
        frame = local_frame(self.spark, written, WRITTEN_SCHEMA)
        self._swap(ie.with_isr(self._current(), frame))

    def outlook(
        self,
        c: r.Conditions,
        rule: ie.IsrRule,
        checking: frozenset[int],
        starts: Mapping[int, int],
        checked_ms: int,
        down: frozenset[int],
    ) -> dict[str, Any]:
        found = ie.outlook(self._current(), c, rule, checking, starts, checked_ms, down)
        return found.collect()[0].asDict()

    def receive(
        self,
        source: DataFrame | Mapping[tuple[int, int], CompactRow],
        index: Mapping[int, int],
        restarted: frozenset[int],
        use_epochs: bool,
        now_ms: int,
        running: frozenset[int],
        reachable: frozenset[int],
    ) -> None:
        assert isinstance(source, DataFrame)
        decided = decided_frame(source, index, reachable)
        table = self.table if self.table is not None else empty_frame(self.spark, s.width(decided))
        halves: list[DataFrame] = []

        def materialize(df: DataFrame) -> DataFrame:
            halves.append(local_checkpoint(df))
            return halves[-1]

        self._swap(lai.receive(table, decided, restarted, use_epochs, now_ms, running, materialize))
        for half in halves:
            release(half)

    def append(
        self,
        topics: Sequence[int],
        partition: int | None,
        serving: frozenset[int],
        records: int,
        acks: str,
        c: r.Conditions,
    ) -> None:
        where = F.col(s.TOPIC_INDEX).isin(list(topics)) if topics else F.lit(False)
        if partition is not None:
            where = where & (F.col(s.PARTITION) == partition)
        self._swap(lai.append(self._current(), where, serving, records, acks, r.min_isr_of(c)))

    def lose_unflushed(self, brokers: Sequence[int]) -> None:
        if self.table is not None:
            self._swap(lai.lose_unflushed(self.table, brokers))

    def results(self, names: Mapping[int, str]) -> DataFrame:
        table = self._current()
        w = s.width(table)
        named = self.spark.createDataFrame(
            [(i, n) for i, n in names.items()], f"{s.TOPIC_INDEX} int, {s.TOPIC} string"
        )
        entries = [
            F.struct(
                F.col(s.replica_col(k)).cast("string").alias("broker"),
                F.col(r.leo_col(k)).alias("leo"),
            )
            for k in range(w)
        ]
        leos = F.map_from_entries(
            F.filter(F.array(*entries), lambda x: x["broker"] != str(s.EMPTY_SLOT))
        )
        hw = r.leader_value(w, r.hw_col, F.lit(None).cast("bigint"))
        return table.join(F.broadcast(named), s.TOPIC_INDEX).select(
            s.TOPIC,
            s.PARTITION,
            hw.alias("high_watermark"),
            leos.alias("log_end_offsets"),
            F.col(r.LOST).alias("acked_records_lost"),
            lai.divergent(w).alias("diverged"),
        )

    def loss_totals(self) -> tuple[int, int]:
        if self.table is None:
            return 0, 0
        w = s.width(self.table)
        row = self.table.agg(
            F.sum(r.LOST).alias("lost"), F.sum(lai.divergent(w).cast("long")).alias("diverged")
        ).collect()[0]
        return int(row["lost"] or 0), int(row["diverged"] or 0)

    def produce_totals(self) -> tuple[int, int]:
        """Records refused with NOT_ENOUGH_REPLICAS and records no leader served."""
        if self.table is None:
            return 0, 0
        row = self.table.agg(F.sum(r.REFUSED).alias("a"), F.sum(r.UNSERVED).alias("b")).collect()
        return int(row[0]["a"] or 0), int(row[0]["b"] or 0)


class RowLogs:
    """The table as plain rows on the driver, stepped by ``statemachines.replication_rows``."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self.rows: list[dict[str, Any]] | None = None
        self.running: frozenset[int] | None = None  # the brokers running at the last receive

    def empty(self) -> bool:
        return self.rows is None

    def _current(self) -> list[dict[str, Any]]:
        assert self.rows is not None
        return self.rows

    def advance(self, c: r.Conditions, end_ms: int) -> None:
        self.rows = rows_rules.advance(self._current(), c, end_ms)

    def fetch_stats(self, c: r.Conditions) -> Stats:
        return [_group(x) for x in rows_rules.fetch_stats(self._current(), c)]

    def isr_updates(
        self, c: r.Conditions, rule: ie.IsrRule, ticking: frozenset[int], now_ms: int
    ) -> list[dict[str, Any]]:
        return isr_rows.isr_updates(self._current(), c, rule, ticking, now_ms)

    def with_isr(self, written: Written) -> None:
        self.rows = isr_rows.with_isr(self._current(), written)

    def outlook(
        self,
        c: r.Conditions,
        rule: ie.IsrRule,
        checking: frozenset[int],
        starts: Mapping[int, int],
        checked_ms: int,
        down: frozenset[int],
    ) -> dict[str, Any]:
        return isr_rows.outlook(self._current(), c, rule, checking, starts, checked_ms, down)

    def receive(
        self,
        source: DataFrame | Mapping[tuple[int, int], CompactRow],
        index: Mapping[int, int],
        restarted: frozenset[int],
        use_epochs: bool,
        now_ms: int,
        running: frozenset[int],
        reachable: frozenset[int],
    ) -> None:
        assert not isinstance(source, DataFrame)
        decided = decided_rows(source, index, reachable)
        settled = running == self.running
        self.rows = lai_rows.receive(
            self.rows or [], decided, restarted, use_epochs, now_ms, running, settled
        )
        self.running = running

    def append(
        self,
        topics: Sequence[int],
        partition: int | None,
        serving: frozenset[int],
        records: int,
        acks: str,
        c: r.Conditions,
    ) -> None:
        chosen = set(topics)

        def where(row: Mapping[str, Any]) -> bool:
            return row[s.TOPIC_INDEX] in chosen and (
                partition is None or row[s.PARTITION] == partition
            )

        def min_isr(row: Mapping[str, Any]) -> int:
            return max(c.min_isr.get(row[s.TOPIC_INDEX], 0), 1)

        self.rows = lai_rows.append(self._current(), where, serving, records, acks, min_isr)

    def lose_unflushed(self, brokers: Sequence[int]) -> None:
        if self.rows is not None:
            self.rows = lai_rows.lose_unflushed(self.rows, brokers)

    def results(self, names: Mapping[int, str]) -> DataFrame:
        found = lai_rows.partition_results(self._current(), dict(names))
        values = [
            (x["topic"], x["partition"], x["high_watermark"], x["log_end_offsets"],
             x["acked_records_lost"], x["diverged"])
            for x in found
        ]  # fmt: skip
        return self.spark.createDataFrame(values, RESULTS_SCHEMA)

    def loss_totals(self) -> tuple[int, int]:
        return lai_rows.loss_totals(self.rows or [])

    def produce_totals(self) -> tuple[int, int]:
        rows = self.rows or []
        return sum(x[r.REFUSED] for x in rows), sum(x[r.UNSERVED] for x in rows)


def _group(x: Mapping[str, Any]) -> FetchGroup:
    return FetchGroup(
        x[s.BROKER], x[fs.THROTTLED_LEADER], x[fs.THROTTLED_FOLLOWER], x[fs.HELD],
        x[fs.BROKER_DEMAND], x[fs.BROKER_BEHIND], x[fs.BROKER_FOLLOWED],
    )  # fmt: skip


WRITTEN_SCHEMA = (
    f"{s.TOPIC_INDEX} int, {s.PARTITION} int, {ie.NEW_ISR} array<int>, {s.ZK_VERSION} int"
)


# Replica states whose broker the controller sends LeaderAndIsr; the others were sent StopReplica
# (OfflineReplica, the deletion states: ``ReplicaStateMachine``, spec §6.3).
_FOLLOWING = (ReplicaState.NewReplica, ReplicaState.OnlineReplica)


def sent_epoch(broker: int, state: int, leader_epoch: int, reachable: frozenset[int]) -> int | None:
    """``lai.sent_epoch_col`` of one replica: the controller's requests reach only the brokers
    it holds live or shutting down (``ControllerChannelManager`` drops the others')."""
    if broker not in reachable:
        return None
    return leader_epoch if state in _FOLLOWING else r.STOPPED


def decided_frame(
    partitions: DataFrame, index: Mapping[int, int], reachable: frozenset[int]
) -> DataFrame:
    """The controller's committed rows in the replication layout, under our topic indices,
    with what each replica's broker was sent (``sent_epoch``)."""
    w = s.width(partitions)
    following = [int(x) for x in _FOLLOWING]
    sent = [
        F.when(
            r.member(F.col(s.replica_col(k)), reachable),
            F.when(F.col(s.replica_state_col(k)).isin(following), F.col(s.LEADER_EPOCH)).otherwise(
                F.lit(r.STOPPED)
            ),
        ).alias(lai.sent_epoch_col(k))
        for k in range(w)
    ]
    keys = sorted(index)
    mapping = (
        F.map_from_arrays(
            F.array(*[F.lit(k) for k in keys]), F.array(*[F.lit(index[k]) for k in keys])
        )
        if keys
        else F.create_map().cast("map<int,int>")
    )
    return partitions.select(
        F.element_at(mapping, F.col(s.TOPIC_INDEX)).alias(s.TOPIC_INDEX),
        s.PARTITION,
        *(s.replica_col(k) for k in range(w)),
        *(s.isr_col(k) for k in range(w)),
        s.LEADER,
        s.LEADER_EPOCH,
        s.ZK_VERSION,
        s.CONTROLLER_EPOCH,
        *sent,
    ).where(F.col(s.ZK_VERSION) != s.NO_ZK_VERSION)


def decided_rows(
    rows: Mapping[tuple[int, int], CompactRow],
    index: Mapping[int, int],
    reachable: frozenset[int],
) -> list[dict[str, Any]]:
    """``decided_frame`` over the controller's driver rows."""
    w = max((len(x.replicas) for x in rows.values()), default=1)
    out = []
    for (topic, partition), x in sorted(rows.items()):
        if not x.has_leadership:
            continue
        row: dict[str, Any] = {s.TOPIC_INDEX: index[topic], s.PARTITION: partition}
        for k in range(w):
            row[s.replica_col(k)] = x.replicas[k] if k < len(x.replicas) else s.EMPTY_SLOT
            row[s.isr_col(k)] = x.isr[k] if k < len(x.isr) else s.EMPTY_SLOT
        row.update(
            {
                s.LEADER: x.leader,
                s.LEADER_EPOCH: x.leader_epoch,
                s.ZK_VERSION: x.zk_version,
                s.CONTROLLER_EPOCH: x.controller_epoch,
            }
        )
        for k in range(w):
            row[lai.sent_epoch_col(k)] = (
                sent_epoch(x.replicas[k], x.replica_states[k], x.leader_epoch, reachable)
                if k < len(x.replicas)
                else None
            )
        out.append(row)
    return out


def empty_frame(spark: SparkSession, w: int) -> DataFrame:
    """A replication table with no rows (the first ``receive`` fills it)."""
    from statemachines.replication_epochs import EPOCHS_TYPE

    ints = {s.TOPIC_INDEX, s.PARTITION, s.LEADER, s.LEADER_EPOCH, s.ZK_VERSION}
    ints |= {s.CONTROLLER_EPOCH, r.LAST_LEADER}
    fields = []
    for c in r.columns(w):
        if c.startswith("epochs_") or c == r.ACKED_EPOCHS:
            kind = EPOCHS_TYPE.simpleString()
        elif c in ints or c.startswith(("replica_", "isr_")):
            kind = "int"
        else:
            kind = "bigint"
        fields.append(f"`{c}` {kind}")
    return spark.createDataFrame([], ", ".join(fields))
