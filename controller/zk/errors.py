"""Errors of the ZooKeeper layer that are not ZooKeeper's own (those are ``kazoo.exceptions.*``)."""

from __future__ import annotations


class ControllerMovedError(Exception):
    """A fenced write failed its ``/controller_epoch`` version check: another controller won.

    Kafka's ``ControllerMovedException``. Never retried; the controller resigns (spec §2.3, §3.4).
    """

    def __init__(self, expected_epoch_zk_version: int) -> None:
        super().__init__(
            f"controller moved: /controller_epoch is no longer at zk version {expected_epoch_zk_version}"
        )
        self.expected_epoch_zk_version = expected_epoch_zk_version


class MalformedZnodeError(ValueError):
    """A znode's payload is not what Kafka writes there (bad JSON, missing field, wrong type)."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"malformed znode {path}: {problem}")
        self.path = path
        self.problem = problem


class ZooKeeperClientTimeoutError(Exception):
    """The client stayed disconnected from ZooKeeper for ``zookeeper.connection.timeout.ms``.

    Kafka's ``ZooKeeperClientTimeoutException``, raised where Kafka's client would go on waiting
    for the connection: a run cannot go on without its ZooKeeper.
    """

    def __init__(self, hosts: str, state: str, timeout_ms: int) -> None:
        super().__init__(
            f"Timed out waiting for connection while in state: {state}: ZooKeeper {hosts} "
            f"unreachable for {timeout_ms} ms (zookeeper.connection.timeout.ms)"
        )
        self.hosts = hosts
        self.timeout_ms = timeout_ms
