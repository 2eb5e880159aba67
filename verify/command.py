"""``kce verify SCENARIO.yaml --kafka 2.8.2 [--out DIR]``: the scenario on real Apache Kafka and
on the emulator, step by step; ``verify.json``, a terminal table and ``report.html``.

Exit 0 when every step is identical, 1 when a step differs (or the real cluster failed), 2 for
bad input or an event a real cluster cannot play, before Spark or any JVM starts.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from html_report.page import Section, TableHead, render_report
from verify.kafka_install import DEFAULT_RELEASE, RELEASES, KafkaMissingError, kafka_libs
from verify.play import StepResult
from verify.real_events import unplayable

EXIT_OK, EXIT_DIFFERS, EXIT_INVALID = 0, 1, 2
DEFAULT_SETTLE_S = 3.0


def add_parser(sub: Any) -> None:
    verify = sub.add_parser(
        "verify",
        help="play a scenario on real Apache Kafka brokers and on the emulator, and compare",
        description="Start a real Kafka cluster (Debian's ZooKeeper, one JVM per broker), play "
        "the scenario's controller-visible events on it with Kafka's own tools and signals and "
        "on the emulator, and compare both ZooKeeper trees after each step.",
    )
    verify.add_argument("scenario", help="scenario YAML file")
    verify.add_argument(
        "--kafka", default=DEFAULT_RELEASE, choices=tuple(RELEASES),
        help=f"the Apache Kafka release to run (default {DEFAULT_RELEASE})",
    )  # fmt: skip
    verify.add_argument("--out", help="output directory (default out/<name>-verify)")
    verify.add_argument(
        "--settle", type=float, default=DEFAULT_SETTLE_S, metavar="SECONDS",
        help="the real cluster is quiescent once ZooKeeper stayed unchanged this long "
        f"(default {DEFAULT_SETTLE_S:g})",
    )  # fmt: skip
    verify.add_argument(
        "--keep", action="store_true", help="keep the real brokers' directories and logs"
    )


def main(args: argparse.Namespace) -> int:
    from spark_app.messages import bounded
    from spark_app.preflight import ForeignOutputError, announce, claim_output
    from spark_app.scenario import load_scenario_or_report

    scenario = load_scenario_or_report(args.scenario)
    if scenario is None:
        return EXIT_INVALID
    problems = unplayable(scenario)
    if RELEASES[args.kafka] != scenario.kafka_version:
        problems.insert(0, (
            f"kafka_version: {scenario.kafka_version!r}, but --kafka {args.kafka} is Kafka "
            f"{RELEASES[args.kafka]}; set kafka_version: \"{RELEASES[args.kafka]}\" or pick the "
            "matching --kafka"
        ))  # fmt: skip
    if args.settle <= 0:
        problems.append(f"--settle must be above 0 seconds, got {args.settle:g}")
    try:
        kafka_libs(args.kafka)
    except KafkaMissingError as err:
        problems.append(str(err))
    out = Path(args.out or Path("out") / f"{scenario.name}-verify")
    replacing = None
    try:
        replacing = claim_output(out, "verify")
    except ForeignOutputError as err:
        problems.append(str(err))
    if problems:
        lines = "\n".join(f"  {p}" for p in problems)
        message = f"{args.scenario} cannot be verified on real Kafka:\n{lines}"
        print(f"kce: {bounded(message)}", file=sys.stderr)
        return EXIT_INVALID
    announce(replacing)
    return _verify(scenario, args, out)


def _verify(scenario: Any, args: argparse.Namespace, out: Path) -> int:
    from spark_app.session import get_spark
    from verify.play import RealClusterError, Verification

    spark = get_spark(scenario.spark.master, scenario.spark.conf)
    results: list[StepResult] = []
    verification = Verification(spark, scenario, args.kafka, args.settle, args.keep)
    failure = None
    try:
        for result in verification.run():
            results.append(result)
            mark = "identical" if result.identical else f"{len(result.differences)} difference(s)"
            print(f"step {result.index} ({result.label()}): {mark}", file=sys.stderr)
    except RealClusterError as err:
        failure = str(err)
    finally:
        verification.close()
    from spark_app.staged_output import staged_output

    # Written all at once: the staging directory replaces ``out`` only when complete.
    with staged_output(out, "verify") as staged:
        summary = write_outputs(staged, scenario, args.kafka, results, failure)
    print(table(results))
    print(f"outputs: {out}/ (verify.json, report.html)")
    if failure is not None:
        print(f"kce: the real cluster failed: {failure}", file=sys.stderr)
        return EXIT_DIFFERS
    return EXIT_OK if summary["identical_steps"] == summary["steps"] else EXIT_DIFFERS


def write_outputs(
    out: Path, scenario: Any, release: str, results: list[StepResult], failure: str | None
) -> dict[str, Any]:
    """``verify.json`` and ``report.html`` into the directory ``out``; the summary."""
    summary = {
        "scenario": scenario.name,
        "kafka": release,
        "steps": len(results),
        "identical_steps": sum(r.identical for r in results),
        "differences": sum(len(r.differences) for r in results),
        "failure": failure,
    }
    document = {**summary, "results": [r.to_json() for r in results]}
    (out / "verify.json").write_text(json.dumps(document, indent=2))
    rows = [
        {"step": r.index, "at_ms": r.at_ms, "events": r.label(), "identical": r.identical,
         "differences": len(r.differences), "controller (kafka/kce)":
         f"{r.controller['kafka']}/{r.controller['kce']}"}
        for r in results
    ]  # fmt: skip
    found = [
        {"step": r.index, "path": d.path, "kafka": json.dumps(d.kafka), "kce": json.dumps(d.kce)}
        for r in results
        for d in r.differences
    ]
    sections = [
        Section("Steps", "Each step's events, then whether both ZooKeeper trees agree.", [], [rows]),
        Section(
            "Differences", "Every key where real Kafka and the emulator disagree.", [],
            [TableHead(found[:200], len(found))] if found else [],
        ),
    ]  # fmt: skip
    render_report(
        out / "report.html",
        title=f"kce verify: {scenario.name}",
        question=f"Does the emulator end every step of {scenario.name} in Kafka {release}'s "
        "ZooKeeper state?",
        summary=summary,
        sections=sections,
    )
    return summary


def table(results: list[StepResult]) -> str:
    """The terminal's short table: one line per step, its first differences below it."""
    lines = [f"{'step':>4}  {'at':>8}  {'result':<14}  events"]
    for r in results:
        result = "identical" if r.identical else f"{len(r.differences)} differ"
        lines.append(f"{r.index:>4}  {r.at_ms:>7}ms  {result:<14}  {r.label()}")
        for d in r.differences[:5]:
            lines.append(f"{'':>30}{d.path}: kafka {json.dumps(d.kafka)} kce {json.dumps(d.kce)}")
        if len(r.differences) > 5:
            lines.append(f"{'':>30}... and {len(r.differences) - 5} more (verify.json)")
    return "\n".join(lines)
