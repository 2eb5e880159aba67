"""What one timed window cost this process: wall time, Spark's jobs, stages and shuffle bytes,
peak driver memory.

Spark's figures come from the application's status store (``AppStatusStore``, what the web UI
and ``SparkContext.statusTracker`` read, filled by Spark's listener) through the JVM, once the
listener bus has delivered every event: jobs and stages are numbered in order, so a window's are
those above the numbers seen when it began. Jobs are counted by their ids; a stage counts when it
ran (``COMPLETE`` or ``FAILED``; a stage whose shuffle output was already there is ``SKIPPED``);
shuffle bytes are what the window's stages wrote and read. The store keeps
``spark.ui.retainedStages`` stages (``command`` raises it), older ones are not counted.

Memory: the peak resident set of the Python driver and of the JVM (which holds the executors in
``local`` mode) over the window, from Linux's ``VmHWM``, reset at the start through
``/proc/PID/clear_refs``; elsewhere the Python process's lifetime peak (``resource``) and no JVM
figure. The JVM heap: used at the end of the window, and the sum of every heap pool's peak over
the window (an upper bound of the heap's peak: the pools peak at different times).
"""

from __future__ import annotations

import os
import resource
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

MIB = 2**20
LISTENER_WAIT_MS = 60_000
_RAN = ("COMPLETE", "FAILED")


@dataclass
class Cost:
    """One window's cost: filled in when the ``measuring`` block ends."""

    wall_seconds: float = 0.0
    spark_jobs: int = 0
    spark_stages: int = 0
    shuffle_write_bytes: int = 0
    shuffle_read_bytes: int = 0
    python_peak_rss_mb: float | None = None
    jvm_peak_rss_mb: float | None = None
    jvm_heap_used_mb: float | None = None
    jvm_heap_peak_mb: float | None = None

    def peak_rss_mb(self) -> float | None:
        """The driver's peak: Python's and the JVM's (each at its own peak) added."""
        parts = [x for x in (self.python_peak_rss_mb, self.jvm_peak_rss_mb) if x is not None]
        return round(sum(parts), 1) if parts else None


def _status(pid: int | str, key: str) -> float | None:
    """``key`` (``VmHWM``, ``VmRSS``) of ``/proc/PID/status`` in MiB, None off Linux."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{key}:"):
                return int(line.split()[1]) / 1024  # kB
    except OSError:
        return None
    return None


def _reset_peak(pid: int | str) -> bool:
    """Reset the process's ``VmHWM`` to its current RSS (Linux ≥ 4.0); False where it cannot."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    except OSError:
        return False
    return True


class Probe:
    """The session's status store, JVM and processes, read around each window."""

    def __init__(self, spark: SparkSession) -> None:
        sc = spark.sparkContext
        self._sc = sc._jsc.sc()  # type: ignore[union-attr]
        self._jvm = sc._jvm  # type: ignore[attr-defined]
        gateway = sc._gateway  # type: ignore[attr-defined]
        self._no_quantiles = gateway.new_array(gateway.jvm.double, 0)
        self.jvm_pid = int(self._jvm.java.lang.ProcessHandle.current().pid())
        # In cluster modes the JVM runs elsewhere; its /proc entry is ours only when local.
        self._jvm_local = Path(f"/proc/{self.jvm_pid}").exists() and sc.master.startswith("local")

    def _settle(self) -> None:
        self._sc.listenerBus().waitUntilEmpty(LISTENER_WAIT_MS)

    def _store(self) -> Any:
        return self._sc.statusStore()

    def last_ids(self) -> tuple[int, int]:
        """The highest job and stage ids so far (-1: none)."""
        self._settle()
        jobs = self._store().jobsList(None)  # newest first
        stages = self._store().stageList(None, False, False, self._no_quantiles, None)
        return (
            int(jobs.apply(0).jobId()) if jobs.size() else -1,
            int(stages.apply(0).stageId()) if stages.size() else -1,
        )

    def spark_since(self, job_mark: int, stage_mark: int, cost: Cost) -> None:
        """Jobs, stages that ran and their shuffle bytes after the marks (newest first)."""
        self._settle()
        jobs = self._store().jobsList(None)
        cost.spark_jobs = int(jobs.apply(0).jobId()) - job_mark if jobs.size() else 0
        stages = self._store().stageList(None, False, False, self._no_quantiles, None)
        for i in range(stages.size()):
            stage = stages.apply(i)
            if int(stage.stageId()) <= stage_mark:
                break
            if str(stage.status().toString()) in _RAN:
                cost.spark_stages += 1
                cost.shuffle_write_bytes += int(stage.shuffleWriteBytes())
                cost.shuffle_read_bytes += int(stage.shuffleReadBytes())

    def _heap_pools(self) -> list[Any]:
        factory = self._jvm.java.lang.management.ManagementFactory
        heap = self._jvm.java.lang.management.MemoryType.HEAP
        return [p for p in factory.getMemoryPoolMXBeans() if p.getType().equals(heap)]

    def reset_memory(self) -> tuple[bool, bool]:
        """Start a window's peaks; whether Python's and the JVM's RSS peaks could be reset."""
        for pool in self._heap_pools():
            pool.resetPeakUsage()
        own = _reset_peak(os.getpid())
        return own, self._jvm_local and _reset_peak(self.jvm_pid)

    def memory(self, reset: tuple[bool, bool], cost: Cost) -> None:
        own, jvm = reset
        if own:
            cost.python_peak_rss_mb = _status(os.getpid(), "VmHWM")
        else:  # the process's lifetime peak: bytes on macOS, KiB elsewhere
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            cost.python_peak_rss_mb = peak / (MIB if sys.platform == "darwin" else 1024)
        if jvm:
            cost.jvm_peak_rss_mb = _status(self.jvm_pid, "VmHWM")
        pools = self._heap_pools()
        cost.jvm_heap_peak_mb = sum(int(p.getPeakUsage().getUsed()) for p in pools) / MIB
        runtime = self._jvm.java.lang.Runtime.getRuntime()
        cost.jvm_heap_used_mb = (int(runtime.totalMemory()) - int(runtime.freeMemory())) / MIB

    @contextmanager
    def measuring(self) -> Iterator[Cost]:
        """Measure the block: the yielded ``Cost`` is filled in when it ends."""
        cost = Cost()
        job_mark, stage_mark = self.last_ids()
        reset = self.reset_memory()
        started = time.perf_counter()
        yield cost
        cost.wall_seconds = time.perf_counter() - started
        self.memory(reset, cost)
        self.spark_since(job_mark, stage_mark, cost)
