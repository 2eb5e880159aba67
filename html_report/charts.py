"""The report's charts: each takes plain Python data and returns an SVG string.

matplotlib is used through ``Figure`` objects only, never ``pyplot``, so no GUI backend or global
figure state is involved. The same data draws the same bytes: a fixed ``svg.hashsalt``, glyphs as
paths, and no SVG metadata (no date).
"""

from __future__ import annotations

import base64
import html
import io
import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import matplotlib
from matplotlib.axes import Axes
from matplotlib.figure import Figure

MAX_TICK_LABELS = 40
FULL_WIDTH = 12.5  # inches: the page's 1200px column
# A step line of up to 2 × 500 points: about 2 px per step across the page's 1200 px column.
MAX_STEP_BUCKETS = 500

BEFORE = "#a8b3bf"
AFTER = "#2f6fb5"
UNDER = "#4c7fb5"
OVER = "#c8372d"
POSITIVE = "#3f8f4f"
THRESHOLD = "#222222"
# Line colours of a timeline, in series order: the report's blue, red and green first.
SERIES_COLOURS = (
    "#2f6fb5",
    "#c8372d",
    "#3f8f4f",
    "#d08a1f",
    "#7b4fa8",
    "#4aa3b8",
    "#8c564b",
    "#555555",
    "#d36fb4",
)

_RC = {
    # A fixed salt makes clip-path and marker ids, and so the SVG bytes, the same on every run.
    "svg.hashsalt": "kce-report",
    # Glyphs as paths: the page needs no fonts, and looks the same wherever it is opened.
    "svg.fonttype": "path",
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
}
# No Date (determinism) and no Creator/Format/Type: matplotlib then writes no RDF block.
_NO_METADATA: dict[str, Any] = {"Date": None, "Creator": None, "Format": None, "Type": None}


def bars_before_after(
    title: str,
    per_broker_before: Mapping[int, int],
    per_broker_after: Mapping[int, int],
    ylabel: str,
) -> str:
    """Grouped bars per broker, before and after; a broker missing on one side counts 0."""
    brokers = sorted(set(per_broker_before) | set(per_broker_after))
    with _chart(title, len(brokers)) as ax:
        if not brokers:
            _no_data(ax)
        else:
            xs = range(len(brokers))
            before = [per_broker_before.get(b, 0) for b in brokers]
            after = [per_broker_after.get(b, 0) for b in brokers]
            ax.bar([x - 0.2 for x in xs], before, 0.4, color=BEFORE, linewidth=0, label="before")
            ax.bar([x + 0.2 for x in xs], after, 0.4, color=AFTER, linewidth=0, label="after")
            _broker_axis(ax, brokers)
            # Above the plot, beside the title: inside it would hide bars on a busy chart.
            ax.legend(frameon=False, loc="lower right", bbox_to_anchor=(1, 1), ncols=2)
        ax.set_ylabel(ylabel)
        return _svg(ax.figure)


def ratios_against_threshold(title: str, ratios: Mapping[int, float], threshold: float) -> str:
    """A bar per broker with the threshold as a dashed line; bars above it stand out in red."""
    brokers = sorted(ratios)
    with _chart(title, len(brokers)) as ax:
        if not brokers:
            _no_data(ax)
        else:
            values = [ratios[b] for b in brokers]
            colors = [OVER if v > threshold else UNDER for v in values]
            ax.bar(range(len(brokers)), values, 0.8, color=colors, linewidth=0)
            _broker_axis(ax, brokers)
        ax.axhline(threshold, color=THRESHOLD, linestyle="--", linewidth=1)
        ax.annotate(
            f"threshold {threshold:g}",
            (1, threshold),
            xycoords=("axes fraction", "data"),
            xytext=(0, 3),
            textcoords="offset points",
            ha="right",
            va="bottom",
        )
        ax.set_ylabel("imbalance ratio")
        return _svg(ax.figure)


def distribution(
    title: str, counts: Mapping[int, int], xlabel: str, *, ylabel: str = "count"
) -> str:
    """A histogram of pre-counted values (value → how often): one bar per value when there are at
    most 60 of them in range, else 50 bins."""
    with _chart(title, 0) as ax:
        values = sorted(v for v, n in counts.items() if n)
        if not values:
            _no_data(ax)
        elif values[-1] - values[0] < 60:
            ax.bar(values, [counts[v] for v in values], 0.8, color=AFTER, linewidth=0)
            ax.xaxis.get_major_locator().set_params(integer=True)
        else:
            weights = [counts[v] for v in values]
            ax.hist(values, bins=50, weights=weights, color=AFTER, linewidth=0)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        return _svg(ax.figure)


def margins_per_batch(title: str, batches: Sequence[str], min_margin: Sequence[int]) -> str:
    """The smallest min-ISR margin of each rolling-restart batch; negative margins in red."""
    if len(batches) != len(min_margin):
        raise ValueError(f"{len(batches)} batches but {len(min_margin)} margins")
    with _chart(title, len(batches)) as ax:
        if not batches:
            _no_data(ax)
        else:
            colors = [OVER if m < 0 else POSITIVE for m in min_margin]
            ax.bar(range(len(batches)), min_margin, 0.8, color=colors, linewidth=0)
            ticks = _thinned(len(batches))
            ax.set_xticks(ticks, [batches[i] for i in ticks], rotation=45, ha="right")
            ax.set_xlabel("batch")
            ax.yaxis.get_major_locator().set_params(integer=True)
        ax.axhline(0, color=THRESHOLD, linewidth=0.8)
        ax.set_ylabel("min-ISR margin")
        return _svg(ax.figure)


@contextmanager
def _chart(title: str, bars: int, *, width: float | None = None) -> Iterator[Axes]:
    # Wider for many brokers, capped at the page's 1200px column so the page never scales the
    # chart (and its labels) down: 250 brokers get about 3.6 points each.
    width = min(max(7.0, bars * 0.065), FULL_WIDTH) if width is None else width
    with matplotlib.rc_context(_RC):
        figure = Figure(figsize=(width, 3.6), layout="constrained")
        ax = figure.subplots()
        ax.set_title(title, loc="left", fontsize=10)
        yield ax


def _broker_axis(ax: Axes, brokers: Sequence[int]) -> None:
    ticks = _thinned(len(brokers))
    ax.set_xticks(ticks, [str(brokers[i]) for i in ticks])
    ax.set_xlim(-0.6, len(brokers) - 0.4)
    ax.set_xlabel("broker")


def _thinned(n: int) -> list[int]:
    """At most ``MAX_TICK_LABELS`` evenly spaced positions out of ``n``, the first always kept."""
    step = max(1, math.ceil(n / MAX_TICK_LABELS))
    return list(range(0, n, step))


def _no_data(ax: Axes) -> None:
    ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center", va="center", color="#777777")
    ax.set_xticks([])
    ax.set_yticks([])


def _svg(figure: Figure) -> str:
    out = io.StringIO()
    figure.savefig(out, format="svg", metadata=_NO_METADATA)
    text = out.getvalue()
    # The XML declaration and DOCTYPE are not allowed inside HTML.
    return text[text.index("<svg") :]


def step_timeline(
    title: str,
    series: Mapping[str, Sequence[tuple[float, float]]],
    until: float,
    *,
    xlabel: str = "virtual time (s)",
    ylabel: str = "count",
) -> str:
    """One step line per series: each ``(x, value)`` point holds until the next, the last until
    ``until``. Points must be in x order; a later point at the same x wins. A series' colour is
    its place in the mapping, and a series without points is not drawn but keeps its place, so
    charts of one set of series colour each the same. A long series is thinned first
    (``thin_steps``): the SVG stays small whatever the input."""
    with _chart(title, 0, width=FULL_WIDTH) as ax:
        drawn = {
            name: (i, thin_steps(points, until))
            for i, (name, points) in enumerate(series.items())
            if points
        }
        if not drawn:
            _no_data(ax)
        else:
            for name, (i, points) in drawn.items():
                xs = [x for x, _ in points]
                ys = [y for _, y in points]
                if xs[-1] < until:
                    xs.append(until)
                    ys.append(ys[-1])
                colour = SERIES_COLOURS[i % len(SERIES_COLOURS)]
                ax.step(xs, ys, where="post", color=colour, linewidth=1.3, label=name)
            values = [y for _, points in drawn.values() for _, y in points]
            # From 0 up: a count that stays 0 is drawn on the axis, not in the middle of the plot.
            ax.set_ylim(min(0, *values), max(1, *values) * 1.05)
            ax.set_xlim(0, max(until, *(points[-1][0] for _, points in drawn.values())))
            ax.yaxis.get_major_locator().set_params(integer=True)
            # Beside the plot: above it, many series would cover the title.
            ax.legend(frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1))
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        return _svg(ax.figure)


def thin_steps(
    points: Sequence[tuple[float, float]], until: float, buckets: int = MAX_STEP_BUCKETS
) -> list[tuple[float, float]]:
    """``points`` of a step line with only the points where the value changes; when more than
    ``2 * buckets`` remain, the range up to ``until`` is cut into ``buckets`` equal slices and a
    slice with several points keeps two: its highest value from its first point, then its last
    value from its last point. Peaks and the final value survive; a dip inside a slice does not."""
    changes = _changes(points)
    if len(changes) <= 2 * buckets:
        return changes
    start = changes[0][0]
    width = (max(until, changes[-1][0]) - start) / buckets
    slices: dict[int, list[tuple[float, float]]] = {}
    for x, y in changes:
        slices.setdefault(min(int((x - start) / width), buckets - 1), []).append((x, y))
    kept: list[tuple[float, float]] = []
    for group in slices.values():
        if len(group) > 1:
            kept.append((group[0][0], max(y for _, y in group)))
        kept.append(group[-1])
    return _changes(kept)


def _changes(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """The points where the held value changes; of several at one x, the last."""
    out: list[tuple[float, float]] = []
    for x, y in points:
        if out and out[-1][0] == x:
            out.pop()
        if not out or out[-1][1] != y:
            out.append((x, y))
    return out


def loglog_panels(
    title: str,
    panels: Sequence[tuple[str, Mapping[str, Sequence[tuple[float, float]]]]],
    xlabel: str,
) -> bytes:
    """Panels side by side, each ``(ylabel, lines)``: one line with markers per name, on log
    scales; points with a value ≤ 0 cannot be drawn there and are left out. A PNG (byte-stable:
    no text chunks), for a file and, through ``inline_png``, for a page."""
    with matplotlib.rc_context(_RC):
        figure = Figure(figsize=(FULL_WIDTH, 4.2), layout="constrained")
        axes = figure.subplots(1, max(1, len(panels)), squeeze=False)[0]
        figure.suptitle(title, x=0.01, ha="left", fontsize=10)
        for ax, (ylabel, lines) in zip(axes, panels, strict=False):
            drawn = {
                name: [(x, y) for x, y in points if x > 0 and y > 0]
                for name, points in lines.items()
            }
            drawn = {name: points for name, points in drawn.items() if points}
            if not drawn:
                _no_data(ax)
            for i, (name, points) in enumerate(drawn.items()):
                colour = SERIES_COLOURS[i % len(SERIES_COLOURS)]
                xs, ys = [x for x, _ in points], [y for _, y in points]
                ax.plot(xs, ys, marker="o", markersize=4, color=colour, linewidth=1.3, label=name)
            if drawn:
                ax.set_xscale("log")
                ax.set_yscale("log")
                ax.legend(frameon=False, fontsize=7, loc="upper left")
            ax.set_xlabel(xlabel)
            ax.set_ylabel(ylabel)
        png = io.BytesIO()
        figure.savefig(png, format="png", dpi=100, metadata={"Software": None})
        return png.getvalue()


def inline_png(png: bytes, alt: str) -> str:
    """A PNG as an ``<img>`` the report's page holds itself (its policy allows ``data:`` images)."""
    encoded = base64.b64encode(png).decode("ascii")
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{encoded}">'
