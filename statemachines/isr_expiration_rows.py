"""The leaders' ISR rules over plain rows: ``statemachines.isr_expiration`` value for value.

Rows as in ``replication_rows``. ``isr_updates`` returns the partitions whose leader changes its
ISR, ``with_isr`` applies the writes that succeeded, ``outlook`` finds the next time a rule acts
and counts the gauges (§12.2, §12.3).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from statemachines import isr_expiration as ie
from statemachines import replication as r
from statemachines import schemas as s
from statemachines.replication_rows import (
    Motion,
    Row,
    ceil_of,
    divided,
    floor_of,
    in_isr,
    is_follower,
    isr_members,
    leader_value,
    least,
    maybe_increment_hw,
    min_isr_of,
    width,
)


def _out_of_sync(row: Row, k: int, rule: ie.IsrRule, now: int, leader_leo: int) -> bool:
    leo = row[r.leo_col(k)]
    if rule.count_rule:
        return leader_leo - leo > rule.max_messages or now - row[r.fetch_col(k)] > rule.lag_ms
    return leo != leader_leo and now - row[r.caught_col(k)] > rule.lag_ms


def isr_updates(
    rows: list[Row], c: r.Conditions, rule: ie.IsrRule, ticking: frozenset[int], now_ms: int
) -> list[Row]:
    """Partitions whose leader changes its ISR at ``now_ms`` (``rows`` already advanced to it),
    in key order: the key, the leadership it writes under, ``NEW_ISR`` (a list) and how many
    replicas left and joined. ``ticking``: leader brokers whose ``isr-expiration`` task runs."""
    out: list[Row] = []
    for row in rows:
        w = width(row)
        m = Motion(row, c, w)
        leader_leo = leader_value(row, w, r.leo_col, 0)
        hw = leader_value(row, w, r.hw_col, 0)
        checks = row[s.LEADER] in ticking
        leaving = [
            checks
            and in_isr(row, k, w)
            and is_follower(row, k)
            and _out_of_sync(row, k, rule, now_ms, leader_leo)
            for k in range(w)
        ]
        joining = [
            not in_isr(row, k, w)
            and m.fetching[k]
            and row[r.leo_col(k)] >= hw
            and row[r.leo_col(k)] >= row[r.LEADER_START]
            for k in range(w)
        ]
        if not any(leaving) and not any(joining):
            continue
        gone = {row[s.replica_col(k)] for k in range(w) if leaving[k]}
        kept = [b for b in isr_members(row, w) if b != s.EMPTY_SLOT and b not in gone]
        joined = [row[s.replica_col(k)] for k in range(w) if joining[k]]
        # The Spark rule compacts into W slots: an ISR and joiners past W are cut.
        new_isr = [b for b in (kept + joined)[:w] if b != s.EMPTY_SLOT]
        out.append(
            {
                s.TOPIC_INDEX: row[s.TOPIC_INDEX],
                s.PARTITION: row[s.PARTITION],
                s.LEADER: row[s.LEADER],
                s.LEADER_EPOCH: row[s.LEADER_EPOCH],
                ie.NEW_ISR: new_isr,
                s.CONTROLLER_EPOCH: row[s.CONTROLLER_EPOCH],
                s.ZK_VERSION: row[s.ZK_VERSION],
                ie.SHRUNK: sum(leaving),
                ie.EXPANDED: sum(joining),
            }
        )
    return sorted(out, key=lambda x: (x[s.TOPIC_INDEX], x[s.PARTITION]))


def with_isr(
    rows: list[Row], written: list[tuple[int, int, list[int] | None, int | None]]
) -> list[Row]:
    """``rows`` with the ISRs and znode versions of ``written`` (topic_index, partition, new ISR,
    zk_version): the leaders' own successful writes (§12.4 step 1)."""
    by_key: dict[tuple[int, int], list[tuple[list[int] | None, int | None]]] = {}
    for topic, partition, new_isr, version in written:
        by_key.setdefault((topic, partition), []).append((new_isr, version))
    out: list[Row] = []
    for row in rows:
        # A left join: a key written twice gives two rows, as the Spark join does.
        for new_isr, version in by_key.get((row[s.TOPIC_INDEX], row[s.PARTITION]), [(None, None)]):
            if version is None:
                out.append(row)
                continue
            members = new_isr or []
            new = dict(row)
            for k in range(width(row)):
                b = members[k] if k < len(members) else None
                new[s.isr_col(k)] = s.EMPTY_SLOT if b is None else b
            new[s.ZK_VERSION] = version
            out.append(new)
    return maybe_increment_hw(out)


def _tick_after(starts: Mapping[int, int], period: int, broker: int, after: int) -> int:
    """The first run of ``broker``'s periodic task strictly after ``after``."""
    start = int(starts.get(broker, 0))
    return start + (floor_of(divided(after - start, period)) + 1) * period


def _next_change(
    row: Row,
    c: r.Conditions,
    rule: ie.IsrRule,
    checking: frozenset[int],
    starts: Mapping[int, int],
    checked: int,
) -> int | None:
    """The first time after ``c.start_ms`` a rule would change this row's ISR (None: never)."""
    w = width(row)
    m = Motion(row, c, w)
    leader, t0, period = row[s.LEADER], c.start_ms, rule.period_ms
    runs = leader in checking and leader != s.NO_LEADER
    candidates: list[int] = []
    for k in range(w):
        member = in_isr(row, k, w) and is_follower(row, k) and runs
        if member and rule.count_rule:
            if not m.fetching[k]:  # stuck: no fetch for the lag
                after = max(row[r.fetch_col(k)] + rule.lag_ms, checked)
                candidates.append(_tick_after(starts, period, leader, after))
            if m.producing:  # slow: the lag passes the count at a check
                first = _tick_after(starts, period, leader, checked)
                growth = m.rate - (m.rates[k] if m.fetching[k] else 0.0)
                behind = m.lag(k, first)
                if behind > rule.max_messages:
                    candidates.append(first)
                elif growth > 0:
                    short = rule.max_messages + 2 - behind
                    crossing = first + ceil_of(least(divided(short * 1000, growth), r.MAX_COPY))
                    candidates.append(_tick_after(starts, period, leader, crossing - 1))
        elif member:
            after = max(row[r.caught_col(k)] + rule.lag_ms, checked)
            due = _tick_after(starts, period, leader, after)
            if m.leo(k, due) < m.leader_leo(due):
                candidates.append(due)
        # A follower behind reaches the leader's LEO: outside the ISR it rejoins by then; in it,
        # its broker's throughput is shared anew (the shares are fixed between steps).
        if m.fetching[k]:
            gain = m.rates[k] - m.rate
            behind_now = m.lag(k, t0)
            if behind_now > 0 and gain > 0:
                wait = least(divided((behind_now + 2) * 1000, gain), r.MAX_COPY)
                candidates.append(t0 + ceil_of(wait))
    return min((x for x in candidates if x > t0), default=None)


def outlook(
    rows: list[Row],
    c: r.Conditions,
    rule: ie.IsrRule,
    checking: frozenset[int],
    starts: Mapping[int, int],
    checked_ms: int,
    down: frozenset[int] = frozenset(),
) -> dict[str, Any]:
    """The next time (> ``c.start_ms``, None for never) a leader's rules change an ISR under
    ``c``, and the gauges now, under ``isr_expiration``'s keys, counting what is up (``down``:
    crashed brokers). As Spark's sums, the gauges of a table without rows are None
    (``PARTITIONS`` 0)."""
    nexts = [_next_change(row, c, rule, checking, starts, checked_ms) for row in rows]
    urp = under = at = offline = leader_down = 0
    for row in rows:
        w = width(row)
        size = sum(1 for b in isr_members(row, w) if b != s.EMPTY_SLOT and b not in down)
        replicas = sum(1 for k in range(w) if row[s.replica_col(k)] != s.EMPTY_SLOT)
        min_isr = min_isr_of(c, row)
        if row[s.LEADER] == s.NO_LEADER or row[s.LEADER] in down:
            offline += 1
            leader_down += row[s.LEADER] != s.NO_LEADER
            continue
        urp += size < replicas
        under += size < min_isr
        at += size == min_isr
    keys = (ie.URP, ie.UNDER_MIN, ie.AT_MIN, ie.OFFLINE, ie.LEADER_DOWN)
    counts = (urp, under, at, offline, leader_down) if rows else (None,) * len(keys)
    return {
        ie.NEXT_MS: min((x for x in nexts if x is not None), default=None),
        **dict(zip(keys, counts, strict=True)),
        ie.PARTITIONS: len(rows),
    }
