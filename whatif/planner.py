"""The minimal-movement placement planner behind ``scale-out``, ``rebalance`` and ``decommission``.

Goal, in order: empty the removed brokers; bring every broker's replica count to within one of the
others (new brokers included); never make a partition's rack spread (its number of distinct racks)
worse; then bring preferred leaders (first replicas) per broker to within one of the others, by
reordering replicas inside a partition (no data moves); keep every partition's RF; move as few
replicas, then bytes, as possible.

How it scales: Spark aggregates the per-broker counts and samples, per over-full broker, a few more
candidate replicas than its excess (the sample is a hash of seed, partition and broker, so it is
deterministic); the driver runs a greedy pass over per-broker counts and picks concrete partitions
from those candidate lists. Each step moves one replica from the fullest broker that still has a
feasible move to the emptiest broker that may take it (not holding the partition already, rack
spread kept) when their counts differ by two or more. Such a pass never moves a replica onto a
broker it later takes one from, so it moves exactly the excess when racks do not constrain it. A
broker whose sample runs out is sampled again, with a larger quota. Preferred leaders follow the
same pattern: the partitions the replica pass touched plus a sample of the others led by
leader-heavy brokers; a step swaps the first replica with a follower on the emptiest broker, or,
when no partition links the two brokers directly, along the shortest chain of such swaps.

The lower bound (``lower_bound_moves``) is the fewest replica moves that give every broker a count
within one of the others with the removed brokers empty, racks ignored: the final counts are the
floor or ceiling of the mean, the ceilings going to the fullest brokers, and each broker above its
final count must lose the difference.
"""

from __future__ import annotations

import bisect
import gc
import heapq
import logging
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import pairwise

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from statemachines import schemas as s

log = logging.getLogger(__name__)

PartitionKey = tuple[str, int]

# Partition counts up to this collect every partition as a candidate (the greedy then sees the
# whole cluster); above it, per-broker samples sized to the excess.
FULL_COLLECT_PARTITIONS = 50_000
# Sample size: SAMPLE_FACTOR x the excess + SAMPLE_SLACK, per broker.
SAMPLE_FACTOR = 1.25
SAMPLE_SLACK = 64
MAX_ROUNDS = 4

_BYTES = "bytes"
_U = "_sample_u"
_POS = "_pos"
_HASH_RANGE = 1 << 30


@dataclass(frozen=True)
class PlacementTarget:
    """Where replicas may go: ``brokers`` (live and new), their ``racks`` (None = rackless), and
    the ``removed`` brokers to empty (decommissioned, or holding replicas but not live)."""

    brokers: tuple[int, ...]
    racks: Mapping[int, str | None]
    removed: frozenset[int] = frozenset()
    seed: int = 0

    @property
    def rack_aware(self) -> bool:
        """Racks are used only when every target broker has one (Kafka's rule, §9.4)."""
        return bool(self.brokers) and all(self.racks.get(b) is not None for b in self.brokers)


@dataclass
class PlacementPlan:
    """A plan: the original and final replicas of every partition it changes, and the figures."""

    original: dict[PartitionKey, tuple[int, ...]]
    final: dict[PartitionKey, tuple[int, ...]]
    replicas_before: dict[int, int]
    replicas_after: dict[int, int]
    leaders_before: dict[int, int]
    leaders_after: dict[int, int]
    lower_bound_moves: int
    replicas_moved: int
    bytes_moved: int
    leaders_moved: int
    rack_spread_reduced: int
    rack_aware: bool
    partitions: int
    replication_factors: frozenset[int] = frozenset()
    rounds: int = 1
    bytes_per_partition: dict[PartitionKey, int] = field(default_factory=dict)

    def changes(self) -> list[tuple[str, int, tuple[int, ...], tuple[int, ...]]]:
        """(topic, partition, before, after) of every changed partition, by topic then id."""
        return [
            (t, p, self.original[(t, p)], self.final[(t, p)])
            for t, p in sorted(self.final)
            if self.final[(t, p)] != self.original[(t, p)]
        ]


def lower_bound_moves(counts: Mapping[int, int], brokers: Iterable[int]) -> int:
    """Fewest moves giving every broker of ``brokers`` a count within one of the others and
    every other broker of ``counts`` none (racks ignored)."""
    targets = sorted(set(brokers))
    total = sum(counts.values())
    if not targets:
        return total
    floor, extra = divmod(total, len(targets))
    # The ceilings go to the fullest brokers: that keeps the most replicas where they are.
    by_count = sorted(targets, key=lambda b: (-counts.get(b, 0), b))
    final = {b: floor + (1 if i < extra else 0) for i, b in enumerate(by_count)}
    return sum(max(0, n - final.get(b, 0)) for b, n in counts.items())


def spread(counts: Mapping[int, int], brokers: Iterable[int]) -> int:
    """max - min of the counts over ``brokers`` (a missing broker counts 0)."""
    values = [counts.get(b, 0) for b in brokers]
    return max(values) - min(values) if values else 0


# -- the driver-side greedy ----------------------------------------------------------------------


class _Ordered:
    """Brokers ordered by (count, id), per group (rack), for the emptiest-first scans."""

    def __init__(self, counts: Mapping[int, int], group_of: Mapping[int, str | None]) -> None:
        self.group_of = dict(group_of)
        self.lists: dict[str | None, list[tuple[int, int]]] = {}
        for b, g in self.group_of.items():
            self.lists.setdefault(g, []).append((counts[b], b))
        for lst in self.lists.values():
            lst.sort()

    def update(self, broker: int, old: int, new: int) -> None:
        lst = self.lists[self.group_of[broker]]
        del lst[bisect.bisect_left(lst, (old, broker))]
        bisect.insort(lst, (new, broker))

    def minimum(self) -> int:
        return min(lst[0][0] for lst in self.lists.values() if lst)


class Greedy:
    """The planner's driver-side state: current replicas of the partitions it knows, per-broker
    counts, and the candidate lists; Spark-free so it is also the plain-Python planner."""

    def __init__(
        self,
        target: PlacementTarget,
        replica_counts: Mapping[int, int],
        leader_counts: Mapping[int, int],
    ) -> None:
        self.target = target
        self.receivers = [b for b in target.brokers if b not in target.removed]
        self.rack_aware = target.rack_aware
        self.rack_of: dict[int, str | None] = {
            b: (target.racks.get(b) if self.rack_aware else None)
            for b in set(self.receivers) | set(replica_counts) | set(leader_counts)
        }
        self.count: dict[int, int] = {b: 0 for b in self.receivers}
        self.count.update(replica_counts)
        self.leaders: dict[int, int] = {b: 0 for b in self.receivers}
        self.leaders.update(leader_counts)
        self.original: dict[PartitionKey, tuple[int, ...]] = {}
        self.current: dict[PartitionKey, list[int]] = {}
        self.size: dict[PartitionKey, int] = {}
        self.candidates: dict[int, list[PartitionKey]] = {}
        self.position: dict[int, int] = {}
        self.truncated: set[int] = set()
        self.replicas_moved = 0
        self.bytes_moved = 0
        self.rack_spread_reduced = 0
        self._order = _Ordered(
            {b: self.count[b] for b in self.receivers},
            {b: self.rack_of[b] for b in self.receivers},
        )
        self._groups = sorted(self._order.lists, key=lambda g: (g is None, g or ""))
        self._stuck: set[int] = set()

    # -- candidates

    def know(self, key: PartitionKey, replicas: Sequence[int], size: int = 0) -> None:
        """Remember a partition (its replicas as the snapshot has them) unless already known."""
        if key not in self.current:
            self.original[key] = tuple(replicas)
            self.current[key] = list(replicas)
            self.size[key] = size

    def add_candidates(self, broker: int, keys: Iterable[PartitionKey], truncated: bool) -> None:
        """Candidates to move off ``broker`` (known partitions), best first; ``truncated`` says
        the broker holds replicas not offered."""
        lst = self.candidates.setdefault(broker, [])
        have = set(lst)
        lst.extend(k for k in keys if k not in have)
        if truncated:
            self.truncated.add(broker)
        else:
            self.truncated.discard(broker)
        self._stuck.discard(broker)

    # -- replica moves

    def _allowed_groups(self, replicas: Sequence[int], donor: int) -> list[str | None]:
        if not self.rack_aware:
            return self._groups
        racks = [self.rack_of.get(b) for b in replicas]
        own = self.rack_of.get(donor)
        if racks.count(own) > 1:
            return self._groups  # the donor's rack stays covered: any rack keeps the spread
        present = set(racks)
        return [g for g in self._groups if g == own or g not in present]

    def _receiver(
        self, replicas: Sequence[int], groups: Iterable[str | None], limit: int | None
    ) -> tuple[int | None, bool]:
        """The emptiest broker of ``groups`` with at most ``limit`` replicas that does not hold
        the partition, and whether any broker of ``groups`` is at most at ``limit`` at all
        (when not, other partitions with the same racks cannot move either)."""
        best: tuple[int, int] | None = None
        room = False
        for g in groups:
            for entry in self._order.lists.get(g, ()):
                if (limit is not None and entry[0] > limit) or (best is not None and entry > best):
                    break
                room = True
                if entry[1] not in replicas:
                    best = entry
                    break
        return (None if best is None else best[1]), room

    def _move(self, key: PartitionKey, donor: int, receiver: int) -> None:
        reps = self.current[key]
        reps[reps.index(donor)] = receiver  # the new broker keeps the position (and leadership)
        self.count[donor] -= 1
        if donor in self._order.group_of:
            self._order.update(donor, self.count[donor] + 1, self.count[donor])
        self.count[receiver] += 1
        self._order.update(receiver, self.count[receiver] - 1, self.count[receiver])
        if reps[0] == receiver:
            self.leaders[donor] -= 1
            self.leaders[receiver] += 1
        self.replicas_moved += 1
        self.bytes_moved += self.size.get(key, 0)

    def empty_removed(self) -> None:
        """Move every offered replica off the removed brokers, each to the emptiest broker that
        keeps the partition's rack spread (or, when none can, the emptiest one at all)."""
        for donor in sorted(b for b in self.candidates if b in self.target.removed):
            for key in self.candidates[donor]:
                reps = self.current[key]
                if donor not in reps:
                    continue
                receiver, _ = self._receiver(reps, self._allowed_groups(reps, donor), None)
                if receiver is None:
                    receiver, _ = self._receiver(reps, self._groups, None)
                    if receiver is None:
                        continue  # RF above the receivers: nothing can take it
                    self.rack_spread_reduced += 1
                self._move(key, donor, receiver)
            self.position[donor] = len(self.candidates[donor])

    def balance_replicas(self) -> set[int]:
        """Greedy moves until no feasible move narrows the spread; the brokers whose sample ran
        out while they still wanted to give (sample them again) are returned."""
        starved: set[int] = set()
        heap = [(-n, b) for b, n in self.count.items() if b not in self.target.removed]
        heap = [e for e in heap if e[1] not in self._stuck and e[1] in self.candidates]
        heapq.heapify(heap)
        while heap:
            neg, donor = heapq.heappop(heap)
            if -neg != self.count[donor]:
                continue
            limit = self.count[donor] - 2
            if limit < self._order.minimum():
                break
            lst = self.candidates[donor]
            i = position_before = self.position.get(donor, 0)
            moved = blocked = False
            receiver: int | None = None
            while i < len(lst):
                key = lst[i]
                i += 1
                reps = self.current[key]
                if donor not in reps:
                    continue
                receiver, room = self._receiver(reps, self._allowed_groups(reps, donor), limit)
                if receiver is not None:
                    self._move(key, donor, receiver)
                    moved = True
                    break
                blocked = blocked or room
            self.position[donor] = scanned = i
            if moved:
                heapq.heappush(heap, (-self.count[donor], donor))
                if receiver in self.candidates and receiver not in self._stuck:
                    heapq.heappush(heap, (-self.count[receiver], receiver))
            else:
                self._stuck.add(donor)
                # More candidates help only where a broker had room but held the partition (or
                # every candidate moved); a donor whose racks have no room is done.
                if donor in self.truncated and (blocked or scanned == position_before):
                    starved.add(donor)
        return starved

    # -- preferred leaders

    def balance_leaders(self) -> None:
        """Swap preferred leaders inside known partitions until no swap (or chain of swaps)
        narrows the spread of preferred leaders per broker."""
        receivers = set(self.receivers)
        by_pair: dict[tuple[int, int], list[PartitionKey]] = {}
        for key in reversed(list(self.current)):  # known order: deterministic, best first
            reps = self.current[key]
            for r in reps[1:]:
                if r in receivers:
                    by_pair.setdefault((reps[0], r), []).append(key)
        order = _Ordered({b: self.leaders[b] for b in self.receivers}, dict.fromkeys(receivers))

        def usable(a: int, b: int) -> PartitionKey | None:
            lst = by_pair.get((a, b))
            while lst:
                reps = self.current[lst[-1]]
                if reps[0] == a and b in reps:
                    return lst[-1]
                lst.pop()
            return None

        def swap(key: PartitionKey, a: int, b: int) -> None:
            reps = self.current[key]
            j = reps.index(b)
            reps[0], reps[j] = b, a
            by_pair[(a, b)].pop()
            for r in reps[1:]:
                by_pair.setdefault((b, r), []).append(key)

        def shift(a: int, b: int) -> None:
            self.leaders[a] -= 1
            order.update(a, self.leaders[a] + 1, self.leaders[a])
            self.leaders[b] += 1
            order.update(b, self.leaders[b] - 1, self.leaders[b])
            heapq.heappush(heap, (-self.leaders[a], a))
            heapq.heappush(heap, (-self.leaders[b], b))

        heap = [(-self.leaders[b], b) for b in self.receivers]
        heapq.heapify(heap)
        while heap:
            neg, donor = heapq.heappop(heap)
            if -neg != self.leaders[donor]:
                continue
            limit = self.leaders[donor] - 2
            if limit < order.minimum():
                break
            done = False
            for count, r in order.lists[None]:
                if count > limit:
                    break
                key = usable(donor, r)
                if key is not None:
                    swap(key, donor, r)
                    shift(donor, r)
                    done = True
                    break
            if not done:
                path = self._chain(donor, limit, receivers, usable)
                if path:
                    for a, b in pairwise(path):
                        key = usable(a, b)
                        assert key is not None
                        swap(key, a, b)
                    shift(path[0], path[-1])
                    done = True
            # A donor with no step left drops out of the heap: counts only fall below it.

    def _chain(
        self,
        donor: int,
        limit: int,
        receivers: set[int],
        usable: Callable[[int, int], PartitionKey | None],
    ) -> list[int]:
        """Shortest donor → … → receiver chain of swaps ending at a broker with at most
        ``limit`` preferred leaders; empty when none."""
        parent: dict[int, int] = {donor: donor}
        queue = deque([donor])
        ordered = sorted(receivers)
        while queue:
            a = queue.popleft()
            for b in ordered:
                if b in parent or usable(a, b) is None:
                    continue
                parent[b] = a
                if self.leaders[b] <= limit:
                    path = [b]
                    while path[-1] != donor:
                        path.append(parent[path[-1]])
                    return path[::-1]
                queue.append(b)
        return []

    # -- results

    def changed(self) -> dict[PartitionKey, tuple[int, ...]]:
        return {k: tuple(v) for k, v in self.current.items() if tuple(v) != self.original[k]}


# -- Spark: counts and samples -------------------------------------------------------------------


@dataclass(frozen=True)
class _Stats:
    replicas: dict[int, int]
    leaders: dict[int, int]
    partitions: int
    replication_factors: frozenset[int]


def broker_stats(partitions: DataFrame) -> _Stats:
    """Replicas and preferred leaders per broker, the partition count and the RFs (one job)."""
    rows = (
        partitions.select(
            F.posexplode(s.REPLICAS).alias(_POS, s.BROKER), F.size(s.REPLICAS).alias("rf")
        )
        .groupBy(s.BROKER, "rf")
        .agg(F.count(F.lit(1)).alias("n"), F.sum((F.col(_POS) == 0).cast("long")).alias("lead"))
        .collect()
    )
    replicas: Counter[int] = Counter()
    leaders: Counter[int] = Counter()
    for row in rows:
        replicas[row[s.BROKER]] += row["n"]
        leaders[row[s.BROKER]] += row["lead"]
    return _Stats(
        dict(replicas), dict(leaders), sum(leaders.values()), frozenset(r["rf"] for r in rows)
    )


def with_bytes(partitions: DataFrame, sizes: DataFrame | None) -> DataFrame:
    """topic, partition, replicas, bytes (0 where the sizes file has no row)."""
    base = partitions.select(s.TOPIC, s.PARTITION, s.REPLICAS)
    if sizes is None:
        return base.withColumn(_BYTES, F.lit(0).cast("long"))
    sized = sizes.select(s.TOPIC, s.PARTITION, F.col(_BYTES).cast("long"))
    return base.join(sized, [s.TOPIC, s.PARTITION], "left").fillna(0, [_BYTES])


def _fraction_column(broker: Column, fractions: Mapping[int, float]) -> Column:
    pairs: list[Column] = []
    for b, f in sorted(fractions.items()):
        pairs += [F.lit(b), F.lit(float(f))]
    return F.coalesce(F.element_at(F.create_map(*pairs), broker), F.lit(0.0))


def _u(seed: int, broker: Column) -> Column:
    h = F.xxhash64(F.lit(seed).cast("long"), F.col(s.TOPIC), F.col(s.PARTITION), broker)
    return (F.pmod(h, F.lit(_HASH_RANGE)) / F.lit(float(_HASH_RANGE))).alias(_U)


def sample_replicas(
    sized: DataFrame, fractions: Mapping[int, float], seed: int
) -> list[tuple[int, PartitionKey, list[int], int, float]]:
    """(broker, key, replicas, bytes, u) for a deterministic ``fractions[broker]`` share of each
    broker's replicas; no shuffle, one job."""
    if not fractions:
        return []
    exploded = sized.select("*", F.explode(s.REPLICAS).alias(s.BROKER))
    u = _u(seed, F.col(s.BROKER))
    picked = exploded.select("*", u).where(F.col(_U) < _fraction_column(F.col(s.BROKER), fractions))
    table = picked.select(s.BROKER, s.TOPIC, s.PARTITION, s.REPLICAS, _BYTES, _U).toArrow()
    cols = [table.column(i).to_pylist() for i in range(table.num_columns)]
    return [(b, (t, p), r, n, x) for b, t, p, r, n, x in zip(*cols, strict=True)]


def sample_led(
    sized: DataFrame, fractions: Mapping[int, float], seed: int
) -> list[tuple[PartitionKey, list[int], int]]:
    """(key, replicas, bytes) for a ``fractions[leader]`` share of the partitions each broker
    leads (preferred leader = first replica)."""
    if not fractions:
        return []
    leader = F.get(F.col(s.REPLICAS), 0)
    picked = sized.where(_u(seed + 1, leader) < _fraction_column(leader, fractions))
    table = picked.select(s.TOPIC, s.PARTITION, s.REPLICAS, _BYTES).toArrow()
    cols = [table.column(i).to_pylist() for i in range(table.num_columns)]
    return [((t, p), r, n) for t, p, r, n in zip(*cols, strict=True)]


def _fraction(want: float, have: int) -> float:
    return 1.0 if have <= 0 or want >= have else want / have


@contextmanager
def without_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector: the greedy holds millions of small tuples and lists
    (no cycles), and the collector's repeated full scans of them would triple the run time."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@contextmanager
def timed(what: str) -> Iterator[None]:
    """Log how long the block took (INFO): where a large plan spends its time."""
    start = time.perf_counter()
    yield
    log.info("planner: %s in %.2f s", what, time.perf_counter() - start)


def plan_placement(
    partitions: DataFrame,
    target: PlacementTarget,
    sizes: DataFrame | None = None,
    full_collect_partitions: int = FULL_COLLECT_PARTITIONS,
) -> PlacementPlan:
    """The minimal-movement plan for ``partitions`` (``PARTITIONS_SCHEMA``) onto ``target``."""
    with without_gc():
        return _plan_placement(partitions, target, sizes, full_collect_partitions)


def _plan_placement(
    partitions: DataFrame,
    target: PlacementTarget,
    sizes: DataFrame | None,
    full_collect_partitions: int,
) -> PlacementPlan:
    sized = with_bytes(partitions, sizes)
    with timed("per-broker counts"):
        stats = broker_stats(partitions)
    # Replicas on brokers outside the target (not live) leave too: nothing may stay there.
    leaving = {b for b in stats.replicas if b in target.removed or b not in set(target.brokers)}
    target = PlacementTarget(target.brokers, target.racks, frozenset(leaving), target.seed)
    greedy = Greedy(target, stats.replicas, stats.leaders)
    receivers = greedy.receivers
    small = stats.partitions <= full_collect_partitions
    ceil = _ceilings(stats.replicas, receivers, greedy.rack_of)
    quota: dict[int, float] = {}
    for b, n in stats.replicas.items():
        excess = n if b in leaving else max(0, n - ceil[b])
        if excess > 0 or small:
            quota[b] = n if (b in leaving or small) else SAMPLE_FACTOR * excess + SAMPLE_SLACK
    rounds = 0
    while quota and rounds < MAX_ROUNDS:
        rounds += 1
        fractions = {b: _fraction(q, stats.replicas[b]) for b, q in quota.items()}
        with timed(f"replica sample, round {rounds}"):
            rows = sample_replicas(sized, fractions, target.seed)
        rows.sort(key=lambda r: (r[3], r[4], r[1]))  # fewest bytes first, then the hash
        offered: dict[int, list[PartitionKey]] = {}
        for broker, key, reps, size, _ in rows:
            greedy.know(key, reps, size)
            offered.setdefault(broker, []).append(key)
        for b in quota:
            greedy.add_candidates(b, offered.get(b, []), fractions[b] < 1.0)
        with timed(f"replica moves, round {rounds} ({len(rows)} candidates)"):
            if rounds == 1:
                greedy.empty_removed()
            starved = greedy.balance_replicas()
        quota = {b: 2 * quota[b] + SAMPLE_SLACK for b in starved if b in quota}
    _balance_leaders(greedy, sized, stats, target, small)
    final = greedy.changed()
    original = {k: greedy.original[k] for k in final}
    leaders_moved = sum(1 for k in final if final[k][0] != original[k][0])
    return PlacementPlan(
        original=original,
        final=final,
        replicas_before=dict(stats.replicas),
        replicas_after={b: n for b, n in greedy.count.items() if n or b in set(receivers)},
        leaders_before=dict(stats.leaders),
        leaders_after={b: n for b, n in greedy.leaders.items() if n or b in set(receivers)},
        lower_bound_moves=lower_bound_moves(stats.replicas, receivers),
        replicas_moved=greedy.replicas_moved,
        bytes_moved=greedy.bytes_moved,
        leaders_moved=leaders_moved,
        rack_spread_reduced=greedy.rack_spread_reduced,
        rack_aware=greedy.rack_aware,
        partitions=stats.partitions,
        replication_factors=stats.replication_factors,
        rounds=rounds,
        bytes_per_partition={k: greedy.size.get(k, 0) for k in final},
    )


def _ceilings(
    counts: Mapping[int, int], receivers: Sequence[int], rack_of: Mapping[int, str | None]
) -> dict[int, int]:
    """Per broker, the count to sample its excess above: the lower of the cluster-wide ceiling
    and its rack's (replicas that must stay in their rack to keep the spread share the rack's
    brokers only), so the first sample usually suffices either way."""
    total = sum(counts.values())
    overall = -(-total // max(1, len(receivers)))
    per_rack: Counter[str | None] = Counter()
    brokers_in: Counter[str | None] = Counter(rack_of.get(b) for b in receivers)
    for b, n in counts.items():
        per_rack[rack_of.get(b)] += n
    out = {}
    for b in counts:
        g = rack_of.get(b)
        rack_ceil = -(-per_rack[g] // brokers_in[g]) if brokers_in[g] else 0
        out[b] = min(overall, rack_ceil)
    return out


def _balance_leaders(
    greedy: Greedy, sized: DataFrame, stats: _Stats, target: PlacementTarget, small: bool
) -> None:
    receivers = greedy.receivers
    if not receivers:
        return
    ceil = -(-stats.partitions // len(receivers))
    # Untouched partitions led by leader-heavy brokers; the touched ones are known already.
    fractions = {}
    for b, n in greedy.leaders.items():
        excess = n - ceil
        if n > 0 and (small or excess > 0):
            fractions[b] = 1.0 if small else _fraction(SAMPLE_FACTOR * excess + SAMPLE_SLACK, n)
    with timed("leader sample"):
        led = sample_led(sized, fractions, target.seed)
    with timed(f"leader swaps ({len(led)} sampled)"):
        for key, reps, size in led:
            greedy.know(key, reps, size)
        greedy.balance_leaders()
