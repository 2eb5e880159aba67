"""The report's charts: each takes plain Python data and returns an SVG string.

matplotlib is used through ``Figure`` objects only, never ``pyplot``, so no GUI backend or global
figure state is involved. The same data draws the same bytes: a fixed ``svg.hashsalt``, glyphs as
paths, and no SVG metadata (no date).
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import matplotlib
from matplotlib.axes import Axes
from matplotlib.figure import Figure

MAX_TICK_LABELS = 40

BEFORE = "#a8b3bf"
AFTER = "#2f6fb5"
UNDER = "#4c7fb5"
OVER = "#c8372d"
POSITIVE = "#3f8f4f"
THRESHOLD = "#222222"

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
def _chart(title: str, bars: int) -> Iterator[Axes]:
    # Wider for many brokers, capped at the page's 1200px column so the page never scales the
    # chart (and its labels) down: 250 brokers get about 3.6 points each.
    width = min(max(7.0, bars * 0.065), 12.5)
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
