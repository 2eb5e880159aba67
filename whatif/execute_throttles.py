"""What ``kafka-reassign-partitions --execute --throttle RATE`` writes before it submits a plan.

Kafka 2.8's tool (``ReassignPartitionsCommand.calculateProposedMoveMap`` and
``modifyReassignmentThrottle``) builds a move map of the reassignments in progress and the
proposed ones. Per partition, the sources are its replicas before the move (of one in progress:
its replicas but the adding ones), the destinations its target replicas that are not sources.
Then it SETs, per topic of the map, ``leader.replication.throttled.replicas`` to every source
replica and ``follower.replication.throttled.replicas`` to every destination, each as
``partition:broker`` entries sorted as strings and joined by commas; and on every broker that is
a source or a destination, both ``leader.replication.throttled.rate`` and
``follower.replication.throttled.rate`` to RATE. An executor that sends its moves in waves runs
the tool once per wave with ``--additional``, so each wave's map holds the moves still in flight.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from whatif.execute_waves import Move

LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"


@dataclass(frozen=True)
class ThrottleWrites:
    """The topic configs and the brokers' rates the tool sets for one submission."""

    topics: dict[str, dict[str, str]]  # topic -> {LEADER_REPLICAS: ..., FOLLOWER_REPLICAS: ...}
    brokers: tuple[int, ...]
    rate: int

    def broker_config(self) -> dict[str, str]:
        return {LEADER_RATE: str(self.rate), FOLLOWER_RATE: str(self.rate)}

    def listed(self) -> tuple[int, int]:
        """How many replicas the topic configs list: leader side, follower side."""

        def count(side: str) -> int:
            return sum(len([x for x in c[side].split(",") if x]) for c in self.topics.values())

        return count(LEADER_REPLICAS), count(FOLLOWER_REPLICAS)


def throttle_writes(moves: Iterable[Move], rate: int) -> ThrottleWrites:
    """The tool's writes for a move map of ``moves`` (those in flight and those submitted)."""
    leaders: dict[str, set[str]] = {}
    followers: dict[str, set[str]] = {}
    brokers: set[int] = set()
    for m in moves:
        sources = set(m.before)
        destinations = set(m.after) - sources
        leaders.setdefault(m.topic, set()).update(f"{m.partition}:{b}" for b in sources)
        followers.setdefault(m.topic, set()).update(f"{m.partition}:{b}" for b in destinations)
        brokers |= sources | destinations
    topics = {
        t: {LEADER_REPLICAS: ",".join(sorted(leaders[t])), FOLLOWER_REPLICAS: ",".join(sorted(followers[t]))}
        for t in sorted(leaders)
    }  # fmt: skip
    return ThrottleWrites(topics, tuple(sorted(brokers)), rate)
