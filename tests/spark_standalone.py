"""A throwaway Spark standalone cluster on loopback, and ``spark-submit`` of ``kce`` commands to it.

The master and its workers are the installed pyspark distribution's own daemons
(``bin/spark-class org.apache.spark.deploy.master.Master`` / ``...worker.Worker``), each on free
loopback ports, with a temp directory for logs and executors' work. ``start`` waits until the
master's JSON page reports every worker alive; ``stop`` ends workers first, then the master.

``package_project`` zips the project's packages (every top-level directory with an
``__init__.py`` but ``tests``, templates included) for ``--py-files``; ``submit`` runs
``spark_app/main.py`` through ``spark-submit`` with executors on this interpreter.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import zipfile
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import IO

import pyspark

SPARK_HOME = Path(pyspark.__file__).resolve().parent
ROOT = Path(__file__).resolve().parents[1]
ENTRY = ROOT / "spark_app" / "main.py"
LOOPBACK = "127.0.0.1"
# For JVMs whose work is small: the first JIT tier only and one GC thread.
LIGHT_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


class SparkStandaloneError(RuntimeError):
    pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


def spark_env() -> dict[str, str]:
    """The environment of every daemon and of ``spark-submit``: loopback only, this Python."""
    return {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        # Spark's documented switch for the address every daemon, driver and executor binds.
        "SPARK_LOCAL_IP": LOOPBACK,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        # The daemons hold a few workers' bookkeeping; Spark's 1g default heap is for real ones,
        # and the JIT's optimising tier would spend more CPU than their little work ever needs.
        "SPARK_DAEMON_MEMORY": "256m",
        "SPARK_DAEMON_JAVA_OPTS": LIGHT_JVM,
    }


class StandaloneCluster:
    """A master and ``workers`` workers of ``cores`` cores and ``memory`` each, on loopback."""

    def __init__(self, workers: int = 2, cores: int = 1, memory: str = "1g") -> None:
        if shutil.which("java") is None and "JAVA_HOME" not in os.environ:
            raise SparkStandaloneError("a Spark standalone cluster needs Java 17+ on PATH")
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.dir = Path(tempfile.mkdtemp(prefix="spark-standalone-"))
        self.port = _free_port()
        self.webui_port = _free_port()
        self.processes: list[tuple[str, subprocess.Popen[bytes]]] = []
        self._logs: list[IO[bytes]] = []
        self.keep_logs = False  # True: ``stop`` leaves ``dir`` (logs, executors' work) in place

    @property
    def master_url(self) -> str:
        return f"spark://{LOOPBACK}:{self.port}"

    def _daemon(self, name: str, args: Sequence[str]) -> None:
        log = (self.dir / f"{name}.log").open("wb")
        self._logs.append(log)
        process = subprocess.Popen(
            [str(SPARK_HOME / "bin" / "spark-class"), *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=spark_env(),
            cwd=self.dir,
        )
        self.processes.append((name, process))

    def start(self, timeout: float = 120.0) -> StandaloneCluster:
        """Start the master and the workers; return once every worker has registered."""
        self._daemon(
            "master",
            [
                "org.apache.spark.deploy.master.Master",
                *("--host", LOOPBACK, "--port", str(self.port)),
                *("--webui-port", str(self.webui_port)),
            ],
        )
        for i in range(self.workers):
            work = self.dir / f"worker-{i}"
            work.mkdir()
            self._daemon(
                f"worker-{i}",
                [
                    "org.apache.spark.deploy.worker.Worker",
                    *("--host", LOOPBACK, "--webui-port", str(_free_port())),
                    *("--cores", str(self.cores), "--memory", self.memory),
                    *("--work-dir", str(work)),
                    self.master_url,
                ],
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, process in self.processes:
                if process.poll() is not None:
                    logs = self.logs()
                    self.stop()
                    raise SparkStandaloneError(f"{name} exited early:\n{logs}")
            if self.alive_workers() == self.workers:
                return self
            time.sleep(0.5)
        logs = self.logs()
        self.stop()
        raise SparkStandaloneError(
            f"{self.workers} workers did not register within {timeout}s:\n{logs}"
        )

    def state(self) -> dict[str, object]:
        """The master's JSON page (workers, applications, cores)."""
        url = f"http://{LOOPBACK}:{self.webui_port}/json"
        with urllib.request.urlopen(url, timeout=2) as response:
            return dict(json.load(response))

    def alive_workers(self) -> int:
        try:
            workers = self.state().get("workers", [])
        except (OSError, ValueError):  # the master's page is not up (or not whole) yet
            return 0
        return sum(1 for w in workers if isinstance(w, dict) and w.get("state") == "ALIVE")

    def logs(self) -> str:
        """The daemons' logs and the executors' stderr, for a failure message."""
        paths = sorted(self.dir.glob("*.log")) + sorted(self.dir.glob("worker-*/*/*/stderr"))
        return "\n".join(
            f"== {p.relative_to(self.dir)}\n{p.read_text(errors='replace')}" for p in paths
        )

    def stop(self) -> None:
        # Workers first: a master stopped before them would leave them retrying to reconnect.
        for _, process in reversed(self.processes):
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(20)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        self.processes.clear()
        for log in self._logs:
            log.close()
        self._logs.clear()
        if not self.keep_logs:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()


def package_project(dest: Path) -> Path:
    """``dest/kce.zip``: the project's packages with their data files, for ``--py-files``."""
    archive = dest / "kce.zip"
    packages = [p for p in sorted(ROOT.iterdir()) if (p / "__init__.py").is_file()]
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for package in packages:
            if package.name == "tests":
                continue
            for path in sorted(package.rglob("*")):
                if path.is_file() and "__pycache__" not in path.parts:
                    zf.write(path, path.relative_to(ROOT).as_posix())
    return archive


def submit(
    master: str,
    args: Sequence[str],
    py_files: Path,
    conf: dict[str, str] | None = None,
    entry: Path = ENTRY,
    timeout: float = 600.0,
) -> subprocess.CompletedProcess[str]:
    """``spark-submit --master MASTER --py-files ZIP spark_app/main.py ARGS`` in this directory.

    Each executor gets one core and Spark's smallest comfortable heap, so two fit two workers.
    """
    settings = {"spark.executor.cores": "1", "spark.executor.memory": "1g", **(conf or {})}
    command = [
        str(SPARK_HOME / "bin" / "spark-submit"),
        *("--master", master, "--py-files", str(py_files)),
        *(x for key, value in settings.items() for x in ("--conf", f"{key}={value}")),
        str(entry),
        *args,
    ]
    return subprocess.run(
        command,
        env=spark_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
