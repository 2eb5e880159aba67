"""The ``emulation`` part of a scenario file: how the emulated brokers behave (no Kafka key
says this). It lives below ``model`` so that the cross-field checks can read it."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, Strict

from spark_app.scenario.durations import Duration
from spark_app.scenario.events import STRICT, ScenarioEvent, has_replication_event


class Emulation(BaseModel):
    """How the emulated brokers behave. With ``replication`` on, followers fetch from their
    leaders and the ISR follows Kafka's lag rule; otherwise a follower rejoins the ISR
    ``catch_up_ms`` after it falls behind."""

    model_config = STRICT
    catch_up_ms: Duration = Field(0, description="how long a live follower takes to rejoin the ISR")
    isr_rule: Literal["time", "count"] = Field(
        "time",
        description="time: replica.lag.time.max.ms (Kafka 0.9+); count: replica.lag.max.messages "
        "as well (Kafka <= 0.8.x)",
    )
    page_cache_flush_ms: Duration = Field(
        30_000,
        description="dirty pages reach disk this long after the write (the OS writeback); a "
        "power_loss loses what had not",
    )
    fetch_mb_per_s: Annotated[float, Strict()] = Field(
        100.0,
        gt=0,
        allow_inf_nan=False,
        description="each broker's replica fetch throughput in MB/s, shared by the replicas it "
        "follows",
    )
    replication: Annotated[bool, Strict()] | None = Field(
        None,
        description="model fetching and the ISR lag rule; unset: on when the timeline has a "
        "replication event (produce, fetch_stop, ...)",
    )

    def replication_on(self, events: tuple[ScenarioEvent, ...]) -> bool:
        """``replication`` if set, else whether ``events`` has a replication event."""
        if self.replication is not None:
            return self.replication
        return has_replication_event(events)
