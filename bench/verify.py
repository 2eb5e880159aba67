"""``kce verify`` over generated scenarios: random small clusters (3-5 brokers in 3 racks, a few
topics) and timelines of the event types a real cluster plays (``tests/random_scenarios``),
each played on real Apache Kafka and on the emulator. Writes every scenario and its
``verify.json`` under ``--out``, and the table of ``docs/fidelity.md``'s "Generated scenarios".

The generator's timing knobs are pinned so that a step's outcome does not depend on when it is
compared: no auto leader rebalance (Kafka's 300 s timer would fire during a long real run, never
in the few virtual seconds of the emulator's), followers rejoin at once (``catch_up_ms`` 0), and
a 6 s ZooKeeper session timeout.

Usage: python bench/verify.py --examples 200 [--kafka 2.8.2] [--out out/bench-verify]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from spark_app.scenario import scenario_from_data  # noqa: E402
from spark_app.session import get_spark  # noqa: E402
from tests.random_scenarios import scenarios  # noqa: E402
from verify.kafka_install import DEFAULT_RELEASE, RELEASES  # noqa: E402
from verify.play import RealClusterError, Verification  # noqa: E402
from verify.real_events import UNPLAYABLE  # noqa: E402

DOC = ROOT / "docs" / "fidelity.md"
BEGIN, END = "<!-- bench/verify.py: begin -->", "<!-- bench/verify.py: end -->"


def generated(index: int) -> dict[str, Any]:
    data = scenarios(max_events=15, exclude=frozenset(UNPLAYABLE)).example()
    config = {"auto.leader.rebalance.enable": False, "zookeeper.session.timeout.ms": 6000}
    return {**data, "name": f"generated-{index}", "kafka_version": "2.8", "config": config,
            "emulation": {"catch_up_ms": 0}}  # fmt: skip


def verify_one(spark: Any, data: dict[str, Any], release: str, out: Path) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    (out / "scenario.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    verification = Verification(spark, scenario_from_data(data), release, settle_s=3.0)
    results, failure = [], None
    try:
        results = list(verification.run())
    except RealClusterError as err:
        failure = str(err)
    finally:
        verification.close()
    report = {"results": [r.to_json() for r in results], "failure": failure}
    (out / "verify.json").write_text(json.dumps(report, indent=2))
    return report


def table(reports: dict[str, dict[str, Any]]) -> str:
    steps = sum(len(r["results"]) for r in reports.values())
    same = sum(s["identical"] for r in reports.values() for s in r["results"])
    lines = [
        f"{len(reports)} generated scenarios, {steps} steps, {same} identical "
        f"({sum(r['failure'] is not None for r in reports.values())} real-cluster failures).",
        "",
        "| scenario | step | event | path | kafka | kce |",
        "|---|---|---|---|---|---|",
    ]
    for name, report in reports.items():
        for step in report["results"]:
            for d in step["differences"]:
                events = ", ".join(e["type"] for e in step["events"]) or "start"
                lines.append(
                    f"| {name} | {step['step']} | {events} | `{d['path']}` | "
                    f"{json.dumps(d['kafka'])} | {json.dumps(d['kce'])} |"
                )
    return "\n".join(lines)


def write_doc(text: str) -> None:
    doc = DOC.read_text(encoding="utf-8")
    block = f"{BEGIN}\n{text}\n{END}"
    pattern = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END), re.S)
    doc = pattern.sub(lambda _m: block, doc) if BEGIN in doc else f"{doc}\n{block}\n"
    DOC.write_text(doc, encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=200)
    parser.add_argument("--kafka", default=DEFAULT_RELEASE, choices=tuple(RELEASES))
    parser.add_argument("--out", type=Path, default=ROOT / "out" / "bench-verify")
    args = parser.parse_args()
    spark = get_spark("local[2]", {"spark.sql.shuffle.partitions": "4"})
    reports: dict[str, dict[str, Any]] = {}
    for i in range(args.examples):
        data = generated(i)
        report = verify_one(spark, data, args.kafka, args.out / data["name"])
        reports[data["name"]] = report
        same = sum(s["identical"] for s in report["results"])
        print(f"{data['name']}: {same}/{len(report['results'])} steps identical", flush=True)
    write_doc(table(reports))


if __name__ == "__main__":
    main()
