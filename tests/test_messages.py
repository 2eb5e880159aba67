"""Bounded messages and the limits checked while an input is read (``spark_app.messages``,
``spark_app.limits``): however large the input, a message is at most three lines of a few hundred
characters, and a YAML file's nesting and values are bounded while it is composed."""

from __future__ import annotations

import pytest

from spark_app.limits import MAX_LINE_CHARS, MAX_MESSAGE_LINES, MAX_VALUE_CHARS, MAX_YAML_DEPTH
from spark_app.messages import bounded, cut
from spark_app.scenario import ScenarioError, loading
from spark_app.scenario.loading import parse_yaml


def test_cut_keeps_the_start_and_the_end_of_a_long_value() -> None:
    value = "head-" + "x" * 10_000_000 + "-the-fix"
    shown = cut(value)
    assert len(shown) <= MAX_VALUE_CHARS
    assert shown.startswith("head-") and shown.endswith("-the-fix")
    assert f"{len(value) - MAX_VALUE_CHARS:,} characters cut" in shown
    assert cut("short") == "short"


def test_bounded_keeps_three_lines_and_says_how_many_more() -> None:
    message = "\n".join(["f.yaml: 50 problem(s):", *(f"  key{i}: unknown" for i in range(50))])
    lines = bounded(message).splitlines()
    assert len(lines) == MAX_MESSAGE_LINES
    assert lines[:2] == ["f.yaml: 50 problem(s):", "  key0: unknown"]
    assert lines[2] == "  … and 49 more line(s): fix these first, then run again"
    assert all(len(line) <= MAX_LINE_CHARS for line in bounded("x" * 10**7).splitlines())


def test_yaml_nesting_is_bounded_while_composing() -> None:
    deep = f"a: {'[' * MAX_YAML_DEPTH}{']' * MAX_YAML_DEPTH}"  # the mapping is one more level
    with pytest.raises(ScenarioError, match=f"nested deeper than {MAX_YAML_DEPTH} levels"):
        parse_yaml(deep, "deep.yaml")
    fits = f"a: {'[' * (MAX_YAML_DEPTH - 1)}{']' * (MAX_YAML_DEPTH - 1)}"
    assert isinstance(parse_yaml(fits, "fits.yaml"), dict)


def test_a_yaml_value_is_bounded_before_it_is_constructed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loading, "MAX_FIELD_CHARS", 8)  # a 1 MiB value takes seconds to scan
    with pytest.raises(ScenarioError, match="a value of 9 characters, above the 8 a YAML value"):
        parse_yaml("name: 123456789", "long.yaml")
    assert parse_yaml("name: 12345678", "fits.yaml") == {"name": 12345678}
