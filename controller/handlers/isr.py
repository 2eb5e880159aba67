"""ISR changes as bulk transforms (spec §12.4, §12.5): the leadership the leaders wrote to
ZooKeeper read back into the table, and AlterIsr requests checked and applied."""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from controller.handlers.tracked import tracked
from statemachines import schemas as s
from statemachines.columns import runtime_int

_KEY = [s.TOPIC_INDEX, s.PARTITION]
ALTER_ISR_SCHEMA = (
    f"{s.TOPIC_INDEX} int, {s.PARTITION} int, _sender int, _req_epoch int, _new_isr array<int>, "
    "_req_version int"
)
ISR_UPDATED = "isr_updated"
ALTER_ISR_ERROR = "_alter_isr_error"  # per requested partition: the reply's error code


def _with_isr(isr: Column, w: int) -> dict[str, Column]:
    """ISR slot columns from an array<int> Column (empty slots padded)."""
    return {s.isr_col(k): F.coalesce(F.get(isr, k), F.lit(s.EMPTY_SLOT)) for k in range(w)}


def with_zk_leadership(table: DataFrame, states: DataFrame) -> DataFrame:
    """``table``'s rows with the leadership ``states`` (partition-state znodes, keyed by topic
    index) hold in place of theirs, and ``isr_updated`` where a znode was read."""
    fresh = states.select(
        *_KEY,
        *(F.col(c).alias(f"_zk_{c}") for c in (s.LEADER, s.LEADER_EPOCH, s.ISR)),
        F.col(s.CONTROLLER_EPOCH).alias(f"_zk_{s.CONTROLLER_EPOCH}"),
        F.col(s.ZK_VERSION).alias(f"_zk_{s.ZK_VERSION}"),
    )
    w = s.width(table)
    joined = table.join(F.broadcast(fresh), _KEY)
    hit = F.col(f"_zk_{s.ZK_VERSION}").isNotNull()

    def take(c: str) -> Any:
        return F.when(hit, F.col(f"_zk_{c}")).otherwise(F.col(c))

    isr = _with_isr(F.col(f"_zk_{s.ISR}"), w)
    updates = {c: take(c) for c in (s.LEADER, s.LEADER_EPOCH, s.CONTROLLER_EPOCH, s.ZK_VERSION)}
    updates |= {c: F.when(hit, v).otherwise(F.col(c)) for c, v in isr.items()}
    return joined.select(
        *[updates.get(c, F.col(c)).alias(c) for c in s.compact_columns(w)],
        *tracked(joined),
        hit.cast("int").alias(ISR_UPDATED),
    )


def alter_isr(
    table: DataFrame, requests: DataFrame, controller_epoch: int, small: bool = True
) -> DataFrame:
    """AlterIsr items (``ALTER_ISR_SCHEMA``, one row per partition, ``_sender`` the leader)
    checked against ``table``'s rows of those partitions and applied where Kafka accepts them:
    ``isr_updated`` and the reply's error code (``ALTER_ISR_ERROR``) per row. A write carries
    the writer's ``controller_epoch``, as every state-znode write of the controller does.
    ``small``: the items are few enough to broadcast (else they are joined by a shuffle)."""
    requests = requests.withColumn("_req", F.lit(True))
    w = s.width(table)
    # The requested rows: a partial commit.
    joined = table.join(F.broadcast(requests) if small else requests, _KEY)
    req = F.coalesce(F.col("_req"), F.lit(False))
    current = F.array_compact(
        F.array(
            *[F.when(F.col(s.isr_col(k)) != s.EMPTY_SLOT, F.col(s.isr_col(k))) for k in range(w)]
        )
    )
    same = (
        (F.col(s.LEADER) == F.col("_sender"))
        & (F.col(s.LEADER_EPOCH) == F.col("_req_epoch"))
        & (current == F.col("_new_isr"))
    )
    error = (
        F.when(~req, F.lit(None))
        .when(F.col(s.ZK_VERSION) == s.NO_ZK_VERSION, "UNKNOWN_TOPIC_OR_PARTITION")
        .when(F.col("_req_epoch") < F.col(s.LEADER_EPOCH), "FENCED_LEADER_EPOCH")
        .when(same, "NONE")
        .when(F.col("_req_version") != F.col(s.ZK_VERSION), "INVALID_UPDATE_VERSION")
        .otherwise("NONE")
    )
    joined = joined.withColumn(ALTER_ISR_ERROR, error)
    write = req & (F.col(ALTER_ISR_ERROR) == "NONE") & ~same
    updates = {
        c: F.when(write, v).otherwise(F.col(c)) for c, v in _with_isr(F.col("_new_isr"), w).items()
    }
    updates[s.LEADER] = F.when(write, F.col("_sender")).otherwise(F.col(s.LEADER))
    # Kafka writes the request's LeaderAndIsr: its leader epoch too (never below the cached).
    updates[s.LEADER_EPOCH] = F.when(write, F.col("_req_epoch")).otherwise(F.col(s.LEADER_EPOCH))
    updates[s.CONTROLLER_EPOCH] = F.when(write, runtime_int(controller_epoch)).otherwise(
        F.col(s.CONTROLLER_EPOCH)
    )
    updates[s.ZK_VERSION] = F.col(s.ZK_VERSION) + write.cast("int")
    return joined.select(
        *[updates.get(c, F.col(c)).alias(c) for c in s.compact_columns(w)],
        *tracked(joined),
        write.cast("int").alias(ISR_UPDATED),
        ALTER_ISR_ERROR,
    )
