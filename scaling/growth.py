"""Growth exponents: how a figure grows with partitions, as the slope of a log-log fit.

If ``y ≈ c · partitionsᵏ``, then ``log y = log c + k · log partitions``: ``k`` is the ordinary
least-squares slope over the points' logarithms (``statistics.linear_regression``). 1 is linear
growth, 0 a constant cost. A series is one operation at the points that share every axis but
``partitions``; a fit needs two distinct sizes with positive values.

A fit over a wide range blends a small size's fixed costs (an event's Spark plan, a cold JIT)
into the slope, so each series also has a step exponent between every two consecutive sizes:
the growth at the large end reads from the last step.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from scaling.results import AXES

# The figures fitted and charted: time, and Kafka's work.
TIME_KEYS = ("wall_seconds", "controller_seconds")
WORK_CHARTED = (
    "elections",
    "zk_reads",
    "zk_writes",
    "LeaderAndIsr_partitions",
    "UpdateMetadata_partitions",
    "StopReplica_partitions",
)

Points = list[tuple[float, float]]
T = TypeVar("T")


def fit_exponent(points: Iterable[tuple[float, float]]) -> float | None:
    """The least-squares slope of ``log y`` over ``log x``; None without two distinct positive
    ``x`` having positive ``y``."""
    usable = [(math.log(x), math.log(y)) for x, y in points if x > 0 and y is not None and y > 0]
    if len({x for x, _ in usable}) < 2:
        return None
    slope, _intercept = statistics.linear_regression([x for x, _ in usable], [y for _, y in usable])
    return slope


def step_exponents(points: Sequence[tuple[float, float]]) -> list[dict[str, float]]:
    """The exponent between each two consecutive sizes of ``points`` (sorted by size):
    ``{"from": x0, "to": x1, "exponent": k}``; a step with a non-positive value is left out."""
    usable = sorted((x, y) for x, y in points if x > 0 and y is not None and y > 0)
    steps = []
    for (x0, y0), (x1, y1) in itertools.pairwise(usable):
        if x1 > x0:
            k = math.log(y1 / y0) / math.log(x1 / x0)
            steps.append({"from": x0, "to": x1, "exponent": round(k, 3)})
    return steps


def series_name(row: Mapping[str, Any]) -> str:
    """The axes other than partitions: ``brokers=100 racks=3 replication_factor=3 …``."""
    return " ".join(f"{k}={row[k]}" for k in AXES if k not in ("partitions", "topics"))


def series(rows: Sequence[Mapping[str, Any]], operation: str, key: str) -> dict[str, Points]:
    """``(partitions, key)`` of ``operation``'s rows per series, in partitions order; rows
    without a value are left out."""
    out: dict[str, Points] = {}
    for r in rows:
        if r["operation"] == operation and r.get(key) is not None:
            out.setdefault(series_name(r), []).append((r["partitions"], r[key]))
    return {name: sorted(points) for name, points in out.items()}


def _by_figure(
    rows: Sequence[Mapping[str, Any]], measure: Callable[[Points], T]
) -> dict[str, dict[str, dict[str, T]]]:
    """operation -> series -> figure -> ``measure`` of its points."""
    out: dict[str, dict[str, dict[str, T]]] = {}
    for operation in dict.fromkeys(r["operation"] for r in rows):
        for key in (*TIME_KEYS, *WORK_CHARTED):
            for name, points in series(rows, operation, key).items():
                out.setdefault(operation, {}).setdefault(name, {})[key] = measure(points)
    return out


def exponents(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, dict[str, float | None]]]:
    """operation -> series -> figure -> fitted exponent (rounded to 3 places)."""

    def fitted(points: Points) -> float | None:
        k = fit_exponent(points)
        return None if k is None else round(k, 3)

    return _by_figure(rows, fitted)


def steps(
    rows: Sequence[Mapping[str, Any]],
) -> dict[str, dict[str, dict[str, list[dict[str, float]]]]]:
    """operation -> series -> figure -> ``step_exponents`` of its points."""
    return _by_figure(rows, step_exponents)
