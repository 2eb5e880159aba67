"""``report.html``: one self-contained page (no network), byte-stable for the same input, with every
chart kind the questions draw; headless Chromium opens it and shows the charts."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from collections import Counter
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path

import pytest

from html_report.charts import (
    BEFORE_OUTLINE,
    OVER,
    bars_before_after,
    distribution,
    margins_per_batch,
    ratios_against_threshold,
)
from html_report.page import (
    GRID_COLUMNS,
    MAX_LIST_ITEMS,
    MAX_TABLE_ROWS,
    Grid,
    Pairs,
    Section,
    format_value,
    render_report,
    summary_rows,
)
from tests.chromium import assert_not_blank, chromium, needs_chromium, page_overflow

ROOT = Path(__file__).resolve().parents[1]
BROKERS = 250

SUMMARY = {
    "question": "fail",
    "brokers_failed": [3, 7],
    "offline_partitions": 1234567,
    "under_min_isr": 0.12345678,
    "partitions_per_topic": {f"topic-{i}": i for i in range(25)},
    "leaders": {"moved": 420, "unchanged": 9580},
}
HEADINGS = ["Leaders per broker", "Imbalance", "Offline partitions", "Rolling restart"]


def _sections() -> list[Section]:
    before = {b: 40 + (b * 7) % 13 for b in range(1, BROKERS + 1)}
    after = {b: 44 for b in range(1, BROKERS + 1) if b not in (3, 7)}
    return [
        Section(
            HEADINGS[0],
            "Leaders per broker before and after brokers 3 and 7 fail.",
            [bars_before_after("Leaders per broker", before, after, "leaders")],
            [[{"broker": b, "before": before[b], "after": after.get(b, 0)} for b in before]],
        ),
        Section(
            HEADINGS[1],
            "Leader imbalance per broker against leader.imbalance.per.broker.percentage.",
            [ratios_against_threshold("Leader imbalance", {1: 0.02, 2: 0.15, 3: 0.3, 4: 0.1}, 0.1)],
        ),
        Section(
            HEADINGS[2],
            "Offline partitions over every pair of failed brokers.",
            [
                distribution("Few values", {0: 30, 1: 12, 4: 3}, "offline partitions"),
                distribution(
                    "Many values", {v * 37: v % 9 for v in range(200)}, "offline partitions"
                ),
            ],
        ),
        Section(
            HEADINGS[3],
            "Smallest min-ISR margin while each batch restarts.",
            [margins_per_batch("Min-ISR margin", ["1,2", "3,4", "5,6", "7,8"], [1, 0, -1, 2])],
            [[{"batch": "5,6", "margin": -1, "partitions": ["orders-0", "orders-3"]}]],
        ),
    ]


CHARTS = 5


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("report") / "report.html"
    render_report(
        path,
        title="What if brokers 3 and 7 fail?",
        question="kce whatif fail --brokers 3,7 --snapshot describe.txt",
        summary=SUMMARY,
        sections=_sections(),
    )
    return path


class _Elements(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: Counter[str] = Counter()
        self.ids: Counter[str] = Counter()
        self.text: dict[str, list[str]] = {}
        self._open: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags[tag] += 1
        self.ids.update(v for k, v in attrs if k == "id" and v)
        self._open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in self._open:
            del self._open[len(self._open) - 1 - self._open[::-1].index(tag) :]

    def handle_data(self, data: str) -> None:
        if self._open:
            self.text.setdefault(self._open[-1], []).append(data)


def _parsed(html: str) -> _Elements:
    parser = _Elements()
    parser.feed(html)
    return parser


def test_the_page_has_title_question_summary_and_every_section(report: Path) -> None:
    html = report.read_text(encoding="utf-8")
    page = _parsed(html)
    assert page.text["title"] == ["What if brokers 3 and 7 fail?"]
    assert page.text["h1"] == ["What if brokers 3 and 7 fail?"]
    assert "kce whatif fail --brokers 3,7 --snapshot describe.txt" in html
    assert page.text["h2"] == ["Summary", *HEADINGS]
    assert page.tags["svg"] == CHARTS
    assert page.tags["figure"] == CHARTS
    # The summary, its two nested values' small tables, and the two sections' tables.
    assert page.tags["table"] == 1 + 2 + 2
    assert '<th scope="row">offline_partitions</th><td>1,234,567</td>' in html
    assert '<tr><th scope="row">moved</th><td>420</td></tr>' in html
    assert '<tr><th scope="row">unchanged</th><td>9580</td></tr>' in html


def test_ids_are_unique_across_the_inline_charts(report: Path) -> None:
    page = _parsed(report.read_text(encoding="utf-8"))
    assert page.ids, "matplotlib's SVG has ids (glyphs, clip paths)"
    assert [i for i, n in page.ids.items() if n > 1] == []
    html = report.read_text(encoding="utf-8")
    targets = set(re.findall(r'(?:href="#|url\(#)([^")]+)', html))
    assert targets and targets <= set(page.ids)


def test_the_page_loads_nothing_from_outside(report: Path) -> None:
    html = report.read_text(encoding="utf-8")
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:[a-z][a-z0-9+.-]*:)?//""", html, re.I)
    assert not re.search(r"url\(\s*[\"']?\s*(?:https?:)?//|@import", html, re.I)
    assert "<script" not in html
    assert "<?xml" not in html and "<!DOCTYPE svg" not in html
    # Only the SVG namespaces: identifiers, never fetched.
    assert set(re.findall(r"https?://[^\s\"'<>)]+", html)) <= {
        "http://www.w3.org/2000/svg",
        "http://www.w3.org/1999/xlink",
    }
    assert "default-src 'none'" in html


def test_two_renders_are_byte_identical(report: Path, tmp_path: Path) -> None:
    again = tmp_path / "again.html"
    render_report(
        again,
        title="What if brokers 3 and 7 fail?",
        question="kce whatif fail --brokers 3,7 --snapshot describe.txt",
        summary=SUMMARY,
        sections=_sections(),
    )
    assert again.read_bytes() == report.read_bytes()


def test_a_render_in_another_process_is_byte_identical(report: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.html"
    script = textwrap.dedent(
        f"""
        from pathlib import Path
        from tests.test_whatif_report import SUMMARY, _sections
        from html_report.page import render_report

        render_report(
            Path({str(other)!r}),
            title="What if brokers 3 and 7 fail?",
            question="kce whatif fail --brokers 3,7 --snapshot describe.txt",
            summary=SUMMARY,
            sections=_sections(),
        )
        """
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, check=True)
    assert other.read_bytes() == report.read_bytes()


def test_text_is_escaped(tmp_path: Path) -> None:
    path = tmp_path / "report.html"
    render_report(
        path,
        title="<b>t</b>",
        question="a & b",
        summary={"<k>": "<v>"},
        sections=[Section("<h>", "<p>", [], [[{"<c>": "<x>"}]])],
    )
    html = path.read_text(encoding="utf-8")
    assert "<b>t</b>" not in html and "&lt;b&gt;t&lt;/b&gt;" in html
    assert "a &amp; b" in html
    assert "<k>" not in html and "<v>" not in html and "<x>" not in html


def test_nested_summary_values_are_small_tables(report: Path) -> None:
    rows = dict(summary_rows(SUMMARY))
    # A small nested mapping: a key -> value table.
    assert rows["leaders"] == Pairs([("moved", "420"), ("unchanged", "9580")], 0)
    # A large one: rows of GRID_COLUMNS keys over their values, two such rows, then the count.
    grid = rows["partitions_per_topic"]
    assert isinstance(grid, Grid) and grid.more == 25 - 2 * GRID_COLUMNS
    assert grid.chunks[0] == (
        [f"topic-{i}" for i in range(GRID_COLUMNS)],
        [str(i) for i in range(GRID_COLUMNS)],
    )
    html = report.read_text(encoding="utf-8")
    assert '<table class="nested grid">' in html and "… and 5 more</td>" in html
    assert "topic-0: 0" not in html  # no wall of "key: value" text
    # A mapping nesting mappings: pairs whose values are tables again.
    nested = dict(summary_rows({"generate": {"moved": 3, "per_broker": {b: b for b in range(12)}}}))
    assert isinstance(nested["generate"], Pairs)
    assert isinstance(dict(nested["generate"].rows)["per_broker"], Grid)


def test_long_lists_and_tables_are_truncated(report: Path) -> None:
    more = 25 - MAX_LIST_ITEMS
    assert format_value(list(range(25))).endswith(f"9 … and {more} more")
    assert format_value(list(range(MAX_LIST_ITEMS))) == ", ".join(map(str, range(MAX_LIST_ITEMS)))
    assert dict(summary_rows(SUMMARY))["brokers_failed"] == "3, 7"
    html = report.read_text(encoding="utf-8")
    assert f"… and {BROKERS - MAX_TABLE_ROWS} more rows" in html
    assert "<td>orders-0, orders-3</td>" in html


def test_values_are_shown_readably() -> None:
    assert format_value(1234567) == "1,234,567"
    assert format_value([1001, 1002]) == "1001, 1002"
    assert format_value(0.12345678) == "0.1235"
    assert format_value(True) == "yes"
    assert format_value(None) == "—"
    assert format_value({3, 1, 2}) == "1, 2, 3"
    assert format_value({"a": 1}) == "a: 1"


def _ticks(svg: str) -> int:
    return len(re.findall(r'id="xtick_\d+"', svg))


def _fills(svg: str, colour: str) -> int:
    return svg.count(f"fill: {colour}")


def test_bars_before_after_many_brokers_draw_after_bars_under_a_before_outline() -> None:
    before = {b: b % 5 + 1 for b in range(BROKERS, 0, -1)}
    after = {b: 3 for b in range(2, BROKERS + 1)}  # broker 1 gone: its after-bar is 0
    svg = bars_before_after("Replicas", before, after, "replicas")
    assert svg.startswith("<svg")
    assert _fills(svg, "#2f6fb5") >= BROKERS  # a bar per broker
    assert svg.count(f"stroke: {BEFORE_OUTLINE}") >= 2  # the outline, and its legend line
    assert 10 <= _ticks(svg) <= 40
    assert "<!-- 1 -->" in svg  # the first broker's label is always shown
    few = bars_before_after("Replicas", {1: 2, 2: 3}, {1: 3, 2: 2}, "replicas")
    assert _fills(few, "#a8b3bf") == 2 + 1 and f"stroke: {BEFORE_OUTLINE}" not in few


def test_few_brokers_get_every_label() -> None:
    svg = bars_before_after("Leaders", {5: 1, 2: 2}, {2: 2, 9: 1}, "leaders")
    assert _ticks(svg) == 3
    assert svg.index("<!-- 2 -->") < svg.index("<!-- 5 -->") < svg.index("<!-- 9 -->")


def test_ratios_over_the_threshold_stand_out() -> None:
    svg = ratios_against_threshold("Imbalance", {1: 0.05, 2: 0.11, 3: 0.5, 4: 0.1}, 0.1)
    assert _fills(svg, OVER) == 2  # 0.1 itself is not over
    assert "threshold 0.1" in svg


def test_negative_margins_are_red() -> None:
    svg = margins_per_batch("Margins", ["a", "b", "c"], [-2, 0, 1])
    assert _fills(svg, OVER) == 1
    with pytest.raises(ValueError, match="3 batches but 2 margins"):
        margins_per_batch("Margins", ["a", "b", "c"], [0, 1])


def test_distribution_of_few_and_many_values() -> None:
    few = distribution("Offline", {0: 5, 2: 1}, "offline partitions")
    assert "<!-- offline partitions -->" in few
    many = distribution("Offline", {v: 1 for v in range(0, 5000, 7)}, "offline partitions")
    assert many.startswith("<svg")


@pytest.mark.parametrize(
    "chart",
    [
        lambda: bars_before_after("t", {}, {}, "leaders"),
        lambda: ratios_against_threshold("t", {}, 0.1),
        lambda: distribution("t", {3: 0}, "x"),
        lambda: margins_per_batch("t", [], []),
    ],
    ids=["bars", "ratios", "distribution", "margins"],
)
def test_empty_data_draws_a_no_data_chart(chart: Callable[[], str]) -> None:
    assert "<!-- no data -->" in chart()


def test_the_template_ships_in_the_wheel() -> None:
    tomllib = pytest.importorskip("tomllib")
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = config["tool"]["setuptools"]["package-data"]["html_report"]
    template = Path("templates/report.html.j2")
    assert (ROOT / "html_report" / template).is_file()
    assert any(template.match(p) for p in patterns)
    dependencies = " ".join(config["project"]["dependencies"])
    assert "jinja2" in dependencies and "matplotlib" in dependencies


@needs_chromium
def test_headless_chromium_shows_the_charts(report: Path, tmp_path: Path) -> None:
    screenshot = tmp_path / "report.png"
    chromium(
        report, tmp_path / "profile-1", f"--screenshot={screenshot}", "--window-size=1280,2000"
    )
    assert_not_blank(screenshot, (1280, 2000))

    dom = chromium(report, tmp_path / "profile-2", "--dump-dom").stdout
    assert dom.count("<svg") == CHARTS
    for heading in ["Summary", *HEADINGS]:
        assert f"<h2>{heading}</h2>" in dom
    assert "What if brokers 3 and 7 fail?" in dom
    # 250 brokers' charts and tables: no wider than the window, at the page's column or
    # narrower (charts scale down, tables scroll in their own box).
    for width in (1280, 800):
        assert page_overflow(report, tmp_path / f"w{width}", width) == 0


@needs_chromium
def test_the_overflow_probe_sees_a_page_wider_than_the_window(tmp_path: Path) -> None:
    path = tmp_path / "wide.html"
    render_report(path, title="t", question="q", summary={}, sections=[])
    html = path.read_text(encoding="utf-8")
    path.write_text(html.replace("</body>", '<div style="width:2000px">x</div></body>'))
    assert page_overflow(path, tmp_path / "w", 1280) > 600
