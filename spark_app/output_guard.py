"""What ``--out`` and ``--checkpoint-dir`` may replace: only an earlier output of the same kind.

Every output directory kce writes holds ``.kce-output.json`` (``OUTPUT_MARKER``) naming the
command that wrote it (``run``, ``whatif``, ``scale``, ``verify``; ``checkpoint`` for a checkpoint
directory).
A path is claimed before any work starts (before Spark), and refused with ``ForeignOutputError``
when replacing it could lose anything kce did not write:

* an existing file, a symbolic link, or a path under a file;
* a directory holding files but no marker, unless it is an earlier output written before the
  marker existed (``LEGACY``: its signature file, and nothing but the files that command writes);
* an earlier output of another command (``kce run --out out/whatif-fail``).

An absent path or an empty directory holds nothing to lose. Replacing an earlier output of the
same command is allowed; ``claim`` returns the one line that announces it.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from spark_app import __version__

OUTPUT_MARKER = ".kce-output.json"
Kind = Literal["run", "whatif", "scale", "verify", "checkpoint"]
KINDS: tuple[Kind, ...] = ("run", "whatif", "scale", "verify", "checkpoint")
# The command line that writes each kind, for messages.
COMMANDS: dict[str, str] = {
    "run": "kce run",
    "whatif": "kce whatif",
    "scale": "kce scale",
    "verify": "kce verify",
    "checkpoint": "kce run --checkpoint-every",
}


@dataclass(frozen=True)
class Legacy:
    """An output written before the marker: its signature file, and the only entries it holds
    (names, or patterns over names)."""

    signature: str
    entries: str  # a regular expression matched against each top-level entry's name


# Outputs written before ``OUTPUT_MARKER`` existed, recognised by the files their command writes.
LEGACY: dict[str, Legacy] = {
    "run": Legacy(
        "events.jsonl",
        r"summary\.json|final_state\.json|events\.jsonl|metrics\.jsonl|timeline\.jsonl"
        r"|(partitions|replicas|replication)\.parquet|report\.html|state-change(\.log)?|checkpoint",
    ),
    "whatif": Legacy("summary.json", r".+\.(json|parquet|html)"),
    "scale": Legacy("scaling.json", r"scaling\.(json|csv)|charts|summary\.md|report\.html"),
    "checkpoint": Legacy("manifest.json", r"manifest\.json(\.new)?|events-\d+"),
}


class ForeignOutputError(ValueError):
    """``--out`` (or ``--checkpoint-dir``) names something that is not an earlier output of the
    same command: replacing it would lose what kce did not write."""


def write_marker(directory: Path, kind: Kind) -> None:
    """Mark ``directory`` as the output of ``kind``."""
    text = json.dumps({"command": COMMANDS[kind], "kind": kind, "kce_version": __version__})
    (directory / OUTPUT_MARKER).write_text(text + "\n", encoding="utf-8")


def output_kind(directory: Path) -> str | None:
    """The kind of kce output ``directory`` holds (``None``: none that kce can tell)."""
    marker = directory / OUTPUT_MARKER
    if marker.is_file():
        try:
            kind = json.loads(marker.read_text(encoding="utf-8")).get("kind")
        except (OSError, UnicodeDecodeError, ValueError, AttributeError):
            return None
        return kind if kind in KINDS else None
    names = {entry.name for entry in directory.iterdir()}
    if names == {"checkpoint"} and output_kind(directory / "checkpoint") == "checkpoint":
        return "run"  # a first run killed after a checkpoint: its outputs were never swapped in
    for kind, legacy in LEGACY.items():
        if legacy.signature in names and all(re.fullmatch(legacy.entries, n) for n in names):
            return kind
    return None


def claim(path: Path, kind: Kind, option: str = "--out") -> str | None:
    """Check that ``path`` may become ``kind``'s output (see the module doc); the line that
    announces replacing an earlier output, or ``None`` when nothing is replaced."""
    shown = f"{option} {path}"
    absolute = Path(os.path.abspath(path))
    for parent in absolute.parents:
        if os.path.lexists(parent):
            if not parent.is_dir():
                raise ForeignOutputError(
                    f"{shown}: {parent} is a file, not a directory — name a path outside it"
                )
            break
    if not os.path.lexists(absolute):
        return None
    if absolute.is_symlink():
        raise ForeignOutputError(
            f"{shown}: a symbolic link, not replaced (its target would be kept, the link lost) "
            "— name the directory it points to, or a new one"
        )
    if not absolute.is_dir():
        raise ForeignOutputError(
            f"{shown}: an existing file, not an earlier output of {COMMANDS[kind]}; it is not "
            "replaced — name a new directory"
        )
    if not any(absolute.iterdir()):
        return None
    found = output_kind(absolute)
    if found is None:
        raise ForeignOutputError(
            f"{shown}: holds files but no {OUTPUT_MARKER}, so it is not an earlier output of "
            f"{COMMANDS[kind]} and is not replaced — name a new directory"
        )
    if found != kind:
        raise ForeignOutputError(
            f"{shown}: an earlier output of {COMMANDS[found]}, not of {COMMANDS[kind]}; it is "
            "not replaced — name another directory"
        )
    if kind == "checkpoint":
        return f"{shown}: the earlier checkpoint there is replaced"
    return f"{shown}: replacing the earlier {COMMANDS[kind]} output there when this one is written"
