"""Every way a partitions table can break the cluster-state model, as one lazy DataFrame.

``model_violations`` returns one row per offending partition with the list of what is wrong;
nothing is repaired. The controller (or an importer) runs it once and reports; see
``spark_app.validate``.
"""

from __future__ import annotations

from collections.abc import Collection

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from statemachines import schemas as s
from statemachines.partition_states import PartitionState

KINDS = "violations"

# kind -> what a user should do about it
FIXES: dict[str, str] = {
    "empty_replicas": "give every partition at least one replica",
    "duplicate_replicas": "list each broker at most once per replica set",
    "duplicate_partition": "keep one row per (topic, partition)",
    "negative_broker_id": "broker ids are >= 0 (-1 is only 'no leader')",
    "unknown_broker_id": "only use registered broker ids",
    "isr_not_subset_of_replicas": "ISR members must be assigned replicas",
    "duplicate_isr": "list each ISR member once",
    "leader_not_in_replicas": "the leader must be an assigned replica, or -1 for none",
    "adding_or_removing_not_in_replicas": "adding/removing replicas are part of the full replica set",
    "negative_epoch": "leader_epoch and controller_epoch are >= 0",
    "bad_zk_version": "zk_version is >= 0, or -1 when the partition has no state znode",
    "unknown_state": "state is one of " + ", ".join(p.name for p in PartitionState),
    "replica_set_too_wide": "raise the working width or shrink the replica set",
}


def _all_brokers() -> Column:
    return F.concat(
        F.col(s.REPLICAS), F.col(s.ISR), F.col(s.ADDING_REPLICAS), F.col(s.REMOVING_REPLICAS)
    )


def model_violations(
    partitions: DataFrame,
    known_brokers: Collection[int] | None = None,
    max_width: int | None = None,
) -> DataFrame:
    """(topic, partition, violations: array<string>) for every partition that breaks the model."""
    s.check_partitions(partitions)
    reps = F.col(s.REPLICAS)
    isr = F.col(s.ISR)
    leader = F.col(s.LEADER)
    duplicates = F.sum(F.lit(1)).over(Window.partitionBy(s.TOPIC, s.PARTITION))
    checks: dict[str, Column] = {
        "empty_replicas": F.size(reps) == 0,
        "duplicate_replicas": F.size(F.array_distinct(reps)) != F.size(reps),
        "duplicate_partition": duplicates > 1,
        "negative_broker_id": F.exists(_all_brokers(), lambda b: b < 0),
        "isr_not_subset_of_replicas": F.exists(isr, lambda b: ~F.array_contains(reps, b)),
        "duplicate_isr": F.size(F.array_distinct(isr)) != F.size(isr),
        "leader_not_in_replicas": (leader != s.NO_LEADER) & ~F.array_contains(reps, leader),
        "adding_or_removing_not_in_replicas": F.exists(
            F.concat(F.col(s.ADDING_REPLICAS), F.col(s.REMOVING_REPLICAS)),
            lambda b: ~F.array_contains(reps, b),
        ),
        "negative_epoch": (F.col(s.LEADER_EPOCH) < 0) | (F.col(s.CONTROLLER_EPOCH) < 0),
        "bad_zk_version": F.col(s.ZK_VERSION) < s.NO_ZK_VERSION,
        "unknown_state": ~F.col(s.STATE).isin([p.name for p in PartitionState]),
    }
    if known_brokers is not None:
        known = F.array(*[F.lit(int(b)) for b in sorted(set(known_brokers))]).cast("array<int>")
        checks["unknown_broker_id"] = F.exists(
            _all_brokers(), lambda b: (b >= 0) & ~F.array_contains(known, b)
        )
    if max_width is not None:
        checks["replica_set_too_wide"] = F.size(reps) > max_width
    kinds = F.array_compact(
        F.array(
            *[F.when(F.coalesce(cond, F.lit(True)), F.lit(kind)) for kind, cond in checks.items()]
        )
    )
    found = partitions.select(s.TOPIC, s.PARTITION, kinds.alias(KINDS))
    return found.where(F.size(F.col(KINDS)) > 0)
