"""Small Column builders over the fixed-width replica/ISR slots of the compact layout."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import reduce

from pyspark.sql import Column
from pyspark.sql import functions as F

from statemachines import schemas as s


def literal_array(values: Sequence[int], element: str = "int") -> Column:
    """An array literal of integers built in a constant number of JVM calls.

    ``F.array(*map(F.lit, values))`` costs a few Py4J round trips per element; a split string
    cast to an integer array is constant-folded by the optimizer into the same literal.
    """
    if not values:
        return F.array().cast(f"array<{element}>")
    text = ",".join(str(int(v)) for v in values)
    return F.split(F.lit(text), ",").cast(f"array<{element}>")


def runtime_int(value: int) -> Column:
    """``value`` as an int Column of a partitions table, kept out of the generated code.

    Spark compiles an int literal into the code, so a plan holding a value that changes now and
    then (the controller epoch, at each failover) is compiled again and runs JIT-cold when it
    does. An array literal is a reference instead; indexing it by a row's value that is always
    0 (partition ids are never negative) keeps the optimizer from folding it back into a
    constant, as it folds ``partition * 0``.
    """
    return F.get(literal_array([value]), F.least(F.col(s.PARTITION), F.lit(0)))


def present(values: Sequence[Column]) -> Column:
    """The array of ``values`` without nulls and EMPTY_SLOT, in order.

    Built without a lambda: PySpark names a lambda's variable afresh on every call, and the
    name reaches the generated code, so a plan holding one is compiled again (and runs JIT-cold)
    at every event.
    """
    return F.array_compact(F.array_remove(F.array(*values), s.EMPTY_SLOT))


def any_of(cols: Sequence[Column]) -> Column:
    return reduce(lambda a, b: a | b, cols, F.lit(False))


def count_of(cols: Sequence[Column]) -> Column:
    return reduce(lambda a, b: a + b.cast("int"), cols, F.lit(0))


def in_list(broker: Column, members: Sequence[Column]) -> Column:
    """``broker ∈ members`` for broker-id Columns (EMPTY_SLOT and null never match)."""
    return (broker != s.EMPTY_SLOT) & any_of(
        [F.coalesce(m == broker, F.lit(False)) for m in members]
    )


def first_of(candidates: Sequence[tuple[Column, Column]]) -> Column:
    """The value of the first (condition, value) pair whose condition holds, else null."""
    expr = F.lit(None).cast("int")
    for cond, value in reversed(candidates):
        expr = F.when(cond, value).otherwise(expr)
    return expr


def mask_of(bits: Sequence[Column]) -> Column:
    """An int whose bit k is set where ``bits[k]`` holds."""
    return reduce(
        lambda acc, kb: acc.bitwiseOR(F.when(kb[1], F.lit(1 << kb[0])).otherwise(F.lit(0))),
        enumerate(bits),
        F.lit(0),
    )


def bit(mask: Column, k: int) -> Column:
    return mask.bitwiseAND(F.lit(1 << k)) != 0


def compact(
    values: Sequence[Column], keep: Sequence[Column], pad: Column | None = None
) -> list[Column]:
    """``[v for v, k in zip(values, keep) if k]`` padded to len(values) Columns.

    Slot j takes the value whose keep-prefix-count reaches j+1 there: a W² CASE, cheap for the
    small widths of real replica sets and free of higher-order functions.
    """
    fill = F.lit(s.EMPTY_SLOT) if pad is None else pad
    w = len(values)
    counts: list[Column] = []
    running = F.lit(0)
    for k in range(w):
        running = running + keep[k].cast("int")
        counts.append(running)
    out = []
    for j in range(w):
        expr = fill
        for k in reversed(range(j, w)):
            expr = F.when(keep[k] & (counts[k] == j + 1), values[k]).otherwise(expr)
        out.append(expr)
    return out


def replicas(w: int) -> list[Column]:
    return [F.col(s.replica_col(k)) for k in range(w)]


def isr(w: int) -> list[Column]:
    return [F.col(s.isr_col(k)) for k in range(w)]


def has_leadership() -> Column:
    """The partition has a state znode (cached leadership in Kafka's terms)."""
    return F.col(s.ZK_VERSION) != s.NO_ZK_VERSION


def in_partitions(keys: Iterable[tuple[int, int]]) -> Column:
    """The row's (topic_index, partition) is one of ``keys`` (false for none).

    One parsed IN over the pair packed into a long (the optimizer makes it a hash-set lookup):
    neither a join nor a JVM call per key. For small driver-side sets: a large one is better
    joined (``statemachines.local_rows``).
    """
    packed = sorted({(int(t) << 32) | int(p) for t, p in keys})
    if not packed:
        return F.lit(False)
    key = f"(CAST({s.TOPIC_INDEX} AS BIGINT) << 32 | {s.PARTITION})"
    return F.expr(f"{key} IN ({','.join(map(str, packed))})")


def in_topics(topic_indices: Sequence[int]) -> Column:
    """The row's topic is one of ``topic_indices`` (false for none)."""
    if not topic_indices:
        return F.lit(False)
    # One parsed IN (the optimizer makes it a hash-set lookup) instead of a JVM call per value.
    listed = ",".join(str(int(t)) for t in sorted(set(topic_indices)))
    return F.expr(f"{s.TOPIC_INDEX} IN ({listed})")


def being_reassigned() -> Column:
    """The partition has adding or removing replicas (a reassignment is in flight)."""
    return (F.col(s.ADDING_MASK) != 0) | (F.col(s.REMOVING_MASK) != 0)
