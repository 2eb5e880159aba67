"""One SparkSession per test session (local[2]); README's command runs two, one per worker.

Every test gets one tier marker (STYLE practice 13), so ``pytest -m unit`` runs without Spark:

* ``zk``: needs a real ZooKeeper server (marked by hand where the real server is a parameter);
* ``cluster``: submits jobs to a Spark standalone cluster on loopback (marked by hand);
* ``kafka``: runs real Apache Kafka brokers (``.ci/setup --kafka``) next to the emulator, as
  ``kce verify`` does (marked by hand);
* ``scenario``: in a module that runs the emulated cluster (it imports ``controller.emulation.cluster``,
  ``spark_app.runner``, ``whatif.execute_cluster`` or ``verify.emulator_side``, directly or
  through a ``tests`` helper, or
  runs ``kce run``);
* ``spark``: uses the ``spark`` fixture, directly or through other fixtures;
* ``unit``: everything else.

The scenario tier runs on the execution path ``--execution`` names (a test parameter):
``driver`` (the default: tables this small are held on the driver, and every event with a driver
path runs there), ``spark`` (``execution.driver_rows`` 0: every event in Spark) or ``both``.
Tests marked ``spark_path`` (of the Spark path's own machinery) always run in Spark, and
``both_paths`` ones compare the paths themselves.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from spark_app.session import get_spark

TIERS = ("unit", "spark", "scenario", "zk", "cluster", "kafka")
_EMULATION = (
    "controller.emulation.cluster", "spark_app.runner", "whatif.execute_cluster",
    "verify.emulator_side",
)  # fmt: skip
_TESTS = Path(__file__).resolve().parent


PATHS = {"driver": 1_000_000_000, "spark": 0}  # execution.driver_rows of each path


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--execution",
        choices=(*PATHS, "both"),
        default="driver",
        help="the execution path of the scenario tests (default: driver)",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    own = metafunc.definition.get_closest_marker("both_paths") is not None
    if (
        "execution" in metafunc.fixturenames
        and _runs_emulation(Path(str(metafunc.definition.path)))
        and not own
    ):
        chosen = metafunc.config.getoption("--execution")
        if metafunc.definition.get_closest_marker("spark_path") is not None:
            chosen = "spark"
        metafunc.parametrize(
            "execution", list(PATHS) if chosen == "both" else [chosen], indirect=True
        )


@pytest.fixture(autouse=True)
def execution(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str | None:
    """The path a scenario test runs on: every controller it starts gets that
    ``driver_rows``, whatever its settings say. None outside the scenario tier."""
    path = getattr(request, "param", None)
    if path is not None:
        from controller.kafka_controller import KafkaController

        start = KafkaController.__init__
        signature = inspect.signature(start)

        def init(*args: Any, **kwargs: Any) -> None:
            bound = signature.bind(*args, **kwargs)
            bound.arguments["settings"] = _with_rows(bound.arguments.get("settings"), path)
            start(*bound.args, **bound.kwargs)

        monkeypatch.setattr(KafkaController, "__init__", init)
    return path


def _with_rows(settings: Any, path: str) -> Any:
    from controller.records import ControllerSettings

    return dataclasses.replace(settings or ControllerSettings(), driver_rows=PATHS[path])


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = get_spark("local[2]", {"spark.sql.shuffle.partitions": "4"})
    yield session
    session.stop()


def _imported(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
    return found


@functools.cache
def _runs_emulation(path: Path) -> bool:
    if path.suffix != ".py" or not path.is_file():
        return False
    imported = _imported(path)
    if any(m in imported for m in _EMULATION) or 'main(["run"' in path.read_text("utf-8"):
        return True
    helpers = {m for m in imported if m.startswith("tests.") and m.count(".") == 1}
    return any(
        any(m in _imported(_TESTS / f"{h.removeprefix('tests.')}.py") for m in _EMULATION)
        for h in helpers
        if (_TESTS / f"{h.removeprefix('tests.')}.py").is_file()
    )


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if any(item.get_closest_marker(tier) for tier in TIERS):
            continue  # marked by hand (zk, cluster)
        if _runs_emulation(Path(str(item.path))):
            item.add_marker(pytest.mark.scenario)
        elif "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)
        else:
            item.add_marker(pytest.mark.unit)
