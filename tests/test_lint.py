"""ruff's lint rules and formatting hold over the whole code base (``[tool.ruff]`` in
pyproject.toml), so README's test command is also the lint gate."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PATHS = (
    "controller", "statemachines", "spark_app", "whatif", "html_report", "scaling", "tests", "bench",
)  # fmt: skip


@pytest.mark.parametrize(
    "command", [("check",), ("format", "--check")], ids=["ruff-check", "ruff-format"]
)
def test_ruff_passes(command: tuple[str, ...]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ruff", *command, *PATHS],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, f"ruff {' '.join(command)}:\n{done.stdout}{done.stderr}"
