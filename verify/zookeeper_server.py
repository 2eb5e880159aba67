"""A throwaway ZooKeeper 3.8 server (Debian's ``zookeeper`` package) for ``kce verify``'s real
Kafka clusters, the tests and the benchmarks.

Runs ``ZooKeeperServerMain`` directly with a generated ``zoo.cfg``, a temp data dir and a free
loopback port; ``start`` waits until the ``srvr`` four-letter word reports standalone mode.
``halt`` ends the process and keeps the data dir, so a later ``start`` is the same server back on
the same port with its znodes and sessions (a session survives if its client reconnects within
its timeout, counted from the restart). ``tick_ms`` is ZooKeeper's ``tickTime``: sessions may
ask for 2 to 20 ticks, or up to ``max_session_ms`` when given (a Kafka broker's
``zookeeper.session.timeout.ms`` is negotiated down to the server's bound otherwise).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

ZOOKEEPER_JAR = Path(os.environ.get("ZOOKEEPER_JAR", "/usr/share/java/zookeeper.jar"))
CLASSPATH = f"/etc/zookeeper/conf:{ZOOKEEPER_JAR}"


class ZooKeeperMissingError(RuntimeError):
    pass


def free_port() -> int:
    """A loopback TCP port free right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def four_letter(port: int, word: str, timeout: float = 1.0) -> str:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(word.encode())
        chunks = []
        while chunk := s.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


class ZooKeeperServer:
    def __init__(self, tick_ms: int = 2000, max_session_ms: int | None = None) -> None:
        if not ZOOKEEPER_JAR.exists() or shutil.which("java") is None:
            raise ZooKeeperMissingError(
                f"real ZooKeeper tests need Java and {ZOOKEEPER_JAR} "
                "(Debian package 'zookeeper': apt-get install -y zookeeper)"
            )
        self.dir = Path(tempfile.mkdtemp(prefix="zk-server-"))
        self.port = free_port()
        self.log_path = self.dir / "server.log"
        self.tick_ms = tick_ms
        self.max_session_ms = max_session_ms
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def hosts(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> ZooKeeperServer:
        (self.dir / "data").mkdir(exist_ok=True)
        cfg = self.dir / "zoo.cfg"
        cfg.write_text(
            "\n".join(
                [
                    f"tickTime={self.tick_ms}",
                    f"dataDir={self.dir / 'data'}",
                    f"clientPort={self.port}",
                    "clientPortAddress=127.0.0.1",
                    "maxClientCnxns=0",
                    "admin.enableServer=false",
                    "4lw.commands.whitelist=srvr,ruok",
                    "forceSync=no",
                    *([f"maxSessionTimeout={self.max_session_ms}"] if self.max_session_ms else []),
                    "",
                ]
            )
        )
        with self.log_path.open("ab") as log:  # the server writes to its own copy
            self.process = subprocess.Popen(
                ["java", "-cp", CLASSPATH, "org.apache.zookeeper.server.ZooKeeperServerMain",
                 str(cfg)],
                stdout=log,
                stderr=subprocess.STDOUT,
            )  # fmt: skip
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"ZooKeeper exited early:\n{self.log()}")
            try:
                if "Mode: standalone" in four_letter(self.port, "srvr"):
                    return self
            except OSError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"ZooKeeper did not start within {timeout}s:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def halt(self, kill: bool = False) -> None:
        """End the server process (SIGTERM, then SIGKILL after 10 s; ``kill``: SIGKILL at once, a
        crash); the data dir stays."""
        if self.process is not None and self.process.poll() is None:
            if kill:
                self.process.kill()
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def stop(self) -> None:
        self.halt()
        shutil.rmtree(self.dir, ignore_errors=True)
