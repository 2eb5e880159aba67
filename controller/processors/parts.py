"""What every event family works with, handed to each as one value."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import SparkSession

from controller.commit.committer import Committer
from controller.context import ControllerContext
from controller.events.controller_events import ControllerEvent
from controller.records import ControllerSettings
from controller.zk.protocol import ZkClient


@dataclass(frozen=True)
class ControllerParts:
    """The controller's context, its ZooKeeper client, its committer and its event queue.

    ``is_active`` answers whether this module is the active controller now (each ``process_*``
    asks, as Kafka's do); ``put`` enqueues a follow-up event.
    """

    ctx: ControllerContext
    zk: ZkClient
    spark: SparkSession
    committer: Committer
    settings: ControllerSettings
    put: Callable[[ControllerEvent], None]
    is_active: Callable[[], bool]
    broker_id: int
