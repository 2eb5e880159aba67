"""The cluster-state model's checks (``validation.model_violations``) over plain rows.

A table small enough to hold on the driver is checked here, with no Spark plan: the same kinds,
in the same order, for the same rows. ``tests/test_validation.py`` holds both to the same answer
on random tables.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from statemachines import schemas as s
from statemachines.partition_states import PartitionState

_STATES = {p.name for p in PartitionState}


def violations(
    row: Mapping[str, Any],
    duplicates: int = 1,
    known_brokers: Collection[int] | None = None,
    max_width: int | None = None,
) -> list[str]:
    """What is wrong with one public partitions row (``validation.FIXES`` kinds), in the
    Spark check's order; ``duplicates``: rows with the row's key."""
    reps: Sequence[int] = row[s.REPLICAS]
    isr: Sequence[int] = row[s.ISR]
    moving = [*row[s.ADDING_REPLICAS], *row[s.REMOVING_REPLICAS]]
    every = [*reps, *isr, *moving]
    leader = row[s.LEADER]
    checks = {
        "empty_replicas": not reps,
        "duplicate_replicas": len(set(reps)) != len(reps),
        "duplicate_partition": duplicates > 1,
        "negative_broker_id": any(b < 0 for b in every),
        "isr_not_subset_of_replicas": any(b not in reps for b in isr),
        "duplicate_isr": len(set(isr)) != len(isr),
        "leader_not_in_replicas": leader != s.NO_LEADER and leader not in reps,
        "adding_or_removing_not_in_replicas": any(b not in reps for b in moving),
        "negative_epoch": row[s.LEADER_EPOCH] < 0 or row[s.CONTROLLER_EPOCH] < 0,
        "bad_zk_version": row[s.ZK_VERSION] < s.NO_ZK_VERSION,
        "unknown_state": row[s.STATE] not in _STATES,
    }
    if known_brokers is not None:
        checks["unknown_broker_id"] = any(b >= 0 and b not in known_brokers for b in every)
    if max_width is not None:
        checks["replica_set_too_wide"] = len(reps) > max_width
    return [kind for kind, broken in checks.items() if broken]


def model_violations(
    rows: Iterable[Mapping[str, Any]],
    known_brokers: Collection[int] | None = None,
    max_width: int | None = None,
) -> list[tuple[str, int, list[str]]]:
    """(topic, partition, kinds) of every row that breaks the model, in key order."""
    rows = list(rows)
    keys = Counter((r[s.TOPIC], r[s.PARTITION]) for r in rows)
    known = None if known_brokers is None else set(known_brokers)
    found = []
    for r in rows:
        key = (r[s.TOPIC], r[s.PARTITION])
        kinds = violations(r, keys[key], known, max_width)
        if kinds:
            found.append((*key, kinds))
    return sorted(found)
