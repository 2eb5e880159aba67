"""Kafka's broker request batches of one event (spec §15.1), counted by the plain-Python rules.

The twin of ``controller.commit.requests``: the same table of which trail entry adds which
request to its batch, over the event's changed rows as plain values. A row is the new and the
previous values of one partition (``ChangedRow``), with the trail its event left; a partition
the event removed (a completed deletion) sends nothing. Tests hold the Spark path to it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass

from statemachines import state_change_trail as t
from statemachines.partition_states import PartitionState
from statemachines.replica_states import ReplicaState

LEADER_AND_ISR = "LeaderAndIsr"
UPDATE_METADATA = "UpdateMetadata"
STOP_REPLICA = "StopReplica"

_R = ReplicaState
_STOPPED = {
    _R.OfflineReplica,
    _R.ReplicaDeletionStarted,
    _R.ReplicaDeletionSuccessful,
    _R.ReplicaDeletionIneligible,
}
# The batch of the UpdateMetadata of a leadership record no state machine changed.
CONTROLLER_BATCH = 0


@dataclass(frozen=True)
class Leadership:
    """A partition's leadership record (None values: no row on that side; a ``zk_version`` of
    -1: no state znode)."""

    leader: int | None
    leader_epoch: int | None
    zk_version: int | None
    isr: tuple[int, ...]

    @property
    def exists(self) -> bool:
        return self.zk_version is not None and self.zk_version >= 0


@dataclass(frozen=True)
class ChangedRow:
    """One partition the event changed: its key, its replicas (in assignment order) with their
    states after the event, its leadership after and before, and the event's trail (for a
    partition the event removed, ``controller.commit.transitions.event_trail``'s)."""

    topic_index: int
    partition: int
    replicas: tuple[tuple[int, ReplicaState], ...]
    now: Leadership
    before: Leadership
    trail: tuple[int, ...] = ()
    removed: bool = False


@dataclass(frozen=True)
class _Batch:
    """What one batch did to a row (the fields of ``requests._Steps``' structs)."""

    init: bool
    elected: bool
    metadata_only: bool
    offline: tuple[int, ...]
    returned: tuple[int, ...]
    started: tuple[int, ...]


def _returned(start: int, end: int) -> bool:
    """Replica transitions that send LeaderAndIsr when the partition has leadership (§6.3)."""
    back = end == _R.OnlineReplica and start in (_R.OfflineReplica, _R.ReplicaDeletionIneligible)
    return back or (start == _R.NonExistentReplica and end == _R.NewReplica)


def _batches(row: ChangedRow, deleting: bool) -> dict[int, _Batch]:
    had, has = row.before.exists, row.now.exists
    entries = [(t.batch_number(e), *t.decode(e)) for e in row.trail]
    online, bump = int(PartitionState.OnlinePartition), t.LEADER_EPOCH_BUMP
    explained = any(
        (unit is None and end in (online, bump)) or (unit is not None and end == _R.OfflineReplica)
        for _, unit, _, end in entries
    )
    isr_changed = has and had and not deleting and row.before != row.now and not explained
    deletion = [
        b
        for b, unit, _, end in entries
        if (unit is not None and end == _R.ReplicaDeletionStarted)
        or (unit is None and end == PartitionState.NonExistentPartition)
    ]
    broadcast = max(deletion) if deleting and has and deletion else None
    numbers = dict.fromkeys([b for b, *_ in entries] + ([CONTROLLER_BATCH] if isr_changed else []))
    out = {}
    for number in numbers:
        mine = [(unit, start, end) for b, unit, start, end in entries if b == number]
        initialised = any(unit is None and end == online for unit, _, end in mine)

        def brokers(test: Callable[[int, int], bool], mine: list = mine) -> tuple[int, ...]:
            return tuple(u for u, a, z in mine if u is not None and test(a, z))

        out[number] = _Batch(
            init=initialised and not had,
            elected=((initialised and had) or any(u is None and e == bump for u, _, e in mine))
            and not deleting,
            metadata_only=(isr_changed and number == CONTROLLER_BATCH) or broadcast == number,
            offline=brokers(lambda _s, e: e == _R.OfflineReplica),
            returned=brokers(_returned),
            started=brokers(lambda _s, e: e == _R.ReplicaDeletionStarted),
        )
    return out


def request_totals(
    rows: Iterable[ChangedRow],
    live_or_shutting_down: Collection[int],
    deleting_topics: Sequence[int] = (),
) -> dict[str, int]:
    """The event's requests, keyed as ``controller.commit.requests.request_totals``."""
    live = set(live_or_shutting_down)
    lair: Counter[tuple[int, int]] = Counter()
    stop: Counter[tuple[int, int]] = Counter()
    metadata: Counter[int] = Counter()
    deletes = 0
    for row in rows:
        if row.removed:
            continue  # completeDeleteTopic's transitions send nothing
        had, has = row.before.exists, row.now.exists
        deleting = row.topic_index in deleting_topics
        for number, batch in _batches(row, deleting).items():
            removal = bool(batch.offline) and has and not deleting
            came_back = has and had and bool(batch.returned)
            for broker, state in row.replicas:
                unstopped = state not in _STOPPED
                wanted = (
                    (batch.init and broker in row.now.isr)
                    or ((batch.elected or removal) and unstopped and broker not in batch.offline)
                    or (came_back and broker in batch.returned)
                )
                if wanted and broker in live:
                    lair[(number, broker)] += 1
            if (
                has and (batch.init or batch.elected or removal or came_back)
            ) or batch.metadata_only:
                metadata[number] += 1
            for broker in batch.offline + batch.started:
                if broker in live:
                    stop[(number, broker)] += 1
            deletes += sum(1 for broker in batch.started if broker in live)
    n = len(live) if live else 0
    return {
        LEADER_AND_ISR: len(lair),
        f"{LEADER_AND_ISR}_partitions": sum(lair.values()),
        UPDATE_METADATA: len(metadata) * n,
        f"{UPDATE_METADATA}_partitions": sum(metadata.values()) * n,
        STOP_REPLICA: len(stop),
        f"{STOP_REPLICA}_partitions": sum(stop.values()),
        f"{STOP_REPLICA}_deletes": deletes,
    }
