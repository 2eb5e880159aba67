"""ISR maintenance on the leaders, in bulk over the replication table (§12.2, §12.3).

``isr_updates`` applies the shrink rule for the leaders whose ``isr-expiration`` task runs now and
the expand rule for every follower, and returns the partitions whose ISR their leader changes.
``outlook`` finds, in closed form, the next time any leader's rules would change something and
counts the gauges of the moment, in one aggregation: steps are taken only when something
happens, however long the virtual time between them.

The time rule (Kafka 0.9+): a follower is out of sync when its LEO differs from the leader's and
it last caught up more than ``replica.lag.time.max.ms`` ago; checked every half of that. The
legacy count rule (Kafka <= 0.8.x): out of sync when it lags by more than
``replica.lag.max.messages`` or has not fetched for ``replica.lag.time.max.ms``; checked every
``replica.lag.time.max.ms``. Either way a follower rejoins once its LEO reaches the leader's high
watermark and the leader's epoch start offset.

The gauges count what is up. A crashed broker stays registered until its ZooKeeper session
expires (spec §3.6), and until then the controller leaves it in the ISRs and as leader; but it
serves and acknowledges nothing. So an ISR member counts only while its broker is up, and a
partition whose leader is down counts as offline (``OFFLINE``; ``LEADER_DOWN`` of them while
still led by it), not under-replicated: what producers and consumers see.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from statemachines import replication as r
from statemachines import schemas as s
from statemachines.columns import any_of, compact

SHRUNK = "shrunk"
EXPANDED = "expanded"
NEW_ISR = "new_isr"
NEXT_MS = "next_ms"
URP = "under_replicated"
UNDER_MIN = "under_min_isr"
AT_MIN = "at_min_isr"
OFFLINE = "offline"
LEADER_DOWN = "leader_down"
PARTITIONS = "partitions"


@dataclass(frozen=True)
class IsrRule:
    lag_ms: int  # replica.lag.time.max.ms
    count_rule: bool = False  # replica.lag.max.messages decides (Kafka <= 0.8.x)
    max_messages: int = 4000  # replica.lag.max.messages

    @property
    def period_ms(self) -> int:
        """The ``isr-expiration`` period: half the lag (0.9+), the lag itself (0.8)."""
        return self.lag_ms if self.count_rule else max(self.lag_ms // 2, 1)


def _out_of_sync(k: int, rule: IsrRule, now: Column, leader_leo: Column) -> Column:
    leo = F.col(r.leo_col(k))
    if rule.count_rule:
        return (leader_leo - leo > rule.max_messages) | (now - F.col(r.fetch_col(k)) > rule.lag_ms)
    return (leo != leader_leo) & (now - F.col(r.caught_col(k)) > rule.lag_ms)


def isr_updates(
    table: DataFrame, c: r.Conditions, rule: IsrRule, ticking: frozenset[int], now_ms: int
) -> DataFrame:
    """Partitions whose leader changes its ISR at ``now_ms`` (``table`` already advanced to it):
    the key, the leadership it writes under, the new ISR (array) and how many replicas left and
    joined. ``ticking``: leader brokers whose ``isr-expiration`` task runs now."""
    w = s.width(table)
    m = r.Motion(c, w)
    table = m.prepare(table)
    now = F.lit(now_ms).cast("bigint")
    leader = F.col(s.LEADER)
    leader_leo = r.leader_value(w, r.leo_col, F.lit(0).cast("bigint"))
    hw = r.leader_value(w, r.hw_col, F.lit(0).cast("bigint"))
    checks = r.member(leader, ticking)
    out = [
        checks & r.in_isr(k, w) & r.is_follower(k) & _out_of_sync(k, rule, now, leader_leo)
        for k in range(w)
    ]
    joins = [
        ~r.in_isr(k, w)
        & m.fetching(k)
        & (F.col(r.leo_col(k)) >= hw)
        & (F.col(r.leo_col(k)) >= F.col(r.LEADER_START))
        for k in range(w)
    ]
    # Each flag once, as a column: the ISR compaction below reads every flag in every slot, and
    # inlined there the rules would pass the JVM's 64 KB method limit.
    table = table.withColumns(
        {**{f"_out_{k}": out[k] for k in range(w)}, **{f"_join_{k}": joins[k] for k in range(w)}}
    )
    out = [F.col(f"_out_{k}") for k in range(w)]
    joins = [F.col(f"_join_{k}") for k in range(w)]
    keep = [
        (member != s.EMPTY_SLOT)
        & ~any_of([(F.col(s.replica_col(k)) == member) & out[k] for k in range(w)])
        for member in r.isr(w)
    ]
    table = table.withColumns({f"_keep_{j}": keep[j] for j in range(w)})
    keep = [F.col(f"_keep_{j}") for j in range(w)]
    slots = compact([*r.isr(w), *r.replicas(w)], [*keep, *joins])[:w]
    new_isr = F.filter(F.array(*slots), lambda b: b != s.EMPTY_SLOT)
    shrunk = sum((o.cast("int") for o in out), F.lit(0))
    expanded = sum((j.cast("int") for j in joins), F.lit(0))
    return table.where(any_of(out) | any_of(joins)).select(
        s.TOPIC_INDEX,
        s.PARTITION,
        s.LEADER,
        s.LEADER_EPOCH,
        new_isr.alias(NEW_ISR),
        s.CONTROLLER_EPOCH,
        s.ZK_VERSION,
        shrunk.alias(SHRUNK),
        expanded.alias(EXPANDED),
    )


def with_isr(table: DataFrame, written: DataFrame) -> DataFrame:
    """``table`` with the ISRs and znode versions of ``written`` (key, NEW_ISR, ZK_VERSION):
    the leaders' own successful writes (§12.4 step 1)."""
    w = s.width(table)
    changes = written.select(
        s.TOPIC_INDEX,
        s.PARTITION,
        F.col(NEW_ISR).alias("_isr"),
        F.col(s.ZK_VERSION).alias("_version"),
    )
    joined = table.join(F.broadcast(changes), [s.TOPIC_INDEX, s.PARTITION], "left")
    hit = F.col("_version").isNotNull()
    updates = {
        s.isr_col(k): F.when(hit, F.coalesce(F.get("_isr", k), F.lit(s.EMPTY_SLOT))).otherwise(
            F.col(s.isr_col(k))
        )
        for k in range(w)
    }
    updates[s.ZK_VERSION] = F.when(hit, F.col("_version")).otherwise(F.col(s.ZK_VERSION))
    return r.maybe_increment_hw(r.replace(joined, updates).drop("_isr", "_version"))


def _tick_after(starts: Mapping[int, int], period: int, broker: Column, after: Column) -> Column:
    """The first run of ``broker``'s periodic task strictly after ``after``; its task runs at
    ``start + n * period`` from the broker's start."""
    start = r._lookup(starts, "bigint", broker)
    return start + (F.floor((after - start) / period) + 1) * period


def outlook(
    table: DataFrame,
    c: r.Conditions,
    rule: IsrRule,
    checking: frozenset[int],
    starts: Mapping[int, int],
    checked_ms: int,
    down: frozenset[int] = frozenset(),
) -> DataFrame:
    """One row: the next time (> ``c.start_ms``, null for never) a leader's rules change an ISR
    under ``c``, and the gauges now. ``checking``: brokers whose ``isr-expiration`` task runs;
    ``checked_ms``: the last time it ran (its runs up to then are done); ``down``: crashed
    brokers (counted as down, see the module docstring)."""
    w = s.width(table)
    m = r.Motion(c, w)
    table = m.prepare(table)
    leader = F.col(s.LEADER)
    t0 = F.lit(c.start_ms).cast("bigint")
    checked = F.lit(checked_ms).cast("bigint")
    period = rule.period_ms
    runs = r.member(leader, checking) & (leader != s.NO_LEADER)
    if rule.count_rule:
        # The leader's next run and each follower's lag then, once, as columns: the crossing
        # time reads them several times per position.
        first = _tick_after(starts, period, leader, checked)
        table = table.withColumn("_first", first)
        first = F.col("_first")
        table = table.withColumns({f"_lag_first_{k}": m.lag(k, first) for k in range(w)})
    candidates: list[Column] = []
    for k in range(w):
        member = r.in_isr(k, w) & r.is_follower(k) & runs
        if rule.count_rule:
            stuck = _tick_after(
                starts, period, leader, F.greatest(F.col(r.fetch_col(k)) + rule.lag_ms, checked)
            )
            candidates.append(F.when(member & ~m.fetching(k), stuck))
            growth = m.rate - F.when(m.fetching(k), m.fetch_rate(k)).otherwise(0.0)
            lag_first = F.col(f"_lag_first_{k}")
            short = F.lit(rule.max_messages + 2) - lag_first
            crossing = first + F.ceil(F.least(short * 1000 / growth, F.lit(r.MAX_COPY)))
            slow = F.when(lag_first > rule.max_messages, first).when(
                growth > 0, _tick_after(starts, period, leader, crossing - 1)
            )
            candidates.append(F.when(member & m.producing, slow))
        else:
            due = _tick_after(
                starts, period, leader, F.greatest(F.col(r.caught_col(k)) + rule.lag_ms, checked)
            )
            behind = m.leo(k, due) < m.leader_leo(due)
            candidates.append(F.when(member & behind, due))
        # A follower behind reaches the leader's LEO: outside the ISR it rejoins by then; in it,
        # its broker's throughput is shared anew (the shares are fixed between steps).
        gain = m.fetch_rate(k) - m.rate
        behind_now = m.lag(k, t0)
        # Capped as copies are: a gain near 0 puts the time past any run, inside a long.
        reach = t0 + F.ceil(F.least((behind_now + 2) * 1000 / gain, F.lit(r.MAX_COPY)))
        candidates.append(F.when(m.fetching(k) & (behind_now > 0) & (gain > 0), reach))
    next_ms = F.least(*[F.when(x > t0, x) for x in candidates])
    # The gauges count what is up (module docstring): ISR members not crashed, and a partition
    # whose leader crashed is offline although the controller has not moved it yet.
    up = (((x != s.EMPTY_SLOT) & ~r.member(x, down)).cast("int") for x in r.isr(w))
    size = sum(up, F.lit(0))
    replicas = sum(((x != s.EMPTY_SLOT).cast("int") for x in r.replicas(w)), F.lit(0))
    min_isr = r.min_isr_of(c)
    leader_down = (leader != s.NO_LEADER) & r.member(leader, down)
    led = (leader != s.NO_LEADER) & ~leader_down
    return table.agg(
        F.min(next_ms).alias(NEXT_MS),
        F.sum((led & (size < replicas)).cast("long")).alias(URP),
        F.sum((led & (size < min_isr)).cast("long")).alias(UNDER_MIN),
        F.sum((led & (size == min_isr)).cast("long")).alias(AT_MIN),
        F.sum((~led).cast("long")).alias(OFFLINE),
        F.sum(leader_down.cast("long")).alias(LEADER_DOWN),
        F.count(F.lit(1)).alias(PARTITIONS),
    )
