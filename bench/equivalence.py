"""The two execution paths against each other for as long as asked: random scenarios of every
event type on small clusters (``tests/random_scenarios.py``), each played with
``execution.driver_rows`` 0 and unbounded, their outputs compared. Reports the examples and
events played, and stops at the first difference with the scenario that shows it.

    python bench/equivalence.py [--minutes 10] [--seed N] [--max-events 8]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import sys
import tempfile
import time
from pathlib import Path

from hypothesis import HealthCheck, Verbosity, given, seed, settings

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from spark_app.session import get_spark  # noqa: E402
from tests.random_scenarios import compare, scenarios  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="how long to keep drawing")
    parser.add_argument("--seed", type=int, default=None, help="hypothesis seed (default random)")
    parser.add_argument("--max-events", type=int, default=8, help="events per scenario, at most")
    args = parser.parse_args()
    spark = get_spark("local[2]", {"spark.sql.shuffle.partitions": "4"})
    deadline = time.monotonic() + 60 * args.minutes
    played = {"examples": 0, "events": 0}

    chosen = random.randrange(1 << 30) if args.seed is None else args.seed

    # Quiet: the first difference is printed below, with its scenario; the end of the time asked
    # for stops the search without a report.
    @seed(chosen)
    @settings(
        max_examples=10**9, deadline=None, database=None, verbosity=Verbosity.quiet,
        suppress_health_check=list(HealthCheck),
    )  # fmt: skip
    @given(scenarios(args.max_events))
    def check(data: dict) -> None:
        if time.monotonic() > deadline:
            raise TimeUp
        with tempfile.TemporaryDirectory(prefix="kce-equivalence-") as out:
            problems = compare(spark, data, Path(out))
            events = sum(1 for _ in (Path(out) / "driver" / "events.jsonl").open())
        if problems:
            print(json.dumps(data, indent=1), file=sys.stderr)
            raise AssertionError("\n".join(problems))
        played["examples"] += 1
        played["events"] += events
        print(f"example {played['examples']}: {events} events, equal", flush=True)

    started = time.monotonic()
    with contextlib.suppress(TimeUp):
        check()
    minutes = (time.monotonic() - started) / 60
    print(
        f"seed {chosen}: {played['examples']} examples, {played['events']} controller events, "
        f"both paths equal, in {minutes:.1f} min"
    )


class TimeUp(BaseException):
    """The time asked for is over (not an Exception: Hypothesis must not take it for a
    failure to shrink)."""


if __name__ == "__main__":
    main()
