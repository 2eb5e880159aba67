"""What a commit hands back for the event's record, on either path."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame

from controller.commit.gauges import Gauges
from controller.commit.state_writer import StateWrites


@dataclass(frozen=True)
class CommitOutputs:
    """A commit's gauges, ZooKeeper writes and broker requests; ``diff``: the Spark path's
    diff of the two generations, freed with the event (None on the driver path)."""

    gauges: Gauges
    written: StateWrites
    requests: dict[str, int]
    diff: DataFrame | None = None
