"""Build (or reuse) the one SparkSession of a process.

The embedded default is ``local[*]``; ``spark-submit --master ...`` or explicit ``master``/``conf``
arguments override it. Python workers must run this interpreter (not whatever ``python3`` is first
on PATH), and the embedded driver binds to loopback unless told otherwise. Under ``spark-submit``
the launcher's settings (``--conf``, ``spark-defaults.conf``) win over this module's defaults, and
the driver binds where the launcher says: executors on other hosts must reach it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"
APP_NAME = "kafka-controller-emulator"


def _cores(master: str) -> int:
    """Cores a local master uses, for sizing shuffles; a cluster master falls back to the host's."""
    if master.startswith("local["):
        inner = master[len("local[") : -1].split(",")[0]
        if inner.isdigit():
            return max(1, int(inner))
    return os.cpu_count() or 2


DEFAULT_DRIVER_MEMORY = "4g"


def _submitted_keys() -> set[str]:
    """The settings spark-submit passed to its JVM (``--conf``, ``spark-defaults.conf``, flags)."""
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()  # connects to spark-submit's JVM; starts no context
    return {key for key, _ in SparkConf().getAll()}


def get_spark(
    master: str | None = None,
    conf: Mapping[str, str] | None = None,
    app_name: str = APP_NAME,
) -> SparkSession:
    """Return the active session or build one: quiet logs, UTC, shuffles sized to the cores.

    ``master=None`` keeps whatever ``spark-submit`` configured, else the embedded ``local[*]``.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    active = SparkSession.getActiveSession()
    if active is not None and master is None and not conf:
        return active
    builder = SparkSession.builder.appName(app_name)
    # Under spark-submit the launcher already chose a master; only an explicit one overrides it.
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ
    if not submitted:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    effective_master = master or (None if submitted else DEFAULT_MASTER)
    if effective_master:
        builder = builder.master(effective_master)
    cores = _cores(effective_master or DEFAULT_MASTER)
    defaults = {
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": str(max(2, 2 * cores)),
        "spark.default.parallelism": str(max(2, 2 * cores)),
        "spark.sql.adaptive.enabled": "true",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        # Fused election stages generate methods above the JVM's 8 KB JIT limit; without this
        # (Spark's documented workaround) they would run interpreted.
        "spark.driver.extraJavaOptions": "-XX:-DontCompileHugeMethods",
        "spark.executor.extraJavaOptions": "-XX:-DontCompileHugeMethods",
        "spark.sql.codegen.hugeMethodLimit": "1000000",
        # Compiled plans are cached by their source, 100 by default: fewer than the controller's
        # events use between two of the same kind, so each event compiled its plans again (and
        # ran them JIT-cold) although their source had not changed.
        "spark.sql.codegen.cache.maxEntries": "2000",
        # Spark orders common subexpressions by hashes that include literal values, so a plan
        # testing membership in this event's brokers would generate new code at every event
        # and be compiled again (and run JIT-cold); the elections measure the same without it.
        "spark.sql.subexpressionElimination.enabled": "false",
        # Plans are built from many small Column calls; with DataFrame debugging on, each one
        # also walks the Python stack and makes several extra JVM round trips to record its
        # call site (about 4x the round trips of an election's plan).
        "spark.python.sql.dataFrameDebugging.enabled": "false",
        # The optimizer infers each operator's constraints from the aliases of every projection
        # below it, a cost that grows with the handler's layers of columns, and here it pruned
        # nothing (PruneFilters took half of a startup's optimizer time at 1e5).
        "spark.sql.constraintPropagation.enabled": "false",
    }
    if submitted:
        # A default must not silently undo what the user gave spark-submit (at 1e7 partitions
        # and up, spark.sql.shuffle.partitions above all).
        given = _submitted_keys()
        defaults = {k: v for k, v in defaults.items() if k not in given}
    else:
        # The embedded controller keeps its generations, their diffs and the in-memory
        # ZooKeeper's partition table in this one JVM; Spark's 1g default runs out on long runs.
        defaults["spark.driver.memory"] = DEFAULT_DRIVER_MEMORY
        defaults["spark.driver.bindAddress"] = os.environ["SPARK_LOCAL_IP"]
    for key, value in {**defaults, **dict(conf or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def environment(spark: SparkSession) -> dict[str, object]:
    """Facts about the machine and the session, recorded next to every benchmark result."""
    import platform

    import pyspark

    jvm = spark.sparkContext._jvm  # type: ignore[attr-defined]
    return {
        "cores": os.cpu_count(),
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "spark_master": spark.sparkContext.master,
        "spark": spark.version,
        "pyspark": pyspark.__version__,
        "java": str(jvm.System.getProperty("java.version")),
        "java_vm": str(jvm.System.getProperty("java.vm.name")),
        "python": platform.python_version(),
        "driver_memory": spark.conf.get("spark.driver.memory", None),
    }


def parse_sizes(text: str) -> list[int]:
    """``"1e5,1e6"`` -> ``[100000, 1000000]``: the benchmarks' ``--sizes``."""
    return [int(float(x)) for x in text.split(",") if x.strip()]
