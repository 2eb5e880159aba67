"""Run the model validator once and turn its findings into one clear error."""

from __future__ import annotations

from collections.abc import Collection

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from statemachines import schemas as s
from statemachines.validation import FIXES, KINDS, model_violations

SHOWN_ROWS = 20


class ClusterModelError(ValueError):
    """A partitions table breaks the cluster-state model; nothing was changed or repaired."""

    def __init__(self, counts: dict[str, int], examples: list[tuple[str, int, list[str]]]) -> None:
        self.counts = counts
        self.examples = examples
        lines = [f"{sum(counts.values())} problem(s) in the partitions table:"]
        lines += [
            f"  {kind}: {n} partition(s) — {FIXES[kind]}" for kind, n in sorted(counts.items())
        ]
        lines.append(f"first {len(examples)} offending partition(s):")
        lines += [f"  {t}-{p}: {', '.join(kinds)}" for t, p, kinds in examples]
        super().__init__("\n".join(lines))


def validate_partitions(
    partitions: DataFrame,
    known_brokers: Collection[int] | None = None,
    max_width: int | None = None,
) -> None:
    """Raise ``ClusterModelError`` with counts per kind and the first offending rows (one action)."""
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
    if found:
        shown = [(r.topic, r.partition, list(r[KINDS])) for r in rows if r.kind is None]
        raise ClusterModelError(found, sorted(shown))
