"""Controller events and ControllerState (spec §4.2, §4.3)."""

from __future__ import annotations

import dataclasses

import pytest

from controller.events import controller_events as ev
from controller.events.controller_events import ControllerState, TopicPartition
from statemachines.election_kinds import ElectionTrigger, ElectionType

# §4.2 verbatim: state -> (value, rate-and-time metric).
SPEC_STATES = {
    "Idle": (0, None),
    "ControllerChange": (1, "ControllerChangeRateAndTimeMs"),
    "BrokerChange": (2, "LeaderElectionRateAndTimeMs"),
    "TopicChange": (3, "TopicChangeRateAndTimeMs"),
    "TopicDeletion": (4, "TopicDeletionRateAndTimeMs"),
    "AlterPartitionReassignment": (5, "PartitionReassignmentRateAndTimeMs"),
    "AutoLeaderBalance": (6, "AutoLeaderBalanceRateAndTimeMs"),
    "ManualLeaderBalance": (7, "ManualLeaderBalanceRateAndTimeMs"),
    "ControlledShutdown": (8, "ControlledShutdownRateAndTimeMs"),
    "IsrChange": (9, "IsrChangeRateAndTimeMs"),
    "LeaderAndIsrResponseReceived": (10, "LeaderAndIsrResponseReceivedRateAndTimeMs"),
    "LogDirChange": (11, "LogDirChangeRateAndTimeMs"),
    "ControllerShutdown": (12, "ControllerShutdownRateAndTimeMs"),
    "UncleanLeaderElectionEnable": (13, "UncleanLeaderElectionEnableRateAndTimeMs"),
    "TopicUncleanLeaderElectionEnable": (14, "TopicUncleanLeaderElectionEnableRateAndTimeMs"),
    "ListPartitionReassignment": (15, "ListPartitionReassignmentRateAndTimeMs"),
    "UpdateMetadataResponseReceived": (16, None),
    "UpdateFeatures": (17, "UpdateFeaturesRateAndTimeMs"),
}

# §4.3 (2.8): event -> state.
SPEC_EVENTS = {
    "Startup": "ControllerChange",
    "ControllerChange": "ControllerChange",
    "Reelect": "ControllerChange",
    "Expire": "ControllerChange",
    "RegisterBrokerAndReelect": "ControllerChange",
    "BrokerChange": "BrokerChange",
    "BrokerModifications": "BrokerChange",
    "TopicChange": "TopicChange",
    "PartitionModifications": "TopicChange",
    "TopicDeletion": "TopicDeletion",
    "ZkPartitionReassignment": "AlterPartitionReassignment",
    "ApiPartitionReassignment": "AlterPartitionReassignment",
    "PartitionReassignmentIsrChange": "AlterPartitionReassignment",
    "ListPartitionReassignments": "ListPartitionReassignment",
    "IsrChangeNotification": "IsrChange",
    "AlterIsrReceived": "IsrChange",
    "LogDirEventNotification": "LogDirChange",
    "LeaderAndIsrResponseReceived": "LeaderAndIsrResponseReceived",
    "UpdateMetadataResponseReceived": "UpdateMetadataResponseReceived",
    "TopicDeletionStopReplicaResponseReceived": "TopicDeletion",
    "ReplicaLeaderElection": "ManualLeaderBalance",
    "AutoPreferredReplicaLeaderElection": "AutoLeaderBalance",
    "UncleanLeaderElectionEnable": "UncleanLeaderElectionEnable",
    "TopicUncleanLeaderElectionEnable": "TopicUncleanLeaderElectionEnable",
    "ControlledShutdown": "ControlledShutdown",
    "UpdateFeatures": "UpdateFeatures",
    "ShutdownEventThread": "ControllerShutdown",
    "MockEvent": None,  # any: chosen by the test
}

TP = TopicPartition("orders", 3)


def sample(cls: type[ev.ControllerEvent]) -> ev.ControllerEvent:
    """One instance of each event with a representative payload."""
    payloads: dict[type[ev.ControllerEvent], dict[str, object]] = {
        ev.BrokerModifications: {"broker_id": 2},
        ev.PartitionModifications: {"topic": "orders"},
        ev.TopicUncleanLeaderElectionEnable: {"topic": "orders"},
        ev.PartitionReassignmentIsrChange: {"partition": TP},
        ev.ApiPartitionReassignment: {"reassignments": {TP: (1, 2, 3)}},
        ev.ListPartitionReassignments: {"partitions": frozenset({TP})},
        ev.AlterIsrReceived: {
            "broker_id": 1,
            "broker_epoch": 25,
            "isrs_to_alter": {TP: ev.AlterIsrItem(4, (1, 2), 7)},
        },
        ev.LeaderAndIsrResponseReceived: {"broker_id": 1},
        ev.UpdateMetadataResponseReceived: {"broker_id": 1},
        ev.TopicDeletionStopReplicaResponseReceived: {"replica_id": 1},
        ev.ControlledShutdown: {"broker_id": 3, "broker_epoch": 40},
        ev.MockEvent: {"process_fn": lambda: None},
    }
    return cls(**payloads.get(cls, {}))  # type: ignore[arg-type]


def test_controller_state_values_and_metrics_match_spec() -> None:
    actual = {s.name: (s.value, s.rate_and_time_metric_name) for s in ControllerState}
    assert actual == SPEC_STATES
    assert list(actual) == list(SPEC_STATES)  # declared in value order


def test_controller_state_lookup_by_value() -> None:
    assert ControllerState(2) is ControllerState.BrokerChange
    assert not ControllerState.Idle.has_rate_and_time_metric
    assert not ControllerState.UpdateMetadataResponseReceived.has_rate_and_time_metric
    assert ControllerState.TopicChange.has_rate_and_time_metric


def test_catalogue_is_the_closed_set_of_the_spec() -> None:
    assert [cls.__name__ for cls in ev.CONTROLLER_EVENT_TYPES] == list(SPEC_EVENTS)


@pytest.mark.parametrize("cls", ev.CONTROLLER_EVENT_TYPES, ids=lambda c: c.__name__)
def test_each_event_has_its_spec_state_and_is_frozen(cls: type[ev.ControllerEvent]) -> None:
    event = sample(cls)
    expected = SPEC_EVENTS[cls.__name__]
    if expected is not None:
        assert event.state is ControllerState[expected]
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.extra = 1  # type: ignore[attr-defined]
    fields = dataclasses.fields(event)
    if fields:
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(event, fields[0].name, None)


def test_mock_event_state_is_chosen_by_the_caller() -> None:
    event = ev.MockEvent(lambda: None, controller_state=ControllerState.TopicDeletion)
    assert event.state is ControllerState.TopicDeletion


def test_topic_partition_is_a_tuple_printed_like_kafka() -> None:
    assert TP == ("orders", 3)
    assert (TP.topic, TP.partition) == ("orders", 3)
    assert str(TP) == "orders-3"
    assert sorted([TopicPartition("b", 0), TopicPartition("a", 1), TopicPartition("a", 0)]) == [
        TopicPartition("a", 0),
        TopicPartition("a", 1),
        TopicPartition("b", 0),
    ]


def test_mapping_payloads_are_read_only_copies() -> None:
    source = {TP: (1, 2)}
    event = ev.ApiPartitionReassignment(source, callback=print)
    source[TopicPartition("x", 0)] = None
    assert dict(event.reassignments) == {TP: (1, 2)}
    with pytest.raises(TypeError):
        event.reassignments[TP] = (3,)  # type: ignore[index]


def test_events_compare_by_payload_and_ignore_callbacks() -> None:
    one = ev.ControlledShutdown(1, 10, callback=lambda r: None)
    two = ev.ControlledShutdown(1, 10, callback=lambda r: None)
    assert one == two and hash(one) == hash(two)
    assert one != ev.ControlledShutdown(1, 11)
    assert ev.ApiPartitionReassignment({TP: None}) == ev.ApiPartitionReassignment({TP: None})
    assert hash(ev.ApiPartitionReassignment({TP: None})) == hash(ev.ApiPartitionReassignment())


def test_replica_leader_election_defaults_to_zk_triggered_preferred() -> None:
    event = ev.ReplicaLeaderElection()
    assert event.partitions is None
    assert event.election_type is ElectionType.PREFERRED
    assert event.election_trigger is ElectionTrigger.ZkTriggered
    assert ElectionType.UNCLEAN.value == 1
