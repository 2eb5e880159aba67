"""The placement planner's driver-side greedy: replica moves and preferred-leader swaps.

``Greedy`` holds the current replicas of the partitions it has been shown (the candidates Spark
collected, ``whatif.placement_candidates``) and the per-broker counts; it is Spark-free, so it is
also the plain-Python planner the tests drive directly.

Each replica step moves one replica from the fullest broker that still has a feasible move to the
emptiest broker that may take it (not holding the partition already, rack spread kept) when their
counts differ by two or more. Such a pass never moves a replica onto a broker it later takes one
from, so it moves exactly the excess when racks do not constrain it. A broker whose candidates run
out while it still wants to give is reported back (``balance_replicas``) to be sampled again.
Preferred leaders follow the same pattern: a step swaps the first replica with a follower on the
emptiest broker, or, when no partition links the two brokers directly, along the shortest chain of
such swaps.
"""

from __future__ import annotations

import bisect
import heapq
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise

PartitionKey = tuple[str, int]  # (topic, partition)


@dataclass(frozen=True)
class PlacementTarget:
    """Where replicas may go: ``brokers`` (live and new), their ``racks`` (None = rackless), and
    the ``removed`` brokers to empty (decommissioned, or holding replicas but not live)."""

    brokers: tuple[int, ...]
    racks: Mapping[int, str | None]
    removed: frozenset[int] = frozenset()
    seed: int = 0

    @property
    def rack_aware(self) -> bool:
        """Racks are used only when every target broker has one (Kafka's rule, §9.4)."""
        return bool(self.brokers) and all(self.racks.get(b) is not None for b in self.brokers)


class _Ordered:
    """Brokers ordered by (count, id), per group (rack), for the emptiest-first scans."""

    def __init__(self, counts: Mapping[int, int], group_of: Mapping[int, str | None]) -> None:
        self.group_of = dict(group_of)
        self.lists: dict[str | None, list[tuple[int, int]]] = {}
        for b, g in self.group_of.items():
            self.lists.setdefault(g, []).append((counts[b], b))
        for lst in self.lists.values():
            lst.sort()

    def update(self, broker: int, old: int, new: int) -> None:
        lst = self.lists[self.group_of[broker]]
        del lst[bisect.bisect_left(lst, (old, broker))]
        bisect.insort(lst, (new, broker))

    def minimum(self) -> int:
        return min(lst[0][0] for lst in self.lists.values() if lst)


class Greedy:
    """The planner's driver-side state: current replicas of the partitions it knows, per-broker
    counts, and the candidate lists; Spark-free so it is also the plain-Python planner."""

    def __init__(
        self,
        target: PlacementTarget,
        replica_counts: Mapping[int, int],
        leader_counts: Mapping[int, int],
    ) -> None:
        self.target = target
        self.receivers = [b for b in target.brokers if b not in target.removed]
        self.rack_aware = target.rack_aware
        self.rack_of: dict[int, str | None] = {
            b: (target.racks.get(b) if self.rack_aware else None)
            for b in set(self.receivers) | set(replica_counts) | set(leader_counts)
        }
        self.count: dict[int, int] = {b: 0 for b in self.receivers}
        self.count.update(replica_counts)
        self.leaders: dict[int, int] = {b: 0 for b in self.receivers}
        self.leaders.update(leader_counts)
        self.original: dict[PartitionKey, tuple[int, ...]] = {}
        self.current: dict[PartitionKey, list[int]] = {}
        self.size: dict[PartitionKey, int] = {}
        self.candidates: dict[int, list[PartitionKey]] = {}
        self.position: dict[int, int] = {}
        self.truncated: set[int] = set()
        self.replicas_moved = 0
        self.bytes_moved = 0
        self.rack_spread_reduced = 0
        self._order = _Ordered(
            {b: self.count[b] for b in self.receivers},
            {b: self.rack_of[b] for b in self.receivers},
        )
        self._groups = sorted(self._order.lists, key=lambda g: (g is None, g or ""))
        self._stuck: set[int] = set()

    # -- candidates

    def know(self, key: PartitionKey, replicas: Sequence[int], size: int = 0) -> None:
        """Remember a partition (its replicas as the snapshot has them) unless already known."""
        if key not in self.current:
            self.original[key] = tuple(replicas)
            self.current[key] = list(replicas)
            self.size[key] = size

    def add_candidates(self, broker: int, keys: Iterable[PartitionKey], truncated: bool) -> None:
        """Candidates to move off ``broker`` (known partitions), best first; ``truncated`` says
        the broker holds replicas not offered."""
        lst = self.candidates.setdefault(broker, [])
        have = set(lst)
        lst.extend(k for k in keys if k not in have)
        if truncated:
            self.truncated.add(broker)
        else:
            self.truncated.discard(broker)
        self._stuck.discard(broker)

    # -- replica moves

    def _allowed_groups(self, replicas: Sequence[int], donor: int) -> list[str | None]:
        if not self.rack_aware:
            return self._groups
        racks = [self.rack_of.get(b) for b in replicas]
        own = self.rack_of.get(donor)
        if racks.count(own) > 1:
            return self._groups  # the donor's rack stays covered: any rack keeps the spread
        present = set(racks)
        return [g for g in self._groups if g == own or g not in present]

    def _receiver(
        self, replicas: Sequence[int], groups: Iterable[str | None], limit: int | None
    ) -> tuple[int | None, bool]:
        """The emptiest broker of ``groups`` with at most ``limit`` replicas that does not hold
        the partition, and whether any broker of ``groups`` is at most at ``limit`` at all
        (when not, other partitions with the same racks cannot move either)."""
        best: tuple[int, int] | None = None
        room = False
        for g in groups:
            for entry in self._order.lists.get(g, ()):
                if (limit is not None and entry[0] > limit) or (best is not None and entry > best):
                    break
                room = True
                if entry[1] not in replicas:
                    best = entry
                    break
        return (None if best is None else best[1]), room

    def _move(self, key: PartitionKey, donor: int, receiver: int) -> None:
        reps = self.current[key]
        reps[reps.index(donor)] = receiver  # the new broker keeps the position (and leadership)
        self.count[donor] -= 1
        if donor in self._order.group_of:
            self._order.update(donor, self.count[donor] + 1, self.count[donor])
        self.count[receiver] += 1
        self._order.update(receiver, self.count[receiver] - 1, self.count[receiver])
        if reps[0] == receiver:
            self.leaders[donor] -= 1
            self.leaders[receiver] += 1
        self.replicas_moved += 1
        self.bytes_moved += self.size.get(key, 0)

    def empty_removed(self) -> None:
        """Move every offered replica off the removed brokers, each to the emptiest broker of a
        rack the partition's other replicas do not use (Kafka's rack-aware rule: distinct racks
        where possible), or, when every rack is used, the emptiest broker at all."""
        for donor in sorted(b for b in self.candidates if b in self.target.removed):
            for key in self.candidates[donor]:
                reps = self.current[key]
                if donor not in reps:
                    continue
                used = {self.rack_of.get(b) for b in reps if b != donor}
                unused = [g for g in self._groups if g not in used] if self.rack_aware else []
                receiver, _ = self._receiver(reps, unused, None)
                if receiver is None:
                    receiver, _ = self._receiver(reps, self._groups, None)
                    if receiver is None:
                        continue  # RF above the receivers: nothing can take it
                    if self.rack_aware and self.rack_of.get(donor) not in used:  # rack lost
                        self.rack_spread_reduced += 1
                self._move(key, donor, receiver)
            self.position[donor] = len(self.candidates[donor])

    def balance_replicas(self) -> set[int]:
        """Greedy moves until no feasible move narrows the spread; the brokers whose sample ran
        out while they still wanted to give (sample them again) are returned."""
        starved: set[int] = set()
        heap = [(-n, b) for b, n in self.count.items() if b not in self.target.removed]
        heap = [e for e in heap if e[1] not in self._stuck and e[1] in self.candidates]
        heapq.heapify(heap)
        while heap:
            neg, donor = heapq.heappop(heap)
            if -neg != self.count[donor]:
                continue
            limit = self.count[donor] - 2
            if limit < self._order.minimum():
                break
            lst = self.candidates[donor]
            i = position_before = self.position.get(donor, 0)
            moved = blocked = False
            receiver: int | None = None
            while i < len(lst):
                key = lst[i]
                i += 1
                reps = self.current[key]
                if donor not in reps:
                    continue
                receiver, room = self._receiver(reps, self._allowed_groups(reps, donor), limit)
                if receiver is not None:
                    self._move(key, donor, receiver)
                    moved = True
                    break
                blocked = blocked or room
            self.position[donor] = scanned = i
            if moved:
                heapq.heappush(heap, (-self.count[donor], donor))
                if receiver in self.candidates and receiver not in self._stuck:
                    heapq.heappush(heap, (-self.count[receiver], receiver))
            else:
                self._stuck.add(donor)
                # More candidates help only where a broker had room but held the partition (or
                # every candidate moved); a donor whose racks have no room is done.
                if donor in self.truncated and (blocked or scanned == position_before):
                    starved.add(donor)
        return starved

    # -- preferred leaders

    def balance_leaders(self) -> None:
        """Swap preferred leaders inside known partitions until no swap (or chain of swaps)
        narrows the spread of preferred leaders per broker."""
        receivers = set(self.receivers)
        by_pair: dict[tuple[int, int], list[PartitionKey]] = {}
        for key in reversed(list(self.current)):  # known order: deterministic, best first
            reps = self.current[key]
            for r in reps[1:]:
                if r in receivers:
                    by_pair.setdefault((reps[0], r), []).append(key)
        order = _Ordered({b: self.leaders[b] for b in self.receivers}, dict.fromkeys(receivers))

        def usable(a: int, b: int) -> PartitionKey | None:
            lst = by_pair.get((a, b))
            while lst:
                reps = self.current[lst[-1]]
                if reps[0] == a and b in reps:
                    return lst[-1]
                lst.pop()
            return None

        def swap(key: PartitionKey, a: int, b: int) -> None:
            reps = self.current[key]
            j = reps.index(b)
            reps[0], reps[j] = b, a
            by_pair[(a, b)].pop()
            for r in reps[1:]:
                by_pair.setdefault((b, r), []).append(key)

        def shift(a: int, b: int) -> None:
            self.leaders[a] -= 1
            order.update(a, self.leaders[a] + 1, self.leaders[a])
            self.leaders[b] += 1
            order.update(b, self.leaders[b] - 1, self.leaders[b])
            heapq.heappush(heap, (-self.leaders[a], a))
            heapq.heappush(heap, (-self.leaders[b], b))

        heap = [(-self.leaders[b], b) for b in self.receivers]
        heapq.heapify(heap)
        while heap:
            neg, donor = heapq.heappop(heap)
            if -neg != self.leaders[donor]:
                continue
            limit = self.leaders[donor] - 2
            if limit < order.minimum():
                break
            done = False
            for count, r in order.lists[None]:
                if count > limit:
                    break
                key = usable(donor, r)
                if key is not None:
                    swap(key, donor, r)
                    shift(donor, r)
                    done = True
                    break
            if not done:
                path = self._chain(donor, limit, receivers, usable)
                if path:
                    for a, b in pairwise(path):
                        key = usable(a, b)
                        assert key is not None
                        swap(key, a, b)
                    shift(path[0], path[-1])
                    done = True
            # A donor with no step left drops out of the heap: counts only fall below it.

    def _chain(
        self,
        donor: int,
        limit: int,
        receivers: set[int],
        usable: Callable[[int, int], PartitionKey | None],
    ) -> list[int]:
        """Shortest donor → … → receiver chain of swaps ending at a broker with at most
        ``limit`` preferred leaders; empty when none."""
        parent: dict[int, int] = {donor: donor}
        queue = deque([donor])
        ordered = sorted(receivers)
        while queue:
            a = queue.popleft()
            for b in ordered:
                if b in parent or usable(a, b) is None:
                    continue
                parent[b] = a
                if self.leaders[b] <= limit:
                    path = [b]
                    while path[-1] != donor:
                        path.append(parent[path[-1]])
                    return path[::-1]
                queue.append(b)
        return []

    # -- results

    def changed(self) -> dict[PartitionKey, tuple[int, ...]]:
        return {k: tuple(v) for k, v in self.current.items() if tuple(v) != self.original[k]}
