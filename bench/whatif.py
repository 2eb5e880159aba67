"""Benchmark: ``kce whatif`` questions end to end on a generated cluster of 1e6 partitions.

``fail --rack``, ``leaders``, ``fail --any 2 --samples 1000``, ``scale-out --add 10``,
``roll --batch rack`` and ``exposure``; ``--brokers 215 --partitions 933334`` is the 2.8M-replica
case Cruise Control's published figure is for (``scale-out`` ≤ 60 s there).

A generated cluster (``statemachines.generator``: Kafka's rack-aware assignment; 100 brokers in 3
racks, RF 3, 1,000 partitions per topic, fixed seed) stands in for a loaded snapshot: its
partitions table is materialised before timing, as ``load_cluster`` leaves a describe file's.
One partition in ten is led by its second replica, so the leader questions have work to do;
every other topic has ``min.insync.replicas=2`` and every tenth allows unclean election.

Each question is timed from the question function to the written outputs (``summary.json``,
Parquet tables, plans, ``report.html``), as ``kce whatif`` runs it after loading the snapshot:
first in a fresh JVM (cold: Spark compiles and the JIT warms up its code), then once more (warm).
The load average is printed beside the table: on a shared machine it explains slow runs.

    python bench/whatif.py [--partitions 1e6] [--brokers 100] [--out-dir /tmp/kce-bench-whatif]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

# Run as a script, this file's directory comes first on the path, and ``bench/controller.py``
# would shadow the ``controller`` package.
if sys.path and Path(sys.path[0] or ".").resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)

from spark_app.session import get_spark, parse_sizes
from statemachines import schemas as s
from statemachines.generator import generate_cluster
from whatif import exposure, failure, leaders, placement, roll
from whatif.answer import Answer, write_answer
from whatif.cluster import TopicConfigs, WhatIfCluster
from whatif.options import (
    ExposureOptions,
    FailOptions,
    LeadersOptions,
    RollOptions,
    ScaleOutOptions,
)

BROKERS = 100
RACKS = 3
RF = 3
PARTITIONS_PER_TOPIC = 1000
SEED = 42
TARGETS = {
    "fail --rack": 15.0,
    "leaders": 10.0,
    "fail --any 2 --samples 1000": 60.0,
    "scale-out --add 10": 30.0,
}


def bench_cluster(spark: SparkSession, partitions: int, brokers: int = BROKERS) -> WhatIfCluster:
    """The generated snapshot, materialised (a local checkpoint) before any timing."""
    per_topic = min(PARTITIONS_PER_TOPIC, partitions)
    topics = max(1, partitions // per_topic)
    generated = generate_cluster(spark, brokers, RACKS, topics, per_topic, RF, seed=SEED)
    second = F.pmod(F.xxhash64(s.TOPIC, s.PARTITION), F.lit(10)) == 0
    table = generated.partitions.withColumn(
        s.LEADER,
        F.when(second, F.get(F.col(s.REPLICAS), 1)).otherwise(F.col(s.LEADER)),
    ).localCheckpoint(eager=True)
    configs = {
        f"topic-{t}": TopicConfigs(
            min_insync_replicas=2 if t % 2 == 0 else 1,
            unclean_leader_election_enable=t % 10 == 0,
        )
        for t in range(topics)
    }
    return WhatIfCluster(
        partitions=table,
        brokers=tuple(b.id for b in generated.brokers),
        racks={b.id: b.rack for b in generated.brokers},
        topic_configs=configs,
        source=f"generated {topics * per_topic} partitions",
    )


def timed(
    spark: SparkSession, name: str, out: Path, run: Callable[[], Answer], source: str
) -> tuple[float, Answer]:
    start = time.perf_counter()
    answer = run()
    write_answer(out / name.replace(" ", "_").replace("-", ""), answer, source)
    return time.perf_counter() - start, answer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", default="1e6", help="partitions (default 1e6)")
    parser.add_argument("--brokers", type=int, default=BROKERS, help="brokers (default 100)")
    parser.add_argument("--out-dir", default="/tmp/kce-bench-whatif", help="outputs go here")
    parser.add_argument("--master", default=None, help="Spark master (default local[*])")
    args = parser.parse_args(argv)
    (n,) = parse_sizes(args.partitions)
    spark = get_spark(args.master)
    out = Path(args.out_dir)
    setup = time.perf_counter()
    cluster = bench_cluster(spark, n, args.brokers)
    new_racks = tuple(sorted({r for r in cluster.racks.values() if r}))
    added = tuple(new_racks[i % len(new_racks)] for i in range(10))
    rows = cluster.partitions.count()
    replicas = cluster.partitions.agg(F.sum(F.size(s.REPLICAS))).first()
    assert replicas is not None
    print(f"setup {time.perf_counter() - setup:.1f}s: {rows} partitions, {replicas[0]} replicas")
    runs: list[tuple[str, Callable[[], Answer], str]] = [
        (
            "fail --rack",
            lambda: failure.answer(spark, cluster, FailOptions(rack="rack-0")),
            "offline_partitions",
        ),
        ("leaders", lambda: leaders.answer(spark, cluster, LeadersOptions()), "elections"),
        (
            "fail --any 2 --samples 1000",
            lambda: failure.answer(spark, cluster, FailOptions(any_k=2, samples=1000)),
            "p_any_offline",
        ),
        (
            "scale-out --add 10",
            lambda: placement.scale_out(spark, cluster, ScaleOutOptions(10, added, SEED)),
            "replicas_moved",
        ),
        (
            "roll --batch rack",
            lambda: roll.answer(spark, cluster, RollOptions(by_rack=True)),
            "max_safe_batch",
        ),
        ("exposure", lambda: exposure.answer(spark, cluster, ExposureOptions(SEED)), "p_loss"),
    ]
    results: list[tuple[str, float, float, str, Any]] = []
    for name, run, key in runs:
        cold, answer = timed(spark, name, out, run, cluster.source)
        warm, _ = timed(spark, name, out, run, cluster.source)
        results.append((name, cold, warm, key, answer.summary[key]))
        print(f"{name}: {cold:.1f}s cold, {warm:.1f}s warm")
    load = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else []
    print()
    print(
        f"{rows:,} partitions, {replicas[0]:,} replicas, {args.brokers} brokers, {RACKS} racks; "
        f"{spark.sparkContext.master}; load average {' '.join(load)}"
    )
    print()
    print("| question | cold s | warm s | target s | figure |")
    print("|---|---:|---:|---:|---|")
    for name, cold, warm, key, figure in results:
        target = f"{TARGETS[name]:.0f}" if name in TARGETS else "—"
        print(f"| `{name}` | {cold:.1f} | {warm:.1f} | {target} | {key} = {figure} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
