"""Write a cluster into ZooKeeper in Kafka's layout, and read a Kafka-layout tree back.

``bootstrap_cluster(client, brokers, partitions, store)`` takes a partitions DataFrame (``PARTITIONS_SCHEMA``)
and broker registrations and writes: the persistent paths a broker creates (spec §3.1),
``/controller_epoch`` if missing, ``/brokers/ids/<id>`` (ephemeral, owned by ``client``'s session),
``/brokers/topics/<t>`` (version 3: full replica set and reassignment maps, built per topic by
Spark), and the partition-state znodes of every partition that has left ``NewPartition`` (Kafka
creates a state znode only when it first elects a leader), through the fenced bulk ``store``.

``read_cluster(client, spark, store)`` is the reverse and only reads, so it also snapshots a real ZK-mode
Kafka cluster: point a client at its ZooKeeper (with the chroot) and get the state tables. A
partition without a state znode is ``NewPartition``; with one it is ``OnlinePartition`` when its
leader is a registered broker, else ``OfflinePartition`` (Kafka's startup initialisation, §5.4).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kazoo.exceptions import NodeExistsError, NoNodeError
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from controller.partition_store.states import NEW_PARTITION_VERSION, PartitionStateStore
from controller.partition_store.topic_assignments import Assignments, topic_assignments
from controller.zk.models import BrokerRegistration, TopicAssignment
from controller.zk.paths import (
    BROKER_IDS,
    BROKER_TOPICS,
    CONTROLLER_EPOCH,
    PERSISTENT_PATHS,
    BrokerIdZNode,
    ControllerEpochZNode,
    ControllerZNode,
    PartitionStateZNode,
    TopicZNode,
)
from controller.zk.protocol import ZkClient
from statemachines.schemas import (
    ADDING_REPLICAS,
    ISR,
    LEADER,
    LEADER_EPOCH,
    NO_EPOCH,
    NO_LEADER,
    PARTITION,
    REMOVING_REPLICAS,
    REPLICAS,
    STATE,
    TOPIC,
    ZK_VERSION,
    check_partitions,
)
from statemachines.schemas import (
    CONTROLLER_EPOCH as CONTROLLER_EPOCH_COL,
)

log = logging.getLogger(__name__)

_NO_STATE_ZNODE = ("NewPartition", "NonExistentPartition")


@dataclass(frozen=True)
class ClusterSnapshot:
    """What ``read_cluster`` found."""

    brokers: dict[int, BrokerRegistration]
    partitions: DataFrame
    controller_id: int
    controller_epoch: int
    controller_epoch_zk_version: int
    assignments: Assignments  # what ``partitions`` reads the replica lists from

    @property
    def topic_partitions(self) -> dict[str, int]:
        """Partitions per topic, from the topic znodes."""
        return self.assignments.counts

    @property
    def topic_ids(self) -> dict[str, str]:
        """Topic ids, of the topics whose znode has one."""
        return self.assignments.topic_ids

    @property
    def width(self) -> int:
        """The longest replica list (0 without partitions)."""
        return self.assignments.width

    def release(self) -> None:
        """Free what ``partitions`` reads, once it has been read into something else."""
        self.assignments.release()


def topic_znode_json(df: DataFrame) -> DataFrame:
    """One row per topic with its ``/brokers/topics/<t>`` payload (version 3), built by Spark."""

    def as_map(column: str, only_non_empty: bool) -> Any:
        entries = F.struct(F.col(PARTITION).cast("string"), F.col(column))
        keep = F.size(F.col(column)) > 0 if only_non_empty else F.lit(True)
        return F.map_from_entries(F.collect_list(F.when(keep, entries)))

    return df.groupBy(TOPIC).agg(
        F.to_json(
            F.struct(
                F.lit(3).alias("version"),
                as_map(REPLICAS, False).alias("partitions"),
                as_map(ADDING_REPLICAS, True).alias("adding_replicas"),
                as_map(REMOVING_REPLICAS, True).alias("removing_replicas"),
            )
        ).alias("json")
    )


def topic_znode_payload(
    partitions: Iterable[tuple[int, Sequence[int], Sequence[int], Sequence[int]]],
) -> str:
    """A topic's ``/brokers/topics/<t>`` payload (version 3) from (partition, replicas, adding,
    removing) in partition order: ``topic_znode_json``'s JSON, byte for byte, with no job."""
    entries = list(partitions)

    def mapping(lists: Iterable[tuple[int, Sequence[int]]]) -> str:
        return ",".join(f'"{p}":[{",".join(map(str, rs))}]' for p, rs in lists)

    replicas = mapping((p, r) for p, r, _, _ in entries)
    adding = mapping((p, a) for p, _, a, _ in entries if a)
    removing = mapping((p, m) for p, _, _, m in entries if m)
    return (
        f'{{"version":3,"partitions":{{{replicas}}},"adding_replicas":{{{adding}}},'
        f'"removing_replicas":{{{removing}}}}}'
    )


def _chunked_multi(client: ZkClient, ops: Iterable[tuple[str, bytes]], max_bytes: int) -> None:
    batch: list[tuple[str, bytes]] = []
    size = 0

    def flush() -> None:
        txn = client.transaction()
        for path, data in batch:
            txn.create(path, data)
        for result in txn.commit():
            if isinstance(result, Exception) and not isinstance(result, NodeExistsError):
                raise result

    for path, data in ops:
        if batch and (len(batch) >= 1000 or size + len(data) > max_bytes):
            flush()
            batch, size = [], 0
        batch.append((path, data))
        size += len(data) + len(path)
    if batch:
        flush()


def bootstrap_cluster(
    client: ZkClient,
    brokers: Mapping[int, BrokerRegistration],
    partitions: DataFrame,
    store: PartitionStateStore,
    max_bytes: int = 512 * 1024,
    rows: Sequence[Mapping[str, Any]] | None = None,
) -> DataFrame | None:
    """Write ``brokers`` and ``partitions`` in Kafka's layout; returns the state rows not
    written. ``rows``: the partitions collected on the driver (a small cluster), written with
    no Spark job (failed state rows are then logged, not returned)."""
    check_partitions(partitions)
    for path in PERSISTENT_PATHS:
        client.ensure_path(path)
    if client.exists(CONTROLLER_EPOCH) is None:
        with contextlib.suppress(NodeExistsError):
            client.create(CONTROLLER_EPOCH, ControllerEpochZNode.encode(0))
    for broker_id, registration in sorted(brokers.items()):
        client.create(
            BrokerIdZNode.path(broker_id), BrokerIdZNode.encode(registration), ephemeral=True
        )
    if rows is not None:
        _bootstrap_rows(client, rows, store, max_bytes)
        return None
    topics = topic_znode_json(partitions).toLocalIterator(True)
    _chunked_multi(client, ((TopicZNode.path(r[0]), r[1].encode()) for r in topics), max_bytes)
    epoch_version = client.exists(CONTROLLER_EPOCH).version  # type: ignore[union-attr]
    with_state = partitions.filter(~F.col(STATE).isin(*_NO_STATE_ZNODE)).select(
        TOPIC, PARTITION, LEADER, LEADER_EPOCH, ISR, CONTROLLER_EPOCH_COL,
        F.lit(NEW_PARTITION_VERSION).alias(ZK_VERSION),
    )  # fmt: skip
    return store.write_states(with_state, epoch_version)


def _bootstrap_rows(
    client: ZkClient, rows: Sequence[Mapping[str, Any]], store: PartitionStateStore, max_bytes: int
) -> None:
    """``bootstrap_cluster``'s topic and state znodes from rows held on the driver."""
    by_topic: dict[str, list[Mapping[str, Any]]] = {}
    for r in sorted(rows, key=lambda r: (r[TOPIC], r[PARTITION])):
        by_topic.setdefault(r[TOPIC], []).append(r)
    payloads = (
        (
            TopicZNode.path(topic),
            topic_znode_payload(
                (r[PARTITION], r[REPLICAS], r[ADDING_REPLICAS], r[REMOVING_REPLICAS]) for r in rs
            ).encode(),
        )
        for topic, rs in sorted(by_topic.items())
    )
    _chunked_multi(client, payloads, max_bytes)
    epoch_version = client.exists(CONTROLLER_EPOCH).version  # type: ignore[union-attr]
    states = [
        (r[TOPIC], r[PARTITION], r[LEADER], r[LEADER_EPOCH], list(r[ISR]),
         r[CONTROLLER_EPOCH_COL], NEW_PARTITION_VERSION, 1)
        for r in rows
        if r[STATE] not in _NO_STATE_ZNODE
    ]  # fmt: skip
    failed = store.write_state_rows(states, epoch_version)
    if failed:
        log.warning("%d partition-state znodes were not written: %s", len(failed), failed[:5])


def _assignments(client: ZkClient, spark: SparkSession) -> Assignments:
    """Every partition's assignment from the topic znodes; partitions per topic; the width."""
    topics = sorted(client.get_children(BROKER_TOPICS)) if client.exists(BROKER_TOPICS) else []
    payloads: list[tuple[str, bytes | None]] = []
    for path, result in client.get_many([TopicZNode.path(t) for t in topics]):
        if isinstance(result, NoNodeError):
            continue  # deleted meanwhile
        if isinstance(result, Exception):
            raise result
        payloads.append((path.rsplit("/", 1)[1], result[0]))
    return topic_assignments(spark, payloads)


@dataclass(frozen=True)
class ClusterRows:
    """``read_cluster``'s partitions of a small cluster, read on the driver: public rows
    (``PARTITIONS_SCHEMA``'s fields), partitions per topic, and the topic ids there are."""

    partitions: list[dict[str, Any]]
    topic_partitions: dict[str, int]
    topic_ids: dict[str, str]


def read_cluster_rows(client: ZkClient, limit: int) -> ClusterRows | None:
    """``read_cluster``'s partitions when there are at most ``limit`` of them, read and decoded
    on the driver with no Spark job; None (having decoded at most ``limit`` partitions' worth
    of topic znodes) when there are more."""
    topics = sorted(client.get_children(BROKER_TOPICS)) if client.exists(BROKER_TOPICS) else []
    assignments: dict[str, TopicAssignment] = {}
    total = 0
    for path, result in client.get_many([TopicZNode.path(t) for t in topics]):
        if isinstance(result, NoNodeError):
            continue  # deleted meanwhile
        if isinstance(result, Exception):
            raise result
        assignment = TopicZNode.decode(result[0], path)
        total += len(assignment.partitions)
        if total > limit:
            return None
        assignments[path.rsplit("/", 1)[1]] = assignment
    live = {int(b) for b in client.get_children(BROKER_IDS)} if client.exists(BROKER_IDS) else set()
    keys = [(t, int(p)) for t, a in assignments.items() for p in sorted(a.partitions, key=int)]
    paths = [PartitionStateZNode.path(t, p) for t, p in keys]
    rows = []
    for (topic, partition), (path, result) in zip(keys, client.get_many(paths), strict=True):
        a, name = assignments[topic], str(partition)
        row = {
            TOPIC: topic,
            PARTITION: partition,
            REPLICAS: list(a.partitions[name]),
            ADDING_REPLICAS: list((a.adding_replicas or {}).get(name, [])),
            REMOVING_REPLICAS: list((a.removing_replicas or {}).get(name, [])),
        }
        if isinstance(result, NoNodeError):
            row |= {
                ISR: [], LEADER: NO_LEADER, LEADER_EPOCH: NO_EPOCH,
                ZK_VERSION: NEW_PARTITION_VERSION, CONTROLLER_EPOCH_COL: NO_EPOCH,
                STATE: "NewPartition",
            }  # fmt: skip
        elif isinstance(result, Exception):
            raise result
        else:
            state = PartitionStateZNode.decode(result[0], path)
            row |= {
                ISR: list(state.isr), LEADER: state.leader, LEADER_EPOCH: state.leader_epoch,
                ZK_VERSION: result[1].version, CONTROLLER_EPOCH_COL: state.controller_epoch,
                STATE: "OnlinePartition" if state.leader in live else "OfflinePartition",
            }  # fmt: skip
        rows.append(row)
    counts = {t: len(a.partitions) for t, a in assignments.items()}
    ids = {t: a.topic_id for t, a in assignments.items() if a.topic_id is not None}
    return ClusterRows(rows, counts, ids)


def read_cluster(
    client: ZkClient, spark: SparkSession, store: PartitionStateStore
) -> ClusterSnapshot:
    """Read brokers, controller and every partition of a Kafka-layout tree (read-only)."""
    broker_ids = (
        sorted(int(b) for b in client.get_children(BROKER_IDS)) if client.exists(BROKER_IDS) else []
    )
    brokers = {
        int(path.rsplit("/", 1)[1]): BrokerIdZNode.decode(result[0], path)
        for path, result in client.get_many([BrokerIdZNode.path(b) for b in broker_ids])
        if not isinstance(result, Exception)
    }
    controller_id, epoch, epoch_version = -1, 0, -1
    if (stat := client.exists(CONTROLLER_EPOCH)) is not None:
        data, stat = client.get(CONTROLLER_EPOCH)
        epoch, epoch_version = ControllerEpochZNode.decode(data), stat.version
    with contextlib.suppress(NoNodeError):
        controller_id = ControllerZNode.decode(client.get(ControllerZNode.path())[0]).brokerid
    states = store.read_states(spark)
    live = F.col(LEADER).isin(*brokers) if brokers else F.lit(False)
    assignments = _assignments(client, spark)
    partitions = assignments.rows.join(states, [TOPIC, PARTITION], "left").select(
        TOPIC,
        PARTITION,
        REPLICAS,
        ADDING_REPLICAS,
        REMOVING_REPLICAS,
        F.coalesce(ISR, F.array().cast("array<int>")).alias(ISR),
        F.coalesce(LEADER, F.lit(NO_LEADER)).alias(LEADER),
        F.coalesce(LEADER_EPOCH, F.lit(NO_EPOCH)).alias(LEADER_EPOCH),
        F.coalesce(ZK_VERSION, F.lit(NEW_PARTITION_VERSION)).alias(ZK_VERSION),
        F.coalesce(CONTROLLER_EPOCH_COL, F.lit(NO_EPOCH)).alias(CONTROLLER_EPOCH_COL),
        F.when(F.col(ZK_VERSION).isNull(), "NewPartition")
        .when(live, "OnlinePartition")
        .otherwise("OfflinePartition")
        .alias(STATE),
    )
    return ClusterSnapshot(brokers, partitions, controller_id, epoch, epoch_version, assignments)
