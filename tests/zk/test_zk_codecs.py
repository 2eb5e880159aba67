"""Codecs of every znode kind against the spec's example payloads (§2.2), and malformed input."""

from __future__ import annotations

import json
import logging

import pytest

from controller.zk import MalformedZnodeError
from controller.zk.models import BrokerRegistration, PartitionState, TopicAssignment
from controller.zk.paths import (
    BrokerIdZNode,
    ControllerEpochZNode,
    ControllerZNode,
    DeleteTopicZNode,
    FeatureZNode,
    IsrChangeNotificationZNode,
    LogDirEventNotificationZNode,
    PartitionStateZNode,
    PreferredReplicaElectionZNode,
    ReassignPartitionsZNode,
    TopicConfigZNode,
    TopicPartitionsZNode,
    TopicPartitionZNode,
    TopicZNode,
)

BROKER = (
    '{"version":5,"host":"b1.example","port":9092,"jmx_port":-1,"timestamp":"1700000000123",'
    '"endpoints":["PLAINTEXT://b1.example:9092","REPLICATION://b1.example:9093"],'
    '"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT","REPLICATION":"PLAINTEXT"},'
    '"rack":"rack-a","features":{"feature_x":{"min_version":1,"max_version":2}}}'
)
EXAMPLES = [
    (ControllerZNode, "/controller", '{"version":1,"brokerid":2,"timestamp":"1700000000000"}'),
    (
        ControllerZNode,
        "/controller",
        '{"version":2,"brokerid":2,"timestamp":"1700000000000","kraftControllerEpoch":-1}',
    ),
    (BrokerIdZNode, "/brokers/ids/1", BROKER),
    (TopicZNode, "/brokers/topics/orders", '{"version":1,"partitions":{"0":[1,2,3],"1":[2,3,1]}}'),
    (
        TopicZNode,
        "/brokers/topics/orders",
        '{"version":2,"partitions":{"0":[4,5,6,1,2,3],"1":[2,3,1]},'
        '"adding_replicas":{"0":[4,5,6]},"removing_replicas":{"0":[1,2,3]}}',
    ),
    (
        TopicZNode,
        "/brokers/topics/orders",
        '{"version":3,"partitions":{"0":[1,2,3]},"adding_replicas":{},"removing_replicas":{},'
        '"topic_id":"vQ9L4t1HRfWG0k0dVvKxuQ"}',
    ),
    (
        PartitionStateZNode,
        "/brokers/topics/orders/partitions/0/state",
        '{"controller_epoch":7,"leader":3,"version":1,"leader_epoch":12,"isr":[3,1,2]}',
    ),
    (
        PartitionStateZNode,
        "/brokers/topics/orders/partitions/0/state",
        '{"controller_epoch":7,"leader":3,"version":1,"leader_epoch":12,"isr":[3],'
        '"leader_recovery_state":1}',
    ),
    (
        ReassignPartitionsZNode,
        "/admin/reassign_partitions",
        '{"version":1,"partitions":[{"topic":"orders","partition":0,"replicas":[4,5,6]},'
        '{"topic":"orders","partition":1,"replicas":[5,6,4]}]}',
    ),
    (
        PreferredReplicaElectionZNode,
        "/admin/preferred_replica_election",
        '{"version":1,"partitions":[{"topic":"orders","partition":0},'
        '{"topic":"orders","partition":3}]}',
    ),
    (
        IsrChangeNotificationZNode,
        "/isr_change_notification/isr_change_0000000042",
        '{"version":1,"partitions":[{"topic":"orders","partition":0},'
        '{"topic":"audit","partition":7}]}',
    ),
    (
        LogDirEventNotificationZNode,
        "/log_dir_event_notification/log_dir_event_0000000001",
        '{"version":1,"broker":3,"event":1}',
    ),
    (
        TopicConfigZNode,
        "/config/topics/orders",
        '{"version":1,"config":{"unclean.leader.election.enable":"true","min.insync.replicas":"2"}}',
    ),
    (FeatureZNode, "/feature", '{"version":1,"status":1,"features":{}}'),
]


@pytest.mark.parametrize(("codec", "path", "payload"), EXAMPLES)
def test_codec_round_trips_spec_example(codec, path, payload) -> None:
    value = codec.decode(payload.encode(), path)
    encoded = value if isinstance(value, bytes) else codec.codec.encode(value)
    assert json.loads(encoded) == json.loads(payload)
    assert codec.decode(encoded, path) == value


def test_path_builders_match_kafka_layout() -> None:
    assert ControllerZNode.path() == "/controller"
    assert ControllerEpochZNode.path() == "/controller_epoch"
    assert BrokerIdZNode.path(3) == "/brokers/ids/3"
    assert TopicZNode.path("t") == "/brokers/topics/t"
    assert TopicPartitionsZNode.path("t") == "/brokers/topics/t/partitions"
    assert TopicPartitionZNode.path("t", 4) == "/brokers/topics/t/partitions/4"
    assert PartitionStateZNode.path("t", 4) == "/brokers/topics/t/partitions/4/state"
    assert DeleteTopicZNode.path("t") == "/admin/delete_topics/t"
    assert DeleteTopicZNode.encode() == b""
    assert IsrChangeNotificationZNode.path_prefix() == "/isr_change_notification/isr_change_"
    assert LogDirEventNotificationZNode.path("0000000001").endswith("log_dir_event_0000000001")
    assert TopicConfigZNode.path("t") == "/config/topics/t"


def test_controller_epoch_is_plain_text() -> None:
    assert ControllerEpochZNode.encode(7) == b"7"
    assert ControllerEpochZNode.decode(b"7") == 7
    with pytest.raises(MalformedZnodeError, match="/controller_epoch"):
        ControllerEpochZNode.decode(b"seven")


def test_controller_encode_writes_version_1_with_string_timestamp() -> None:
    assert json.loads(ControllerZNode.encode(2, 1700000000000)) == {
        "version": 1,
        "brokerid": 2,
        "timestamp": "1700000000000",
    }


def test_partition_state_fast_encoding_is_the_codec_encoding() -> None:
    state = PartitionState(controller_epoch=7, leader=3, leader_epoch=12, isr=[3, 1, 2])
    assert PartitionStateZNode.encode(state) == PartitionStateZNode.encode_fields(
        3, 12, [3, 1, 2], 7
    )
    recovered = state.model_copy(update={"leader_recovery_state": 0})
    assert b"leader_recovery_state" not in PartitionStateZNode.encode(recovered)


def test_topic_v2_always_writes_both_reassignment_maps() -> None:
    value = TopicAssignment(version=2, partitions={"0": [1, 2]})
    assert json.loads(TopicZNode.encode(value)) == {
        "version": 2,
        "partitions": {"0": [1, 2]},
        "adding_replicas": {},
        "removing_replicas": {},
    }


@pytest.mark.parametrize(
    ("codec", "payload", "fragment"),
    [
        (PartitionStateZNode, b'{"controller_epoch":7,"leader":3', "Invalid JSON"),
        (
            PartitionStateZNode,
            b'{"controller_epoch":7,"leader":3,"version":1,"isr":[3]}',
            "leader_epoch",
        ),
        (
            PartitionStateZNode,
            b'{"controller_epoch":7,"leader":"3","version":1,"leader_epoch":1,"isr":[3]}',
            "leader",
        ),
        (
            PartitionStateZNode,
            b'{"controller_epoch":7,"leader":3,"version":1,"leader_epoch":1,"isr":[3],"x":1}',
            "x",
        ),
        (PartitionStateZNode, b"", "no payload"),
        (
            TopicZNode,
            b'{"version":1,"partitions":{"0":[1]},"adding_replicas":{"0":[2]}}',
            "version >= 2",
        ),
        (TopicZNode, b'{"version":3,"partitions":{"zero":[1]}}', "not a partition id"),
        (
            BrokerIdZNode,
            b'{"version":2,"port":1,"timestamp":"1","endpoints":[],"rack":"r"}',
            "rack",
        ),
        (ControllerZNode, b'{"version":1,"brokerid":2,"timestamp":1700000000000}', "timestamp"),
        (LogDirEventNotificationZNode, b'{"version":1,"broker":3,"event":2}', "event"),
    ],
)
def test_malformed_payload_raises_one_error_naming_the_path(codec, payload, fragment) -> None:
    path = "/some/znode/path"
    with pytest.raises(MalformedZnodeError, match=fragment) as info:
        codec.decode(payload, path)
    assert info.value.path == path and path in str(info.value)


def test_broker_registration_reports_every_version_problem_at_once() -> None:
    payload = (
        b'{"version":2,"port":1,"timestamp":"1","endpoints":[],"rack":"r",'
        b'"listener_security_protocol_map":{},"features":{}}'
    )
    with pytest.raises(MalformedZnodeError) as info:
        BrokerIdZNode.decode(payload, "/brokers/ids/9")
    for field in ("rack", "listener_security_protocol_map", "features"):
        assert field in str(info.value)
    assert BrokerRegistration.model_fields["host"].description


@pytest.mark.parametrize(
    "payload",
    [b"not json", b'{"version":1}', b'{"version":1,"partitions":[{"topic":"t"}]}', b""],
)
def test_unparseable_reassignment_is_warned_about_and_treated_as_empty(payload, caplog) -> None:
    with caplog.at_level(logging.WARNING):
        value = ReassignPartitionsZNode.decode_lenient(payload)
    assert value.partitions == []
    assert "/admin/reassign_partitions" in caplog.text
