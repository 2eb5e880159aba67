"""``kce scale SWEEP.yaml [--out DIR] [--master URL]``: run a sweep, write its outputs.

Every operation at every point is planned (and so checked) before Spark starts; then each is run
``repeat`` times on a fresh emulated cluster, point by point, with a progress line (points done,
runs done, the time left), or off a terminal a line per step done. The outputs (``outputs``) are
written once every run is done; budgets are checked on the finished rows, so a sweep over budget
still writes everything, then exits 1.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

# The parser of every kce command is built from ``add_parser``: what runs a sweep (Spark, the
# controller, the charts) is imported when a sweep runs, so a bad input elsewhere costs none of it.
if TYPE_CHECKING:
    from scaling.operations import Plan
    from scaling.play import PhaseRun
    from scaling.sweep import Sweep

# The status store keeps this many jobs and stages (Spark's default, 1,000, is fewer than a
# large point's operation runs); ``measure`` reads a window's stages from it.
RETAINED = {"spark.ui.retainedJobs": "20000", "spark.ui.retainedStages": "20000"}


def add_parser(sub: Any) -> None:
    """The ``scale`` command."""
    scale = sub.add_parser(
        "scale",
        help="time controller operations and what-if questions over cluster sizes",
        description="Run a sweep: each operation at each cluster size on a fresh emulated "
        "cluster, timed and counted; writes scaling.csv, scaling.json, charts, summary.md and "
        "report.html to --out. Exits 1 when a budget is exceeded.",
    )
    scale.add_argument("sweep", help="sweep YAML file (see configs/sweeps/)")
    scale.add_argument("--out", help="output directory (default out/scale-<name>)")
    scale.add_argument("--master", help="Spark master URL (overrides the file)")


@dataclass(frozen=True)
class SweepResult:
    out: Path
    rows: list[dict[str, Any]]
    exceeded: list[str]


def _rows(
    sweep: Sweep, plans: Sequence[Plan], runs: Mapping[int, list[PhaseRun]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[str]]:
    """Rows, their JSON details and the budgets they exceed, in plan and phase order."""
    from scaling.results import over_budget, row

    rows, details, exceeded = [], [], []
    for i, plan in enumerate(plans):
        for phase in plan.phases:
            of_phase = [r for r in runs[i] if r.label == phase.label]
            r = row(plan, of_phase)
            rows.append(r)
            details.append(
                {
                    "error_messages": list(dict.fromkeys(e for x in of_phase for e in x.errors)),
                    "answer": of_phase[0].answer,
                }
            )
            exceeded += over_budget(r, sweep.budgets_of(plan.point))
    return rows, details, exceeded


def run_sweep(path: str, out: str | None, master: str | None) -> SweepResult:
    """Load, plan, run and write the sweep at ``path`` (``ScenarioError``, ``ForeignOutputError``
    or ``InvalidArgumentError``: invalid input)."""
    from scaling.measure import Probe
    from scaling.operations import plan_all
    from scaling.outputs import write_outputs
    from scaling.play import Player
    from scaling.sweep import load_sweep
    from spark_app.preflight import announce, check_master, claim_output
    from spark_app.progress import SweepProgress
    from spark_app.session import environment, get_spark

    check_master(master)
    sweep = load_sweep(path)
    target = Path(out) if out else Path("out") / f"scale-{sweep.name}"
    replacing = claim_output(target, "scale")  # before the sweep's hours, not after
    plans = plan_all(sweep, path)
    announce(replacing)
    spark = get_spark(master or sweep.spark.master, {**RETAINED, **sweep.spark.conf})
    points = list(dict.fromkeys(p.point for p in plans))
    weights = [float(p.point.partitions) for p in plans for _ in range(sweep.repeat)]
    progress = SweepProgress(len(points), weights)
    runs: dict[int, list[PhaseRun]] = {}
    player = Player(spark, Probe(spark), progress.log)
    try:
        for i, plan in enumerate(plans):
            for n in range(sweep.repeat):
                runs.setdefault(i, []).extend(player.play(plan))
                progress.update(points.index(plan.point) + 1, i * sweep.repeat + n + 1)
        rows, details, exceeded = _rows(sweep, plans, runs)
        progress.log(f"writing the outputs to {target}/")
    finally:
        player.close()
        progress.close()
    write_outputs(target, sweep.name, path, rows, details, exceeded, environment(spark))
    return SweepResult(target, rows, exceeded)


def lines(result: SweepResult) -> list[str]:
    """The terminal summary: a line per row, then what exceeded a budget."""
    out = []
    for r in result.rows:
        work = "" if r["elections"] is None else (
            f"  elections {r['elections']:,}  ZK reads {r['zk_reads']:,}  writes {r['zk_writes']:,}"
        )  # fmt: skip
        out.append(
            f"{r['operation']:<24} {r['partitions']:>12,} partitions  {r['wall_seconds']:9.3f} s"
            f"{work}"
        )
    out += [f"over budget: {x}" for x in result.exceeded]
    return out


def print_result(result: SweepResult) -> None:
    print("\n".join(lines(result)))
    print(f"outputs: {result.out}/ (scaling.csv, scaling.json, charts/, summary.md, report.html)")
    if result.exceeded:
        print(f"kce: {len(result.exceeded)} budget(s) exceeded", file=sys.stderr)
