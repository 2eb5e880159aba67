"""``kce run --checkpoint-every N`` / ``--resume DIR``: a run killed after a checkpoint and resumed
ends exactly as a run never interrupted; a checkpoint of another scenario is refused.

One module-scoped set of ``kce run`` processes on ``every-handler.yaml`` (16 scenario events, 58
controller events, every handler family, a failover at the end): the whole run; the same run
with a checkpoint every 2 scenario events, killed (SIGKILL) as soon as a checkpoint exists; and
its resume, which saves twice more (every 6 events: its second save reads frames the first
loaded from a checkpoint since removed). With ``--execution spark`` every run is in Spark.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kazoo.protocol.states import WatchedEvent

from controller.zk.memory import InMemoryZooKeeper
from spark_app.cli import EXIT_INVALID, main
from spark_app.output_guard import OUTPUT_MARKER
from spark_app.run_checkpoint import RunCheckpoints, load, read_manifest
from spark_app.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "configs" / "scenarios" / "every-handler.yaml"
OTHER = ROOT / "configs" / "scenarios" / "decommission.yaml"
TIMEOUT_S = 600


@dataclass(frozen=True)
class Runs:
    whole: Path  # the uninterrupted run's outputs
    resumed: Path  # the killed and resumed run's outputs
    killed_at: dict[str, Any]  # the manifest the killed run left
    kept: Path  # a copy of the checkpoint the resume started from
    resume_err: str
    options: tuple[str, ...]  # the execution path's, given to every run


def _kce(*args: str) -> list[str]:
    return [sys.executable, "-m", "spark_app.cli", "run", *args]


def _env() -> dict[str, str]:
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path}


def _run_until_checkpoint_then_kill(out: Path, path: list[str]) -> dict[str, Any]:
    """Start a checkpointed run; SIGKILL it once a checkpoint's manifest exists."""
    manifest = out / "checkpoint" / "manifest.json"
    proc = subprocess.Popen(
        _kce(str(SCENARIO), "--out", str(out), "--checkpoint-every", "2", *path),
        cwd=ROOT,
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while proc.poll() is None and not manifest.exists() and time.monotonic() < deadline:
            time.sleep(0.005)  # polling, not a timing assertion
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the run ended before it could be killed"
    return json.loads(manifest.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def runs(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Runs]:
    base = tmp_path_factory.mktemp("resume")
    whole, resumed, kept = base / "whole", base / "resumed", base / "kept"
    path = ["--driver-rows", "0"] if request.config.getoption("--execution") == "spark" else []
    subprocess.run(
        _kce(str(SCENARIO), "--out", str(whole), *path),
        cwd=ROOT, env=_env(), check=True, capture_output=True, timeout=TIMEOUT_S,
    )  # fmt: skip
    killed_at = _run_until_checkpoint_then_kill(resumed, path)
    shutil.copytree(resumed / "checkpoint", kept / "checkpoint")
    done = subprocess.run(
        _kce(str(SCENARIO), "--resume", str(resumed), "--checkpoint-every", "6", *path),
        cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=TIMEOUT_S,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    yield Runs(whole, resumed, killed_at, kept, done.stderr, tuple(path))


def _lines(path: Path, *wall_clock: str) -> list[dict[str, Any]]:
    rows = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    return [{k: v for k, v in r.items() if k not in wall_clock} for r in rows]


def test_resumed_run_ends_as_the_uninterrupted_run(runs: Runs) -> None:
    played, total = runs.killed_at["scenario_events"], 16
    assert 2 <= played < total  # killed mid-run, after a checkpoint
    assert f"({played} of {total} scenario events played)" in runs.resume_err
    assert (runs.resumed / "final_state.json").read_bytes() == (
        runs.whole / "final_state.json"
    ).read_bytes()
    # processing_ms is real time; everything else is virtual time and the controller's work.
    assert _lines(runs.resumed / "events.jsonl", "processing_ms") == _lines(
        runs.whole / "events.jsonl", "processing_ms"
    )
    # EventQueueSize samples the queue while the in-memory ZooKeeper's thread may still be
    # delivering a watch: it varies between any two runs.
    assert _lines(runs.resumed / "metrics.jsonl", "EventQueueSize") == _lines(
        runs.whole / "metrics.jsonl", "EventQueueSize"
    )
    # The state-change log written before the checkpoint came back from it, and went on.
    assert (runs.resumed / "state-change.log").read_bytes() == (
        runs.whole / "state-change.log"
    ).read_bytes()
    assert sorted(p.name for p in (runs.resumed / "state-change").iterdir()) == sorted(
        p.name for p in (runs.whole / "state-change").iterdir()
    )
    whole = json.loads((runs.whole / "summary.json").read_text(encoding="utf-8"))
    resumed = json.loads((runs.resumed / "summary.json").read_text(encoding="utf-8"))
    for wall in ("wall_seconds", "rate_and_time"):
        del whole[wall], resumed[wall]
    assert resumed == whole
    assert not (runs.resumed / "checkpoint").exists()  # a completed run removes it


def test_resume_with_another_scenario_options_or_code_exits_2(
    runs: Runs, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kept = str(runs.kept)
    assert main(["run", str(OTHER), "--resume", kept]) == EXIT_INVALID
    err = capsys.readouterr().err
    assert "the checkpoint is of scenario 'every-handler'" in err
    assert "not of this one ('decommission'" in err and "Traceback" not in err
    changed = ["run", str(SCENARIO), "--resume", kept, *runs.options]
    changed += ["--set", "emulation.catch_up_ms=1s"]
    assert main(changed) == EXIT_INVALID
    assert "resume with the scenario file and the --set" in capsys.readouterr().err
    shutil.copytree(runs.kept, tmp_path, dirs_exist_ok=True)
    manifest = tmp_path / "checkpoint" / "manifest.json"
    written = json.loads(manifest.read_text(encoding="utf-8"))
    manifest.write_text(json.dumps({**written, "code": "0" * 64}), encoding="utf-8")
    assert main(["run", str(SCENARIO), "--resume", str(tmp_path), *runs.options]) == EXIT_INVALID
    assert "(its code changed since)" in capsys.readouterr().err


def test_checkpoint_misuse_exits_2_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = [
        (["--resume", str(tmp_path)], "no checkpoint in"),
        (["--checkpoint-every", "0"], "--checkpoint-every must be 1 or more"),
        (["--checkpoint-every", "2", "--zk", "127.0.0.1:1"], "need the emulated ZooKeeper"),
        (["--resume", str(tmp_path), "--out", str(tmp_path)], "leave out --out"),
    ]
    for args, message in cases:
        assert main(["run", str(SCENARIO), *args]) == EXIT_INVALID
        assert message in capsys.readouterr().err
    checkpoint = tmp_path / "checkpoint"
    checkpoint.mkdir()
    (checkpoint / "manifest.json").write_text('{"format_version": 9}')
    assert main(["run", str(SCENARIO), "--resume", str(tmp_path)]) == EXIT_INVALID
    assert "this kce reads checkpoint format 1" in capsys.readouterr().err
    (checkpoint / "manifest.json").write_text('{"format_version": 1, "every": 0}')
    assert main(["run", str(SCENARIO), "--resume", str(tmp_path)]) == EXIT_INVALID
    err = capsys.readouterr().err
    # The message names the file and its first problem; a long list is cut to the bound.
    assert "manifest.json: kce_version: Field required" in err and len(err.splitlines()) <= 3


def test_a_saved_zookeeper_keeps_its_tree_sessions_and_watches(tmp_path: Path) -> None:
    scenario = load_scenario(SCENARIO)
    checkpoints = RunCheckpoints(tmp_path / "checkpoint", 1, scenario)
    store = InMemoryZooKeeper()
    client = store.client()
    client.start()
    client.create("/a", b"1")
    fired: list[WatchedEvent] = []
    client.get("/a", watch=fired.append)
    (tmp_path / "checkpoint" / "events-000002").mkdir(parents=True)  # a half-written one
    checkpoints.save((store, client, fired), {}, {}, (1, 0, 0))
    checkpoints.save((store, client, fired), {}, {}, (2, 0, 0))
    assert sorted(p.name for p in checkpoints.directory.iterdir()) == [
        OUTPUT_MARKER,  # what a later --checkpoint-dir may replace (output_guard)
        "events-000002",
        "manifest.json",
    ]
    manifest = read_manifest(checkpoints.directory, scenario)
    loaded, session, seen = load(checkpoints.directory, manifest, None, {}, {})  # type: ignore[arg-type]
    session.set("/a", b"2")  # the watch set before the save fires on the loaded copy
    loaded.wait_idle()
    assert [(e.type, e.path) for e in seen] == [("CHANGED", "/a")] and fired == []
    elsewhere = InMemoryZooKeeper()  # a store numbers its own sessions ...
    elsewhere.client().start()
    other = loaded.client()
    other.start()  # ... and a loaded one goes on from where it was saved
    assert other.session_id == session.session_id + 1
    for s in (loaded, store, elsewhere):
        s.close()
