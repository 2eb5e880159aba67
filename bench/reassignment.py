"""Benchmark: starting a reassignment that reorders replicas against one that moves them.

On ``bench/controller.py``'s generated cluster (RF 3, 100 brokers in 3 racks, 100 partitions per
topic, emulated ZooKeeper), per size: AlterPartitionReassignments of one topic's 100 partitions,
``--repeat`` times each, a different topic every time:

- reorder: each partition's replicas reversed; the replica set is unchanged (width 3);
- first move: each replica moved to the next broker id, so RS = TRS + ORS holds 4 replicas and
  every row of the table widens to 4;
- move: the same on other topics, the table already at width 4 (only the plan's rows change).

No follower catches up in the bench's cluster, so a move stays in phase A: the time is the start.

    python bench/reassignment.py [--sizes 1e5] [--repeat 3] [--out bench/results/...json]
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

# Run as a script, this file's directory comes first on the path, and ``bench/controller.py``
# would shadow the ``controller`` package; the repository root holds ``bench``.
if sys.path and Path(sys.path[0] or ".").resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.controller import BROKERS, PARTITIONS_PER_TOPIC, Bench, setup
from controller.events import controller_events as ev
from spark_app.session import environment, get_spark, parse_sizes

EVENT = "ApiPartitionReassignment"


def reassign(bench: Bench, op: str, topic: str, shift: int) -> None:
    """One AlterPartitionReassignments of ``topic``: replicas reversed, or moved by ``shift``."""
    rows = (
        bench.generated.partitions.where(F.col("topic") == topic)
        .select("partition", "replicas")
        .collect()
    )
    plan = {
        ev.TopicPartition(topic, p): tuple(
            [(b + shift) % BROKERS for b in reps] if shift else reps[::-1]
        )
        for p, reps in rows
    }
    replies: list[Any] = []
    bench.step(
        op,
        lambda: bench.active().events.put(ev.ApiPartitionReassignment(plan, replies.append)),
        [EVENT],
    )
    errors = {k: v for k, v in replies[0].items() if v != "NONE"} if replies else "no reply"
    if errors:
        bench.runs[op].errors.append(f"{topic}: {errors}")


def bench_size(spark: SparkSession, n: int, repeat: int) -> dict[str, Any]:
    bench, timings = setup(spark, n)
    topics = iter(range(n // PARTITIONS_PER_TOPIC))
    for _ in range(repeat):
        reassign(bench, "reorder", f"topic-{next(topics)}", 0)
    reassign(bench, "first move (widens the table to 4)", f"topic-{next(topics)}", 1)
    for _ in range(repeat):
        reassign(bench, "move", f"topic-{next(topics)}", 1)
    return {
        "partitions": n,
        "setup": timings,
        "runs": {
            op: {"processing_s": r.processing_s, "wall_s": r.wall_s, "errors": r.errors}
            for op, r in bench.runs.items()
        },
    }


def markdown(results: list[dict[str, Any]]) -> str:
    lines = ["| size | operation | processing s (median) | samples |", "|---|---|---|---|"]
    for size in results:
        for op, r in size["runs"].items():
            samples = ", ".join(f"{x:.2f}" for x in r["processing_s"])
            flag = f" (errors: {r['errors']})" if r["errors"] else ""
            lines.append(
                f"| {size['partitions']:.0e} | {op} | "
                f"{statistics.median(r['processing_s']):.2f} | {samples}{flag} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1e5", help="partition counts, comma separated")
    parser.add_argument("--repeat", type=int, default=3, help="samples of reorder and of move")
    parser.add_argument(
        "--out",
        default=f"bench/results/reassignment-{datetime.date.today().isoformat()}.json",
    )
    args = parser.parse_args(argv)
    sizes = parse_sizes(args.sizes)
    for n in sizes:
        if n % PARTITIONS_PER_TOPIC or n < PARTITIONS_PER_TOPIC * (2 * args.repeat + 1):
            parser.error(f"size {n}: a multiple of 100 with a topic for every sample")
    spark = get_spark("local[2]", {"spark.driver.memory": "8g"})
    results = [bench_size(spark, n, args.repeat) for n in sizes]
    text = markdown(results)
    print(text)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = {"machine": environment(spark), "repeat": args.repeat, "results": results}
    out.write_text(json.dumps({**doc, "markdown": text}, indent=2))
    print(f"wrote {out}")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
