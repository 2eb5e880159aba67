"""Faults injected on a real ZooKeeper server and survived, by kind: the figures of README's
reliability section.

Runs ``tests/zk/test_zk_faults.py`` (Debian's ZooKeeper 3.8 on loopback, started by the tests)
``--rounds`` times, each in a fresh pytest process, and counts per kind the faults its tests
inject and how many rounds ended with every check of that test passing: the exact final state,
no request lost, no write of a deposed controller landed, a clean exit 2 where the server never
comes back.

Usage: python bench/zk_faults.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODULE = "tests/zk/test_zk_faults.py"

# test -> (kind of fault, faults injected per run, what passing proves)
FAULTS: dict[str, tuple[str, int, str]] = {
    "test_server_restarts_mid_events_lose_no_request": (
        "ZooKeeper server killed mid-run, back 1 s later",
        2,
        "the admin requests written just before are processed; final state as without faults",
    ),
    "test_server_gone_for_good_ends_the_run_with_exit_2": (
        "ZooKeeper server killed mid-run for good",
        1,
        "exit 2 after zookeeper.connection.timeout.ms, one message, no traceback, no hang",
    ),
    "test_controller_session_expiry_mid_reassignment_and_deletion_next_controller_finishes": (
        "active controller's session expired mid-reassignment and mid-deletion",
        1,
        "the next controller finishes both; final state as without the expiry, epochs by §10.6",
    ),
    "test_zombie_controller_writes_are_fenced_and_it_resigns": (
        "zombie controller (two believe they are active) writes",
        4,
        "each write rejected by the /controller_epoch check, the zombie resigns, znodes unchanged",
    ),
    "test_concurrent_admin_requests_are_each_processed_once": (
        "admin requests written concurrently with the controller",
        9,
        "each processed once; final state as the same requests one by one",
    ),
    "test_watches_survive_a_lost_connection_and_fire_for_changes_made_meanwhile": (
        "a client cut off from the server while znodes change",
        1,
        "its watches are re-armed; the changes made meanwhile fire at once, nothing else",
    ),
    "test_slow_responses_change_nothing": (
        "all ZooKeeper traffic delayed 5 ms each way (a run)",
        1,
        "final state and event sequence as without delay",
    ),
}


def run_round(junit: Path) -> dict[str, bool]:
    """One pytest process over the module; test name -> passed."""
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", MODULE,
         f"--junitxml={junit}"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False,
    )  # fmt: skip
    outcome: dict[str, bool] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = case.get("name", "").split("[")[0]
        outcome[name] = not any(c.tag in ("failure", "error") for c in case)
    return outcome


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    passed = dict.fromkeys(FAULTS, 0)
    walls = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.rounds):
            started = time.perf_counter()
            outcome = run_round(Path(tmp) / f"round-{i}.xml")
            walls.append(time.perf_counter() - started)
            for name in FAULTS:
                passed[name] += outcome.get(name, False)
            print(f"round {i + 1}: {sum(outcome.values())}/{len(outcome)} tests passed "
                  f"in {walls[-1]:.0f} s", file=sys.stderr)  # fmt: skip
    print("| fault | injected | survived | checked |")
    print("|---|---|---|---|")
    for name, (kind, per_run, checked) in FAULTS.items():
        print(f"| {kind} | {per_run * args.rounds} | {per_run * passed[name]} | {checked} |")
    print(f"\n{args.rounds} rounds, {min(walls):.0f}-{max(walls):.0f} s each (pytest process)")


if __name__ == "__main__":
    main()
