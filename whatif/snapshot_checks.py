"""The side files and a plan, checked against a snapshot read in plain Python, before Spark.

``Known`` is what a ``--describe``, ``--zk`` or ``--scenario`` snapshot holds (``--run``'s table is
Parquet: its rows are checked by the question). A ``--rack-map`` row naming no broker of it and a
``--sizes`` row naming no partition of it are input errors, with two exceptions Kafka's own
output justifies:

* ``--describe`` text names no idle broker (it lists replicas, not brokers): a rack-map row adds
  its broker, as documented;
* filtered ``--describe`` text (``--under-replicated-partitions``, ``--unavailable-partitions``:
  no topic header lines) lists only some partitions: a sizes row naming another one is a warning
  line, and the row is not used.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from statemachines import schemas as s
from whatif.errors import WhatIfInputError
from whatif.plan_check import ReassignmentPlan, check_plan, refused_error


@dataclass(frozen=True)
class Known:
    """A snapshot's topics (partition counts), brokers and partition rows, as read."""

    counts: dict[str, int]
    brokers: frozenset[int]  # live, or holding a replica
    columns: Mapping[str, list[Any]] | None = None  # the partitions, for a plan (describe, zk)
    filtered: bool = False  # filtered describe text: some partitions are not listed
    adds_brokers: bool = False  # describe: a rack-map row adds an idle broker

    @classmethod
    def of_columns(
        cls, columns: Mapping[str, list[Any]], live: Sequence[int], **flags: bool
    ) -> Known:
        """The ``Known`` of partition rows as column lists (``empty_columns``)."""
        # A topic's partitions are 0..n-1: its highest listed one bounds them (filtered describe
        # text may list fewer).
        counts: dict[str, int] = {}
        for topic, partition in zip(columns[s.TOPIC], columns[s.PARTITION], strict=True):
            counts[topic] = max(counts.get(topic, 0), partition + 1)
        held = {b for replicas in columns[s.REPLICAS] for b in replicas}
        return cls(counts, frozenset(held | set(live)), columns, **flags)


def check_rack_map(known: Known, racks: Mapping[int, str | None], path: str | Path) -> None:
    """A rack-map row must name a broker of the snapshot (live, or holding a replica)."""
    if known.adds_brokers:
        return
    unknown = sorted(set(racks) - known.brokers)
    if unknown:
        listed = ", ".join(map(str, unknown[:10])) + (" …" if len(unknown) > 10 else "")
        raise WhatIfInputError(
            f"{path}: broker(s) {listed} are not brokers of the snapshot — remove their rows or "
            "pass the rack map of this cluster"
        )


def check_sizes(known: Known, sizes: dict[str, list[Any]], path: str | Path) -> None:
    """A sizes row must name a partition of the snapshot (a warning for filtered describe text,
    whose other partitions are simply not listed)."""
    rows = zip(sizes[s.TOPIC], sizes[s.PARTITION], sizes["line"], strict=True)
    unknown = [(t, p, line) for t, p, line in rows if not 0 <= p < known.counts.get(t, 0)]
    if not unknown:
        return
    t, p, line = unknown[0]
    if known.filtered:
        print(
            f"kce: warning: {path}: {len(unknown):,} row(s) name partitions the filtered describe "
            f"output does not list (first {t}-{p}, line {line}); they are not used",
            file=sys.stderr,
        )
        return
    raise WhatIfInputError(
        f"{path}:{line}: {t}-{p} is not a partition of the snapshot ({len(unknown):,} such "
        "row(s)) — remove the rows or pass the sizes of this cluster"
    )


def check_execute_plan(
    known: Known,
    plan_path: str | Path,
    plan: ReassignmentPlan,
    brokers: Sequence[int],
    racks: Mapping[int, str | None],
) -> None:
    """``whatif execute``'s refusal of a plan Kafka refuses, before Spark (describe, zk)."""
    if known.columns is None:
        return
    wanted = {(p.topic, p.partition) for p in plan.partitions}
    cols = known.columns
    current = {
        (t, p): list(r)
        for t, p, r in zip(cols[s.TOPIC], cols[s.PARTITION], cols[s.REPLICAS], strict=True)
        if (t, p) in wanted
    }
    error = refused_error(plan_path, check_plan(plan, current, brokers, racks), plan, brokers)
    if error is not None:
        raise error
