"""The brokers' side of replication around the controller, on the cluster's virtual clock.

``Replication`` holds the replication table (``statemachines.replication``) and what each broker
is doing (paused, fetchers stopped, slow, cut off), and steps from one moment to the next:

1. ``advance_to(t)`` moves every replica to ``t`` under the conditions of the interval (before
   anything at ``t`` happens);
2. events at ``t`` change the conditions or the logs (a burst of records, a power loss, a
   config the brokers read: ``config_handlers``);
3. ``settle(t)``, after the controllers drained: the brokers receive what the controller
   committed (``leader_and_isr.receive``), the leaders apply the shrink rule where their
   ``isr-expiration`` task runs at ``t`` and the expand rule everywhere, and write the changes
   the way their ``inter.broker.protocol.version`` does (AlterIsr, or the state znode plus the
   ``isr-change-propagation`` task's notifications); then it asks when the rules will next
   change something and sets a timer there (``isr_expiration.outlook``), and counts the
   followers for the next interval's shares of throughput and throttles (``replication_quotas``).

Nothing ticks: an hour in which nothing changes is one step.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pyspark.sql import DataFrame, SparkSession

from controller.emulation.config_handlers import ConfigHandlers
from controller.emulation.isr_propagation import next_propagation, propagating
from controller.emulation.replica_logs import ReplicaLogs, RowLogs, SparkLogs
from controller.emulation.replication_quotas import FetchGroup, deal
from controller.emulation.replication_records import (
    BrokerActivity,
    ReplicationSettings,
    ReplicationTotals,
    Snapshot,
    counts,
)
from controller.events import controller_events as ev
from controller.zk import admin_zk_client as admin
from controller.zk.protocol import ZkClient
from statemachines import isr_expiration as ie
from statemachines import replication as r
from statemachines import schemas as s
from statemachines.compact_rows import CompactRow
from statemachines.replication_throttles import Throttles


class Replication:
    """The replicas' logs, the leaders' ISR rules and their timers, for one emulated cluster.

    The cluster calls ``advance_to`` before anything happens at a time and ``settle`` after
    the controllers drained; it gives the accessors it needs (``running``, ``active``, ...)
    rather than itself, so this module knows brokers, not the cluster's wiring.
    """

    def __init__(
        self,
        spark: SparkSession,
        settings: ReplicationSettings,
        alive: Callable[[int], bool],
        broker_zk: Callable[[int], ZkClient],
        broker_epoch: Callable[[int], int],
        active: Callable[[], object | None],
        schedule_at: Callable[[int, Callable[[], None]], object],
        write_isr: Callable[[list[tuple[str, int, int, int, list[int], int, int]]], list[int]],
    ) -> None:
        self.spark = spark
        self.settings = settings
        self._alive = alive
        self._broker_zk = broker_zk
        self._broker_epoch = broker_epoch
        self._active = active
        self._schedule_at = schedule_at
        self._write_isr = write_isr
        self.logs: ReplicaLogs | None = None
        self.now = 0
        self.checked_ms = -1
        self.brokers: dict[int, BrokerActivity] = {}
        self.topics: dict[str, int] = {}  # name -> our topic index
        self.rates: dict[int, tuple[float, int]] = {}  # topic -> (records/s, since)
        self.sizes: dict[int, int] = {}  # topic -> bytes per record
        self.min_isr: dict[int, int] = {}
        self.configs = ConfigHandlers(settings.min_isr)  # what the brokers read of the configs
        self.restarted: set[int] = set()
        self.totals = ReplicationTotals()
        self.timeline: list[Snapshot] = []
        self._seen: tuple[int, int, int] | None = None  # (controller, epoch, generation)
        self._stats: list[FetchGroup] = []  # the followers, as of the last step
        self._wakes: set[int] = set()
        self._gauges: Snapshot | None = None
        self._dirty = True

    # -- conditions -------------------------------------------------------------------------
    def activity(self, broker: int) -> BrokerActivity:
        return self.brokers.setdefault(broker, BrokerActivity())

    def _paused(self, b: int) -> bool:
        return self.activity(b).paused_until > self.now

    def _cut_off(self, b: int) -> bool:
        return self.activity(b).cut_off_until > self.now

    def _running(self, b: int) -> bool:
        return self._alive(b) and not self._paused(b)

    def conditions(self) -> r.Conditions:
        ids = [b for b in self.brokers if self._alive(b)]
        serving = frozenset(b for b in ids if not self._paused(b) and not self._cut_off(b))
        fetching = frozenset(b for b in serving if self.activity(b).stopped_until <= self.now)
        capacity = {}
        for b in sorted(fetching):
            a = self.activity(b)
            slow = a.slow_factor if a.slow_until > self.now else 1.0
            capacity[b] = self.settings.fetch_bytes_per_s / slow
        shares = deal(self._stats, capacity, *self.configs.rates())
        leader, follower = self.configs.throttled(self.topics)
        flush_ms, flush_messages = self.configs.flush_overrides(
            self.topics, self.settings.page_cache_flush_ms
        )
        return r.Conditions(
            start_ms=self.now,
            fetching=fetching,
            serving=serving,
            fetch_share=shares.fetch,
            caught_share=shares.caught,
            throttles=Throttles(leader, follower, shares.leader, shares.follower),
            rates={t: rate for t, (rate, _) in self.rates.items()},
            rate_anchors={t: since for t, (_, since) in self.rates.items()},
            bytes_per_record=self.sizes,
            min_isr=self.min_isr,
            fetch_wait_ms=self.settings.fetch_wait_ms,
            flush_periods_ms=self.settings.flush_periods_ms,
            flush_messages=self.settings.flush_messages,
            topic_flush_periods_ms=flush_ms,
            topic_flush_messages=flush_messages,
        )

    def _changed(self) -> None:
        self._dirty = True

    # -- time --------------------------------------------------------------------------------
    def advance_to(self, at_ms: int) -> None:
        """Every replica moves to ``at_ms`` under the conditions since the last step."""
        if at_ms <= self.now:
            return
        if self.logs is not None:
            self._account(at_ms)
            self.logs.advance(self.conditions(), at_ms)
        self.now = at_ms
        self._dirty = True

    def _account(self, at_ms: int) -> None:
        if self._gauges is not None:
            self.totals.add_interval(self._gauges, at_ms - self.now)

    # -- what the brokers learn from the controller ------------------------------------------
    def _receive(self) -> bool:
        """Apply the active controller's committed leadership, if it changed; true if so."""
        active = self._active()
        ctx = getattr(active, "ctx", None)
        if ctx is None or ctx.partitions is None:
            return False
        seen = (active.broker_id, ctx.epoch, ctx.generation)  # type: ignore[attr-defined]
        if seen == self._seen and not self.restarted:
            return False
        self._seen = seen
        for name in sorted(ctx.topics):
            if name not in self.topics:
                self.topics[name] = len(self.topics)
        for name, entry in ctx.topics.items():
            self.configs.topic_known(name, entry.config)
            self.min_isr[self.topics[name]] = self.configs.min_isr(name)
            self.sizes.setdefault(self.topics[name], 1024)
        index = {e.index: self.topics[n] for n, e in ctx.topics.items()}
        held = ctx.table.driver
        if self.logs is None:
            small = held is not None and len(held) <= self.settings.driver_rows
            self.logs = RowLogs(self.spark) if small else SparkLogs(self.spark)
        source: DataFrame | dict[tuple[int, int], CompactRow]
        if isinstance(self.logs, SparkLogs):
            source = ctx.partitions
        else:  # a controller that moved its table to Spark is read back to the driver
            source = held if held is not None else _held(ctx.partitions)
        self.logs.receive(
            source,
            index,
            frozenset(self.restarted),
            self.settings.use_epochs,
            self.now,
            frozenset(b for b in self.brokers if self._alive(b)),
            ctx.view().live_or_shutting_down.ids,
        )
        self.restarted.clear()
        return True

    # -- settle ------------------------------------------------------------------------------
    def settle(self) -> bool:
        """After the controllers drained at ``now``: receive, apply the ISR rules, propagate,
        and set the next wake-up. True if something was sent to a controller (drain again)."""
        received = self._receive()
        if self.logs is None or not (self._dirty or received):
            return False
        self._dirty = False
        sent = self._apply_isr_rules()
        if self._propagate() or sent:
            return True  # the controllers have work: settle again once they drained
        self._look_ahead()
        return False

    def _ticking(self) -> frozenset[int]:
        if self.now <= self.checked_ms:
            return frozenset()
        self.checked_ms = self.now
        period = self.settings.rule.period_ms
        return frozenset(
            b
            for b, a in self.brokers.items()
            if self._running(b)
            and self.now > a.started_ms
            and (self.now - a.started_ms) % period == 0
        )

    def _apply_isr_rules(self) -> bool:
        assert self.logs is not None
        c = self.conditions()
        rows = self.logs.isr_updates(c, self.settings.rule, self._ticking(), self.now)
        if not rows:
            return False
        names = {i: n for n, i in self.topics.items()}
        self.totals.isr_shrinks += sum(x[ie.SHRUNK] for x in rows)
        self.totals.isr_expands += sum(x[ie.EXPANDED] for x in rows)
        if self.settings.alter_isr:
            by_leader: dict[int, dict[ev.TopicPartition, ev.AlterIsrItem]] = {}
            for x in rows:
                tp = ev.TopicPartition(names[x[s.TOPIC_INDEX]], x[s.PARTITION])
                item = ev.AlterIsrItem(x[s.LEADER_EPOCH], tuple(x[ie.NEW_ISR]), x[s.ZK_VERSION])
                by_leader.setdefault(x[s.LEADER], {})[tp] = item
            active = self._active()
            for leader, items in sorted(by_leader.items()):
                if active is not None:
                    active.events.put(  # type: ignore[attr-defined]
                        ev.AlterIsrReceived(leader, self._broker_epoch(leader), items, self._answer)
                    )
            return True
        writes = [
            (names[x[s.TOPIC_INDEX]], x[s.PARTITION], x[s.LEADER], x[s.LEADER_EPOCH],
             list(x[ie.NEW_ISR]), x[s.CONTROLLER_EPOCH], x[s.ZK_VERSION])
            for x in rows
        ]  # fmt: skip
        versions = self._write_isr(writes)
        done = [
            (x[s.TOPIC_INDEX], x[s.PARTITION], list(x[ie.NEW_ISR]), v)
            for x, v in zip(rows, versions, strict=True)
            if v >= 0
        ]
        self.totals.failed_isr_updates += len(rows) - len(done)
        for x, v in zip(rows, versions, strict=True):
            if v >= 0:
                a = self.activity(x[s.LEADER])
                a.pending.add((names[x[s.TOPIC_INDEX]], x[s.PARTITION]))
                a.last_change_ms = self.now
        if done:
            self.logs.with_isr(done)
        self._dirty = True  # the rules run again on the new ISRs
        return False

    def _answer(self, errors: object) -> None:
        """The controller's AlterIsr answer: partitions it refused count as failed updates."""
        if isinstance(errors, dict):
            self.totals.failed_isr_updates += sum(1 for e in errors.values() if e != "NONE")

    def _propagate(self) -> bool:
        """The ``isr-change-propagation`` task of each broker whose run falls now (§12.4);
        true if a notification was written."""
        due = propagating(self.brokers, self._running, self.now)
        for b in due:
            a = self.brokers[b]
            self.totals.isr_change_notifications += admin.propagate_isr_changes(
                self._broker_zk(b), sorted(a.pending)
            )
            a.pending.clear()
            a.last_propagation_ms = self.now
        return bool(due)

    def _look_ahead(self) -> None:
        assert self.logs is not None
        self._stats = self.logs.fetch_stats(self.conditions())
        c = self.conditions()
        checking = frozenset(b for b in self.brokers if self._running(b))
        starts = {b: a.started_ms for b, a in self.brokers.items()}
        # Crashed brokers whose sessions have not expired yet still lead and sit in ISRs.
        down = frozenset(b for b in self.brokers if not self._alive(b))
        row = self.logs.outlook(
            c, self.settings.rule, checking, starts, max(self.checked_ms, self.now - 1), down
        )
        n = self.totals
        keys = (ie.URP, ie.UNDER_MIN, ie.AT_MIN, ie.OFFLINE, ie.LEADER_DOWN)
        count = {k: int(row[k] or 0) for k in keys}
        gauges = Snapshot(  # an empty table (every topic deleted) sums to null: 0
            self.now, count[ie.URP], count[ie.UNDER_MIN], count[ie.AT_MIN], count[ie.OFFLINE],
            n.isr_shrinks, n.isr_expands, n.failed_isr_updates, n.isr_change_notifications,
            count[ie.LEADER_DOWN],
        )  # fmt: skip
        if self._gauges is None or counts(gauges) != counts(self._gauges):
            if self.timeline and self.timeline[-1].at_ms == self.now:
                self.timeline.pop()  # one line per moment: how it settled
            self.timeline.append(gauges)
        self._gauges = gauges
        candidates = [
            x
            for x in (row[ie.NEXT_MS], next_propagation(self.brokers, self._running, self.now))
            if x is not None
        ]
        if candidates:
            self.wake_at(int(min(candidates)))

    def wake_at(self, at_ms: int) -> None:
        """Run a step at ``at_ms`` (the cluster drains after it and calls ``settle``)."""
        if at_ms in self._wakes or at_ms <= self.now:
            return
        self._wakes.add(at_ms)

        def wake() -> None:
            self._wakes.discard(at_ms)
            self._dirty = True

        self._schedule_at(at_ms, wake)

    # -- what happens to brokers and producers ------------------------------------------------
    def broker_started(self, broker: int, restarted: bool) -> None:
        a = self.activity(broker)
        a.started_ms = a.last_change_ms = a.last_propagation_ms = self.now
        a.paused_until = a.stopped_until = a.cut_off_until = -1
        a.pending.clear()
        if restarted:
            self.restarted.add(broker)
        self._changed()

    def broker_stopped(self) -> None:
        """A broker's process stopped: it serves and fetches nothing from now on, whether or not
        the controller knows yet."""
        self._changed()

    def until(self, brokers: Sequence[int], attribute: str, duration_ms: int) -> None:
        """Set ``attribute`` (``paused_until`` ...) of ``brokers`` to now + duration, and wake
        then (the conditions change)."""
        end = self.now + duration_ms
        for b in brokers:
            setattr(self.activity(b), attribute, end)
        self.wake_at(end)
        self._changed()

    def slow(self, brokers: Sequence[int], factor: float, duration_ms: int) -> None:
        for b in brokers:
            self.activity(b).slow_factor = factor
        self.until(brokers, "slow_until", duration_ms)

    def set_rate(self, topics: Sequence[str] | None, records_per_s: float, size: int) -> None:
        for t in self._topic_indices(topics):
            self.rates[t] = (records_per_s, self.now)
            self.sizes[t] = size
        self._changed()

    def produce(
        self, topics: Sequence[str] | None, partition: int | None, records: int, acks: str
    ) -> None:
        if self.logs is None:
            return
        c = self.conditions()
        indices = self._topic_indices(topics)
        self.logs.append(indices, partition, c.serving, records, acks, c)
        self._changed()

    def topic_config_changed(self, topic: str, config: dict[str, str]) -> None:
        """The brokers' ``TopicConfigHandler``: ``/config/topics/<topic>`` now holds ``config``."""
        self.configs.topic_changed(topic, config)
        if topic in self.topics:
            self.min_isr[self.topics[topic]] = self.configs.min_isr(topic)
        self._changed()

    def broker_config_changed(self, broker: int, config: dict[str, str]) -> None:
        """The broker's ``BrokerConfigHandler``: ``/config/brokers/<broker>`` holds ``config``."""
        self.configs.broker_changed(broker, config)
        self._changed()

    def lose_unflushed(self, brokers: Sequence[int]) -> None:
        if self.logs is not None:
            self.logs.lose_unflushed(brokers)
        self._changed()

    def _topic_indices(self, topics: Sequence[str] | None) -> list[int]:
        if topics is None:
            return sorted(self.topics.values())
        return sorted(self.topics[t] for t in topics if t in self.topics)

    # -- results -----------------------------------------------------------------------------
    def loss_totals(self) -> tuple[int, int]:
        """Acknowledged records lost and divergent partitions, over the whole table."""
        return (0, 0) if self.logs is None else self.logs.loss_totals()

    def produce_totals(self) -> tuple[int, int]:
        """Records refused with NOT_ENOUGH_REPLICAS and records sent while no leader served."""
        return (0, 0) if self.logs is None else self.logs.produce_totals()

    def partition_results(self) -> DataFrame | None:
        """Per partition: high watermark, each replica's LEO, acknowledged records lost and
        whether replicas diverge (topic names, not indices)."""
        if self.logs is None:
            return None
        return self.logs.results({i: n for n, i in self.topics.items()})


def _held(partitions: DataFrame | None) -> dict[tuple[int, int], CompactRow]:
    """The controller's Spark table as driver rows."""
    assert partitions is not None
    w = s.width(partitions)
    rows = (CompactRow.of(row.asDict(), w) for row in partitions.collect())
    return {x.key: x for x in rows}
