"""Growth exponents: how a figure grows with partitions, as the slope of a log-log fit.

If ``y ≈ c · partitionsᵏ``, then ``log y = log c + k · log partitions``: ``k`` is the ordinary
least-squares slope over the points' logarithms (``statistics.linear_regression``). 1 is linear
growth, 0 a constant cost. A series is one operation at the points that share every axis but
``partitions``; a fit needs two distinct sizes with positive values.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

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


def fit_exponent(points: Iterable[tuple[float, float]]) -> float | None:
    """The least-squares slope of ``log y`` over ``log x``; None without two distinct positive
    ``x`` having positive ``y``."""
    usable = [(math.log(x), math.log(y)) for x, y in points if x > 0 and y is not None and y > 0]
    if len({x for x, _ in usable}) < 2:
        return None
    slope, _intercept = statistics.linear_regression([x for x, _ in usable], [y for _, y in usable])
    return slope


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


def exponents(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, dict[str, float | None]]]:
    """operation -> series -> figure -> fitted exponent (rounded to 3 places)."""
    out: dict[str, dict[str, dict[str, float | None]]] = {}
    for operation in dict.fromkeys(r["operation"] for r in rows):
        for key in (*TIME_KEYS, *WORK_CHARTED):
            for name, points in series(rows, operation, key).items():
                k = fit_exponent(points)
                figures = out.setdefault(operation, {}).setdefault(name, {})
                figures[key] = None if k is None else round(k, 3)
    return out
