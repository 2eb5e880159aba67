"""Kafka 2.8's admin-side checks (``AdminZkClient``) as plain functions, and the one mapping from
scenario events to actions."""

from __future__ import annotations

import typing

import pytest

from spark_app.actions import ACTIONS
from spark_app.admin_validation import (
    AdminRequestError,
    new_partitions_assignment,
    place_replicas,
    validate_replica_assignment,
    validate_topic_create,
    validate_topic_exists,
)
from spark_app.scenario import EVENT_TYPES, REPLICATION_EVENT_TYPES, ScenarioEvent
from statemachines.assignment import BrokerMetadata

BROKERS = [BrokerMetadata(b, None) for b in (0, 1, 2, 3)]


def _rejected(call: typing.Callable[[], object]) -> AdminRequestError:
    with pytest.raises(AdminRequestError) as info:
        call()
    return info.value


def test_every_scenario_event_type_has_exactly_one_action() -> None:
    members = typing.get_args(typing.get_args(ScenarioEvent)[0])
    assert set(ACTIONS) == set(members)
    assert sorted(cls.model_fields["type"].default for cls in ACTIONS) == sorted(EVENT_TYPES)
    assert set(REPLICATION_EVENT_TYPES) < set(EVENT_TYPES)


def test_creating_an_existing_topic_is_topic_exists() -> None:
    err = _rejected(lambda: validate_topic_create("t", {0: [1]}, ["t", "u"]))
    assert (err.exception, err.message) == ("TopicExistsException", "Topic 't' already exists.")
    assert str(err) == "TopicExistsException: Topic 't' already exists."


def test_topic_whose_name_collides_on_dot_and_underscore_is_invalid_topic() -> None:
    err = _rejected(lambda: validate_topic_create("a.b", {0: [1]}, ["a_b"]))
    assert err.exception == "InvalidTopicException"
    assert err.message == "Topic 'a.b' collides with existing topics: a_b"


@pytest.mark.parametrize(
    ("assignment", "message"),
    [
        ({0: [1, 2], 1: [1]}, "All partitions should have the same number of replicas"),
        ({0: [1, 1]}, "Duplicate replica assignment found: Map(0 -> List(1, 1))"),
        ({0: [1], 2: [2]}, "partitions should be a consecutive 0-based integer sequence"),
    ],
)
def test_bad_manual_assignment_of_a_new_topic_is_invalid_replica_assignment(
    assignment: dict[int, list[int]], message: str
) -> None:
    err = _rejected(lambda: validate_topic_create("t", assignment, []))
    assert (err.exception, err.message) == ("InvalidReplicaAssignmentException", message)


def test_new_topic_on_unregistered_brokers_is_accepted_as_in_kafka_2_8() -> None:
    validate_topic_create("t", {0: [7, 8]}, [])  # validateTopicCreate never looks at brokers


def test_added_partition_on_unregistered_broker_is_broker_not_available() -> None:
    err = _rejected(lambda: validate_replica_assignment({1: [3, 9]}, 2, [0, 1, 2, 3]))
    assert err.exception == "BrokerNotAvailableException"
    assert err.message == (
        "Some brokers specified for partition id 1 are not available. "
        "Specified brokers: 3, 9, available brokers: 0, 1, 2, 3."
    )


def test_added_partitions_with_other_replication_factor_are_invalid_replica_assignment() -> None:
    err = _rejected(lambda: validate_replica_assignment({2: [1], 1: [1, 2, 3]}, 2, [1, 2, 3]))
    assert err.exception == "InvalidReplicaAssignmentException"
    assert err.message == (
        "Inconsistent replication factor between partitions, partition 0 has 2 while "
        "partitions [1, 2] have replication factors [3, 1], respectively."
    )


def test_partition_count_that_does_not_grow_is_invalid_partitions() -> None:
    err = _rejected(lambda: new_partitions_assignment("t", {0: [1], 1: [2]}, BROKERS, 2))
    assert err.exception == "InvalidPartitionsException"
    assert err.message == (
        "The number of partitions for a topic can only be increased. "
        "Topic t currently has 2 partitions, 2 would not be an increase."
    )


def test_added_partitions_follow_kafkas_fixed_start() -> None:
    # §9.3's example: p0 = [1, 2] on brokers 0..3 => fixed start 1, start partition 1.
    added = new_partitions_assignment("t", {0: [1, 2]}, BROKERS, 3)
    assert added == {1: [2, 0], 2: [3, 1]}
    manual = new_partitions_assignment("t", {0: [1, 2]}, BROKERS, 3, {1: [0, 3]})
    assert manual == {1: [0, 3], 2: [3, 1]}


def test_placement_with_more_replicas_than_registered_brokers_is_invalid_replication_factor() -> (
    None
):
    err = _rejected(lambda: place_replicas(BROKERS[:2], 1, 3))
    assert err.exception == "InvalidReplicationFactorException"
    assert err.message.startswith("Replication factor: 3 larger than available brokers: 2")
    err = _rejected(lambda: new_partitions_assignment("t", {0: [0, 1, 2]}, BROKERS[:2], 2))
    assert err.exception == "InvalidReplicationFactorException"


def test_request_on_a_missing_topic_is_unknown_topic_or_partition() -> None:
    for what, message in [
        ("delete", "Topic `t` to delete does not exist"),
        ("config", "Topic 't' does not exist."),
        ("add", "The topic 't' does not exist."),
    ]:
        err = _rejected(lambda what=what: validate_topic_exists("t", ["u"], what))
        assert (err.exception, err.message) == ("UnknownTopicOrPartitionException", message)
