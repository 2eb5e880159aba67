"""A ``kce run`` between two scenario events: what plays the timeline, and what a checkpoint saves.

``Playback`` holds the emulated cluster (and through it the controllers, ZooKeeper and the timer
with the scenario's remaining events, each scheduled as ``play(index)``), the controller events
processed so far and the admin requests Kafka refused. ``run_checkpoint`` pickles it whole.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from controller.emulation.cluster import EmulatedCluster
from controller.records import EventRecord
from spark_app.actions import Actor
from spark_app.admin_validation import AdminRequestError
from spark_app.progress import Progress
from spark_app.scenario import ScenarioEvent, format_duration

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AdminFailure:
    """An admin request Kafka rejected, after ``position`` controller events had been processed."""

    position: int
    at_ms: int
    scenario_event: str
    error: AdminRequestError

    def line(self) -> str:
        return f"{self.scenario_event} at {format_duration(self.at_ms)} failed: {self.error}"

    def to_json(self) -> dict[str, Any]:
        return {
            "virtual_time_ms": self.at_ms,
            "controller": None,
            "type": self.scenario_event,
            "exception": self.error.exception,
            "message": self.error.message,
            "error": str(self.error),
        }


@dataclass
class Playback:
    """A run between two scenario events: the emulated cluster with everything it schedules, the
    events processed and the admin requests refused so far. A checkpoint saves it whole."""

    cluster: EmulatedCluster
    actor: Actor
    timeline: list[ScenarioEvent]
    progress: Progress | None  # the terminal's progress line (None: no line)
    records: list[EventRecord] = field(default_factory=list)
    rejected: list[AdminFailure] = field(default_factory=list)
    played: int = 0  # scenario events applied

    def on_event(self, record: EventRecord) -> None:
        self.records.append(record)
        if self.progress is not None:
            self.progress.update(record.at_ms, len(self.records))

    def play(self, index: int) -> None:
        event = self.timeline[index]
        self.played += 1
        try:
            self.actor.apply(event)
        except AdminRequestError as err:  # the admin tool reports it; the cluster goes on
            failure = AdminFailure(len(self.records), event.at, event.type, err)
            self.rejected.append(failure)
            log.warning("kce: %s", failure.line())
