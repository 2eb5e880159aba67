"""The minimal-movement placement planner behind ``scale-out``, ``rebalance`` and ``decommission``.

Goal, in order: empty the removed brokers; bring every broker's replica count to within one of the
others (new brokers included); never make a partition's rack spread (its number of distinct racks)
worse; then bring preferred leaders (first replicas) per broker to within one of the others, by
reordering replicas inside a partition (no data moves); keep every partition's RF; move as few
replicas, then bytes, as possible.

How it scales: Spark aggregates the per-broker counts and samples, per over-full broker, a few more
candidate replicas than its excess (``whatif.placement_candidates``: the sample is a hash of seed,
partition and broker, so it is deterministic); the driver runs a greedy pass over per-broker counts
and picks concrete partitions from those candidate lists (``whatif.placement_greedy.Greedy``: one
replica at a time, from the fullest broker that still has a feasible move to the emptiest broker
that may take it). A broker whose sample runs out is sampled again, with a larger quota, for at
most ``MAX_ROUNDS`` rounds. Preferred leaders follow the same pattern over the partitions the
replica pass touched plus a sample of the others led by leader-heavy brokers.

Without ``rebalance`` (``decommission`` unless ``--rebalance``) only the removed brokers are
sampled and emptied, and the preferred leaders are balanced by reordering only those partitions:
every other partition stays as it is, and the lower bound is the replicas on the removed brokers
(each must move, nothing else need).

The lower bound (``lower_bound_moves``) is the fewest replica moves that give every broker a count
within one of the others with the removed brokers empty, racks ignored: the final counts are the
floor or ceiling of the mean, the ceilings going to the fullest brokers, and each broker above its
final count must lose the difference.
"""

from __future__ import annotations

import gc
import logging
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from pyspark.sql import DataFrame

from whatif.placement_candidates import (
    BrokerStats,
    broker_stats,
    sample_led,
    sample_replicas,
    with_bytes,
)
from whatif.placement_greedy import Greedy, PartitionKey, PlacementTarget

log = logging.getLogger(__name__)

# Partition counts up to this collect every partition as a candidate (the greedy then sees the
# whole cluster); above it, per-broker samples sized to the excess.
FULL_COLLECT_PARTITIONS = 50_000
# Sample size: SAMPLE_FACTOR x the excess + SAMPLE_SLACK, per broker.
SAMPLE_FACTOR = 1.25
SAMPLE_SLACK = 64
MAX_ROUNDS = 4


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
    rebalance: bool = True,
) -> PlacementPlan:
    """The minimal-movement plan for ``partitions`` (``PARTITIONS_SCHEMA``) onto ``target``.

    ``rebalance`` False: only the partitions holding a replica on ``target.removed`` change:
    that replica moves (to the remaining broker with the fewest replicas among those keeping the
    partition's racks distinct where possible), and their replica order balances preferred
    leaders; no other partition changes."""
    with without_gc():
        return _plan_placement(partitions, target, sizes, full_collect_partitions, rebalance)


def _plan_placement(
    partitions: DataFrame,
    target: PlacementTarget,
    sizes: DataFrame | None,
    full_collect_partitions: int,
    rebalance: bool,
) -> PlacementPlan:
    sized = with_bytes(partitions, sizes)
    with timed("per-broker counts"):
        stats = broker_stats(partitions)
    # Replicas on brokers outside the target (not live) leave too when rebalancing: nothing may
    # stay there. Without it only the removed brokers are emptied.
    live = set(target.brokers)
    leaving = {b for b in stats.replicas if b in target.removed or (rebalance and b not in live)}
    target = PlacementTarget(target.brokers, target.racks, frozenset(leaving), target.seed)
    greedy = Greedy(target, stats.replicas, stats.leaders)
    receivers = greedy.receivers
    small = stats.partitions <= full_collect_partitions
    ceil = _ceilings(stats.replicas, receivers, greedy.rack_of)
    quota: dict[int, float] = {}
    for b, n in stats.replicas.items():
        excess = n if b in leaving else max(0, n - ceil[b])
        if b in leaving or (rebalance and (excess > 0 or small)):
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
            if not rebalance:
                break
            starved = greedy.balance_replicas()
        quota = {b: 2 * quota[b] + SAMPLE_SLACK for b in starved if b in quota}
    if rebalance:
        _balance_leaders(greedy, sized, stats, target, small)
    else:
        # The greedy knows only the partitions that move anyway: reordering their replicas
        # balances preferred leaders without touching any other partition or moving data.
        greedy.balance_leaders()
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
        lower_bound_moves=(
            lower_bound_moves(stats.replicas, receivers)
            if rebalance
            else sum(stats.replicas[b] for b in leaving)
        ),
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
    greedy: Greedy, sized: DataFrame, stats: BrokerStats, target: PlacementTarget, small: bool
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
