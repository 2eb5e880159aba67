"""Synthetic clusters: the partition and replica tables of a healthy cluster, as one lazy Spark job.

Brokers are numbered ``0..brokers-1`` (Kafka's test clusters and ``TestUtils`` count from 0). With
``racks > 0`` broker ``i`` sits in rack ``rack-{i mod racks}``; otherwise no broker has a rack.
Topic ``t`` is named ``{topic_prefix}{t}`` and has partitions ``0..partitions_per_topic-1``, placed
by Kafka's own assignment (rack-aware when racks are given) over the brokers sorted by id, exactly
as ``AdminZkClient.createTopic`` does. Kafka draws the start index and the initial shift with
``java.util.Random``; here they are hashes of ``(seed, topic index, draw)`` (``topic_draws``), so
the same seed gives the same cluster on any number of executors.

Every partition is as the controller leaves a freshly created topic with all brokers up:
``OnlinePartition``, leader = preferred replica, ISR = replicas, leader epoch 0, zk version 0,
no reassignment in flight; every replica is ``OnlineReplica``.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from statemachines.assignment import (
    REPLICA_SHIFT,
    START_INDEX,
    AdminOperationError,
    BrokerMetadata,
    InvalidPartitionsError,
    with_assigned_replicas,
)
from statemachines.partition_states import PartitionState
from statemachines.replica_states import ReplicaState
from statemachines.schemas import (
    ADDING_REPLICAS,
    BROKER,
    CONTROLLER_EPOCH,
    INITIAL_LEADER_EPOCH,
    INITIAL_ZK_VERSION,
    ISR,
    LEADER,
    LEADER_EPOCH,
    PARTITION,
    PARTITIONS_SCHEMA,
    REMOVING_REPLICAS,
    REPLICAS,
    REPLICAS_SCHEMA,
    STATE,
    TOPIC,
    TOPIC_INDEX,
    TOPICS_SCHEMA,
    ZK_VERSION,
)

# Which of Kafka's two ``rand.nextInt(n)`` calls a hash stands for, in Kafka's call order.
START_INDEX_DRAW = 0
SHIFT_DRAW = 1


@dataclass(frozen=True)
class SyntheticCluster:
    """A generated cluster: the broker list and lazy tables (see ``schemas``).

    ``topics`` is the topic dictionary (``TOPICS_SCHEMA``): topic index ``t`` is ``{prefix}{t}``.
    """

    brokers: tuple[BrokerMetadata, ...]
    topics: DataFrame
    partitions: DataFrame
    replicas: DataFrame


def synthetic_brokers(brokers: int, racks: int) -> tuple[BrokerMetadata, ...]:
    """Brokers ``0..brokers-1``, racks ``rack-0..`` round-robin when ``racks > 0``."""
    if brokers <= 0:
        raise AdminOperationError(f"A cluster needs at least one broker (got {brokers}).")
    if not 0 <= racks <= brokers:
        raise AdminOperationError(
            f"racks must be between 0 (no racks) and the broker count {brokers} (got {racks})."
        )
    return tuple(
        BrokerMetadata(b, f"rack-{b % racks}" if racks > 0 else None) for b in range(brokers)
    )


def topic_draw(seed: int, topic_index: Column, draw: int, n_brokers: int) -> Column:
    """A reproducible stand-in for one of Kafka's ``rand.nextInt(n_brokers)`` calls for a topic.

    ``draw`` is ``START_INDEX_DRAW`` or ``SHIFT_DRAW``. Inputs are hashed with fixed types
    (long seed, long topic index, int draw), so the value depends on the numbers only.
    """
    hashed = F.xxhash64(F.lit(seed).cast("long"), topic_index.cast("long"), F.lit(draw).cast("int"))
    return F.pmod(hashed, F.lit(n_brokers)).cast("int")


def topic_draws(seed: int, topic_index: Column, n_brokers: int) -> tuple[Column, Column]:
    """Kafka's two draws for a topic: (start index, initial shift), each in ``[0, n_brokers)``."""
    return (
        topic_draw(seed, topic_index, START_INDEX_DRAW, n_brokers),
        topic_draw(seed, topic_index, SHIFT_DRAW, n_brokers),
    )


def generate_cluster(
    spark: SparkSession,
    brokers: int,
    racks: int,
    topics: int,
    partitions_per_topic: int,
    replication_factor: int,
    seed: int = 0,
    controller_epoch: int = 1,
    topic_prefix: str = "topic-",
) -> SyntheticCluster:
    """Build a healthy cluster of ``topics * partitions_per_topic`` partitions; no job runs.

    Raises Kafka's assignment errors for impossible inputs (RF above the broker count, no
    partitions) before building anything.
    """
    broker_list = synthetic_brokers(brokers, racks)
    if topics <= 0:
        raise InvalidPartitionsError(f"Number of topics must be larger than 0 (got {topics}).")
    if partitions_per_topic <= 0:
        raise InvalidPartitionsError(
            f"Number of partitions must be larger than 0 (got {partitions_per_topic})."
        )
    # Row id -> (topic index, partition); floor() is exact far beyond any realistic row count.
    ids = spark.range(topics * partitions_per_topic)
    topic_index = F.floor(F.col("id") / partitions_per_topic).cast("int")
    start, shift = topic_draws(seed, F.col(TOPIC_INDEX), brokers)
    numbered = ids.select(
        topic_index.alias(TOPIC_INDEX),
        F.pmod(F.col("id"), F.lit(partitions_per_topic)).cast("int").alias(PARTITION),
    ).select(
        F.concat(F.lit(topic_prefix), F.col(TOPIC_INDEX).cast("string")).alias(TOPIC),
        F.col(PARTITION),
        start.alias(START_INDEX),
        shift.alias(REPLICA_SHIFT),
    )
    assigned = with_assigned_replicas(numbered, broker_list, replication_factor)
    no_brokers = F.array().cast("array<int>")
    partitions = assigned.select(
        F.col(TOPIC),
        F.col(PARTITION),
        F.col(REPLICAS),
        no_brokers.alias(ADDING_REPLICAS),
        no_brokers.alias(REMOVING_REPLICAS),
        F.col(REPLICAS).alias(ISR),
        F.get(F.col(REPLICAS), 0).alias(LEADER),
        F.lit(INITIAL_LEADER_EPOCH).alias(LEADER_EPOCH),
        F.lit(INITIAL_ZK_VERSION).alias(ZK_VERSION),
        F.lit(controller_epoch).alias(CONTROLLER_EPOCH),
        F.lit(PartitionState.OnlinePartition.name).alias(STATE),
    )
    replicas = partitions.select(
        F.col(TOPIC),
        F.col(PARTITION),
        F.explode(F.col(REPLICAS)).alias(BROKER),
        F.lit(ReplicaState.OnlineReplica.name).alias(STATE),
    )
    # Same column order as the model, so unions by position also work.
    topic_names = spark.range(topics).select(
        F.col("id").cast("int").alias(TOPIC_INDEX),
        F.concat(F.lit(topic_prefix), F.col("id").cast("string")).alias(TOPIC),
    )
    return SyntheticCluster(
        brokers=broker_list,
        topics=topic_names.select(*TOPICS_SCHEMA.fieldNames()),
        partitions=partitions.select(*PARTITIONS_SCHEMA.fieldNames()),
        replicas=replicas.select(*REPLICAS_SCHEMA.fieldNames()),
    )
