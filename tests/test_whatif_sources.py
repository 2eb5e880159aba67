"""The snapshot sources of ``kce whatif``: describe text, rack map, sizes, configs, a scenario, a
``kce run`` output and a live ZooKeeper read through the read-only client."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.security import make_digest_acl
from pyspark.sql import SparkSession

from spark_app.runner import run
from spark_app.scenario import load_scenario
from statemachines import schemas as s
from tests.zk_server import ZooKeeperServer
from whatif.cluster import BrokerDefaults, TopicConfigs, broker_defaults
from whatif.describe import parse_describe
from whatif.readonly_zk import ReadOnlyViolation, ReadOnlyZkClient
from whatif.sources import (
    WhatIfCluster,
    WhatIfInputError,
    ZkOptions,
    load_cluster,
    load_rack_map,
    load_sizes,
)

DATA = Path(__file__).resolve().parent / "data" / "whatif"


def rows(cluster: WhatIfCluster) -> list[tuple[Any, ...]]:
    # Nullability is not part of the schema's contract (see statemachines.schemas).
    assert s.schema_problems(cluster.partitions.schema, s.PARTITIONS_SCHEMA) == []
    assert cluster.partitions.columns == s.PARTITIONS_SCHEMA.fieldNames()
    return [tuple(r) for r in cluster.partitions.orderBy(s.TOPIC, s.PARTITION).collect()]


def write(tmp_path: Path, text: str, name: str = "describe.txt") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# -- describe ------------------------------------------------------------------------------------


def test_describe_kafka_2_8(spark: SparkSession) -> None:
    cluster = load_cluster(spark, describe=DATA / "describe-2.8.txt")
    on, off = "OnlinePartition", "OfflinePartition"
    assert rows(cluster) == [
        ("audit", 0, [3], [], [], [3], 3, 0, 0, 0, on),
        ("orders", 0, [1, 2, 3], [], [], [1, 2, 3], 1, 0, 0, 0, on),
        ("orders", 1, [2, 3, 1], [], [], [2, 3], 2, 0, 0, 0, on),
        ("orders", 2, [3, 1, 2], [], [], [], -1, 0, 0, 0, off),
        ("payments", 0, [4, 1, 2, 3], [4], [3], [1, 2, 3, 4], 4, 0, 0, 0, on),
        ("payments", 1, [2, 4, 1], [], [], [2, 4, 1], 2, 0, 0, 0, on),
    ]
    assert cluster.brokers == (1, 2, 3, 4)
    assert cluster.racks == {1: None, 2: None, 3: None, 4: None}
    assert cluster.topic_configs["orders"] == TopicConfigs(
        min_insync_replicas=2,
        unclean_leader_election_enable=True,
        other={"segment.bytes": "1073741824"},
    )
    # Kafka joins configs with unescaped commas: compact,delete is one value.
    assert cluster.topic_configs["payments"].other == {
        "cleanup.policy": "compact,delete",
        "segment.bytes": "1073741824",
    }
    assert cluster.topic_configs["audit"] == TopicConfigs()
    assert cluster.sizes is None


def test_describe_older_format_without_spaces_and_minus_one_leader(spark: SparkSession) -> None:
    cluster = load_cluster(spark, describe=DATA / "describe-2.1.txt")
    assert rows(cluster) == [
        ("logs", 0, [5, 6], [], [], [], -1, 0, 0, 0, "OfflinePartition"),
        ("logs", 1, [6, 5], [], [], [6, 5], 6, 0, 0, 0, "OnlinePartition"),
        ("metrics", 0, [5, 6], [], [], [5], 5, 0, 0, 0, "OnlinePartition"),
    ]
    assert cluster.brokers == (5, 6)
    assert cluster.topic_configs["logs"].unclean_leader_election_enable is False


def test_describe_fields_separated_by_spaces(spark: SparkSession) -> None:
    cluster = load_cluster(spark, describe=DATA / "describe-spaces.txt")
    assert rows(cluster) == [
        ("clicks", 0, [7, 8], [], [], [7, 8], 7, 0, 0, 0, "OnlinePartition"),
        ("clicks", 1, [8, 7], [], [], [8], 8, 0, 0, 0, "OnlinePartition"),
    ]


def test_filtered_describe_output_has_no_headers(tmp_path: Path) -> None:
    # --under-replicated-partitions prints partition lines only.
    path = write(tmp_path, "\tTopic: t\tPartition: 4\tLeader: 1\tReplicas: 1,2\tIsr: 1\n")
    snap = parse_describe(path)
    assert snap.columns[s.PARTITION] == [4] and snap.configs == {}


HEADER = "Topic: t\tPartitionCount: 2\tReplicationFactor: 2\tConfigs:\n"
P0 = "\tTopic: t\tPartition: 0\tLeader: 1\tReplicas: 1,2\tIsr: 1,2\n"
P1 = "\tTopic: t\tPartition: 1\tLeader: 2\tReplicas: 2,1\tIsr: 2,1\n"


@pytest.mark.parametrize(
    ("text", "line", "expected"),
    [
        (HEADER + P0 + "Error while executing topic command\n" + P1, 3, "not a kafka-topics.sh"),
        (HEADER + P0 + P0.replace("Leader: 1", "Leader: 2"), 3, "listed twice (first on line 2)"),
        (
            HEADER + P0 + P1 + P1.replace("Partition: 1", "Partition: 2"),
            4,
            "outside PartitionCount",
        ),
        (HEADER + P0, 1, "no line for partition 1"),
        (HEADER + P0 + P1.replace("Leader: 2", "Leader: 3"), 3, "leader 3 is not in Replicas 2,1"),
        (HEADER + P0 + P1.replace("Isr: 2,1", "Isr: 2,5"), 3, "Isr broker 5 is not in Replicas"),
        (HEADER + P0 + P1.replace("Replicas: 2,1", "Replicas: 2,2"), 3, "names broker 2 twice"),
        (HEADER + P0 + P1.replace("Replicas: 2,1", "Replicas: 2,x"), 3, "not a comma-separated"),
        (HEADER + P0 + P1.replace("Leader: 2", "Leader: two"), 3, "is not a broker id"),
        (HEADER + P0 + P1.replace("Partition: 1", "Partition: one"), 3, "'one' is not an integer"),
        (HEADER + P0.replace("\tIsr: 1,2", "") + P1, 2, "Isr: missing"),
        (HEADER + P0 + P1 + HEADER, 4, "described twice (first on line 1)"),
        (
            HEADER.replace("Configs:", "Configs: min.insync.replicas=zero") + P0 + P1,
            1,
            "min.insync.replicas=zero",
        ),
        (HEADER.replace("Configs:", "Configs: min.insync.replicas=0") + P0 + P1, 1, "greater than"),
        (
            HEADER + P0 + P1.replace("Isr: 2,1", "Isr: 2,1\tAdding Replicas: 3"),
            3,
            "Adding Replicas broker 3 is not in Replicas",
        ),
    ],
)
def test_bad_describe_lines_name_file_and_line(
    spark: SparkSession, tmp_path: Path, text: str, line: int, expected: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(WhatIfInputError) as err:
        load_cluster(spark, describe=path)
    message = str(err.value)
    assert message.startswith(f"{path}:{line}: "), message
    assert expected in message and " — " in message


@pytest.mark.parametrize(
    ("text", "expected"),
    [("", "no partition lines"), (HEADER, "no partition lines"), (b"\xff\xfe", "not UTF-8")],
)
def test_describe_without_partitions_or_text(
    tmp_path: Path, text: str | bytes, expected: str
) -> None:
    path = tmp_path / "describe.txt"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(WhatIfInputError, match=expected):
        parse_describe(path)
    with pytest.raises(WhatIfInputError, match="no such file"):
        parse_describe(tmp_path / "absent.txt")


# -- rack map, sizes, configs --------------------------------------------------------------------


def test_rack_map_sets_racks_and_adds_idle_brokers(spark: SparkSession) -> None:
    cluster = load_cluster(spark, describe=DATA / "describe-2.8.txt", rack_map=DATA / "racks.csv")
    assert load_rack_map(DATA / "racks.csv") == {
        1: "us-east-1a",
        2: "us-east-1b",
        3: None,
        9: "us-east-1c",
    }
    assert cluster.brokers == (1, 2, 3, 4, 9)  # 9 holds no replica but is in the cluster
    assert cluster.racks == {1: "us-east-1a", 2: "us-east-1b", 3: None, 4: None, 9: "us-east-1c"}


def test_rack_map_saved_by_a_spreadsheet(tmp_path: Path) -> None:
    path = tmp_path / "racks.csv"
    path.write_bytes(b"\xef\xbb\xbfid,rack\r\n1,a\r\n2,\r\n")
    assert load_rack_map(path) == {1: "a", 2: None}


@pytest.mark.parametrize(
    ("text", "line", "expected"),
    [
        ("broker,rack\n1,a\n", 1, "the header must be id,rack"),
        ("id,rack\n1,a\nb,c\n", 3, "broker id 'b' is not an integer"),
        ("id,rack\n1,a\n1,b\n", 3, "listed twice (first on line 2)"),
        ("id,rack\n1,a,extra\n", 2, "3 fields, expected 2"),
        ("id,rack\n-1,a\n", 2, "'-1' is not an integer >= 0"),
    ],
)
def test_bad_rack_map_rows(tmp_path: Path, text: str, line: int, expected: str) -> None:
    path = write(tmp_path, text, "racks.csv")
    with pytest.raises(WhatIfInputError) as err:
        load_rack_map(path)
    assert str(err.value).startswith(f"{path}:{line}: ") and expected in str(err.value)


def test_sizes(spark: SparkSession) -> None:
    cluster = load_cluster(spark, describe=DATA / "describe-2.8.txt", sizes=DATA / "sizes.csv")
    assert cluster.sizes is not None
    assert cluster.sizes.schema.simpleString() == "struct<topic:string,partition:int,bytes:bigint>"
    assert sorted(tuple(r) for r in cluster.sizes.collect()) == [
        ("orders", 0, 1073741824),
        ("orders", 1, 5000000000),
        ("payments", 0, 0),
    ]


@pytest.mark.parametrize(
    ("text", "line", "expected"),
    [
        ("topic,bytes\n", 1, "the header must be topic,partition,bytes"),
        ("topic,partition,bytes\nt,0,12\nt,0,13\n", 3, "listed twice (first on line 2)"),
        ("topic,partition,bytes\nt,0,1.5GB\n", 2, "bytes '1.5GB' is not an integer"),
        ("topic,partition,bytes\n,0,1\n", 2, "the topic is empty"),
    ],
)
def test_bad_sizes_rows(
    spark: SparkSession, tmp_path: Path, text: str, line: int, expected: str
) -> None:
    path = write(tmp_path, text, "sizes.csv")
    with pytest.raises(WhatIfInputError) as err:
        load_sizes(spark, path)
    assert str(err.value).startswith(f"{path}:{line}: ") and expected in str(err.value)


def test_config_precedence_kafka_default_then_config_then_topic(spark: SparkSession) -> None:
    cluster = load_cluster(
        spark,
        describe=DATA / "describe-2.8.txt",
        config=["min.insync.replicas=3", "unclean.leader.election.enable=TRUE",
                "leader.imbalance.per.broker.percentage=25"],
    )  # fmt: skip
    # orders overrides both keys; audit has no overrides and takes --config's.
    assert cluster.topic_configs["orders"].min_insync_replicas == 2
    assert cluster.topic_configs["audit"].min_insync_replicas == 3
    assert cluster.topic_configs["audit"].unclean_leader_election_enable is True
    assert cluster.broker_defaults == BrokerDefaults(
        min_insync_replicas=3,
        unclean_leader_election_enable=True,
        leader_imbalance_per_broker_percentage=25,
        default_replication_factor=1,
    )
    assert cluster.configs_of("not-in-snapshot").min_insync_replicas == 3
    plain = load_cluster(spark, describe=DATA / "describe-2.8.txt")
    assert plain.topic_configs["audit"] == TopicConfigs(
        min_insync_replicas=1, unclean_leader_election_enable=False
    )
    assert plain.broker_defaults == BrokerDefaults()


@pytest.mark.parametrize(
    ("item", "expected"),
    [
        ("min.insync.replica=2", "unknown config 'min.insync.replica' — did you mean min.insync"),
        ("segment.bytes=1", "unknown config 'segment.bytes'"),
        ("min.insync.replicas", "not KEY=VALUE"),
        ("unclean.leader.election.enable=yes", "'yes' is not a boolean"),
        ("default.replication.factor=0", "greater than or equal to 1"),
    ],
)
def test_bad_config_items(item: str, expected: str) -> None:
    with pytest.raises(WhatIfInputError, match=expected) as err:
        broker_defaults([item])
    assert str(err.value).startswith(f"--config {item}") or "--config" in str(err.value)


def test_one_source_exactly(spark: SparkSession) -> None:
    with pytest.raises(WhatIfInputError, match="pass exactly one of --describe, --zk"):
        load_cluster(spark)
    with pytest.raises(WhatIfInputError, match="--describe and --run given"):
        load_cluster(spark, describe=DATA / "describe-2.8.txt", run=DATA)


# -- scenario and kce run ------------------------------------------------------------------------


def test_scenario_cluster(spark: SparkSession) -> None:
    cluster = load_cluster(spark, scenario=DATA / "scenario.yaml", config=["min.insync.replicas=1"])
    on = "OnlinePartition"
    assert rows(cluster) == [
        ("logs", 0, [3, 1], [], [], [3, 1], 3, 0, 0, 1, on),
        ("orders", 0, [1, 2, 3], [], [], [1, 2, 3], 1, 0, 0, 1, on),
        ("orders", 1, [2, 3, 1], [], [], [3, 1], 3, 4, 5, 2, on),
    ]
    assert cluster.brokers == (1, 2, 3)
    assert cluster.racks == {1: "a", 2: "b", 3: "c"}
    # The scenario says 2; --config overrides the scenario's broker config; orders its own.
    assert cluster.topic_configs["logs"] == TopicConfigs(min_insync_replicas=1)
    assert cluster.topic_configs["orders"].unclean_leader_election_enable is True


def test_bad_scenario_is_an_input_error(spark: SparkSession, tmp_path: Path) -> None:
    path = write(tmp_path, "name: x\ncluster: {brokers: []}\nuntil: nope\n", "bad.yaml")
    with pytest.raises(WhatIfInputError, match=str(path)):
        load_cluster(spark, scenario=path)


def test_run_output(spark: SparkSession, tmp_path: Path) -> None:
    scenario = load_scenario(DATA / "scenario.yaml").model_copy(update={"name": "run-source"})
    out = tmp_path / "out"
    run(spark, scenario, out)
    final = json.loads((out / "final_state.json").read_text())
    cluster = load_cluster(spark, run=out, rack_map=DATA / "racks.csv")
    expected = [
        (p["topic"], p["partition"], p["replicas"], p["adding_replicas"], p["removing_replicas"],
         p["isr"], p["leader"], p["leader_epoch"], p["zk_version"], p["controller_epoch"],
         p["state"])
        for p in final["partitions"]
    ]  # fmt: skip
    assert rows(cluster) == expected and len(expected) == 3
    assert cluster.brokers == (1, 2, 3)
    # The rack map names 9, which is not live in the run: it gets a rack but stays out.
    assert cluster.racks == {1: "us-east-1a", 2: "us-east-1b", 3: None, 9: "us-east-1c"}
    assert set(cluster.topic_configs) == {"logs", "orders"}
    # Without final_state.json, the live brokers are the ones holding replicas.
    (out / "final_state.json").unlink()
    assert load_cluster(spark, run=out).brokers == (1, 2, 3)


def test_run_output_missing_or_corrupt(spark: SparkSession, tmp_path: Path) -> None:
    with pytest.raises(WhatIfInputError, match="no such directory"):
        load_cluster(spark, run=tmp_path / "absent")
    with pytest.raises(WhatIfInputError, match=r"partitions\.parquet: missing"):
        load_cluster(spark, run=tmp_path)
    table = tmp_path / "partitions.parquet"
    table.mkdir()
    (table / "part-00000.parquet").write_bytes(b"PAR1 this is not parquet PAR1")
    with pytest.raises(WhatIfInputError) as err:
        load_cluster(spark, run=tmp_path)
    assert f"{table}: not a readable Parquet table" in str(err.value)
    other = tmp_path / "other"
    spark.range(3).write.parquet(str(other / "partitions.parquet"))
    with pytest.raises(WhatIfInputError, match=r"not a partitions table .*missing column 'topic'"):
        load_cluster(spark, run=other)


# -- ZooKeeper -----------------------------------------------------------------------------------

DIGEST = ("kafka", "secret")


@pytest.fixture(scope="module")
def zk_server() -> Iterator[ZooKeeperServer]:
    server = ZooKeeperServer().start()
    yield server
    server.stop()


def _broker(rack: str | None) -> bytes:
    payload: dict[str, Any] = {
        "version": 5, "host": "h", "port": 9092, "jmx_port": -1, "timestamp": "1",
        "endpoints": ["PLAINTEXT://h:9092"], "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
    }  # fmt: skip
    if rack is not None:
        payload["rack"] = rack
    return json.dumps(payload).encode()


def _state(leader: int, epoch: int, isr: list[int], controller_epoch: int = 3) -> bytes:
    return json.dumps(
        {"controller_epoch": controller_epoch, "leader": leader, "version": 1,
         "leader_epoch": epoch, "isr": isr}
    ).encode()  # fmt: skip


def _kafka_tree(server: ZooKeeperServer) -> str:
    """A Kafka-shaped tree under a fresh chroot; ``payments`` readable only with the digest."""
    chroot = f"/kafka-{uuid.uuid4().hex[:8]}"
    kz = KazooClient(server.hosts, auth_data=[("digest", ":".join(DIGEST))])
    kz.start()
    try:
        kz.ensure_path(chroot)
        c = chroot
        kz.create(f"{c}/brokers/ids/1", _broker("r1"), makepath=True)
        kz.create(f"{c}/brokers/ids/2", _broker("r2"))
        kz.create(f"{c}/brokers/ids/3", _broker(None))
        kz.create(
            f"{c}/brokers/topics/orders",
            b'{"version":2,"partitions":{"0":[1,2,3],"1":[2,3,4],"2":[3,1,2]},'
            b'"adding_replicas":{"1":[4]},"removing_replicas":{"1":[3]}}',
            makepath=True,
        )
        kz.create(
            f"{c}/brokers/topics/orders/partitions/0/state", _state(1, 5, [1, 2, 3]), makepath=True
        )
        kz.set(f"{c}/brokers/topics/orders/partitions/0/state", _state(1, 6, [1, 2]))
        kz.create(f"{c}/brokers/topics/orders/partitions/1/state", _state(4, 2, [4]), makepath=True)
        kz.ensure_path(f"{c}/brokers/topics/orders/partitions/2")  # created, no state yet
        kz.create(
            f"{c}/config/topics/orders",
            b'{"version":1,"config":{"min.insync.replicas":"2","retention.ms":"1000"}}',
            makepath=True,
        )
        # A topic the controller is deleting: leader and epoch are -2 (LeaderAndIsr.duringDelete).
        kz.create(f"{c}/brokers/topics/doomed", b'{"version":1,"partitions":{"0":[1]}}')
        kz.create(
            f"{c}/brokers/topics/doomed/partitions/0/state", _state(-2, -2, [1]), makepath=True
        )
        kz.create(f"{c}/admin/delete_topics/doomed", makepath=True)
        kz.create(f"{c}/admin/delete_topics/gone")  # no such topic: the controller drops it
        secret = [make_digest_acl(*DIGEST, all=True)]
        kz.create(
            f"{c}/brokers/topics/payments", b'{"version":1,"partitions":{"0":[2,1]}}', acl=secret
        )
        kz.create(f"{c}/brokers/topics/payments/partitions", acl=secret)
        kz.create(f"{c}/brokers/topics/payments/partitions/0", acl=secret)
        kz.create(
            f"{c}/brokers/topics/payments/partitions/0/state", _state(2, 1, [2, 1]), acl=secret
        )
        kz.create(
            f"{c}/config/topics/payments",
            b'{"version":1,"config":{"unclean.leader.election.enable":"true"}}',
            acl=secret,
        )
    finally:
        kz.stop()
        kz.close()
    return chroot


def _tree(server: ZooKeeperServer, root: str) -> dict[str, tuple[bytes, Any, Any]]:
    """Every znode under ``root``: data, full stat and ACLs."""
    kz = KazooClient(server.hosts, auth_data=[("digest", ":".join(DIGEST))])
    kz.start()
    out: dict[str, tuple[bytes, Any, Any]] = {}
    try:
        todo = [root]
        while todo:
            path = todo.pop()
            data, stat = kz.get(path)
            out[path] = (data, tuple(stat), kz.get_acls(path)[0])
            todo += [f"{path}/{c}" for c in kz.get_children(path)]
    finally:
        kz.stop()
        kz.close()
    return out


MUTATIONS: list[tuple[str, tuple[Any, ...]]] = [
    ("create", ("/x", b"")), ("create_async", ("/x", b"")), ("set", ("/brokers", b"")),
    ("set_async", ("/brokers", b"")), ("delete", ("/brokers",)), ("delete_async", ("/brokers",)),
    ("ensure_path", ("/x",)), ("ensure_path_async", ("/x",)), ("set_acls", ("/brokers", [])),
    ("set_acls_async", ("/brokers", [])), ("transaction", ()), ("reconfig", ("", "", "")),
    ("reconfig_async", ("", "", "")), ("Lock", ("/x",)), ("Counter", ("/x",)), ("add_auth", ("digest", "a:b")),
]  # fmt: skip


@pytest.mark.zk
def test_zk_snapshot_is_read_only_and_exact(
    spark: SparkSession, zk_server: ZooKeeperServer
) -> None:
    chroot = _kafka_tree(zk_server)
    before = _tree(zk_server, chroot)
    hosts = zk_server.hosts + chroot
    options = ZkOptions(auth_data=(("digest", ":".join(DIGEST)),))
    cluster = load_cluster(spark, zk=hosts, zk_options=options, config=["min.insync.replicas=3"])
    on, off = "OnlinePartition", "OfflinePartition"
    assert rows(cluster) == [
        ("doomed", 0, [1], [], [], [1], -2, -2, 0, 3, off),
        ("orders", 0, [1, 2, 3], [], [], [1, 2], 1, 6, 1, 3, on),
        ("orders", 1, [2, 3, 4], [4], [3], [4], 4, 2, 0, 3, off),  # 4 is not registered
        ("orders", 2, [3, 1, 2], [], [], [], -1, 0, 0, 0, "NewPartition"),
        ("payments", 0, [2, 1], [], [], [2, 1], 2, 1, 0, 3, on),
    ]
    assert cluster.brokers == (1, 2, 3)
    assert cluster.racks == {1: "r1", 2: "r2", 3: None}
    # /admin/delete_topics: the topics queued for deletion (KafkaController's
    # fetchTopicDeletionsInProgress keeps those that still exist).
    assert cluster.deleting_topics == frozenset({"doomed"})
    assert cluster.topic_configs["orders"] == TopicConfigs(
        min_insync_replicas=2, other={"retention.ms": "1000"}
    )
    assert cluster.topic_configs["payments"] == TopicConfigs(
        min_insync_replicas=3, unclean_leader_election_enable=True
    )

    with ReadOnlyZkClient(hosts, auth_data=options.auth_data) as client:
        assert client.get_children("/brokers/ids") == sorted(client.get_children("/brokers/ids"))
        assert client.exists("/brokers/topics/orders") is not None
        for name, args in MUTATIONS:
            with pytest.raises(ReadOnlyViolation, match=name):
                getattr(client, name)(*args)
        # The held client's request queue refuses writes too.
        held = client._ReadOnlyZkClient__kazoo  # type: ignore[attr-defined]
        with pytest.raises(ReadOnlyViolation, match="Create"):
            held.create("/x", b"")
        with pytest.raises(ReadOnlyViolation, match="SetData"):
            held.set("/brokers", b"changed")
        with pytest.raises(ReadOnlyViolation, match="Transaction"):
            t = held.transaction()
            t.delete("/brokers/ids/1")
            t.commit()
        with pytest.raises(ReadOnlyViolation):
            client.no_such_method  # noqa: B018
        with pytest.raises(AttributeError):
            client.__deepcopy__  # noqa: B018
    assert _tree(zk_server, chroot) == before


@pytest.mark.zk
def test_zk_acl_protected_subtree_needs_the_digest(
    spark: SparkSession, zk_server: ZooKeeperServer
) -> None:
    chroot = _kafka_tree(zk_server)
    with pytest.raises(WhatIfInputError) as err:
        load_cluster(spark, zk=zk_server.hosts + chroot)
    assert "znode /brokers/topics/payments: no permission to read it (NoAuth)" in str(err.value)
    assert "digest credentials" in str(err.value)


@pytest.mark.zk
@pytest.mark.parametrize(
    ("path", "payload", "expected"),
    [
        ("/brokers/topics/t", b'{"version":2,"partitions":{"0":"1,2"}}', "partitions.0: Input should be a valid array"),
        ("/brokers/topics/t/partitions/0/state", b'{"version":1,"leader":1,"isr":[1]}', "controller_epoch: Field required"),
        ("/brokers/topics/t/partitions/0/state", b"not json", "Invalid JSON"),
        ("/brokers/ids/1", b'{"version":2,"rack":"r","timestamp":"1","endpoints":[]}', "rack needs version >= 3"),
        ("/config/topics/t", b'{"version":1,"config":{"min.insync.replicas":"many"}}', "min.insync.replicas=many"),
        ("/brokers/topics/t/partitions/0/state", _state(1, 1, [1, 9]), "Isr broker 9 is not in Replicas"),
    ],
)  # fmt: skip
def test_zk_payloads_that_break_kafka_schema(
    spark: SparkSession, zk_server: ZooKeeperServer, path: str, payload: bytes, expected: str
) -> None:
    chroot = f"/bad-{uuid.uuid4().hex[:8]}"
    tree = {
        "/brokers/ids/1": _broker("r"),
        "/brokers/topics/t": b'{"version":2,"partitions":{"0":[1,2]}}',
        "/brokers/topics/t/partitions/0/state": _state(1, 1, [1, 2]),
        "/config/topics/t": b'{"version":1,"config":{}}',
        path: payload,
    }
    kz = KazooClient(zk_server.hosts)
    kz.start()
    for znode, data in tree.items():
        kz.create(chroot + znode, data, makepath=True)
    kz.stop()
    kz.close()
    with pytest.raises(WhatIfInputError) as err:
        load_cluster(spark, zk=zk_server.hosts + chroot)
    assert f"znode {path}" in str(err.value) or f"{path}:" in str(err.value)
    assert expected in str(err.value)


@pytest.mark.zk
@pytest.mark.filterwarnings("ignore:No chroot path exists")
def test_zk_not_a_kafka_tree_or_unreachable(
    spark: SparkSession, zk_server: ZooKeeperServer
) -> None:
    with pytest.raises(WhatIfInputError, match=r"there is no /brokers/topics .* chroot"):
        load_cluster(spark, zk=zk_server.hosts + "/nothing-here")
    free = ZooKeeperServer()  # a port nobody listens on
    free.stop()
    with pytest.raises(WhatIfInputError, match="cannot connect within 1s"):
        load_cluster(spark, zk=free.hosts, zk_options=ZkOptions(timeout=1.0))
