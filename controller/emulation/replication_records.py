"""What replication below the controller is told and what it records: its settings, each
broker's activity, the totals of the run and the gauges at a moment."""

from __future__ import annotations

from dataclasses import dataclass, field

from statemachines import isr_expiration as ie


@dataclass(frozen=True)
class ReplicationSettings:
    """Kafka's keys and the emulation's knobs the brokers' side reads."""

    rule: ie.IsrRule
    alter_isr: bool  # inter.broker.protocol.version >= 2.7-IV2
    use_epochs: bool  # log.message.format.version >= 0.11 (epochs in the log)
    fetch_bytes_per_s: float
    fetch_wait_ms: int = 500
    flush_periods_ms: tuple[int, ...] = (30_000,)
    flush_messages: int | None = None
    page_cache_flush_ms: int | None = None  # emulation.page_cache_flush_ms (a topic keeps it)
    min_isr: int = 1
    driver_rows: int = 10_000  # a table of at most this many partitions stays on the driver


@dataclass
class BrokerActivity:
    """What one broker is doing, as far as replication goes (times are virtual ms)."""

    started_ms: int = 0  # its periodic tasks run from here
    paused_until: int = -1
    stopped_until: int = -1  # fetchers stopped
    slow_until: int = -1
    slow_factor: float = 1.0
    cut_off_until: int = -1  # network partition from the other brokers
    pending: set[tuple[str, int]] = field(default_factory=set)  # isrChangeSet
    last_change_ms: int = 0  # lastIsrChangeMs
    last_propagation_ms: int = 0  # lastIsrPropagationMs


@dataclass
class ReplicationTotals:
    isr_shrinks: int = 0
    isr_expands: int = 0
    failed_isr_updates: int = 0
    isr_change_notifications: int = 0
    under_min_isr_partition_ms: int = 0
    offline_partition_ms: int = 0
    leader_down_partition_ms: int = 0  # of those, led by a crashed broker not yet replaced

    def add_interval(self, g: Snapshot, ms: int) -> None:
        """The gauges ``g`` held for ``ms``: partition-time under min ISR and offline."""
        self.under_min_isr_partition_ms += g.under_min_isr * ms
        self.offline_partition_ms += g.offline * ms
        self.leader_down_partition_ms += g.leader_down * ms


@dataclass(frozen=True)
class Snapshot:
    """The gauges and meters at a moment (one line of the brokers' metrics)."""

    at_ms: int
    under_replicated: int
    under_min_isr: int
    at_min_isr: int
    offline: int
    isr_shrinks: int = 0
    isr_expands: int = 0
    failed_isr_updates: int = 0
    isr_change_notifications: int = 0
    leader_down: int = 0  # of the offline: led by a crashed broker still registered


def counts(g: Snapshot) -> tuple[int, ...]:
    return tuple(getattr(g, f) for f in g.__dataclass_fields__ if f != "at_ms")
