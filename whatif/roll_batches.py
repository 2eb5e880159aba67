"""Choosing a rolling restart's batches: which brokers may restart together.

**Safe batchings.** A batching is safe when no partition drops under min ISR in any batch; since
the ISR is restored between batches, the order of the batches does not matter, only which
brokers share one. A batching "of size N" splits the live brokers into ⌈n/N⌉ batches of at most N
brokers. A partition with ISR slack ``s = |live ISR| − min.insync.replicas`` allows at most ``s``
of its ISR members in the same batch, so a partition with ``s ≤ 0`` (at min ISR already, below
it, or offline) makes every batching unsafe. ``max_safe_batch`` is the most brokers one batch of a
safe batching restarts together — the largest batch of the greedy's batching for the largest N
it succeeds at (0 when some partition makes every batching unsafe); ``max_safe_batch_others``
the same over the partitions with ``s ≥ 1``.

Finding a safe batching is graph colouring: brokers sharing a tight partition may not share a
batch. The planner collects, per pair of brokers, the smallest slack of the partitions whose ISR
holds both (aggregated in Spark: at most brokers² rows) and places the brokers, most conflicted
first, into the first batch that keeps, for every broker x of the batch, ``1 + (batch members
sharing a partition with x) ≤ (the smallest slack among those pairs)`` — a sufficient condition
for ``|batch ∩ ISR| ≤ s`` of every partition. It is a greedy: when it finds no safe batching,
one may still exist (``batches_from`` says "id order": the brokers in id order, N at a time).
Every batching reported is then evaluated exactly, all batches in one Spark job.

``unsafe_partitions``: the partitions that make a safe batching impossible on their own at the
requested size (``--batch N``: their ISR does not fit in ⌈n/N⌉ batches at ``min(s, N)`` per
batch; ``--batch rack``: a rack holds more than ``s`` of their ISR). ``--batch rack`` rolls one
rack per batch, racks in name order, then every rackless broker on its own.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from statemachines import schemas as s
from whatif.cluster import WhatIfInputError
from whatif.roll_evaluation import ISR_LIVE, LIVE_ISR_SIZE, MIN_ISR, SLACK, batch_lookup

# The column of ``unsafe_rows`` that says why a partition is unsafe.
REASON = "reason"


def conflict_pairs(form: DataFrame) -> tuple[dict[tuple[int, int], int], int]:
    """(pairs, always unsafe): for each pair of brokers (a < b) both in the live ISR of some
    partition with slack ≥ 1, the smallest such slack; and how many partitions have slack ≤ 0
    (no batching keeps them at or above min ISR). One Spark job."""
    slack = F.col(SLACK)
    # A partition of slack ≤ 0 is one (-1, -1) row: the same aggregation counts them.
    first = (
        F.when(slack <= 0, F.array(F.lit(-1)))
        .when(F.col(LIVE_ISR_SIZE) >= 2, F.col(ISR_LIVE))
        .otherwise(F.array().cast("array<int>"))
    )
    rows = form.select(F.explode(first).alias("a"), ISR_LIVE, SLACK)
    second = F.when(F.col("a") == -1, F.array(F.lit(-1))).otherwise(
        F.filter(ISR_LIVE, lambda x: x > F.col("a"))
    )
    found = (
        rows.select("a", F.explode(second).alias("b"), SLACK)
        .groupBy("a", "b")
        .agg(F.min(SLACK).alias(SLACK), F.count(F.lit(1)).alias("n"))
        .collect()
    )
    out: dict[tuple[int, int], int] = {}
    unsafe = 0
    for r in found:
        if r["a"] == -1:
            unsafe = int(r["n"])
        else:
            out[(int(r["a"]), int(r["b"]))] = int(r[SLACK])
    return out, unsafe


def greedy_batches(
    brokers: Sequence[int], size: int, pairs: Mapping[tuple[int, int], int]
) -> list[list[int]] | None:
    """A batching of ``brokers`` into ⌈n/size⌉ batches of at most ``size`` that the pair slacks
    prove safe, or None when the greedy finds none.

    Welsh–Powell order (most conflicting pairs first, then id), first batch that fits. A broker
    x fits batch B when, after adding it, every member y of B still has ``1 + (members sharing a
    partition with y) ≤ (smallest pair slack of y within B)``: any partition's ISR members in
    B are y and some of those neighbours, and the partition's slack is at least that smallest
    pair slack, so the batch holds at most slack of them.
    """
    n = len(brokers)
    if n == 0:
        return []
    count = math.ceil(n / size)
    neighbours: dict[int, dict[int, int]] = {b: {} for b in brokers}
    for (a, b), slack in pairs.items():
        if a in neighbours and b in neighbours:
            neighbours[a][b] = slack
            neighbours[b][a] = slack
    order = sorted(brokers, key=lambda b: (-len(neighbours[b]), b))
    members: list[list[int]] = [[] for _ in range(count)]
    # Per batch and member: how many neighbours it has in the batch, and their smallest slack.
    degree: list[dict[int, int]] = [{} for _ in range(count)]
    tightest: list[dict[int, int]] = [{} for _ in range(count)]
    for x in order:
        for i in range(count):
            if len(members[i]) >= size:
                continue
            linked = [y for y in members[i] if y in neighbours[x]]
            if linked:
                own = min(neighbours[x][y] for y in linked)
                if len(linked) + 1 > own:
                    continue
                if any(degree[i][y] + 2 > min(tightest[i][y], neighbours[x][y]) for y in linked):
                    continue
            members[i].append(x)
            degree[i][x] = len(linked)
            tightest[i][x] = min((neighbours[x][y] for y in linked), default=n)
            for y in linked:
                degree[i][y] += 1
                tightest[i][y] = min(tightest[i][y], neighbours[x][y])
            break
        else:
            return None
    batches = [sorted(m) for m in members if m]
    return sorted(batches, key=lambda m: m[0])


def id_order_batches(brokers: Sequence[int], size: int) -> list[list[int]]:
    ordered = sorted(brokers)
    return [ordered[i : i + size] for i in range(0, len(ordered), size)]


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


def max_safe_batch(brokers: Sequence[int], pairs: Mapping[tuple[int, int], int]) -> int:
    """The most brokers one batch restarts in a safe batching the greedy finds: the largest
    batch of its batching for the largest N it succeeds at (1 at least, one broker at a time
    being safe for every partition of slack ≥ 1).

    Batchings of at most N brokers, for every N giving the same number of batches, are the same
    problem: the answer is the batch actually formed, not the loosest N (for racks of 34, 33
    and 33 brokers and cross-rack conflicts, N = 49 also gives three batches, of 34, 33, 33).
    """
    for size in range(len(brokers), 1, -1):
        found = greedy_batches(brokers, size, pairs)
        if found is not None:
            return max(len(b) for b in found)
    return min(1, len(brokers))


def unsafe_rows(form: DataFrame, batches: Sequence[Sequence[int]], size: int | None) -> DataFrame:
    """The partitions that no batching of the requested kind keeps at or above min ISR, with a
    reason. ``size``: ``--batch N`` (any batching of N; ``batches`` unused), None: exactly
    ``batches`` (``--batch rack``). No job."""
    m, slack = F.col(LIVE_ISR_SIZE), F.col(SLACK)
    if size is not None:
        count = math.ceil(sum(len(b) for b in batches) / size)
        # Each of the batches can take at most min(slack, size) of the partition's ISR members;
        # the other brokers fill the rest (count × size ≥ n).
        capacity = F.least(slack, F.lit(size)) * count
        spread = "its ISR cannot be spread over the batches"
    else:
        ids = F.transform(ISR_LIVE, batch_lookup(batches))
        most = F.array_max(
            F.transform(F.array_distinct(ids), lambda b: F.size(F.filter(ids, lambda x: x == b)))
        )
        capacity = m - F.coalesce(most, F.lit(0)) + slack
        spread = "a rack holds more of its ISR than its slack"
    reason = (
        F.when(m == 0, F.lit("offline before the roll"))
        .when(slack < 0, F.lit("under min ISR before the roll"))
        .when(slack == 0, F.lit("at min ISR: any ISR member down drops it"))
        .otherwise(F.lit(spread))
    )
    return form.where((m == 0) | (capacity < m)).select(
        s.TOPIC, s.PARTITION, s.ISR, MIN_ISR, reason.alias(REASON)
    )
