"""Kafka's ``ControllerState`` values (spec §4.2)."""

from __future__ import annotations

from enum import Enum


class ControllerState(Enum):
    """What the controller thread is doing (§4.2): Kafka's value and its rate-and-time metric.

    ``BrokerChange`` keeps Kafka's legacy metric name ``LeaderElectionRateAndTimeMs``.
    """

    Idle = (0, None)
    ControllerChange = (1, "ControllerChangeRateAndTimeMs")
    BrokerChange = (2, "LeaderElectionRateAndTimeMs")
    TopicChange = (3, "TopicChangeRateAndTimeMs")
    TopicDeletion = (4, "TopicDeletionRateAndTimeMs")
    AlterPartitionReassignment = (5, "PartitionReassignmentRateAndTimeMs")
    AutoLeaderBalance = (6, "AutoLeaderBalanceRateAndTimeMs")
    ManualLeaderBalance = (7, "ManualLeaderBalanceRateAndTimeMs")
    ControlledShutdown = (8, "ControlledShutdownRateAndTimeMs")
    IsrChange = (9, "IsrChangeRateAndTimeMs")
    LeaderAndIsrResponseReceived = (10, "LeaderAndIsrResponseReceivedRateAndTimeMs")
    LogDirChange = (11, "LogDirChangeRateAndTimeMs")
    ControllerShutdown = (12, "ControllerShutdownRateAndTimeMs")
    UncleanLeaderElectionEnable = (13, "UncleanLeaderElectionEnableRateAndTimeMs")
    TopicUncleanLeaderElectionEnable = (14, "TopicUncleanLeaderElectionEnableRateAndTimeMs")
    ListPartitionReassignment = (15, "ListPartitionReassignmentRateAndTimeMs")
    UpdateMetadataResponseReceived = (16, None)
    UpdateFeatures = (17, "UpdateFeaturesRateAndTimeMs")

    rate_and_time_metric_name: str | None

    def __new__(cls, value: int, metric_name: str | None) -> ControllerState:
        member = object.__new__(cls)
        member._value_ = value
        member.rate_and_time_metric_name = metric_name
        return member

    @property
    def has_rate_and_time_metric(self) -> bool:
        return self.rate_and_time_metric_name is not None
