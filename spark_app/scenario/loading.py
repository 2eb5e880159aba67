"""Loading a scenario: strict YAML (safe, no duplicate keys) -> ``Scenario`` or ``ScenarioError``.

``overrides`` are ``kce run --set KEY=VALUE`` options (``overrides``), applied to the parsed
mapping before validation.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from spark_app.limits import MAX_FIELD_CHARS, MAX_YAML_BYTES, MAX_YAML_DEPTH
from spark_app.messages import bounded
from spark_app.scenario.errors import ScenarioError, format_problems, problems_from_validation_error
from spark_app.scenario.model import Scenario
from spark_app.scenario.overrides import apply_overrides, name_overrides, parse_overrides


class _StrictLoader(yaml.SafeLoader):
    """``SafeLoader`` that rejects duplicate keys (PyYAML silently keeps the last one), nodes
    nested deeper than ``MAX_YAML_DEPTH`` (its composer recurses once per level: a deep file would
    exhaust Python's stack) and scalars longer than ``MAX_FIELD_CHARS``."""

    _depth = 0

    def compose_node(self, parent: yaml.Node | None, index: object) -> yaml.Node:
        event = self.peek_event()
        if isinstance(event, yaml.ScalarEvent) and len(event.value) > MAX_FIELD_CHARS:
            raise yaml.composer.ComposerError(
                None, None,
                f"a value of {len(event.value):,} characters, above the {MAX_FIELD_CHARS:,} a "
                "YAML value may have; shorten it", event.start_mark,
            )  # fmt: skip
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                raise yaml.composer.ComposerError(
                    None, None,
                    f"nested deeper than {MAX_YAML_DEPTH} levels, the most a YAML input may "
                    "have; flatten it", event.start_mark,
                )  # fmt: skip
            return super().compose_node(parent, index)  # type: ignore[no-any-return]
        finally:
            self._depth -= 1


def _mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping", node.start_mark,
                f"found duplicate key {key!r}; keep one", key_node.start_mark,
            )  # fmt: skip
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def scenario_from_data(
    data: object, source: str | None = None, overrides: Sequence[str] = ()
) -> Scenario:
    """Validate already-parsed YAML data, ``--set`` overrides applied; every problem in one
    ``ScenarioError``."""
    if not isinstance(data, dict):
        raise ScenarioError(
            [
                (
                    "",
                    f"a scenario is a YAML mapping (name, cluster, events, ...), not {type(data).__name__}",
                )
            ],
            source,
        )
    parsed, problems = parse_overrides(overrides)
    try:
        scenario = Scenario.model_validate(apply_overrides(data, parsed))
    except ValidationError as err:
        found = problems_from_validation_error(Scenario, err)
        raise ScenarioError([*problems, *name_overrides(found, parsed)], source) from None
    if problems:
        raise ScenarioError(problems, source)
    return scenario


def parse_yaml(text: str, source: str) -> object:
    """Strict YAML: safe, no duplicate keys; a syntax error is a ``ScenarioError`` carrying line
    and column."""
    try:
        return yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass: safe
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        detail = " ".join(x for x in (err.context, err.problem) if x)
        raise ScenarioError([("(yaml)", f"{where}{detail}")], source) from None
    except yaml.YAMLError as err:
        raise ScenarioError([("(yaml)", str(err))], source) from None


def read_yaml_file(path: str | Path) -> object:
    """The parsed YAML of a file; one ``ScenarioError`` when it cannot be read or parsed."""
    source = str(path)
    try:
        size = Path(path).stat().st_size
        if size > MAX_YAML_BYTES:
            raise ScenarioError(
                [("", f"{size:,} bytes, above the {MAX_YAML_BYTES:,} a YAML input may have; "
                  "a scenario generates a large cluster (cluster.generate) rather than list it")],
                source,
            )  # fmt: skip
        text = Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise ScenarioError(
            [("", f"cannot read the file: {err.strerror or err}")], source
        ) from None
    except UnicodeDecodeError as err:
        raise ScenarioError(
            [("", f"not UTF-8 text (byte {err.start}: {err.reason}); save it as UTF-8")], source
        ) from None
    return parse_yaml(text, source)


def parse_scenario(text: str, source: str = "<string>", overrides: Sequence[str] = ()) -> Scenario:
    """Parse and validate scenario YAML text; syntax errors carry line and column."""
    return scenario_from_data(parse_yaml(text, source), source, overrides)


def load_scenario(path: str | Path, overrides: Sequence[str] = ()) -> Scenario:
    """Read, parse and validate a scenario file with ``--set`` ``overrides`` (``KEY=VALUE``);
    ``ScenarioError`` lists every problem."""
    return scenario_from_data(read_yaml_file(path), str(path), overrides)


def load_scenario_or_report(path: str, overrides: Sequence[str] = ()) -> Scenario | None:
    """``load_scenario`` for a command: None once the problem is on stderr as ``kce: ...``
    (the problems with their YAML paths, or the file's OS error, bounded)."""
    try:
        return load_scenario(path, overrides)
    except ScenarioError as err:
        print(f"kce: {bounded(format_problems(err.problems, err.source))}", file=sys.stderr)
    except OSError as err:
        print(f"kce: {bounded(f'{path}: {err}')}", file=sys.stderr)
    return None
