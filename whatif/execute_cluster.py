"""The emulated cluster ``execute`` replays a plan on: Kafka's controller over brokers with logs.

``execution_scenario`` maps the snapshot's topics that the plan names to a scenario with
``emulation.replication`` on: the brokers (live ones registered, the rest named but down), each
topic with its current assignment, and at t=0 a ``produce`` event per moved partition that fills
its leader's log with the partition's size. ``ExecutionCluster`` starts that scenario as ``kce
run`` does, lets the existing followers copy the logs (the warm-up: the plan starts once every
follower holds its partition's log, so the initial copy is not counted), then takes API
reassignments (KIP-455), and the throttles ``kafka-reassign-partitions --throttle`` writes with
them, and steps virtual time from one thing that happens to the next.

Record size: a topic's records are ``bytes_per_record`` bytes, the smallest power of two from
1 KiB up that keeps its largest partition at most ``MAX_RECORDS`` records (1 KiB up to 1 GiB
partitions, 1 MiB from 1 TiB). The emulated copy is in whole records: a partition holds
``round(bytes / bytes_per_record)`` records, and a new replica is seen to catch up within two
records' time of reaching the leader's end (the replication model's wake-up margin).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from controller.emulation.cluster import EmulatedCluster
from controller.emulation.replication import Replication
from controller.events import controller_events as ev
from controller.partition_store import Ensemble, bootstrap_cluster
from spark_app.actions import Actor
from spark_app.cluster_builder import initial_partitions
from spark_app.replication_outputs import replication_settings
from spark_app.runner import open_zookeeper, settings_of
from spark_app.scenario import Scenario, ScenarioError, format_problems, scenario_from_data
from spark_app.scenario import events as se
from spark_app.scenario.broker_config import BrokerConfig
from spark_app.scenario.kafka_config import TopicConfig
from statemachines import schemas as s
from statemachines.layout import to_public_partitions
from whatif.cluster import WhatIfInputError
from whatif.execute_throttles import ThrottleWrites
from whatif.execute_waves import PartitionKey

MIN_BYTES_PER_RECORD = 1024
MAX_RECORDS = 1 << 20


def bytes_per_record(largest_partition_bytes: int) -> int:
    """The record size of a topic whose largest partition holds this many bytes."""
    size = MIN_BYTES_PER_RECORD
    while largest_partition_bytes > size * MAX_RECORDS:
        size *= 2
    return size


def records_of(size_bytes: int, record_bytes: int) -> int:
    """Whole records of ``record_bytes`` closest to ``size_bytes`` (at least one if any)."""
    if size_bytes <= 0:
        return 0
    return max(1, (size_bytes + record_bytes // 2) // record_bytes)


def execution_scenario(
    assignments: Mapping[str, Sequence[Sequence[int]]],
    live: Sequence[int],
    racks: Mapping[int, str | None],
    sizes: Mapping[PartitionKey, int],
    fetch_mb_per_s: float,
) -> Scenario:
    """The scenario of the plan's topics: ``assignments`` (topic → replicas of partitions 0..n-1),
    ``live`` brokers, ``racks``, and ``sizes`` (bytes of each partition to fill)."""
    named = {b for replicas in assignments.values() for r in replicas for b in r}
    brokers = sorted(set(live) | named)
    # The scenario takes racks on every broker or on none; racks do not change copy times.
    racked = all(racks.get(b) is not None for b in brokers)
    topics, events = [], []
    for topic, replicas in sorted(assignments.items()):
        rfs = sorted({len(r) for r in replicas})
        if len(rfs) != 1:
            raise WhatIfInputError(
                f"topic {topic} has partitions of replication factor {rfs[0]} and {rfs[-1]} — "
                "execute emulates topics of one replication factor; move those partitions in "
                "a plan of their own"
            )
        topics.append({
            "name": topic,
            "partitions": len(replicas),
            "replication_factor": rfs[0],
            "assignment": {str(p): list(r) for p, r in enumerate(replicas)},
        })  # fmt: skip
        filled = {p: n for (t, p), n in sizes.items() if t == topic and n > 0}
        if not filled:
            continue
        record = bytes_per_record(max(filled.values()))
        # A zero rate only sets the topic's record size; nothing is produced after t=0.
        events.append({"at": 0, "type": "set_produce_rate", "topic": topic,
                       "records_per_s": 0.0, "bytes_per_record": record})  # fmt: skip
        for p, n in sorted(filled.items()):
            events.append({"at": 0, "type": "produce", "topic": topic, "partition": p,
                           "records": records_of(n, record), "acks": "1"})  # fmt: skip
    data: dict[str, Any] = {
        "name": "whatif-execute",
        # No preferred-leader rebalance in the middle of the plan: the executor owns leadership.
        "config": {"auto.leader.rebalance.enable": False},
        "emulation": {"replication": True, "fetch_mb_per_s": float(fetch_mb_per_s)},
        "cluster": {
            "brokers": [{"id": b, **({"rack": racks[b]} if racked else {})} for b in brokers],
            "topics": topics,
            "live_brokers": sorted(live),
        },
        "events": events,
        "until": 0,
    }
    try:
        return scenario_from_data(data)
    except ScenarioError as err:
        raise WhatIfInputError(
            f"the plan's topics cannot be emulated: {format_problems(err.problems, 'snapshot')}"
        ) from None


class ExecutionCluster:
    """The scenario's cluster, started and warmed up; the plan's moves go in through ``submit``."""

    def __init__(self, spark: SparkSession, scenario: Scenario) -> None:
        self.spark = spark
        self.scenario = scenario
        self.ensemble: Ensemble = open_zookeeper(scenario, "emulated")
        self.cluster = EmulatedCluster(
            spark,
            self.ensemble,
            settings_of(scenario),
            alter_isr=scenario.config.ibp_at_least("2.7-IV2"),
        )
        self.replication: Replication = self.cluster.model_replication(
            replication_settings(scenario)
        )
        self._start()
        self.actor = Actor(self.cluster, scenario.seed)
        for event in scenario.timeline():  # the logs fill at t=0
            self.actor.apply(event)
        self.cluster.drain()
        self.warm_up_ms = self._warm_up()

    def _start(self) -> None:
        """Bootstrap ZooKeeper and start the brokers and their controllers, as ``kce run``."""
        scenario, cluster = self.scenario, self.cluster
        starting = initial_partitions(self.spark, scenario)
        small = sum(scenario.topic_partition_counts().values()) <= scenario.execution.driver_rows
        rows = [r.asDict() for r in starting.collect()] if small else None
        bootstrap_cluster(cluster.admin, {}, starting, cluster.states, rows=rows)
        for b in scenario.brokers():
            cluster.add_broker(b.id, b.rack)
        live = scenario.initial_live_brokers()
        for b in live:
            cluster.start_broker(b, start_controller=False)
        for b in live:
            cluster.brokers[b].controller.startup()
            cluster.drain()

    def close(self) -> None:
        self.ensemble.close()

    # -- time ---------------------------------------------------------------------------------
    def now_ms(self) -> int:
        return self.cluster.clock.now_ms()

    def _followers_behind(self) -> int:
        logs = self.replication.logs
        if logs is None:
            return 0
        return sum(g.behind for g in logs.fetch_stats(self.replication.conditions()))

    def _warm_up(self) -> int:
        """Let the followers copy the logs filled at t=0; the time it took (virtual ms).

        A follower in the ISR that catches up changes nothing, so no timer marks it, and the
        brokers' shares of fetch throughput are only dealt again at a step. Time therefore jumps
        by a bound, the busiest broker's bytes at its fetch throughput, or to the next timer if
        sooner: each jump lets at least one follower finish (it copies at least the smallest
        remaining log), and the step after it deals the freed throughput to the others.
        """
        capacity = self.replication.settings.fetch_bytes_per_s
        per_broker: dict[int, float] = {}
        records: dict[PartitionKey, int] = {}
        record_size: dict[str, int] = {}
        for e in self.scenario.events:
            if isinstance(e, se.Produce) and e.partition is not None:
                records[(e.topic, e.partition)] = e.records
            elif isinstance(e, se.SetProduceRate):
                record_size[e.topic] = e.bytes_per_record
        for topic in self.scenario.cluster.topics:
            for p, replicas in (topic.assignment or {}).items():
                n = records.get((topic.name, p), 0)
                for b in replicas if n else ():  # every replica: a bound (the leader copies none)
                    per_broker[b] = per_broker.get(b, 0.0) + (n + 2) * record_size[topic.name]
        bound = math.ceil(max(per_broker.values(), default=0.0) * 1000 / capacity) + 1
        followers = sum(
            len(t.assignment or {}) * t.replication_factor for t in self.scenario.cluster.topics
        )
        for _ in range(followers + 1):
            if self._followers_behind() == 0:
                return self.now_ms()
            due = self.cluster.timer.next_expiration_ms()
            at = self.now_ms() + bound
            self.cluster.advance_to(at if due is None else max(min(due, at), self.now_ms() + 1))
        raise RuntimeError("the followers did not copy the partitions' logs")

    def step(self, deadline_ms: int) -> bool:
        """Move to the next moment something is due (and run it); False if nothing is due
        before ``deadline_ms``."""
        due = self.cluster.timer.next_expiration_ms()
        if due is None or due > deadline_ms:
            return False
        self.cluster.advance_to(max(due, self.now_ms()))
        return True

    # -- the plan -----------------------------------------------------------------------------
    def throttle(self, writes: ThrottleWrites) -> None:
        """The topic configs and broker rates ``kafka-reassign-partitions --throttle`` sets,
        written as an admin writes them (the brokers apply them at once)."""
        now = self.now_ms()
        for topic, config in writes.topics.items():
            self.actor.apply(
                se.SetTopicConfig(at=now, topic=topic, config=TopicConfig.model_validate(config))
            )
        config = BrokerConfig.model_validate(writes.broker_config())
        self.actor.apply(se.SetBrokerConfig(at=now, brokers=writes.brokers, config=config))
        self.cluster.drain()

    def submit(self, targets: Mapping[PartitionKey, Sequence[int]]) -> None:
        """One AlterPartitionReassignments request for ``targets``, processed at once."""
        self.actor.alter_reassignments(
            {ev.TopicPartition(t, p): tuple(r) for (t, p), r in targets.items()}
        )
        self.cluster.drain()

    def completed(self, targets: Mapping[PartitionKey, Sequence[int]]) -> set[PartitionKey]:
        """Partitions of ``targets`` whose reassignment the controller completed: exactly the
        target replicas, none adding or removing."""
        active = self.cluster.active_controller()
        if active is None or active.ctx.partitions is None or not targets:
            return set()
        ctx = active.ctx
        held = ctx.table.driver
        if held is not None:
            index = {name: entry.index for name, entry in ctx.topics.items()}
            done = set()
            for (t, p), target in targets.items():
                row = held.get((index[t], p)) if t in index else None
                if (
                    row is not None
                    and row.adding_mask == 0
                    and row.removing_mask == 0
                    and list(row.replicas) == list(target)
                ):
                    done.add((t, p))
            return done
        keys = self.spark.createDataFrame(
            [(t, p) for t, p in targets], f"{s.TOPIC} string, {s.PARTITION} int"
        )
        rows = (
            to_public_partitions(ctx.partitions, ctx.topics_frame())
            .join(F.broadcast(keys), [s.TOPIC, s.PARTITION], "left_semi")
            .where((F.size(s.ADDING_REPLICAS) == 0) & (F.size(s.REMOVING_REPLICAS) == 0))
            .select(s.TOPIC, s.PARTITION, s.REPLICAS)
            .collect()
        )
        return {
            (r[s.TOPIC], r[s.PARTITION])
            for r in rows
            if list(r[s.REPLICAS]) == list(targets[(r[s.TOPIC], r[s.PARTITION])])
        }

    def under_replicated(self) -> int:
        """The brokers' UnderReplicatedPartitions now (a replica being added counts)."""
        timeline = self.replication.timeline
        return timeline[-1].under_replicated if timeline else 0
