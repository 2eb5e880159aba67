"""AlterIsr requests (spec §12.5) over ``CompactRow`` values: the twin of
``controller.handlers.isr.alter_isr``."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from controller.handlers.isr import ALTER_ISR_ERROR, ISR_UPDATED
from controller.row_handlers.event_rows import EventRows
from statemachines import schemas as s

# A partition-state znode as read: leader, leader epoch, ISR, controller epoch, zk version.
ZkLeadership = tuple[int, int, list[int], int, int]
# (topic_index, partition, sender, leader epoch, new ISR, ISR version): ``ALTER_ISR_SCHEMA``.
AlterIsrItem = tuple[int, int, int, int, list[int], int]


def alter_isr(step: EventRows, items: Iterable[AlterIsrItem], controller_epoch: int) -> None:
    """Check each item against its row and apply it where Kafka accepts it: ``isr_updated``
    and the reply's error code (kept as ``ALTER_ISR_ERROR``) per row."""
    errors: dict[tuple[int, int], object] = {}
    updated = []
    for topic_index, partition, sender, epoch, new_isr, version in items:
        key = (topic_index, partition)
        row = step.rows.get(key)
        if row is None:
            continue
        same = row.leader == sender and row.leader_epoch == epoch and list(row.isr) == new_isr
        if row.zk_version == s.NO_ZK_VERSION:
            errors[key] = "UNKNOWN_TOPIC_OR_PARTITION"
        elif epoch < row.leader_epoch:
            errors[key] = "FENCED_LEADER_EPOCH"
        elif same:
            errors[key] = "NONE"
        elif version != row.zk_version:
            errors[key] = "INVALID_UPDATE_VERSION"
        else:
            errors[key] = "NONE"
            step.rows[key] = replace(
                row, isr=tuple(new_isr), leader=sender, leader_epoch=epoch,
                controller_epoch=controller_epoch, zk_version=row.zk_version + 1,
            )  # fmt: skip
            updated.append(key)
    step.count(ISR_UPDATED, updated)
    step.keep(ALTER_ISR_ERROR, errors)


def with_zk_leadership(step: EventRows, states: dict[tuple[int, int], ZkLeadership]) -> None:
    """The rows' leadership replaced by what their state znodes hold (``states``), and
    ``isr_updated`` where one was read (``handlers.isr.with_zk_leadership``)."""
    read = []
    for key, (leader, epoch, isr, controller_epoch, version) in sorted(states.items()):
        row = step.rows.get(key)
        if row is None:
            continue
        step.rows[key] = replace(
            row, leader=leader, leader_epoch=epoch, isr=tuple(isr),
            controller_epoch=controller_epoch, zk_version=version,
        )  # fmt: skip
        read.append(key)
    step.count(ISR_UPDATED, read)
