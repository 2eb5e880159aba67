"""Kafka's election kinds: which algorithm a ``ReplicaLeaderElection`` runs and who asked for it.

Plain enums with no Spark, shared by the election transforms, the plain-Python reference rules
and the controller's events.
"""

from __future__ import annotations

from enum import Enum


class ElectionType(Enum):
    """Kafka's ``ElectionType`` (KIP-460), with its wire values."""

    PREFERRED = 0
    UNCLEAN = 1


class ElectionTrigger(Enum):
    """Who asked for a ``ReplicaLeaderElection``."""

    ZkTriggered = "ZkTriggered"
    AdminClientTriggered = "AdminClientTriggered"
    AutoTriggered = "AutoTriggered"
