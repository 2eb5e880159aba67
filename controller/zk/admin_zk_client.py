"""What admins and brokers (not the controller) write to ZooKeeper, in Kafka's layout.

Kafka's ``AdminZkClient`` side of topic creation, partition addition, deletion requests,
reassignment and preferred-election requests, topic configs and brokers' dynamic configs (spec §9, §10), and the partition leader's side of an
ISR change (spec §12.4): the conditional state write and the ``/isr_change_notification``
sequential node. The controller reacts to these through its watches, as on a real cluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from controller.zk.models import (
    LogDirEvent,
    PartitionList,
    PartitionRef,
    ReassignmentEntry,
    ReassignPartitions,
    TopicAssignment,
    TopicConfig,
)
from controller.zk.paths import (
    BrokerConfigZNode,
    DeleteTopicZNode,
    IsrChangeNotificationZNode,
    LogDirEventNotificationZNode,
    PartitionStateZNode,
    PreferredReplicaElectionZNode,
    ReassignPartitionsZNode,
    TopicConfigZNode,
    TopicZNode,
)
from controller.zk.protocol import WatchFn, ZkClient

# One notification znode stays well under jute.maxbuffer (1 MiB) at ~40 bytes per partition.
ISR_NOTIFICATION_MAX_PARTITIONS = 10_000


def read_topic_assignment(
    client: ZkClient, topic: str, watch: WatchFn | None = None
) -> TopicAssignment:
    path = TopicZNode.path(topic)
    data, _ = client.get(path, watch=watch)
    return TopicZNode.decode(data, path)


def read_topic_config(client: ZkClient, topic: str) -> dict[str, str]:
    """``/config/topics/<t>`` overrides; a missing znode means no overrides."""
    path = TopicConfigZNode.path(topic)
    if client.exists(path) is None:
        return {}
    data, _ = client.get(path)
    return dict(TopicConfigZNode.decode(data, path).config)


def set_topic_config(client: ZkClient, topic: str, overrides: Mapping[str, str]) -> dict[str, str]:
    """Merge ``overrides`` into ``/config/topics/<t>``; returns the full override map."""
    merged = {**read_topic_config(client, topic), **overrides}
    payload = TopicConfigZNode.encode(TopicConfig(config=merged))
    path = TopicConfigZNode.path(topic)
    if client.exists(path) is None:
        client.create(path, payload, makepath=True)
    else:
        client.set(path, payload)
    return merged


def set_broker_config(
    client: ZkClient, broker: int, overrides: Mapping[str, str], deleted: Iterable[str] = ()
) -> dict[str, str]:
    """``kafka-configs --entity-type brokers --entity-name <broker> --alter``: merge ``overrides``
    into ``/config/brokers/<broker>`` and drop the ``deleted`` keys; returns what it now holds."""
    path = BrokerConfigZNode.path(broker)
    current: dict[str, str] = {}
    if client.exists(path) is not None:
        data, _ = client.get(path)
        current = dict(BrokerConfigZNode.decode(data, path).config)
    gone = set(deleted)
    merged = {k: v for k, v in {**current, **overrides}.items() if k not in gone}
    payload = BrokerConfigZNode.encode(TopicConfig(config=merged))
    if client.exists(path) is None:
        client.create(path, payload, makepath=True)
    else:
        client.set(path, payload)
    return merged


def _partitions_map(assignment: Mapping[int, Sequence[int]]) -> dict[str, list[int]]:
    return {str(p): list(r) for p, r in sorted(assignment.items())}


def create_topic(
    client: ZkClient,
    topic: str,
    assignment: Mapping[int, Sequence[int]],
    config: Mapping[str, str] | None = None,
) -> None:
    """§9.1 admin side: the config znode first (even if empty), then the topic znode."""
    set_topic_config(client, topic, dict(config or {}))
    value = TopicAssignment(partitions=_partitions_map(assignment))
    client.create(TopicZNode.path(topic), TopicZNode.encode(value))


def add_partitions(
    client: ZkClient, topic: str, added: Mapping[int, Sequence[int]]
) -> TopicAssignment:
    """§9.2 admin side: rewrite the topic znode with the old and the new partitions."""
    current = read_topic_assignment(client, topic)
    partitions = {**current.partitions, **_partitions_map(added)}
    value = current.model_copy(update={"partitions": partitions})
    client.set(TopicZNode.path(topic), TopicZNode.encode(value))
    return value


def request_topic_deletion(client: ZkClient, topic: str) -> None:
    client.create(DeleteTopicZNode.path(topic), DeleteTopicZNode.encode(), makepath=True)


def request_reassignment(
    client: ZkClient, entries: Iterable[tuple[str, int, Sequence[int]]]
) -> None:
    """The legacy tool's ``/admin/reassign_partitions``; NodeExistsError while one is pending."""
    value = ReassignPartitions(
        partitions=[
            ReassignmentEntry(topic=t, partition=p, replicas=list(r)) for t, p, r in entries
        ]
    )
    client.create(ReassignPartitionsZNode.path(), ReassignPartitionsZNode.encode(value))


def request_preferred_election(client: ZkClient, partitions: Iterable[tuple[str, int]]) -> None:
    """The legacy tool's ``/admin/preferred_replica_election``; NodeExistsError while one is
    pending."""
    value = PartitionList(partitions=[PartitionRef(topic=t, partition=p) for t, p in partitions])
    client.create(PreferredReplicaElectionZNode.path(), PreferredReplicaElectionZNode.encode(value))


def propagate_isr_changes(client: ZkClient, partitions: Sequence[tuple[str, int]]) -> int:
    """A broker's ``propagateIsrChanges``: sequential notification nodes; returns how many."""
    created = 0
    for i in range(0, len(partitions), ISR_NOTIFICATION_MAX_PARTITIONS):
        chunk = partitions[i : i + ISR_NOTIFICATION_MAX_PARTITIONS]
        value = PartitionList(partitions=[PartitionRef(topic=t, partition=p) for t, p in chunk])
        client.create(
            IsrChangeNotificationZNode.path_prefix(),
            IsrChangeNotificationZNode.encode(value),
            sequence=True,
        )
        created += 1
    return created


def update_leader_and_isr(
    client: ZkClient, topic: str, partition: int, isr: Sequence[int]
) -> int | None:
    """The leader's ISR write (§12.4 step 1): same leader and epochs, conditional on the
    znode version it read. Returns the new version, or None when the partition has no state."""
    path = PartitionStateZNode.path(topic, partition)
    if client.exists(path) is None:
        return None
    data, stat = client.get(path)
    state = PartitionStateZNode.decode(data, path)
    value = state.model_copy(update={"isr": list(isr)})
    return client.set(path, PartitionStateZNode.encode(value), version=stat.version).version


def notify_log_dir_failure(client: ZkClient, broker: int) -> None:
    client.create(
        LogDirEventNotificationZNode.path_prefix(),
        LogDirEventNotificationZNode.encode(LogDirEvent(broker=broker)),
        sequence=True,
    )
