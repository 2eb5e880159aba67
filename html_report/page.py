"""``report.html``: one self-contained page, for a ``kce whatif`` question or a ``kce run``.

The page opens from disk with no network: charts are inline SVG drawn by matplotlib
(``html_report.charts``), the CSS is a few inline rules, and a Content-Security-Policy forbids
every external fetch. The same input renders to the same bytes (no generated-at time, and the
charts' own guarantees), so reports diff cleanly between runs.

A ``Section`` groups a heading, a short paragraph, charts and tables; the page is a title, the
question (or command) it answers, a summary table, then the sections.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

Row = Mapping[str, Any]

MAX_LIST_ITEMS = 10
MAX_TABLE_ROWS = 50
# A nested mapping of many values (per broker, per topic) shows its first entries as a grid of
# GRID_COLUMNS keys over their values, GRID_ROWS such rows: a small table, not a wall of text.
GRID_COLUMNS = 10
GRID_ROWS = 2

_ID = re.compile(r'\bid="([^"]+)"')
_REF = re.compile(r'(href="#|url\(#)([^")]+)')


@dataclass(frozen=True)
class Section:
    """A part of the report: a heading, a short paragraph, charts (inline SVG, or an ``<img>``)
    and tables of rows.

    A table is a list of rows, each a mapping of column to value; the columns are the keys of the
    rows in first-seen order.
    """

    heading: str
    text: str = ""
    charts: list[str] = field(default_factory=list)
    tables: list[list[Row] | TableHead] = field(default_factory=list)


@dataclass(frozen=True)
class TableHead:
    """The first rows of a table too long to hold, and how many rows the whole table has: the
    page shows the rows it would show of the full table, then "… and N more rows"."""

    rows: list[Row]
    total: int


def render_report(
    path: Path,
    *,
    title: str,
    question: str,
    summary: Mapping[str, Any],
    sections: Sequence[Section],
) -> None:
    """Write the report to ``path``: title and question, the summary table, then the sections."""
    html = render_html(title=title, question=question, summary=summary, sections=sections)
    Path(path).write_text(html, encoding="utf-8")


def render_html(
    *,
    title: str,
    question: str,
    summary: Mapping[str, Any],
    sections: Sequence[Section],
) -> str:
    """The report as one HTML string (what ``render_report`` writes)."""
    return _template().render(
        title=title,
        question=question,
        summary=summary_rows(summary),
        sections=[_section_view(s, i) for i, s in enumerate(sections)],
    )


@dataclass(frozen=True)
class Pairs:
    """A nested mapping shown as a small table of key → value rows (a value may nest again)."""

    rows: list[tuple[str, Cell]]
    more: int


@dataclass(frozen=True)
class Grid:
    """A nested mapping of many plain values shown as rows of up to ``GRID_COLUMNS`` keys, each
    over its value, and how many entries are left out."""

    chunks: list[tuple[list[str], list[str]]]
    more: int


Cell = str | Pairs | Grid


def summary_rows(summary: Mapping[str, Any]) -> list[tuple[str, Cell]]:
    """The summary as (key, cell) rows: a plain value as its text, a nested mapping as a small
    table (``cell``)."""
    return [(str(key), cell(value)) for key, value in summary.items()]


def cell(value: Any) -> Cell:
    """A value as a summary cell: a mapping of more than ``MAX_LIST_ITEMS`` plain values as a
    ``Grid``, another non-empty mapping as ``Pairs``, anything else as ``format_value``'s text."""
    if not isinstance(value, Mapping) or not value:
        return format_value(value)
    items = list(value.items())
    shown = GRID_COLUMNS * GRID_ROWS
    if len(items) > MAX_LIST_ITEMS and not any(_nested(v) for _, v in items):
        chunks = [
            ([str(k) for k, _ in items[i : i + GRID_COLUMNS]],
             [format_value(v) for _, v in items[i : i + GRID_COLUMNS]])
            for i in range(0, min(len(items), shown), GRID_COLUMNS)
        ]  # fmt: skip
        return Grid(chunks, max(0, len(items) - shown))
    return Pairs([(str(k), cell(v)) for k, v in items[:shown]], max(0, len(items) - shown))


def _nested(value: Any) -> bool:
    return isinstance(value, Mapping) and bool(value)


def format_value(value: Any) -> str:
    """A value as the report shows it: grouped digits, four significant figures, short lists."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        # Broker ids (1001 up when generated) and partition numbers stay ungrouped: "1,001, 1,002"
        # misreads as a list. Counts of a hundred thousand and more are grouped.
        return f"{value:,}" if abs(value) >= 100_000 else str(value)
    if isinstance(value, float):
        return f"{value:,.4g}" if math.isfinite(value) else str(value)
    if isinstance(value, Mapping):
        return _truncated([f"{k}: {format_value(v)}" for k, v in value.items()])
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value) if isinstance(value, (set, frozenset)) else value
        return _truncated([format_value(v) for v in items])
    return str(value)


def _scoped(svg: str, prefix: str) -> str:
    """``svg`` with its ids made unique in the page: matplotlib numbers ids per figure, so two
    inline charts would otherwise share ids and borrow each other's glyphs and clip paths."""
    svg = _ID.sub(lambda m: f'id="{prefix}{m.group(1)}"', svg)
    return _REF.sub(lambda m: f"{m.group(1)}{prefix}{m.group(2)}", svg)


@dataclass(frozen=True)
class _Table:
    columns: list[str]
    rows: list[list[str]]
    more: int


@dataclass(frozen=True)
class _SectionView:
    heading: str
    text: str
    charts: list[Markup]
    tables: list[_Table]


def _section_view(section: Section, index: int) -> _SectionView:
    charts = [
        Markup(_scoped(svg, f"s{index}c{i}-"))  # trusted: the chart functions' own SVG
        for i, svg in enumerate(section.charts)
    ]
    return _SectionView(section.heading, section.text, charts, [_table(t) for t in section.tables])


def _table(table: Sequence[Row] | TableHead) -> _Table:
    rows, total = (table.rows, table.total) if isinstance(table, TableHead) else (table, len(table))
    columns = list(dict.fromkeys(k for row in rows for k in row))
    shown = rows[:MAX_TABLE_ROWS]
    cells = [[format_value(row.get(c)) if c in row else "" for c in columns] for row in shown]
    return _Table(columns, cells, total - len(shown))


def _truncated(items: Sequence[str]) -> str:
    shown = ", ".join(items[:MAX_LIST_ITEMS])
    more = len(items) - MAX_LIST_ITEMS
    return f"{shown} … and {more} more" if more > 0 else shown


@functools.cache
def _template() -> jinja2.Template:
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("html_report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    return environment.get_template("report.html.j2")
