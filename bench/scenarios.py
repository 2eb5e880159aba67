"""Benchmark: scenarios end to end, as a user runs them, JVM start included.

Each scenario is played by ``kce run SCENARIO --out DIR`` in a process of its own, ``--repeat``
times, on ``local[2]`` (the default master); the table gives the wall seconds of each run, their
median, and the events the run processed (``summary.json``). Outputs go to a temporary
directory that is removed afterwards, or under ``--keep DIR`` (one directory per run).

    python bench/scenarios.py [--repeat 3] [--keep DIR] [--driver-rows N] [SCENARIO.yaml ...]

``--driver-rows N`` plays them with ``kce run --driver-rows N`` (0: every event in Spark).

Without scenarios: ``configs/scenarios/*.yaml``, smallest first.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "configs" / "scenarios"


def play(scenario: Path, out: Path, driver_rows: int | None = None) -> tuple[float, int]:
    """Wall seconds of one ``kce run`` of ``scenario``, and the events it processed."""
    kce = Path(sys.executable).parent / "kce"  # the console script of this environment
    command = [str(kce), "run", str(scenario), "--out", str(out)]
    if driver_rows is not None:
        command += ["--driver-rows", str(driver_rows)]
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{scenario}: kce run exited {done.returncode}\n{done.stderr[-2000:]}")
    summary = json.loads((out / "summary.json").read_text())
    return wall, int(summary["events_processed"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scenarios", nargs="*", type=Path, help="scenario files (default: shipped)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each scenario")
    parser.add_argument("--keep", type=Path, help="keep every run's outputs under this directory")
    parser.add_argument(
        "--driver-rows", type=int, help="kce run --driver-rows (default: the file's)"
    )
    args = parser.parse_args()
    scenarios = args.scenarios or sorted(SHIPPED.glob("*.yaml"), key=lambda p: p.stat().st_size)
    print("| scenario | events | wall s, each run | median s |")
    print("|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="kce-bench-") as tmp:
        outputs = args.keep or Path(tmp)
        for scenario in scenarios:
            runs = [
                play(scenario, outputs / f"{scenario.stem}-{i}", args.driver_rows)
                for i in range(args.repeat)
            ]
            walls = [w for w, _ in runs]
            each = ", ".join(f"{w:.1f}" for w in walls)
            name = scenario.relative_to(ROOT) if scenario.is_relative_to(ROOT) else scenario
            print(
                f"| {name} | {runs[0][1]} | {each} | {statistics.median(walls):.1f} |", flush=True
            )


if __name__ == "__main__":
    main()
