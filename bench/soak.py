"""The differential soak: random event sequences on random clusters, on both execution paths, with
Kafka's invariants checked after every event, for as long as asked.

Two kinds of example alternate:

* **invariants**: 2–6 brokers and their partitions (``tests/controller_oracle.py``) take a random
  plan of crashes, restarts, controlled shutdowns, session expiries, controller failovers, log
  directory failures, ElectLeaders, AlterIsr, topic deletions and auto-rebalance checks. Each plan
  is played twice, every event in Spark (``driver_rows`` 0) and every event on the driver. After
  every event: one active controller, named by ``/controller``; leader ∈ ISR ⊆ replicas; Online
  partitions led by live brokers; epochs, znode versions and the controller epoch never going
  back; every partition-state write carrying the writer's epoch (the fence); the
  OfflinePartitionsCount gauge equal to a recount; ZooKeeper equal to the table; the reference
  controller's partitions while it can follow. The two paths' snapshots must be equal after
  every event.
* **scenarios**: a random scenario of every scenario event type (``tests/random_scenarios.py``)
  played through ``kce run`` on both paths: ``final_state.json`` byte for byte, ``events.jsonl``
  and the state-change log equal.

Failures are printed with the example that shows them and counted; the soak goes on.

    python bench/soak.py [--minutes 60] [--seed N] [--json soak.json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import sys
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path

from hypothesis import HealthCheck, Verbosity, given, seed, settings
from hypothesis import strategies as st
from py4j.protocol import Py4JNetworkError

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from spark_app.session import get_spark  # noqa: E402
from tests.controller_oracle import (  # noqa: E402
    SETTINGS,
    ClusterSpec,
    Snapshot,
    Step,
    cluster_specs,
    play_steps,
    steps,
)
from tests.random_scenarios import UNBOUNDED, compare, scenarios  # noqa: E402

PATHS = {
    "spark": replace(SETTINGS, driver_rows=0),
    "driver": replace(SETTINGS, driver_rows=UNBOUNDED),
}


@dataclass
class Tally:
    examples: int = 0
    invariant_examples: int = 0
    scenario_examples: int = 0
    events: int = 0  # controller events applied, both paths counted
    invariant_checks: int = 0  # snapshots checked
    failures: list[str] = field(default_factory=list)


def _differences(a: list[Snapshot], b: list[Snapshot]) -> list[str]:
    if len(a) != len(b):
        return [f"{len(a)} snapshots on the Spark path, {len(b)} on the driver"]
    out = []
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        for f in fields(Snapshot):
            if getattr(x, f.name) != getattr(y, f.name):
                out.append(f"after event {i}: {f.name} differs between the paths")
    return out


def invariants(spark: object, spec: ClusterSpec, plan: list[Step], tally: Tally) -> str | None:
    """Play ``plan`` on both paths; a description of what broke, or None."""
    played: dict[str, list[Snapshot]] = {}
    for path, path_settings in PATHS.items():
        try:
            played[path] = play_steps(spark, spec, plan, with_model=True, settings=path_settings)  # type: ignore[arg-type]
        except AssertionError as e:
            return f"{path} path: {e}"
        tally.events += len(played[path]) - 1
        tally.invariant_checks += len(played[path])
    diff = _differences(played["spark"], played["driver"])
    return "\n".join(diff) if diff else None


def scenario(spark: object, data: dict, tally: Tally) -> str | None:
    with tempfile.TemporaryDirectory(prefix="kce-soak-") as out:
        problems = compare(spark, data, Path(out))  # type: ignore[arg-type]
        for path in ("spark", "driver"):
            events = Path(out) / path / "events.jsonl"
            if events.exists():
                tally.events += sum(1 for _ in events.open())
    return "\n".join(problems) if problems else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=60.0, help="how long to soak")
    parser.add_argument("--seed", type=int, default=None, help="hypothesis seed (default random)")
    parser.add_argument("--max-steps", type=int, default=6, help="events per example, at most")
    parser.add_argument("--json", type=Path, default=None, help="write the tally here too")
    args = parser.parse_args()
    spark = get_spark("local[2]", {"spark.sql.shuffle.partitions": "4"})
    deadline = time.monotonic() + 60 * args.minutes
    chosen = random.randrange(1 << 30) if args.seed is None else args.seed
    tally = Tally()

    examples = st.one_of(
        st.tuples(
            st.just("invariants"),
            cluster_specs(),
            st.booleans().flatmap(
                lambda f: st.lists(steps(failover=f), min_size=1, max_size=args.max_steps)
            ),
        ),
        st.tuples(st.just("scenario"), scenarios(args.max_steps)),
    )

    # Quiet and never shrinking: a failure is reported with its example and the soak goes on.
    @seed(chosen)
    @settings(
        max_examples=10**9, deadline=None, database=None, verbosity=Verbosity.quiet,
        suppress_health_check=list(HealthCheck),
    )  # fmt: skip
    @given(examples)
    def soak(example: tuple) -> None:
        if time.monotonic() > deadline:
            raise TimeUp
        kind = example[0]
        try:
            if kind == "invariants":
                problem = invariants(spark, example[1], example[2], tally)
                tally.invariant_examples += 1
            else:
                problem = scenario(spark, example[1], tally)
                tally.scenario_examples += 1
        except Exception as e:
            if _jvm_gone(e):
                # Spark's JVM is gone (killed from outside, e.g. by the kernel's OOM killer):
                # every later example would fail the same way, saying nothing of the controller.
                raise JvmLost from e
            problem = traceback.format_exc()
        tally.examples += 1
        if problem:
            shown = example[1:] if kind == "invariants" else json.dumps(example[1])
            tally.failures.append(f"{kind} {shown}:\n{problem}")
            print(
                f"FAILURE in example {tally.examples} ({kind}):\n{tally.failures[-1]}", flush=True
            )
        elif tally.examples % 10 == 0:
            print(f"{tally.examples} examples, {tally.events} events, no failure", flush=True)

    started = time.monotonic()
    lost = False
    try:
        with contextlib.suppress(TimeUp):
            soak()
    except JvmLost:
        lost = True
        print("Spark's JVM died (see the kernel log): the soak stops here", file=sys.stderr)
    minutes = (time.monotonic() - started) / 60
    print(
        f"seed {chosen}: {tally.examples} examples ({tally.invariant_examples} invariant plans, "
        f"{tally.scenario_examples} scenarios), {tally.events} controller events applied, "
        f"{tally.invariant_checks} invariant checks, {len(tally.failures)} failures, "
        f"in {minutes:.1f} min"
    )
    if args.json is not None:
        args.json.write_text(
            json.dumps({"seed": chosen, "minutes": round(minutes, 1), **asdict(tally)}, indent=1)
        )
    sys.exit(1 if tally.failures or lost else 0)


def _jvm_gone(e: BaseException | None) -> bool:
    """Whether ``e``, or an exception it arose from, is Py4J failing to reach the JVM."""
    while e is not None:
        if isinstance(e, (Py4JNetworkError, ConnectionRefusedError)):
            return True
        e = e.__cause__ or e.__context__
    return False


class JvmLost(BaseException):
    """Spark's JVM died under the soak: it stops with what it has."""


class TimeUp(BaseException):
    """The time asked for is over (not an Exception: Hypothesis must not take it for a
    failure to shrink)."""


if __name__ == "__main__":
    main()
