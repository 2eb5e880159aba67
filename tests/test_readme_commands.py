"""Every ``kce`` command line README shows runs as written and succeeds: the what-if questions
on the inputs shipped in ``configs/whatif/``, the scenarios, the sweeps. Generated clusters and
sweeps are shrunk first (fewer topics, one small size, one repeat), so that the whole set runs
in the suite; every other argument is README's own, and each command writes under a temporary
``--out``."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml
from pyspark.sql import SparkSession

from spark_app.cli import EXIT_OK, main

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

pytestmark = pytest.mark.scenario


def readme_commands() -> list[list[str]]:
    """README's ``kce`` command lines (also after ``&& .venv/bin/``), continuation lines joined
    and comments dropped, as argument lists without the ``kce``."""
    text = "\n".join(re.findall(r"```bash\n(.*?)```", README.read_text(), flags=re.S))
    joined = re.sub(r"\\\n\s*", " ", text)
    commands = []
    for line in joined.splitlines():
        words = shlex.split(line.split(" #")[0].split("&&")[-1]) if "kce" in line else []
        if words and not line.lstrip().startswith("#") and Path(words[0]).name == "kce":
            commands.append(words[1:])
    return commands


def _shrunk_scenario(path: Path, into: Path) -> Path:
    """The scenario with its generated topics cut to 10 (1,000 partitions at 100 a topic)."""
    data = yaml.safe_load(path.read_text())
    generate = data.get("cluster", {}).get("generate")
    if not generate:
        return path
    generate["topics"] = min(generate["topics"], 10)
    shrunk = into / path.name
    shrunk.write_text(yaml.safe_dump(data))
    return shrunk


def _shrunk_sweep(path: Path, into: Path) -> Path:
    """The sweep at one small size, run once."""
    data = yaml.safe_load(path.read_text())
    data["axes"]["partitions"] = [min(data["axes"]["partitions"][0], 300)]
    data["repeat"] = 1
    data.pop("budgets", None)
    data.get("spark", {}).pop("conf", None)
    shrunk = into / path.name
    shrunk.write_text(yaml.safe_dump(data))
    return shrunk


def _runnable(argv: list[str], tmp_path: Path) -> list[str]:
    """README's command with shrunk inputs, a temporary ``--out`` and paths from the checkout."""
    command, rest = argv[0], list(argv[1:])
    if command in ("run", "scale"):
        shrink = _shrunk_scenario if command == "run" else _shrunk_sweep
        rest[0] = str(shrink(ROOT / rest[0], tmp_path))
    rest = [str(ROOT / a) if (ROOT / a).is_file() and "/" in a else a for a in rest]
    return [command, *rest, "--out", str(tmp_path / "out")]


COMMANDS = readme_commands()


def test_readme_shows_every_command() -> None:
    """The set below is README's own: every command and what-if question it documents."""
    seen = {c[0] for c in COMMANDS} | {c[1] for c in COMMANDS if c[0] == "whatif"}
    assert {"run", "scale", "whatif"} <= seen
    assert {"fail", "roll", "leaders", "audit", "execute", "scale-out"} <= seen


@pytest.mark.parametrize("argv", COMMANDS, ids=[" ".join(c[:2]) for c in COMMANDS])
def test_readme_command_runs(argv: list[str], tmp_path: Path, spark: SparkSession) -> None:
    runnable = _runnable(argv, tmp_path)
    assert main(runnable) == EXIT_OK, runnable
    assert (tmp_path / "out" / "report.html").is_file()
