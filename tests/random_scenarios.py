"""Random scenarios on small clusters, and the comparison of a scenario's outputs on the two
execution paths (``execution.driver_rows`` 0: every event in Spark; unbounded: every event with
a driver path on the driver).

``scenarios()`` draws 3–5 brokers in racks, 1–3 topics with explicit assignments (some with
unclean election on) and a timeline of every scenario event type, session expiry (failover)
included, kept valid as the timeline checks want it (brokers up or down, topics existing).
``compare`` plays one scenario both ways and returns what differs: ``final_state.json`` byte for
byte, every ``events.jsonl`` field but the timings, and the state-change log's text."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import strategies as st
from pyspark.sql import SparkSession

from spark_app.runner import run
from spark_app.scenario import scenario_from_data

UNBOUNDED = 1_000_000_000
# What the paths may differ in: the timings, and where each event ran.
_PATH_FIELDS = ("processing_ms", "queue_time_ms", "execution")


@st.composite
def _assignment(draw: st.DrawFn, brokers: list[int], partitions: range, rf: int) -> dict:
    return {str(p): list(draw(st.permutations(brokers))[:rf]) for p in partitions}


@st.composite
def scenarios(
    draw: st.DrawFn, max_events: int = 8, exclude: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """A scenario as YAML data (see the module docstring); no event of the types ``exclude``
    names."""
    n = draw(st.integers(3, 5))
    brokers = list(range(1, n + 1))
    racks = "abc"
    topics: dict[str, dict[str, Any]] = {}
    for t in range(draw(st.integers(1, 3))):
        rf = draw(st.integers(1, 3))
        count = draw(st.integers(1, 3))
        config = {"unclean.leader.election.enable": draw(st.sampled_from(["true", "false"]))}
        topics[f"t{t}"] = {
            "name": f"t{t}",
            "partitions": count,
            "replication_factor": rf,
            "config": config,
            "assignment": draw(_assignment(brokers, range(count), rf)),
        }
    cluster = {
        "brokers": [{"id": b, "rack": racks[b % 3]} for b in brokers],
        "topics": list(topics.values()),
        "controller": draw(st.sampled_from(brokers)),
    }
    up, leaving = set(brokers), set()
    live_topics = {name: dict(t) for name, t in topics.items()}
    created = 0
    events: list[dict[str, Any]] = []
    for i in range(draw(st.integers(1, max_events))):
        at = f"{i + 1}s"
        down = sorted(set(brokers) - up)  # a broker that shut down has exited
        kinds = ["elect_leaders", "set_topic_config", "isr_change", "create_topic", "reassign"]
        kinds += ["broker_failure", "controlled_shutdown", "log_dir_failure", "zk_session_expiry"]
        kinds += ["add_partitions", "delete_topic", "cancel"] + (
            ["broker_startup"] * 2 if down else []
        )
        kind = draw(st.sampled_from([k for k in kinds if k not in exclude]))
        names = sorted(live_topics)
        if kind in (
            "broker_failure",
            "controlled_shutdown",
            "log_dir_failure",
            "zk_session_expiry",
        ):
            if not up:
                continue
            chosen = draw(st.sampled_from(sorted(up)))
            if kind == "broker_failure":
                events.append({"at": at, "type": kind, "brokers": [chosen]})
                up.discard(chosen)
            else:
                events.append({"at": at, "type": kind, "broker": chosen})
                if kind == "controlled_shutdown":
                    up.discard(chosen)
                    leaving.add(chosen)
        elif kind == "broker_startup":
            started = draw(st.lists(st.sampled_from(down), min_size=1, unique=True))
            events.append({"at": at, "type": kind, "brokers": sorted(started)})
            up.update(started)
            leaving.difference_update(started)
        elif kind == "create_topic":
            name = f"new{created}"
            created += 1
            rf = draw(st.integers(1, 3))
            count = draw(st.integers(1, 3))
            spec = {
                "name": name,
                "partitions": count,
                "replication_factor": rf,
                "assignment": draw(_assignment(brokers, range(count), rf)),
            }
            events.append({"at": at, "type": kind, "topic": spec})
            live_topics[name] = spec
        elif not names:
            continue
        else:
            name = draw(st.sampled_from(names))
            topic = live_topics[name]
            count, rf = topic["partitions"], topic["replication_factor"]
            ref = {"topic": name, "partition": draw(st.integers(0, count - 1))}
            if kind == "elect_leaders":
                via = draw(st.sampled_from(["zk", "api"]))
                kind_ = (
                    "preferred" if via == "zk" else draw(st.sampled_from(["preferred", "unclean"]))
                )
                scope = draw(st.sampled_from(["all", [ref]]))
                events.append(
                    {
                        "at": at,
                        "type": kind,
                        "via": via,
                        "election_type": kind_,
                        "partitions": scope,
                    }
                )
            elif kind == "set_topic_config":
                value = draw(st.sampled_from(["true", "false"]))
                config = {"unclean.leader.election.enable": value}
                events.append({"at": at, "type": kind, "topic": name, "config": config})
            elif kind == "isr_change":
                replicas = topic["assignment"][str(ref["partition"])]
                isr = draw(st.lists(st.sampled_from(replicas), min_size=1, unique=True))
                events.append({"at": at, "type": kind, **ref, "isr": isr})
            elif kind == "reassign":
                target = list(draw(st.permutations(brokers))[: draw(st.integers(1, 3))])
                plan = {"version": 1, "partitions": [{**ref, "replicas": target}]}
                via = draw(st.sampled_from(["zk", "api"]))
                events.append({"at": at, "type": "reassign_partitions", "via": via, "plan": plan})
            elif kind == "cancel":
                events.append({"at": at, "type": "cancel_reassignment", "partitions": [ref]})
            elif kind == "add_partitions":
                total = count + draw(st.integers(1, 2))
                assignment = draw(_assignment(brokers, range(count, total), rf))
                events.append(
                    {
                        "at": at,
                        "type": kind,
                        "topic": name,
                        "total": total,
                        "assignment": assignment,
                    }
                )
                topic["partitions"] = total
                topic["assignment"] = {**topic["assignment"], **assignment}
            elif kind == "delete_topic":
                events.append({"at": at, "type": kind, "topic": name})
                del live_topics[name]
    return {
        "name": "random",
        "seed": draw(st.integers(0, 9)),
        "config": {
            "auto.leader.rebalance.enable": draw(st.booleans()),
            "leader.imbalance.check.interval.seconds": 5,
        },
        "emulation": {"catch_up_ms": draw(st.sampled_from([0, 500, 2000]))},
        "cluster": cluster,
        "events": events,
        "until": f"{len(events) + 20}s",
    }


def play(spark: SparkSession, data: dict[str, Any], out: Path, driver_rows: int) -> None:
    """Play the scenario ``data`` into ``out`` with ``execution.driver_rows``."""
    run(spark, scenario_from_data({**data, "execution": {"driver_rows": driver_rows}}), out)


def compare(
    spark: SparkSession, data: dict[str, Any], out: Path, driver_rows: int = UNBOUNDED
) -> list[str]:
    """Play ``data`` on both paths (the driver's with ``driver_rows``); what differs between
    their outputs (empty if nothing)."""
    spark_out, driver_out = out / "spark", out / "driver"
    play(spark, data, spark_out, 0)
    play(spark, data, driver_out, driver_rows)
    problems = []
    final = "final_state.json"
    if (spark_out / final).read_bytes() != (driver_out / final).read_bytes():
        problems.append(f"{final} differs")
    a, b = _events(spark_out), _events(driver_out)
    if len(a) != len(b):
        problems.append(f"events.jsonl: {len(a)} events on the Spark path, {len(b)} on the driver")
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            keys = sorted(k for k in x.keys() | y.keys() if x.get(k) != y.get(k))
            problems.append(
                f"event {i} ({x.get('type')}): "
                + "; ".join(f"{k}: {x.get(k)} != {y.get(k)}" for k in keys)
            )
    log = "state-change.log"
    if _text(spark_out / log) != _text(driver_out / log):
        problems.append(f"{log} differs")
    return problems


def _events(out: Path) -> list[dict[str, Any]]:
    lines = (out / "events.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(x).items() if k not in _PATH_FIELDS} for x in lines]


def _text(path: Path) -> str:
    return path.read_text() if path.exists() else ""
