"""The two execution paths give the same outputs: random scenarios of every event type, failover
included, on small clusters, played with ``execution.driver_rows`` 0 (every event in Spark) and
unbounded (every event with a driver path on the driver); ``final_state.json`` byte for byte,
every ``events.jsonl`` field but the timings, and the state-change log must be equal.

Each example plays a scenario twice (tens of seconds): few run in CI, and
``bench/equivalence.py`` runs the same comparison for as long as asked."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, note, settings
from pyspark.sql import SparkSession

from tests.random_scenarios import compare, scenarios

EXAMPLES = int(os.environ.get("KCE_INVARIANT_EXAMPLES", "3")) // 3 or 1
pytestmark = pytest.mark.both_paths


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
)
@given(scenarios())
def test_random_scenarios_give_the_same_outputs_on_both_paths(
    spark: SparkSession, data: dict[str, Any]
) -> None:
    note(f"events: {data['events']}")
    with tempfile.TemporaryDirectory() as out:
        problems = compare(spark, data, Path(out))
    assert not problems, "\n".join(problems)


def test_every_handler_gives_the_same_outputs_on_both_paths(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The scenario with one event of every handler family, both ways."""
    import yaml

    path = Path(__file__).resolve().parent.parent / "configs/scenarios/every-handler.yaml"
    problems = compare(spark, yaml.safe_load(path.read_text()), tmp_path)
    assert not problems, "\n".join(problems)
