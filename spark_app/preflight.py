"""Checks of the command line that run before Spark starts (plain Python, no ``pyspark``).

An input error must cost no JVM: ``--out`` and ``--checkpoint-dir`` are claimed
(``output_guard``), ``--zk`` and ``--master`` are checked for their syntax here, and every input
file is parsed and validated by its own loader, all before ``spark_app.session.get_spark``.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from spark_app.output_guard import ForeignOutputError, Kind, claim

__all__ = [
    "ForeignOutputError",
    "InvalidArgumentError",
    "announce",
    "check_master",
    "check_zk_connect",
    "claim_output",
    "master_problem",
    "zk_connect_problem",
]

# Spark's master URLs (SparkContext.createTaskScheduler, SparkSubmit): local[N|*][,F],
# local-cluster[N,C,M], spark://HOST:PORT[,HOST:PORT...], yarn, k8s://[https://]HOST[:PORT].
_MASTER = re.compile(
    r"local(\[(\*|[1-9]\d*)(,[1-9]\d*)?\])?"
    r"|local-cluster\[[1-9]\d*,[1-9]\d*,[1-9]\d*\]"
    r"|spark://[\w.-]+:\d+(,[\w.-]+:\d+)*"
    r"|yarn"
    r"|k8s://(https?://)?[\w.-]+(:\d+)?/?"
)
_MASTERS = "local[*], local[N], spark://HOST:PORT, yarn or k8s://HOST:PORT"
# One server of ZooKeeper's connect string: a host name, IPv4 or [IPv6] address, and a port.
_SERVER = re.compile(r"(?P<host>[A-Za-z0-9_.-]+|\[[0-9A-Fa-f:.]+\])(:(?P<port>\d+))?")
# A chroot is an absolute ZooKeeper path (PathUtils.validatePath): no empty, "." or ".." step.
_CHROOT_STEP = re.compile(r"[^/\s]+")
MAX_PORT = 65535


class InvalidArgumentError(ValueError):
    """A command-line value that cannot be used; the message names the option and the fix."""


def master_problem(master: str) -> str | None:
    """What is wrong with a Spark master URL, or ``None``."""
    if _MASTER.fullmatch(master):
        return None
    return f"not a Spark master URL — use {_MASTERS}"


def zk_connect_problem(connect: str) -> str | None:
    """What is wrong with Kafka's ``zookeeper.connect`` (``host:port[,host:port...][/chroot]``,
    as ZooKeeper's ``ConnectStringParser`` reads it), or ``None``."""
    servers, _, chroot = connect.partition("/")
    if not servers:
        return "no host — write host:port[,host:port...][/chroot]"
    for server in servers.split(","):
        found = _SERVER.fullmatch(server)
        if found is None:
            return f"{server!r} is not host:port — write host:port[,host:port...][/chroot]"
        port = found["port"]
        if port is not None and not 1 <= int(port) <= MAX_PORT:
            return f"port {port} of {server!r} is out of range — use 1 to {MAX_PORT}"
    steps = chroot.split("/") if chroot else []
    if any(not _CHROOT_STEP.fullmatch(s) or s in (".", "..") for s in steps):
        return f"chroot /{chroot} is not a ZooKeeper path — write /name[/name...]"
    return None


def check_master(master: str | None, option: str = "--master") -> None:
    """``InvalidArgumentError`` unless ``master`` is absent or a Spark master URL."""
    if master is not None and (problem := master_problem(master)) is not None:
        raise InvalidArgumentError(f"{option} {master!r}: {problem}")


def check_zk_connect(connect: str | None, option: str = "--zk") -> None:
    """``InvalidArgumentError`` unless ``connect`` is absent, ``emulated`` (``kce run``) or a
    ZooKeeper connect string."""
    if connect is None or connect == "emulated":
        return
    if (problem := zk_connect_problem(connect)) is not None:
        raise InvalidArgumentError(f"{option} {connect!r}: {problem}")


def claim_output(path: Path, kind: Kind, option: str = "--out") -> str | None:
    """Claim ``path`` for ``kind``'s output: ``ForeignOutputError`` when it is not an earlier
    one; the line announcing that it replaces one, or ``None``."""
    return claim(path, kind, option)


def announce(*lines: str | None) -> None:
    """Print each announcement (``claim_output``) on one line of stderr: once every input is
    valid, so that an input error stays the only message."""
    for line in lines:
        if line is not None:
            print(f"kce: {line}", file=sys.stderr)
