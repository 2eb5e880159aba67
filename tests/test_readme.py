"""README's examples are real: its annotated scenario validates as written, and its what-if
commands are ones ``kce`` accepts."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import yaml

from spark_app.cli import _parser
from spark_app.scenario import scenario_from_data

README = Path(__file__).resolve().parents[1] / "README.md"


def _yaml_blocks() -> list[str]:
    return re.findall(r"```yaml\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_annotated_scenario_validates() -> None:
    blocks = _yaml_blocks()
    assert blocks, "README has no YAML scenario"
    scenario = scenario_from_data(yaml.safe_load(blocks[0]))
    assert scenario.name == "decommission"
    assert [e.type for e in scenario.events] == [
        "reassign_partitions",
        "elect_leaders",
        "controlled_shutdown",
        "broker_failure",
    ]


def _whatif_commands() -> list[list[str]]:
    """README's ``kce whatif`` commands, continuation lines joined and comments dropped."""
    text = "\n".join(re.findall(r"```bash\n(.*?)```", README.read_text(), flags=re.S))
    joined = re.sub(r"\\\n\s*", " ", text)
    return [
        shlex.split(line.split("#")[0])[1:]
        for line in joined.splitlines()
        if line.startswith("kce whatif")
    ]


def test_readme_whatif_commands_parse() -> None:
    """Each what-if example is a command ``kce`` accepts, with the options it shows."""
    commands = _whatif_commands()
    assert len(commands) >= 6
    questions = set()
    for argv in commands:
        args = _parser().parse_args(argv)
        assert args.command == "whatif"
        questions.add(args.question)
    assert {"fail", "roll", "scale-out", "leaders", "audit"} <= questions


def test_readme_stays_a_guide() -> None:
    """README is the user's guide: at most 400 lines; history and diaries live in docs/."""
    assert len(README.read_text().splitlines()) <= 400
