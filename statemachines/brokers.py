"""Broker sets as Column predicates, a distinct count of broker ids, and the cluster view the
elections read (as literals, or from columns of the table).

The controller knows its brokers on the driver (there are few); partitions are many. A
``BrokerSet`` turns "is broker b in this set" into an O(1) bit test in a literal array of 64-bit
words. Spark compiles an array literal as a reference, not into the code, so a plan's generated
code is the same whichever brokers the set holds: the next event, with other brokers failing or
starting, reuses the compiled (and JIT-warm) code. ``isin``, whose values are compiled in, serves
only ids beyond the word range.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import reduce

from pyspark.sql import Column
from pyspark.sql import functions as F

from statemachines import schemas as s
from statemachines.columns import literal_array, runtime_int

_LOOKUP_LIMIT = 1 << 20  # broker ids above this use isin
_MEMBERSHIP_LIMIT = 512
_MEMBERSHIP: dict[tuple[frozenset[int], str], Column] = {}


@dataclass(frozen=True)
class BrokerSet:
    """An immutable set of broker ids that builds membership Columns."""

    ids: frozenset[int] = field(default_factory=frozenset)

    @classmethod
    def of(cls, ids: Iterable[int]) -> BrokerSet:
        return cls(frozenset(int(b) for b in ids))

    def __contains__(self, broker: int) -> bool:
        return broker in self.ids

    def __or__(self, other: BrokerSet) -> BrokerSet:
        return BrokerSet(self.ids | other.ids)

    def __sub__(self, other: BrokerSet) -> BrokerSet:
        return BrokerSet(self.ids - other.ids)

    def contains(self, broker: Column) -> Column:
        """True where ``broker`` is in the set; false for EMPTY_SLOT and unknown ids."""
        if not self.ids:
            return F.lit(False)
        # Every event asks about the same few sets and columns many times; a Column is an
        # immutable expression, so one built for (set, column) serves them all.
        key = (self.ids, str(broker))
        cached = _MEMBERSHIP.get(key)
        if cached is None:
            if len(_MEMBERSHIP) >= _MEMBERSHIP_LIMIT:
                _MEMBERSHIP.clear()
            cached = _MEMBERSHIP[key] = self._membership(broker)
        return cached

    @property
    def in_word_range(self) -> bool:
        """Whether ``words`` can hold the set (no negative id, none above the word range)."""
        return not self.ids or (min(self.ids) >= 0 and max(self.ids) <= _LOOKUP_LIMIT)

    def words(self) -> Column:
        """The set as a literal array of 64-bit words (bit ``b mod 64`` of word ``b div 64``),
        for ``in_words``; only for a set ``in_word_range``."""
        words = [0] * (max(self.ids, default=0) // 64 + 1)
        for b in self.ids:
            words[b // 64] |= 1 << (b % 64)
        # Literal longs are signed: map bit 63 to the negative value Spark expects.
        return literal_array([w - (1 << 64) if w >= 1 << 63 else w for w in words], "bigint")

    def _membership(self, broker: Column) -> Column:
        if not self.in_word_range:
            return broker.isin(sorted(self.ids))
        return in_words(self.words(), broker)


def in_words(words: Column, broker: Column) -> Column:
    """True where ``broker`` is in the set ``words`` holds (``BrokerSet.words``): the words may
    be a column, so a plan built once serves every set."""
    word = F.get(words, F.shiftright(broker, 6))
    # shiftright with a per-row amount needs the SQL function (the Python one takes an int).
    bit = F.call_function("shiftright", word, F.pmod(broker, F.lit(64))).bitwiseAND(F.lit(1))
    return F.coalesce((broker >= 0) & (bit == 1), F.lit(False))


def distinct_brokers(brokers: Sequence[Column], words: range) -> Column:
    """An aggregate: how many distinct ids ``brokers`` (nulls ignored) hold over the rows, for
    ids in the 64-bit ``words`` of ``BrokerSet.words``' layout (others are not counted).

    One bit per broker is OR-ed into each word, a plain aggregate that Spark runs in generated
    code; a set of ids (``collect_set``) is an object aggregate, evaluated row by row."""
    per_word = [
        F.bit_count(F.bit_or(reduce(Column.bitwiseOR, [_bit_in_word(b, j) for b in brokers])))
        for j in words
    ]
    return F.coalesce(reduce(lambda a, c: a + c, per_word), F.lit(0))  # 0 without rows


def _bit_in_word(broker: Column, word: int) -> Column:
    """Bit ``broker mod 64`` where ``broker`` falls in word ``word``; else (and for null) 0."""
    # A per-row shift amount needs the SQL function (the Python one takes an int).
    bit = F.call_function("shiftleft", F.lit(1).cast("long"), broker.bitwiseAND(F.lit(63)))
    return F.when(F.shiftright(broker, 6) == word, bit).otherwise(F.lit(0).cast("long"))


class _Replicas:
    """Per-position liveness over the sets of a view (``ClusterView`` or ``ViewColumns``)."""

    offline_dir_mask: str | None
    live: BrokerSet | WordsColumn
    live_or_shutting_down: BrokerSet | WordsColumn

    def dir_online(self, k: int) -> Column:
        """False where replica_k sits on a failed log directory."""
        if self.offline_dir_mask is None:
            return F.lit(True)
        return F.col(self.offline_dir_mask).bitwiseAND(F.lit(1 << k)) == 0

    def online(self, k: int) -> Column:
        """Kafka's ``isReplicaOnline`` for replica position k (excludes shutting-down brokers)."""
        return self.live.contains(F.col(s.replica_col(k))) & self.dir_online(k)

    def online_or_shutting_down(self, k: int) -> Column:
        """``isReplicaOnline(..., includeShuttingDownBrokers = true)`` for position k."""
        return self.live_or_shutting_down.contains(F.col(s.replica_col(k))) & self.dir_online(k)


VIEW_LIVE = "_view_live"
VIEW_SHUTTING_DOWN = "_view_shutting_down"
VIEW_LIVE_OR_SHUTTING_DOWN = "_view_live_or_shutting_down"
VIEW_EPOCH = "_view_controller_epoch"


@dataclass(frozen=True)
class ClusterView(_Replicas):
    """What an election needs to know about brokers (spec §0 "live", §7.2).

    ``live`` are registered brokers that are not shutting down; ``shutting_down`` are registered
    brokers in controlled shutdown. ``offline_dir_mask`` optionally names an int column of the
    partitions table whose bit k marks replica_k as sitting on a failed log directory.
    """

    live: BrokerSet
    shutting_down: BrokerSet = field(default_factory=BrokerSet)
    controller_epoch: int = 1
    offline_dir_mask: str | None = None

    def __post_init__(self) -> None:
        both = self.live.ids & self.shutting_down.ids
        if both:
            raise ValueError(
                f"brokers {sorted(both)} are both live and shutting down; "
                "live means registered and not in controlled shutdown"
            )

    @property
    def live_or_shutting_down(self) -> BrokerSet:  # type: ignore[override]
        return self.live | self.shutting_down

    def epoch_column(self) -> Column:
        return runtime_int(self.controller_epoch)

    def as_columns(self) -> tuple[ViewColumns, dict[str, Column]] | None:
        """This view read from columns, and the literal columns to add for it (None when a set
        holds ids beyond ``BrokerSet.words``)."""
        sets = {
            VIEW_LIVE: self.live,
            VIEW_SHUTTING_DOWN: self.shutting_down,
            VIEW_LIVE_OR_SHUTTING_DOWN: self.live_or_shutting_down,
        }
        if not all(b.in_word_range for b in sets.values()):
            return None
        cols = {name: b.words() for name, b in sets.items()}
        cols[VIEW_EPOCH] = self.epoch_column()
        return ViewColumns(self.offline_dir_mask), cols


@dataclass(frozen=True)
class WordsColumn:
    """A broker set held in a column of the table, as the words of ``BrokerSet.words``."""

    name: str

    def contains(self, broker: Column) -> Column:
        return in_words(F.col(self.name), broker)


@dataclass(frozen=True)
class ViewColumns(_Replicas):
    """A ``ClusterView`` read from the columns ``ClusterView.as_columns`` adds to the table.

    Columns built over it are the same whichever brokers the view holds: a plan's Columns can be
    built once and applied at every event (building them costs hundreds of JVM round trips).
    """

    offline_dir_mask: str | None = None
    live: WordsColumn = WordsColumn(VIEW_LIVE)
    shutting_down: WordsColumn = WordsColumn(VIEW_SHUTTING_DOWN)
    live_or_shutting_down: WordsColumn = WordsColumn(VIEW_LIVE_OR_SHUTTING_DOWN)

    def epoch_column(self) -> Column:
        return F.col(VIEW_EPOCH)


# What the elections read about brokers.
BrokerView = ClusterView | ViewColumns
