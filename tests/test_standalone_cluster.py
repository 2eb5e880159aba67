"""The same jobs on a real Spark cluster: ``kce run`` and ``kce whatif`` submitted with
``spark-submit --master spark://...`` to a standalone master and two one-core workers on loopback
(``tests/spark_standalone.py``), the project shipped as a zip through ``--py-files``, give the
outputs the same commands give in this process on ``local[2]``.

Only wall times may differ: ``wall_seconds`` and each ``rate_and_time`` timer's ``total_ms`` and
``max_ms`` in ``summary.json`` (their ``count`` is compared). Both runs take the scenario's own
``execution.driver_rows``. One test holds every check, so that pytest-xdist cannot split them over
two workers that would each start a cluster.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from spark_app.cli import main
from tests.spark_standalone import (
    LIGHT_JVM,
    ROOT,
    StandaloneCluster,
    package_project,
    submit,
)

pytestmark = pytest.mark.cluster

SCENARIO = str(ROOT / "configs" / "scenarios" / "decommission.yaml")
COMMANDS = {
    "run": ["run", SCENARIO],
    # Every pair of the four brokers fails: one Spark job over (set x partition).
    "whatif": ["whatif", "fail", "--scenario", SCENARIO, "--any", "2", "--json"],
}
PROBE = ROOT / "tests" / "spark_submit_probe.py"
# The jobs are small: the first JIT tier costs less CPU than it saves. The session's own default
# for these keys (-XX:-DontCompileHugeMethods) is kept, as a user's --conf replaces it.
CONF = {
    f"spark.{side}.extraJavaOptions": f"{LIGHT_JVM} -XX:-DontCompileHugeMethods"
    for side in ("driver", "executor")
}


@pytest.fixture(scope="module")
def cluster() -> Iterator[StandaloneCluster]:
    with StandaloneCluster(workers=2, cores=1, memory="1g") as started:
        yield started


@pytest.fixture(scope="module")
def py_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return package_project(tmp_path_factory.mktemp("py-files"))


def _stdout(done: subprocess.CompletedProcess[str], cluster: StandaloneCluster) -> str:
    assert done.returncode == 0, f"{done.stderr[-6000:]}\n{cluster.logs()[-6000:]}"
    return done.stdout


def _json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _without_wall_times(summary: dict[str, Any]) -> dict[str, Any]:
    kept = {k: v for k, v in summary.items() if k != "wall_seconds"}
    kept["rate_and_time"] = {
        name: {"count": timer["count"]} for name, timer in summary["rate_and_time"].items()
    }
    return kept


def test_jobs_submitted_to_a_standalone_cluster_equal_the_local_jobs(
    spark: SparkSession,
    cluster: StandaloneCluster,
    py_files: Path,
    tmp_path: Path,
) -> None:
    for name, args in COMMANDS.items():
        assert main([*args, "--out", str(tmp_path / "local" / name)]) == 0
        command = [*args, "--out", str(tmp_path / "cluster" / name)]
        _stdout(submit(cluster.master_url, command, py_files, CONF), cluster)
    local, remote = tmp_path / "local", tmp_path / "cluster"

    final_state = _json(local / "run" / "final_state.json")
    assert _json(remote / "run" / "final_state.json") == final_state
    assert {p["leader"] for p in final_state["partitions"]} <= {1, 2, 3}  # 4 decommissioned

    summary = _json(remote / "run" / "summary.json")
    assert "wall_seconds" in summary
    assert _without_wall_times(summary) == _without_wall_times(
        _json(local / "run" / "summary.json")
    )
    assert summary["events_processed"] > 0

    answer = _json(local / "whatif" / "summary.json")
    assert _json(remote / "whatif" / "summary.json") == answer
    assert answer["sets_evaluated"] == 6  # the four brokers' pairs

    # Both jobs ran on the cluster, one executor on each worker: no master of their own.
    apps = cluster.state()["completedapps"]
    assert isinstance(apps, list)
    ours = [a for a in apps if a["name"] == "kafka-controller-emulator"]
    assert len(ours) == len(COMMANDS)
    assert all(a["cores"] == 2 and a["state"] == "FINISHED" for a in ours)

    # The session's own default (twice the cores) must not undo spark-submit's --conf; one
    # executor is enough to see where executors import the project from.
    conf = {**CONF, "spark.sql.shuffle.partitions": "3", "spark.cores.max": "1"}
    seen = json.loads(
        _stdout(submit(cluster.master_url, [], py_files, conf, PROBE), cluster).splitlines()[-1]
    )
    assert seen["master"] == cluster.master_url
    assert seen["shuffle_partitions"] == "3"
    assert str(py_files) in seen["driver_imports"]
    assert seen["executor_imports"]
    assert all(f"{py_files.name}/statemachines/" in f for f in seen["executor_imports"])
