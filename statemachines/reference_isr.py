"""The oracle for ISR changes (spec §12.4, §12.5): the cache reloaded from ZooKeeper, and
AlterIsr requests checked and applied, one partition at a time."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from statemachines.reference import Partition

Key = tuple[str, int]
# (leader epoch, new ISR, current ISR version) of one partition in an AlterIsr request.
AlterIsrItem = tuple[int, tuple[int, ...], int]
# (leader, leader epoch, ISR, controller epoch, znode version) as a state znode holds them.
ZkLeadership = tuple[int, int, tuple[int, ...], int, int]


def update_leader_and_isr_cache(
    partitions: Mapping[Key, Partition], states: Mapping[Key, ZkLeadership]
) -> dict[Key, Partition]:
    """§12.4: the partitions with the leadership ``states`` hold in place of theirs (a
    partition the controller does not know is skipped)."""
    out = dict(partitions)
    for k, (leader, epoch, isr, controller_epoch, version) in states.items():
        if k in out:
            out[k] = replace(
                out[k],
                leader=leader,
                leader_epoch=epoch,
                isr=tuple(isr),
                controller_epoch=controller_epoch,
                zk_version=version,
            )
    return out


def alter_isr(
    partitions: Mapping[Key, Partition],
    broker: int,
    items: Mapping[Key, AlterIsrItem],
    controller_epoch: int,
) -> tuple[dict[Key, Partition], dict[Key, str]]:
    """§12.5 step 2 for the items of an AlterIsr request from ``broker`` that passed the
    request-level checks: the partitions after it, and each item's error name.

    An accepted change writes (leader = sender, the request's leader epoch, the new ISR) at the
    next znode version, with the controller's epoch (``updateLeaderAndIsr`` writes every
    LeaderAndIsr with it). An unchanged one is answered without a write.
    """
    out = dict(partitions)
    errors: dict[Key, str] = {}
    for k, (epoch, new_isr, version) in items.items():
        p = out.get(k)
        if p is None or not p.has_leadership:
            errors[k] = "UNKNOWN_TOPIC_OR_PARTITION"
        elif epoch < p.leader_epoch:
            errors[k] = "FENCED_LEADER_EPOCH"
        elif (p.leader, p.leader_epoch, p.isr) == (broker, epoch, tuple(new_isr)):
            errors[k] = "NONE"
        elif version != p.zk_version:
            errors[k] = "INVALID_UPDATE_VERSION"
        else:
            errors[k] = "NONE"
            out[k] = replace(
                p, leader=broker, leader_epoch=epoch, isr=tuple(new_isr),
                controller_epoch=controller_epoch, zk_version=version + 1,
            )  # fmt: skip
    return out, errors
