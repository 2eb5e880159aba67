"""The report's charts, measured on their laid-out matplotlib figures: no chart wider than the
page's column, legends outside the plot and clear of every text, broker labels that never touch
however many brokers (40 to 1,000), and every series of a timeline visible in the rendered
pixels even where series coincide."""

from __future__ import annotations

from collections.abc import Callable
from itertools import combinations, pairwise

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.transforms import Bbox

from html_report.charts import (
    FULL_WIDTH,
    SERIES_COLOURS,
    bars_before_after,
    distribution,
    loglog_panels,
    margins_per_batch,
    ratios_against_threshold,
)
from html_report.timeline import step_timeline


def _overlap(a: Bbox, b: Bbox) -> float:
    """The area two boxes share, in square pixels."""
    w = min(a.x1, b.x1) - max(a.x0, b.x0)
    h = min(a.y1, b.y1) - max(a.y0, b.y0)
    return max(0.0, w) * max(0.0, h)


def _texts(figure: Figure) -> list[tuple[str, Bbox]]:
    """Every visible text's box: titles, axis and tick labels, annotations."""
    out = []
    for ax in figure.axes:
        texts = [ax.title, ax._left_title, ax.xaxis.label, ax.yaxis.label, *ax.texts]
        texts += [*ax.get_xticklabels(), *ax.get_yticklabels()]
        out += [(t.get_text(), t.get_window_extent()) for t in texts if t.get_text()]
    return out


def _bars(brokers: int) -> Figure:
    before = {b: 1000 for b in range(brokers)}
    after = {b: (2000, 0, 971)[b % 3] for b in range(brokers)}
    return bars_before_after.figure("Leaders per broker", before, after, "leaders")


FIGURES: dict[str, Callable[[], Figure]] = {
    "bars-few": lambda: _bars(6),
    "bars-many": lambda: _bars(103),
    "ratios": lambda: ratios_against_threshold.figure(
        "Imbalance ratio per broker", {b: (b % 3 == 1) * 1.0 for b in range(100)}, 0.1
    ),
    "distribution": lambda: distribution.figure("Offline", {0: 30, 1: 12, 4: 3}, "offline"),
    "margins": lambda: margins_per_batch.figure("Margins", ["1,2", "3,4", "5,6"], [1, -1, 0]),
    "timeline": lambda: step_timeline.figure(
        "Partitions at risk",
        {
            "UnderReplicatedPartitions": [(0, 0), (10, 100_000), (302, 0)],
            "UnderMinIsrPartitionCount": [(0, 0), (10, 100_000), (302, 0)],
            "OfflinePartitionsCount": [(0, 0)],
        },
        600,
        marks=[(10, "1"), (300, "2"), (302, "3"), (305, "4")],
    ),
    "loglog": lambda: loglog_panels.figure(
        "scale: time and Kafka's work",
        [
            ("seconds", {f"wall_seconds k=0.{i}": [(1e3, 1.0 + i), (1e6, 9.0)] for i in range(4)}),
            ("count", {f"zk_writes k=0.{i}": [(1e3, 10.0 + i), (1e6, 9e5)] for i in range(6)}),
        ],
        "partitions",
    ),
}


@pytest.mark.parametrize("name", list(FIGURES))
def test_no_chart_is_wider_than_the_page_and_legends_cover_nothing(name: str) -> None:
    figure = FIGURES[name]()
    assert figure.get_figwidth() <= FULL_WIDTH  # the page's 1200px column: never scaled down
    whole = figure.bbox
    texts = _texts(figure)
    legends = [ax.get_legend() for ax in figure.axes if ax.get_legend() is not None]
    if name not in ("distribution", "margins"):  # one series each: nothing to name
        assert legends, "every chart with series names them"
    for legend in legends:
        box = legend.get_window_extent()
        # Inside the figure (the SVG's box), and outside every plot area and text.
        assert whole.x0 - 1 <= box.x0 and box.x1 <= whole.x1 + 1
        assert whole.y0 - 1 <= box.y0 and box.y1 <= whole.y1 + 1
        for ax in figure.axes:
            assert _overlap(box, ax.bbox) < 1.0, f"{name}: the legend covers a plot"
        for text, extent in texts:
            assert _overlap(box, extent) < 1.0, f"{name}: the legend covers {text!r}"
    for a, b in combinations([legend.get_window_extent() for legend in legends], 2):
        assert _overlap(a, b) < 1.0, f"{name}: two legends overlap"


@pytest.mark.parametrize("brokers", [40, 41, 100, 250, 1000])
def test_broker_labels_never_touch_however_many_brokers(brokers: int) -> None:
    """Kafka clusters of hundreds of brokers: the labels shown are spread so that no two touch
    (measured on the laid-out figure), the first broker is always labelled, and enough remain to
    find a broker (at least one label per 40 brokers' worth of axis)."""
    for figure in (
        _bars(brokers),
        ratios_against_threshold.figure("Imbalance", {b: 0.1 for b in range(brokers)}, 0.1),
    ):
        labels = [t for t in figure.axes[0].get_xticklabels() if t.get_text()]
        boxes = [t.get_window_extent() for t in labels]
        assert all(a.x1 < b.x0 for a, b in pairwise(boxes)), "two broker labels touch"
        assert labels[0].get_text() == "0"
        assert len(labels) >= min(brokers, 10)
        # Inside the figure: no label is cut off at the page's edge.
        assert boxes[-1].x1 <= figure.bbox.x1


def _pixels(figure: Figure, panel: int = 0) -> np.ndarray:
    """A plot area's pixels (RGB), rendered by Agg: what a reader sees, legend left out."""
    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    rgb = np.asarray(canvas.buffer_rgba())[:, :, :3].astype(int)
    box = figure.axes[panel].bbox
    height = rgb.shape[0]
    return rgb[int(height - box.y1) : int(height - box.y0), int(box.x0) : int(box.x1)]


def _seen(pixels: np.ndarray, colour: str) -> int:
    """How many pixels show ``colour`` (within a small distance: antialiasing blends edges)."""
    target = np.array([int(colour[i : i + 2], 16) for i in (1, 3, 5)])
    return int((np.abs(pixels - target).sum(axis=2) < 40).sum())


@pytest.mark.parametrize("shape", ["coinciding", "all zero"])
def test_every_series_of_a_timeline_is_visible_where_series_coincide(shape: str) -> None:
    """Three gauges with the same values (a rack outage makes every partition under-replicated
    and under min ISR at once; a quiet run keeps every gauge at 0): each colour still shows in
    the rendered plot, a gauge at 0 too (not hidden under the x axis)."""
    points = [(0.0, 0.0), (10.0, 5.0), (40.0, 0.0)] if shape == "coinciding" else [(0.0, 0.0)]
    names = ["UnderReplicatedPartitions", "UnderMinIsrPartitionCount", "OfflinePartitionsCount"]
    figure = step_timeline.figure("At risk", dict.fromkeys(names, points), 60.0)
    pixels = _pixels(figure)
    for i, name in enumerate(names):
        assert _seen(pixels, SERIES_COLOURS[i]) >= 40, f"{name} is hidden"


def test_before_and_after_are_both_visible_for_many_brokers() -> None:
    """Past 40 brokers the "after" bars and the "before" outline each show in the pixels,
    where before and after are equal too."""
    before = {b: 1000 for b in range(250)}
    pixels = _pixels(bars_before_after.figure("Leaders", before, dict(before), "leaders"))
    assert _seen(pixels, "#2f6fb5") >= 1000  # the bars
    assert _seen(pixels, "#4d5561") >= 200  # the outline along their tops


def test_every_line_of_a_sweep_chart_is_visible_where_counts_are_equal() -> None:
    """A broker failure's elections, ZooKeeper writes and LeaderAndIsr partitions are often the
    same count at every size: each line of the sweep chart's work panel still shows."""
    points = [(1e3, 10.0), (1e4, 100.0), (1e5, 1000.0)]
    names = ["elections", "zk_writes", "LeaderAndIsr_partitions", "UpdateMetadata_partitions"]
    figure = loglog_panels.figure("t", [("count", dict.fromkeys(names, points))], "partitions")
    pixels = _pixels(figure)
    for i, name in enumerate(names):
        assert _seen(pixels, SERIES_COLOURS[i]) >= 20, f"{name} is hidden"
