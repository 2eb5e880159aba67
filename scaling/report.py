"""The readable outputs of a sweep: per operation a log-log chart (a PNG, also in the page),
``summary.md`` and ``report.html`` (the shared ``html_report`` page: self-contained, byte-stable).

Each chart has two panels over partitions: time (the median wall time and the controller's own
processing time) and Kafka's work (elections, ZooKeeper reads and writes, partitions carried by
LeaderAndIsr / UpdateMetadata / StopReplica); every line's legend gives its fitted growth
exponent ``k`` (``growth``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from html_report.charts import inline_png, loglog_panels
from html_report.page import Section, render_report
from scaling.growth import TIME_KEYS, WORK_CHARTED, exponents, series, series_name, steps

Row = Mapping[str, Any]
# (column, heading) of the Markdown and page tables.
TABLE = (
    ("partitions", "partitions"),
    ("wall_seconds", "wall s"),
    ("controller_seconds", "controller s"),
    ("spark_jobs", "jobs"),
    ("spark_stages", "stages"),
    ("peak_rss_mb", "peak RSS MiB"),
    ("elections", "elections"),
    ("zk_reads", "ZK reads"),
    ("zk_writes", "ZK writes"),
    ("LeaderAndIsr_partitions", "LeaderAndIsr partitions"),
    ("UpdateMetadata_partitions", "UpdateMetadata partitions"),
    ("StopReplica_partitions", "StopReplica partitions"),
    ("errors", "errors"),
)


def _operations(rows: Sequence[Row]) -> list[str]:
    return list(dict.fromkeys(r["operation"] for r in rows))


def _k(value: float | None) -> str:
    return "k n/a" if value is None else f"k={value:.2f}"


def _lines(rows: Sequence[Row], operation: str, keys: Sequence[str], fits: Any) -> dict[str, Any]:
    """Chart lines: one per figure and series; the series is named only when there are several."""
    out: dict[str, Any] = {}
    for key in keys:
        lines = series(rows, operation, key)
        for name, points in lines.items():
            label = key if len(lines) == 1 else f"{key} ({name})"
            out[f"{label} {_k(fits.get(name, {}).get(key))}"] = points
    return out


def charts(rows: Sequence[Row]) -> dict[str, bytes]:
    """operation -> its chart (PNG)."""
    fits = exponents(rows)
    out = {}
    for operation in _operations(rows):
        panels = [
            ("seconds", _lines(rows, operation, TIME_KEYS, fits[operation])),
            ("count", _lines(rows, operation, WORK_CHARTED, fits[operation])),
        ]
        out[operation] = loglog_panels(f"{operation}: time and Kafka's work", panels, "partitions")
    return out


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _step_lines(figures: Mapping[str, Sequence[Mapping[str, float]]]) -> list[str]:
    """``from 1,000,000 to 10,000,000: wall_seconds 0.98, …``: a line per step, if several."""
    by_step: dict[tuple[float, float], list[str]] = {}
    for key, found in figures.items():
        for step in found:
            by_step.setdefault((step["from"], step["to"]), []).append(
                f"{key} {step['exponent']:.2f}"
            )
    if len(by_step) < 2:
        return []  # the fit over the sizes is that one step
    return [f"from {a:,.0f} to {b:,.0f}: {', '.join(shown)}" for (a, b), shown in by_step.items()]


def markdown(name: str, rows: Sequence[Row], exceeded: Sequence[str], environment: Row) -> str:
    """``summary.md``: per operation a table of its points and its growth exponents."""
    fits, by_step = exponents(rows), steps(rows)
    lines = [f"# Scaling sweep `{name}`", ""]
    lines.append(
        f"Spark {environment.get('spark')} on `{environment.get('spark_master')}`, "
        f"{environment.get('cores')} cores, {environment.get('memory_gib')} GiB. Wall time is "
        "the median of the runs; Kafka's work is counted by the emulation (scaling.csv has "
        "every column)."
    )
    lines.append("")
    if exceeded:
        lines += ["**Budgets exceeded:**", "", *[f"- {x}" for x in exceeded], ""]
    for operation in _operations(rows):
        ops = [r for r in rows if r["operation"] == operation]
        lines += [f"## {operation}", ""]
        series_names = list(dict.fromkeys(series_name(r) for r in ops))
        columns = [("series", "series")] if len(series_names) > 1 else []
        columns += list(TABLE)
        lines.append("| " + " | ".join(h for _, h in columns) + " |")
        lines.append("|" + "---|" * len(columns))
        for r in ops:
            cells = [series_name(r) if c == "series" else _cell(r.get(c)) for c, _ in columns]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
        for name, figures in fits.get(operation, {}).items():
            shown = ", ".join(f"{k} {v:.2f}" for k, v in figures.items() if v is not None)
            lines.append(f"Growth exponents ({name}): {shown or 'fewer than two sizes'}.")
            for line in _step_lines(by_step.get(operation, {}).get(name, {})):
                lines.append(f"- {line}")
        lines.append("")
    return "\n".join(lines)


def write_report(
    path: Path,
    name: str,
    summary: Mapping[str, Any],
    rows: Sequence[Row],
    pngs: Mapping[str, bytes],
) -> None:
    """``report.html``: the sweep's totals, then per operation its chart and its rows."""
    sections = []
    for operation in _operations(rows):
        ops = [dict(r) for r in rows if r["operation"] == operation]
        table = [{h: r.get(c) for c, h in TABLE} for r in ops]
        sections.append(
            Section(
                operation,
                f"{ops[0]['type']}: median wall time over {ops[0]['runs']} run(s) per point; "
                "k is the fitted growth exponent (log-log least squares).",
                [inline_png(pngs[operation], f"{operation}: time and Kafka's work")],
                [table],
            )
        )
    render_report(
        path,
        title=f"kce scale {name}",
        question=f"how the controller's work and the emulator's cost grow — sweep {name}",
        summary=summary,
        sections=sections,
    )
