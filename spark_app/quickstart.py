"""The quickstart job: generate a cluster, crash brokers, and show where leadership lands.

It runs Kafka's broker-failure sequence (spec §8.2 b–e, ``controller.handlers.brokers``) in bulk:
partitions whose leader is no longer online go OfflinePartition, every Offline/New partition is
elected with the offline strategy, then the dead brokers' replicas go OfflineReplica (ISR
shrink). Only per-broker aggregates reach the driver.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from controller.handlers.brokers import (
    ELECTED,
    FAILED_ELECTION,
    UNCLEAN_ELECTED,
    on_broker_failure,
)
from spark_app.limits import MAX_BROKERS, MAX_PARTITIONS
from spark_app.scenario.cluster import generated_partitions_problem
from spark_app.scenario.loading import read_yaml_file
from spark_app.scenario.model import SparkSettings
from statemachines import schemas as s
from statemachines.brokers import BrokerSet, ClusterView
from statemachines.generator import SyntheticCluster, generate_cluster
from statemachines.layout import to_compact
from statemachines.rebalance import RATIO, imbalance_ratios

_STRICT = ConfigDict(extra="forbid", frozen=True)


class GeneratedCluster(BaseModel):
    model_config = _STRICT
    brokers: int = Field(100, ge=1, le=MAX_BROKERS, description="broker count; ids 0..brokers-1")
    racks: int = Field(3, ge=0, description="racks, assigned round-robin; 0 = no racks")
    topics: int = Field(1000, ge=1, le=MAX_PARTITIONS, description="topic count")
    partitions_per_topic: int = Field(
        100, ge=1, le=MAX_PARTITIONS, description="partitions of every topic"
    )
    replication_factor: int = Field(3, ge=1, le=s.MAX_WIDTH, description="replicas per partition")

    @model_validator(mode="after")
    def _fits(self) -> GeneratedCluster:
        problems = fit_problems(self.brokers, self.racks, self.replication_factor)
        too_many = generated_partitions_problem(self.topics, self.partitions_per_topic)
        if too_many is not None:
            problems.append(too_many)
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def generate(self, spark: SparkSession, seed: int) -> SyntheticCluster:
        """The generated cluster (lazy): Kafka's assignment drawn from ``seed``."""
        return generate_cluster(
            spark,
            self.brokers,
            self.racks,
            self.topics,
            self.partitions_per_topic,
            self.replication_factor,
            seed,
        )


def fit_problems(brokers: int, racks: int, replication_factor: int) -> list[str]:
    """What keeps a generated cluster of these sizes from being placed by Kafka's algorithm."""
    problems = []
    if replication_factor > brokers:
        problems.append(
            f"replication_factor {replication_factor} is larger than the broker count "
            f"{brokers}; lower it or add brokers"
        )
    if racks > brokers:
        problems.append(f"racks {racks} exceeds the broker count {brokers}")
    return problems


class QuickstartConfig(BaseModel):
    """``configs/quickstart.yaml``: a generated cluster and the brokers that crash."""

    model_config = _STRICT
    name: str = Field(description="run name")
    seed: int = Field(0, description="seed of the generated assignment")
    spark: SparkSettings = Field(default_factory=SparkSettings, description="Spark settings")
    cluster: GeneratedCluster = Field(description="the generated cluster")
    fail_brokers: list[int] = Field(description="brokers that crash at once (ids)")
    unclean_leader_election_enable: bool = Field(
        False, description="Kafka's unclean.leader.election.enable for every topic"
    )

    @model_validator(mode="after")
    def _known_brokers(self) -> QuickstartConfig:
        unknown = sorted(b for b in self.fail_brokers if not 0 <= b < self.cluster.brokers)
        if unknown:
            raise ValueError(
                f"fail_brokers {unknown} are not brokers of the cluster (ids 0..{self.cluster.brokers - 1})"
            )
        return self


def load_config(path: str | Path) -> QuickstartConfig:
    """The config file, read as strictly as a scenario (``ScenarioError`` when it cannot be read
    or parsed, pydantic's ``ValidationError`` when it does not validate)."""
    return QuickstartConfig.model_validate(read_yaml_file(path))


def leader_table(before: DataFrame, after: DataFrame) -> DataFrame:
    """broker, leaders before, leaders after, imbalance ratio after — one row per broker."""
    counts_before = before.groupBy(F.col(s.LEADER).alias("broker")).agg(
        F.count("*").alias("leaders_before")
    )
    counts_after = after.groupBy(F.col(s.LEADER).alias("broker")).agg(
        F.count("*").alias("leaders_after")
    )
    ratios = imbalance_ratios(after).select("broker", F.round(RATIO, 4).alias("imbalance_after"))
    return (
        counts_before.join(counts_after, "broker", "full")
        .join(ratios, "broker", "full")
        .na.fill(0)
        .orderBy("broker")
    )


def run(spark: SparkSession, config: QuickstartConfig) -> dict[str, object]:
    c = config.cluster
    cluster = c.generate(spark, config.seed)
    before = to_compact(cluster.partitions, cluster.topics, c.replication_factor).cache()
    total = before.count()  # commit point: the starting generation
    dead = BrokerSet.of(config.fail_brokers)
    view = ClusterView(BrokerSet.of(range(c.brokers)) - dead, controller_epoch=2)
    result = on_broker_failure(
        before, dead, view, F.lit(config.unclean_leader_election_enable), deleting=[]
    ).cache()
    after = result.select(*s.compact_columns(c.replication_factor))
    summary = result.agg(
        F.sum(ELECTED).alias("elected"),
        F.sum(FAILED_ELECTION).alias("failed"),
        F.sum(UNCLEAN_ELECTED).alias("unclean"),
    ).first()
    offline = after.where(F.col(s.LEADER) == s.NO_LEADER).count()
    table = leader_table(before, after).collect()
    return {
        "partitions": total,
        "failed_brokers": sorted(dead.ids),
        "elected": summary["elected"] or 0,
        "no_leader_elected": summary["failed"] or 0,
        "unclean_elections": summary["unclean"] or 0,
        "offline_partitions": offline,
        "brokers": [r.asDict() for r in table],
    }


def render(result: dict[str, object]) -> str:
    rows = result["brokers"]
    assert isinstance(rows, list)
    lines = [
        f"partitions: {result['partitions']}  failed brokers: {result['failed_brokers']}",
        f"elected: {result['elected']}  no leader: {result['no_leader_elected']}  "
        f"unclean: {result['unclean_elections']}  offline partitions: {result['offline_partitions']}",
        "",
        f"{'broker':>6} {'leaders before':>15} {'leaders after':>14} {'imbalance after':>16}",
    ]
    for r in rows:
        broker = "none" if r["broker"] == s.NO_LEADER else str(r["broker"])
        lines.append(
            f"{broker:>6} {r['leaders_before']:>15} {r['leaders_after']:>14} {r['imbalance_after']:>16.4f}"
        )
    return "\n".join(lines)
