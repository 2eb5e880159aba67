"""Benchmark: an event's fixed cost, a preferred election's handler and commit on one table.

A generated cluster (RF 3, 100 brokers, 3 racks, 100 partitions per topic) with every tenth
partition led by its second replica is loaded as the controller's generation. Each run loads it
again and times what an auto-rebalance pass does with it on the driver and in Spark: the
preferred election of the partitions off their preferred leader (``not_preferred``, the pass's
scope), its partial commit (``ControllerContext.commit``, both actions), with the event's totals
(broker requests and ZooKeeper writes) over its diff. No ZooKeeper write and no timer: what the
handler and the commit cost alone. Seconds, median of the warm runs (the first two compile).

    python bench/commit.py [--sizes 2e4,1e5] [--runs 10]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

# Run as a script, this file's directory comes first on the path, and ``bench/controller.py``
# would shadow the ``controller`` package; the repository root holds the packages.
if sys.path and Path(sys.path[0] or ".").resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from controller.commit.diff import with_previous
from controller.commit.requests import RequestCount
from controller.commit.spark_path import event_totals
from controller.context import ControllerContext, LiveBroker
from controller.handlers import election as he
from spark_app.session import environment, get_spark, parse_sizes
from statemachines import schemas as s
from statemachines.election_kinds import ElectionTrigger, ElectionType
from statemachines.generator import generate_cluster
from statemachines.layout import to_compact

BROKERS, RACKS, PER_TOPIC, RF = 100, 3, 100, 3
WARM_UP = 2  # runs that compile the plans' code


def loaded_context(spark: SparkSession, n: int) -> tuple[ControllerContext, DataFrame]:
    """A context with every broker live, and its table: a tenth of the partitions led by their
    second replica (materialised, so each run loads the same rows)."""
    generated = generate_cluster(spark, BROKERS, RACKS, n // PER_TOPIC, PER_TOPIC, RF)
    ctx = ControllerContext(spark)
    for t in range(n // PER_TOPIC):  # topic indices in the generator's order
        ctx.add_topic(f"topic-{t}", PER_TOPIC)
    ctx.set_live_brokers(LiveBroker(b.id, b.rack) for b in generated.brokers)
    off = F.col(s.PARTITION) % 10 == 0
    leader = F.when(off, F.get(F.col(s.REPLICAS), 1)).otherwise(F.col(s.LEADER))
    partitions = generated.partitions.withColumn(s.LEADER, leader)
    table = to_compact(partitions, ctx.topics_frame(), RF).localCheckpoint()
    table.count()
    return ctx, table


def preferred_pass(ctx: ControllerContext) -> tuple[int, int]:
    """The election and its commit; (partitions elected, LeaderAndIsr partitions)."""
    assert ctx.partitions is not None
    counts: list[RequestCount] = []
    totals = event_totals(tuple(ctx.live_brokers), (), counts)
    table = with_previous(ctx.partitions.where(he.not_preferred()), ctx.generation)
    trigger = ElectionTrigger.AutoTriggered
    elected = he.on_replica_election(
        table, F.lit(True), ElectionType.PREFERRED, trigger, ctx.view()
    )
    gauges = ctx.commit(elected, "preferred", ("elected",), (), totals, partial=True)
    assert ctx.diff_totals is not None, "a preferred election's commit is stamped"
    requests = counts[-1].totals(ctx.diff_totals)
    return gauges.counters["elected"], requests["LeaderAndIsr_partitions"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="2e4,1e5", help="partition counts, comma separated")
    parser.add_argument("--runs", type=int, default=10, help="runs per size, warm-up included")
    args = parser.parse_args(argv)
    if args.runs <= WARM_UP:
        parser.error(f"--runs must be above the {WARM_UP} warm-up runs")
    spark = get_spark("local[2]")
    print("| partitions | elected | median s | warm samples (s) |")
    print("|---|---|---|---|")
    for n in parse_sizes(args.sizes):
        ctx, table = loaded_context(spark, n)
        samples, elected = [], 0
        for _ in range(args.runs):
            ctx.load(table)
            started = time.perf_counter()
            elected, lair = preferred_pass(ctx)
            samples.append(time.perf_counter() - started)
            if lair != RF * elected:
                raise RuntimeError(f"{lair} LeaderAndIsr partitions for {elected} elections")
        warm = samples[WARM_UP:]
        listed = ", ".join(f"{t:.2f}" for t in sorted(warm))
        print(f"| {n:.0e} | {elected} | {statistics.median(warm):.3f} | {listed} |", flush=True)
    print(f"\n{environment(spark)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
