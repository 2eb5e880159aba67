"""The replication table as plain rows: ``statemachines.replication`` value for value.

A table is a list of dicts, one per partition, each with exactly the Spark table's columns
(``replication.columns(w)``) and lineages as lists of ``(epoch, start_offset)`` tuples. Small
clusters step here without a Spark job, and the tests hold the Spark transforms to it. Every
function returns new rows and leaves its input as it was (unchanged rows may be shared).

The arithmetic is Spark's: ``/`` divides as doubles, ``floor`` and ``ceil`` of a double give an
integer, ``least`` and ``greatest`` skip nulls (None). One deliberate difference: Python's
integers do not overflow, where Spark's ANSI arithmetic fails the query; the closed forms stay
inside the long range (one step's copy is capped at ``replication.MAX_COPY`` records).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

from statemachines import fetch_shares as fs
from statemachines import reference_replication as ref
from statemachines import replication as r
from statemachines import replication_throttles as rt
from statemachines import schemas as s

Row = dict[str, Any]
Lineage = list[tuple[int, int]]


# -- Spark's value semantics --------------------------------------------------------------------


def least(*values: Any) -> Any:
    """Spark's ``least``: the smallest value that is not null, null if all are."""
    present = [v for v in values if v is not None]
    return min(present) if present else None


def greatest(*values: Any) -> Any:
    """Spark's ``greatest``: the largest value that is not null, null if all are."""
    present = [v for v in values if v is not None]
    return max(present) if present else None


def divided(a: float, b: float) -> float:
    """Spark's ``/`` on numbers: both sides as doubles (so ``long / long`` is not floored)."""
    return float(a) / float(b)


def floor_of(x: float) -> int:
    """``F.floor`` of a double, a long in Spark (see the module docstring on overflow)."""
    return math.floor(x)


def ceil_of(x: float) -> int:
    return math.ceil(x)


# -- the layout ----------------------------------------------------------------------------------


def width(row: Row) -> int:
    """The number of replica positions of a row (its ``replica_k`` columns, k = 0..w-1).

    Positions are numbered from 0 without gaps, so probing them is enough: a scan of every
    column's name made this the hottest function of a replay."""
    w = 0
    while s.replica_col(w) in row:
        w += 1
    return w


def lineage(values: Iterable[Any] | None) -> Lineage | None:
    """A lineage as this module holds it: ``(epoch, start_offset)`` tuples (Spark's structs
    and collected Rows normalised), None kept."""
    return None if values is None else [(int(e), int(o)) for e, o in values]


def assigned(cache: Lineage, epoch: int, start: int) -> Lineage:
    """§13.1 ``assign`` (``reference_replication.assign``) on a list lineage."""
    return list(ref.assign(tuple(cache), epoch, start))


def truncated(cache: Lineage, offset: int) -> Lineage:
    """§13.1 ``truncateFromEnd`` on a list lineage."""
    return list(ref.truncate_from_end(tuple(cache), offset))


def is_leader(row: Row, k: int) -> bool:
    leader = row[s.LEADER]
    return row[s.replica_col(k)] == leader and leader != s.NO_LEADER


def is_follower(row: Row, k: int) -> bool:
    return row[s.replica_col(k)] != s.EMPTY_SLOT and not is_leader(row, k)


def isr_members(row: Row, w: int) -> list[int]:
    return [row[s.isr_col(k)] for k in range(w)]


def in_isr(row: Row, k: int, w: int) -> bool:
    broker = row[s.replica_col(k)]
    return broker != s.EMPTY_SLOT and broker in isr_members(row, w)


def isr_size(row: Row, w: int) -> int:
    return sum(1 for b in isr_members(row, w) if b != s.EMPTY_SLOT)


def leader_value(row: Row, w: int, name: Callable[[int], str], default: Any) -> Any:
    """The leader's value of a per-position column (the first position holding the leader)."""
    for k in range(w):
        if is_leader(row, k):
            return row[name(k)]
    return default


def min_isr_of(c: r.Conditions, row: Row) -> int:
    """The row's topic's ``min.insync.replicas`` under ``c``, at least 1."""
    return max(int(c.min_isr.get(row[s.TOPIC_INDEX], 0)), 1)


def fresh(k: int, now_ms: int) -> Row:
    """An empty log on position k (``leader_and_isr.fresh``)."""
    return {
        r.leo_col(k): 0,
        r.hw_col(k): 0,
        r.caught_col(k): 0,
        r.fetch_col(k): now_ms,
        r.fetch_leo_col(k): 0,
        r.flushed_col(k): 0,
        r.epochs_col(k): [],
        r.known_epoch_col(k): r.STOPPED,
    }


# -- the closed forms between two steps ----------------------------------------------------------


class Motion:
    """How one row moves from ``c.start_ms`` on (``replication.Motion`` for one row): the row's
    constants of the interval are computed once, the closed forms read them."""

    def __init__(self, row: Row, c: r.Conditions, w: int) -> None:
        self.row, self.c, self.w = row, c, w
        topic, leader = row[s.TOPIC_INDEX], row[s.LEADER]
        key = (topic, row[s.PARTITION])
        serves = leader != s.NO_LEADER and leader in c.serving
        producing = serves and isr_size(row, w) >= min_isr_of(c, row)
        self.serves = serves
        self.leader_leo0: int = leader_value(row, w, r.leo_col, 0)
        self.demand = float(c.rates.get(topic, 0.0))
        self.rate = self.demand if producing else 0.0
        self.anchor = int(c.rate_anchors.get(topic, 0))
        size = max(int(c.bytes_per_record.get(topic, 0)), 1)
        self.fetching: list[bool] = []
        self.rates: list[float] = []
        for k in range(w):
            broker = row[s.replica_col(k)]
            self.fetching.append(
                is_follower(row, k)
                and serves
                and broker in c.fetching
                and row[r.known_epoch_col(k)] == row[s.LEADER_EPOCH]  # ``replication.knows_epoch``
            )
            at_end = row[r.leo_col(k)] >= self.leader_leo0
            share = (c.caught_share if at_end else c.fetch_share).get(broker, 0.0)
            if not at_end:
                outside = not in_isr(row, k, w)
                share = rt.capped_row(c.throttles, share, key, broker, leader, outside)
            self.rates.append(divided(share, size))

    @property
    def producing(self) -> bool:
        return self.rate > 0

    def produced(self, at: int) -> int:
        """Records the leader appends from the step's start to ``at``, anchored at the time the
        rate was set."""
        return self._produced(self.rate, at)

    def demanded(self, at: int) -> int:
        """Records the topic's producers send to the partition until ``at``, taken or not."""
        return self._produced(self.demand, at)

    def _produced(self, rate: float, at: int) -> int:
        if rate <= 0:
            return 0
        start = self.c.start_ms
        return floor_of(divided(rate * (at - self.anchor), 1000)) - floor_of(
            divided(rate * (start - self.anchor), 1000)
        )

    def leader_leo(self, at: int) -> int:
        return self.leader_leo0 + self.produced(at)

    def leo(self, k: int, at: int) -> int:
        if is_leader(self.row, k):
            return self.leader_leo(at)
        own = self.row[r.leo_col(k)]
        if self.fetching[k]:
            reach = least(divided(self.rates[k] * (at - self.c.start_ms), 1000), r.MAX_COPY)
            copied = own + floor_of(reach)
            return min(self.leader_leo(at), copied)
        return own

    def high_watermark(self, at: int) -> int:
        """The leader's HW at ``at`` (§12.3): the least LEO of the ISR, never moving back."""
        row, w = self.row, self.w
        current = leader_value(row, w, r.hw_col, 0)
        if row[s.LEADER] not in self.c.serving:
            return current
        ends = [self.leader_leo(at)] + [
            self.leo(k, at) for k in range(w) if in_isr(row, k, w) and is_follower(row, k)
        ]
        return max(current, min(ends))

    def lag(self, k: int, at: int) -> int:
        return self.leader_leo(at) - self.leo(k, at)


def maybe_increment_hw(rows: list[Row]) -> list[Row]:
    """``replication.maybe_increment_hw`` over rows."""
    out = []
    for row in rows:
        w = width(row)
        leader_leo = leader_value(row, w, r.leo_col, 0)
        ends = [leader_leo] + [
            row[r.leo_col(k)] for k in range(w) if in_isr(row, k, w) and is_follower(row, k)
        ]
        moved = greatest(leader_value(row, w, r.hw_col, 0), least(*ends))
        new = dict(row)
        for k in range(w):
            if is_leader(row, k):
                new[r.hw_col(k)] = moved
        out.append(new)
    return out


def advance(rows: list[Row], c: r.Conditions, end_ms: int) -> list[Row]:
    """The table at ``end_ms``, every replica moved by ``c`` from ``c.start_ms``."""
    groups = r.flush_groups(c, end_ms)
    learned = max(c.start_ms, end_ms - c.fetch_wait_ms)
    return [_advanced(row, c, end_ms, learned, _own(groups, row)) for row in rows]


def _own(groups: list[tuple[frozenset[int] | None, list[int]]], row: Row) -> list[int]:
    """The flush boundaries of the row's topic (``replication.flush_groups``)."""
    topic = row[s.TOPIC_INDEX]
    for topics, boundaries in groups:
        if topics is None or topic in topics:
            return boundaries
    return []


def _advanced(row: Row, c: r.Conditions, end: int, learned: int, boundaries: list[int]) -> Row:
    w = width(row)
    m = Motion(row, c, w)
    hw_end, hw_learned = m.high_watermark(end), m.high_watermark(learned)
    leader_end = m.leader_leo(end)
    leader_epochs = leader_value(row, w, r.epochs_col, [])
    produced = m.produced(end)
    new = dict(row)
    for k in range(w):
        leo0, leo1 = row[r.leo_col(k)], m.leo(k, end)
        fetching, leads = m.fetching[k], is_leader(row, k)
        on_disk = [row[r.flushed_col(k)]] + [m.leo(k, b) for b in boundaries]
        n = c.topic_flush_messages.get(row[s.TOPIC_INDEX], c.flush_messages or None)
        if n is not None and n > 0:
            on_disk.append(floor_of(divided(leo1, n)) * n)
        new[r.leo_col(k)] = leo1
        if leads:
            new[r.hw_col(k)] = hw_end
        elif fetching:
            new[r.hw_col(k)] = max(row[r.hw_col(k)], min(leo1, hw_learned))
        if fetching:
            if leo1 >= leader_end:
                new[r.caught_col(k)] = end
            new[r.fetch_col(k)] = end
            new[r.fetch_leo_col(k)] = leader_end
        new[r.flushed_col(k)] = min(max(on_disk), leo1)
        if leads and produced > 0:
            new[r.epochs_col(k)] = assigned(row[r.epochs_col(k)], row[s.LEADER_EPOCH], leo0)
        elif fetching and leo1 > leo0:
            new[r.epochs_col(k)] = copy_lineage(row[r.epochs_col(k)], leader_epochs, leo0, leo1)
    # ``replication.advance``: the rate's producers use acks=all.
    if m.producing:
        new[r.AWAITED] = max(row[r.AWAITED], leader_end)
    if isr_size(row, w) >= min_isr_of(c, row):
        new[r.ACKED] = max(row[r.ACKED], min(hw_end, new[r.AWAITED]))
    lineage = leader_value(new, w, r.epochs_col, [])
    new[r.ACKED_EPOCHS] = acked_lineage(row, new[r.ACKED], lineage)
    demanded = m.demanded(end)
    new[r.REFUSED] = row[r.REFUSED] + (demanded if m.serves and not m.producing else 0)
    new[r.UNSERVED] = row[r.UNSERVED] + (0 if m.serves else demanded)
    return new


def acked_lineage(row: Row, acked: int, leader_lineage: Lineage) -> Lineage:
    """``replication.acked_lineage``: ``row``'s acknowledged lineage once ``acked`` replaces
    its ``ACKED``."""
    if acked > row[r.ACKED]:
        return truncated(leader_lineage, acked)
    return row[r.ACKED_EPOCHS]


def copy_lineage(follower: Lineage, leader: Lineage, start: int, end: int) -> Lineage:
    """The follower's lineage after copying the leader's records ``[start, end)``: each leader
    run that overlaps the range is assigned from where the copy enters it (§13.1)."""
    out = tuple(follower)
    for i, (epoch, run_start) in enumerate(leader):
        following = leader[i + 1][1] if i + 1 < len(leader) else None
        if run_start < end and (following is None or following > start):
            out = ref.assign(out, epoch, max(run_start, start))
    return list(out)


def fetch_stats(rows: list[Row], c: r.Conditions) -> list[Row]:
    """``fetch_shares.fetch_stats`` over rows: per broker that follows anything and per group
    of its followers by the throttles that count them, in key order."""
    stats: dict[tuple[int, int, bool, bool], list[Any]] = {}
    th = c.throttles
    for row in rows:
        w = width(row)
        m = Motion(row, c, w)
        topic, partition, leader = row[s.TOPIC_INDEX], row[s.PARTITION], row[s.LEADER]
        # Unlike the fetch rates, the demand takes the size without the floor of 1: a topic of
        # unknown size needs nothing (as ``replication.fetch_stats`` does).
        need = m.rate * int(c.bytes_per_record.get(topic, 0))
        for k in range(w):
            if not m.fetching[k]:
                continue
            broker = row[s.replica_col(k)]
            at_end = row[r.leo_col(k)] >= m.leader_leo0
            led = rt.listed_row(th.leader, topic, partition, leader)
            follows = rt.listed_row(th.follower, topic, partition, broker)
            held = bool(th.leader or th.follower) and not at_end and not in_isr(row, k, w)
            key = (broker, leader if led else s.NO_LEADER, follows, held)
            entry = stats.setdefault(key, [0.0, 0, 0])
            entry[0] += need if at_end else 0.0
            entry[1] += 0 if at_end else 1
            entry[2] += 1
    return [
        {
            s.BROKER: b, fs.THROTTLED_LEADER: led, fs.THROTTLED_FOLLOWER: follows, fs.HELD: held,
            fs.BROKER_DEMAND: d, fs.BROKER_BEHIND: n, fs.BROKER_FOLLOWED: f,
        }
        for (b, led, follows, held), (d, n, f) in sorted(stats.items())
    ]  # fmt: skip
