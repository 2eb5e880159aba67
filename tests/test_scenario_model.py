"""Scenario file model (``spark_app.scenario``): parsing, durations, Kafka config defaults, every
cross-field check, YAML-path errors and a YAML round trip. Pure Python, no Spark session."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from controller.events.controller_events import TopicPartition
from spark_app.scenario import (
    EVENT_TYPES,
    REPLICATION_EVENT_TYPES,
    KafkaConfig,
    Scenario,
    ScenarioError,
    format_problems,
    load_scenario,
    parse_duration,
    parse_scenario,
    scenario_from_data,
)
from spark_app.scenario import events as ev
from statemachines.election_kinds import ElectionType
from statemachines.partition_states import PartitionState
from statemachines.replica_states import ReplicaState

SCENARIOS = Path(__file__).resolve().parent.parent / "configs" / "scenarios"

# The format's reference example, verbatim.
EXAMPLE = """name: rack-b-outage
seed: 7
kafka_version: "2.8"                    # optional
spark: {master: "local[*]", conf: {}}   # optional
zookeeper: {mode: emulated}             # or {mode: kazoo, connect: "127.0.0.1:2181/kce"}
config:                                 # Kafka broker/controller keys, Kafka defaults
  auto.leader.rebalance.enable: true
  leader.imbalance.per.broker.percentage: 10
  unclean.leader.election.enable: false
emulation: {catch_up_ms: 0}             # how fast live followers rejoin the ISR
cluster:
  brokers: [{id: 1, rack: a}, {id: 2, rack: b}, {id: 3, rack: c}]   # or generate: {count: 100, racks: 3}
  topics:
    - {name: orders, partitions: 3, replication_factor: 3,
       config: {unclean.leader.election.enable: "true"},
       assignment: {"0": [1, 2, 3]}}                      # optional; else Kafka's algorithm
  generate: {topics: 1000, partitions_per_topic: 100, replication_factor: 3}   # optional bulk
  live_brokers: [1, 2, 3]              # optional: registered at t=0 (default: all)
  controller: 1                        # optional: who wins the first election
  state:                               # optional explicit starting state (after bootstrap)
    partitions: [{topic: orders, partition: 0, leader: 1, isr: [1, 2], leader_epoch: 4,
                  zk_version: 4, controller_epoch: 1, state: OnlinePartition}]
    replicas: [{topic: orders, partition: 0, broker: 3, state: OfflineReplica}]
events:                                # at: virtual time; processed in time order, then file order
  - {at: 0s,  type: broker_failure, brokers: [3]}
  - {at: 5s,  type: broker_startup, brokers: [3]}
  - {at: 6s,  type: controlled_shutdown, broker: 2}
  - {at: 7s,  type: create_topic, topic: {name: audit, partitions: 6, replication_factor: 2}}
  - {at: 8s,  type: add_partitions, topic: orders, total: 6}
  - {at: 9s,  type: delete_topic, topic: audit}
  - {at: 10s, type: reassign_partitions, via: zk,          # or api
              plan: {version: 1, partitions: [{topic: orders, partition: 0, replicas: [2, 3, 1]}]}}
  - {at: 11s, type: cancel_reassignment, partitions: [{topic: orders, partition: 0}]}
  - {at: 12s, type: elect_leaders, via: zk, election_type: preferred, partitions: all}   # via api; unclean; or a list
  - {at: 13s, type: isr_change, topic: orders, partition: 1, isr: [2, 3]}      # a leader's ISR write
  - {at: 14s, type: set_topic_config, topic: orders, config: {unclean.leader.election.enable: "true"}}
  - {at: 15s, type: zk_session_expiry, broker: 1}        # the controller's session: failover
  - {at: 16s, type: log_dir_failure, broker: 2}
until: 600s                            # run virtual time to here (periodic tasks fire)
"""


def example() -> dict[str, Any]:
    return yaml.safe_load(EXAMPLE)


def problems(data: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(ScenarioError) as info:
        scenario_from_data(data)
    return info.value.problems


def paths(data: dict[str, Any]) -> list[str]:
    return [path for path, _ in problems(data)]


def mutated(**changes: Any) -> dict[str, Any]:
    data = example()
    data.update(changes)
    return data


# -- the reference example ---------------------------------------------------------------------


def test_reference_example_parses_with_typed_objects() -> None:
    s = parse_scenario(EXAMPLE)
    assert s.name == "rack-b-outage" and s.seed == 7 and s.kafka_version == "2.8"
    assert s.until == 600_000
    assert [e.type for e in s.events] == [
        *EVENT_TYPES[:2],
        "controlled_shutdown", "create_topic", "add_partitions", "delete_topic",
        "reassign_partitions", "cancel_reassignment", "elect_leaders", "isr_change",
        "set_topic_config", "zk_session_expiry", "log_dir_failure",
    ]  # fmt: skip
    assert set(EVENT_TYPES) - set(REPLICATION_EVENT_TYPES) == {e.type for e in s.events}
    assert s.config.unclean_leader_election_enable is False
    assert s.cluster.topics[0].config.unclean_leader_election_enable == "true"
    assert s.cluster.topics[0].assignment == {0: (1, 2, 3)}
    row = s.cluster.state.partitions[0]
    assert row.state is PartitionState.OnlinePartition
    assert s.cluster.state.replicas[0].state is ReplicaState.OfflineReplica
    assert s.initial_live_brokers() == (1, 2, 3)
    assert [(b.id, b.rack) for b in s.brokers()] == [(1, "a"), (2, "b"), (3, "c")]
    assert s.topic_partition_counts()["orders"] == 3
    assert s.topic_partition_counts()["topic-999"] == 100


def test_timeline_sorts_by_time_then_file_order() -> None:
    data = example()
    data["events"] = [
        {"at": "2s", "type": "broker_startup", "brokers": [3]},
        {"at": 1000, "type": "broker_failure", "brokers": [3]},
        {"at": "2s", "type": "log_dir_failure", "broker": 1},
        {"at": "2s", "type": "zk_session_expiry", "broker": 2},
    ]
    s = scenario_from_data(data)
    assert [e.type for e in s.timeline()] == [
        "broker_failure", "broker_startup", "log_dir_failure", "zk_session_expiry",
    ]  # fmt: skip


# -- each event type ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("event", "model"),
    [
        ({"type": "broker_failure", "brokers": [2]}, ev.BrokerFailure),
        ({"type": "broker_startup", "brokers": [3]}, ev.BrokerStartup),
        ({"type": "controlled_shutdown", "broker": 2}, ev.ControlledShutdown),
        ({"type": "create_topic", "topic": {"name": "x", "partitions": 1, "replication_factor": 1}}, ev.CreateTopic),
        ({"type": "add_partitions", "topic": "orders", "total": 4, "assignment": {"3": [1, 2, 3]}}, ev.AddPartitions),
        ({"type": "delete_topic", "topic": "orders"}, ev.DeleteTopic),
        ({"type": "reassign_partitions", "via": "api", "plan": {"version": 1, "partitions": [{"topic": "orders", "partition": 1, "replicas": [3, 1, 2], "log_dirs": ["any", "any", "any"]}]}}, ev.ReassignPartitions),
        ({"type": "cancel_reassignment", "partitions": [{"topic": "orders", "partition": 0}]}, ev.CancelReassignment),
        ({"type": "elect_leaders", "via": "api", "election_type": "unclean", "partitions": [{"topic": "orders", "partition": 2}]}, ev.ElectLeaders),
        ({"type": "isr_change", "topic": "orders", "partition": 0, "isr": [1, 2]}, ev.IsrChange),
        ({"type": "set_topic_config", "topic": "orders", "config": {"retention.ms": 1000, "cleanup.policy": "compact, delete"}}, ev.SetTopicConfig),
        ({"type": "zk_session_expiry", "broker": 1}, ev.ZkSessionExpiry),
        ({"type": "log_dir_failure", "broker": 2}, ev.LogDirFailure),
    ],
)  # fmt: skip
def test_each_event_type_parses_to_its_model(event: dict[str, Any], model: type) -> None:
    data = example()
    data["cluster"]["live_brokers"] = [1, 2]
    data["events"] = [{"at": "1s", **event}]
    s = scenario_from_data(data)
    assert type(s.events[0]) is model and s.events[0].at == 1000
    assert s.events[0].type in EVENT_TYPES


def test_event_helpers_map_to_controller_types() -> None:
    s = parse_scenario(EXAMPLE)
    elect = s.events[8]
    assert isinstance(elect, ev.ElectLeaders) and elect.partitions == "all"
    assert elect.kafka_election_type() is ElectionType.PREFERRED
    cancel = s.events[7]
    assert isinstance(cancel, ev.CancelReassignment)
    assert cancel.partitions[0].tp() == TopicPartition("orders", 0)
    config = s.events[10]
    assert isinstance(config, ev.SetTopicConfig)
    assert config.config.overrides() == {"unclean.leader.election.enable": "true"}
    assert config.config.unclean_enabled(broker_default=False) is True


# -- durations ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("0s", 0),
        ("500ms", 500),
        ("5s", 5000),
        ("5m", 300_000),
        ("1h", 3_600_000),
        (250, 250),
        ("42", 42),
    ],
)
def test_durations_parse_to_int_milliseconds(text: object, ms: int) -> None:
    assert parse_duration(text) == ms


@pytest.mark.parametrize("bad", ["5 sec", "1.5s", "-1s", -5, 1.5, True, None, "s", "5d"])
def test_bad_durations_are_rejected_with_the_accepted_forms(bad: object) -> None:
    with pytest.raises(ValueError, match="500ms"):
        parse_duration(bad)


def test_bad_duration_in_file_names_the_path() -> None:
    data = example()
    data["events"][2]["at"] = "6 seconds"
    data["emulation"] = {"catch_up_ms": "fast"}
    found = dict(problems(data))
    assert "500ms" in found["events[2].at"] and "emulation.catch_up_ms" in found


# -- Kafka configuration -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "lag", "session", "ibp"),
    [("2.0", 10_000, 6_000, "2.0"), ("2.4", 10_000, 6_000, "2.4"), ("2.5", 30_000, 18_000, "2.5"),
     ("2.8", 30_000, 18_000, "2.8"), ("3.4", 30_000, 18_000, "3.4")],
)  # fmt: skip
def test_config_defaults_follow_kafka_version(
    version: str, lag: int, session: int, ibp: str
) -> None:
    s = scenario_from_data(mutated(kafka_version=version, events=[], cluster=_small_cluster()))
    assert s.config.replica_lag_time_max_ms == lag
    assert s.config.get("zookeeper.session.timeout.ms") == session
    assert s.config.zookeeper_connection_timeout_ms == session
    assert s.config.inter_broker_protocol_version == ibp
    assert s.config.leader_imbalance_check_interval_seconds == 300
    assert s.config.delete_topic_enable is True and s.config.controlled_shutdown_max_retries == 3


def test_config_values_are_typed_like_kafka() -> None:
    config = KafkaConfig.resolve(
        "2.8",
        {"unclean.leader.election.enable": "TRUE", "controlled.shutdown.max.retries": "5",
         "zookeeper.session.timeout.ms": 9000, "inter.broker.protocol.version": "2.7-IV1"},
    )  # fmt: skip
    assert config.unclean_leader_election_enable is True
    assert config.controlled_shutdown_max_retries == 5
    assert config.zookeeper_connection_timeout_ms == 9000  # follows the session timeout
    assert not config.ibp_at_least("2.7-IV2") and config.ibp_at_least("2.7-IV0")
    assert len(KafkaConfig.keys()) == len(set(KafkaConfig.keys())) >= 25
    with pytest.raises(KeyError, match=r"replica\.lag\.time\.max\.ms"):
        config.get("replica.lag.time.max")


def test_config_unknown_and_bad_values_are_reported_together() -> None:
    data = example()
    data["config"].update(
        {"replica.lag.time.max": 1, "auto.leader.rebalance.enable": "yes",
         "num.partitions": True, "broker.rack": "a", "totally.unrelated": 1}
    )  # fmt: skip
    found = dict(problems(data))
    assert "did you mean 'replica.lag.time.max.ms'" in found["config.replica.lag.time.max"]
    assert "true/false" in found["config.auto.leader.rebalance.enable"]
    assert "config.num.partitions" in found
    assert "cluster.brokers[].rack" in found["config.broker.rack"]
    assert "leader.imbalance.per.broker.percentage" in found["config.totally.unrelated"]


def test_protocol_version_newer_than_kafka_is_rejected() -> None:
    data = mutated(kafka_version="2.6")
    data["config"]["inter.broker.protocol.version"] = "2.8"
    assert ("config.inter.broker.protocol.version") in paths(data)


@pytest.mark.parametrize("version", ["2.9", "1.1", "4.0", "two", 3])
def test_unsupported_kafka_versions_are_rejected(version: object) -> None:
    assert paths(mutated(kafka_version=version)) == ["kafka_version"]


def test_unquoted_yaml_version_is_accepted() -> None:
    assert scenario_from_data(mutated(kafka_version=2.7)).version() == (2, 7)


def test_topic_config_rejects_bad_values_and_unknown_keys() -> None:
    data = example()
    data["cluster"]["topics"][0]["config"] = {
        "unclean.leader.election.enable": "maybe", "min.insync.replicas": "0",
        "cleanup.policy": "forever", "retention.bytes": "1",
    }  # fmt: skip
    assert sorted(paths(data)) == [
        "cluster.topics[0].config.cleanup.policy",
        "cluster.topics[0].config.min.insync.replicas",
        "cluster.topics[0].config.retention.bytes",
        "cluster.topics[0].config.unclean.leader.election.enable",
    ]


# -- unknown keys at every depth ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        (lambda d: d.update(nmae="x"), "nmae"),
        (lambda d: d["cluster"].update(controler=1), "cluster.controler"),
        (lambda d: d["cluster"]["brokers"][1].update(rak="b"), "cluster.brokers[1].rak"),
        (lambda d: d["cluster"]["topics"][0].update(partitons=3), "cluster.topics[0].partitons"),
        (lambda d: d["events"][3]["topic"].update(rf=2), "events[3].topic.rf"),
        (lambda d: d["events"][6]["plan"]["partitions"][0].update(x=1), "events[6].plan.partitions[0].x"),
        (lambda d: d["cluster"]["state"]["partitions"][0].update(epoch=1), "cluster.state.partitions[0].epoch"),
        (lambda d: d["zookeeper"].update(connect="h:1"), "zookeeper.connect"),
        (lambda d: d["cluster"]["generate"].update(count=3), "cluster.generate.count"),
    ],
)  # fmt: skip
def test_unknown_keys_are_rejected_with_their_path(where: Any, expected: str) -> None:
    data = example()
    where(data)
    found = problems(data)
    assert [p for p, _ in found] == [expected]
    assert "unknown key" in found[0][1] or "not accepted here" in found[0][1]


def test_misplaced_broker_generation_points_to_brokers() -> None:
    data = example()
    data["cluster"]["generate"] = {"count": 3, "racks": 3}
    found = dict(problems(data))
    assert "cluster.brokers: {generate" in found["cluster.generate.count"]


def test_unknown_event_type_suggests_the_closest() -> None:
    data = example()
    data["events"][0]["type"] = "broker_failur"
    assert problems(data) == [
        ("events[0]", "unknown type 'broker_failur'; did you mean 'broker_failure'?")
    ]


def test_wrong_types_map_to_yaml_paths() -> None:
    data = example()
    data["events"][0]["brokers"] = ["three"]
    data["cluster"]["topics"][0]["assignment"] = {"zero": [1, 2, 3]}
    data["cluster"]["state"]["partitions"][0]["state"] = "Onlinepartition"
    found = dict(problems(data))
    assert "events[0].brokers[0]" in found
    assert "cluster.topics[0].assignment.zero" in found
    assert "did you mean 'OnlinePartition'" in found["cluster.state.partitions[0].state"]


# -- cross-field checks ------------------------------------------------------------------------


def _small_cluster() -> dict[str, Any]:
    return {
        "brokers": [{"id": 1}, {"id": 2}, {"id": 3}],
        "topics": [{"name": "t", "partitions": 2, "replication_factor": 2}],
    }


def _one(data: dict[str, Any]) -> tuple[str, str]:
    found = problems(data)
    assert len(found) == 1, found
    return found[0]


def test_brokers_are_a_list_or_generated_never_missing() -> None:
    data = example()
    del data["cluster"]["brokers"]
    assert _one(data) == ("cluster.brokers", "required key 'brokers' is missing; add it")
    data["cluster"]["brokers"] = []
    assert paths(data)[0] == "cluster.brokers"  # and every reference to a broker after it


def test_generated_brokers_are_numbered_from_zero_with_round_robin_racks() -> None:
    data = mutated(events=[], cluster={"brokers": {"generate": {"count": 4, "racks": 2}}})
    s = scenario_from_data(data)
    assert [(b.id, b.rack) for b in s.brokers()] == [
        (0, "rack-0"),
        (1, "rack-1"),
        (2, "rack-0"),
        (3, "rack-1"),
    ]
    data["cluster"]["brokers"]["generate"]["racks"] = 5
    assert _one(data)[0] == "cluster.brokers.generate.racks"


def test_duplicate_broker_ids() -> None:
    data = example()
    data["cluster"]["brokers"][2]["id"] = 2
    assert "cluster.brokers[2].id" in paths(data)


def test_racks_all_or_none() -> None:
    data = example()
    del data["cluster"]["brokers"][1]["rack"]
    path, message = _one(data)
    assert path == "cluster.brokers[1].rack" and "every broker or on none" in message


def test_live_brokers_and_controller_must_be_known_and_live() -> None:
    data = example()
    data["cluster"]["live_brokers"] = [1, 9]
    data["cluster"]["controller"] = 3
    data["events"] = []
    assert sorted(paths(data)) == ["cluster.controller", "cluster.live_brokers[1]"]


@pytest.mark.parametrize("name", ["", ".", "..", "has space", "x" * 250, "ünïcode"])
def test_illegal_topic_names(name: str) -> None:
    data = example()
    data["cluster"]["topics"][0]["name"] = name
    data["events"] = []
    data["cluster"]["state"] = None
    assert paths(data) == ["cluster.topics[0].name"]


def test_duplicate_and_colliding_topic_names() -> None:
    data = mutated(events=[])
    data["cluster"]["state"] = None
    data["cluster"]["topics"] = [
        {"name": "a.b", "partitions": 1, "replication_factor": 1},
        {"name": "a_b", "partitions": 1, "replication_factor": 1},
        {"name": "a.b", "partitions": 1, "replication_factor": 1},
        {"name": "topic-3", "partitions": 1, "replication_factor": 1},
    ]
    assert paths(data) == [
        "cluster.topics[1].name",
        "cluster.topics[2].name",
        "cluster.generate.topic_prefix",
    ]


def test_replication_factor_above_broker_count() -> None:
    data = example()
    data["cluster"]["generate"]["replication_factor"] = 4
    data["events"][3]["topic"]["replication_factor"] = 5
    assert sorted(paths(data)) == [
        "cluster.generate.replication_factor",
        "events[3].topic.replication_factor",
    ]


def test_assignment_shape() -> None:
    data = example()
    data["cluster"]["topics"][0]["assignment"] = {"0": [1, 2], "1": [1, 1, 2], "3": [1, 2, 9]}
    data["events"], data["cluster"]["state"] = [], None
    assert paths(data) == [
        "cluster.topics[0].assignment.0",
        "cluster.topics[0].assignment.1[1]",
        "cluster.topics[0].assignment.3",
        "cluster.topics[0].assignment.3[2]",
    ]


def test_state_rows_reference_existing_partitions_and_replicas() -> None:
    data = example()
    data["cluster"]["state"] = {
        "partitions": [
            {
                "topic": "orders",
                "partition": 0,
                "leader": 9,
                "isr": [1, 9],
                "leader_epoch": 0,
                "zk_version": 0,
                "controller_epoch": 1,
            },
            {
                "topic": "nope",
                "partition": 0,
                "leader": -1,
                "isr": [1],
                "leader_epoch": 0,
                "zk_version": 0,
                "controller_epoch": 1,
            },
            {
                "topic": "orders",
                "partition": 7,
                "leader": 1,
                "isr": [1],
                "leader_epoch": 0,
                "zk_version": 0,
                "controller_epoch": 1,
                "state": "OfflinePartition",
            },
            {
                "topic": "orders",
                "partition": 0,
                "leader": -1,
                "isr": [1],
                "leader_epoch": 0,
                "zk_version": 0,
                "controller_epoch": 1,
            },
        ],
        "replicas": [{"topic": "orders", "partition": 0, "broker": 7, "state": "OnlineReplica"}],
    }
    assert paths(data) == [
        "cluster.state.partitions[0].isr[1]",
        "cluster.state.partitions[0].leader",
        "cluster.state.partitions[1].topic",
        "cluster.state.partitions[2].partition",
        "cluster.state.partitions[3]",
        "cluster.state.replicas[0].broker",
    ]


def test_state_leader_and_isr_within_the_explicit_assignment() -> None:
    data = example()
    data["cluster"]["topics"][0]["assignment"] = {"0": [1, 2, 3]}
    data["cluster"]["topics"][0]["replication_factor"] = 2
    data["cluster"]["topics"][0]["assignment"] = {"0": [1, 2]}
    data["cluster"]["state"]["partitions"][0].update(leader=3, isr=[3, 1])
    data["events"] = []
    assert paths(data) == [
        "cluster.state.partitions[0].leader",
        "cluster.state.partitions[0].isr[0]",
        "cluster.state.replicas[0].broker",
    ]


def test_events_see_topics_as_they_are_at_their_time() -> None:
    data = example()
    data["events"] = [
        {
            "at": "9s",
            "type": "set_topic_config",
            "topic": "audit",
            "config": {},
        },  # after its deletion
        {
            "at": "1s",
            "type": "isr_change",
            "topic": "audit",
            "partition": 0,
            "isr": [1],
        },  # before creation
        {
            "at": "2s",
            "type": "create_topic",
            "topic": {"name": "audit", "partitions": 2, "replication_factor": 1},
        },
        {"at": "3s", "type": "add_partitions", "topic": "audit", "total": 2},
        {
            "at": "4s",
            "type": "elect_leaders",
            "via": "zk",
            "partitions": [{"topic": "audit", "partition": 1}],
        },
        {"at": "5s", "type": "delete_topic", "topic": "audit"},
        {
            "at": "5s",
            "type": "create_topic",
            "topic": {"name": "orders", "partitions": 1, "replication_factor": 1},
        },
    ]
    # Problems come in timeline order.
    assert paths(data) == [
        "events[1].topic",
        "events[3].total",
        "events[6].topic.name",
        "events[0].topic",
    ]


def test_deletion_disabled_keeps_the_topic() -> None:
    data = example()
    data["config"]["delete.topic.enable"] = "false"
    data["events"] = [
        {"at": "1s", "type": "delete_topic", "topic": "orders"},
        {"at": "2s", "type": "isr_change", "topic": "orders", "partition": 0, "isr": [1]},
    ]
    assert scenario_from_data(data).config.delete_topic_enable is False


def test_broker_events_need_a_known_broker_up_at_their_time() -> None:
    data = example()
    data["events"] = [
        {"at": "1s", "type": "broker_failure", "brokers": [3, 3, 8]},
        {"at": "2s", "type": "broker_failure", "brokers": [3]},
        {"at": "3s", "type": "zk_session_expiry", "broker": 3},
        {"at": "4s", "type": "broker_startup", "brokers": [1]},
        {"at": "5s", "type": "log_dir_failure", "broker": 8},
        {"at": "6s", "type": "controlled_shutdown", "broker": 2},
        {
            "at": "7s",
            "type": "log_dir_failure",
            "broker": 2,
        },  # still registered while shutting down
    ]
    assert paths(data) == [
        "events[0].brokers[1]", "events[0].brokers[2]", "events[1].brokers[0]",
        "events[2].broker", "events[3].brokers[0]", "events[4].broker",
    ]  # fmt: skip


def test_reassignment_plans() -> None:
    data = example()
    data["events"][6]["plan"]["partitions"] = [
        {"topic": "orders", "partition": 0, "replicas": [2, 2, 9]},
        {"topic": "orders", "partition": 0, "replicas": [1], "log_dirs": ["any", "any"]},
        {"topic": "orders", "partition": 1, "replicas": []},
    ]
    assert paths(data) == ["events[6].plan.partitions[2].replicas"]  # field errors come first
    data["events"][6]["plan"]["partitions"].pop()
    assert paths(data) == [
        "events[6].plan.partitions[1]",
        "events[6].plan.partitions[0].replicas[1]",
        "events[6].plan.partitions[0].replicas[2]",
        "events[6].plan.partitions[1].log_dirs",
    ]


def test_version_gated_apis_and_unclean_via_zk() -> None:
    data = mutated(kafka_version="2.3")
    data["events"][6]["via"] = "api"
    data["events"][8].update(via="zk", election_type="unclean")
    assert paths(data) == ["events[6].via", "events[7].type", "events[8].election_type"]


def test_until_must_cover_the_last_event() -> None:
    path, message = _one(mutated(until="10s"))
    assert path == "until" and "16s" in message


def test_many_problems_are_reported_together_in_one_error() -> None:
    data = example()
    data["cluster"]["brokers"][2]["id"] = 2
    data["cluster"]["topics"][0]["assignment"] = {"5": [1, 2, 3]}
    data["events"][4]["total"] = 2
    data["until"] = "1s"
    with pytest.raises(ScenarioError) as info:
        scenario_from_data(data)
    found = [p for p, _ in info.value.problems]
    assert {
        "cluster.brokers[2].id",
        "cluster.topics[0].assignment.5",
        "events[4].total",
        "until",
    } <= set(found)
    assert str(info.value).count("\n") == len(found) - 1  # one line per problem
    assert isinstance(info.value, ValueError)
    text = format_problems(info.value.problems, "s.yaml")
    assert text.splitlines()[0] == f"s.yaml: {len(found)} problem(s):"


# -- loading -----------------------------------------------------------------------------------


def test_yaml_syntax_errors_carry_line_and_column() -> None:
    with pytest.raises(ScenarioError) as info:
        parse_scenario("name: x\ncluster: {brokers: [1, 2\n", source="bad.yaml")
    ((path, message),) = info.value.problems
    assert path == "(yaml)" and "line 3, column 1" in message and info.value.source == "bad.yaml"


def test_duplicate_yaml_keys_are_rejected() -> None:
    with pytest.raises(ScenarioError, match="duplicate key 'until'"):
        parse_scenario(EXAMPLE + "until: 700s\n")


def test_non_mapping_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="YAML mapping"):
        parse_scenario("- 1\n")
    with pytest.raises(ScenarioError, match="cannot read"):
        load_scenario(tmp_path / "missing.yaml")


@pytest.mark.parametrize("path", sorted(SCENARIOS.glob("*.yaml")), ids=lambda p: p.stem)
def test_shipped_scenarios_validate(path: Path) -> None:
    s = load_scenario(path)
    assert s.name == path.stem and s.until >= max(e.at for e in s.timeline())


def test_shipped_scenarios_cover_what_they_promise() -> None:
    names = {p.stem for p in SCENARIOS.glob("*.yaml")}
    assert {"rack-b-outage", "every-handler", "decommission"} <= names
    # every-handler plays each controller-facing event; the replication scenarios the rest.
    shipped = {e.type for f in SCENARIOS.glob("*.yaml") for e in load_scenario(f).events}
    assert {e.type for e in load_scenario(SCENARIOS / "every-handler.yaml").events} == set(
        EVENT_TYPES
    ) - set(REPLICATION_EVENT_TYPES)
    assert shipped == set(EVENT_TYPES)
    outage = load_scenario(SCENARIOS / "rack-b-outage.yaml")
    failed = outage.timeline()[0]
    assert isinstance(failed, ev.BrokerFailure) and len(outage.brokers()) == 100
    assert {b.rack for b in outage.brokers() if b.id in failed.brokers} == {"rack-1"}
    assert outage.until == 600_000


# -- round trip --------------------------------------------------------------------------------

_names = st.from_regex(r"[a-z][a-z0-9_-]{0,8}", fullmatch=True)


@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, Any]:
    n = draw(st.integers(1, 5))
    racks = draw(st.booleans())
    brokers = [{"id": i, "rack": f"r{i % 2}" if racks else None} for i in range(n)]
    topics = []
    for name in draw(st.lists(_names, max_size=3, unique=True)):
        parts, rf = draw(st.integers(1, 4)), draw(st.integers(1, n))
        spec: dict[str, Any] = {"name": name, "partitions": parts, "replication_factor": rf}
        if draw(st.booleans()):
            spec["assignment"] = {
                str(p): draw(st.permutations(range(n)))[:rf] for p in range(parts)
            }
        if draw(st.booleans()):
            spec["config"] = {
                "unclean.leader.election.enable": draw(st.sampled_from(["true", "false"]))
            }
        topics.append(spec)
    events: list[dict[str, Any]] = []
    at = 0
    for broker in draw(st.lists(st.integers(0, n - 1), max_size=3, unique=True)):
        at += draw(st.integers(0, 5000))
        events.append({"at": at, "type": "broker_failure", "brokers": [broker]})
        events.append({"at": f"{at + 1}ms", "type": "broker_startup", "brokers": [broker]})
    for t in topics:
        events.append({"at": "1s", "type": "elect_leaders", "via": "api", "election_type": "preferred",
                       "partitions": [{"topic": t["name"], "partition": 0}]})  # fmt: skip
        events.append(
            {
                "at": "2s",
                "type": "set_topic_config",
                "topic": t["name"],
                "config": {"retention.ms": 5},
            }
        )
    return {
        "name": draw(_names),
        "seed": draw(st.integers(0, 2**31)),
        "kafka_version": draw(st.sampled_from(["2.3", "2.5", "2.8", "3.4"])),
        "zookeeper": draw(
            st.sampled_from(
                [{"mode": "emulated"}, {"mode": "kazoo", "connect": "zk1:2181,zk2:2181/kce"}]
            )
        ),
        "config": {
            "unclean.leader.election.enable": draw(st.booleans()),
            "num.partitions": draw(st.integers(1, 9)),
        },
        "emulation": {"catch_up_ms": draw(st.sampled_from([0, "500ms", "1m"]))},
        "cluster": {
            "brokers": brokers,
            "topics": topics,
            "controller": draw(st.integers(0, n - 1)),
        },
        "events": events,
        "until": draw(st.sampled_from(["1h", 3_600_000])),
    }


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_valid_scenarios_round_trip_through_yaml(data: dict[str, Any]) -> None:
    try:
        scenario = scenario_from_data(copy.deepcopy(data))
    except ScenarioError:
        assume(False)
        raise
    dumped = yaml.safe_dump(scenario.model_dump(mode="json"), sort_keys=False)
    again = parse_scenario(dumped)
    assert again == scenario
    assert again.timeline() == scenario.timeline()
    assert isinstance(again, Scenario)


def test_every_model_is_strict_and_every_field_described() -> None:
    import inspect

    from pydantic import BaseModel

    from spark_app.scenario import cluster, emulation, kafka_config, model

    for module in (model, cluster, ev, kafka_config, emulation):
        for cls in vars(module).values():
            if (
                inspect.isclass(cls)
                and issubclass(cls, BaseModel)
                and cls.__module__ == module.__name__
            ):
                assert cls.model_config.get("extra") == "forbid" and cls.model_config.get("frozen")
                assert all(f.description for f in cls.model_fields.values()), cls.__name__
