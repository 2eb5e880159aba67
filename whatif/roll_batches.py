"""Which brokers a rolling restart may take down together: the constraints, and their checks.

**Safe batches.** A batch (the brokers down at once) is safe when no partition drops under
min ISR while it is down; since the ISR is restored between batches, the order of the batches
does not matter, only which brokers share one. A partition with ISR slack ``s = |live ISR| −
min.insync.replicas`` allows at most ``s`` of its live ISR members in one batch, so a partition
with ``s ≤ 0`` (at min ISR already, below it, or offline) makes every batching unsafe; the
batches are then chosen for the other partitions (``always_unsafe`` counts those).

**Constraints.** Spark reduces the partitions to their distinct (live ISR as a set, slack) pairs
— at most one row per replica set, however many partitions share it — and the driver keeps:

* ``conflicts``: the pairs of brokers that may never share a batch (both in the ISR of a
  partition of slack 1: any two of its ISR members down together drop it under min ISR);
* ``limits``: the (ISR, slack ≥ 2) sets that bind a batch of three or more brokers (RF 3, min
  ISR 1: the three replicas may not all be down together). Safety is not pairwise beyond two.

Two brokers in different components of the *compatibility* graph (brokers linked when they do
not conflict) never share a batch: every question splits into those components
(``compatible_groups``). ``first_fit`` is the greedy behind every exact search: brokers, most
constrained first, each into the first batch it keeps safe, a new batch when none does; it
always succeeds (one broker alone is safe for every partition of slack ≥ 1).

``unsafe_partitions``: ``--batch N``: the partitions of slack ≤ 0 (the others are kept safe by
the batches chosen); ``--batch rack``: also those of which a rack holds more than ``s`` of the
ISR. ``--batch rack`` rolls one rack per batch, racks in name order, then every rackless broker
on its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from statemachines import schemas as s
from whatif.cluster import WhatIfInputError
from whatif.roll_evaluation import ISR_LIVE, LIVE_ISR_SIZE, MIN_ISR, SLACK, batch_lookup

# The column of ``unsafe_rows`` that says why a partition is unsafe.
REASON = "reason"
_UNSAFE_KEY = -1


@dataclass(frozen=True)
class Constraints:
    """What a safe batch must respect (see the module docstring)."""

    conflicts: Mapping[int, frozenset[int]] = field(default_factory=dict)
    limits: tuple[tuple[frozenset[int], int], ...] = ()
    always_unsafe: int = 0

    def conflicting(self, broker: int) -> frozenset[int]:
        return self.conflicts.get(broker, frozenset())

    def limits_within(self, group: Iterable[int]) -> list[tuple[frozenset[int], int]]:
        """The limits restricted to ``group`` that a batch of ``group`` could break."""
        members = set(group)
        out = []
        for isr, slack in self.limits:
            inside = isr & members
            if len(inside) > slack:
                out.append((frozenset(inside), slack))
        return out


def constraints_of(partitions: Iterable[tuple[Sequence[int], int]]) -> Constraints:
    """Constraints from (live ISR, slack) per partition (or per distinct pair: repeats change
    nothing but ``always_unsafe``)."""
    conflicts: dict[int, set[int]] = {}
    limits: dict[frozenset[int], int] = {}
    unsafe = 0
    for isr, slack in partitions:
        members = frozenset(isr)
        if slack <= 0:
            unsafe += 1
        elif len(members) <= slack:
            continue
        elif slack == 1:
            for a in members:
                conflicts.setdefault(a, set()).update(members - {a})
        else:
            limits[members] = min(slack, limits.get(members, slack))
    return Constraints(
        {b: frozenset(c) for b, c in conflicts.items()},
        tuple(sorted(limits.items(), key=lambda kv: (sorted(kv[0]), kv[1]))),
        unsafe,
    )


def batch_constraints(form: DataFrame) -> Constraints:
    """The constraints of ``form`` (``roll_evaluation.partition_form``): one Spark job whose
    driver side is one row per distinct (live ISR, slack) that binds, plus one row counting the
    partitions of slack ≤ 0."""
    slack = F.col(SLACK)
    unsafe = slack <= 0
    isr = F.when(unsafe, F.array(F.lit(_UNSAFE_KEY))).otherwise(F.array_sort(ISR_LIVE))
    rows = (
        form.where(unsafe | (F.col(LIVE_ISR_SIZE) > slack))
        .groupBy(isr.alias("isr"), F.when(unsafe, F.lit(0)).otherwise(slack).alias(SLACK))
        .count()
        .collect()
    )
    always_unsafe = sum(int(r["count"]) for r in rows if r[SLACK] <= 0)
    found = constraints_of(
        ([int(b) for b in r["isr"]], int(r[SLACK])) for r in rows if r[SLACK] > 0
    )
    return Constraints(found.conflicts, found.limits, always_unsafe)


def is_safe(batch: Iterable[int], constraints: Constraints) -> bool:
    """No partition of slack ≥ 1 under min ISR while ``batch`` is down."""
    members = set(batch)
    if any(constraints.conflicting(b) & members for b in members):
        return False
    return all(len(isr & members) <= slack for isr, slack in constraints.limits)


def compatible_groups(brokers: Iterable[int], constraints: Constraints) -> list[list[int]]:
    """The components of the compatibility graph (brokers linked when no partition forbids the
    pair), each sorted, by smallest id: no batch spans two of them."""
    unseen = set(brokers)
    groups = []
    while unseen:
        start = min(unseen)
        unseen.discard(start)
        group, frontier = [start], [start]
        while frontier:
            linked = unseen - constraints.conflicting(frontier.pop())
            unseen -= linked
            group.extend(linked)
            frontier.extend(linked)
        groups.append(sorted(group))
    return groups


def first_fit(group: Sequence[int], size: int, constraints: Constraints) -> list[list[int]]:
    """A safe batching of ``group`` into batches of at most ``size``: brokers by most conflicts
    and limits, then id, each into the first batch it keeps safe (a new one when none does)."""
    limits = constraints.limits_within(group)
    touching: dict[int, list[int]] = {b: [] for b in group}
    for i, (isr, _) in enumerate(limits):
        for b in isr:
            touching[b].append(i)
    order = sorted(group, key=lambda b: (-len(constraints.conflicting(b)) - len(touching[b]), b))
    batches: list[list[int]] = []
    counts: list[dict[int, int]] = []  # per batch: members per limit
    for b in order:
        banned = constraints.conflicting(b)
        for batch, count in zip(batches, counts, strict=True):
            if (
                len(batch) < size
                and not banned.intersection(batch)
                and all(count.get(i, 0) < limits[i][1] for i in touching[b])
            ):
                break
        else:
            batch, count = [], {}
            batches.append(batch)
            counts.append(count)
        batch.append(b)
        for i in touching[b]:
            count[i] = count.get(i, 0) + 1
    return ordered(batches)


def ordered(batches: Iterable[Iterable[int]]) -> list[list[int]]:
    """Each batch sorted, the batches by their smallest broker."""
    return sorted((sorted(b) for b in batches if b), key=lambda b: b[0])


def rack_batches(brokers: Sequence[int], racks: Mapping[int, str | None]) -> list[list[int]]:
    """One batch per rack (racks by name), then each rackless broker alone."""
    by_rack: dict[str, list[int]] = {}
    rackless: list[int] = []
    for b in sorted(brokers):
        rack = racks.get(b)
        if rack is None:
            rackless.append(b)
        else:
            by_rack.setdefault(rack, []).append(b)
    if not by_rack:
        raise WhatIfInputError(
            "--batch rack: no live broker has a rack — give the racks with --rack-map FILE "
            "(CSV id,rack) or roll N brokers at a time with --batch N"
        )
    return [by_rack[r] for r in sorted(by_rack)] + [[b] for b in rackless]


def unsafe_rows(form: DataFrame, batches: Sequence[Sequence[int]] | None) -> DataFrame:
    """The partitions that no batching of the requested kind keeps at or above min ISR, with a
    reason. ``batches``: the racks of ``--batch rack``; None for ``--batch N`` (only slack ≤ 0
    then: the batches chosen keep every other partition safe). No job."""
    m, slack = F.col(LIVE_ISR_SIZE), F.col(SLACK)
    too_many = F.lit(False)
    if batches is not None:
        ids = F.transform(ISR_LIVE, batch_lookup(batches))
        most = F.array_max(
            F.transform(F.array_distinct(ids), lambda b: F.size(F.filter(ids, lambda x: x == b)))
        )
        too_many = F.coalesce(most, F.lit(0)) > slack
    reason = (
        F.when(m == 0, F.lit("offline before the roll"))
        .when(slack < 0, F.lit("under min ISR before the roll"))
        .when(slack == 0, F.lit("at min ISR: any ISR member down drops it"))
        .otherwise(F.lit("a rack holds more of its ISR than its slack"))
    )
    return form.where((m == 0) | (slack <= 0) | too_many).select(
        s.TOPIC, s.PARTITION, s.ISR, MIN_ISR, reason.alias(REASON)
    )
