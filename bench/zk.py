"""Benchmark of the ZooKeeper layer.

* In memory: bulk write (create) then read back of N partition states, median of 3 fresh stores.
* Real ZooKeeper 3.8 on loopback (Debian's package, started here): the bulk store's writes
  (creates, then version-checked updates) and reads of 1e5 partition-state znodes, against one
  synchronous kazoo call per znode (measured on a sample, rates are per znode), and reading a
  whole Kafka-layout tree of 1e5 partitions into the partitions table (a controller failover).

Usage: python bench/zk.py [--memory-partitions 1000000] [--real-partitions 100000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from zk_server import ZooKeeperServer

from controller.partition_store import (
    NEW_PARTITION_VERSION,
    EmulatedEnsemble,
    KazooStateStore,
    bootstrap_cluster,
    read_cluster,
)
from controller.zk import KazooZkClient
from controller.zk.paths import PartitionStateZNode, TopicPartitionZNode
from spark_app.session import get_spark

TOPICS = 100


def states(spark: SparkSession, n: int, version: int = NEW_PARTITION_VERSION) -> DataFrame:
    return spark.range(n).select(
        F.concat(F.lit("topic-"), (F.col("id") % TOPICS).cast("string")).alias("topic"),
        (F.col("id") / TOPICS).cast("int").alias("partition"),
        (F.col("id") % 50).cast("int").alias("leader"),
        F.lit(0).alias("leader_epoch"),
        F.array(*[((F.col("id") + k) % 50).cast("int") for k in range(3)]).alias("isr"),
        F.lit(1).alias("controller_epoch"),
        F.lit(version).alias("zk_version"),
    )


def cluster(spark: SparkSession, n: int) -> DataFrame:
    s = states(spark, n)
    return s.select(
        "topic", "partition", F.col("isr").alias("replicas"),
        F.array().cast("array<int>").alias("adding_replicas"),
        F.array().cast("array<int>").alias("removing_replicas"),
        "isr", "leader", "leader_epoch", F.lit(0).alias("zk_version"), "controller_epoch",
        F.lit("OnlinePartition").alias("state"),
    )  # fmt: skip


def prepare(client: object) -> int:
    client.ensure_path("/brokers/topics")  # type: ignore[attr-defined]
    for t in range(TOPICS):
        client.create(f"/brokers/topics/topic-{t}", b"{}")  # type: ignore[attr-defined]
    client.create("/controller_epoch", b"1")  # type: ignore[attr-defined]
    return 0


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def bench_memory(spark: SparkSession, n: int) -> list[tuple[str, str]]:
    writes, reads = [], []
    for _ in range(3):
        store = EmulatedEnsemble()
        client = store.client()
        version = prepare(client)
        bulk = store.state_store(client)
        writes.append(timed(lambda b=bulk, v=version: b.write_states(states(spark, n), v)))
        reads.append(
            timed(lambda b=bulk: b.read_states(spark).write.format("noop").mode("overwrite").save())
        )
        store.close()
    w, r = statistics.median(writes), statistics.median(reads)
    return [
        (
            f"in-memory bulk write (create) of {n:,} states, median of 3",
            f"{w:.2f} s ({n / w:,.0f}/s)",
        ),
        (f"in-memory bulk read of {n:,} states, median of 3", f"{r:.2f} s ({n / r:,.0f}/s)"),
        ("in-memory write + read (target ≤ 10 s)", f"{w + r:.2f} s"),
    ]


def bench_real(spark: SparkSession, n: int, sample: int) -> list[tuple[str, str]]:
    server = ZooKeeperServer().start()
    rows: list[tuple[str, str]] = []
    try:
        root = KazooZkClient(server.hosts)
        root.start()
        root.ensure_path("/bulk")
        root.ensure_path("/sync")
        root.ensure_path("/tree")
        root.stop()

        client = KazooZkClient(server.hosts + "/bulk")
        client.start()
        version = prepare(client)
        bulk = KazooStateStore(client)
        create_s = timed(lambda: bulk.write_states(states(spark, n), version).count())
        read_s = timed(
            lambda: bulk.read_states(spark).write.format("noop").mode("overwrite").save()
        )
        update = states(spark, n, version=0).withColumn("leader_epoch", F.lit(1))
        update_s = timed(lambda: bulk.write_states(update, version).count())

        sync = KazooZkClient(server.hosts + "/sync").kazoo
        sync.start()
        prepare(sync)
        keys = [(f"topic-{i % TOPICS}", i // TOPICS) for i in range(sample)]
        data = PartitionStateZNode.encode_fields(1, 0, [1, 2, 3], 1)
        for t in range(TOPICS):
            sync.create(f"/brokers/topics/topic-{t}/partitions")

        def sync_create() -> None:
            for t, p in keys:
                sync.create(TopicPartitionZNode.path(t, p))
                sync.create(PartitionStateZNode.path(t, p), data)

        sync_create_s = timed(sync_create)
        sync_read_s = timed(lambda: [sync.get(PartitionStateZNode.path(t, p)) for t, p in keys])
        sync_set_s = timed(
            lambda: [sync.set(PartitionStateZNode.path(t, p), data, 0) for t, p in keys]
        )
        sync.stop()

        # Bulk rates count state znodes; a create also makes the partition znode (2 znodes).
        rates = {
            "create": (n / create_s, sample / sync_create_s),
            "update": (n / update_s, sample / sync_set_s),
            "read": (n / read_s, sample / sync_read_s),
        }
        for what, (b, s) in rates.items():
            rows.append(
                (
                    f"real ZK {what}: bulk {n:,} vs sync sample {sample:,} (partitions/s)",
                    f"bulk {b:,.0f}/s, sync {s:,.0f}/s, ratio {b / s:.1f}×",
                )
            )

        tree = KazooZkClient(server.hosts + "/tree")
        tree.start()
        bootstrap_s = timed(
            lambda: bootstrap_cluster(tree, {}, cluster(spark, n), KazooStateStore(tree)).count()
        )
        failover_s = timed(
            lambda: (
                read_cluster(tree, spark, KazooStateStore(tree))
                .partitions.write.format("noop")
                .mode("overwrite")
                .save()
            )
        )
        tree.stop()
        rows.append(
            (f"bootstrap a {n:,}-partition Kafka tree into real ZK", f"{bootstrap_s:.2f} s")
        )
        rows.append(
            (
                f"failover read of a {n:,}-partition tree into the DataFrame model (≤ 15 s)",
                f"{failover_s:.2f} s",
            )
        )
    finally:
        server.stop()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memory-partitions", type=int, default=1_000_000)
    parser.add_argument("--real-partitions", type=int, default=100_000)
    parser.add_argument("--sync-sample", type=int, default=5_000)
    args = parser.parse_args()
    spark = get_spark("local[2]")
    spark.range(1).count()
    rows = [("machine", f"{os.cpu_count()} cores, local[2], load avg {os.getloadavg()[0]:.1f}")]
    rows += bench_real(spark, args.real_partitions, args.sync_sample)
    rows += bench_memory(spark, args.memory_partitions)
    width = max(len(r[0]) for r in rows)
    print(f"| {'measure':<{width}} | result |\n|{'-' * (width + 2)}|--------|")
    for name, value in rows:
        print(f"| {name:<{width}} | {value} |")


if __name__ == "__main__":
    main()
