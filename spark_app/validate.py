"""Run the model validator once and turn its findings into one clear error.

``kce run`` checks the starting partitions table before it is bootstrapped (a violation there
comes from the scenario's ``state`` rows: exit 2 with ``ClusterModelError``'s message) and the
final table after the run (a violation there is the emulation's: ``summary.json``'s
``model_violations``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from statemachines import reference_validation
from statemachines import schemas as s
from statemachines.validation import FIXES, KINDS, model_violations

SHOWN_ROWS = 20


class ClusterModelError(ValueError):
    """A partitions table breaks the cluster-state model; nothing was changed or repaired."""

    def __init__(self, counts: dict[str, int], examples: list[tuple[str, int, list[str]]]) -> None:
        self.counts = counts
        self.examples = examples
        # Two lines, whatever the table: the kinds with their fixes, then the first partitions.
        kinds = "; ".join(
            f"{kind}: {n} partition(s) — {FIXES[kind]}" for kind, n in sorted(counts.items())
        )
        shown = "; ".join(f"{t}-{p}: {', '.join(k)}" for t, p, k in examples)
        super().__init__(
            f"{sum(counts.values())} problem(s) in the partitions table: {kinds}\n"
            f"first {len(examples)} offending partition(s): {shown}"
        )


Example = tuple[str, int, list[str]]


def find_violations(
    partitions: DataFrame,
    known_brokers: Collection[int] | None = None,
    max_width: int | None = None,
) -> tuple[dict[str, int], list[Example]]:
    """Offending partitions per kind and the first ``SHOWN_ROWS`` of them (one action)."""
    bad = model_violations(partitions, known_brokers, max_width)
    counts = (
        bad.select(F.explode(KINDS).alias("kind"))
        .groupBy("kind")
        .agg(F.count(F.lit(1)).alias("n"))
        .select(
            "kind",
            "n",
            F.lit(None).cast("string").alias(s.TOPIC),
            F.lit(None).cast("int").alias(s.PARTITION),
            F.lit(None).cast("array<string>").alias(KINDS),
        )
    )
    examples = (
        bad.orderBy(s.TOPIC, s.PARTITION)
        .limit(SHOWN_ROWS)
        .select(
            F.lit(None).cast("string").alias("kind"),
            F.lit(None).cast("long").alias("n"),
            s.TOPIC,
            s.PARTITION,
            KINDS,
        )
    )
    rows = counts.unionByName(examples).collect()
    found = {r.kind: r.n for r in rows if r.kind is not None}
    shown = [(r.topic, r.partition, list(r[KINDS])) for r in rows if r.kind is None]
    return dict(sorted(found.items())), sorted(shown)


def find_row_violations(
    rows: Iterable[Mapping[str, Any]],
    known_brokers: Collection[int] | None = None,
    max_width: int | None = None,
) -> tuple[dict[str, int], list[Example]]:
    """``find_violations`` of rows held on the driver (``reference_validation``)."""
    bad = reference_validation.model_violations(rows, known_brokers, max_width)
    counts = Counter(kind for _, _, kinds in bad for kind in kinds)
    return dict(sorted(counts.items())), bad[:SHOWN_ROWS]


def validate_partitions(
    partitions: DataFrame | list[Mapping[str, Any]],
    known_brokers: Collection[int] | None = None,
    max_width: int | None = None,
) -> None:
    """Raise ``ClusterModelError`` with counts per kind and the first offending rows (one
    action; none for rows held on the driver)."""
    if isinstance(partitions, list):
        found, shown = find_row_violations(partitions, known_brokers, max_width)
    else:
        found, shown = find_violations(partitions, known_brokers, max_width)
    if found:
        raise ClusterModelError(found, shown)


def violations_json(
    partitions: DataFrame | list[Mapping[str, Any]], known_brokers: Collection[int]
) -> dict[str, Any]:
    """``find_violations`` as ``{"counts": {kind: n}, "examples": [{topic, partition, violations}]}``
    (of rows held on the driver when given a list)."""
    if isinstance(partitions, list):
        found, shown = find_row_violations(partitions, known_brokers)
    else:
        found, shown = find_violations(partitions, known_brokers)
    return {
        "counts": found,
        "examples": [{"topic": t, "partition": p, "violations": v} for t, p, v in shown],
    }
