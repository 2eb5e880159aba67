"""What a partition keeps when brokers leave: the rules every what-if question that removes
brokers shares (``fail``, ``decommission``'s shutdown, ``roll``), and the rack-loss figure of
``fail --rack``, ``audit`` and ``exposure``.

* **The ISR is never emptied** (spec §6.3, ``ReplicaStateMachine.doRemoveReplicasFromIsr``): each
  removed broker leaves the ISR in turn (ascending id, as the failure handler groups them),
  except that the last member stays; a partition whose last ISR member is down keeps it and has
  leader -1, so a later clean election knows who was last in sync.
* **Offline**: no leader, and the topic not queued for deletion (``ControllerContext`` stops
  counting a topic in ``OfflinePartitionsCount`` once its deletion has started; a snapshot does
  not say whether it has, and such a topic is on its way out). **Under min ISR**: a leader and
  fewer ISR members than the topic's ``min.insync.replicas``. A topic being deleted is neither.
* **A partition Kafka left without a leader stays so**: the controller elects every leaderless
  partition that has an electable replica on each broker change (§5.4, §8.1), so the snapshot's
  leaderless partitions have none, and removing more brokers cannot give them one.
* **Offline after losing brokers S** (§7.1 offline election, §8.2): no live leader outside S and
  no live ISR member outside S, nor — where the topic allows unclean election — any live
  replica outside S. ``needed_to_fail`` gives each partition the live brokers S must contain.
  A rack's loss takes a partition offline when all of those are in the rack (a rackless broker
  is in no rack): with unclean election off, when its whole live ISR is in the rack.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, IntegerType, StringType, StructField, StructType

from statemachines import schemas as s
from statemachines.brokers import BrokerSet
from statemachines.columns import has_leadership
from whatif.cluster import WhatIfCluster, columns_frame

MIN_ISR = "min_insync_replicas"
UNCLEAN = "unclean_leader_election_enable"
DELETING = "deleting"

TOPICS = StructType(
    [
        StructField(s.TOPIC_INDEX, IntegerType(), nullable=False),
        StructField(s.TOPIC, StringType(), nullable=False),
        StructField(MIN_ISR, IntegerType(), nullable=False),
        StructField(UNCLEAN, BooleanType(), nullable=False),
    ]
)

BrokerTest = Callable[[Column], Column]


def topics_frame(spark: SparkSession, cluster: WhatIfCluster, topics: tuple[str, ...]) -> DataFrame:
    """(topic_index, topic, min_insync_replicas, unclean_leader_election_enable) per topic."""
    configs = [cluster.configs_of(t) for t in topics]
    columns = {
        s.TOPIC_INDEX: list(range(len(topics))),
        s.TOPIC: list(topics),
        MIN_ISR: [c.min_insync_replicas for c in configs],
        UNCLEAN: [c.unclean_leader_election_enable for c in configs],
    }
    return columns_frame(spark, columns, TOPICS)


def with_topic_configs(cluster: WhatIfCluster, rows: DataFrame) -> DataFrame:
    """``rows`` (a ``topic`` column) with each topic's effective ``min_insync_replicas``,
    ``unclean_leader_election_enable`` and ``deleting`` (queued for deletion). No job."""
    spark = rows.sparkSession
    topics = topics_frame(spark, cluster, tuple(sorted(cluster.topic_configs))).drop(s.TOPIC_INDEX)
    defaults = cluster.broker_defaults
    return rows.join(F.broadcast(topics), s.TOPIC, "left").withColumns(
        {
            MIN_ISR: F.coalesce(F.col(MIN_ISR), F.lit(defaults.min_insync_replicas)),
            UNCLEAN: F.coalesce(F.col(UNCLEAN), F.lit(defaults.unclean_leader_election_enable)),
            DELETING: cluster.being_deleted(),
        }
    )


def isr_after_removing(isr: Column, removed: BrokerTest) -> Column:
    """The ISR once each ``removed`` member has left it, one at a time in ascending id: the
    last member never leaves (§6.3), so the largest removed id stays when no other is left."""
    kept = F.filter(isr, lambda b: ~removed(b))
    last = F.array(F.array_max(F.filter(isr, removed)))
    return F.when((F.size(kept) > 0) | (F.size(isr) == 0), kept).otherwise(last)


def is_offline(leader: Column, deleting: Column) -> Column:
    """No leader, the topic not being deleted."""
    return (leader == s.NO_LEADER) & ~deleting


def is_under_min_isr(leader: Column, isr_size: Column, min_isr: Column, deleting: Column) -> Column:
    """A leader with fewer ISR members than ``min.insync.replicas``, the topic not being deleted."""
    return (leader >= 0) & (isr_size < min_isr) & ~deleting


def left_offline(deleting: Column) -> Column:
    """A partition with a state znode that Kafka left without a leader: it has no electable
    replica, and no question that removes brokers elects it."""
    return has_leadership() & (F.col(s.LEADER) == s.NO_LEADER) & ~deleting


def needed_to_fail(live: BrokerSet, deleting: Column) -> Column:
    """The sorted live brokers whose loss takes the partition offline (over rows with an
    ``unclean_leader_election_enable`` column): its live leader and the live replicas the
    offline election may pick — ISR members, or every replica where the topic allows unclean
    election. Empty for a partition already offline; a partition without a state znode needs
    its live leader only (nothing elects it)."""
    leader, isr = F.col(s.LEADER), F.col(s.ISR)
    electable = F.filter(
        s.REPLICAS,
        lambda r: live.contains(r) & (F.col(UNCLEAN) | F.array_contains(isr, r) | (r == leader)),
    )
    none = F.array().cast("array<int>")
    kept = F.when(live.contains(leader), F.array(leader)).otherwise(none)
    return (
        F.when(left_offline(deleting), none)
        .when(has_leadership(), F.array_sort(electable))
        .otherwise(kept)
    )


_ANY_RACK = "\u0000any"  # a partition already offline is offline whichever rack fails


def rack_loss(
    rows: DataFrame, live: Iterable[int], racks: Mapping[int, str | None]
) -> dict[str, int]:
    """Rack → partitions offline if every live broker of the rack failed (one job), for rows
    with the public ``replicas``, ``isr``, ``leader``, ``zk_version`` columns and those of
    ``with_topic_configs``; every rack of ``racks`` is named. Topics being deleted are left out,
    as from ``fail``'s count."""
    racked = {b: r for b, r in racks.items() if r is not None}
    names = sorted(set(racked.values()))
    if not names:
        return {}
    pairs: list[Column] = []
    for b, r in sorted(racked.items()):
        pairs += [F.lit(b), F.lit(r)]
    rack_map = F.create_map(*pairs)
    need = needed_to_fail(BrokerSet.of(live), F.col(DELETING))
    need_racks = F.array_distinct(F.transform(need, lambda b: F.element_at(rack_map, b)))
    only = (
        F.when(F.size(need) == 0, F.lit(_ANY_RACK))
        .when((F.size(need_racks) == 1) & F.get(need_racks, 0).isNotNull(), F.get(need_racks, 0))
        .alias("_rack")
    )
    counted = rows.where(~F.col(DELETING)).select(only).where(F.col("_rack").isNotNull())
    found = {r["_rack"]: int(r["count"]) for r in counted.groupBy("_rack").count().collect()}
    anywhere = found.pop(_ANY_RACK, 0)
    return {r: found.get(r, 0) + anywhere for r in names}
