"""``kce whatif scale-out / rebalance / decommission``: the planner, Kafka's --generate, the CLI.

Hand-worked clusters pin the planner's moves and bounds; a hypothesis property checks random small
clusters (plan valid by ``plan_check``, RF kept, moves near the lower bound, spread at most one
where racks allow); the --generate wrapper is compared with spec §9.3's worked examples.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_app.cli import main
from statemachines import schemas as s
from statemachines.assignment import assign_replicas_to_brokers
from whatif.cluster import (
    BrokerDefaults,
    WhatIfCluster,
    WhatIfInputError,
    empty_columns,
    partitions_frame,
)
from whatif.command import question_arguments, question_options
from whatif.generate import (
    GENERATED,
    SHIFT_DRAW,
    START_DRAW,
    generate_brokers,
    placement_figures,
    topic_draw,
    with_generated,
)
from whatif.options import DecommissionOptions, ScaleOutOptions
from whatif.placement import decommission, scale_out
from whatif.placement_greedy import Greedy, PlacementTarget
from whatif.plan_check import check_plan, errors, plan_from_json
from whatif.planner import PlacementPlan, lower_bound_moves, plan_placement, spread

DATA = Path(__file__).parent / "data" / "whatif"
Rows = list[tuple[str, int, list[int]]]


def frame(
    spark: SparkSession, rows: Rows, isr: dict[tuple[str, int], list[int]] | None = None
) -> DataFrame:
    cols = empty_columns()
    for t, p, reps in rows:
        in_sync = (isr or {}).get((t, p), reps)
        values = {
            s.TOPIC: t, s.PARTITION: p, s.REPLICAS: reps, s.ADDING_REPLICAS: [],
            s.REMOVING_REPLICAS: [], s.ISR: in_sync, s.LEADER: in_sync[0] if in_sync else -1,
            s.LEADER_EPOCH: 0, s.ZK_VERSION: 0, s.CONTROLLER_EPOCH: 1, s.STATE: "OnlinePartition",
        }  # fmt: skip
        for k, v in values.items():
            cols[k].append(v)
    return partitions_frame(spark, cols)


def assert_valid(plan: PlacementPlan, rows: Rows, target: PlacementTarget) -> None:
    """The plan passes the validator ``audit`` runs, keeps every RF and moves nothing twice."""
    current = {(t, p): r for t, p, r in rows}
    changes = plan.changes()
    if changes:
        doc = {
            "version": 1,
            "partitions": [
                {"topic": t, "partition": p, "replicas": list(a)} for t, p, _, a in changes
            ],
        }
        problems = check_plan(plan_from_json(doc, "plan"), current, target.brokers, target.racks)
        assert errors(problems) == []
        assert [p for p in problems if "replication factor" in p.message] == []
    for t, p, before, after in changes:
        assert sorted(before) == sorted(current[(t, p)])
        assert len(after) == len(before)
        assert not set(after) & target.removed
    # The figures agree with the changes.
    moved = sum(len(set(a) - set(b)) for _, _, b, a in changes)
    assert moved == plan.replicas_moved
    counts: dict[int, int] = {}
    for t, p, reps in rows:
        for b in plan.final.get((t, p), reps):
            counts[b] = counts.get(b, 0) + 1
    assert {b: n for b, n in counts.items() if n} == {
        b: n for b, n in plan.replicas_after.items() if n
    }


# -- the lower bound, by hand ---------------------------------------------------------------------


def test_lower_bound_is_the_excess_over_the_final_counts() -> None:
    # 8 replicas on 4 brokers: 2 each; brokers 1 and 2 hold 3, one too many each.
    assert lower_bound_moves({1: 3, 2: 3, 3: 2}, [1, 2, 3, 4]) == 2
    # 10 on 4: two brokers keep 3 (the fullest, 1 and 2), the others 2: broker 3 is fine, broker
    # 4 needs one, taken from broker 3's fourth... no: 3 holds 3 and must drop to 2. One move.
    assert lower_bound_moves({1: 3, 2: 3, 3: 3, 4: 1}, [1, 2, 3, 4]) == 1
    # Decommissioning 3: its 2 replicas leave; 1 and 2 end at 4 each, no other move.
    assert lower_bound_moves({1: 3, 2: 3, 3: 2}, [1, 2]) == 2
    assert spread({1: 3, 2: 1}, [1, 2, 3]) == 3


# -- the greedy, by hand (no Spark) ---------------------------------------------------------------


def test_greedy_three_brokers_add_one_exact_moves() -> None:
    # t-0 [1,2], t-1 [2,3], t-2 [3,1], t-3 [1,2]; brokers 1, 2 hold 3 replicas, broker 3 two;
    # new broker 4. Mean 2: lower bound 2 (one off 1, one off 2).
    # Broker 1 gives first (fullest, lowest id): its first candidate t-0 goes to 4 (emptiest):
    #   t-0 [4,2] — 4 takes position 0, so preferred leadership moves 1 → 4.
    # Broker 2 next (3 replicas, limit 1): t-0 already holds 4, so t-1 [2,3] → [4,3] (2 → 4).
    # Now 2 each. Preferred leaders: 1: t-3, 2: none, 3: t-2, 4: t-0 and t-1 — spread 2.
    # Broker 4 gives one to broker 2 (no preferred leader): t-0 [4,2] → [2,4] by reordering.
    rows = {("t", 0): [1, 2], ("t", 1): [2, 3], ("t", 2): [3, 1], ("t", 3): [1, 2]}
    target = PlacementTarget((1, 2, 3, 4), dict.fromkeys((1, 2, 3, 4)))
    greedy = Greedy(target, {1: 3, 2: 3, 3: 2}, {1: 2, 2: 1, 3: 1})
    for key, reps in rows.items():
        greedy.know(key, reps)
    for b in (1, 2, 3):
        greedy.add_candidates(b, [k for k, r in rows.items() if b in r], truncated=False)
    assert greedy.balance_replicas() == set()
    assert greedy.changed() == {("t", 0): (4, 2), ("t", 1): (4, 3)}
    greedy.balance_leaders()
    assert greedy.changed() == {("t", 0): (2, 4), ("t", 1): (4, 3)}
    assert greedy.count == {1: 2, 2: 2, 3: 2, 4: 2}
    assert greedy.leaders == {1: 1, 2: 1, 3: 1, 4: 1}
    assert greedy.replicas_moved == 2


def test_greedy_leader_chain_when_no_partition_links_the_two_brokers() -> None:
    # Replicas are balanced (2 each); preferred leaders 1: 2, 2: 1, 3: 0. No partition led by 1
    # holds broker 3, so 1 → 3 needs a chain: 1 → 2 on a-0 [1,2], then 2 → 3 on a-2 [2,3].
    rows = {("a", 0): [1, 2], ("a", 1): [1, 2], ("a", 2): [2, 3]}
    target = PlacementTarget((1, 2, 3), dict.fromkeys((1, 2, 3)))
    greedy = Greedy(target, {1: 2, 2: 3, 3: 1}, {1: 2, 2: 1})
    for key, reps in rows.items():
        greedy.know(key, reps)
    greedy.balance_leaders()
    assert greedy.leaders == {1: 1, 2: 1, 3: 1}
    assert greedy.changed() == {("a", 0): (2, 1), ("a", 2): (3, 2)}


def test_empty_removed_keeps_a_partitions_racks_distinct_where_possible() -> None:
    # Racks 1, 2: a; 3: b; 4, 5: c. Decommission 4; broker 5 is the fullest receiver (3), 2 the
    # emptiest (0). Kafka's rack-aware placement keeps a partition's replicas in distinct racks
    # where it can (spec §9.3):
    #   p-0 [4,1,3] (c, a, b): the others use a and b, only rack c keeps three racks: 5, though
    #     fullest; 5 takes 4's place, first, so it is the preferred leader.
    #   p-1 [4,5,1] (c, c, a): the others use c and a: rack b (3), which adds a third rack.
    #   p-2 [4,3,2,5] (c, b, a, c): every rack is used: the emptiest broker not holding it — 1.
    rows = {("p", 0): [4, 1, 3], ("p", 1): [4, 5, 1], ("p", 2): [4, 3, 2, 5],
            ("q", 0): [5, 3], ("q", 1): [5, 1]}  # fmt: skip
    racks = {1: "a", 2: "a", 3: "b", 4: "c", 5: "c"}
    target = PlacementTarget((1, 2, 3, 5), racks, frozenset({4}))
    greedy = Greedy(target, {1: 3, 2: 1, 3: 3, 4: 3, 5: 4}, {4: 3, 5: 2})
    for key, reps in rows.items():
        greedy.know(key, reps)
    greedy.add_candidates(4, [k for k, r in rows.items() if 4 in r], truncated=False)
    greedy.empty_removed()
    assert greedy.changed() == {
        ("p", 0): (5, 1, 3), ("p", 1): (3, 5, 1), ("p", 2): (1, 3, 2, 5),
    }  # fmt: skip
    assert greedy.rack_spread_reduced == 0 and greedy.replicas_moved == 3


# -- Spark path, hand-worked ------------------------------------------------------------------


def test_scale_out_three_brokers_add_one(spark: SparkSession) -> None:
    rows: Rows = [("t", 0, [1, 2]), ("t", 1, [2, 3]), ("t", 2, [3, 1]), ("t", 3, [1, 2])]
    target = PlacementTarget((1, 2, 3, 4), dict.fromkeys((1, 2, 3, 4)))
    plan = plan_placement(frame(spark, rows), target)
    assert_valid(plan, rows, target)
    # Exactly the lower bound: one replica off broker 1, one off broker 2, both to 4.
    assert (plan.lower_bound_moves, plan.replicas_moved) == (2, 2)
    assert plan.replicas_after == {1: 2, 2: 2, 3: 2, 4: 2}
    assert plan.leaders_after == {1: 1, 2: 1, 3: 1, 4: 1}


def test_racks_keep_replicas_in_their_rack(spark: SparkSession) -> None:
    # Brokers 1 (rack a), 2 (b), 3 (c); four RF-3 partitions span the three racks; broker 4
    # joins rack a. Only rack a's replicas may go to 4 (anything else puts two replicas in rack
    # a): broker 1 gives 2 of its 4 (4 → 2, 4 gets 2); brokers 2 and 3 keep 4 each. The lower
    # bound ignores racks (12 on 4 brokers: one off each old broker, 3), the spread stays 2.
    racks = {1: "a", 2: "b", 3: "c", 4: "a"}
    rows: Rows = [("t", p, [1 + (p + i) % 3 for i in range(3)]) for p in range(4)]
    target = PlacementTarget((1, 2, 3, 4), racks)
    plan = plan_placement(frame(spark, rows), target)
    assert_valid(plan, rows, target)
    assert plan.rack_aware
    assert (plan.replicas_moved, plan.lower_bound_moves) == (2, 3)
    assert plan.replicas_after == {1: 2, 2: 4, 3: 4, 4: 2}
    for _, _, _, after in plan.changes():
        assert len({racks[b] for b in after}) == 3


def test_sampled_path_reaches_the_same_balance(spark: SparkSession) -> None:
    # The large-cluster path (per-broker samples, more rounds when a sample runs out) on a
    # small cluster: 4 brokers, 40 RF-2 partitions placed by Kafka, 2 brokers added.
    placed = assign_replicas_to_brokers([1, 2, 3, 4], 40, 2, fixed_start_index=0)
    rows: Rows = [("t", p, r) for p, r in placed.items()]
    target = PlacementTarget(tuple(range(1, 7)), dict.fromkeys(range(1, 7)), seed=3)
    plan = plan_placement(frame(spark, rows), target, full_collect_partitions=0)
    assert_valid(plan, rows, target)
    assert plan.replicas_moved == plan.lower_bound_moves == 26  # 80 on 6: 20 → 14 (x2), 13 (x2)
    assert spread(plan.replicas_after, target.brokers) <= 1
    assert spread(plan.leaders_after, target.brokers) <= 1


def test_sizes_prefer_small_partitions(spark: SparkSession) -> None:
    # Broker 1 holds two partitions, broker 2 none: one must move; the 10-byte one does.
    rows: Rows = [("t", 0, [1]), ("t", 1, [1])]
    sizes = spark.createDataFrame(
        [("t", 0, 1000), ("t", 1, 10)], "topic string, partition int, bytes long"
    )
    target = PlacementTarget((1, 2), {1: None, 2: None})
    plan = plan_placement(frame(spark, rows), target, sizes)
    assert plan.changes() == [("t", 1, (1,), (2,))]
    assert plan.bytes_moved == 10


# -- Kafka's --generate ------------------------------------------------------------------------


def _seed_with_draws(spark: SparkSession, topic: str, n: int, start: int, shift: int) -> int:
    """The first seed whose two hash draws for ``topic`` over ``n`` brokers are (start, shift)."""
    seed = F.col("id")
    found = (
        spark.range(1000)
        .withColumn(s.TOPIC, F.lit(topic))
        .where(
            (topic_draw(seed, START_DRAW, n) == start) & (topic_draw(seed, SHIFT_DRAW, n) == shift)
        )
        .agg(F.min("id"))
        .first()
    )
    assert found is not None and found[0] is not None
    return int(found[0])


@pytest.mark.parametrize(
    ("brokers", "racks", "n_part", "expected"),
    [
        # §9.3 example 1: brokers 0..4, no racks, 10 partitions, RF 3, fixed start 0.
        (
            [0, 1, 2, 3, 4], None, 10,
            {0: [0, 1, 2], 1: [1, 2, 3], 2: [2, 3, 4], 3: [3, 4, 0], 4: [4, 0, 1],
             5: [0, 2, 3], 6: [1, 3, 4], 7: [2, 4, 0], 8: [3, 0, 1], 9: [4, 1, 2]},
        ),
        # §9.3 example 3: racks 0:rack1 1:rack3 2:rack3 3:rack2 4:rack2 5:rack1, 7 partitions.
        (
            [0, 1, 2, 3, 4, 5], ["rack1", "rack3", "rack3", "rack2", "rack2", "rack1"], 7,
            {0: [0, 3, 1], 1: [3, 1, 5], 2: [1, 5, 4], 3: [5, 4, 2], 4: [4, 2, 0],
             5: [2, 0, 3], 6: [0, 4, 2]},
        ),
    ],
)  # fmt: skip
def test_generate_matches_spec_examples(
    spark: SparkSession,
    brokers: list[int],
    racks: list[str] | None,
    n_part: int,
    expected: dict[int, list[int]],
) -> None:
    # With a seed whose draws are (0, 0), Kafka's fixed start index 0, the placement is the
    # spec's table; the current replicas do not matter to --generate.
    seed = _seed_with_draws(spark, "t", len(brokers), 0, 0)
    rows: Rows = [("t", p, [brokers[0], brokers[1], brokers[2]]) for p in range(n_part)]
    rack_of = dict(zip(brokers, racks or [None] * len(brokers), strict=True))
    out = with_generated(frame(spark, rows), generate_brokers(brokers, rack_of), [3], seed)
    got = {r[s.PARTITION]: list(r[GENERATED]) for r in out.collect()}
    assert got == expected


def test_generate_equals_the_reference_for_random_draws(spark: SparkSession) -> None:
    # Two topics of different RF: each row gets what assign_replicas_to_brokers gives with the
    # topic's two draws (Kafka's rand.nextInt calls, in order).
    rows: Rows = [("a", p, [1, 2]) for p in range(7)] + [("b", p, [1, 2, 3]) for p in range(5)]
    brokers = [1, 2, 3, 4, 5]
    out = with_generated(frame(spark, rows), generate_brokers(brokers, {}), [2, 3], 11)
    got = {(r[s.TOPIC], r[s.PARTITION]): list(r[GENERATED]) for r in out.collect()}
    draws = spark.createDataFrame([("a",), ("b",)], "topic string").select(
        "topic", topic_draw(11, START_DRAW, 5).alias("x"), topic_draw(11, SHIFT_DRAW, 5).alias("y")
    )
    for row in draws.collect():

        class Draws(random.Random):
            values: ClassVar[list[int]] = [row["x"], row["y"]]

            def randrange(self, *_: Any, **__: Any) -> int:  # type: ignore[override]
                return self.values.pop(0)

        rf = 2 if row["topic"] == "a" else 3
        n = 7 if row["topic"] == "a" else 5
        want = assign_replicas_to_brokers(brokers, n, rf, rng=Draws())
        assert {p: got[(row["topic"], p)] for p in range(n)} == want
    figures = placement_figures(out, s.REPLICAS, GENERATED)
    assert sum(figures.replicas_after.values()) == 7 * 2 + 5 * 3


# -- random small clusters ---------------------------------------------------------------------


@st.composite
def clusters(draw: st.DrawFn) -> tuple[Rows, PlacementTarget, bool]:
    n = draw(st.integers(3, 6))
    racked = draw(st.booleans())
    n_racks = draw(st.integers(2, 3)) if racked else 0
    add = draw(st.integers(0, 2))
    brokers = list(range(1, n + add + 1))
    racks = {b: (f"r{b % n_racks}" if racked else None) for b in brokers}
    rf = draw(st.integers(1, min(3, n)))
    rows: Rows = []
    for p in range(draw(st.integers(1, 14))):
        reps = draw(st.permutations(range(1, n + 1)))[:rf]
        rows.append(("t", p, list(reps)))
    return rows, PlacementTarget(tuple(brokers), racks, seed=draw(st.integers(0, 5))), racked


@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(clusters())
def test_random_clusters_plan_is_valid_and_near_the_bound(
    spark: SparkSession, case: tuple[Rows, PlacementTarget, bool]
) -> None:
    rows, target, racked = case
    plan = plan_placement(frame(spark, rows), target)
    assert_valid(plan, rows, target)
    if racked:
        # Racks may forbid moves the (rack-blind) bound counts, never force extra ones.
        assert plan.replicas_moved <= 1.05 * plan.lower_bound_moves + 2
    else:
        assert plan.replicas_moved <= 1.05 * plan.lower_bound_moves + 1
        assert spread(plan.replicas_after, target.brokers) <= 1
        if all(len(r) >= 2 for _, _, r in rows):
            assert spread(plan.leaders_after, target.brokers) <= 1


# -- questions ---------------------------------------------------------------------------------


def _cluster(
    spark: SparkSession, rows: Rows, racks: dict[int, str | None], **kw: Any
) -> WhatIfCluster:
    return WhatIfCluster(frame(spark, rows, kw.get("isr")), tuple(sorted(racks)), racks, {})


def test_scale_out_needs_racks_when_the_cluster_has_them(spark: SparkSession) -> None:
    cluster = _cluster(spark, [("t", 0, [1, 2])], {1: "a", 2: "b"})
    with pytest.raises(WhatIfInputError, match="--racks"):
        scale_out(spark, cluster, ScaleOutOptions(1))


def test_decommission_unknown_broker(spark: SparkSession) -> None:
    cluster = _cluster(spark, [("t", 0, [1, 2])], {1: None, 2: None})
    with pytest.raises(WhatIfInputError, match="unknown broker"):
        decommission(spark, cluster, DecommissionOptions((7,)))


def test_decommission_controlled_shutdown_and_plan(spark: SparkSession) -> None:
    # Brokers 1..4; decommission 1.
    #   a-0 [1,2] ISR [1,2]: led by 1 → ControlledShutdown election picks 2 (moved); ISR [2]
    #     under min ISR 2.
    #   a-1 [1,3] ISR [1]: no other ISR member → remaining; when 1 stops, no live ISR member,
    #     unclean disabled → offline.
    #   a-2 [2,1] ISR [2,1]: led by 2, follower 1 leaves the ISR → [2], under min ISR.
    #   a-3 [1] RF 1: offline.
    #   a-4 [3,4]: untouched.
    rows: Rows = [
        ("a", 0, [1, 2]),
        ("a", 1, [1, 3]),
        ("a", 2, [2, 1]),
        ("a", 3, [1]),
        ("a", 4, [3, 4]),
    ]
    isr = {("a", 1): [1]}
    racks = dict.fromkeys((1, 2, 3, 4))
    cluster = WhatIfCluster(
        frame(spark, rows, isr), (1, 2, 3, 4), racks, {},
        broker_defaults=BrokerDefaults.model_validate({"min.insync.replicas": 2}),
    )  # fmt: skip
    answer = decommission(spark, cluster, DecommissionOptions((1,)))
    sm = answer.summary
    assert sm["shutdown_leaders_moved"] == 1
    assert sm["shutdown_remaining_partitions"] == 1
    assert sm["shutdown_offline_partitions"] == 2
    assert sm["shutdown_under_min_isr_partitions"] == 2
    # The 4 replicas on broker 1 move off; 9 replicas on 3 brokers end at 3 each.
    assert sm["replicas_moved"] == sm["lower_bound_moves"] == 4
    assert "1" not in {b for b, n in sm["replicas_per_broker_after"].items() if n}
    assert sorted(sm["replicas_per_broker_after"].values()) == [3, 3, 3]
    assert sm["kafka_generate"]["replicas_per_broker_after"].keys() == {"2", "3", "4"}


def test_decommission_moves_only_the_removed_brokers_replicas(spark: SparkSession) -> None:
    # Broker 1 holds 5 replicas, 2 and 3 two each, 4 one (t-4 [1,4]). Decommissioning 4 moves
    # its one replica and nothing else: to 2 (2 and 3 tie at 2 replicas; the lower id), in 4's
    # place. Broker 1 stays at 5. t-4 moves anyway, so its order is free: [2,1] gives broker 2
    # a preferred leader (1 leads 5, 2 none) at no data moved; no other partition changes.
    # With --rebalance the 10 replicas on 3 brokers end at 4, 3, 3: one more move, off broker 1
    # (its lower bound 2).
    rows: Rows = [("t", 0, [1, 2]), ("t", 1, [1, 3]), ("t", 2, [1, 2]), ("t", 3, [1, 3]),
                  ("t", 4, [1, 4])]  # fmt: skip
    cluster = _cluster(spark, rows, dict.fromkeys((1, 2, 3, 4)))
    only = decommission(spark, cluster, DecommissionOptions((4,))).summary
    assert only["rebalance"] is False
    assert only["replicas_moved"] == only["lower_bound_moves"] == only["partitions_moved"] == 1
    assert only["replicas_per_broker_after"] == {"1": 5, "2": 3, "3": 2}
    assert only["leaders_moved"] == 1 and only["partitions_reordered"] == 0
    assert only["preferred_leaders_per_broker_after"] == {"1": 4, "2": 1, "3": 0}
    answer = decommission(spark, cluster, DecommissionOptions((4,), rebalance=True))
    both = answer.summary
    assert both["replicas_moved"] == both["lower_bound_moves"] == 2
    assert sorted(both["replicas_per_broker_after"].values()) == [3, 3, 4]
    changed = {
        e["partition"]: e["replicas"] for e in answer.plans["reassignment.json"]["partitions"]
    }
    assert 4 in changed and 4 not in changed[4]
    assert sum(1 for p, r in changed.items() if p != 4 and 1 not in r) == 1


@settings(
    max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(clusters(), st.data())
def test_decommission_without_rebalance_changes_only_the_removed_replicas(
    spark: SparkSession, case: tuple[Rows, PlacementTarget, bool], data: st.DataObject
) -> None:
    rows, target, _ = case
    held = sorted({b for _, _, r in rows for b in r})
    removed = frozenset(data.draw(st.sets(st.sampled_from(held), min_size=1, max_size=2)))
    remaining = tuple(b for b in target.brokers if b not in removed)
    rf = max(len(r) for _, _, r in rows)
    if len(remaining) < rf:
        return
    target = PlacementTarget(remaining, target.racks, removed, target.seed)
    plan = plan_placement(frame(spark, rows), target, rebalance=False)
    assert_valid(plan, rows, target)
    on_removed = sum(1 for _, _, r in rows for b in r if b in removed)
    assert plan.replicas_moved == plan.lower_bound_moves == on_removed
    for _, _, before, after in plan.changes():
        # Only partitions holding a removed broker change, and only that replica moves.
        assert set(before) & removed
        assert set(before) - removed <= set(after)
        if target.rack_aware:
            # Distinct racks where possible: as many as the partition can have among the
            # remaining racks, or at least as many as it kept.
            racks_left = {target.racks[b] for b in remaining}
            kept = {target.racks[b] for b in before if b not in removed}
            got = {target.racks[b] for b in after}
            assert len(got) == min(len(after), len(racks_left)) or got >= kept


def test_decommission_rebalance_option() -> None:
    args = question_arguments("decommission", ["--brokers", "3,4", "--rebalance"])
    assert question_options(args) == DecommissionOptions((3, 4), 0, rebalance=True)
    assert question_options(question_arguments("decommission", ["--brokers", "3"])) == (
        DecommissionOptions((3,), 0, rebalance=False)
    )


def _run(tmp_path: Path, *args: str) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    out = tmp_path / "out"
    rc = main(["whatif", *args, "--out", str(out)])
    assert rc == 0
    read = lambda name: json.loads((out / name).read_text())  # noqa: E731
    assert (out / "report.html").exists() and (out / "brokers.parquet").is_dir()
    return read("summary.json"), read("reassignment.json"), read("rollback.json")


def test_cli_scale_out_end_to_end(tmp_path: Path) -> None:
    summary, plan, rollback = _run(
        tmp_path, "scale-out", "--describe", str(DATA / "place-small.txt"), "--add", "1"
    )
    assert summary["new_brokers"] == [4]
    assert summary["replicas_moved"] == summary["lower_bound_moves"] == 2
    assert summary["replicas_per_broker_after"] == {"1": 2, "2": 2, "3": 2, "4": 2}
    assert summary["preferred_leaders_per_broker_after"] == {"1": 1, "2": 1, "3": 1, "4": 1}
    assert summary["replicas_spread_after"] == summary["leaders_spread_after"] == 0
    assert summary["kafka_generate"]["lower_bound_moves"] == 2
    assert set(summary["kafka_generate"]) >= {
        "replicas_moved", "leaders_moved", "replicas_per_broker_after",
        "preferred_leaders_per_broker_after", "replicas_spread_after", "leaders_spread_after",
    }  # fmt: skip
    current = {0: [1, 2], 1: [2, 3], 2: [3, 1], 3: [1, 2]}
    assert plan["version"] == rollback["version"] == 1
    keys = [(e["topic"], e["partition"]) for e in plan["partitions"]]
    assert keys == sorted(keys) == [(e["topic"], e["partition"]) for e in rollback["partitions"]]
    assert all(e["replicas"] == current[e["partition"]] for e in rollback["partitions"])
    assert (
        sum(len(set(e["replicas"]) - set(current[e["partition"]])) for e in plan["partitions"]) == 2
    )


def test_cli_decommission_end_to_end(tmp_path: Path) -> None:
    summary, plan, rollback = _run(
        tmp_path, "decommission", "--describe", str(DATA / "place-small.txt"), "--brokers", "3"
    )
    # t-1 [2,3] and t-2 [3,1] lose broker 3; min ISR 2 (topic config) leaves both under it.
    assert summary["shutdown_leaders_moved"] == 1
    assert summary["shutdown_under_min_isr_partitions"] == 2
    assert summary["replicas_moved"] == summary["lower_bound_moves"] == 2
    assert summary["replicas_per_broker_after"] == {"1": 4, "2": 4}
    assert summary["rebalance"] is False
    assert all(3 not in e["replicas"] for e in plan["partitions"])
    assert {e["partition"] for e in rollback["partitions"]} == {1, 2}


def test_cli_rack_aware_scale_out_plan_passes_audit(tmp_path: Path) -> None:
    # place-racks: brokers 1, 3 in rack a, 2, 4 in rack b; 7 replicas (1: 2, 2: 2, 3: 2, 4: 1).
    # Adding 5 (a) and 6 (b): 7 on 6 brokers, the fullest (1) keeps 2 and 2, 3 drop to 1 — a
    # lower bound of 2. Broker 1 gives first; whichever partition, only rack a keeps its spread
    # (or, for RF-1 logs-0, any rack; 5 is the emptiest by id): 1 → 5. Then broker 2 → 6 (rack b).
    # Broker 3 stops there: everyone else holds 1 already.
    racks = ["--rack-map", str(DATA / "place-racks.csv")]
    source = ["--describe", str(DATA / "place-racks.txt"), *racks]
    summary, plan, _ = _run(tmp_path, "scale-out", *source, "--add", "2", "--racks", "a,b")
    assert summary["rack_aware"] is True
    assert summary["replicas_moved"] == summary["lower_bound_moves"] == 2
    assert summary["replicas_per_broker_after"] == {"1": 1, "2": 1, "3": 2, "4": 1, "5": 1, "6": 1}
    assert max(summary["preferred_leaders_per_broker_after"].values()) == 1
    # The same plan through ``kce whatif audit``: the validator every plan passes.
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(plan))
    out = tmp_path / "audit"
    assert main(["whatif", "audit", str(plan_file), *source, "--out", str(out)]) == 0
    audit = json.loads((out / "summary.json").read_text())
    # Brokers 5 and 6 do not exist yet: the only problems are those unknown ids.
    assert {p["message"].split(" — ")[0] for p in audit["problems"]} <= {
        "unknown broker id(s) 5", "unknown broker id(s) 6", "unknown broker id(s) 5,6",
    }  # fmt: skip
    assert all(p["field"] == "replicas" for p in audit["problems"])


def test_rack_safety_counts_the_racks_a_replica_may_still_go_to() -> None:
    """Decommissioning broker 2, the only broker of rack r2: ``[1, 2, 3]`` can keep only two
    racks among brokers 1, 3 and 4, so ``[1, 4, 3]`` loses no rack it could have kept (the
    audit's rule counts the racks of the brokers a replica may be placed on, not every rack the
    snapshot names)."""
    racks = {1: "r1", 2: "r2", 3: "r0", 4: "r1"}
    doc = {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 4, 3]}]}
    plan = plan_from_json(doc, "plan")
    assert errors(check_plan(plan, {("t", 0): [1, 2, 3]}, (1, 3, 4), racks)) == []
    # With broker 2 still a place to go, the plan loses a rack it could keep.
    assert errors(check_plan(plan, {("t", 0): [1, 2, 3]}, (1, 2, 3, 4), racks)) != []
