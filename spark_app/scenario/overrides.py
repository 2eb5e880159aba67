"""``kce run --set KEY=VALUE``: a Kafka key or an emulation knob changed without editing the file.

``KEY`` is a Kafka key of the scenario's ``config`` (``log.message.format.version`` or
``config.log.message.format.version``) or an ``emulation`` field (``emulation.isr_rule``).
``VALUE`` is read as a YAML scalar (``true``, ``5000``, ``2s``, ``"0.10"``; ``null`` unsets a
key), set in the file's mapping before validation, so the model checks it as if it were written
there. Problems at an overridden path are reported under ``--set KEY``.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from spark_app.scenario.emulation import Emulation
from spark_app.scenario.errors import Problem, join_path
from spark_app.scenario.kafka_config import KafkaConfig

_EXAMPLE = "e.g. --set log.message.format.version=0.10.2 or --set emulation.isr_rule=count"


@dataclass(frozen=True)
class Override:
    """One ``--set``: the key as given, where it goes (``("config", key)``) and the value."""

    key: str
    section: str
    name: str
    value: object

    def option(self) -> str:
        return f"--set {self.key}"

    def path(self) -> str:
        return join_path(self.section, self.name)


def settable_keys() -> tuple[str, ...]:
    """Every ``KEY`` ``--set`` accepts, in its full form."""
    kafka_keys = KafkaConfig.keys()
    return (
        *(f"config.{key}" for key in kafka_keys),
        *(f"emulation.{name}" for name in Emulation.model_fields),
    )


def _target(key: str) -> tuple[str, str] | str:
    """``(section, name)`` of a known key, or why it is not one."""
    if key.startswith("emulation."):
        name = key.removeprefix("emulation.")
        if name in Emulation.model_fields:
            return "emulation", name
    else:
        name, kafka_keys = key.removeprefix("config."), KafkaConfig.keys()
        if name in kafka_keys:
            return "config", name
        if name in KafkaConfig.misplaced_keys:
            return f"{name!r} is not accepted here: {KafkaConfig.misplaced_keys[name]}"
    # Suggest keys in the form used: full ("config.x", "emulation.y") or a bare Kafka key.
    known = settable_keys()
    if not key.startswith(("config.", "emulation.")):
        known = tuple(k.removeprefix("config.") for k in known)
    close = difflib.get_close_matches(key, known, n=3, cutoff=0.6)
    if close:
        return f"unknown key {key!r}; did you mean {' or '.join(repr(c) for c in close)}?"
    return (
        f"unknown key {key!r}; use a Kafka key of config (e.g. replica.lag.time.max.ms) or one "
        f"of {', '.join(f'emulation.{n}' for n in Emulation.model_fields)}"
    )


def _value(text: str) -> object:
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ValueError(
            f"{text!r} is not a YAML scalar ({err.__class__.__name__}); quote it"
        ) from None
    if isinstance(value, dict | list):
        raise ValueError(f"{text!r} is not a single value; give a scalar such as 5000 or true")
    return value


def parse_overrides(items: Iterable[str]) -> tuple[list[Override], list[Problem]]:
    """The ``--set`` options as overrides, and a problem for each that is not one."""
    overrides: list[Override] = []
    problems: list[Problem] = []
    seen: dict[tuple[str, str], str] = {}
    for item in items:
        key, eq, text = item.partition("=")
        key = key.strip()
        if not eq or not key:
            problems.append((f"--set {item}", f"write --set KEY=VALUE, {_EXAMPLE}"))
            continue
        target = _target(key)
        if isinstance(target, str):
            problems.append((f"--set {key}", target))
            continue
        try:
            value = _value(text)
        except ValueError as err:
            problems.append((f"--set {key}", str(err)))
            continue
        if target in seen:
            problems.append((f"--set {key}", f"also set by --set {seen[target]}; keep one"))
            continue
        seen[target] = key
        overrides.append(Override(key, *target, value))
    return overrides, problems


def apply_overrides(data: dict[str, Any], overrides: Sequence[Override]) -> dict[str, Any]:
    """A copy of the file's mapping with each override set (the file's sections are not changed;
    a section that is not a mapping is left for the model to report)."""
    out = dict(data)
    for o in overrides:
        section = out.get(o.section)
        if section is None:
            section = {}
        if isinstance(section, dict):
            out[o.section] = {**section, o.name: o.value}
    return out


def name_overrides(problems: Sequence[Problem], overrides: Sequence[Override]) -> list[Problem]:
    """Problems at an overridden path reported under its ``--set KEY``; a problem elsewhere that
    names an overridden key says where that key's value came from."""
    by_path = {o.path(): o for o in overrides}
    named: list[Problem] = []
    for path, message in problems:
        o = by_path.get(path)
        if o is not None:
            named.append((o.option(), message))
            continue
        sources = [f"{p} comes from {x.option()}" for p, x in by_path.items() if p in message]
        named.append((path, "; ".join([message, *sources])))
    return named
