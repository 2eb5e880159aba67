"""Which partition moves of a reassignment plan to start next, under movement caps.

An executor (an operator, or Cruise Control's) does not submit a large plan at once: it keeps a
bounded number of partition moves in flight and starts more as moves complete. ``WavePlanner``
holds the moves not yet started and those in flight; ``next_wave`` picks, in plan order, every
pending move that fits beside the moves in flight (moves that do not fit are skipped, not waited
for, as Cruise Control's executor does), and ``finished`` frees their slots.

The caps, checked against the moves in flight including the ones being added:

* ``per_broker``: moves a broker takes part in, as a broker that gains a replica (it copies the
  log) or loses one (Cruise Control's ``num.concurrent.partition.movements.per.broker``);
* ``total``: moves in the whole cluster (None: no limit);
* ``leader``: moves whose preferred leader (first replica) changes (Cruise Control's
  ``num.concurrent.leader.movements``), so also at most that many in any one wave.

Every cap is at least 1, and a move takes part at most once per broker, so a move always fits
when nothing is in flight: the planner never stalls while moves are pending.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

PartitionKey = tuple[str, int]


@dataclass(frozen=True)
class Move:
    """One plan entry to run: the partition's replicas before and after, and its log size."""

    topic: str
    partition: int
    before: tuple[int, ...]
    after: tuple[int, ...]
    size_bytes: int

    @property
    def key(self) -> PartitionKey:
        return (self.topic, self.partition)

    @property
    def adding(self) -> frozenset[int]:
        """Brokers that gain a replica: each copies the whole log."""
        return frozenset(self.after) - frozenset(self.before)

    @property
    def removing(self) -> frozenset[int]:
        return frozenset(self.before) - frozenset(self.after)

    @property
    def brokers(self) -> frozenset[int]:
        """The brokers the move occupies (a reorder occupies none)."""
        return self.adding | self.removing

    @property
    def moves_leader(self) -> bool:
        return self.after[0] != self.before[0]

    @property
    def copied_bytes(self) -> int:
        """Bytes the move copies: the log once per new replica."""
        return self.size_bytes * len(self.adding)


@dataclass(frozen=True)
class Caps:
    """The movement caps (each >= 1; ``total`` None for no cluster-wide limit)."""

    per_broker: int = 5
    total: int | None = None
    leader: int = 1000

    def __post_init__(self) -> None:
        for name, value in (("per_broker", self.per_broker), ("total", self.total),
                            ("leader", self.leader)):  # fmt: skip
            if value is not None and value < 1:
                raise ValueError(f"{name} must be 1 or more, got {value}")


class WavePlanner:
    """The pending moves (in plan order) and the moves in flight, under ``caps``."""

    def __init__(self, moves: Sequence[Move], caps: Caps) -> None:
        keys = [m.key for m in moves]
        if len(set(keys)) != len(keys):
            raise ValueError("a partition is listed twice; each move runs once")
        self.caps = caps
        self.pending: list[Move] = list(moves)
        self.in_flight: dict[PartitionKey, Move] = {}
        self._per_broker: Counter[int] = Counter()
        self._leaders = 0

    @property
    def done(self) -> bool:
        return not self.pending and not self.in_flight

    def _fits(self, move: Move) -> bool:
        caps = self.caps
        if caps.total is not None and len(self.in_flight) >= caps.total:
            return False
        if move.moves_leader and self._leaders >= caps.leader:
            return False
        return all(self._per_broker[b] < caps.per_broker for b in move.brokers)

    def next_wave(self) -> list[Move]:
        """Start every pending move that fits, in plan order; the moves started (maybe none)."""
        wave: list[Move] = []
        kept: list[Move] = []
        for move in self.pending:
            if self._fits(move):
                self._start(move)
                wave.append(move)
            else:
                kept.append(move)
        self.pending = kept
        return wave

    def _start(self, move: Move) -> None:
        self.in_flight[move.key] = move
        self._per_broker.update(move.brokers)
        self._leaders += move.moves_leader

    def finished(self, keys: Iterable[PartitionKey]) -> list[Move]:
        """Moves in flight that completed; returns them (keys not in flight are ignored)."""
        out = []
        for key in keys:
            move = self.in_flight.pop(key, None)
            if move is None:
                continue
            self._per_broker.subtract(move.brokers)
            self._leaders -= move.moves_leader
            out.append(move)
        return out

    def load(self) -> tuple[int, dict[int, int], int]:
        """Moves in flight, per broker (brokers with one or more), and those moving a leader."""
        return (
            len(self.in_flight),
            {b: n for b, n in sorted(self._per_broker.items()) if n > 0},
            self._leaders,
        )
