"""README's examples are real: its annotated scenario validates as written."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

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
