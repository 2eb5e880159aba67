"""The report's charts: each takes plain Python data and returns an SVG string.

matplotlib is used through ``Figure`` objects only, never ``pyplot``, so no GUI backend or global
figure state is involved. The same data draws the same bytes: a fixed ``svg.hashsalt``, glyphs as
paths, and no SVG metadata (no date).

Every chart fits the page's 1200px column, keeps its legend outside the plot area, and labels
only as many brokers as fit without two labels touching, measured on the laid-out figure. A
chart is an ``SvgChart``: called, it returns the SVG; ``.figure(...)`` returns the laid-out
matplotlib ``Figure`` it is drawn from, whose boxes can be measured.
"""

from __future__ import annotations

import base64
import html
import io
import math
from collections.abc import Callable, Mapping, Sequence
from itertools import pairwise
from typing import Any, Generic, ParamSpec, TypeVar

import matplotlib
from matplotlib.axes import Axes
from matplotlib.figure import Figure

P = ParamSpec("P")
T = TypeVar("T")

MAX_TICK_LABELS = 40
FULL_WIDTH = 12.5  # inches: the page's 1200px column
# Past this many brokers a chart takes the page's full width, and "before" is drawn as an
# outline over the "after" bars: two bars of a few pixels each would be hard to tell apart.
MANY_BROKERS = 40
LABEL_GAP_POINTS = 4.0  # the least room between two neighbouring tick labels

BEFORE = "#a8b3bf"
BEFORE_OUTLINE = "#4d5561"  # darker than BEFORE: an outline over blue bars must stand out
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

# Line dash patterns in series order: solid first, then patterns whose gaps fall in different places.
LINESTYLES: tuple[str | tuple[int, tuple[float, ...]], ...] = (
    "-",
    (0, (6.0, 3.0)),
    (0, (1.0, 2.0)),
    (0, (8.0, 2.0, 1.5, 2.0)),
    (3, (3.0, 3.0)),
    (0, (2.0, 1.0, 2.0, 4.0)),
)
WIDEST, NARROWEST = 3.0, 1.1  # points: the first series' width, the last's

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


def _svg(figure: Figure) -> str:
    out = io.StringIO()
    figure.savefig(out, format="svg", metadata=_NO_METADATA)
    text = out.getvalue()
    # The XML declaration and DOCTYPE are not allowed inside HTML.
    return text[text.index("<svg") :]


class Chart(Generic[P, T]):
    """A chart drawn by ``draw`` (which returns its ``Figure``): calling it gives the figure
    encoded (SVG text for the page, or PNG bytes); ``figure`` gives the laid-out ``Figure``."""

    def __init__(self, draw: Callable[P, Figure], encode: Callable[[Figure], T]) -> None:
        self._draw = draw
        self._encode = encode
        self.__doc__ = draw.__doc__
        self.__name__ = draw.__name__

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> T:
        # The rc settings apply while saving too: the SVG's ids and glyphs depend on them.
        with matplotlib.rc_context(_RC):
            return self._encode(self._draw(*args, **kwargs))

    def figure(self, *args: P.args, **kwargs: P.kwargs) -> Figure:
        with matplotlib.rc_context(_RC):
            figure = self._draw(*args, **kwargs)
            figure.draw_without_rendering()
            return figure


def svg_chart(draw: Callable[P, Figure]) -> Chart[P, str]:
    """``draw`` as a chart the page inlines as SVG."""
    return Chart(draw, _svg)


@svg_chart
def bars_before_after(
    title: str,
    per_broker_before: Mapping[int, int],
    per_broker_after: Mapping[int, int],
    ylabel: str,
) -> Figure:
    """Bars per broker, before and after; a broker missing on one side counts 0. Up to
    ``MANY_BROKERS`` brokers the two stand side by side; past that, "after" is a bar per broker
    and "before" an outline over it, so each stays visible however many brokers there are."""
    brokers = sorted(set(per_broker_before) | set(per_broker_after))
    ax = titled_axes(title, len(brokers))
    if not brokers:
        no_data(ax)
    else:
        xs = range(len(brokers))
        before = [per_broker_before.get(b, 0) for b in brokers]
        after = [per_broker_after.get(b, 0) for b in brokers]
        if len(brokers) > MANY_BROKERS:
            ax.bar(xs, after, 0.8, color=AFTER, linewidth=0, label="after")
            edges = [x - 0.5 for x in range(len(brokers) + 1)]
            ax.stairs(before, edges, color=BEFORE_OUTLINE, linewidth=1.2, label="before")
        else:
            ax.bar([x - 0.2 for x in xs], before, 0.4, color=BEFORE, linewidth=0, label="before")
            ax.bar([x + 0.2 for x in xs], after, 0.4, color=AFTER, linewidth=0, label="after")
        _legend_above(ax)
    ax.set_ylabel(ylabel)
    if brokers:
        _broker_axis(ax, brokers)
    return ax.figure


@svg_chart
def ratios_against_threshold(title: str, ratios: Mapping[int, float], threshold: float) -> Figure:
    """A bar per broker with the threshold as a dashed line; bars above it stand out in red."""
    brokers = sorted(ratios)
    ax = titled_axes(title, len(brokers))
    if not brokers:
        no_data(ax)
    else:
        values = [ratios[b] for b in brokers]
        colors = [OVER if v > threshold else UNDER for v in values]
        ax.bar(range(len(brokers)), values, 0.8, color=colors, linewidth=0)
    line = f"threshold {threshold:g}"
    ax.axhline(threshold, color=THRESHOLD, linestyle="--", linewidth=1, label=line)
    # In the legend above the plot: a label on the line would sit on the bars.
    _legend_above(ax)
    ax.set_ylabel("imbalance ratio")
    if brokers:
        _broker_axis(ax, brokers)
    return ax.figure


@svg_chart
def distribution(
    title: str, counts: Mapping[int, int], xlabel: str, *, ylabel: str = "count"
) -> Figure:
    """A histogram of pre-counted values (value → how often): one bar per value when there are at
    most 60 of them in range, else 50 bins."""
    ax = titled_axes(title, 0)
    values = sorted(v for v, n in counts.items() if n)
    if not values:
        no_data(ax)
    elif values[-1] - values[0] < 60:
        ax.bar(values, [counts[v] for v in values], 0.8, color=AFTER, linewidth=0)
        ax.xaxis.get_major_locator().set_params(integer=True)
    else:
        weights = [counts[v] for v in values]
        ax.hist(values, bins=50, weights=weights, color=AFTER, linewidth=0)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    return ax.figure


@svg_chart
def margins_per_batch(title: str, batches: Sequence[str], min_margin: Sequence[int]) -> Figure:
    """The smallest min-ISR margin of each rolling-restart batch; negative margins in red."""
    if len(batches) != len(min_margin):
        raise ValueError(f"{len(batches)} batches but {len(min_margin)} margins")
    ax = titled_axes(title, len(batches))
    if not batches:
        no_data(ax)
    else:
        colors = [OVER if m < 0 else POSITIVE for m in min_margin]
        ax.bar(range(len(batches)), min_margin, 0.8, color=colors, linewidth=0)
        ticks = _thinned(len(batches))
        ax.set_xticks(ticks, [batches[i] for i in ticks], rotation=45, ha="right")
        ax.set_xlabel("batch")
        ax.yaxis.get_major_locator().set_params(integer=True)
    ax.axhline(0, color=THRESHOLD, linewidth=0.8)
    ax.set_ylabel("min-ISR margin")
    return ax.figure


def chart_width(bars: int) -> float:
    """A bar chart's width in inches: wider for more bars, the page's 1200px column (never wider,
    so the page never scales a chart and its labels down) past ``MANY_BROKERS``."""
    return FULL_WIDTH if bars > MANY_BROKERS else max(7.0, 3.0 + bars * 0.2)


def titled_axes(title: str, bars: int, *, width: float | None = None, pad: float = 6.0) -> Axes:
    """A figure's one axes, titled; call under ``_RC`` (``SvgChart`` does)."""
    figure = Figure(figsize=(chart_width(bars) if width is None else width, 3.6))
    figure.set_layout_engine("constrained")
    ax = figure.subplots()
    ax.set_title(title, loc="left", fontsize=10, pad=pad)
    return ax


def _legend_above(ax: Axes) -> None:
    """The legend above the plot, right-aligned beside the left-aligned title: inside the plot
    it would hide bars on a busy chart."""
    ax.legend(frameon=False, loc="lower right", bbox_to_anchor=(1, 1), ncols=2)


def _broker_axis(ax: Axes, brokers: Sequence[int]) -> None:
    ax.set_xlim(-0.6, len(brokers) - 0.4)
    ax.set_xlabel("broker")
    fit_tick_labels(ax, [str(b) for b in brokers])


def fit_tick_labels(ax: Axes, labels: Sequence[str]) -> None:
    """Label x positions ``0..len(labels)-1``: every ``step``-th one from the first, at the
    smallest step where no two labels come closer than ``LABEL_GAP_POINTS``, measured on the
    laid-out figure (a label's width depends on its digits and the font)."""
    figure = ax.get_figure(root=True)
    assert isinstance(figure, Figure)
    gap = LABEL_GAP_POINTS * figure.dpi / 72
    step = max(1, math.ceil(len(labels) / MAX_TICK_LABELS))
    while True:
        ticks = list(range(0, len(labels), step))
        ax.set_xticks(ticks, [labels[i] for i in ticks])
        if len(ticks) <= 2:
            return
        figure.draw_without_rendering()
        boxes = [label.get_window_extent() for label in ax.get_xticklabels()]
        if all(a.x1 + gap <= b.x0 for a, b in pairwise(boxes)):
            return
        step += 1


def series_width(k: int, n: int) -> float:
    """The ``k``-th of ``n`` lines' width, from ``WIDEST`` down to ``NARROWEST``: drawn in that
    order, each on top of the wider ones, lines that coincide all stay visible."""
    return WIDEST if n == 1 else WIDEST - (WIDEST - NARROWEST) * k / (n - 1)


def _thinned(n: int) -> list[int]:
    """At most ``MAX_TICK_LABELS`` evenly spaced positions out of ``n``, the first always kept."""
    step = max(1, math.ceil(n / MAX_TICK_LABELS))
    return list(range(0, n, step))


def no_data(ax: Axes) -> None:
    ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center", va="center", color="#777777")
    ax.set_xticks([])
    ax.set_yticks([])


def _loglog_figure(
    title: str,
    panels: Sequence[tuple[str, Mapping[str, Sequence[tuple[float, float]]]]],
    xlabel: str,
) -> Figure:
    """Panels side by side, each ``(ylabel, lines)``: one line with markers per name, on log
    scales; points with a value ≤ 0 cannot be drawn there and are left out. A PNG (byte-stable:
    no text chunks), for a file and, through ``inline_png``, for a page."""
    figure = Figure(figsize=(FULL_WIDTH, 4.6), layout="constrained")
    axes = figure.subplots(1, max(1, len(panels)), squeeze=False)[0]
    figure.suptitle(title, x=0.01, ha="left", fontsize=10)
    for ax, (ylabel, lines) in zip(axes, panels, strict=False):
        drawn = {
            name: [(x, y) for x, y in points if x > 0 and y > 0] for name, points in lines.items()
        }
        drawn = {name: points for name, points in drawn.items() if points}
        if not drawn:
            no_data(ax)
        for i, (name, points) in enumerate(drawn.items()):
            xs, ys = [x for x, _ in points], [y for _, y in points]
            width = series_width(i, len(drawn))
            ax.plot(
                xs,
                ys,
                marker="o",
                markersize=width + 2,  # markers too, wider first: equal counts stay visible
                color=SERIES_COLOURS[i % len(SERIES_COLOURS)],
                linewidth=width,
                linestyle=LINESTYLES[i % len(LINESTYLES)],
                zorder=2 + i,
                label=name,
            )
        if drawn:
            ax.set_xscale("log")
            ax.set_yscale("log")
            # Above the panel: inside it, the legend covered the lines of the smallest sizes.
            ax.legend(frameon=False, fontsize=7, loc="lower left", bbox_to_anchor=(0, 1), ncols=2)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
    return figure


def _png(figure: Figure) -> bytes:
    png = io.BytesIO()
    figure.savefig(png, format="png", dpi=100, metadata={"Software": None})
    return png.getvalue()


loglog_panels = Chart(_loglog_figure, _png)


def inline_png(png: bytes, alt: str) -> str:
    """A PNG as an ``<img>`` the report's page holds itself (its policy allows ``data:`` images)."""
    encoded = base64.b64encode(png).decode("ascii")
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{encoded}">'
