"""Run a ``kce`` command on a Spark standalone cluster started on loopback.

The master and workers come from the installed pyspark (no download); the command is submitted
with ``spark-submit --master spark://127.0.0.1:PORT``, the project shipped as a zip through
``--py-files``.

With a command after ``--``, it is submitted, its standard output printed with its wall time
(JVM starts included), and the cluster stopped; the exit code is the command's. Without one, the
cluster's master URL and web UI are printed and it runs until Ctrl-C. Daemon and executor logs
are kept under the printed directory when something fails.

    python bench/standalone_cluster.py [--workers 2] [--cores 1] [--memory 1g] [--conf K=V]...
        [-- run configs/scenarios/decommission.yaml --out /tmp/decommission]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

# Run as a script, this file's directory comes first on the path, and ``bench/controller.py``
# would shadow the ``controller`` package.
if sys.path and Path(sys.path[0] or ".").resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from spark_standalone import StandaloneCluster, package_project, submit


def _conf(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2, help="workers (default 2)")
    parser.add_argument("--cores", type=int, default=1, help="cores per worker (default 1)")
    parser.add_argument("--memory", default="1g", help="memory per worker (default 1g)")
    parser.add_argument(
        "--conf",
        type=_conf,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a spark-submit setting (repeatable), e.g. spark.executor.memory=1g",
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- a kce command and its args")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    with StandaloneCluster(args.workers, args.cores, args.memory) as cluster:
        print(f"master {cluster.master_url}, web UI http://127.0.0.1:{cluster.webui_port}")
        print(f"daemon logs under {cluster.dir} (kept if the command fails)")
        if not command:
            try:
                while True:
                    time.sleep(3600)
            except KeyboardInterrupt:
                return 0
        with tempfile.TemporaryDirectory(prefix="kce-py-files-") as tmp:
            started = time.perf_counter()
            done = submit(cluster.master_url, command, package_project(Path(tmp)), dict(args.conf))
            seconds = time.perf_counter() - started
        print(done.stdout, end="")
        if done.returncode != 0:
            print(done.stderr, file=sys.stderr)
            cluster.keep_logs = True
        print(f"spark-submit {' '.join(command)}: exit {done.returncode}, {seconds:.1f} s wall")
        return done.returncode


if __name__ == "__main__":
    raise SystemExit(main())
