"""The starting cluster of a scenario as a public partitions table (then bootstrapped into ZK).

Explicit topics use their assignment where given and Kafka's algorithm otherwise (per-topic draws
from the scenario seed); generated topics come from the synthetic-cluster generator. Every
partition starts as the controller leaves a created topic with all brokers up (leader = preferred
replica, full ISR, epoch 0), then the scenario's explicit ``state`` rows override it.
"""

from __future__ import annotations

import random

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_app.scenario import Scenario
from statemachines import schemas as s
from statemachines.assignment import assign_replicas_to_brokers
from statemachines.generator import generate_cluster

_GENERATED_SEED_OFFSET = 1_000_003  # explicit and generated topics draw from distinct streams


def _explicit_rows(scenario: Scenario) -> list[tuple]:
    brokers = scenario.brokers()
    rows = []
    for topic in scenario.cluster.topics:
        # Kafka draws with java.util.Random; a string-seeded Random keeps runs reproducible.
        rng = random.Random(f"{scenario.seed}:{topic.name}")
        placed = assign_replicas_to_brokers(
            brokers, topic.partitions, topic.replication_factor, rng=rng
        )
        assignment = {**placed, **{p: list(r) for p, r in (topic.assignment or {}).items()}}
        for p in range(topic.partitions):
            replicas = list(assignment[p])
            rows.append(
                (topic.name, p, replicas, [], [], replicas, replicas[0], 0, 0, 1, "OnlinePartition")
            )
    return rows


def initial_partitions(spark: SparkSession, scenario: Scenario) -> DataFrame:
    """The public partitions table of the scenario's starting cluster (lazy but for tiny draws)."""
    frames = []
    explicit = _explicit_rows(scenario)
    if explicit:
        frames.append(spark.createDataFrame(explicit, s.PARTITIONS_SCHEMA))
    gen = scenario.cluster.generate
    if gen is not None:
        brokers = scenario.brokers()
        racks = len({b.rack for b in brokers if b.rack is not None})
        generated = generate_cluster(
            spark, len(brokers), racks, gen.topics, gen.partitions_per_topic,
            gen.replication_factor, scenario.seed + _GENERATED_SEED_OFFSET, topic_prefix=gen.topic_prefix,
        )  # fmt: skip
        frames.append(generated.partitions)
    if not frames:
        return spark.createDataFrame([], s.PARTITIONS_SCHEMA)
    table = frames[0]
    for f in frames[1:]:
        table = table.unionByName(f)
    state = scenario.cluster.state
    if state is not None and state.partitions:
        overrides = spark.createDataFrame(
            [
                (
                    r.topic,
                    r.partition,
                    r.leader,
                    list(r.isr),
                    r.leader_epoch,
                    r.zk_version,
                    r.controller_epoch,
                    r.state.name,
                )
                for r in state.partitions
            ],
            "topic string, partition int, o_leader int, o_isr array<int>, o_epoch int, o_zk int, o_cepoch int, o_state string",
        )
        joined = table.join(F.broadcast(overrides), [s.TOPIC, s.PARTITION], "left")
        pick = lambda col, o: F.coalesce(F.col(o), F.col(col)).alias(col)  # noqa: E731
        table = joined.select(
            s.TOPIC, s.PARTITION, s.REPLICAS, s.ADDING_REPLICAS, s.REMOVING_REPLICAS,
            pick(s.ISR, "o_isr"), pick(s.LEADER, "o_leader"), pick(s.LEADER_EPOCH, "o_epoch"),
            pick(s.ZK_VERSION, "o_zk"), pick(s.CONTROLLER_EPOCH, "o_cepoch"), pick(s.STATE, "o_state"),
        )  # fmt: skip
    return table
