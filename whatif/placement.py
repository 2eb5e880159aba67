"""``scale-out``, ``rebalance`` and ``decommission``: where replicas and preferred leaders go.

Each answers with two placements side by side: Kafka's own ``--generate`` (``whatif.generate``)
and the minimal-movement plan (``whatif.planner``), whose ``reassignment.json`` (only the changed
partitions, by topic and partition) and ``rollback.json`` (their current replicas) are written.

``scale-out --add N``: the new brokers take the ids after the highest one the snapshot knows, in
order, with ``--racks`` giving their racks; ``rebalance`` is ``scale-out`` adding none. When the
cluster's brokers have racks the new ones need them too (else rack awareness would be lost).

``decommission --brokers B``: first the controlled shutdown of B, all of B shutting down together
(``whatif.controlled_shutdown``, §8.4): the leaders it moves, the partitions it leaves offline or
under min ISR until the move. Then the plan moves every replica off B and nothing else: each to
the remaining broker with the fewest replicas among those keeping the partition's replicas in
distinct racks where possible, in B's place in the replica list. ``--rebalance`` also balances
the others, as ``rebalance`` does.

When balancing (``scale-out``, ``rebalance``, ``decommission --rebalance``), replicas on brokers
that are neither live nor added (known only from replica lists) are moved off like a
decommissioned broker's: nothing can be balanced onto a broker that is down.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from html_report.charts import bars_before_after
from html_report.page import Section
from statemachines import schemas as s
from whatif.answer import Answer, reassignment_json
from whatif.cluster import WhatIfCluster, WhatIfInputError
from whatif.controlled_shutdown import controlled_shutdown
from whatif.generate import (
    GENERATED,
    PlacementFigures,
    generate_brokers,
    placement_figures,
    with_generated,
)
from whatif.options import DecommissionOptions, ScaleOutOptions
from whatif.placement_candidates import with_bytes
from whatif.placement_greedy import PlacementTarget
from whatif.planner import PlacementPlan, plan_placement, spread, timed, without_gc

PLANNED = "planned_replicas"
_BROKER_LIST = ArrayType(IntegerType(), containsNull=False)


def scale_out(spark: SparkSession, cluster: WhatIfCluster, options: ScaleOutOptions) -> Answer:
    """Add ``options.add`` brokers (none: ``rebalance``) and balance replicas and leaders."""
    question = "scale-out" if options.add else "rebalance"
    existing = set(cluster.brokers) | {b for b in cluster.racks}
    first = max(existing, default=-1) + 1
    new = tuple(range(first, first + options.add))
    racks: dict[int, str | None] = dict(cluster.racks)
    if options.racks is not None:
        if len(options.racks) != options.add:
            raise WhatIfInputError(
                f"--racks names {len(options.racks)} rack(s) for --add {options.add} broker(s) — "
                "give one rack per new broker, in id order"
            )
        racks.update(zip(new, options.racks, strict=True))
    elif new and cluster.brokers and all(cluster.racks.get(b) for b in cluster.brokers):
        raise WhatIfInputError(
            f"--add {options.add}: the cluster's brokers have racks but the new ones have none — "
            "give theirs with --racks a,b,… (one per new broker, in id order)"
        )
    else:
        racks.update(dict.fromkeys(new))
    brokers = tuple(sorted(set(cluster.brokers) | set(new)))
    target = PlacementTarget(brokers, racks, frozenset(), options.seed)
    head = {"new_brokers": list(new), "new_broker_racks": {str(b): racks.get(b) for b in new}}
    lines = [f"{question}: {len(new)} new broker(s) {_ids(new)}" if new else f"{question}:"]
    return _answer(question, cluster, target, head, lines, [])


def decommission(
    spark: SparkSession, cluster: WhatIfCluster, options: DecommissionOptions
) -> Answer:
    """Controlled shutdown of ``options.brokers``, then a plan moving all their replicas off."""
    gone = sorted(set(options.brokers))
    not_live = [b for b in gone if b not in set(cluster.brokers)]
    # A broker that is down still counts when it holds replicas (one job, only then).
    holding = _replica_brokers(cluster.partitions) if not_live else set()
    unknown = [b for b in not_live if b not in holding]
    if unknown:
        raise WhatIfInputError(
            f"--brokers {_ids(options.brokers)}: unknown broker(s) {_ids(unknown)} — the "
            f"snapshot knows {_ids(sorted(set(cluster.brokers) | holding))}"
        )
    remaining = tuple(b for b in cluster.brokers if b not in set(gone))
    if not remaining:
        raise WhatIfInputError(
            f"--brokers {_ids(options.brokers)}: that is every live broker — keep at least one"
        )
    target = PlacementTarget(remaining, cluster.racks, frozenset(gone), options.seed)
    shutdown, shutdown_section = controlled_shutdown(cluster, gone)
    head: dict[str, Any] = {
        "decommissioned_brokers": gone,
        "rebalance": options.rebalance,
        **shutdown,
    }
    lines = [
        f"decommission {_ids(gone)}: controlled shutdown moves {shutdown['shutdown_leaders_moved']}"
        f" leader(s); {shutdown['shutdown_offline_partitions']} partition(s) offline, "
        f"{shutdown['shutdown_under_min_isr_partitions']} under min ISR until the move",
    ]
    return _answer(
        "decommission", cluster, target, head, lines, [shutdown_section], options.rebalance
    )


def _replica_brokers(partitions: DataFrame) -> set[int]:
    rows = partitions.select(F.explode(s.REPLICAS).alias(s.BROKER)).distinct().collect()
    return {r[s.BROKER] for r in rows}


# -- the two placements --------------------------------------------------------------------------


def _answer(
    question: str,
    cluster: WhatIfCluster,
    target: PlacementTarget,
    head: dict[str, Any],
    lines: list[str],
    sections: list[Section],
    rebalance: bool = True,
) -> Answer:
    with without_gc():
        return _placements(question, cluster, target, head, lines, sections, rebalance)


def _placements(
    question: str,
    cluster: WhatIfCluster,
    target: PlacementTarget,
    head: dict[str, Any],
    lines: list[str],
    sections: list[Section],
    rebalance: bool,
) -> Answer:
    plan = plan_placement(cluster.partitions, target, cluster.sizes, rebalance=rebalance)
    receivers = [b for b in target.brokers if b not in target.removed]
    too_wide = [rf for rf in plan.replication_factors if rf > len(receivers)]
    if too_wide:
        raise WhatIfInputError(
            f"{question}: replication factor {max(too_wide)} needs {max(too_wide)} brokers but "
            f"the placement has {len(receivers)} ({_ids(receivers)}) — keep more brokers"
        )
    spark = cluster.partitions.sparkSession
    changes = plan.changes()
    gen_brokers = generate_brokers(receivers, target.racks)
    rfs = plan.replication_factors
    sized = with_bytes(cluster.partitions, cluster.sizes)
    with timed("Kafka --generate placement and figures"):
        gen = placement_figures(
            with_generated(sized, gen_brokers, rfs, target.seed), s.REPLICAS, GENERATED
        )
    # The Parquet table joins the plan in; only the write runs it.
    generated = with_generated(_after_frame(spark, cluster, changes), gen_brokers, rfs, target.seed)
    summary = {
        **head,
        **_plan_summary(plan, receivers, target),
        "kafka_generate": _generate_summary(gen, plan, receivers),
    }
    lines = [
        *lines,
        f"plan: {plan.replicas_moved} replica move(s) (lower bound {plan.lower_bound_moves}), "
        f"{plan.leaders_moved} preferred-leader change(s), {len(changes)} partition(s) changed",
        f"replicas per broker spread {summary['replicas_spread_before']} → "
        f"{summary['replicas_spread_after']}; preferred leaders "
        f"{summary['leaders_spread_before']} → {summary['leaders_spread_after']}",
        f"Kafka --generate: {gen.replicas_moved} replica move(s), spread "
        f"{summary['kafka_generate']['replicas_spread_after']} replicas / "
        f"{summary['kafka_generate']['leaders_spread_after']} leaders",
    ]
    if plan.rack_spread_reduced:
        lines.append(
            f"{plan.rack_spread_reduced} move(s) had no broker keeping the rack spread "
            "(too few racks left)"
        )
    with timed("charts and plan files"):
        charts = _sections(plan, gen)
        plans = {
            "reassignment.json": reassignment_json([(t, p, list(a)) for t, p, _, a in changes]),
            "rollback.json": reassignment_json([(t, p, list(b)) for t, p, b, _ in changes]),
        }
    return Answer(
        question=question,
        summary=summary,
        lines=lines,
        tables={
            "partitions_after": generated.select(
                s.TOPIC,
                s.PARTITION,
                F.col(s.REPLICAS).alias("replicas_before"),
                F.col(PLANNED).alias("replicas_after"),
                F.col(GENERATED).alias("kafka_generate_replicas"),
            ),
            "brokers": _brokers_table(spark, plan, gen, target),
        },
        plans=plans,
        sections=[*sections, *charts],
    )


def _after_frame(
    spark: SparkSession,
    cluster: WhatIfCluster,
    changes: Sequence[tuple[str, int, tuple[int, ...], tuple[int, ...]]],
) -> DataFrame:
    """topic, partition, replicas, bytes, planned_replicas (the plan's, or unchanged)."""
    schema = StructType(
        [
            StructField(s.TOPIC, StringType(), nullable=False),
            StructField(s.PARTITION, IntegerType(), nullable=False),
            StructField(PLANNED, _BROKER_LIST, nullable=False),
        ]
    )
    table = pa.table(
        {
            s.TOPIC: pa.array([c[0] for c in changes], pa.string()),
            s.PARTITION: pa.array([c[1] for c in changes], pa.int32()),
            PLANNED: pa.array([list(c[3]) for c in changes], pa.list_(pa.int32())),
        }
    )
    planned = spark.createDataFrame(table, schema)
    sized = with_bytes(cluster.partitions, cluster.sizes)
    joined = sized.join(F.broadcast(planned), [s.TOPIC, s.PARTITION], "left")
    return joined.withColumn(PLANNED, F.coalesce(F.col(PLANNED), F.col(s.REPLICAS)))


def _by_id(counts: Mapping[int, int], brokers: Sequence[int] = ()) -> dict[str, int]:
    keys = sorted(set(counts) | set(brokers))
    return {str(b): int(counts.get(b, 0)) for b in keys}


def _plan_summary(
    plan: PlacementPlan, receivers: Sequence[int], target: PlacementTarget
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "replicas_moved": plan.replicas_moved,
        "lower_bound_moves": plan.lower_bound_moves,
        "leaders_moved": plan.leaders_moved,
        "partitions_moved": sum(
            1 for k, v in plan.final.items() if set(v) != set(plan.original[k])
        ),
        "partitions_reordered": sum(
            1 for k, v in plan.final.items() if set(v) == set(plan.original[k])
        ),
        "replicas_per_broker_before": _by_id(plan.replicas_before, receivers),
        "replicas_per_broker_after": _by_id(plan.replicas_after, receivers),
        "preferred_leaders_per_broker_before": _by_id(plan.leaders_before, receivers),
        "preferred_leaders_per_broker_after": _by_id(plan.leaders_after, receivers),
        "replicas_spread_before": spread(plan.replicas_before, receivers),
        "replicas_spread_after": spread(plan.replicas_after, receivers),
        "leaders_spread_before": spread(plan.leaders_before, receivers),
        "leaders_spread_after": spread(plan.leaders_after, receivers),
        "rack_aware": plan.rack_aware,
        "rack_spread_reduced": plan.rack_spread_reduced,
    }
    if target.removed:
        out["moved_off_brokers"] = sorted(target.removed)
    out["bytes_moved"] = plan.bytes_moved
    return out


def _generate_summary(
    gen: PlacementFigures, plan: PlacementPlan, receivers: Sequence[int]
) -> dict[str, Any]:
    return {
        "replicas_moved": gen.replicas_moved,
        "lower_bound_moves": plan.lower_bound_moves,
        "leaders_moved": gen.leaders_moved,
        "partitions_moved": gen.partitions_moved,
        "bytes_moved": gen.bytes_moved,
        "replicas_per_broker_after": _by_id(gen.replicas_after, receivers),
        "preferred_leaders_per_broker_after": _by_id(gen.leaders_after, receivers),
        "replicas_spread_before": spread(plan.replicas_before, receivers),
        "replicas_spread_after": spread(gen.replicas_after, receivers),
        "leaders_spread_before": spread(plan.leaders_before, receivers),
        "leaders_spread_after": spread(gen.leaders_after, receivers),
    }


def _brokers_table(
    spark: SparkSession, plan: PlacementPlan, gen: PlacementFigures, target: PlacementTarget
) -> DataFrame:
    ids = sorted(set(target.brokers) | set(plan.replicas_before) | set(plan.replicas_after))
    columns = {
        "replicas_before": plan.replicas_before,
        "replicas_after": plan.replicas_after,
        "preferred_leaders_before": plan.leaders_before,
        "preferred_leaders_after": plan.leaders_after,
        "kafka_generate_replicas_after": gen.replicas_after,
        "kafka_generate_preferred_leaders_after": gen.leaders_after,
    }
    fields = [
        StructField(s.BROKER, IntegerType(), nullable=False),
        StructField("rack", StringType(), nullable=True),
        StructField("removed", StringType(), nullable=False),
    ] + [StructField(name, LongType(), nullable=False) for name in columns]
    table = pa.table(
        {
            s.BROKER: pa.array(ids, pa.int32()),
            "rack": pa.array([target.racks.get(b) for b in ids], pa.string()),
            "removed": pa.array(["yes" if b in target.removed else "no" for b in ids], pa.string()),
            **{
                name: pa.array([int(counts.get(b, 0)) for b in ids], pa.int64())
                for name, counts in columns.items()
            },
        }
    )
    return spark.createDataFrame(table, StructType(fields))


def _sections(plan: PlacementPlan, gen: PlacementFigures) -> list[Section]:
    return [
        Section(
            "Minimal-movement plan",
            f"{plan.replicas_moved} replica move(s) against a lower bound of "
            f"{plan.lower_bound_moves}; {plan.leaders_moved} preferred-leader change(s).",
            charts=[
                bars_before_after(
                    "Replicas per broker", plan.replicas_before, plan.replicas_after, "replicas"
                ),
                bars_before_after(
                    "Preferred leaders per broker",
                    plan.leaders_before,
                    plan.leaders_after,
                    "preferred leaders",
                ),
            ],
        ),
        Section(
            "Kafka --generate",
            f"kafka-reassign-partitions.sh --generate places every topic afresh: "
            f"{gen.replicas_moved} replica move(s) in {gen.partitions_moved} partition(s).",
            charts=[
                bars_before_after(
                    "Replicas per broker (--generate)",
                    plan.replicas_before,
                    gen.replicas_after,
                    "replicas",
                ),
                bars_before_after(
                    "Preferred leaders per broker (--generate)",
                    plan.leaders_before,
                    gen.leaders_after,
                    "preferred leaders",
                ),
            ],
        ),
    ]


def _ids(ids: Sequence[int] | set[int]) -> str:
    return ",".join(str(b) for b in sorted(ids)) or "none"
