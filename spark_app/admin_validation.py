"""Kafka 2.8's admin-side checks of topic creation, partition addition, deletion and topic
configs (``AdminZkClient``, spec §9.1, §9.2), over plain data read from ZooKeeper.

A rejected request raises ``AdminRequestError`` carrying the name of the exception Kafka's admin
tool would show (``TopicExistsException``, ``BrokerNotAvailableException``, ...) and Kafka's
message; the runner records it and the run goes on, as on a real cluster.

As in Kafka 2.8, a manual assignment of a *new topic* is not checked against the registered
brokers (``validateTopicCreate`` does not; replicas on absent brokers stay offline until they
register), while a manual assignment of *added partitions* is (``validateReplicaAssignment``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from statemachines.assignment import (
    AdminOperationError,
    BrokerMetadata,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    assign_replicas_to_brokers,
)

_KAFKA_NAMES: dict[type[Exception], str] = {
    AdminOperationError: "AdminOperationException",
    InvalidPartitionsError: "InvalidPartitionsException",
    InvalidReplicationFactorError: "InvalidReplicationFactorException",
}


class AdminRequestError(Exception):
    """An admin request Kafka rejects; ``exception`` is Kafka's exception class name."""

    def __init__(self, exception: str, message: str) -> None:
        super().__init__(exception, message)  # the constructor's arguments: it pickles
        self.exception = exception
        self.message = message

    def __str__(self) -> str:
        return f"{self.exception}: {self.message}"


def _joined(ids: Collection[int]) -> str:
    return ", ".join(str(b) for b in ids)


def _scala_map(assignment: Mapping[int, Sequence[int]]) -> str:
    entries = (f"{p} -> List({_joined(r)})" for p, r in sorted(assignment.items()))
    return f"Map({', '.join(entries)})"


def place_replicas(
    brokers: Sequence[BrokerMetadata],
    n_partitions: int,
    replication_factor: int,
    **kwargs: object,
) -> dict[int, list[int]]:
    """``AdminUtils.assignReplicasToBrokers``; its rejections as ``AdminRequestError``."""
    try:
        return assign_replicas_to_brokers(brokers, n_partitions, replication_factor, **kwargs)  # type: ignore[arg-type]
    except tuple(_KAFKA_NAMES) as err:
        raise AdminRequestError(_KAFKA_NAMES[type(err)], str(err)) from None


def validate_topic_create(
    topic: str, assignment: Mapping[int, Sequence[int]], existing_topics: Collection[str]
) -> None:
    """``AdminZkClient.validateTopicCreate`` (the topic name's legality is checked at load)."""
    if topic in existing_topics:
        raise AdminRequestError("TopicExistsException", f"Topic '{topic}' already exists.")
    if "." in topic or "_" in topic:
        twin = topic.replace(".", "_")
        colliding = [t for t in existing_topics if t.replace(".", "_") == twin]
        if colliding:
            raise AdminRequestError(
                "InvalidTopicException",
                f"Topic '{topic}' collides with existing topics: {', '.join(sorted(colliding))}",
            )
    if len({len(r) for r in assignment.values()}) != 1:
        raise AdminRequestError(
            "InvalidReplicaAssignmentException",
            "All partitions should have the same number of replicas",
        )
    if any(len(r) != len(set(r)) for r in assignment.values()):
        raise AdminRequestError(
            "InvalidReplicaAssignmentException",
            f"Duplicate replica assignment found: {_scala_map(assignment)}",
        )
    n = len(assignment)
    if sum(p for p in assignment if p >= 0) != n * (n - 1) // 2:
        raise AdminRequestError(
            "InvalidReplicaAssignmentException",
            "partitions should be a consecutive 0-based integer sequence",
        )


def validate_replica_assignment(
    assignment: Mapping[int, Sequence[int]], expected_rf: int, available: Collection[int]
) -> None:
    """``AdminZkClient.validateReplicaAssignment`` of the partitions an addition names."""
    shown = _joined(sorted(available))
    for pid, replicas in sorted(assignment.items()):
        if not replicas:
            raise AdminRequestError(
                "InvalidReplicaAssignmentException",
                f"Cannot have replication factor of 0 for partition id {pid}.",
            )
        if len(replicas) != len(set(replicas)):
            raise AdminRequestError(
                "InvalidReplicaAssignmentException",
                f"Duplicate brokers not allowed in replica assignment: {_joined(replicas)} "
                f"for partition id {pid}.",
            )
        if not set(replicas) <= set(available):
            raise AdminRequestError(
                "BrokerNotAvailableException",
                f"Some brokers specified for partition id {pid} are not available. "
                f"Specified brokers: {_joined(replicas)}, available brokers: {shown}.",
            )
    bad = {p: len(r) for p, r in sorted(assignment.items()) if len(r) != expected_rf}
    if bad:
        raise AdminRequestError(
            "InvalidReplicaAssignmentException",
            f"Inconsistent replication factor between partitions, partition 0 has {expected_rf} "
            f"while partitions [{_joined(bad)}] have replication factors "
            f"[{_joined(bad.values())}], respectively.",
        )


def new_partitions_assignment(
    topic: str,
    existing: Mapping[int, Sequence[int]],
    brokers: Sequence[BrokerMetadata],
    total: int,
    manual: Mapping[int, Sequence[int]] | None = None,
) -> dict[int, list[int]]:
    """``AdminZkClient.createNewPartitionsAssignment``: replicas of partitions
    ``len(existing)..total-1``; listed ones from ``manual``, the rest by Kafka's algorithm
    (fixed start: the first broker whose id is at least partition 0's first replica, §9.2)."""
    first = existing.get(0)
    if first is None:
        raise AdminRequestError(
            "AdminOperationException",
            f"Unexpected existing replica assignment for topic '{topic}', partition id 0 is "
            f"missing. Assignment: {_scala_map(existing)}",
        )
    to_add = total - len(existing)
    if to_add <= 0:
        raise AdminRequestError(
            "InvalidPartitionsException",
            "The number of partitions for a topic can only be increased. "
            f"Topic {topic} currently has {len(existing)} partitions, {total} would not be an "
            "increase.",
        )
    listed = {p: list(r) for p, r in (manual or {}).items()}
    if listed:
        validate_replica_assignment(listed, len(first), [b.id for b in brokers])
    new = range(len(existing), total)
    if all(p in listed for p in new):
        return {p: listed[p] for p in new}
    ids = [b.id for b in brokers]
    fixed = next((i for i, b in enumerate(ids) if b >= first[0]), 0)
    placed = place_replicas(
        brokers, to_add, len(first), fixed_start_index=fixed, start_partition_id=len(existing)
    )
    return {p: listed.get(p, placed[p]) for p in new}


def validate_topic_exists(topic: str, existing_topics: Collection[str], what: str) -> None:
    """Deletion (``deleteTopic``), config changes (``validateTopicConfig``) and partition
    additions (``CreatePartitions``) need the topic."""
    if topic in existing_topics:
        return
    message = {
        "delete": f"Topic `{topic}` to delete does not exist",
        "config": f"Topic '{topic}' does not exist.",
    }.get(what, f"The topic '{topic}' does not exist.")
    raise AdminRequestError("UnknownTopicOrPartitionException", message)
