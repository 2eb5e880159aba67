"""``kce whatif fail`` and ``kce whatif leaders`` on clusters small enough to work by hand, and
the Spark failure transform against a plain-Python reading of spec §6.3, §7.1 and §8.2.

The three-broker cluster (``fail-three-brokers.txt``; racks a = {1, 2}, b = {3}; threshold 10%):

    orders (min.insync.replicas=2)   leader  replicas  isr
        orders-0                     1       1,2,3     1,2,3
        orders-1                     2       2,3,1     2,3,1
        orders-2                     3       3,1,2     3,1
        orders-3                     3       2,3,1     3,1
    logs (unclean election enabled)
        logs-0                       1       1,2       1
        logs-1                       3       2,3       3,2
    audit (defaults)
        audit-0                      1       1         1
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from controller.handlers.brokers import on_broker_failure
from spark_app.cli import main
from statemachines import schemas as s
from statemachines.brokers import BrokerSet, ClusterView
from statemachines.columns import in_topics
from statemachines.layout import to_compact, to_public_partitions
from whatif import broker_balance as bb
from whatif.broker_failure import Snapshot, after_failure, snapshot_facts
from whatif.cluster import (
    OFFLINE,
    ONLINE,
    TopicConfigs,
    WhatIfCluster,
    WhatIfInputError,
    empty_columns,
    partitions_frame,
)
from whatif.failure import answer
from whatif.failure_sets import failure_sets, offline_per_set
from whatif.isr_rules import topics_frame
from whatif.options import FailOptions
from whatif.sources import load_cluster

DATA = Path(__file__).resolve().parent / "data" / "whatif"
THREE = DATA / "fail-three-brokers.txt"
FOUR = DATA / "fail-four-brokers.txt"


def _racks(tmp_path: Path) -> Path:
    path = tmp_path / "racks.csv"
    path.write_text("id,rack\n1,a\n2,a\n3,b\n")
    return path


def _whatif(tmp_path: Path, *args: str) -> dict[str, Any]:
    out = tmp_path / "out"
    assert main(["whatif", *args, "--out", str(out)]) == 0
    summary: dict[str, Any] = json.loads((out / "summary.json").read_text())
    assert (out / "report.html").read_text().count("<svg") >= 1
    return summary


# -- fail --brokers / --rack ---------------------------------------------------------------------


def test_fail_one_broker(spark: SparkSession) -> None:
    # Broker 1 fails; 2 and 3 stay.
    #   orders-0: leader 1 dead; first live ISR member in assignment order is 2; ISR [2,3].
    #   orders-1: 1 leaves the ISR → [2,3].   orders-2, orders-3: ISR [3,1] → [3], under min 2.
    #   logs-0: ISR [1] has no live member, replica 2 is live → unclean election (enabled): 2, [2].
    #   audit-0: no live replica → offline; 1 stays the last ISR member, leader -1.
    # Preferred-leader ratios after (dead brokers included): broker 1 prefers orders-0, logs-0,
    # audit-0, none led by it → 3/3; broker 2 prefers orders-1 (led by 2), logs-1 and orders-3
    # (led by 3) → 2/3; broker 3 prefers orders-2 (led by 3) → 0.
    # The return: audit-0 elects 1 (last ISR member). Broker 1's ratio is 2/3, 2's 2/3: the
    # rebalance elects orders-0 and logs-0 (1 rejoins their ISRs) and logs-1 (2 is in its ISR),
    # not orders-3 (2 was not in its ISR). Leaders 1: 1+2, 2: 3-2+1, 3: 3-1.
    cluster = load_cluster(spark, describe=THREE)
    got = answer(spark, cluster, FailOptions(brokers=(1,)))
    assert got.summary == {
        "failed_brokers": [1],
        "offline_partitions": 1,
        "under_min_isr_partitions": 2,
        "unclean_elections_needed": 1,
        "leaders_moved": 2,
        "leaders_per_broker": {"2": 3, "3": 3},
        "auto_rebalance_brokers": [1, 2],
        "leader_imbalance_per_broker_percentage": 10,
        "imbalance_ratio_after": {"1": 1.0, "2": 2 / 3, "3": 0.0},
        "return_preferred_elections": 3,
        "return_leaders_per_broker": {"1": 3, "2": 2, "3": 2},
        "reassignment_in_progress": False,
    }
    rows = {
        (r.topic, r.partition): (r.leader, r.isr, r.offline, r.under_min_isr, r.unclean_needed,
                                 r.leader_moved)
        for r in got.tables["partitions_after"].collect()
    }  # fmt: skip
    assert rows == {
        ("orders", 0): (2, [2, 3], False, False, False, True),
        ("orders", 1): (2, [2, 3], False, False, False, False),
        ("orders", 2): (3, [3], False, True, False, False),
        ("orders", 3): (3, [3], False, True, False, False),
        ("logs", 0): (2, [2], False, False, True, True),
        ("logs", 1): (3, [3, 2], False, False, False, False),
        ("audit", 0): (-1, [1], True, False, False, False),
    }
    brokers = [tuple(r) for r in got.tables["brokers"].orderBy("broker").collect()]
    assert brokers == [
        (1, None, True, 3, 0, 6, 1.0, 3),
        (2, None, False, 1, 3, 6, 2 / 3, 2),
        (3, None, False, 3, 3, 5, 0.0, 2),
    ]
    assert len(got.lines) <= 10


def test_fail_rack_end_to_end(spark: SparkSession, tmp_path: Path) -> None:
    # Rack a = brokers 1 and 2 fail; 3 stays.
    #   orders-0, orders-1: elected 3 from the ISR, ISR [3] → under min 2, leaders moved.
    #   orders-2, orders-3: 1 leaves the ISR → [3], under min 2.
    #   logs-0: replicas 1,2 both dead → offline (no live replica: no unclean election either);
    #   1 stays the last ISR member.  logs-1: 2 leaves the ISR → [3].  audit-0: offline.
    # Ratios after: 1 → 3/3, 2 → 3/3 (orders-1, logs-1, orders-3 all led by 3), 3 → 0.
    # The return: logs-0 and audit-0 elect 1 (last ISR member). Ratios then 1 → 1/3, 2 → 3/3:
    # the rebalance elects orders-0 (to 1), orders-1 and logs-1 (to 2, back in their ISRs), not
    # orders-3. Leaders 1: 2+1, 2: 0+2, 3: 5-3.
    summary = _whatif(
        tmp_path, "fail", "--describe", str(THREE), "--rack-map", str(_racks(tmp_path)),
        "--rack", "a",
    )  # fmt: skip
    assert summary == {
        "failed_rack": "a",
        "failed_brokers": [1, 2],
        "offline_partitions": 2,
        "under_min_isr_partitions": 4,
        "unclean_elections_needed": 0,
        "leaders_moved": 2,
        "leaders_per_broker": {"3": 5},
        "auto_rebalance_brokers": [1, 2],
        "leader_imbalance_per_broker_percentage": 10,
        "imbalance_ratio_after": {"1": 1.0, "2": 1.0, "3": 0.0},
        "return_preferred_elections": 3,
        "return_leaders_per_broker": {"1": 3, "2": 2, "3": 2},
        "reassignment_in_progress": False,
    }
    out = tmp_path / "out"
    after = spark.read.parquet(str(out / "partitions_after.parquet"))
    assert after.where("offline").count() == 2
    assert spark.read.parquet(str(out / "brokers.parquet")).count() == 3


def test_threshold_is_strict_and_a_reassignment_blocks_the_rebalance(
    spark: SparkSession, tmp_path: Path
) -> None:
    # With the threshold at 67%, broker 1's ratio 1.0 is above it, broker 2's 2/3 is not. On
    # return broker 1's ratio is 2/3: no rebalance at all. A partition being reassigned stops
    # Kafka's 2.6–3.3 rebalance outright, so the return then elects nothing either.
    cluster = load_cluster(
        spark, describe=THREE, config=["leader.imbalance.per.broker.percentage=67"]
    )
    got = answer(spark, cluster, FailOptions(brokers=(1,)))
    assert got.summary["auto_rebalance_brokers"] == [1]
    assert got.summary["return_preferred_elections"] == 0
    text = THREE.read_text().replace("Isr: 3,2\n", "Isr: 3,2\tAdding Replicas: 3\n")
    moving = tmp_path / "moving.txt"
    moving.write_text(text)
    got = answer(spark, load_cluster(spark, describe=moving), FailOptions(brokers=(1,)))
    assert got.summary["reassignment_in_progress"] is True
    assert got.summary["return_preferred_elections"] == 0
    assert got.summary["return_leaders_per_broker"] == {"1": 1, "2": 3, "3": 3}


def test_unknown_brokers_and_racks_are_input_errors(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = load_cluster(spark, describe=THREE)
    with pytest.raises(WhatIfInputError, match=r"broker 7 is not a live broker .*live: 1,2,3"):
        answer(spark, cluster, FailOptions(brokers=(1, 7)))
    with pytest.raises(WhatIfInputError, match="no broker has a rack — give --rack-map"):
        answer(spark, cluster, FailOptions(rack="a"))
    racked = replace(cluster, racks={1: "a", 2: "a", 3: "b"})
    with pytest.raises(WhatIfInputError, match="its racks are a, b"):
        answer(spark, racked, FailOptions(rack="c"))
    with pytest.raises(WhatIfInputError, match="--any 4: the cluster has 3 live brokers"):
        answer(spark, cluster, FailOptions(any_k=4))
    out = tmp_path / "out"
    assert (
        main(["whatif", "fail", "--describe", str(THREE), "--brokers", "9", "--out", str(out)]) == 2
    )
    assert "broker 9 is not a live broker" in capsys.readouterr().err
    assert not out.exists()


# -- fail --any ----------------------------------------------------------------------------------


def test_fail_any_two_of_four_every_subset(spark: SparkSession, tmp_path: Path) -> None:
    # What each partition needs to lose to go offline (live electable replicas + live leader):
    #   t-0 {1,2}   t-1 {2,3}   t-2 {3,4}   t-3 {1,2,3} (more than 2: never)   t-4 {3} (ISR [3])
    #   u-0 {1,4}  (unclean enabled: any replica, not only the ISR [4])
    # C(4,2) = 6 ≤ 1000 subsets, all evaluated:
    #   {1,2}: t-0 → 1   {1,3}: t-4 → 1   {1,4}: u-0 → 1   {2,3}: t-1, t-4 → 2
    #   {2,4}: none → 0  {3,4}: t-2, t-4 → 2
    summary = _whatif(tmp_path, "fail", "--describe", str(FOUR), "--any", "2")
    assert summary == {
        "k": 2,
        "sets_evaluated": 6,
        "all_subsets": True,
        "subsets_total": 6,
        "seed": 0,
        "p_any_offline": 5 / 6,
        "offline_distribution": {"0": 1, "1": 3, "2": 2},
        "worst_sets": [
            {"brokers": [2, 3], "offline_partitions": 2},
            {"brokers": [3, 4], "offline_partitions": 2},
            {"brokers": [1, 2], "offline_partitions": 1},
            {"brokers": [1, 3], "offline_partitions": 1},
            {"brokers": [1, 4], "offline_partitions": 1},
        ],
        "mean_offline_partitions": 7 / 6,
    }
    sets = spark.read.parquet(str(tmp_path / "out" / "sets.parquet")).orderBy("set_id")
    assert [(r.brokers, r.offline_partitions) for r in sets.collect()] == [
        ([1, 2], 1), ([1, 3], 1), ([1, 4], 1), ([2, 3], 2), ([2, 4], 0), ([3, 4], 2),
    ]  # fmt: skip


def test_random_failure_sets_are_distinct_and_seeded() -> None:
    brokers = tuple(range(1, 21))
    sets, exhaustive = failure_sets(brokers, 3, 50, seed=7)
    assert not exhaustive and len(sets) == len(set(sets)) == 50
    assert all(len(x) == 3 and list(x) == sorted(x) for x in sets)
    assert failure_sets(brokers, 3, 50, seed=7) == (sets, False)
    assert failure_sets(brokers, 3, 50, seed=8)[0] != sets
    assert failure_sets(brokers, 2, 190, seed=7) == (
        [(a, b) for a in brokers for b in brokers if a < b],
        True,
    )


# -- leaders -------------------------------------------------------------------------------------


def test_leaders_end_to_end(tmp_path: Path) -> None:
    # Preferred (first) replicas: broker 1 → orders-0, logs-0, audit-0, all led by 1: 0/3.
    # Broker 2 → orders-1 (led by 2), logs-1 and orders-3 (led by 3): 2/3 > 10%. Broker 3 →
    # orders-2 (led by 3): 0/1. The rebalance (and election.json) elects logs-1 (2 is in its ISR)
    # but not orders-3 (ISR [3,1]). Leaders then 1: 3, 2: 1+1, 3: 3-1.
    summary = _whatif(tmp_path, "leaders", "--describe", str(THREE))
    assert summary == {
        "imbalance_ratio": {"1": 0.0, "2": 2 / 3, "3": 0.0},
        "brokers_over_threshold": [2],
        "elections": 1,
        "leader_imbalance_per_broker_percentage": 10,
        "reassignment_in_progress": False,
        "preferred_elections_now": 1,
        "leaders_per_broker": {"1": 3, "2": 1, "3": 3},
        "leaders_per_broker_after": {"1": 3, "2": 2, "3": 2},
    }
    plan = json.loads((tmp_path / "out" / "election.json").read_text())
    assert plan == {"partitions": [{"topic": "logs", "partition": 1}]}


def test_over_threshold_is_strictly_greater() -> None:
    assert bb.over_threshold({1: 0.1, 2: 0.2, 3: 0.0}, 10) == [2]


# -- the Spark transform against the controller's and a plain-Python rule ---------------------------------------------


def _remove_from_isr(isr: list[int], dead: set[int]) -> list[int]:
    # §6.3: each dead replica leaves the ISR in ascending broker order; the last one never does.
    out = list(isr)
    for r in sorted(dead):
        if r in out and len(out) > 1:
            out.remove(r)
    return out


def _python_failure(
    p: dict[str, Any], live: set[int], dead: set[int], unclean: bool, min_isr: int
) -> tuple[int, list[int], tuple[bool, bool, bool, bool]]:
    """§8.2 for one partition: (leader, ISR, (offline, under min ISR, unclean needed, moved))."""
    replicas, isr, leader = p["replicas"], p["isr"], p["leader"]
    # A partition Kafka left without a leader has no electable replica: no failure elects it.
    if leader >= 0 and leader not in live:
        clean = [r for r in replicas if r in live and r in isr]
        dirty = [r for r in replicas if r in live] if unclean else []
        if clean:
            leader, isr = clean[0], [x for x in isr if x in live]
        elif dirty:
            leader, isr = dirty[0], [dirty[0]]
        else:
            leader = -1
    isr = _remove_from_isr(isr, dead)
    needed = p["leader"] >= 0 and not (set(p["isr"]) & live) and bool(set(replicas) & live)
    flags = (
        leader == -1,
        leader >= 0 and len(isr) < min_isr,
        needed,
        leader >= 0 and leader != p["leader"],
    )
    return leader, isr, flags


def _controller_failure(
    spark: SparkSession, cluster: WhatIfCluster, dead: set[int], facts: Snapshot
) -> dict[tuple[str, int], tuple[Any, ...]]:
    topics = topics_frame(spark, cluster, facts.topics)
    compact = to_compact(cluster.partitions, topics, facts.width)
    unclean = facts.topic_indices(
        t for t in facts.topics if cluster.configs_of(t).unclean_leader_election_enable
    )
    live = BrokerSet.of(cluster.brokers) - BrokerSet.of(dead)
    failed = on_broker_failure(
        compact,
        BrokerSet.of(dead),
        ClusterView(live=live, controller_epoch=facts.controller_epoch),
        unclean=in_topics(unclean),
        deleting=[],
    )
    public = to_public_partitions(failed.select(*s.compact_columns(facts.width)), topics)
    return {
        (r.topic, r.partition): (r.leader, list(r.isr), r.leader_epoch, r.zk_version, r.state)
        for r in public.collect()
    }


@st.composite
def _clusters(draw: st.DrawFn) -> tuple[list[dict[str, Any]], dict[str, TopicConfigs], set[int]]:
    brokers = list(range(1, 6))
    configs = {
        t: TopicConfigs(
            min_insync_replicas=draw(st.integers(1, 3)),
            unclean_leader_election_enable=draw(st.booleans()),
        )
        for t in ("a", "b")
    }
    partitions = []
    for i in range(draw(st.integers(1, 12))):
        replicas = draw(st.permutations(brokers))[: draw(st.integers(1, 3))]
        isr = draw(st.permutations(replicas))[: draw(st.integers(1, len(replicas)))]
        leader = draw(st.sampled_from([*isr, -1]))
        partitions.append(
            {
                "topic": "ab"[i % 2],
                "partition": i,
                "replicas": replicas,
                "isr": isr,
                "leader": leader,
            }
        )
    dead = set(draw(st.lists(st.sampled_from(brokers), min_size=1, max_size=4)))
    return partitions, configs, dead


@settings(
    max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(case=_clusters())
def test_failure_transform_matches_python_rule(
    spark: SparkSession, case: tuple[list[dict[str, Any]], dict[str, TopicConfigs], set[int]]
) -> None:
    partitions, configs, dead = case
    columns = empty_columns()
    for p in partitions:
        for name, value in (
            (s.TOPIC, p["topic"]), (s.PARTITION, p["partition"]), (s.REPLICAS, p["replicas"]),
            (s.ADDING_REPLICAS, []), (s.REMOVING_REPLICAS, []), (s.ISR, p["isr"]),
            (s.LEADER, p["leader"]), (s.LEADER_EPOCH, 0), (s.ZK_VERSION, 0),
            (s.CONTROLLER_EPOCH, 1), (s.STATE, ONLINE if p["leader"] >= 0 else OFFLINE),
        ):  # fmt: skip
            columns[name].append(value)
    brokers = (1, 2, 3, 4, 5)
    cluster = WhatIfCluster(
        partitions=partitions_frame(spark, columns),
        brokers=brokers,
        racks={},
        topic_configs=configs,
    )
    live = set(brokers) - dead
    expected = {
        (p["topic"], p["partition"]): _python_failure(
            p,
            live,
            dead,
            configs[p["topic"]].unclean_leader_election_enable,
            configs[p["topic"]].min_insync_replicas,
        )
        for p in partitions
    }
    facts = snapshot_facts(cluster)
    after_frame = after_failure(spark, cluster, sorted(dead), facts).localCheckpoint()
    after = after_frame.collect()
    got = {
        (r.topic, r.partition): (
            r.leader, list(r.isr), (r.offline, r.under_min_isr, r.unclean_needed, r.leader_moved)
        )
        for r in after
    }  # fmt: skip
    assert got == expected
    # The controller's own §8.2 transform leaves every partition with a leader in the same
    # state (it would elect a leaderless one with a live ISR member, which a snapshot of Kafka's
    # own state never has: such a partition is already elected).
    controller = _controller_failure(spark, cluster, dead, facts)
    led = {(p["topic"], p["partition"]) for p in partitions if p["leader"] >= 0}
    assert {
        (r.topic, r.partition): (r.leader, list(r.isr), r.leader_epoch, r.zk_version, r.state)
        for r in after
        if (r.topic, r.partition) in led
    } == {k: v for k, v in controller.items() if k in led}
    # The one-pass per-broker counts give §11.2's ratios as statemachines.rebalance does.
    counts = bb.broker_counts(after_frame).collect()
    assert bb.imbalance_ratios(after_frame) == {
        r.broker: bb.ratio(r.leader_not_preferred_leader, r.partitions)
        for r in counts
        if r.partitions
    }
    # The any-K path's closed form agrees with the transform on the same failed set.
    offline = sum(1 for e in expected.values() if e[0] == -1)
    assert offline_per_set(spark, cluster, [tuple(sorted(dead))], len(dead)) == [offline]
