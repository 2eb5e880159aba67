"""``--zk HOST:PORT[/chroot]``: a snapshot of a live ZooKeeper-mode Kafka cluster, read-only.

Reads what Kafka's controller reads at startup (spec §2.1), through ``ReadOnlyZkClient``:
``/brokers/ids/*`` (live brokers and their racks), ``/brokers/topics/*`` (assignments and
in-flight reassignments), ``/brokers/topics/<t>/partitions/<p>/state`` (leader, ISR, epochs; the
znode's data version is ``zk_version``) and ``/config/topics/<t>`` (topic overrides) and ``/admin/delete_topics`` (the topics queued for
deletion, as the controller's ``initializeControllerContext`` reads them). Payloads are
decoded by the controller's own strict models (``controller.zk.paths``); one that breaks Kafka's
schema raises ``WhatIfInputError`` naming the znode and field.

States follow the controller's startup rule (``initializePartitionState``): a partition with a
live leader is ``OnlinePartition``, one with a state znode but no live leader
``OfflinePartition`` (kept as written for a topic being deleted), and one without a state znode
``NewPartition``. Gets are pipelined
(``get_async``, a window in flight), so a large cluster costs round trips per window, not per
znode.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from kazoo.exceptions import KazooException, NoAuthError
from kazoo.handlers.threading import KazooTimeoutError
from pyspark.sql import DataFrame, SparkSession

from controller.zk.errors import MalformedZnodeError
from controller.zk.paths import (
    BROKER_IDS,
    BROKER_TOPICS,
    DELETE_TOPICS,
    BrokerIdZNode,
    PartitionStateZNode,
    TopicConfigZNode,
    TopicZNode,
)
from statemachines import schemas as s
from whatif.cluster import (
    NEW,
    OFFLINE,
    ONLINE,
    BrokerDefaults,
    TopicConfigs,
    WhatIfInputError,
    empty_columns,
    partitions_frame,
    replica_problem,
    topic_configs,
)
from whatif.readonly_zk import ReadOnlyZkClient, ZnodeReadError

_FIX_SCHEMA = "the znode does not hold what Kafka writes there; repair it or snapshot another way"


@dataclass(frozen=True)
class ZkOptions:
    """How to reach the ensemble: kazoo's timeout, digest credentials and TLS settings."""

    timeout: float = 10.0
    auth_data: tuple[tuple[str, str], ...] = ()
    use_ssl: bool = False
    certfile: str | None = None
    keyfile: str | None = None
    keyfile_password: str | None = None
    ca: str | None = None
    verify_certs: bool = True


@dataclass(frozen=True)
class ZkSnapshot:
    partitions: DataFrame
    brokers: tuple[int, ...]
    racks: dict[int, str | None]
    topic_configs: dict[str, TopicConfigs] = field(default_factory=dict)
    deleting_topics: frozenset[str] = frozenset()


def _read_failed(hosts: str, exc: ZnodeReadError) -> WhatIfInputError:
    if isinstance(exc.cause, NoAuthError):
        return WhatIfInputError(
            f"--zk {hosts}: znode {exc.path}: no permission to read it (NoAuth) — pass the "
            "digest credentials Kafka's brokers use (zookeeper.set.acl)"
        )
    return WhatIfInputError(
        f"--zk {hosts}: znode {exc.path}: the read failed ({type(exc.cause).__name__}) — "
        "check that the ensemble is up and reachable"
    )


def _children(client: ReadOnlyZkClient, path: str) -> list[str]:
    for _, children in client.children_many([path]):
        return children or []
    return []


def _decode_each(
    client: ReadOnlyZkClient, paths: Iterable[str]
) -> Iterator[tuple[str, bytes | None, int]]:
    for path, data, stat in client.get_many(paths):
        yield path, data, -1 if stat is None else stat.version


def read_zk(
    spark: SparkSession,
    hosts: str,
    defaults: BrokerDefaults | None = None,
    options: ZkOptions | None = None,
) -> ZkSnapshot:
    """The cluster under ``hosts`` (kazoo's connect string, chroot included)."""
    cols, live, racks, configs, deleting = read_zk_columns(hosts, defaults, options)
    return ZkSnapshot(partitions_frame(spark, cols), live, racks, configs, deleting)


ZkColumns = tuple[
    dict[str, list[Any]],
    tuple[int, ...],
    dict[int, str | None],
    dict[str, TopicConfigs],
    frozenset[str],
]


def read_zk_columns(
    hosts: str, defaults: BrokerDefaults | None = None, options: ZkOptions | None = None
) -> ZkColumns:
    """``read_zk`` before Spark: the partitions as column lists, the live brokers, their racks,
    the topics' configs and the topics queued for deletion, every znode read and validated."""
    options = options or ZkOptions()
    client = ReadOnlyZkClient(
        hosts,
        timeout=options.timeout,
        auth_data=options.auth_data,
        use_ssl=options.use_ssl,
        certfile=options.certfile,
        keyfile=options.keyfile,
        keyfile_password=options.keyfile_password,
        ca=options.ca,
        verify_certs=options.verify_certs,
    )
    try:
        client.start(timeout=options.timeout)
    except (KazooTimeoutError, KazooException) as exc:
        client.close()
        raise WhatIfInputError(
            f"--zk {hosts}: cannot connect within {options.timeout:g}s "
            f"({type(exc).__name__}) — check host, port, TLS settings and that ZooKeeper is up"
        ) from None
    try:
        return _snapshot(client, hosts, defaults or BrokerDefaults())
    except ZnodeReadError as exc:
        raise _read_failed(hosts, exc) from None
    except (KazooTimeoutError, KazooException) as exc:  # a synchronous read failed
        raise WhatIfInputError(
            f"--zk {hosts}: reading the cluster failed ({type(exc).__name__}) — check that the "
            "ensemble is up and that the credentials may read Kafka's znodes"
        ) from None
    except MalformedZnodeError as exc:
        raise WhatIfInputError(
            f"--zk {hosts}: znode {exc.path}: {exc.problem} — {_FIX_SCHEMA}"
        ) from None
    finally:
        client.close()


def _snapshot(client: ReadOnlyZkClient, hosts: str, defaults: BrokerDefaults) -> ZkColumns:
    if client.exists(BROKER_TOPICS) is None:
        raise WhatIfInputError(
            f"--zk {hosts}: there is no {BROKER_TOPICS} — not a ZooKeeper-mode Kafka cluster "
            "here; add the chroot Kafka's zookeeper.connect ends in (e.g. host:2181/kafka)"
        )
    racks: dict[int, str | None] = {}
    ids = _children(client, BROKER_IDS) if client.exists(BROKER_IDS) else []
    for name in ids:
        if not name.isdigit():
            raise WhatIfInputError(
                f"--zk {hosts}: znode {BROKER_IDS}/{name}: {name!r} is not a broker id — "
                f"{_FIX_SCHEMA}"
            )
    for path, data, version in _decode_each(client, [BrokerIdZNode.path(int(n)) for n in ids]):
        if version >= 0:  # else the broker went away between the listing and the read
            racks[int(path.rsplit("/", 1)[1])] = BrokerIdZNode.decode(data, path).rack
    live = set(racks)
    topics = sorted(_children(client, BROKER_TOPICS))
    assignments = {}
    for path, data, version in _decode_each(client, [TopicZNode.path(t) for t in topics]):
        if version >= 0:
            assignments[path.rsplit("/", 1)[1]] = (path, TopicZNode.decode(data, path))
    keys = [
        (topic, int(p))
        for topic, (_, a) in assignments.items()
        for p in sorted(a.partitions, key=int)
    ]
    cols = empty_columns()
    state_paths = (PartitionStateZNode.path(t, p) for t, p in keys)
    for (topic, partition), (path, data, version) in zip(
        keys, _decode_each(client, state_paths), strict=True
    ):
        topic_path, assignment = assignments[topic]
        key = str(partition)
        replicas = assignment.partitions[key]
        adding = (assignment.adding_replicas or {}).get(key, [])
        removing = (assignment.removing_replicas or {}).get(key, [])
        if version < 0:
            leader, epoch, isr, cepoch, state, version = s.NO_LEADER, 0, [], 0, NEW, 0
        else:
            st = PartitionStateZNode.decode(data, path)
            leader, epoch, isr, cepoch = st.leader, st.leader_epoch, st.isr, st.controller_epoch
            state = ONLINE if leader in live else OFFLINE
        problem = replica_problem(replicas, isr, leader, adding, removing)
        if problem is not None:
            raise WhatIfInputError(
                f"--zk {hosts}: znodes {topic_path} and {path}: partition {topic}-{partition}: "
                f"{problem}"
            )
        for column, value in (
            (s.TOPIC, topic), (s.PARTITION, partition), (s.REPLICAS, replicas),
            (s.ADDING_REPLICAS, adding), (s.REMOVING_REPLICAS, removing), (s.ISR, isr),
            (s.LEADER, leader), (s.LEADER_EPOCH, epoch), (s.ZK_VERSION, version),
            (s.CONTROLLER_EPOCH, cepoch), (s.STATE, state),
        ):  # fmt: skip
            cols[column].append(value)
    configs: dict[str, TopicConfigs] = {}
    for topic, (path, data, version) in zip(
        assignments,
        _decode_each(client, (TopicConfigZNode.path(t) for t in assignments)),
        strict=True,
    ):
        overrides = TopicConfigZNode.decode(data, path).config if version >= 0 else {}
        configs[topic] = topic_configs(defaults, overrides, f"--zk {hosts}: znode {path}")
    # A deletion request for a topic that no longer exists is dropped, as the controller does.
    marked = _children(client, DELETE_TOPICS) if client.exists(DELETE_TOPICS) else []
    deleting = frozenset(t for t in marked if t in assignments)
    return cols, tuple(sorted(live)), racks, configs, deleting
