"""What the controller reads from Kafka's configuration, and what it reports per event."""

from __future__ import annotations

from dataclasses import dataclass, field

from controller.commit.gauges import Gauges
from controller.commit.state_writer import StateWrites


@dataclass(frozen=True)
class ControllerSettings:
    """The Kafka configuration keys the controller reads (spec §17), with Kafka's defaults."""

    auto_leader_rebalance_enable: bool = True
    delete_topic_enable: bool = True
    leader_imbalance_per_broker_percentage: int = 10
    leader_imbalance_check_interval_seconds: int = 300
    unclean_leader_election_enable: bool = False
    kafka_version: tuple[int, int] = (2, 8)
    # inter.broker.protocol.version >= 2.8-IV0: topics get ids (spec §3.3 d, §4.3).
    topic_ids: bool = True
    seed: int = 0  # of the controller's random draws (topic ids), so runs are reproducible
    # Not Kafka's: tables of at most this many rows are held on the driver, and the events
    # with a driver path run there by the plain-Python rules (``Committer.driver_step``).
    driver_rows: int = 0


@dataclass
class EventRecord:
    """What one processed event did: the row of ``events.jsonl``."""

    controller_id: int
    event: str
    state: str
    at_ms: int = 0
    queue_time_ms: int = 0
    queue_size: int = 0  # EventQueueSize after the event
    processing_ms: float = 0.0
    counters: dict[str, int] = field(default_factory=dict)
    gauges: Gauges | None = None
    zk_writes: int = 0  # state-znode writes
    partitions_changed: int = 0  # changed partition rows, summed over the event's commits
    commits: int = 0
    requests: dict[str, int] = field(default_factory=dict)
    failed: str | None = None
    # Where the event's commits ran, in order: "driver" (the plain-Python rules) or "spark".
    execution: list[str] = field(default_factory=list)

    def add_commit(
        self, gauges: Gauges, written: StateWrites, requests: dict[str, int], where: str = "spark"
    ) -> None:
        """One of the event's commits: its counters add up, its gauges are the latest."""
        self.execution.append(where)
        for name, value in gauges.counters.items():
            self.counters[name] = self.counters.get(name, 0) + value
        self.gauges = gauges
        self.zk_writes += written.znode_writes
        self.partitions_changed += written.partitions_changed
        self.commits += 1
        for kind, n in requests.items():
            self.requests[kind] = self.requests.get(kind, 0) + n
