"""Step lines over time (gauges held until their next value), with numbered marks for the times
something was done to the cluster.

Series that coincide (three gauges all at 0, or all at the same count) must each stay visible:
the first is drawn widest and solid, each later one narrower, dashed differently and on top, so
where lines meet every colour still shows. A gauge at 0 is drawn just above the x axis, not on
it. The legend sits right of the plot and the marks' numbers above it: neither covers a line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from matplotlib.figure import Figure

from html_report.charts import (
    FULL_WIDTH,
    LINESTYLES,
    SERIES_COLOURS,
    no_data,
    series_width,
    svg_chart,
    titled_axes,
)

# A step line of up to 2 × 500 points: about 2 px per step across the page's 1200 px column.
MAX_STEP_BUCKETS = 500
# Light and solid: a mark is never mistaken for a (dashed or dotted) series.
MARK_COLOUR = "#c3c8cf"
MARK_ROW_POINTS = 10.0  # the height of one row of mark numbers above the plot
MARK_SEPARATION = 0.02  # of the plot's width: closer marks go to the next row
MAX_MARK_ROWS = 4


@svg_chart
def step_timeline(
    title: str,
    series: Mapping[str, Sequence[tuple[float, float]]],
    until: float,
    *,
    marks: Sequence[tuple[float, str]] = (),
    xlabel: str = "virtual time (s)",
    ylabel: str = "count",
) -> Figure:
    """One step line per series: each ``(x, value)`` point holds until the next, the last until
    ``until``. Points must be in x order; a later point at the same x wins. A series' colour is
    its place in the mapping, and a series without points is not drawn but keeps its place, so
    charts of one set of series colour each the same. A long series is thinned first
    (``thin_steps``): the SVG stays small whatever the input. Each ``(x, label)`` of ``marks`` is
    a light vertical line with its label above the plot."""
    drawn = {
        name: (i, thin_steps(points, until))
        for i, (name, points) in enumerate(series.items())
        if points
    }
    right = max([until, *(points[-1][0] for _, points in drawn.values())])
    rows = _mark_rows([x / right for x, _ in marks]) if drawn and right > 0 else []
    pad = 6.0 + MARK_ROW_POINTS * (max(rows) + 1 if rows else 0)
    ax = titled_axes(title, 0, width=FULL_WIDTH, pad=pad)
    if not drawn:
        no_data(ax)
    else:
        for k, (name, (i, points)) in enumerate(drawn.items()):
            xs = [x for x, _ in points]
            ys = [y for _, y in points]
            if xs[-1] < until:
                xs.append(until)
                ys.append(ys[-1])
            ax.step(
                xs,
                ys,
                where="post",
                color=SERIES_COLOURS[i % len(SERIES_COLOURS)],
                linewidth=series_width(k, len(drawn)),
                linestyle=LINESTYLES[k % len(LINESTYLES)],
                zorder=2 + k,  # later, narrower lines on top of earlier, wider ones
                label=name,
            )
        top = max(1.0, *(y for _, points in drawn.values() for _, y in points)) * 1.05
        low = min(0.0, *(y for _, points in drawn.values() for _, y in points))
        # A little below 0: a gauge at 0 is drawn above the x axis, not hidden by it.
        ax.set_ylim(low - 0.04 * (top - low), top)
        ax.set_xlim(0, right)
        ax.yaxis.get_major_locator().set_params(integer=True)
        for n, ((x, label), row) in enumerate(zip(marks, rows, strict=True)):
            ax.axvline(
                x,
                color=MARK_COLOUR,
                linewidth=1.0,
                zorder=1,
                label="scenario event" if n == 0 else "_nolegend_",
            )
            ax.annotate(
                label,
                (x, 1),
                xycoords=("data", "axes fraction"),
                xytext=(0, 2 + MARK_ROW_POINTS * row),
                textcoords="offset points",
                ha="center",
                va="bottom",
                fontsize=7.5,
                color="#444444",
            )
        # Beside the plot: above it, many series would cover the title.
        ax.legend(frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    return ax.figure


def _mark_rows(fractions: Sequence[float]) -> list[int]:
    """Each mark's row of labels (0 nearest the plot): the lowest where the previous label is at
    least ``MARK_SEPARATION`` away, the marks taken in x order. Past ``MAX_MARK_ROWS`` rows, the
    row whose last label is furthest away."""
    order = sorted(range(len(fractions)), key=lambda i: fractions[i])
    last: list[float] = []
    rows = [0] * len(fractions)
    for i in order:
        x = fractions[i]
        free = [r for r, at in enumerate(last) if x - at >= MARK_SEPARATION]
        if free:
            row = free[0]
        elif len(last) < MAX_MARK_ROWS:
            row = len(last)
            last.append(x)
        else:
            row = min(range(len(last)), key=lambda r: last[r])
        last[row] = x
        rows[i] = row
    return rows


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
