"""``kce run --out DIR`` is all or nothing: a run that fails, is interrupted (SIGINT) or is killed
(SIGKILL) part-way leaves a previous ``DIR`` byte for byte as it was; one that finishes replaces it
whole. The run writes into a staging directory beside ``DIR`` (``spark_app.staged_output``), which
these tests watch for to know the run is under way."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from pyspark.sql import SparkSession

from spark_app.cli import EXIT_INTERNAL, EXIT_OK, main

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "tests" / "data" / "bad" / "scenario-valid.yaml"


_QUICK_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.fixture
def previous(tmp_path: Path) -> Path:
    """An ``--out`` holding an earlier run's files."""
    out = tmp_path / "out"
    (out / "partitions.parquet").mkdir(parents=True)
    (out / "summary.json").write_text('{"name": "earlier"}\n', encoding="utf-8")
    (out / "events.jsonl").write_text('{"type": "Startup"}\n', encoding="utf-8")
    (out / "partitions.parquet" / "part-00000.parquet").write_bytes(b"PAR1 earlier PAR1")
    return out


def _staging(out: Path) -> list[Path]:
    return sorted(out.parent.glob(f".{out.name}.tmp-*"))


def test_a_run_that_cannot_write_its_outputs_leaves_the_previous_out(
    spark: SparkSession, previous: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A file-size limit (as a full disk or a quota would) makes the run's own writes fail with
    # EFBIG once the controller has run; the JVM started earlier keeps its own limit.
    before = _tree(previous)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (8192, hard))
    try:
        code = main(["run", str(SCENARIO), "--out", str(previous)])
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, handler)
    err = capsys.readouterr().err
    assert code == EXIT_INTERNAL and "File too large" in err, err
    assert _tree(previous) == before
    assert _staging(previous) == []

    assert main(["run", str(SCENARIO), "--out", str(previous)]) == EXIT_OK
    # An earlier output of kce run (here one written before the marker) is replaced, and said so.
    announced = [line for line in capsys.readouterr().err.splitlines() if "replacing" in line]
    assert announced == [
        f"kce: --out {previous}: replacing the earlier kce run output there when this one is written"
    ]
    summary = json.loads((previous / "summary.json").read_text(encoding="utf-8"))
    assert summary["name"] == "bad" and summary["events_processed"] > 0
    assert "events.jsonl" in _tree(previous) and "report.html" in _tree(previous)
    assert _staging(previous) == []


def _long_scenario(path: Path) -> Path:
    """Broker 3 fails and returns every second for ten minutes of virtual time: 600 events."""
    events = [
        {"at": f"{t}s", "type": "broker_failure" if t % 2 else "broker_startup", "brokers": [3]}
        for t in range(1, 601)
    ]
    doc = yaml.safe_load(SCENARIO.read_text(encoding="utf-8"))
    path.write_text(yaml.safe_dump({**doc, "events": events, "until": "601s"}), encoding="utf-8")
    return path


@pytest.fixture
def running(previous: Path, tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """``kce run`` of a long scenario into ``previous``, in its own process group, once its
    staging directory has appeared."""
    scenario = _long_scenario(tmp_path / "long.yaml")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        # The JVM only has to start and begin the run: the quick compiler alone and the serial
        # collector take about half the CPU of the defaults.
        "JAVA_TOOL_OPTIONS": " ".join(
            filter(None, [os.environ.get("JAVA_TOOL_OPTIONS"), _QUICK_JVM])
        ),
    }
    command = [sys.executable, str(ROOT / "spark_app" / "main.py"), "run", str(scenario)]
    with (tmp_path / "stderr.txt").open("wb") as err:
        process = subprocess.Popen(
            [*command, "--out", str(previous), "--master", "local[1]"],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 600  # a guard against a hang, not a measurement
        while not _staging(previous):
            assert process.poll() is None, (tmp_path / "stderr.txt").read_text()
            assert time.monotonic() < deadline, "the run never started writing"
            time.sleep(0.02)
        yield process
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        with contextlib.suppress(ProcessLookupError):  # Spark's JVM leaves with its driver
            os.killpg(process.pid, signal.SIGKILL)


def test_a_killed_run_leaves_the_previous_out(
    previous: Path, running: subprocess.Popen[bytes]
) -> None:
    before = _tree(previous)
    os.killpg(running.pid, signal.SIGKILL)  # the driver and Spark's JVM, as kill -9 would
    running.wait()
    assert running.returncode == -signal.SIGKILL
    assert _tree(previous) == before
    # The staging directory stays behind, named for the dead process; the next run removes it.
    (stale,) = _staging(previous)
    assert stale.name.startswith(f".out.tmp-{running.pid}-")


def test_an_interrupted_run_leaves_the_previous_out(
    previous: Path, running: subprocess.Popen[bytes]
) -> None:
    before = _tree(previous)
    running.send_signal(signal.SIGINT)
    running.wait()
    assert running.returncode == EXIT_INTERNAL
    assert _tree(previous) == before
    assert _staging(previous) == []
