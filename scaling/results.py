"""The rows of ``scaling.csv`` / ``scaling.json``: one per point and operation (phase), and the
budgets they are held to.

Columns, in order (``COLUMNS``; stable, documented in ``docs/scaling.md``): the point's axes;
``operation`` (its label) and ``type``; ``runs``; wall time (median, min, max of the runs), the
untimed setup's median, the controller's own processing time; Spark's jobs, stages and shuffle
bytes and the driver's memory (medians, peaks as the maximum over the runs); Kafka's work
(``play.WORK_KEYS``, from the first run: the emulation is deterministic); where the events ran;
the errors. A what-if question has no Kafka work: those cells are empty (null in JSON).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import Any

from scaling.measure import Cost
from scaling.operations import Plan
from scaling.play import WORK_KEYS, PhaseRun
from scaling.sweep import Budgets

AXES = ("partitions", "brokers", "racks", "replication_factor", "topics", "partitions_per_topic")
COST_KEYS = (
    "wall_seconds",
    "wall_seconds_min",
    "wall_seconds_max",
    "setup_seconds",
    "controller_seconds",
    "spark_jobs",
    "spark_stages",
    "shuffle_write_bytes",
    "shuffle_read_bytes",
    "peak_rss_mb",
    "python_peak_rss_mb",
    "jvm_peak_rss_mb",
    "jvm_heap_used_mb",
    "jvm_heap_peak_mb",
)
COLUMNS = (*AXES, "operation", "type", "runs", *COST_KEYS, *WORK_KEYS, "execution", "errors")


def _median(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def _peak(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def _rounded(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def _costs(runs: Sequence[PhaseRun]) -> dict[str, Any]:
    costs = [r.cost for r in runs]

    def each(get: Callable[[Cost], float | None]) -> list[float | None]:
        return [get(c) for c in costs]

    def whole(value: float | None) -> int | None:
        return None if value is None else round(value)

    walls = [c.wall_seconds for c in costs]
    return {
        "wall_seconds": round(statistics.median(walls), 3),
        "wall_seconds_min": round(min(walls), 3),
        "wall_seconds_max": round(max(walls), 3),
        "setup_seconds": round(statistics.median(r.setup_seconds for r in runs), 3),
        "controller_seconds": _rounded(_median([r.controller_seconds for r in runs]), 3),
        "spark_jobs": whole(_median(each(lambda c: c.spark_jobs))),
        "spark_stages": whole(_median(each(lambda c: c.spark_stages))),
        "shuffle_write_bytes": whole(_median(each(lambda c: c.shuffle_write_bytes))),
        "shuffle_read_bytes": whole(_median(each(lambda c: c.shuffle_read_bytes))),
        "peak_rss_mb": _rounded(_peak(each(Cost.peak_rss_mb)), 1),
        "python_peak_rss_mb": _rounded(_peak(each(lambda c: c.python_peak_rss_mb)), 1),
        "jvm_peak_rss_mb": _rounded(_peak(each(lambda c: c.jvm_peak_rss_mb)), 1),
        "jvm_heap_used_mb": _rounded(_median(each(lambda c: c.jvm_heap_used_mb)), 1),
        "jvm_heap_peak_mb": _rounded(_peak(each(lambda c: c.jvm_heap_peak_mb)), 1),
    }


def row(plan: Plan, runs: Sequence[PhaseRun]) -> dict[str, Any]:
    """The row of one phase of ``plan`` over its runs (all of one label)."""
    first = runs[0]
    work: dict[str, Any] = first.work if first.work is not None else dict.fromkeys(WORK_KEYS)
    errors = list(dict.fromkeys(e for r in runs for e in r.errors))
    out: dict[str, Any] = {
        **plan.point.axes(),
        "operation": first.label,
        "type": plan.operation.type,
        "runs": len(runs),
        **_costs(runs),
        **work,
        "execution": first.execution,
        "errors": len(errors),
    }
    assert tuple(out) == COLUMNS
    return out


def over_budget(row: dict[str, Any], budgets: Budgets) -> list[str]:
    """What in ``row`` exceeds ``budgets``, one sentence each."""
    where = f"{row['operation']} at " + " ".join(f"{k}={row[k]}" for k in AXES)
    out = []
    wall, rss = row["wall_seconds"], row["peak_rss_mb"]
    if budgets.wall_seconds is not None and wall > budgets.wall_seconds:
        out.append(
            f"{where}: took {wall:.3f} s (median of {row['runs']}), over the budget "
            f"wall_seconds {budgets.wall_seconds:g}"
        )
    if budgets.peak_rss_mb is not None and rss is not None and rss > budgets.peak_rss_mb:
        out.append(
            f"{where}: peak driver RSS {rss:.1f} MiB, over the budget peak_rss_mb "
            f"{budgets.peak_rss_mb:g}"
        )
    return out
