"""``kce whatif roll``: rolling restarts in batches against min.insync.replicas — hand-worked
clusters, the greedy's safety proof, the Spark evaluation against a plain-Python walk through
Kafka's controlled shutdown / restart / preferred election, and the command end to end."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from spark_app.cli import main
from whatif.cluster import (
    ONLINE,
    TopicConfigs,
    WhatIfCluster,
    WhatIfInputError,
    empty_columns,
    partitions_frame,
)
from whatif.options import RollOptions
from whatif.roll import answer
from whatif.roll_batches import (
    batch_constraints,
    compatible_groups,
    constraints_of,
    first_fit,
    is_safe,
    rack_batches,
)
from whatif.roll_evaluation import evaluate_batches, partition_form, with_leader_chain
from whatif.roll_solver import Batching, LargestBatch, plan_roll
from whatif.sources import load_cluster

DATA = Path(__file__).parent / "data" / "whatif"
AT_MIN_ISR = DATA / "roll-at-min-isr.txt"
RACKS = DATA / "roll-racks.txt"
RACK_CSV = "id,rack\n1,a\n2,a\n3,b\n4,b\n5,c\n6,c\n"


# -- plain-Python rules --------------------------------------------------------------------------


def reference_roll(
    rows: Sequence[dict[str, Any]], live: set[int], batches: Sequence[Sequence[int]]
) -> tuple[list[tuple[int, int, int, int | None]], list[int]]:
    """Kafka's sequence per batch, partition by partition: (under, offline, moved, min margin)
    per batch, and each partition's leader after the roll."""
    leaders = [r["leader"] if r["leader"] in live else -1 for r in rows]
    per_batch = []
    for batch in batches:
        down = set(batch)
        under = offline = moved = 0
        margins = []
        for i, r in enumerate(rows):
            isr = [b for b in r["isr"] if b in live]
            during = [b for b in isr if b not in down]
            if not during and isr and r.get("unclean", False):
                # The batch stops still leading; §8.2's offline election goes unclean.
                during = [b for b in r["replicas"] if b in live and b not in down][:1]
            margins.append(len(during) - r["min_isr"])
            offline += not during
            under += 0 < len(during) < r["min_isr"]
            if leaders[i] in down:  # controlled shutdown election (§7.1)
                successor = next((b for b in r["replicas"] if b in isr and b not in down), None)
                if successor is not None:
                    leaders[i] = successor
                    moved += 1
        for i, r in enumerate(rows):  # back, caught up; offline election, preferred election
            isr = [b for b in r["isr"] if b in live]
            if leaders[i] == -1:
                leaders[i] = next((b for b in r["replicas"] if b in isr), -1)
            if r["replicas"][0] in isr:
                leaders[i] = r["replicas"][0]
        per_batch.append((under, offline, moved, min(margins) if margins else None))
    return per_batch, leaders


def make_cluster(
    spark: SparkSession, rows: Sequence[dict[str, Any]], live: Sequence[int]
) -> WhatIfCluster:
    columns = empty_columns()
    for r in rows:
        values = {
            "topic": r["topic"], "partition": r["partition"], "replicas": r["replicas"],
            "adding_replicas": [], "removing_replicas": [], "isr": r["isr"],
            "leader": r["leader"], "leader_epoch": 0, "zk_version": 0, "controller_epoch": 0,
            "state": ONLINE,
        }  # fmt: skip
        for name, value in values.items():
            columns[name].append(value)
    configs = {
        r["topic"]: TopicConfigs(
            min_insync_replicas=r["min_isr"],
            unclean_leader_election_enable=r.get("unclean", False),
        )
        for r in rows
    }
    return WhatIfCluster(
        partitions_frame(spark, columns), tuple(sorted(live)), dict.fromkeys(live), configs
    )


# -- choosing the batches (no Spark) -------------------------------------------------------------

# roll-racks.txt's orders topic: RF 3, min ISR 2 (slack 1), one replica per rack a={1,2},
# b={3,4}, c={5,6}, every cross-rack pair in some ISR: the brokers of two racks never share a
# batch (the compatible groups are the racks).
RACK_ISRS = [([1, 3, 5], 1), ([3, 5, 2], 1), ([5, 2, 4], 1), ([2, 4, 6], 1), ([4, 6, 1], 1),
             ([6, 1, 3], 1)]  # fmt: skip


def test_batches_of_two_or_three_are_the_racks_when_every_cross_rack_pair_conflicts() -> None:
    c = constraints_of(RACK_ISRS)
    assert compatible_groups(range(1, 7), c) == [[1, 2], [3, 4], [5, 6]]
    for size in (2, 3):
        plan = plan_roll(range(1, 7), size, c)
        assert plan.batching is not None
        assert plan.batching.batches == [[1, 2], [3, 4], [5, 6]]
        # Three batches at least (one per group), so none of at most 3 fits in ⌈6/3⌉ = 2.
        assert plan.batching.lower_bound == 3 and plan.batching.proven
    assert plan.largest == LargestBatch((1, 2), 2) and plan.largest.proven


def test_a_partition_allows_as_many_isr_members_down_together_as_its_slack() -> None:
    # One partition, ISR 1..5, min ISR 2: slack 3, so three of them may restart together, not
    # four. At most 4 per batch still needs two batches: the lower bound is ⌈5 / 3⌉.
    c = constraints_of([([1, 2, 3, 4, 5], 3)])
    for size, batches in (
        (3, [[1, 2, 3], [4, 5]]),
        (4, [[1, 2, 3], [4, 5]]),
        (5, [[1, 2, 3], [4, 5]]),
    ):
        plan = plan_roll(range(1, 6), size, c)
        assert plan.batching == Batching(batches, 2), size
        assert all(is_safe(b, c) for b in batches)
    assert not is_safe([1, 2, 3, 4], c)
    assert plan.largest == LargestBatch((1, 2, 3), 3)
    # Nothing shared: all at once.
    free = plan_roll(range(1, 6), 5, constraints_of([]))
    assert free.batching == Batching([[1, 2, 3, 4, 5]], 1) and free.largest.upper_bound == 5


def test_safety_beyond_pairs_needs_the_whole_replica_set() -> None:
    # RF 3, min ISR 1 (slack 2): any two of 1, 2, 3 may be down together, not all three; a
    # partition of RF 2, min ISR 1 on 3 and 4 (slack 1): 3 and 4 never together. Brokers 1-4
    # by at most 3: the first fit puts 1, 2 together, then 3 (not with 1, 2: the first
    # partition) and 4 (not with 1, 2: the second; not with 3) alone: three batches. The
    # search finds two, [1, 3] and [2, 4]; the largest safe batch is two (every three brokers
    # hold a whole RF-3 ISR or 3 and 4), so two batches is the fewest.
    c = constraints_of([([4, 1, 2], 2), ([2, 1, 3], 2), ([4, 3], 1)])
    assert first_fit([1, 2, 3, 4], 3, c) == [[1, 2], [3], [4]]
    plan = plan_roll(range(1, 5), 3, c)
    assert plan.batching == Batching([[1, 3], [2, 4]], 2)
    assert plan.largest == LargestBatch((1, 2), 2)
    # By two, a maximum matching of the compatible pairs (all but 3-4): 1-4 and 2-3 (or 1-3
    # and 2-4); the first fit pairs 1 with 2 and leaves 3 and 4 alone.
    assert len(first_fit([1, 2, 3, 4], 2, c)) == 3
    two = plan_roll(range(1, 5), 2, c)
    assert two.batching is not None and len(two.batching.batches) == 2 and two.batching.proven
    assert all(is_safe(b, c) for b in two.batching.batches)


def test_without_time_the_greedy_batching_stands_unproven() -> None:
    # The case above with no time for the solver: the first fit's three batches (safe) and the
    # bounds it cannot close — two batches at least, a safe batch of at most four brokers.
    c = constraints_of([([4, 1, 2], 2), ([2, 1, 3], 2), ([4, 3], 1)])
    plan = plan_roll(range(1, 5), 3, c, seconds=0.0)
    assert plan.batching == Batching([[1, 2], [3], [4]], 2) and not plan.batching.proven
    assert plan.largest == LargestBatch((1, 2), 4) and not plan.largest.proven


def test_rack_batches() -> None:
    racks = {1: "b", 2: "a", 3: None, 4: "b", 5: "a", 6: None}
    # Racks by name, then every rackless broker alone.
    assert rack_batches(range(1, 7), racks) == [[2, 5], [1, 4], [3], [6]]
    with pytest.raises(WhatIfInputError, match="--rack-map"):
        rack_batches([1, 2], {1: None, 2: None})


@st.composite
def isr_sets(draw: st.DrawFn) -> tuple[int, list[tuple[list[int], int]]]:
    n = draw(st.integers(2, 6))
    parts = draw(
        st.lists(
            st.tuples(
                st.lists(st.integers(1, n), min_size=1, max_size=min(n, 4), unique=True),
                st.integers(0, 3),
            ),
            max_size=8,
        )
    )
    # (ISR, slack) with the slack below the ISR size, as min ISR ≥ 1 makes it.
    return n, [(isr, min(slack, len(isr) - 1)) for isr, slack in parts]


def set_partitions(items: list[int]) -> Iterator[list[list[int]]]:
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for smaller in set_partitions(rest):
        yield [[first], *smaller]
        for i in range(len(smaller)):
            yield [*smaller[:i], [first, *smaller[i]], *smaller[i + 1 :]]


def brute_safe(batch: Sequence[int], partitions: Sequence[tuple[list[int], int]]) -> bool:
    """Straight from the rule: every partition of slack ≥ 1 keeps min ISR."""
    return all(len(set(batch) & set(isr)) <= slack for isr, slack in partitions if slack >= 1)


@settings(max_examples=150, deadline=None)
@given(isr_sets(), st.integers(1, 6))
def test_batches_are_safe_fewest_and_none_exists_is_true(
    case: tuple[int, list[tuple[list[int], int]]], size: int
) -> None:
    n, partitions = case
    size = min(size, n)
    brokers = list(range(1, n + 1))
    c = constraints_of(partitions)
    assert c.always_unsafe == sum(1 for _, slack in partitions if slack <= 0)
    plan = plan_roll(brokers, size, c)
    assert plan.batching is not None
    batches = plan.batching.batches
    assert sorted(b for batch in batches for b in batch) == brokers
    assert all(len(b) <= size and brute_safe(b, partitions) for b in batches)
    fewest = min(
        len(p)
        for p in set_partitions(brokers)
        if all(len(b) <= size and brute_safe(b, partitions) for b in p)
    )
    # Small cases are always proven: the batching is the fewest, and "⌈n/N⌉ batches do not
    # suffice" is true exactly when the bound says so.
    assert plan.batching.proven and len(batches) == fewest == plan.batching.lower_bound
    largest = max(
        (len(b) for p in set_partitions(brokers) for b in p if brute_safe(b, partitions)),
        default=0,
    )
    assert brute_safe(plan.largest.brokers, partitions)
    assert len(plan.largest.brokers) == largest == plan.largest.upper_bound
    assert max(len(b) for b in batches) <= largest


# -- hand-worked clusters (Spark) ----------------------------------------------------------------


def test_roll_one_at_a_time_with_a_partition_at_min_isr(spark: SparkSession) -> None:
    # orders, min ISR 2, brokers 1-4: p0 [1,2,3] ISR 1,2,3 (leader 1); p1 [2,3,4] ISR 2,3,4 (2);
    # p2 [3,4,1] ISR 3,4 (3) — at min ISR, slack 0; p3 [4,1,2] ISR 4,1,2 (4).
    # p2 drops under min ISR whichever of 3 and 4 restarts: no batching is safe, and it is the
    # unsafe partition. The others have slack 1 and every pair of brokers shares one of them,
    # so only one broker at a time keeps them safe.
    # Batch [1]: p0 ISR 2,3 (margin 0), leader 1 → 2 (first in-sync replica not down); p3 ISR
    #   4,2 (0); p1 untouched (1); p2 untouched (0). 1 leader moved, margin 0.
    # After each return the preferred election gives every partition its first replica back.
    # Batch [2]: p1 leader 2 → 3; margins 0. Batch [3]: p2 ISR 4 < 2 (margin −1), its leader
    #   3 → 4 (4 is in the ISR). Batch [4]: p2 ISR 3 (−1); p3 leader 4 → 1.
    cluster = load_cluster(spark, describe=AT_MIN_ISR)
    got = answer(spark, cluster, RollOptions(batch=1))
    summary = got.summary
    assert summary["max_safe_batch"] == 0
    assert summary["max_safe_batch_others"] == 1
    assert summary["batches"] == [[1], [2], [3], [4]]
    assert summary["batches_from"] == "fewest"
    assert summary["safe"] is False
    assert summary["unsafe_partitions"] == [
        {"topic": "orders", "partition": 2, "isr": [3, 4], "min_isr": 2,
         "reason": "at min ISR: any ISR member down drops it"},
    ]  # fmt: skip
    assert [
        (b["brokers"], b["under_min_isr"], b["offline"], b["leaders_moved"], b["min_margin"])
        for b in summary["per_batch"]
    ] == [([1], 0, 0, 1, 0), ([2], 0, 0, 1, 0), ([3], 1, 0, 1, -1), ([4], 1, 0, 1, -1)]
    assert summary["leaders_per_broker_after"] == {"1": 1, "2": 1, "3": 1, "4": 1}
    at_risk = sorted(tuple(r) for r in got.tables["partitions_at_risk"].collect())
    assert at_risk == [(2, "orders", 2, [4], 2, -1, False), (3, "orders", 2, [3], 2, -1, False)]
    assert len(got.lines) <= 10 and any("caught up" in line for line in got.lines)


def test_roll_two_at_a_time_finds_the_racks(spark: SparkSession) -> None:
    # roll-racks.txt: orders (min ISR 2) has one replica per rack a={1,2} b={3,4} c={5,6};
    # logs (min ISR 1): p0 [2,5] ISR 2,5; p1 [4,1] ISR 4 only (slack 0: unsafe at any size).
    # Batches of 2: the greedy puts each rack together ([1,2],[3,4],[5,6]; see the K(2,2,2)
    # test above); three per batch is impossible.
    # Batch [1,2]: every orders partition keeps 2 of 3 (margin 0); logs-0 keeps 5 (0). Leaders
    #   moved: orders-0 1→3, orders-3 2→4, orders-5 1→6 (its first replica 6 is in the ISR),
    #   logs-0 2→5: 4. Then the preferred elections: orders-5 to 6, the rest back.
    # Batch [3,4]: logs-1 loses its only ISR member: offline (margin −1). Moved: orders-1 3→5,
    #   orders-4 4→6; logs-1 stays on 4 (no successor): 2.
    # Batch [5,6]: orders-2 5→2, orders-5 6→1: 2 moved; margins 0.
    cluster = load_cluster(spark, describe=RACKS)
    summary = answer(spark, cluster, RollOptions(batch=2)).summary
    assert summary["batches"] == [[1, 2], [3, 4], [5, 6]]
    assert (summary["max_safe_batch"], summary["max_safe_batch_others"]) == (0, 2)
    assert [
        (b["under_min_isr"], b["offline"], b["leaders_moved"], b["min_margin"])
        for b in summary["per_batch"]
    ] == [(0, 0, 4, 0), (0, 1, 2, -1), (0, 0, 2, 0)]
    assert [(u["topic"], u["partition"]) for u in summary["unsafe_partitions"]] == [("logs", 1)]
    # orders-5's leader 1 was not its preferred 6: after the roll 6 leads it.
    assert summary["leaders_per_broker_before"] == {"1": 2, "2": 2, "3": 1, "4": 2, "5": 1, "6": 0}
    assert summary["leaders_per_broker_after"] == {"1": 1, "2": 2, "3": 1, "4": 2, "5": 1, "6": 1}


def test_roll_three_at_a_time_says_two_batches_cannot_be_safe(spark: SparkSession) -> None:
    # roll-racks.txt by at most 3: no two brokers of different racks may be down together
    # (orders, slack 1), so the fewest safe batches are the three racks, proven; ⌈6/3⌉ = 2
    # batches do not suffice. The summary agrees with itself: the largest safe batch is two
    # brokers, one of the batches returned, and every batch is safe but for logs-1 (slack 0).
    cluster = load_cluster(spark, describe=RACKS)
    got = answer(spark, cluster, RollOptions(batch=3))
    summary = got.summary
    assert summary["batches"] == [[1, 2], [3, 4], [5, 6]]
    assert summary["batches_from"] == "fewest" and summary["batches_proven_fewest"] is True
    assert (summary["batches_lower_bound"], summary["batches_at_n"]) == (3, 2)
    assert summary["fits_batches_at_n"] is False
    assert summary["max_safe_batch_brokers"] in summary["batches"]
    assert summary["max_safe_batch_proven"] is True
    assert (summary["max_safe_batch"], summary["max_safe_batch_others"]) == (0, 2)
    assert [b["under_min_isr"] + b["offline"] for b in summary["per_batch"]] == [0, 1, 0]
    assert "No safe batching of at most 3 fits in 2 batches (proven)." in got.lines


def test_roll_batch_larger_than_the_cluster_is_an_input_error(spark: SparkSession) -> None:
    cluster = load_cluster(spark, describe=AT_MIN_ISR)
    with pytest.raises(WhatIfInputError, match="at most --batch 4"):
        answer(spark, cluster, RollOptions(batch=5))


# -- Spark against the plain-Python walk ---------------------------------------------------------


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[int], list[list[int]]]:
    n = draw(st.integers(3, 6))
    brokers = list(range(1, n + 1))
    dead = draw(st.sets(st.sampled_from(brokers), max_size=1))
    live = [b for b in brokers if b not in dead]
    min_isr = {t: draw(st.integers(1, 3)) for t in ("t0", "t1")}
    unclean = {t: draw(st.booleans()) for t in ("t0", "t1")}
    rows = []
    for i in range(draw(st.integers(1, 7))):
        topic = draw(st.sampled_from(("t0", "t1")))
        replicas = draw(st.lists(st.sampled_from(brokers), min_size=1, max_size=3, unique=True))
        isr = draw(st.lists(st.sampled_from(replicas), max_size=len(replicas), unique=True))
        leader = draw(st.sampled_from(isr)) if isr else -1
        rows.append(
            {"topic": topic, "partition": i, "replicas": replicas, "isr": isr,
             "leader": leader, "min_isr": min_isr[topic], "unclean": unclean[topic]}
        )  # fmt: skip
    order = draw(st.permutations(live))
    size = draw(st.integers(1, len(live)))
    batches = [sorted(order[i : i + size]) for i in range(0, len(order), size)]
    return rows, live, batches


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_batch_evaluation_matches_the_plain_python_walk(
    spark: SparkSession, case: tuple[list[dict[str, Any]], list[int], list[list[int]]]
) -> None:
    rows, live, batches = case
    cluster = make_cluster(spark, rows, live)
    form = partition_form(spark, cluster)
    results, _ = evaluate_batches(form, batches)
    expected, leaders_after = reference_roll(rows, set(live), batches)
    got = [(r.under_min_isr, r.offline, r.leaders_moved, r.min_margin) for r in results]
    assert got == expected
    after = with_leader_chain(form, batches).select("partition", "leader_after").collect()
    assert sorted((r[0], r[1]) for r in after) == list(enumerate(leaders_after))
    # The constraints Spark reduces to distinct replica sets are those of every partition.
    live_isrs = [[b for b in r["isr"] if b in set(live)] for r in rows]
    assert batch_constraints(form) == constraints_of(
        (isr, len(isr) - r["min_isr"]) for isr, r in zip(live_isrs, rows, strict=True)
    )


# -- end to end ----------------------------------------------------------------------------------


def test_kce_whatif_roll_by_rack_end_to_end(spark: SparkSession, tmp_path: Path) -> None:
    racks = tmp_path / "racks.csv"
    racks.write_text(RACK_CSV, encoding="utf-8")
    out = tmp_path / "roll"
    argv = ["whatif", "roll", "--describe", str(RACKS), "--rack-map", str(racks)]
    assert main([*argv, "--batch", "rack", "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    # The same batches as the greedy's batches of two (the test above), so the same figures.
    assert summary["batch_size"] == "rack"
    assert summary["batches"] == [[1, 2], [3, 4], [5, 6]]
    assert summary["batches_from"] == "racks"
    assert summary["max_safe_batch"] == 0
    assert summary["safe"] is False
    assert [b["leaders_moved"] for b in summary["per_batch"]] == [4, 2, 2]
    assert [b["min_margin"] for b in summary["per_batch"]] == [0, -1, 0]
    assert [(u["topic"], u["partition"]) for u in summary["unsafe_partitions"]] == [("logs", 1)]
    for table in ("batches", "partitions_at_risk", "brokers", "partitions"):
        assert (out / f"{table}.parquet").is_dir()
    report = (out / "report.html").read_text(encoding="utf-8")
    assert report.count("<svg") >= 2 and "min-ISR margin" in report


def test_kce_whatif_roll_solver_seconds_out_of_range_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # argparse's own error: exit 2 before anything runs.
    argv = ["whatif", "roll", "--describe", str(RACKS), "--batch", "2", "--solver-seconds"]
    for value, message in (("0", "must be above 0"), ("7200", "must be at most 3600")):
        with pytest.raises(SystemExit) as exit:
            main([*argv, value, "--out", str(tmp_path / "x")])
        assert exit.value.code == 2
        assert message in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_kce_whatif_roll_by_rack_without_racks_exits_2(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["whatif", "roll", "--describe", str(RACKS), "--batch", "rack"]
    assert main([*argv, "--out", str(tmp_path / "x")]) == 2
    assert "--rack-map" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
