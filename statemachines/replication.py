"""The brokers' side of replication as one table, advanced in bulk over virtual time.

One row per partition; one set of columns per replica position, as in the controller's compact
table (``schemas``), so a step over millions of replicas is one narrow transform of int and long
columns with no shuffle. Width W is the number of ``replica_k`` columns.

    topic_index, partition
    replica_k               the broker at position k (EMPTY_SLOT past the end)
    isr_k                   the ISR as the partition's brokers know it, in ISR order
    leader, leader_epoch, zk_version, controller_epoch
                            the leadership the brokers hold: the last LeaderAndIsr, or the
                            leader's own ISR write (§12.4)
    leader_start            the leader's LEO when it became leader for this epoch (§12.3)
    acked                   end offset of the records producers were told are written
    lost                    acknowledged records lost so far (unclean elections, truncation)
    last_leader             who led before the partition went offline
    acked_epochs            the lineage of the acknowledged records ``[0, acked)``: a new
                            leader's log is held to it, not to a log the failure shortened
    awaited                 end offset of the acks=all records waiting for the high watermark
    refused                 records refused with NOT_ENOUGH_REPLICAS (acks=all, ISR short)
    unserved                records produced while no leader served the partition
    leo_k                   the replica's log end offset
    hw_k                    its high watermark; the leader's is the partition's
    caught_k, fetch_k, fetch_leo_k
                            lastCaughtUpTimeMs, lastFetchTimeMs, lastFetchLeaderLogEndOffset,
                            which the leader keeps for each follower (§12.1)
    flushed_k               the offset below which the log is on disk
    known_epoch_k           the leader epoch of the last LeaderAndIsr the replica's broker took
                            for the partition, STOPPED after a StopReplica (or before any): what
                            its fetches carry. The leader refuses a fetch of another epoch
                            (FENCED_LEADER_EPOCH, KIP-320), so only a replica that knows the
                            current epoch copies records and can rejoin the ISR
    epochs_k                the log's leader-epoch lineage, ``(epoch, start_offset)`` of each run
                            of records (§13.1); the epoch rule reads it as the epoch cache, the
                            high-watermark rule ignores it, and divergence is judged by it

Between two steps nothing a broker does changes (``Conditions``), so every quantity moves in
closed form: the leader's LEO grows with its topic's produce rate, a fetching follower moves at
its share of its broker's fetch throughput and never passes the leader. ``advance`` jumps from
one step to the next, so an idle hour costs one step.

Followers fetch continuously: one at the leader's LEO is caught up now (§12.1's second branch is
not needed); it learns the leader's HW as it was one ``replica.fetch.wait.max.ms`` earlier.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from statemachines import replication_epochs as epochs
from statemachines import schemas as s
from statemachines.columns import in_list, isr, literal_array
from statemachines.replication_throttles import Throttles, capped

LEADER_START = "leader_start"
ACKED = "acked"
LOST = "lost"
MAX_COPY = 1e15  # records one step may copy: far past any log, far inside a long
LAST_LEADER = "last_leader"  # who led before the partition went offline: whose records count
ACKED_EPOCHS = "acked_epochs"
AWAITED = "awaited"
REFUSED = "refused"
UNSERVED = "unserved"
STOPPED = -1  # known_epoch of a replica that was sent StopReplica, or never a LeaderAndIsr


def leo_col(k: int) -> str:
    return f"leo_{k}"


def hw_col(k: int) -> str:
    return f"hw_{k}"


def caught_col(k: int) -> str:
    return f"caught_{k}"


def fetch_col(k: int) -> str:
    return f"fetch_{k}"


def fetch_leo_col(k: int) -> str:
    return f"fetch_leo_{k}"


def flushed_col(k: int) -> str:
    return f"flushed_{k}"


def epochs_col(k: int) -> str:
    return f"epochs_{k}"


def known_epoch_col(k: int) -> str:
    return f"known_epoch_{k}"


SLOT_LONGS = (
    leo_col, hw_col, caught_col, fetch_col, fetch_leo_col, flushed_col, known_epoch_col,
)  # fmt: skip


def slot_columns(k: int) -> list[str]:
    """The per-replica log columns of position ``k`` (not the broker id)."""
    return [c(k) for c in SLOT_LONGS] + [epochs_col(k)]


def columns(w: int) -> list[str]:
    """The replication table's columns, in order, for width ``w``."""
    return [
        s.TOPIC_INDEX,
        s.PARTITION,
        *(s.replica_col(k) for k in range(w)),
        *(s.isr_col(k) for k in range(w)),
        s.LEADER,
        s.LEADER_EPOCH,
        s.ZK_VERSION,
        s.CONTROLLER_EPOCH,
        LEADER_START,
        ACKED,
        LOST,
        LAST_LEADER,
        ACKED_EPOCHS,
        AWAITED,
        REFUSED,
        UNSERVED,
        *(c for k in range(w) for c in slot_columns(k)),
    ]


@dataclass(frozen=True)
class Conditions:
    """What holds from ``start_ms`` to the next step: driver facts, literals in the plan.

    Broker sets hold ids; maps are keyed by broker id or topic index. A broker missing from
    ``fetch_share`` fetches nothing; ``throttles`` cap the shares of lagging followers.
    """

    start_ms: int
    fetching: frozenset[int] = frozenset()  # brokers whose replica fetchers run
    serving: frozenset[int] = frozenset()  # brokers that answer fetches and take produce
    fetch_share: Mapping[int, float] = field(default_factory=dict)  # bytes/s, lagging replica
    caught_share: Mapping[int, float] = field(default_factory=dict)  # bytes/s, caught-up one
    throttles: Throttles = field(default_factory=Throttles)  # KIP-73 throttles, their shares
    rates: Mapping[int, float] = field(default_factory=dict)  # topic -> records/s per partition
    rate_anchors: Mapping[int, int] = field(default_factory=dict)  # topic -> when its rate was set
    bytes_per_record: Mapping[int, int] = field(default_factory=dict)  # topic -> bytes
    min_isr: Mapping[int, int] = field(default_factory=dict)  # topic -> min.insync.replicas
    fetch_wait_ms: int = 500  # replica.fetch.wait.max.ms: how stale a follower's HW is
    flush_periods_ms: tuple[int, ...] = (30_000,)  # page cache write-back, log.flush.interval.ms
    flush_messages: int | None = None  # log.flush.interval.messages
    # Topics with flush.ms / flush.messages overrides: their own flush periods (the page cache's
    # and their flush.ms) and flush.messages, in place of the broker's.
    topic_flush_periods_ms: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    topic_flush_messages: Mapping[int, int] = field(default_factory=dict)


def flush_groups(c: Conditions, end_ms: int) -> list[tuple[frozenset[int] | None, list[int]]]:
    """The flush boundaries inside the step by group of topics: each override's topics, then
    None for every other topic (``_flush_boundaries`` of its periods)."""
    by_periods: dict[tuple[int, ...], set[int]] = {}
    for topic, periods in sorted(c.topic_flush_periods_ms.items()):
        by_periods.setdefault(tuple(periods), set()).add(topic)
    groups: list[tuple[frozenset[int] | None, list[int]]] = [
        (frozenset(topics), _flush_boundaries(c, end_ms, periods))
        for periods, topics in sorted(by_periods.items())
    ]
    return [*groups, (None, _flush_boundaries(c, end_ms, c.flush_periods_ms))]


# -- small Column builders ---------------------------------------------------------------------


def _map(values: Mapping[int, float] | Mapping[int, int], kind: str) -> Column:
    if not values:
        return F.create_map().cast(f"map<int,{kind}>")
    keys = sorted(values)
    return F.map_from_arrays(
        F.array(*[F.lit(int(k)) for k in keys]), F.array(*[F.lit(values[k]) for k in keys])
    ).cast(f"map<int,{kind}>")


def _lookup(values: Mapping[int, float] | Mapping[int, int], kind: str, key: Column) -> Column:
    return F.coalesce(F.element_at(_map(values, kind), key), F.lit(0).cast(kind))


def member(broker: Column, brokers: frozenset[int]) -> Column:
    # An array literal is one reference in the generated code; ``isin`` of a hundred brokers
    # is a hundred-case switch at every use, which pushed the plans past 64 KB.
    if not brokers:
        return F.lit(False)
    return F.array_contains(literal_array(sorted(brokers)), broker)


def pick(cases: Sequence[tuple[Column, Column]], default: Column) -> Column:
    """The value of the first (condition, value) pair whose condition holds, else ``default``."""
    expr = default
    for cond, value in reversed(cases):
        expr = F.when(cond, value).otherwise(expr)
    return expr


def replace(table: DataFrame, updates: Mapping[str, Column]) -> DataFrame:
    """``table.withColumns(updates)``, every new value computed from the old columns.

    Spark resolves a column referenced inside a higher-order function's lambda against the
    aliases of the same projection before the input's columns (``withColumns({"a": a + 1,
    "b": transform(arr, x -> x + a)})`` adds the new ``a``), so the new values are first
    added under names of their own, then renamed.
    """
    staged = {f"_new_{name}": value for name, value in updates.items()}
    renamed = {name: F.col(f"_new_{name}") for name in updates}
    return table.withColumns(staged).withColumns(renamed).drop(*staged)


def replicas(w: int) -> list[Column]:
    return [F.col(s.replica_col(k)) for k in range(w)]


def is_leader(k: int) -> Column:
    return (F.col(s.replica_col(k)) == F.col(s.LEADER)) & (F.col(s.LEADER) != s.NO_LEADER)


def in_isr(k: int, w: int) -> Column:
    return in_list(F.col(s.replica_col(k)), isr(w))


def is_follower(k: int) -> Column:
    return (F.col(s.replica_col(k)) != s.EMPTY_SLOT) & ~is_leader(k)


def knows_epoch(k: int) -> Column:
    """Position k's fetches carry the leader's epoch: any other is refused (KIP-320's
    ``FENCED_LEADER_EPOCH``, or ``UNKNOWN_LEADER_EPOCH``), and a stopped replica sends none."""
    return F.col(known_epoch_col(k)) == F.col(s.LEADER_EPOCH)


def leader_value(w: int, name: type[str] | object, default: Column) -> Column:
    """The leader's value of a per-replica column (``name(k)``)."""
    return pick([(is_leader(k), F.col(name(k))) for k in range(w)], default)  # type: ignore[operator]


def isr_size(w: int) -> Column:
    return reduce(lambda a, b: a + b, [(c != s.EMPTY_SLOT).cast("int") for c in isr(w)], F.lit(0))


def min_isr_of(c: Conditions) -> Column:
    return F.greatest(_lookup(c.min_isr, "int", F.col(s.TOPIC_INDEX)), F.lit(1))


# -- the closed forms between two steps --------------------------------------------------------


_LEADER_LEO = "_m_leader_leo"
_RATE = "_m_rate"
_DEMAND = "_m_demand"
_SERVES = "_m_serves"
_ANCHOR = "_m_anchor"


def _fetching_col(k: int) -> str:
    return f"_m_fetching_{k}"


def _rate_col(k: int) -> str:
    return f"_m_rate_{k}"


@dataclass(frozen=True)
class Motion:
    """How each row moves from ``c.start_ms`` on, for width ``w``.

    ``prepare`` adds the row's constants of the interval as columns once (the leader's LEO, the
    produce rate, each position's fetching flag and rate); the closed forms read them, so a
    formula that needs the leader's LEO at several times does not repeat the CASE behind it.
    ``done`` drops them.
    """

    c: Conditions
    w: int

    def prepare(self, table: DataFrame) -> DataFrame:
        c, topic, leader = self.c, F.col(s.TOPIC_INDEX), F.col(s.LEADER)
        serves = (leader != s.NO_LEADER) & member(leader, c.serving)
        producing = F.col(_SERVES) & (isr_size(self.w) >= min_isr_of(c))
        cols: dict[str, Column] = {
            _LEADER_LEO: leader_value(self.w, leo_col, F.lit(0).cast("bigint")),
            _RATE: F.when(producing, F.col(_DEMAND)).otherwise(0.0),
            _ANCHOR: _lookup(c.rate_anchors, "bigint", topic),
        }
        size = F.greatest(_lookup(c.bytes_per_record, "int", topic), F.lit(1))
        for k in range(self.w):
            broker = F.col(s.replica_col(k))
            cols[_fetching_col(k)] = (
                is_follower(k)
                & (leader != s.NO_LEADER)
                & member(broker, c.fetching)
                & member(leader, c.serving)
                & knows_epoch(k)
            )
            at_end = F.col(leo_col(k)) >= F.col(_LEADER_LEO)
            lagging = capped(
                c.throttles, _lookup(c.fetch_share, "double", broker), s.replica_col(k),
                ~in_isr(k, self.w),
            )  # fmt: skip
            share = F.when(at_end, _lookup(c.caught_share, "double", broker)).otherwise(lagging)
            cols[_rate_col(k)] = share / size
        first = {
            _LEADER_LEO: cols.pop(_LEADER_LEO),
            _DEMAND: _lookup(c.rates, "double", topic),
            _SERVES: serves,
        }
        return table.withColumns(first).withColumns(cols)

    def done(self, table: DataFrame) -> DataFrame:
        return table.drop(_LEADER_LEO, _RATE, _DEMAND, _SERVES, _ANCHOR, *[
            n for k in range(self.w) for n in (_fetching_col(k), _rate_col(k))
        ])  # fmt: skip

    @property
    def producing(self) -> Column:
        """The leader takes the topic's rate: it serves, and acks=all producers are not refused
        for a short ISR (NOT_ENOUGH_REPLICAS, §12.3)."""
        return F.col(_RATE) > 0

    @property
    def rate(self) -> Column:
        return F.col(_RATE)

    def produced(self, at: Column) -> Column:
        """Records the leader appends from the step's start to ``at``: anchored at the time the
        rate was set, so the count does not depend on how many steps lie between."""
        return self._produced(F.col(_RATE), at)

    def demanded(self, at: Column) -> Column:
        """Records the topic's producers send to the partition from the step's start to ``at``,
        taken or not."""
        return self._produced(F.col(_DEMAND), at)

    @property
    def serves(self) -> Column:
        """The partition has a leader that answers."""
        return F.col(_SERVES)

    def _produced(self, rate: Column, at: Column) -> Column:
        anchor = F.col(_ANCHOR)
        start = F.lit(self.c.start_ms).cast("bigint")
        total = F.floor(rate * (at - anchor) / 1000) - F.floor(rate * (start - anchor) / 1000)
        return F.when(rate > 0, total).otherwise(F.lit(0).cast("bigint"))

    def leader_leo(self, at: Column) -> Column:
        return F.col(_LEADER_LEO) + self.produced(at)

    def fetching(self, k: int) -> Column:
        """Position k follows a leader that answers, from a broker whose fetchers run, with the
        leader's current epoch (``knows_epoch``)."""
        return F.col(_fetching_col(k))

    def fetch_rate(self, k: int) -> Column:
        """Records per second position k can copy: its broker's share over the record size. A
        follower at the leader's end takes what it needs while its broker keeps up; the rest of
        the broker's throughput is shared by the followers behind (``fetch_stats``)."""
        return F.col(_rate_col(k))

    def leo(self, k: int, at: Column) -> Column:
        start = F.lit(self.c.start_ms).cast("bigint")
        # Capped: a caught-up follower's share is unbounded in effect, and the records it could
        # copy over a long step must stay a long (the leader's LEO bounds them anyway).
        reach = F.least(self.fetch_rate(k) * (at - start) / 1000, F.lit(MAX_COPY))
        copied = F.col(leo_col(k)) + F.floor(reach)
        return (
            F.when(is_leader(k), self.leader_leo(at))
            .when(self.fetching(k), F.least(self.leader_leo(at), copied))
            .otherwise(F.col(leo_col(k)))
        )

    def high_watermark(self, at: Column) -> Column:
        """The leader's HW at ``at`` (§12.3): the least LEO of the ISR, never moving back."""
        ends = [self.leader_leo(at)] + [
            F.when(in_isr(k, self.w) & is_follower(k), self.leo(k, at)) for k in range(self.w)
        ]
        current = leader_value(self.w, hw_col, F.lit(0).cast("bigint"))
        moved = F.greatest(current, F.least(*ends))
        return F.when(member(F.col(s.LEADER), self.c.serving), moved).otherwise(current)

    def lag(self, k: int, at: Column) -> Column:
        return self.leader_leo(at) - self.leo(k, at)


def maybe_increment_hw(table: DataFrame) -> DataFrame:
    """Kafka's ``maybeIncrementLeaderHW`` after an ISR change (§12.3): the leader's high
    watermark moves up to the least LEO of the new ISR (never down). A shrink lets it jump to
    the leader's LEO, so the follower just removed cannot rejoin before it catches up."""
    w = s.width(table)
    leader_leo = leader_value(w, leo_col, F.lit(0).cast("bigint"))
    ends = [leader_leo] + [
        F.when(in_isr(k, w) & is_follower(k), F.col(leo_col(k))) for k in range(w)
    ]
    hw = leader_value(w, hw_col, F.lit(0).cast("bigint"))
    moved = F.greatest(hw, F.least(*ends))
    return replace(
        table,
        {hw_col(k): F.when(is_leader(k), moved).otherwise(F.col(hw_col(k))) for k in range(w)},
    )


def _flush_boundaries(c: Conditions, end_ms: int, periods: tuple[int, ...]) -> list[int]:
    """The last write-back of each flush period inside the step (none if it has none)."""
    out = []
    for period in periods:
        if period > 0 and (boundary := end_ms // period * period) >= c.start_ms:
            out.append(boundary)
    return out


def advance(table: DataFrame, c: Conditions, end_ms: int) -> DataFrame:
    """The table at ``end_ms``, every replica moved by ``c`` from ``c.start_ms`` (lazy)."""
    w = s.width(table)
    m = Motion(c, w)
    table = m.prepare(table)
    end = F.lit(end_ms).cast("bigint")
    learned = F.lit(max(c.start_ms, end_ms - c.fetch_wait_ms)).cast("bigint")
    hw_end, hw_learned = m.high_watermark(end), m.high_watermark(learned)
    leader_end = m.leader_leo(end)
    leader_epochs = leader_value(w, epochs_col, F.array().cast(epochs.EPOCHS_TYPE))
    produced = m.produced(end)
    groups = flush_groups(c, end_ms)
    overridden = frozenset(c.topic_flush_periods_ms)
    topic = F.col(s.TOPIC_INDEX)
    by_topic = _map(c.topic_flush_messages, "bigint")
    every = F.lit(c.flush_messages or None).cast("bigint")
    flush_messages = F.coalesce(F.element_at(by_topic, topic), every)
    updates: dict[str, Column] = {}
    for k in range(w):
        leo0, leo1 = F.col(leo_col(k)), m.leo(k, end)
        fetching = m.fetching(k)
        on_disk = [F.col(flushed_col(k))]
        for topics, boundaries in groups:
            own = ~member(topic, overridden) if topics is None else member(topic, topics)
            on_disk += [F.when(own, m.leo(k, F.lit(b).cast("bigint"))) for b in boundaries]
        if c.flush_messages or c.topic_flush_messages:
            n = flush_messages
            on_disk.append(F.when(n > 0, F.floor(leo1 / n) * n))
        updates[leo_col(k)] = leo1
        updates[hw_col(k)] = (
            F.when(is_leader(k), hw_end)
            .when(fetching, F.greatest(F.col(hw_col(k)), F.least(leo1, hw_learned)))
            .otherwise(F.col(hw_col(k)))
        )
        updates[caught_col(k)] = F.when(fetching & (leo1 >= leader_end), end).otherwise(
            F.col(caught_col(k))
        )
        updates[fetch_col(k)] = F.when(fetching, end).otherwise(F.col(fetch_col(k)))
        updates[fetch_leo_col(k)] = F.when(fetching, leader_end).otherwise(F.col(fetch_leo_col(k)))
        disk = on_disk[0] if len(on_disk) == 1 else F.greatest(*on_disk)
        updates[flushed_col(k)] = F.least(disk, leo1)
        appended = epochs.assign(F.col(epochs_col(k)), F.col(s.LEADER_EPOCH), leo0)
        updates[epochs_col(k)] = (
            F.when(is_leader(k) & (produced > 0), appended)
            .when(
                fetching & (leo1 > leo0),
                epochs.copy_lineage(F.col(epochs_col(k)), leader_epochs, leo0, leo1),
            )
            .otherwise(F.col(epochs_col(k)))
        )
    # The rate's producers use acks=all: their records wait for the high watermark, and are
    # acknowledged when it passes them while the ISR holds min.insync.replicas (§12.3).
    awaited = F.when(m.producing, F.greatest(F.col(AWAITED), leader_end)).otherwise(F.col(AWAITED))
    reached = F.greatest(F.col(ACKED), F.least(hw_end, awaited))
    acked = F.when(isr_size(w) >= min_isr_of(c), reached).otherwise(F.col(ACKED))
    no_lineage = F.array().cast(epochs.EPOCHS_TYPE)
    lineage = pick([(is_leader(k), updates[epochs_col(k)]) for k in range(w)], no_lineage)
    demanded = m.demanded(end)
    return m.done(
        replace(
            table,
            {
                **updates,
                ACKED: acked,
                ACKED_EPOCHS: acked_lineage(acked, lineage),
                AWAITED: awaited,
                REFUSED: F.col(REFUSED) + F.when(m.serves & ~m.producing, demanded).otherwise(0),
                UNSERVED: F.col(UNSERVED) + F.when(~m.serves, demanded).otherwise(0),
            },
        )
    )


def acked_lineage(acked: Column, leader_lineage: Column) -> Column:
    """The acknowledged records' lineage once ``acked`` replaced the ``ACKED`` column: the
    leader's lineage up to it where it grew (the leader holds every acknowledged record)."""
    grown = epochs.truncate_from_end(leader_lineage, acked)
    return F.when(acked > F.col(ACKED), grown).otherwise(F.col(ACKED_EPOCHS))
