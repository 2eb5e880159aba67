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
