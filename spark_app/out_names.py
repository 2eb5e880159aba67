"""Default output directories that tell runs apart: ``out/`` + a name made of the command's
subject and every option that changes its answer, so that two different questions (or a run and
the same run under ``--set``) never replace each other's outputs without being asked to.

* ``kce run S.yaml`` writes ``out/<name>``; with ``--set`` ``out/<name>-set-<KEY>-<VALUE>...``
  (the overrides sorted, so their order on the command line does not matter);
* ``kce whatif Q ...`` writes ``out/whatif-<Q>`` followed by each option given a value other
  than its default, in the order ``--help`` lists them, as ``<option>-<value>``
  (``out/whatif-fail-rack-b``, ``out/whatif-fail-any-2``, ``out/whatif-fail-brokers-1-2``); a
  plan file is named by its directory and file name (``out/whatif-audit-scale-out-add-10-
  reassignment``). The snapshot's source, output and display options are not part of the name.

A name is made of letters, digits, ``.``, ``_`` and ``-``; one longer than ``MAX_NAME``
characters is cut and ends with 8 hex digits of a digest of the whole name instead, so it stays
distinct and the same for the same command.
"""

from __future__ import annotations

import argparse
import hashlib
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

OUT = Path("out")
MAX_NAME = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9._]+")


def slug(text: str) -> str:
    """``text`` with every run of other characters than letters, digits, ``.`` and ``_`` as one
    ``-`` (``min.insync.replicas=2`` -> ``min.insync.replicas-2``)."""
    return _UNSAFE.sub("-", text).strip("-.")


def default_name(base: str, parts: Iterable[str]) -> str:
    """``base`` and the slugs of ``parts``, joined by ``-`` and kept to ``MAX_NAME`` characters."""
    name = "-".join([base, *(p for p in map(slug, parts) if p)])
    if len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[: MAX_NAME - 9].rstrip('-.')}-{digest}"


def run_out(name: str, overrides: Sequence[str]) -> Path:
    """``kce run``'s default output directory for scenario ``name`` and its ``--set`` items."""
    if not overrides:
        return OUT / name
    return OUT / default_name(name, ["set", *sorted(overrides)])


def _value_parts(value: Any, is_path: bool) -> list[str]:
    if isinstance(value, list | tuple):
        return [str(v) for v in value]
    if is_path:
        path = Path(str(value))
        parent = path.parent.name.removeprefix("whatif-")
        return [parent, path.stem] if parent else [path.stem]
    return [f"{value:g}" if isinstance(value, float) else str(value)]


def options_name(
    base: str,
    parser: argparse.ArgumentParser,
    args: argparse.Namespace,
    skip: Iterable[str] = (),
    last: Iterable[str] = (),
) -> str:
    """``base`` and each option of ``parser`` that ``args`` gives another value than its default
    (``skip``: destinations left out; ``last``: those named after the others), ``--option
    value`` as ``option-value``; a positional's value alone, read as a file path."""
    left_out, later = set(skip), list(last)
    parts: dict[str, list[str]] = {}
    for action in parser._actions:  # argparse keeps no public list of a parser's arguments
        dest = action.dest
        if dest in left_out or dest == argparse.SUPPRESS or not hasattr(args, dest):
            continue
        value = getattr(args, dest)
        if value is None or value == action.default or value in ([], ()):
            continue
        positional = not action.option_strings
        named = [] if positional else [dest.replace("_", "-")]
        parts[dest] = named + ([] if value is True else _value_parts(value, positional))
    order = [d for d in parts if d not in later] + [d for d in later if d in parts]
    return default_name(base, [p for d in order for p in parts[d]])
