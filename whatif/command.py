"""``kce whatif QUESTION [source] [options]``: the command line of the what-if questions.

Each question is a function ``(spark, cluster, options) -> Answer`` in its own module; this
module reads the arguments, loads the snapshot (``sources.load_cluster``), runs the question,
writes its outputs (``answer.write_answer``) and prints the short summary. Bad input of any kind
is a ``WhatIfInputError``: one message, exit 2, nothing written.
"""

from __future__ import annotations

import argparse
import importlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from spark_app.limits import MAX_BROKERS, MAX_SAMPLES
from whatif.errors import WhatIfInputError
from whatif.new_brokers import parse_new_brokers
from whatif.options import (
    AuditOptions,
    DecommissionOptions,
    ExecuteOptions,
    ExposureOptions,
    FailOptions,
    LeadersOptions,
    RollOptions,
    ScaleOutOptions,
)

# roll's exact search stops by then (an hour).
MAX_SOLVER_SECONDS = 3600.0

# Question → (module, function, help).
QUESTIONS: dict[str, tuple[str, str, str]] = {
    "fail": ("whatif.failure", "answer", "brokers, a rack, or any K brokers fail"),
    "decommission": ("whatif.placement", "decommission", "move every replica off brokers"),
    "roll": ("whatif.roll", "answer", "a rolling restart in batches, min ISR kept"),
    "scale-out": ("whatif.placement", "scale_out", "add brokers and put them to work"),
    "rebalance": ("whatif.placement", "scale_out", "balance replicas and leaders as they are"),
    "leaders": ("whatif.leaders", "answer", "leader imbalance and the election that fixes it"),
    "exposure": ("whatif.exposure", "answer", "data-loss exposure of the replica placement"),
    "audit": ("whatif.audit", "answer", "check a reassignment plan against the cluster"),
    "execute": ("whatif.execute", "answer", "replay a reassignment plan in waves under caps"),
}


def _ids(text: str) -> tuple[int, ...]:
    try:
        ids = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of broker ids: {text!r} (e.g. 1,2)") from None
    if not ids:
        raise argparse.ArgumentTypeError("give at least one broker id (e.g. 1,2)")
    return ids


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {value}")
    return value


def _at_most(most: int) -> Callable[[str], int]:
    """A count from 1 to ``most``: a larger one would exhaust memory rather than be answered."""

    def parse(text: str) -> int:
        value = _positive(text)
        if value > most:
            raise argparse.ArgumentTypeError(f"must be at most {most:,}, got {value:,}")
        return value

    return parse


def _rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be above 0, got {text}")
    return value


def _at_most_seconds(text: str) -> float:
    value = _rate(text)
    if value > MAX_SOLVER_SECONDS:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_SOLVER_SECONDS:g}, got {text}")
    return value


def _batch(text: str) -> str:
    if text != "rack":
        _positive(text)
    return text


def add_parser(sub: Any) -> Any:
    """The ``whatif`` command and its questions (returned: their subparsers)."""
    whatif = sub.add_parser(
        "whatif",
        help="plan offline: failures, restarts, scale-out, rebalance, exposure, plan audits",
        description="Load a cluster snapshot and answer one question with Kafka's own rules; "
        "writes summary.json, Parquet tables, Kafka-format plans and report.html to --out.",
    )
    questions = whatif.add_subparsers(dest="question", metavar="QUESTION", required=True)
    for name, (_, _, text) in QUESTIONS.items():
        q = questions.add_parser(name, help=text, description=text)
        source = q.add_argument_group("cluster source (exactly one)")
        source.add_argument("--describe", metavar="FILE", help="kafka-topics.sh --describe text")
        source.add_argument(
            "--zk", metavar="HOST:PORT[/chroot]", help="a live ZK-mode cluster, read-only"
        )
        source.add_argument("--run", metavar="DIR", help="a kce run output directory")
        source.add_argument("--scenario", metavar="FILE", help="a scenario's cluster: block")
        q.add_argument("--rack-map", metavar="FILE", help="CSV id,rack")
        q.add_argument("--sizes", metavar="FILE", help="CSV topic,partition,bytes")
        q.add_argument(
            "--config",
            metavar="KEY=VALUE",
            action="append",
            default=[],
            help="a Kafka config default, e.g. min.insync.replicas=2 (repeatable)",
        )
        q.add_argument("--zk-auth", metavar="USER:PASSWORD", help="ZooKeeper digest auth")
        q.add_argument("--zk-ca", metavar="FILE", help="ZooKeeper TLS: CA certificate")
        q.add_argument("--zk-cert", metavar="FILE", help="ZooKeeper TLS: client certificate")
        q.add_argument("--zk-key", metavar="FILE", help="ZooKeeper TLS: client key")
        q.add_argument("--seed", type=int, default=0, help="seed of any random choice (0)")
        q.add_argument(
            "--out", help=f"output directory (default out/whatif-{name}[-OPTION-VALUE...])"
        )
        q.add_argument("--master", help="Spark master URL")
        q.add_argument("--json", action="store_true", help="print summary.json, not the summary")
        if name == "fail":
            which = q.add_mutually_exclusive_group(required=True)
            which.add_argument("--brokers", type=_ids, help="broker ids, e.g. 1,2")
            which.add_argument("--rack", help="every broker of this rack")
            which.add_argument("--any", type=_positive, metavar="K", help="any K brokers")
            q.add_argument(
                "--samples",
                type=_at_most(MAX_SAMPLES),
                default=1000,
                help=f"K-subsets evaluated (1000; at most {MAX_SAMPLES:,})",
            )
        elif name == "decommission":
            q.add_argument("--brokers", type=_ids, required=True, help="broker ids, e.g. 1,2")
            q.add_argument(
                "--rebalance",
                action="store_true",
                help="also balance the other brokers' replicas and preferred leaders (by "
                "default only the decommissioned brokers' replicas move)",
            )
        elif name == "roll":
            q.add_argument(
                "--batch", type=_batch, required=True, metavar="N|rack", help="batch size"
            )
            q.add_argument(
                "--solver-seconds",
                type=_at_most_seconds,
                default=10.0,
                metavar="S",
                help="time for the exact search of batches (10; at most "
                f"{MAX_SOLVER_SECONDS:g}): past it the best batching found, said so",
            )
        elif name == "scale-out":
            q.add_argument("--add", type=_at_most(MAX_BROKERS), required=True, help="new brokers")
            q.add_argument("--racks", help="the new brokers' racks, in id order: a,b,…")
        elif name == "audit":
            q.add_argument("plan", help="a Kafka reassignment JSON file")
            _new_brokers_argument(q)
        elif name == "execute":
            _execute_arguments(q)
            _new_brokers_argument(q)
    return questions


def _new_brokers_argument(q: Any) -> None:
    q.add_argument(
        "--new-brokers",
        metavar="ID[:RACK],...|SUMMARY",
        help="brokers the plan adds, started empty before it: ids with their racks (31:a,32:b), "
        "or a scale-out's summary.json or output directory",
    )


def _execute_arguments(q: Any) -> None:
    q.add_argument("plan", help="a Kafka reassignment JSON file")
    q.add_argument(
        "--max-moves-per-broker",
        type=_positive,
        default=5,
        metavar="N",
        help="concurrent partition moves a broker takes part in, adding or removing a replica "
        "(5, as Cruise Control's num.concurrent.partition.movements.per.broker)",
    )
    q.add_argument(
        "--max-moves", type=_positive, metavar="N", help="concurrent moves in the cluster (no cap)"
    )
    q.add_argument(
        "--max-leader-moves",
        type=_positive,
        default=1000,
        metavar="N",
        help="concurrent moves that change the preferred leader (1000, as Cruise Control's "
        "num.concurrent.leader.movements)",
    )
    q.add_argument(
        "--fetch-mb-per-s",
        type=_rate,
        default=100.0,
        metavar="X",
        help="each broker's replica fetch throughput in MB/s (100, the emulation's default)",
    )
    q.add_argument(
        "--throttle",
        type=_positive,
        metavar="BYTES_PER_S",
        help="kafka-reassign-partitions --throttle: the leader and follower replication "
        "throttles it sets, on the moving replicas outside the ISR",
    )


def question_options(args: argparse.Namespace) -> Any:
    """The options object of the question ``args`` name (``whatif.options``)."""
    q = args.question
    if q == "fail":
        return FailOptions(args.brokers, args.rack, args.any, args.samples, args.seed)
    if q == "decommission":
        return DecommissionOptions(args.brokers, args.seed, args.rebalance)
    if q == "roll":
        by_rack = args.batch == "rack"
        return RollOptions(None if by_rack else int(args.batch), by_rack, args.solver_seconds)
    if q == "scale-out":
        racks = None if args.racks is None else tuple(r.strip() for r in args.racks.split(","))
        if racks is not None and len(racks) != args.add:
            raise WhatIfInputError(
                f"--racks names {len(racks)} rack(s) for --add {args.add} broker(s) — give one "
                "rack per new broker, in id order"
            )
        return ScaleOutOptions(args.add, racks, args.seed)
    if q == "rebalance":
        return ScaleOutOptions(0, None, args.seed)
    if q == "leaders":
        return LeadersOptions()
    if q == "exposure":
        return ExposureOptions(args.seed)
    new = () if args.new_brokers is None else parse_new_brokers(args.new_brokers)
    if q == "execute":
        return ExecuteOptions(
            Path(args.plan),
            args.max_moves_per_broker,
            args.max_moves,
            args.max_leader_moves,
            args.fetch_mb_per_s,
            args.throttle,
            new,
        )
    return AuditOptions(Path(args.plan), new)


def _zk_options(args: argparse.Namespace) -> Any:
    from whatif.zookeeper import ZkOptions

    auth = ()
    if args.zk_auth is not None:
        if ":" not in args.zk_auth:
            raise WhatIfInputError("--zk-auth must be USER:PASSWORD (ZooKeeper digest auth)")
        auth = (("digest", args.zk_auth),)
    tls = any(x is not None for x in (args.zk_ca, args.zk_cert, args.zk_key))
    return ZkOptions(
        auth_data=auth, use_ssl=tls, certfile=args.zk_cert, keyfile=args.zk_key, ca=args.zk_ca
    )


class _ArgumentsError(argparse.ArgumentParser):
    """A parser whose errors raise (a sweep file's question arguments are input, not argv)."""

    def error(self, message: str) -> NoReturn:
        raise WhatIfInputError(message)


SOURCE_OPTIONS = ("describe", "zk", "run", "scenario", "rack_map", "sizes", "out", "master", "json")


def question_arguments(question: str, argv: Sequence[str]) -> argparse.Namespace:
    """``kce whatif QUESTION ARGV...`` without a source (the caller has the cluster), parsed as
    the command line parses it; a bad argument raises ``WhatIfInputError``."""
    if any(a in ("-h", "--help") for a in argv):
        raise WhatIfInputError("--help is not an option here")
    parser = _ArgumentsError(prog="kce")
    add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["whatif", question, *argv])
    given = [f"--{k.replace('_', '-')}" for k in SOURCE_OPTIONS if getattr(args, k, None)]
    if given:
        raise WhatIfInputError(
            f"{', '.join(given)} cannot be given here: the cluster is the point's"
        )
    return args


def question_function(name: str) -> Callable[..., Any]:
    module, function, _ = QUESTIONS[name]
    return getattr(importlib.import_module(module), function)


# Options that say where the snapshot comes from, where outputs go or how they show: not part
# of the default output directory's name (``spark_app.out_names``).
UNNAMED = (*SOURCE_OPTIONS, "zk_auth", "zk_ca", "zk_cert", "zk_key", "new_brokers", "question")


def default_out(args: argparse.Namespace) -> Path:
    """``out/whatif-QUESTION-...``: the question and the options that change its answer."""
    from spark_app.out_names import OUT, options_name

    questions = add_parser(argparse.ArgumentParser().add_subparsers())
    parser = questions.choices[args.question]
    name = options_name(f"whatif-{args.question}", parser, args, UNNAMED, ("config", "seed"))
    return OUT / name


def run(args: argparse.Namespace) -> tuple[Path, list[str]]:
    """Answer the question of ``args`` and write its outputs; (out, the summary lines)."""
    from spark_app.session import get_spark
    from whatif.answer import write_answer
    from whatif.preflight import check_arguments

    options = question_options(args)
    out = Path(args.out) if args.out else default_out(args)
    snapshot = check_arguments(args, options, out, _zk_options(args))
    spark = get_spark(args.master)
    cluster = snapshot.build(spark)
    answer = question_function(args.question)(spark, cluster, options)
    write_answer(out, answer, cluster.source)
    if args.json:
        return out, [json.dumps(answer.summary, indent=2, ensure_ascii=False)]
    return out, answer.lines
