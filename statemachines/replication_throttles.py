"""Kafka's replication throttles (KIP-73) in the replication table's fetch rates.

A topic's ``leader.replication.throttled.replicas`` and ``follower.replication.throttled.replicas``
list replicas as ``partition:broker`` (or ``*``: every replica of the topic). Each broker's
``ReplicationQuotaManager`` marks the partitions whose listed replica it holds
(``TopicConfigHandler.parseThrottledPartitions``), and in Kafka 2.8:

* a leader does not answer a follower's fetch of a partition it leads while the partition is
  throttled there, the follower is not in the ISR and the leader's throttled bytes exceed its
  ``leader.replication.throttled.rate`` (``ReplicaManager.shouldLeaderThrottle``);
* a follower leaves a partition out of its fetches while it is throttled there, the follower is
  not in sync and its broker's throttled bytes exceed ``follower.replication.throttled.rate``
  (``ReplicaFetcherThread.shouldFollowerThrottle``; in sync is no lag behind the leader's high
  watermark, which a follower outside the ISR reaches only as it rejoins: the same replicas).

So only followers outside the ISR are held back, yet both sides count the bytes of every listed
replica against their rate, in the ISR or not (``quota.record``: "traffic from both in-sync and
out of sync replicas"); a throttle below a listed partition's produce rate stops its copies. The
table models the rates as shares: a follower behind the leader's end and outside the ISR takes
at most its broker's follower share (``Throttles.follower_share``) when its replica is listed
for the follower side, and at most its leader's leader share when the leader's replica is listed
for the leader side. The driver deals the shares (what one held replica gets of what a rate
leaves after the listed followers at the leader's end take their produce rate); a follower at the
leader's end is never held back (it is in the ISR, or joins it at this step).

Lists are keyed by the table's topic indices. ``listed`` and ``listed_row`` answer the same
question, in Spark and on a row.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from pyspark.sql import Column
from pyspark.sql import functions as F

from statemachines import schemas as s
from statemachines.columns import in_topics

ALL_REPLICAS = "*"
_ENTRY = re.compile(r"([0-9]+:[0-9]+)?")
_BITS = 21  # topic index, partition and broker position each fit in 21 bits of a packed key
_INT_MAX = 2**31 - 1
FORMAT = "[partitionId]:[brokerId],[partitionId]:[brokerId],..."


def parse(value: str) -> Literal["*"] | list[tuple[int, int]]:
    """A ``*.replication.throttled.replicas`` value as Kafka reads it: ``*``, or the listed
    ``(partition, broker)`` pairs (an empty value lists none). ``ValueError`` with Kafka's
    message (``ThrottledReplicaListValidator``) when it is neither."""
    items = [item.strip() for item in value.split(",")]
    if "".join(items) == ALL_REPLICAS:
        return ALL_REPLICAS
    if not all(_ENTRY.fullmatch(item) for item in items):
        raise ValueError(f"must be the literal '*' or a list of replicas in the format {FORMAT}")
    pairs = [tuple(int(x) for x in item.split(":")) for item in items if item]
    if any(n > _INT_MAX for pair in pairs for n in pair):
        raise ValueError(f"partition and broker ids are ints (at most {_INT_MAX})")
    return [(p, b) for p, b in pairs]


@dataclass(frozen=True)
class ThrottledReplicas:
    """One side's listed replicas over the table's topics: ``(topic, partition, broker)``, and
    the topics listed ``*``."""

    replicas: frozenset[tuple[int, int, int]] = frozenset()
    all_of: frozenset[int] = frozenset()  # topic indices whose value is '*'

    def __post_init__(self) -> None:
        limit = 1 << _BITS
        if any(t >= limit or p >= limit for t, p, _ in self.replicas):
            raise ValueError(f"throttled replicas need topic indices and partitions below {limit}")

    def __bool__(self) -> bool:
        return bool(self.replicas or self.all_of)

    @classmethod
    def of(cls, by_topic: Mapping[int, Literal["*"] | list[tuple[int, int]]]) -> ThrottledReplicas:
        """From each topic's parsed value (``parse``)."""
        everything = frozenset(t for t, v in by_topic.items() if v == ALL_REPLICAS)
        listed = frozenset(
            (t, p, b) for t, v in by_topic.items() if v != ALL_REPLICAS for p, b in v
        )
        return cls(listed, everything)


@dataclass(frozen=True)
class Throttles:
    """The throttled replicas of both sides and the brokers' shares of their rates: bytes/s one
    throttled replica may take, by the broker that leads it (``leader_share``) or holds it
    (``follower_share``); a broker missing from a share map has no rate (Kafka's default,
    ``Long.MaxValue``: unlimited)."""

    leader: ThrottledReplicas = ThrottledReplicas()
    follower: ThrottledReplicas = ThrottledReplicas()
    leader_share: Mapping[int, float] = field(default_factory=dict)
    follower_share: Mapping[int, float] = field(default_factory=dict)

    @property
    def active(self) -> bool:
        """Whether any replica can be throttled (else the rates are left as they are)."""
        return bool(self.leader and self.leader_share) or bool(
            self.follower and self.follower_share
        )


# -- Spark ---------------------------------------------------------------------------------------


def listed(t: ThrottledReplicas, broker: str) -> Column:
    """The replica of the row's partition on the broker in column ``broker`` is listed.

    One parsed IN over ``(topic, partition, position of the broker among the listed ones)``
    packed into a long, which the optimizer makes a hash-set lookup (``columns.in_partitions``).
    """
    found = in_topics(sorted(t.all_of))
    if not t.replicas:
        return found
    brokers = sorted({b for _, _, b in t.replicas})
    position = {b: i + 1 for i, b in enumerate(brokers)}  # array_position: 0 when absent
    keys = sorted(_packed(tp, p, position[b]) for tp, p, b in t.replicas)
    at = f"array_position(array({','.join(map(str, brokers))}), {broker})"
    key = (
        f"(CAST({s.TOPIC_INDEX} AS BIGINT) << {2 * _BITS} "
        f"| CAST({s.PARTITION} AS BIGINT) << {_BITS} | {at})"
    )
    return found | F.expr(f"{key} IN ({','.join(map(str, keys))})")


def _packed(topic: int, partition: int, position: int) -> int:
    return topic << 2 * _BITS | partition << _BITS | position


def _share(shares: Mapping[int, float], broker: Column) -> Column:
    keys = sorted(shares)
    table = F.map_from_arrays(
        F.array(*[F.lit(int(k)) for k in keys]), F.array(*[F.lit(float(shares[k])) for k in keys])
    )
    return F.element_at(table, broker)


def capped(th: Throttles, share: Column, broker: str, outside_isr: Column) -> Column:
    """A lagging follower's ``share`` (bytes/s) on ``broker`` (a column name) within the
    throttle shares that apply to it: Spark's ``least`` skips the sides that do not."""
    if not th.active:
        return share
    caps = [share]
    if th.follower and th.follower_share:
        follows = outside_isr & listed(th.follower, broker)
        caps.append(F.when(follows, _share(th.follower_share, F.col(broker))))
    if th.leader and th.leader_share:
        leads = outside_isr & listed(th.leader, s.LEADER)
        caps.append(F.when(leads, _share(th.leader_share, F.col(s.LEADER))))
    return F.least(*caps)


def counting_leader(th: Throttles) -> Column:
    """The leader broker when its leader rate counts what a follower fetches (the leader's
    replica is listed), else NO_LEADER: a key of ``fetch_shares.fetch_stats``."""
    if not th.leader:
        return F.lit(s.NO_LEADER)
    return F.when(listed(th.leader, s.LEADER), F.col(s.LEADER)).otherwise(s.NO_LEADER)


def counting_follower(th: Throttles, broker: str) -> Column:
    """The follower's broker's follower rate counts what it fetches (its replica is listed)."""
    return listed(th.follower, broker) if th.follower else F.lit(False)


def held(th: Throttles, lagging_outside_isr: Column) -> Column:
    """Whether a follower is one the rates can hold back (false without throttled replicas,
    so that each broker's followers stay one group)."""
    return lagging_outside_isr if th.leader or th.follower else F.lit(False)


# -- rows ----------------------------------------------------------------------------------------


def listed_row(t: ThrottledReplicas, topic: int, partition: int, broker: int) -> bool:
    """``listed`` for one replica."""
    return topic in t.all_of or (topic, partition, broker) in t.replicas


def capped_row(
    th: Throttles, share: float, row_key: tuple[int, int], broker: int, leader: int,
    outside_isr: bool,
) -> float:  # fmt: skip
    """``capped`` for one follower of the partition ``row_key`` (topic index, partition)."""
    if not th.active or not outside_isr:
        return share
    topic, partition = row_key
    caps = [share]
    if th.follower_share and listed_row(th.follower, topic, partition, broker):
        caps.append(th.follower_share.get(broker, share))
    if th.leader_share and listed_row(th.leader, topic, partition, leader):
        caps.append(th.leader_share.get(leader, share))
    return min(caps)
