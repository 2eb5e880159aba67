"""Benchmark: ``kce whatif execute`` of a few hundred moves, end to end.

A generated snapshot stands in for a real one: ``--brokers`` brokers in 3 racks, ``--topics``
topics of ``--partitions`` partitions at RF 3 (replicas placed at random, fixed seed), as a
``kafka-topics --describe`` text, with a ``--sizes`` file of 0.1-2 GB per partition. The plan
decommissions the two highest broker ids: each of their replicas goes to the live broker holding
the fewest replicas so far that the partition does not use (a few hundred moves by default).

``kce whatif execute PLAN --max-moves-per-broker 2`` is timed as a user runs it (a fresh process,
Spark started, outputs written). ``--before DIR`` runs the same command on another checkout of
the code (its sources first on the path) in the same sitting, and checks the outputs are the same
(``summary.json``, ``timeline.jsonl`` byte for byte, ``moves.parquet`` by value).

    python bench/execute.py [--brokers 30] [--topics 20] [--partitions 60] [--before DIR]
        [--out-dir /tmp/kce-bench-execute]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
RACKS = "abc"
RF = 3
SEED = 7
CAP = "2"  # --max-moves-per-broker
COMPARED = ("summary.json", "timeline.jsonl")


def generate(folder: Path, brokers: int, topics: int, partitions: int) -> dict[str, Path]:
    """The describe text, rack map, sizes and decommission plan; their paths."""
    rng = random.Random(SEED)
    ids = list(range(1, brokers + 1))
    removed = set(ids[-2:])
    held: Counter[int] = Counter()
    describe, sizes, entries = [], ["topic,partition,bytes"], []
    for t in range(topics):
        name = f"t{t}"
        describe.append(
            f"Topic: {name}\tTopicId: x\tPartitionCount: {partitions}\t"
            f"ReplicationFactor: {RF}\tConfigs: min.insync.replicas=2"
        )
        for p in range(partitions):
            replicas = rng.sample(ids, RF)
            listed = ",".join(map(str, replicas))
            describe.append(
                f"\tTopic: {name}\tPartition: {p}\tLeader: {replicas[0]}\t"
                f"Replicas: {listed}\tIsr: {listed}"
            )
            sizes.append(f"{name},{p},{rng.randrange(100, 2000) * 1_000_000}")
            held.update(b for b in replicas if b not in removed)
            if removed & set(replicas):
                target = []
                for b in replicas:
                    if b in removed:
                        b = min(
                            (x for x in ids if x not in removed and x not in replicas + target),
                            key=lambda x: (held[x], x),
                        )
                        held[b] += 1
                    target.append(b)
                entries.append({"topic": name, "partition": p, "replicas": target})
    paths = {
        "describe": folder / "cluster.txt",
        "racks": folder / "racks.csv",
        "sizes": folder / "sizes.csv",
        "plan": folder / "plan.json",
    }
    paths["describe"].write_text("\n".join(describe) + "\n")
    rack_lines = [f"{b},{RACKS[(b - 1) % len(RACKS)]}" for b in ids]
    paths["racks"].write_text("\n".join(["id,rack", *rack_lines]) + "\n")
    paths["sizes"].write_text("\n".join(sizes) + "\n")
    paths["plan"].write_text(json.dumps({"version": 1, "partitions": entries}))
    return paths


def run(code: Path, inputs: dict[str, Path], out: Path) -> float:
    """Wall seconds of ``kce whatif execute`` on the sources in ``code``."""
    argv = [
        "whatif", "execute", str(inputs["plan"]), "--describe", str(inputs["describe"]),
        "--rack-map", str(inputs["racks"]), "--sizes", str(inputs["sizes"]),
        "--max-moves-per-broker", CAP, "--out", str(out),
    ]  # fmt: skip
    script = f"import sys; from spark_app.cli import main; sys.exit(main({argv!r}))"
    env = {**os.environ, "PYTHONPATH": str(code)}
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", script], cwd=code, env=env, check=True)
    return time.perf_counter() - start


def same_outputs(a: Path, b: Path) -> bool:
    files = all((a / n).read_bytes() == (b / n).read_bytes() for n in COMPARED)
    return files and pq.read_table(a / "moves.parquet").equals(pq.read_table(b / "moves.parquet"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brokers", type=int, default=30)
    parser.add_argument("--topics", type=int, default=20)
    parser.add_argument("--partitions", type=int, default=60)
    parser.add_argument("--before", type=Path, help="another checkout to time first")
    parser.add_argument("--out-dir", type=Path, default=Path("/tmp/kce-bench-execute"))
    args = parser.parse_args()
    args.out_dir.mkdir(parents=True, exist_ok=True)
    inputs = generate(args.out_dir, args.brokers, args.topics, args.partitions)
    moves = len(json.loads(inputs["plan"].read_text())["partitions"])
    rows = []
    codes = ([("before", args.before.resolve())] if args.before else []) + [("after", ROOT)]
    for label, code in codes:
        out = args.out_dir / label
        if out.exists():
            subprocess.run(["rm", "-r", str(out)], check=True)
        rows.append((label, run(code, inputs, out)))
    print(f"\n{args.brokers} brokers, {args.topics} x {args.partitions} partitions, {moves} moves")
    print(f"load average {os.getloadavg()[0]:.1f}")
    print("| code | wall s |\n|---|---:|")
    for label, seconds in rows:
        print(f"| {label} | {seconds:.1f} |")
    if args.before:
        same = same_outputs(args.out_dir / "before", args.out_dir / "after")
        print("outputs identical" if same else "OUTPUTS DIFFER")


if __name__ == "__main__":
    main()
