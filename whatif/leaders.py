"""``kce whatif leaders``: preferred-leader imbalance and the election that fixes it (spec §11).

* ``imbalance_ratio``: §11.2's per-broker ratio — of the partitions whose preferred replica (the
  first of the assignment) is the broker, the share that have leadership and another leader.
* ``brokers_over_threshold``: ratio strictly above ``leader.imbalance.per.broker.percentage`` / 100,
  the brokers for which the auto leader rebalance fires.
* ``elections``: what that rebalance elects (§11.2, Kafka 2.6+): for each broker over the
  threshold, its partitions led by another broker (or by none) whose preferred replica is live
  and in the ISR; none at all while any partition is being reassigned (Kafka 2.6–3.3).
* ``election.json``: the ``kafka-leader-election.sh --election-type preferred`` input that fixes
  it now: every partition not led by its preferred replica whose preferred replica is live and in
  the ISR, whichever broker's ratio it counts in (a manual election has no threshold).

Partitions of topics queued for deletion (marked in the snapshot, or leader -2) and partitions
without leadership are left out, as Kafka leaves them out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, IntegerType, StringType, StructField, StructType

from html_report.charts import bars_before_after, ratios_against_threshold
from html_report.page import Section
from statemachines import schemas as s
from statemachines.brokers import BrokerSet
from statemachines.columns import has_leadership
from whatif import broker_balance as bb
from whatif.answer import Answer, election_json
from whatif.cluster import WhatIfCluster, columns_frame
from whatif.isr_rules import DELETING
from whatif.options import LeadersOptions

PREFERRED = "preferred"
PREFERRED_ELECTION = "preferred_election"

BROKERS_SCHEMA = StructType(
    [
        StructField(s.BROKER, IntegerType(), nullable=False),
        StructField("rack", StringType(), nullable=True),
        StructField("leaders_before", IntegerType(), nullable=False),
        StructField("leaders_after", IntegerType(), nullable=False),
        StructField("preferred_partitions", IntegerType(), nullable=False),
        StructField("not_preferred_leader", IntegerType(), nullable=False),
        StructField("imbalance_ratio", DoubleType(), nullable=False),
    ]
)


def electable(live: Iterable[int]) -> Column:
    """A preferred election would move the leadership to the preferred replica: the partition
    has leadership, its topic is not being deleted (the ``deleting`` column; Kafka's
    ``onReplicaElection`` and ``checkAndTriggerAutoLeaderRebalance`` skip topics queued for
    deletion), it is led by another broker (or none), and its preferred replica is live and in
    the ISR (Kafka's ``preferred`` selection, §7.1)."""
    preferred = F.get(F.col(s.REPLICAS), 0)
    return (
        has_leadership()
        & ~F.col(DELETING)
        & (F.col(s.LEADER) != preferred)
        & BrokerSet.of(live).contains(preferred)
        & F.array_contains(F.col(s.ISR), preferred)
    )


def answer(spark: SparkSession, cluster: WhatIfCluster, options: LeadersOptions) -> Answer:
    """``leaders``: imbalance ratios, auto-rebalance elections and ``election.json``."""
    partitions = cluster.partitions.withColumn(DELETING, cluster.being_deleted()).withColumns(
        {PREFERRED: F.get(F.col(s.REPLICAS), 0), PREFERRED_ELECTION: electable(cluster.brokers)}
    )
    metrics: dict[str, dict[int, float]] = {"ratio": {}, "preferred": {}, "not_preferred": {}}
    metrics["leaders"] = {}
    for row in bb.broker_counts(partitions).collect():
        b = int(row[bb.BROKER])
        preferred = int(row[bb.PREFERRED])
        not_preferred = int(row[f"{s.LEADER}_{bb.NOT_PREFERRED}"])
        metrics["leaders"][b] = row[f"{s.LEADER}_{bb.LEADERS}"]
        metrics["preferred"][b] = preferred
        metrics["not_preferred"][b] = not_preferred
        if preferred:
            metrics["ratio"][b] = bb.ratio(not_preferred, preferred)
    # Kafka 2.6–3.3 skip the rebalance while any partition is being reassigned.
    moving = partitions.agg(F.max(F.size(s.ADDING_REPLICAS) + F.size(s.REMOVING_REPLICAS))).first()
    reassigning = moving is not None and (moving[0] or 0) > 0
    to_elect = [
        (r[s.TOPIC], int(r[s.PARTITION]), int(r[PREFERRED]), int(r[s.LEADER]))
        for r in partitions.where(F.col(PREFERRED_ELECTION))
        .select(s.TOPIC, s.PARTITION, PREFERRED, s.LEADER)
        .orderBy(s.TOPIC, s.PARTITION)
        .collect()
    ]
    return _answer(spark, cluster, partitions, metrics, reassigning, to_elect)


def _ints(values: Mapping[int, float], brokers: Iterable[int]) -> dict[int, int]:
    """``values`` of exactly ``brokers`` (0 where absent), ascending."""
    return {b: int(values.get(b, 0)) for b in sorted(brokers)}


def _answer(
    spark: SparkSession,
    cluster: WhatIfCluster,
    partitions: DataFrame,
    metrics: dict[str, dict[int, float]],
    reassigning: bool,
    to_elect: list[tuple[str, int, int, int]],
) -> Answer:
    pct = cluster.broker_defaults.leader_imbalance_per_broker_percentage
    everyone = list(cluster.brokers)
    ratios = dict(sorted(({b: 0.0 for b in everyone} | metrics.get("ratio", {})).items()))
    over = bb.over_threshold(ratios, pct)
    chosen = set() if reassigning else set(over)
    elections = sum(1 for _, _, preferred, _ in to_elect if preferred in chosen)
    leaders_before = _ints(metrics.get("leaders", {}), everyone)
    leaders_after = dict(leaders_before)
    for _, _, preferred, leader in to_elect:
        leaders_after[preferred] = leaders_after.get(preferred, 0) + 1
        if leader >= 0:
            leaders_after[leader] -= 1
    leaders_after = dict(sorted(leaders_after.items()))
    preferred_counts = _ints(metrics.get("preferred", {}), everyone)
    not_preferred = _ints(metrics.get("not_preferred", {}), everyone)
    summary: dict[str, Any] = {
        "imbalance_ratio": bb.by_broker_id(ratios),
        "brokers_over_threshold": over,
        "elections": elections,
        "leader_imbalance_per_broker_percentage": pct,
        "reassignment_in_progress": reassigning,
        "preferred_elections_now": len(to_elect),
        "leaders_per_broker": bb.by_broker_id(leaders_before),
        "leaders_per_broker_after": bb.by_broker_id(leaders_after),
    }
    brokers = sorted(set(ratios) | set(leaders_before))
    rows = {
        s.BROKER: brokers,
        "rack": [cluster.racks.get(b) for b in brokers],
        "leaders_before": [leaders_before.get(b, 0) for b in brokers],
        "leaders_after": [leaders_after.get(b, 0) for b in brokers],
        "preferred_partitions": [preferred_counts.get(b, 0) for b in brokers],
        "not_preferred_leader": [not_preferred.get(b, 0) for b in brokers],
        "imbalance_ratio": [ratios.get(b, 0.0) for b in brokers],
    }
    elect = F.col(PREFERRED_ELECTION)
    # The partitions as the election.json run leaves them: Kafka writes each election as epoch+1.
    after = partitions.withColumns(
        {
            s.LEADER: F.when(elect, F.col(PREFERRED)).otherwise(F.col(s.LEADER)),
            s.LEADER_EPOCH: F.col(s.LEADER_EPOCH) + elect.cast("int"),
            s.ZK_VERSION: F.col(s.ZK_VERSION) + elect.cast("int"),
        }
    ).select(*s.PARTITIONS_SCHEMA.fieldNames(), PREFERRED_ELECTION)
    tables = {"partitions_after": after, "brokers": columns_frame(spark, rows, BROKERS_SCHEMA)}
    plans = {"election.json": election_json([(t, p) for t, p, _, _ in to_elect])}
    lines = [
        f"Preferred-leader imbalance (Kafka's auto leader rebalance, threshold {pct}% per broker):",
        "  brokers over the threshold: " + (", ".join(map(str, over)) if over else "none"),
        f"  the auto rebalance would make {elections} preferred elections"
        + (" (none while a reassignment is in progress)" if reassigning else ""),
        f"  election.json: {len(to_elect)} partitions to elect now "
        "(kafka-leader-election.sh --election-type preferred --path-to-json-file election.json)",
    ]
    table_rows = [{name: rows[name][i] for name in rows} for i in range(len(brokers))]
    sections = [
        Section(
            "Imbalance ratios",
            "Per broker, the share of the partitions it is the preferred leader of that another "
            f"broker leads (§11.2); above {pct}% the auto leader rebalance fires.",
            charts=[ratios_against_threshold("Imbalance ratio per broker", ratios, pct / 100)],
        ),
        Section(
            "Leaders per broker",
            f"Before and after the {len(to_elect)} preferred elections of election.json.",
            charts=[
                bars_before_after("Leaders per broker", leaders_before, leaders_after, "leaders")
            ],
            tables=[table_rows],
        ),
    ]
    return Answer("leaders", summary, lines, tables, plans, sections)
