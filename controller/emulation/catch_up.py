"""Lagging followers catching up: the state each partition's leader proposes once its
followers outside the ISR have caught up (the ISR with them appended, in replica order).

Read off the driver's rows for a table the driver holds, or as a frame over the Spark table,
whose rows an emulated leader sends as one ``AlterIsrFrame`` instead of Python items.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from controller.commit.gauges import lagging_positions
from controller.context import ControllerContext
from statemachines import schemas as s
from statemachines.columns import has_leadership
from statemachines.replica_states import ReplicaState

_FOLLOWING = (ReplicaState.NewReplica, ReplicaState.OnlineReplica)
Rejoining = tuple[str, int, int, int, list[int], int, int]


def rejoining(ctx: ControllerContext) -> list[Rejoining]:
    """The new state of each partition with lagging followers, off the driver's rows: topic,
    partition, leader, leader epoch, the ISR with them appended (``gauges.lagging_positions``),
    controller epoch, zk version."""
    assert ctx.table.driver is not None
    view = ctx.view()
    names = {t.index: t.name for t in ctx.topics.values()}
    out: list[Rejoining] = []
    for (index, partition), r in sorted(ctx.table.driver.items()):
        joining = [
            b
            for b, st in zip(r.replicas, r.replica_states, strict=True)
            if b in view.live.ids and b != r.leader and st in _FOLLOWING and b not in r.isr
        ]
        if r.has_leadership and r.leader in view.live_or_shutting_down.ids and joining:
            isr = [*r.isr, *joining]
            out.append((names[index], partition, r.leader, r.leader_epoch, isr,
                        r.controller_epoch, r.zk_version))  # fmt: skip
    return out


def rejoining_frame(ctx: ControllerContext) -> DataFrame:
    """``rejoining`` over the Spark table (the same columns)."""
    table, view = ctx.partitions, ctx.view()
    assert table is not None
    w = s.width(table)
    lagging = lagging_positions(w, view)
    isr = F.array_compact(
        F.array(
            *[F.when(F.col(s.isr_col(k)) != s.EMPTY_SLOT, F.col(s.isr_col(k))) for k in range(w)]
        )
    )
    joining = F.array_compact(
        F.array(*[F.when(lag, F.col(s.replica_col(k))) for k, lag in enumerate(lagging)])
    )
    leader_live = view.live_or_shutting_down.contains(F.col(s.LEADER))
    return (
        table.where(has_leadership() & leader_live & (F.size(joining) > 0))
        .join(F.broadcast(ctx.topics_frame()), s.TOPIC_INDEX)
        .select(
            s.TOPIC,
            s.PARTITION,
            s.LEADER,
            s.LEADER_EPOCH,
            F.concat(isr, joining).alias(s.ISR),
            s.CONTROLLER_EPOCH,
            s.ZK_VERSION,
        )
    )
