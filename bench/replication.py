"""Benchmark: replication below the controller over an hour of virtual time, at scale.

Three generated scenarios on one cluster (``--partitions`` over 1000-partition topics, RF 3,
``--brokers`` brokers in 3 racks), each played by ``kce run`` in a process of its own on
``local[2]``, JVM start included:

- ``busy``: every partition takes 1 record/s of 1 KiB for the hour; five brokers pause for 40 s
  each (at 5, 15, 25, 35 and 45 min: past the 30 s lag and the 18 s session timeout, so their
  followers leave the ISR and the controller moves their leadership) and one broker fetches 10x
  slower from 30 to 40 min (below what its followers need);
- ``idle-hour``: replication on, nothing happens for an hour;
- ``idle-second``: the same for one second.

``idle-hour`` minus ``idle-second`` is what an hour of virtual time costs by itself: steps are
taken only when something changes. The table gives wall seconds, the events the controller
processed and the ISR shrinks and expands.

    python bench/replication.py [--partitions 1000000] [--brokers 100] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
PAUSED = (10, 11, 12, 13, 14)
SLOW = 20


def scenario(name: str, partitions: int, brokers: int, until: str) -> dict[str, Any]:
    per_topic = min(partitions, 1000)
    doc: dict[str, Any] = {
        "name": f"replication-{name}",
        "seed": 7,
        "kafka_version": "2.8",
        "config": {"auto.leader.rebalance.enable": False},
        "emulation": {"replication": True},
        "cluster": {
            "brokers": {"generate": {"count": brokers, "racks": 3}},
            "generate": {
                "topics": max(partitions // per_topic, 1),
                "partitions_per_topic": per_topic,
                "replication_factor": 3,
            },
            "controller": 0,
        },
        "events": [],
        "until": until,
    }
    if name == "busy":
        events: list[dict[str, Any]] = [
            {"at": "0s", "type": "set_produce_rate", "topic": "all", "records_per_s": 1}
        ]
        for i, b in enumerate(PAUSED):
            at = f"{5 + 10 * i}m"
            events.append({"at": at, "type": "broker_pause", "brokers": [b], "duration": "40s"})
        events.append(
            {"at": "30m", "type": "slow_broker", "brokers": [SLOW], "factor": 10.0,
             "duration": "10m"}
        )  # fmt: skip
        doc["events"] = sorted(events, key=lambda e: _ms(e["at"]))
    return doc


def _ms(at: str) -> int:
    return int(at[:-1]) * (60_000 if at.endswith("m") else 1000)


def play(path: Path, out: Path) -> tuple[float, dict[str, Any]]:
    kce = Path(sys.executable).parent / "kce"
    start = time.perf_counter()
    done = subprocess.run(
        [str(kce), "run", str(path), "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{path}: kce run exited {done.returncode}\n{done.stderr[-3000:]}")
    return wall, json.loads((out / "summary.json").read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=1_000_000)
    parser.add_argument("--brokers", type=int, default=100)
    parser.add_argument("--keep", type=Path, help="keep every run's outputs under this directory")
    args = parser.parse_args()
    runs = {"busy": "1h", "idle-hour": "1h", "idle-second": "1s"}
    print(f"{args.partitions:,} partitions, RF 3, {args.brokers} brokers")
    print("| run | virtual time | wall s | controller events | ISR shrinks | ISR expands |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="kce-bench-") as tmp:
        root = args.keep or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        walls: dict[str, float] = {}
        for name, until in runs.items():
            path = root / f"{name}.yaml"
            path.write_text(yaml.safe_dump(scenario(name, args.partitions, args.brokers, until)))
            wall, summary = play(path, root / name)
            walls[name] = wall
            print(
                f"| {name} | {until} | {wall:.1f} | {summary['events_processed']} | "
                f"{summary.get('isr_shrinks', 0)} | {summary.get('isr_expands', 0)} |",
                flush=True,
            )
    print(f"\nan idle hour costs {walls['idle-hour'] - walls['idle-second']:.1f} s by itself")


if __name__ == "__main__":
    main()
