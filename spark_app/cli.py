"""The ``kce`` command line. Exit codes: 0 success, 2 invalid input, 1 internal error (or, for
``kce scale``, a budget exceeded)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from pydantic import ValidationError

from spark_app import __version__
from spark_app.messages import bounded

if TYPE_CHECKING:
    from spark_app.run_checkpoint import CheckpointManifest, RunCheckpoints
    from spark_app.scenario import Scenario

EXIT_OK, EXIT_INTERNAL, EXIT_INVALID = 0, 1, 2
EXIT_OVER_BUDGET = 1


def _invalid(message: str) -> int:
    """Print an input error, bounded (``spark_app.messages``); exit 2."""
    print(f"kce: {bounded(message)}", file=sys.stderr)
    return EXIT_INVALID


class _Parser(argparse.ArgumentParser):
    """argparse with a bounded one-line error (its usage block, often longer than three lines,
    is left to ``--help``)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_INVALID, f"{bounded(f'{self.prog}: error: {message} (see --help)')}\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="kce",
        description="Kafka's ZooKeeper-mode controller, emulated in bulk on Spark.",
    )
    parser.add_argument("--version", action="version", version=f"kce {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    quick = sub.add_parser(
        "quickstart",
        help="crash brokers of a generated cluster and print where leadership lands",
        description="Generate a cluster, fail the configured brokers, run Kafka's offline "
        "elections in bulk and print a per-broker leader table.",
    )
    quick.add_argument("config", nargs="?", default="configs/quickstart.yaml", help="YAML file")
    quick.add_argument("--master", help="Spark master URL (overrides the file)")
    quick.add_argument("--json", action="store_true", help="print the result as JSON")
    run = sub.add_parser(
        "run",
        help="play a scenario: broker events, elections, failover, in virtual time",
        description="Bootstrap the scenario's cluster into ZooKeeper, run the controller over "
        "its timeline and write the final tables, event log, metrics and an HTML report to --out.",
    )
    run.add_argument("scenario", help="scenario YAML file")
    run.add_argument(
        "--out", help="output directory (default out/<name>, out/<name>-set-... with --set)"
    )
    run.add_argument("--json", action="store_true", help="print summary.json, not the summary")
    run.add_argument("--master", help="Spark master URL (overrides the file)")
    run.add_argument(
        "--zk",
        help="ZooKeeper: 'emulated' or Kafka's zookeeper.connect 'host:port[/chroot]' "
        "(overrides the file)",
    )
    run.add_argument(
        "--set",
        action="append",
        default=[],
        dest="overrides",
        metavar="KEY=VALUE",
        help="override a Kafka key of the scenario's config (log.message.format.version=0.10.2, "
        "or config.KEY=VALUE) or an emulation field (emulation.isr_rule=count); VALUE is read as "
        "YAML; repeatable",
    )
    run.add_argument(
        "--driver-rows",
        type=int,
        metavar="N",
        help="hold a partitions table of at most N rows on the driver and run the events that "
        "can there (overrides execution.driver_rows; 0 runs every event in Spark)",
    )
    run.add_argument(
        "--checkpoint-every",
        type=int,
        metavar="N",
        help="save the whole run every N scenario events, once the controllers are idle, so that "
        "--resume can continue it after a crash (emulated ZooKeeper only)",
    )
    run.add_argument(
        "--resume",
        metavar="DIR",
        help="continue the run whose outputs go to DIR from its latest checkpoint (give the same "
        "scenario and --set/--driver-rows options); its outputs are a whole run's",
    )
    run.add_argument(
        "--checkpoint-dir",
        metavar="DIR",
        help="where checkpoints are written and read (default: checkpoint/ in the output "
        "directory); a run that completes removes its checkpoint",
    )
    from scaling.command import add_parser as add_scale
    from verify.command import add_parser as add_verify
    from whatif.command import add_parser

    add_parser(sub)
    add_scale(sub)
    add_verify(sub)
    return parser


def _format_validation(path: str, err: ValidationError) -> str:
    lines = [f"{path}: {err.error_count()} problem(s):"]
    for e in err.errors():
        where = ".".join(str(x) for x in e["loc"]) or "(top level)"
        lines.append(f"  {where}: {e['msg']}")
    return "\n".join(lines)


def _quickstart(args: argparse.Namespace) -> int:
    from spark_app import quickstart
    from spark_app.preflight import InvalidArgumentError, check_master
    from spark_app.scenario import ScenarioError, format_problems
    from spark_app.session import get_spark

    path = args.config
    if not Path(path).is_file():
        return _invalid(f"no such config file: {path}")
    try:
        check_master(args.master)
        config = quickstart.load_config(path)
    except InvalidArgumentError as err:
        return _invalid(str(err))
    except ValidationError as err:
        return _invalid(_format_validation(path, err))
    except ScenarioError as err:  # unreadable, or not YAML
        return _invalid(format_problems(err.problems, err.source))
    spark = get_spark(args.master or config.spark.master, config.spark.conf)
    result = quickstart.run(spark, config)
    print(json.dumps(result, indent=2) if args.json else quickstart.render(result))
    return EXIT_OK


def _run(args: argparse.Namespace) -> int:
    from spark_app.out_names import run_out
    from spark_app.preflight import (
        ForeignOutputError,
        InvalidArgumentError,
        announce,
        check_master,
        check_zk_connect,
        claim_output,
    )
    from spark_app.run_checkpoint import CheckpointError
    from spark_app.scenario import ScenarioError, format_duration, format_problems, load_scenario

    try:
        check_master(args.master)
        check_zk_connect(args.zk)
        scenario = load_scenario(args.scenario, args.overrides)
    except InvalidArgumentError as err:
        return _invalid(str(err))
    except ScenarioError as err:
        return _invalid(format_problems(err.problems, err.source))
    except OSError as err:
        return _invalid(f"{args.scenario}: {err}")
    if args.driver_rows is not None:
        if args.driver_rows < 0:
            return _invalid(f"--driver-rows must be 0 or more, got {args.driver_rows}")
        execution = scenario.execution.model_copy(update={"driver_rows": args.driver_rows})
        scenario = scenario.model_copy(update={"execution": execution})
    out = Path(args.resume or args.out or run_out(scenario.name, args.overrides))
    try:
        checkpoints, manifest = _checkpoints(args, scenario, out)
        replacing = [] if manifest is not None else [claim_output(out, "run")]
        if checkpoints is not None and manifest is None and args.checkpoint_dir is not None:
            # OUT/checkpoint, the default, is claimed with OUT
            replacing.append(claim_output(checkpoints.directory, "checkpoint", "--checkpoint-dir"))
    except (CheckpointError, ForeignOutputError) as err:
        return _invalid(str(err))
    # What runs the scenario is imported once every input above is known to be valid.
    from controller.zk.errors import ZooKeeperClientTimeoutError
    from spark_app import runner
    from spark_app.session import get_spark
    from spark_app.validate import ClusterModelError

    ensemble = None  # a resumed run's is in its checkpoint
    if manifest is not None:
        played = f"{manifest.scenario_events} of {len(scenario.timeline())} scenario events"
        at = format_duration(manifest.virtual_time_ms)
        print(f"kce: resuming {out} at {at} virtual ({played} played)", file=sys.stderr)
    else:
        try:
            ensemble = runner.open_zookeeper(scenario, args.zk)
        except runner.ZooKeeperUnavailableError as err:
            return _invalid(str(err))
    announce(*replacing)
    spark = get_spark(args.master or scenario.spark.master, scenario.spark.conf)
    try:
        if manifest is not None and checkpoints is not None:
            summary = runner.resume(spark, scenario, out, checkpoints, manifest)
        else:
            summary = runner.run(spark, scenario, out, ensemble, checkpoints)
    except ClusterModelError as err:
        return _invalid(f"{args.scenario}: the starting cluster breaks the model: {err}")
    except ZooKeeperClientTimeoutError as err:
        return _invalid(f"{err}; the run stopped: start the ensemble again and rerun")
    except CheckpointError as err:
        return _invalid(str(err))
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        from spark_app.run_summary import run_summary

        print("\n".join(run_summary(summary, out, scenario.until)))
    return EXIT_OK


def _checkpoints(
    args: argparse.Namespace, scenario: Scenario, out: Path
) -> tuple[RunCheckpoints | None, CheckpointManifest | None]:
    """``kce run``'s checkpoints (none without ``--checkpoint-every`` or ``--resume``) and, with
    ``--resume``, the manifest of the one to continue; ``CheckpointError`` for a misuse."""
    from spark_app.run_checkpoint import CheckpointError, RunCheckpoints, read_manifest

    every = args.checkpoint_every
    if every is not None and every < 1:
        raise CheckpointError(f"--checkpoint-every must be 1 or more, got {every}")
    if args.resume is not None and args.out is not None:
        raise CheckpointError("--resume DIR continues into DIR: leave out --out")
    if every is None and args.resume is None:
        return None, None
    zookeeper = args.zk or scenario.zookeeper.mode
    if zookeeper != "emulated":
        # A real ensemble cannot be rolled back: its tree moves on past the checkpoint, and the
        # killed process's sessions expire with the brokers' and the controller's ephemerals.
        raise CheckpointError(
            "--checkpoint-every and --resume need the emulated ZooKeeper (a real ensemble moves "
            "on past a checkpoint, and a killed run's sessions expire with their ephemeral "
            "znodes); run with --zk emulated"
        )
    directory = Path(args.checkpoint_dir) if args.checkpoint_dir else out / "checkpoint"
    if args.resume is None:
        return RunCheckpoints(directory, every, scenario), None
    manifest = read_manifest(directory, scenario)
    checkpoints = RunCheckpoints(
        directory, every or manifest.every, scenario, manifest.scenario_events
    )
    return checkpoints, manifest


def _whatif(args: argparse.Namespace) -> int:
    from whatif.cluster import WhatIfInputError
    from whatif.command import run

    try:
        out, lines = run(args)
    except WhatIfInputError as err:
        return _invalid(str(err))
    print("\n".join(lines))
    # With --json, stdout is the summary alone: a script can parse it.
    where = sys.stderr if getattr(args, "json", False) else sys.stdout
    print(f"outputs: {out}/ (summary.json, report.html)", file=where)
    return EXIT_OK


def _scale(args: argparse.Namespace) -> int:
    from scaling.command import print_result, run_sweep
    from spark_app.preflight import ForeignOutputError, InvalidArgumentError
    from spark_app.scenario import ScenarioError, format_problems

    try:
        result = run_sweep(args.sweep, args.out, args.master)
    except ScenarioError as err:
        return _invalid(format_problems(err.problems, err.source))
    except (ForeignOutputError, InvalidArgumentError) as err:
        return _invalid(str(err))
    print_result(result)
    return EXIT_OVER_BUDGET if result.exceeded else EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_OK
    try:
        from verify.command import main as verify

        commands = {
            "run": _run, "whatif": _whatif, "quickstart": _quickstart, "scale": _scale,
            "verify": verify,
        }  # fmt: skip
        return commands[args.command](args)
    except KeyboardInterrupt:
        return EXIT_INTERNAL
    except Exception as err:  # an internal error: say so plainly, keep the traceback for bugs
        import traceback

        traceback.print_exc()
        print(f"kce: internal error: {err}", file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
