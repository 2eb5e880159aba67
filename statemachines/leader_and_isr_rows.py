"""What the brokers do with the controller's decisions and with their own logs, over plain rows:
``statemachines.leader_and_isr`` value for value, plus the per-partition results the emulation
reports (``Replication.partition_results`` and ``loss_totals``).

Rows as in ``replication_rows``; ``decided`` rows hold the controller's columns in the
replication layout (key, replica_k, isr_k, leader, leader_epoch, zk_version, controller_epoch).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from statemachines import reference_replication as ref
from statemachines import replication as r
from statemachines import schemas as s
from statemachines.leader_and_isr import ACKS_ALL, ACKS_LEADER, sent_epoch_col
from statemachines.replication_rows import (
    Lineage,
    Row,
    acked_lineage,
    assigned,
    fresh,
    in_isr,
    is_follower,
    is_leader,
    isr_size,
    leader_value,
    least,
    maybe_increment_hw,
    truncated,
    width,
)

KEY = (s.TOPIC_INDEX, s.PARTITION)
_DECIDED = (s.LEADER, s.LEADER_EPOCH, s.ZK_VERSION, s.CONTROLLER_EPOCH)


def agreement(a: Lineage | None, a_leo: int | None, b: Lineage | None, b_leo: int | None) -> Any:
    """The offset up to which two logs hold the same records: the least of both ends and of the
    starts of the first run where their lineages differ (null parts skipped, as Spark's
    ``least``). A missing lineage compares nothing (Spark's ``arrays_zip`` of a null is null)."""
    ends = [a_leo, b_leo]
    if a is not None and b is not None:
        for i in range(max(len(a), len(b))):
            x = a[i] if i < len(a) else None
            y = b[i] if i < len(b) else None
            if x != y:
                ends += [None if x is None else x[1], None if y is None else y[1]]
                break
    return least(*ends)


def _or(value: Any, default: Any) -> Any:
    return default if value is None else value


def receive(
    rows: list[Row],
    decided: list[Row],
    restarted: frozenset[int],
    use_epochs: bool,
    now_ms: int,
    running: frozenset[int] | None = None,
    settled: bool = False,
) -> list[Row]:
    """The table after the brokers receive ``decided``: ``decided`` drives (partitions the
    controller no longer has are gone; new ones start empty). ``restarted``: brokers that came
    back since the last call (their replicas truncate). ``settled``: the brokers are running as
    at the last call, none restarted; a row whose decision is unchanged is then kept as it is,
    which is what ``_received`` makes of it (so a LeaderAndIsr for few partitions costs few)."""
    old: dict[tuple[int, int], list[Row]] = {}
    for row in rows:
        old.setdefault((row[s.TOPIC_INDEX], row[s.PARTITION]), []).append(row)
    out = []
    for d in decided:
        held = old.get((d[s.TOPIC_INDEX], d[s.PARTITION]), [None])  # a left join
        if settled and not restarted and len(held) == 1 and _unchanged(d, held[0]):
            out.append(held[0])
            continue
        for o in held:
            out.append(_received(d, o, restarted, use_epochs, now_ms, running))
    return maybe_increment_hw(out)


def _unchanged(d: Row, o: Row | None) -> bool:
    """Whether ``o`` holds ``d``'s decision as it is: same replicas (each broker, and at most one
    empty slot, once: each position keeps its own log), ISR, leader, epochs and version, a known
    leader epoch, and every epoch sent already known to its broker."""
    if o is None or o[s.LEADER_EPOCH] is None:
        return False
    w = width(d)
    if width(o) != w:
        return False
    replicas = [d[s.replica_col(k)] for k in range(w)]
    if len(set(replicas)) != w:
        return False
    names = (*(s.replica_col(k) for k in range(w)), *(s.isr_col(k) for k in range(w)), *_DECIDED)
    # Each broker already holds the epoch the controller sends it now (KIP-320's fencing).
    sent = (d[sent_epoch_col(k)] for k in range(w))
    known = (o[r.known_epoch_col(k)] for k in range(w))
    return all(d[name] == o[name] for name in names) and all(
        e is None or e == k for e, k in zip(sent, known, strict=True)
    )


def _received(
    d: Row,
    o: Row | None,
    restarted: frozenset[int],
    use_epochs: bool,
    now_ms: int,
    running: frozenset[int] | None,
) -> Row:
    w, wo = width(d), (width(o) if o is not None else 0)

    def prior(name: str) -> Any:
        return None if o is None else o[name]

    known = prior(s.LEADER_EPOCH) is not None
    leader = d[s.LEADER]
    led = leader != s.NO_LEADER
    new_epoch = not known or d[s.LEADER_EPOCH] != prior(s.LEADER_EPOCH)
    newer = new_epoch or d[s.ZK_VERSION] > prior(s.ZK_VERSION)
    leader_changed = led and (not known or leader != prior(s.LEADER) or leader in restarted)
    row: Row = {name: d[name] for name in KEY}
    for k in range(w):
        row[s.replica_col(k)] = d[s.replica_col(k)]
    for k in range(w):
        row[s.isr_col(k)] = d[s.isr_col(k)]
    for name in _DECIDED:
        row[name] = d[name]
    # Each position takes the log of the same broker's old position, or starts empty. An empty
    # slot matches an old empty slot too (EMPTY_SLOT == EMPTY_SLOT), as in the Spark join.
    for k in range(w):
        broker = d[s.replica_col(k)]
        src = next((i for i in range(wo) if prior(s.replica_col(i)) == broker), None)
        empty = fresh(k, now_ms)
        for col in (*r.SLOT_LONGS, r.epochs_col):
            row[col(k)] = empty[col(k)] if src is None else prior(col(src))
        # What the controller sent this replica's broker (``leader_and_isr.sent_epoch_col``).
        sent = d[sent_epoch_col(k)]
        if sent is not None:
            row[r.known_epoch_col(k)] = sent
        elif broker in restarted:
            row[r.known_epoch_col(k)] = r.STOPPED
    last = prior(s.LEADER) if known and prior(s.LEADER) != s.NO_LEADER else prior(r.LAST_LEADER)
    leo_l = leader_value(row, w, r.leo_col, 0)
    epochs_l = leader_value(row, w, r.epochs_col, [])
    # ``leader_and_isr.receive``: the new leader is held to what the cluster acknowledged.
    acked = _or(prior(r.ACKED), 0)
    acked_epochs = _or(prior(r.ACKED_EPOCHS), [])
    kept = agreement(epochs_l, leo_l, acked_epochs, acked)
    row[r.LOST] = _or(prior(r.LOST), 0) + (max(acked - kept, 0) if leader_changed else 0)
    after = min(acked, kept) if leader_changed else acked
    row[r.ACKED] = after
    row[r.ACKED_EPOCHS] = truncated(acked_epochs, after) if leader_changed else acked_epochs
    awaited = _or(prior(r.AWAITED), 0)
    row[r.AWAITED] = min(awaited, after) if leader_changed else awaited
    row[r.REFUSED] = _or(prior(r.REFUSED), 0)
    row[r.UNSERVED] = _or(prior(r.UNSERVED), 0)
    row[r.LAST_LEADER] = leader if led else (last if last is not None else s.NO_LEADER)
    started = prior(r.LEADER_START) if prior(r.LEADER_START) is not None else 0
    row[r.LEADER_START] = leo_l if led and new_epoch else started
    # The new leader stamps its epoch at its LEO (KIP-279), before anything is written.
    leader_epochs = assigned(epochs_l, d[s.LEADER_EPOCH], leo_l) if led and newer else epochs_l
    for k in range(w):
        follower = is_follower(row, k) and led
        back = d[s.replica_col(k)] in restarted
        leo, hw = row[r.leo_col(k)], row[r.hw_col(k)]
        if is_leader(row, k):
            row[r.epochs_col(k)] = leader_epochs
        elif (
            follower
            and (running is None or d[s.replica_col(k)] in running)
            and (leader_changed or back)
        ):
            epochs = row[r.epochs_col(k)]
            to = ref.truncation_offset(
                tuple(epochs), leo, hw, tuple(leader_epochs), leo_l, use_epochs
            )
            cut = min(to, leo_l, leo)
            row[r.leo_col(k)] = cut
            row[r.hw_col(k)] = min(hw, cut)
            row[r.flushed_col(k)] = min(row[r.flushed_col(k)], cut)
            row[r.epochs_col(k)] = truncated(epochs, cut)
        # §12.1: a leader of a new epoch starts its followers' clocks afresh.
        if follower and new_epoch:
            row[r.caught_col(k)] = now_ms if in_isr(row, k, w) else 0
            row[r.fetch_col(k)] = now_ms
            row[r.fetch_leo_col(k)] = leo_l
    # Where the brokers' own write is newer than the controller's view, they keep theirs: the
    # version, the controller epoch and the ISR slots both widths have (Spark's quirk: a wider
    # decided row keeps the controller's ISR in its extra slots).
    if known and not newer:
        assert o is not None
        for name in (s.ZK_VERSION, s.CONTROLLER_EPOCH, *(s.isr_col(k) for k in range(min(w, wo)))):
            row[name] = o[name]
    return {name: row[name] for name in r.columns(w)}


def append(
    rows: list[Row],
    where: Callable[[Row], bool],
    serving: frozenset[int],
    records: int,
    acks: str,
    min_isr: Callable[[Row], int],
) -> list[Row]:
    """``leader_and_isr.append`` over rows."""
    out = []
    for row in rows:
        w = width(row)
        chosen = where(row)
        served = chosen and row[s.LEADER] != s.NO_LEADER and row[s.LEADER] in serving
        refused = served and acks == ACKS_ALL and isr_size(row, w) < min_isr(row)
        new = dict(row)
        new[r.REFUSED] = row[r.REFUSED] + (records if refused else 0)
        new[r.UNSERVED] = row[r.UNSERVED] + (records if chosen and not served else 0)
        if not served or refused:
            out.append(new)
            continue
        leo_l = leader_value(row, w, r.leo_col, 0)
        for k in range(w):
            if is_leader(row, k):
                leo = row[r.leo_col(k)]
                new[r.leo_col(k)] = leo + records
                new[r.epochs_col(k)] = assigned(row[r.epochs_col(k)], row[s.LEADER_EPOCH], leo)
        if acks == ACKS_LEADER:
            new[r.ACKED] = max(row[r.ACKED], leo_l + records)
            lineage = leader_value(new, w, r.epochs_col, [])
            new[r.ACKED_EPOCHS] = acked_lineage(row, new[r.ACKED], lineage)
        elif acks == ACKS_ALL:
            new[r.AWAITED] = max(row[r.AWAITED], leo_l + records)
        out.append(new)
    return out


def lose_unflushed(rows: list[Row], brokers: Iterable[int]) -> list[Row]:
    """Power loss on ``brokers``: each of their logs keeps only what reached the disk."""
    hit = set(brokers)
    out = []
    for row in rows:
        new = dict(row)
        for k in range(width(row)):
            if row[s.replica_col(k)] in hit:
                disk = row[r.flushed_col(k)]
                new[r.leo_col(k)] = disk
                new[r.hw_col(k)] = min(row[r.hw_col(k)], disk)
                new[r.epochs_col(k)] = truncated(row[r.epochs_col(k)], disk)
        out.append(new)
    return out


def divergent(row: Row) -> bool:
    """Some replica holds, below both ends, records other than the leader's (or, while the
    partition has no leader, its last leader's)."""
    w = width(row)
    reference = row[s.LEADER] if row[s.LEADER] != s.NO_LEADER else row[r.LAST_LEADER]
    # As in Spark, with no last leader either the reference is EMPTY_SLOT, which an empty
    # position holds: its (empty) log is then the one compared against.
    is_ref = [row[s.replica_col(k)] == reference for k in range(w)]
    at = next((k for k in range(w) if is_ref[k]), None)
    ref_epochs = None if at is None else row[r.epochs_col(at)]
    ref_leo = None if at is None else row[r.leo_col(at)]
    for k in range(w):
        if row[s.replica_col(k)] == s.EMPTY_SLOT or is_ref[k]:
            continue
        leo = row[r.leo_col(k)]
        if agreement(row[r.epochs_col(k)], leo, ref_epochs, ref_leo) < least(leo, ref_leo):
            return True
    return False


def partition_results(rows: list[Row], names: dict[int, str]) -> list[Row]:
    """Per partition whose topic ``names`` has: its high watermark (None without a leader among
    its replicas), each replica's LEO by broker id as a string, acknowledged records lost and
    whether replicas diverge (``Replication.partition_results``)."""
    out = []
    for row in rows:
        if row[s.TOPIC_INDEX] not in names:
            continue  # an inner join with the names
        w = width(row)
        out.append(
            {
                s.TOPIC: names[row[s.TOPIC_INDEX]],
                s.PARTITION: row[s.PARTITION],
                "high_watermark": leader_value(row, w, r.hw_col, None),
                "log_end_offsets": {
                    str(row[s.replica_col(k)]): row[r.leo_col(k)]
                    for k in range(w)
                    if row[s.replica_col(k)] != s.EMPTY_SLOT
                },
                "acked_records_lost": row[r.LOST],
                "diverged": divergent(row),
            }
        )
    return out


def loss_totals(rows: list[Row]) -> tuple[int, int]:
    """Acknowledged records lost and divergent partitions, over the whole table."""
    return sum(row[r.LOST] for row in rows), sum(1 for row in rows if divergent(row))
