"""Every ``kce`` command line README shows runs as written and succeeds, from a working folder
of its own where ``out/`` is written: the what-if questions on the inputs shipped in
``configs/whatif/``, one after the other as a reader types them (the scale-out's plan is then
audited and executed from its default output folder), the scenarios and the sweeps. Generated
clusters and sweeps are shrunk first (fewer topics, one small size, one repeat) so that the set
runs in the suite; every other argument is README's own."""

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
        if line.lstrip().startswith("#") or "kce" not in line:
            continue
        words = shlex.split(line.split(" #")[0].split("&&")[-1])
        if words and Path(words[0]).name == "kce":
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
    """The sweep at one small size, run once, without budgets or driver memory settings."""
    data = yaml.safe_load(path.read_text())
    data["axes"]["partitions"] = [min(data["axes"]["partitions"][0], 300)]
    data["repeat"] = 1
    data.pop("budgets", None)
    data.get("spark", {}).pop("conf", None)
    shrunk = into / path.name
    shrunk.write_text(yaml.safe_dump(data))
    return shrunk


def _runnable(argv: list[str], into: Path) -> list[str]:
    """README's command with shrunk inputs and the checkout's files by absolute path."""
    command, rest = argv[0], list(argv[1:])
    if command in ("run", "scale"):
        shrink = _shrunk_scenario if command == "run" else _shrunk_sweep
        rest[0] = str(shrink(ROOT / rest[0], into))
    return [command, *(str(ROOT / a) if (ROOT / a).is_file() else a for a in rest)]


def _play(argv: list[str], folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run one command in ``folder`` and check it wrote a new output folder with its report."""
    monkeypatch.chdir(folder)
    before = set((folder / "out").glob("*"))
    runnable = _runnable(argv, folder)
    assert main(runnable) == EXIT_OK, runnable
    written = set((folder / "out").glob("*")) - before
    assert len(written) == 1, (runnable, written)
    assert (written.pop() / "report.html").is_file()


COMMANDS = readme_commands()
WHATIF = [c for c in COMMANDS if c[0] == "whatif"]
OTHERS = [c for c in COMMANDS if c[0] != "whatif"]


def test_readme_shows_every_command() -> None:
    """README documents every command and these what-if questions with a runnable line."""
    assert {c[0] for c in COMMANDS} >= {"run", "scale", "whatif"}
    assert {c[1] for c in WHATIF} >= {"fail", "roll", "leaders", "audit", "execute", "scale-out"}


@pytest.mark.parametrize("argv", OTHERS, ids=[" ".join(c[:2]) for c in OTHERS])
def test_readme_command_runs(
    argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spark: SparkSession
) -> None:
    _play(argv, tmp_path, monkeypatch)


def test_readme_whatif_commands_run_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spark: SparkSession
) -> None:
    """The what-if block as a reader types it: each question writes its own default folder,
    and the scale-out's plan is audited and executed from there with its new brokers."""
    for argv in WHATIF:
        _play(argv, tmp_path, monkeypatch)
    assert len(list((tmp_path / "out").glob("*"))) == len(WHATIF)
