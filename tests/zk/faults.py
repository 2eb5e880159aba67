"""Fault injection around a real ZooKeeper server, for ``test_zk_faults``.

* ``FaultyEnsemble``: a ``ServerEnsemble`` that runs fault actions at virtual times, each once, at
  the first barrier at or after its time: the scenario events due then have been applied (their
  znodes written), and the controllers have not yet processed what they caused.
* ``Outage``: stops the server (SIGKILL) and, unless ``back_after_s`` is None, starts it again
  from a background thread, as an operator or a supervisor would.
* ``DelayProxy``: a TCP proxy on loopback that holds every chunk of bytes for ``delay_s`` in each
  direction, order kept (slow responses without a lost connection); ``cut`` drops its connections
  and refuses new ones until ``mend`` (a network partition between a client and the server).
* ``znode_tree``: every znode under a path with its payload and version, to prove a write landed
  or did not.
* ``request``/``admin_tool``: admin requests as Kafka's tools make them (``kafka-reassign-partitions
  --zookeeper``, ``kafka-topics --delete``, ``kafka-leader-election``), from a thread.
"""

from __future__ import annotations

import contextlib
import queue
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError
from zk_server import ZooKeeperServer

from controller.events import controller_events as ev
from controller.kafka_controller import KafkaController
from controller.partition_store import ServerEnsemble
from controller.zk import admin_zk_client as admin
from controller.zk.kazoo_client import KazooZkClient
from controller.zk.paths import REASSIGN_PARTITIONS
from statemachines.election_kinds import ElectionTrigger, ElectionType


class FaultyEnsemble(ServerEnsemble):
    """``ServerEnsemble`` with ``faults``: virtual time (ms) -> action (see the module docstring)."""

    def __init__(self, connect: str, faults: dict[int, Callable[[], None]], **kwargs: Any) -> None:
        super().__init__(connect, **kwargs)
        self.pending = dict(faults)
        self.fired: list[int] = []
        self._now: Callable[[], int] = lambda: 0

    def use_clock(self, clock_ms: Callable[[], int]) -> None:
        self._now = clock_ms

    def wait_idle(self) -> None:
        for at in sorted(a for a in self.pending if a <= self._now()):
            self.pending.pop(at)()
            self.fired.append(at)
        super().wait_idle()


@dataclass
class Outage:
    """Stop ``server``; start it again ``back_after_s`` later (never if None)."""

    server: ZooKeeperServer
    back_after_s: float | None
    restarts: list[threading.Thread] = field(default_factory=list)

    def __call__(self) -> None:
        self.server.halt(kill=True)
        if self.back_after_s is not None:
            timer = threading.Timer(self.back_after_s, self.server.start)
            timer.start()
            self.restarts.append(timer)

    def join(self) -> None:
        for timer in self.restarts:
            timer.join()


class DelayProxy:
    """``127.0.0.1:<port>`` forwarding to ``target_port``, every chunk held ``delay_s`` each way."""

    def __init__(self, target_port: int, delay_s: float) -> None:
        self.target_port = target_port
        self.delay_s = delay_s
        self.chunks = 0  # chunks delayed so far, both directions
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._sockets: list[socket.socket] = [self._listener]
        self._lock = threading.Lock()
        self._refusing = False
        threading.Thread(target=self._accept, daemon=True, name="delay-proxy").start()

    @property
    def hosts(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            if self._refusing:
                client.close()
                continue
            server = socket.create_connection(("127.0.0.1", self.target_port))
            with self._lock:
                self._sockets += [client, server]
            self._pump(client, server)
            self._pump(server, client)

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        """One direction: a reader stamps each chunk, a writer sends it when it is due."""
        held: queue.Queue[tuple[float, bytes]] = queue.Queue()

        def read() -> None:
            try:
                while chunk := source.recv(65536):
                    held.put((time.monotonic() + self.delay_s, chunk))
            except OSError:
                pass
            held.put((0.0, b""))

        def write() -> None:
            while True:
                due, chunk = held.get()
                if not chunk:
                    break
                time.sleep(max(0.0, due - time.monotonic()))
                try:
                    sink.sendall(chunk)
                except OSError:
                    break
                self.chunks += 1
            for s in (source, sink):
                _shut(s)
            source.close()  # its reader is done; ``sink`` is the other writer's source

        threading.Thread(target=read, daemon=True).start()
        threading.Thread(target=write, daemon=True).start()

    def cut(self) -> None:
        """Drop every connection through the proxy and refuse new ones."""
        self._refusing = True
        with self._lock:
            connections, self._sockets = self._sockets[1:], self._sockets[:1]
        for s in connections:
            _shut(s)

    def mend(self) -> None:
        self._refusing = False

    def close(self) -> None:
        with self._lock:
            for s in self._sockets:
                _shut(s)
                s.close()


def _shut(s: socket.socket) -> None:
    with contextlib.suppress(OSError):  # already closed by the other side
        s.shutdown(socket.SHUT_RDWR)


def znode_tree(client: KazooZkClient, path: str = "/") -> dict[str, tuple[bytes, int]]:
    """Every znode under ``path`` (itself included): its payload and data version."""
    data, stat = client.get(path)
    tree = {path: (data, stat.version)}
    for child in sorted(client.get_children(path)):
        tree |= znode_tree(client, f"{path.rstrip('/')}/{child}")
    return tree


def request(kind: str, arg: Any, zk: Any, active: Callable[[], KafkaController]) -> None:
    """One admin request, as the tools make it: through ZooKeeper, or to the controller."""
    if kind == "reassign":
        admin.request_reassignment(zk, [arg])
    elif kind == "delete":
        admin.request_topic_deletion(zk, arg)
    else:
        tp = frozenset([ev.TopicPartition(*arg)])
        active().events.put(
            ev.ReplicaLeaderElection(
                tp, ElectionType.PREFERRED, ElectionTrigger.AdminClientTriggered
            )
        )


def admin_tool(
    connect: str,
    requests: list[tuple[str, Any]],
    active: Callable[[], KafkaController],
    errors: list[str],
) -> None:
    """``requests`` from a session of their own, while the controller runs; a reassignment
    waits while another is in progress (the tool refuses then), as a script retrying would."""
    zk = KazooClient(hosts=connect)
    zk.start()
    try:
        for kind, arg in requests:
            while True:
                try:
                    request(kind, arg, zk, active)
                    break
                except NodeExistsError:  # a reassignment is in progress: wait until it is done
                    done = threading.Event()
                    watch = lambda _e, done=done: done.set()  # noqa: E731
                    if zk.exists(REASSIGN_PARTITIONS, watch=watch) is not None:
                        done.wait(30)
    except Exception as err:
        errors.append(repr(err))
    finally:
        zk.stop()
        zk.close()
