"""Hypothesis strategies: batches of small random clusters with disjoint broker ranges."""

from __future__ import annotations

import random
from dataclasses import dataclass

from hypothesis import strategies as st

from statemachines.partition_states import PartitionState
from statemachines.reference import Partition
from statemachines.schemas import NO_ZK_VERSION

W = 5


@dataclass(frozen=True)
class Batch:
    parts: list[Partition]
    live: frozenset[int]
    shutting_down: frozenset[int]
    unclean_topics: frozenset[str]
    selected: frozenset[tuple[str, int]]


@st.composite
def partitions(draw: st.DrawFn, topic: str, pid: int, brokers: list[int]) -> Partition:
    rf = draw(st.integers(1, min(W, len(brokers))))
    reps = tuple(draw(st.permutations(brokers))[:rf])
    state = draw(st.sampled_from(list(PartitionState)))
    if state == PartitionState.NewPartition and draw(st.booleans()):
        return Partition(topic, pid, reps, state=state, zk_version=NO_ZK_VERSION, leader=-1)
    isr = tuple(r for r in draw(st.permutations(reps)) if draw(st.booleans())) or reps[:1]
    leader = draw(st.sampled_from([-1, *isr]))
    removing = tuple(r for r in reps[1:] if draw(st.booleans()))
    adding = tuple(r for r in reps if r not in removing and draw(st.booleans()))
    return Partition(
        topic,
        pid,
        reps,
        isr=isr,
        leader=leader,
        leader_epoch=draw(st.integers(0, 5)),
        zk_version=draw(st.integers(0, 5)),
        controller_epoch=1,
        state=state,
        adding_replicas=adding,
        removing_replicas=removing,
    )


@st.composite
def batches(draw: st.DrawFn) -> Batch:
    parts: list[Partition] = []
    live: set[int] = set()
    sd: set[int] = set()
    unclean: set[str] = set()
    for c in range(draw(st.integers(1, 6))):
        brokers = [100 * c + b for b in range(draw(st.integers(1, 6)))]
        for b in brokers:
            fate = draw(st.sampled_from(["live", "live", "dead", "shutting_down"]))
            (live if fate == "live" else sd if fate == "shutting_down" else set()).add(b)
        for t in range(draw(st.integers(1, 2))):
            topic = f"c{c}t{t}"
            if draw(st.booleans()):
                unclean.add(topic)
            for pid in range(draw(st.integers(1, 5))):
                parts.append(draw(partitions(topic, pid, brokers)))
    keys = [(p.topic, p.partition) for p in parts]
    selected = frozenset(k for k in keys if draw(st.integers(0, 4)) > 0)
    return Batch(parts, frozenset(live), frozenset(sd), frozenset(unclean), selected)


class ScriptedRandom(random.Random):
    """Answers ``randrange`` with given values, in order: stands in for Kafka's two draws."""

    def __init__(self, *values: int) -> None:
        super().__init__(0)
        self._values = list(values)

    def randrange(self, start: int, stop: int | None = None, step: int = 1) -> int:  # type: ignore[override]
        value = self._values.pop(0)
        assert 0 <= value < start
        return value
