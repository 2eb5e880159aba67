"""A real Apache Kafka cluster in ZooKeeper mode on this machine: Debian's ZooKeeper and one JVM
per broker (``kafka.Kafka server.properties``), on loopback ports, with logs and data in one
temp directory.

The harness kills only the processes it started (by their ``Popen``), stops every one of them in
``close`` (also at interpreter exit, and the kernel ends a broker whose parent died:
``PR_SET_PDEATHSIG``), and never touches a process it did not start.
"""

from __future__ import annotations

import atexit
import ctypes
import json
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kazoo.client import KazooClient

from statemachines.assignment import BrokerMetadata
from verify.kafka_install import classpath
from verify.zookeeper_server import ZooKeeperServer, free_port

CHROOT = "/kafka"
BROKER_JVM = ("-Xms128m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
TOOL_JVM = ("-Xms32m", "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
# Settings that keep a one-machine cluster small; none of them is read by the controller.
SMALL_BROKER = {
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
    "num.network.threads": "1",
    "num.io.threads": "2",
    "background.threads": "2",
    "num.recovery.threads.per.data.dir": "1",
    "log.cleaner.enable": "false",
}
LOG4J = """log4j.rootLogger=INFO, F
log4j.appender.F=org.apache.log4j.FileAppender
log4j.appender.F.File={file}
log4j.appender.F.layout=org.apache.log4j.PatternLayout
log4j.appender.F.layout.ConversionPattern=[%d] %p %m (%c)%n
"""


class RealClusterError(RuntimeError):
    """The real cluster did not do what was asked in time (the message names what and where)."""


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def wait_until(check: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise RealClusterError(f"timed out after {timeout_s:.0f}s waiting for {what}")
        time.sleep(0.1)


@dataclass
class RealBroker:
    id: int
    rack: str | None
    port: int
    dir: Path
    process: subprocess.Popen[bytes] | None = None
    paused: bool = False

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_tail(self, chars: int = 4000) -> str:
        log = self.dir / "server.log"
        return log.read_text(errors="replace")[-chars:] if log.exists() else ""


@dataclass
class RealKafkaCluster:
    """Brokers of one Kafka release on one ZooKeeper (chroot ``/kafka``); ``config`` is written
    to every broker's ``server.properties`` (Kafka's keys and string values)."""

    release: str
    brokers: Sequence[BrokerMetadata]
    config: Mapping[str, str]
    session_timeout_ms: int = 18_000
    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="kce-kafka-")))
    keep_dir: bool = False
    members: dict[int, RealBroker] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.classpath = classpath(self.release)
        # The session timeout the brokers ask for must be within the server's bounds.
        self.zookeeper = ZooKeeperServer(
            tick_ms=500, max_session_ms=max(self.session_timeout_ms, 20_000)
        )
        self.zk: KazooClient | None = None
        atexit.register(self.close)
        for b in self.brokers:
            home = self.root / f"broker-{b.id}"
            (home / "logs").mkdir(parents=True, exist_ok=True)
            self.members[b.id] = RealBroker(b.id, b.rack, free_port(), home)

    # -- lifecycle -----------------------------------------------------------------------------
    def start_zookeeper(self) -> KazooClient:
        self.zookeeper.start()
        self.zk = KazooClient(f"{self.zookeeper.hosts}{CHROOT}", timeout=30)
        root = KazooClient(self.zookeeper.hosts)
        root.start(30)
        root.ensure_path(CHROOT)
        root.stop()
        root.close()
        self.zk.start(30)
        return self.zk

    def _properties(self, broker: RealBroker) -> str:
        props = {
            "broker.id": str(broker.id),
            "listeners": f"PLAINTEXT://127.0.0.1:{broker.port}",
            "log.dirs": str(broker.dir / "logs"),
            "zookeeper.connect": f"{self.zookeeper.hosts}{CHROOT}",
            **({"broker.rack": broker.rack} if broker.rack is not None else {}),
            **SMALL_BROKER,
            **self.config,
        }
        return "".join(f"{k}={v}\n" for k, v in props.items())

    def start_broker(self, broker_id: int, timeout_s: float = 90) -> None:
        """Start the broker's JVM; returns once it registered ``/brokers/ids/<id>``."""
        broker = self.members[broker_id]
        if broker.running:
            raise RealClusterError(f"broker {broker_id} is already running")
        (broker.dir / "server.properties").write_text(self._properties(broker))
        (broker.dir / "log4j.properties").write_text(LOG4J.format(file=broker.dir / "server.log"))
        with (broker.dir / "stdout.log").open("ab") as out:
            broker.process = subprocess.Popen(
                ["java", *BROKER_JVM, f"-Dlog4j.configuration=file:{broker.dir}/log4j.properties",
                 f"-Dkafka.logs.dir={broker.dir}", "-cp", self.classpath, "kafka.Kafka",
                 str(broker.dir / "server.properties")],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                preexec_fn=_die_with_parent,
            )  # fmt: skip
        broker.paused = False
        self._wait_broker(broker, registered=True, timeout_s=timeout_s)

    def _wait_broker(self, broker: RealBroker, registered: bool, timeout_s: float) -> None:
        def done() -> bool:
            if registered and not broker.running:
                raise RealClusterError(
                    f"broker {broker.id} exited while starting:\n{broker.log_tail()}"
                )
            return self.registered(broker.id) == registered

        state = "registered" if registered else "deregistered"
        wait_until(done, timeout_s, f"broker {broker.id} to be {state} in ZooKeeper")

    def registered(self, broker_id: int) -> bool:
        assert self.zk is not None
        return self.zk.exists(f"/brokers/ids/{broker_id}") is not None

    def kill(self, broker_id: int) -> None:
        """A crash (SIGKILL); returns once ZooKeeper expired its session."""
        broker = self.members[broker_id]
        if broker.process is not None and broker.running:
            broker.process.kill()
            broker.process.wait()
        self._wait_broker(broker, False, self.session_timeout_ms / 1000 + 30)

    def terminate(self, broker_id: int, timeout_s: float = 120) -> None:
        """A clean shutdown (SIGTERM: Kafka's controlled shutdown, then exit)."""
        broker = self.members[broker_id]
        if broker.process is None or not broker.running:
            return
        broker.process.terminate()
        try:
            broker.process.wait(timeout_s)
        except subprocess.TimeoutExpired as err:
            broker.process.kill()
            raise RealClusterError(f"broker {broker_id} did not stop within {timeout_s}s") from err
        self._wait_broker(broker, False, self.session_timeout_ms / 1000 + 30)

    def expire_session(self, broker_id: int) -> None:
        """The broker's session expires while it lives: SIGSTOP until ZooKeeper dropped its
        registration, then SIGCONT; returns once it registered again."""
        broker = self.members[broker_id]
        assert broker.process is not None and broker.running
        broker.process.send_signal(signal.SIGSTOP)
        broker.paused = True
        try:
            self._wait_broker(broker, False, self.session_timeout_ms / 1000 + 30)
        finally:
            broker.process.send_signal(signal.SIGCONT)
            broker.paused = False
        self._wait_broker(broker, True, 90)

    def bootstrap_servers(self) -> str:
        live = [b for b in self.members.values() if b.running and not b.paused]
        if not live:
            raise RealClusterError("no broker is running to take an admin request")
        return ",".join(f"127.0.0.1:{b.port}" for b in live)

    def tool(self, main_class: str, *args: str, timeout_s: float = 120) -> str:
        """Run one of Kafka's command-line tools (``kafka.admin.TopicCommand`` ...) or a Java
        source file on Kafka's class path; its output, or ``RealClusterError`` with it when the
        tool fails."""
        log4j = self.root / "tools-log4j.properties"
        log4j.write_text(LOG4J.format(file=self.root / "tools.log"))
        result = subprocess.run(
            ["java", *TOOL_JVM, f"-Dlog4j.configuration=file:{log4j}", "-cp", self.classpath,
             main_class, *args],
            capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL,
            preexec_fn=_die_with_parent,
        )  # fmt: skip
        output = result.stdout + result.stderr
        if result.returncode != 0 or "Error while executing" in output:
            name = Path(main_class).stem if main_class.endswith(".java") else main_class
            name = name.rsplit(".", 1)[-1]
            raise RealClusterError(f"{name} {' '.join(args)} failed:\n{output.strip()[-2000:]}")
        return output

    def write_admin_znode(self, path: str, payload: dict[str, object]) -> None:
        """Write an admin request znode as Kafka's ZooKeeper admin path does."""
        assert self.zk is not None
        self.zk.create(path, json.dumps(payload).encode(), makepath=True)

    def close(self) -> None:
        """Stop every broker this harness started (SIGKILL: nothing is left to save), then
        ZooKeeper; remove the directory unless ``keep_dir``."""
        for broker in self.members.values():
            process = broker.process
            if process is not None and process.poll() is None:
                if broker.paused:
                    process.send_signal(signal.SIGCONT)
                process.kill()
                process.wait()
        if self.zk is not None:
            self.zk.stop()
            self.zk.close()
            self.zk = None
        self.zookeeper.stop()
        if not self.keep_dir:
            shutil.rmtree(self.root, ignore_errors=True)
        atexit.unregister(self.close)
