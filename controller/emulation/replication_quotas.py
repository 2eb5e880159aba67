"""Each broker's fetch throughput and replication throttles dealt to its followers, per step.

The brokers' followers are counted in groups (``fetch_shares.fetch_stats``): per follower broker,
by the leader whose ``leader.replication.throttled.rate`` counts their bytes (or none), whether its
own ``follower.replication.throttled.rate`` does, and whether the rates can hold them back (they
lag outside the ISR). Three kinds of limit then hold for a step:

* a broker's fetch throughput: followers at the leader's end take what they need while it keeps
  up, and the followers behind share the rest; when it does not keep up, all its followers share
  all of it;
* a broker's follower rate, over its throttled followers (Kafka's follower quota: the bytes its
  fetchers take for throttled partitions);
* a leader's leader rate, over the throttled followers it serves, on any broker (Kafka's leader
  quota: the bytes it returns for throttled partitions).

Kafka counts the bytes of every listed follower against a rate, and holds back only those
outside the ISR; here what the listed followers at the leader's end need (their produce rate)
comes off the rates first, and the followers held back share the rest (none when the produce
rate of the listed partitions passes the throttle: the copies stop, as Kafka's documentation
warns). A listed follower in the ISR that catches up counts against its broker's throughput only.

Kafka's quotas stop throttled fetches while a rate is exceeded and let them go again below it,
so over its window each rate is spent on whichever throttled replicas can take more. ``deal``
shares every limit that way, max-min fair (progressive filling): all followers' rates rise
together; a limit that fills fixes the rates of its followers; the others rise on. A follower
then moves at the least level among the limits that hold it, so the shares are one level per
limit, by broker: what ``replication.Conditions`` carries (``fetch_share``, ``caught_share`` and
the ``Throttles`` shares). Without throttles this is the equal split of each broker's throughput.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from statemachines import schemas as s

# What a follower at the leader's end may copy while its broker keeps up: without bound in
# effect, yet a copy over a year of virtual time stays far inside a long.
KEEPS_UP_BYTES_PER_S = 1e12

Limit = tuple[str, int]  # ("fetch" | "follower" | "leader", broker)


class FetchGroup(NamedTuple):
    """Followers on one broker counted by the same throttles (one ``fetch_stats`` row)."""

    broker: int
    throttled_leader: int  # NO_LEADER: no leader rate counts them
    throttled_follower: bool
    held: bool  # the rates can hold them back: they lag outside the ISR
    demand: float  # bytes/s the followers at the leader's end need
    behind: int
    followed: int


@dataclass(frozen=True)
class Shares:
    """Bytes/s per follower by broker: lagging (``fetch``), at the leader's end (``caught``), and
    one throttled replica's share of a leader's and a follower broker's rate."""

    fetch: dict[int, float]
    caught: dict[int, float]
    leader: dict[int, float]
    follower: dict[int, float]


def deal(
    groups: Sequence[FetchGroup],
    capacity: Mapping[int, float],
    leader_rates: Mapping[int, float],
    follower_rates: Mapping[int, float],
) -> Shares:
    """The shares of a step: ``capacity`` is each fetching broker's throughput (bytes/s), the
    rates the brokers' throttles (brokers without one are not throttled)."""
    demand: dict[int, float] = defaultdict(float)
    behind: dict[int, int] = defaultdict(int)
    followed: dict[int, int] = defaultdict(int)
    for g in groups:
        demand[g.broker] += g.demand
        behind[g.broker] += g.behind
        followed[g.broker] += g.followed
    limits: dict[Limit, float] = {}
    flows: list[tuple[int, list[Limit]]] = []  # followers of one kind, and what limits them
    rates = {("leader", b): float(v) for b, v in leader_rates.items()}
    rates.update({("follower", b): float(v) for b, v in follower_rates.items()})
    for g in groups:  # the listed followers at the leader's end take their need off the rates
        for limit in _counting(g):
            if limit in rates:
                rates[limit] = max(rates[limit] - g.demand, 0.0)
    caught: dict[int, float] = {}
    for b in sorted(capacity):
        if demand[b] <= capacity[b]:  # followers at the end keep up; the rest share what is left
            caught[b] = KEEPS_UP_BYTES_PER_S
            limits[("fetch", b)] = capacity[b] - demand[b]
        else:  # every follower shares all of it, those at the end as well
            limits[("fetch", b)] = capacity[b]
            flows.append((followed[b] - behind[b], [("fetch", b)]))
    for g in sorted(groups):
        if g.broker not in capacity or g.behind == 0:
            continue
        holding = [("fetch", g.broker)]
        if g.held:
            holding += [limit for limit in _counting(g) if limit in rates]
            limits.update({limit: rates[limit] for limit in holding[1:]})
        flows.append((g.behind, holding))
    levels = fill(limits, flows)
    # A limit that never fills holds no follower below its whole amount (and one with no
    # followers at all is the equal split of nothing, as for one follower).
    fetch = {b: levels.get(("fetch", b), limits[("fetch", b)]) for b in sorted(capacity)}
    for b in sorted(capacity):
        caught.setdefault(b, fetch[b])
    shares = {limit: levels.get(limit, left) for limit, left in sorted(rates.items())}
    return Shares(
        fetch=fetch,
        caught=caught,
        leader={b: v for (kind, b), v in shares.items() if kind == "leader"},
        follower={b: v for (kind, b), v in shares.items() if kind == "follower"},
    )


def _counting(g: FetchGroup) -> list[Limit]:
    """The throttle rates that count a group's bytes."""
    out: list[Limit] = []
    if g.throttled_follower:
        out.append(("follower", g.broker))
    if g.throttled_leader != s.NO_LEADER:
        out.append(("leader", g.throttled_leader))
    return out


def fill(
    limits: Mapping[Limit, float], flows: Sequence[tuple[int, Sequence[Limit]]]
) -> dict[Limit, float]:
    """Progressive filling: the level (bytes/s per follower) at which each limit fills, for
    ``flows`` of followers held by the limits named. Limits that never fill are left out."""
    used = dict.fromkeys(limits, 0.0)
    active = [i for i, (count, _) in enumerate(flows) if count > 0]
    levels: dict[Limit, float] = {}
    while active:
        counts: dict[Limit, int] = defaultdict(int)
        for i in active:
            for limit in flows[i][1]:
                counts[limit] += flows[i][0]
        room = {k: max(limits[k] - used[k], 0.0) / n for k, n in counts.items()}
        level = min(room.values())
        full = {k for k, v in room.items() if v <= level}
        levels.update(dict.fromkeys(full, level))
        still = []
        for i in active:
            count, held = flows[i]
            if full.isdisjoint(held):
                still.append(i)
                continue
            for limit in held:
                used[limit] += count * level
        active = still
    return levels
