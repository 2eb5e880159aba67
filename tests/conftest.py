"""One SparkSession per test session (local[2]); README's command runs two, one per worker.

Every test gets one tier marker (STYLE practice 13), so ``pytest -m unit`` runs without Spark:

* ``zk``: needs a real ZooKeeper server (marked by hand where the real server is a parameter);
* ``scenario``: in a module that runs the emulated cluster (it imports ``controller.emulation.cluster``
  or ``spark_app.runner``, directly or through a ``tests`` helper, or runs ``kce run``);
* ``spark``: uses the ``spark`` fixture, directly or through other fixtures;
* ``unit``: everything else.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from spark_app.session import get_spark

TIERS = ("unit", "spark", "scenario", "zk")
_EMULATION = ("controller.emulation.cluster", "spark_app.runner")
_TESTS = Path(__file__).resolve().parent


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
            continue  # marked by hand (zk)
        if _runs_emulation(Path(str(item.path))):
            item.add_marker(pytest.mark.scenario)
        elif "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)
        else:
            item.add_marker(pytest.mark.unit)
