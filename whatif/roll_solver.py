"""Exact rolling-restart batchings: the fewest safe batches of at most N, the largest safe batch.

Both questions are solved per component of the compatibility graph (``roll_batches``: no batch
spans two), on the driver, over the distinct replica sets only:

* **Largest safe batch** of a component: every broker when nothing inside it binds; else a
  CP-SAT model (a 0/1 per broker; at most one of each conflicting pair; at most ``s`` of each
  limit's ISR; maximise the brokers) started from ``first_fit``'s largest batch.
* **Fewest batches of at most N**: the lower bound is ⌈|component| / min(N, largest safe batch
  bound)⌉; ``first_fit`` meeting it is optimal. Otherwise N = 2 is a maximum matching on the
  compatible pairs (every batch a matched pair or a single broker: |component| − |matching|
  batches, exact in polynomial time); N ≥ 3 a CP-SAT model (broker ``i`` in batch ``j ≤ i`` of
  at most ``first_fit``'s count, at most N per batch, the pair and limit constraints per batch;
  minimise the batches used) started from ``first_fit``'s batching.

Every figure says whether it is proven: the solver proved it optimal, or the bounds meet. When
the time limit (``--solver-seconds``, shared by all the models of one question) or the model
size cap stops a search first, the best batching found is kept (always safe) and the bound is
the solver's. CP-SAT runs one worker with a fixed seed, so an answer the solver proves is
reproducible.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import networkx as nx
from ortools.sat.python import cp_model

from whatif.roll_batches import Constraints, compatible_groups, first_fit, is_safe, ordered

# Time for all the models of one question, by default.
SOLVER_SECONDS = 10.0
# A batching model with more (constraint × batch) terms than this is not built: the greedy's
# batching stands, unproven.
MAX_MODEL_TERMS = 2_000_000


@dataclass(frozen=True)
class LargestBatch:
    """The largest safe batch found, an upper bound on any, and whether they meet."""

    brokers: tuple[int, ...]
    upper_bound: int

    @property
    def proven(self) -> bool:
        return len(self.brokers) >= self.upper_bound


@dataclass(frozen=True)
class Batching:
    """A safe batching, a lower bound on the number of batches, and whether they meet."""

    batches: list[list[int]]
    lower_bound: int

    @property
    def proven(self) -> bool:
        return len(self.batches) <= self.lower_bound


@dataclass(frozen=True)
class RollPlan:
    largest: LargestBatch
    batching: Batching | None  # None: the batches are given (--batch rack)


class _Clock:
    """The time left of one question's solver budget."""

    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return max(0.0, self.end - time.monotonic())


def plan_roll(
    brokers: Sequence[int],
    size: int | None,
    constraints: Constraints,
    seconds: float = SOLVER_SECONDS,
) -> RollPlan:
    """The largest safe batch and, for ``size``, the fewest safe batches of at most ``size``."""
    # The batching gets the half of the time the largest batch leaves, at least.
    clock = _Clock(seconds if size is None else seconds / 2)
    groups = compatible_groups(brokers, constraints)
    largest = [_largest(g, constraints, clock) for g in groups]
    clock = _Clock(clock.left() + (0.0 if size is None else seconds / 2))
    best = max(largest, key=lambda x: (len(x.brokers), [-b for b in x.brokers]), default=None)
    overall = LargestBatch(
        best.brokers if best else (), max((x.upper_bound for x in largest), default=0)
    )
    if size is None:
        return RollPlan(overall, None)
    parts = [
        _fewest(g, size, constraints, x.upper_bound, clock)
        for g, x in zip(groups, largest, strict=True)
    ]
    batching = Batching(
        ordered(b for p in parts for b in p.batches), sum(p.lower_bound for p in parts)
    )
    return RollPlan(overall, batching)


def _solver(seconds: float) -> cp_model.CpSolver:
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = seconds
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = 0
    return solver


def _pairs(group: Sequence[int], constraints: Constraints) -> list[tuple[int, int]]:
    members = set(group)
    return [(a, b) for a in group for b in sorted(constraints.conflicting(a) & members) if a < b]


def _largest(group: Sequence[int], constraints: Constraints, clock: _Clock) -> LargestBatch:
    pairs = _pairs(group, constraints)
    limits = constraints.limits_within(group)
    if not pairs and not limits:
        return LargestBatch(tuple(group), len(group))
    greedy = max(first_fit(group, len(group), constraints), key=len)
    if clock.left() <= 0:
        return LargestBatch(tuple(greedy), len(group))
    model = cp_model.CpModel()
    x = {b: model.new_bool_var(f"x{b}") for b in group}
    for a, b in pairs:
        model.add_at_most_one(x[a], x[b])
    for isr, slack in limits:
        model.add(sum(x[b] for b in isr) <= slack)
    model.maximize(sum(x.values()))
    for b in group:
        model.add_hint(x[b], b in greedy)
    solver = _solver(clock.left())
    status = solver.solve(model)
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        found = [b for b in group if solver.value(x[b])]
        bound = math.floor(solver.best_objective_bound + 1e-6)
        better = len(found) > len(greedy) and is_safe(found, constraints)
        best = found if better else greedy
        return LargestBatch(tuple(best), max(len(best), min(bound, len(group))))
    return LargestBatch(tuple(greedy), len(group))


def _fewest(
    group: Sequence[int], size: int, constraints: Constraints, cap: int, clock: _Clock
) -> Batching:
    lower = math.ceil(len(group) / max(1, min(size, cap)))
    greedy = first_fit(group, size, constraints)
    if len(greedy) <= lower:
        return Batching(greedy, lower)
    if size == 2:
        return _matched(group, constraints)
    return _solved(group, size, constraints, greedy, lower, clock)


def _matched(group: Sequence[int], constraints: Constraints) -> Batching:
    """Batches of at most two: a maximum matching of the compatible pairs (a pair is safe
    exactly when it does not conflict: limits of slack ≥ 2 never bind two brokers)."""
    graph = nx.Graph()
    graph.add_nodes_from(group)
    graph.add_edges_from(
        (a, b) for a in group for b in group if a < b and b not in constraints.conflicting(a)
    )
    matching = nx.max_weight_matching(graph, maxcardinality=True)
    paired = {b for pair in matching for b in pair}
    batches = ordered([*(list(p) for p in matching), *([b] for b in group if b not in paired)])
    return Batching(batches, len(batches))


def _solved(
    group: Sequence[int],
    size: int,
    constraints: Constraints,
    greedy: list[list[int]],
    lower: int,
    clock: _Clock,
) -> Batching:
    pairs = _pairs(group, constraints)
    limits = constraints.limits_within(group)
    count = len(greedy)
    if (len(pairs) + len(limits) + len(group)) * count > MAX_MODEL_TERMS or clock.left() <= 0:
        return Batching(greedy, lower)
    index = {b: i for i, b in enumerate(group)}
    model = cp_model.CpModel()
    # Batches are numbered by their first broker in ``group`` order: broker i is in batch ≤ i.
    x = {
        (b, j): model.new_bool_var(f"x{b}_{j}")
        for b in group
        for j in range(min(count, index[b] + 1))
    }
    used = [model.new_bool_var(f"used{j}") for j in range(count)]
    for b in group:
        model.add_exactly_one(x[b, j] for j in range(min(count, index[b] + 1)))
    for j in range(count):
        model.add(sum(x[b, j] for b in group if (b, j) in x) <= size * used[j])
        for a, b in pairs:
            if (a, j) in x and (b, j) in x:
                model.add_at_most_one(x[a, j], x[b, j])
        for isr, slack in limits:
            inside = [x[b, j] for b in isr if (b, j) in x]
            if len(inside) > slack:
                model.add(sum(inside) <= slack)
        if j + 1 < count:
            model.add_implication(used[j + 1], used[j])
    model.add(sum(used) >= lower)
    model.minimize(sum(used))
    for j, batch in enumerate(sorted(greedy, key=lambda m: min(index[b] for b in m))):
        for b in group:
            if (b, j) in x:
                model.add_hint(x[b, j], b in batch)
    for j in range(count):
        model.add_hint(used[j], True)
    solver = _solver(clock.left())
    status = solver.solve(model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return Batching(greedy, lower)
    found: dict[int, list[int]] = {}
    for (b, j), var in x.items():
        if solver.value(var):
            found.setdefault(j, []).append(b)
    bound = max(lower, math.ceil(solver.best_objective_bound - 1e-6))
    better = len(found) < count and all(is_safe(b, constraints) for b in found.values())
    best = ordered(found.values()) if better else greedy
    return Batching(best, len(best) if status == cp_model.OPTIMAL else bound)
