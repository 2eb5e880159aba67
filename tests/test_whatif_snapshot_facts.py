"""Snapshot facts every what-if question honours, and the ISR rule every question that removes
brokers shares (``whatif.isr_rules``):

* a topic marked for deletion (``MarkedForDeletion: true``, Kafka 2.8's
  ``TopicCommand.TopicDescription.printDescription``; ``/admin/delete_topics``) is parsed, and
  left out of elections, ISR shrinks, the auto leader rebalance and the offline counts, as
  Kafka's controller leaves a topic ``isTopicQueuedUpForDeletion`` out (§8.2 step 2a, §8.4 step
  5, §11.2);
* a partition left with leader none proves its ISR down (§5.4: the controller elects every
  leaderless partition that has an electable replica on each broker change), and no failure
  brings it back;
* Kafka never empties an ISR (§6.3 ``removeReplicasFromIsr``); ``fail``, ``audit``,
  ``exposure``, ``roll`` and ``decommission``'s shutdown count a rack's loss alike: offline
  when the whole live ISR is in the rack and unclean election is off.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from whatif import audit, exposure, failure, leaders, roll
from whatif.cluster import (
    OFFLINE,
    ONLINE,
    TopicConfigs,
    WhatIfCluster,
    WhatIfInputError,
    empty_columns,
    partitions_frame,
)
from whatif.controlled_shutdown import controlled_shutdown
from whatif.describe import parse_describe
from whatif.failure_sets import offline_per_set
from whatif.options import (
    AuditOptions,
    ExposureOptions,
    FailOptions,
    LeadersOptions,
    RollOptions,
)
from whatif.plan_check import check_plan, plan_from_json
from whatif.sources import load_cluster


def _write(tmp_path: Path, lines: list[str], name: str = "describe.txt") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _header(topic: str, count: int, rf: int, configs: str, marked: bool = False) -> str:
    # TopicDescription.printDescription (2.8): the mark comes after Configs:.
    mark = "\tMarkedForDeletion: true" if marked else ""
    return (
        f"Topic: {topic}\tTopicId: AAAAAAAAAAAAAAAAAAAAAA\tPartitionCount: {count}\t"
        f"ReplicationFactor: {rf}\tConfigs: {configs}{mark}"
    )


def _partition(
    topic: str, p: int, leader: str, replicas: str, isr: str, marked: bool = False
) -> str:
    mark = "\tMarkedForDeletion: true" if marked else ""
    return (
        f"\tTopic: {topic}\tPartition: {p}\tLeader: {leader}\tReplicas: {replicas}\tIsr: {isr}"
        f"{mark}"
    )


# -- MarkedForDeletion ---------------------------------------------------------------------------


def test_marked_for_deletion_is_parsed_and_blames_no_config(tmp_path: Path) -> None:
    # The mark follows Configs:, whose value (commas unescaped) used to run to the line's end:
    # "min.insync.replicas=2\tMarkedForDeletion: true" is no integer.
    path = _write(
        tmp_path,
        [
            _header("doomed", 1, 2, "cleanup.policy=compact,delete,min.insync.replicas=2", True),
            _partition("doomed", 0, "1", "1,2", "1,2", marked=True),
            _header("empty", 1, 1, "", marked=True),
            _partition("empty", 0, "1", "1", "1", marked=True),
            _header("kept", 1, 1, "segment.bytes=1000"),
            _partition("kept", 0, "2", "2", "2"),
        ],
    )
    snap = parse_describe(path)
    assert snap.deleting == {"doomed", "empty"}
    assert snap.configs == {
        "doomed": {"cleanup.policy": "compact,delete", "min.insync.replicas": "2"},
        "empty": {},
        "kept": {"segment.bytes": "1000"},
    }
    # Filtered output (--under-replicated-partitions) has partition lines only: they carry it.
    filtered = _write(tmp_path, [_partition("doomed", 0, "1", "1,2", "1", marked=True)], "f.txt")
    assert parse_describe(filtered).deleting == {"doomed"}


def test_a_bad_marked_for_deletion_value_names_the_line(tmp_path: Path) -> None:
    line = _partition("t", 0, "1", "1", "1") + "\tMarkedForDeletion: maybe"
    path = _write(tmp_path, [_header("t", 1, 1, ""), line])
    with pytest.raises(WhatIfInputError, match=rf"{path}:2: MarkedForDeletion: 'maybe'"):
        parse_describe(path)


def test_topics_being_deleted_are_left_out_of_elections_and_rebalance(
    spark: SparkSession, tmp_path: Path
) -> None:
    # orders-0 led by 1; doomed (marked) -0 led by 1, -1 led by 2 though 1 is preferred and in
    # its ISR, -2 on broker 3 alone.
    path = _write(
        tmp_path,
        [
            _header("orders", 1, 3, ""),
            _partition("orders", 0, "1", "1,2,3", "1,2,3"),
            _header("doomed", 3, 2, "", marked=True),
            _partition("doomed", 0, "1", "1,2", "1,2", marked=True),
            _partition("doomed", 1, "2", "1,2", "1,2", marked=True),
            _partition("doomed", 2, "3", "3", "3", marked=True),
        ],
    )
    cluster = load_cluster(spark, describe=path)
    assert cluster.deleting_topics == frozenset({"doomed"})
    # fail 1 (§8.2 step 2: P and the OfflineReplica shrink skip topics queued for deletion):
    # only orders-0 is elected; doomed-0 keeps leader 1 and its ISR, and counts nowhere.
    got = failure.answer(spark, cluster, FailOptions(brokers=(1,)))
    assert (got.summary["leaders_moved"], got.summary["offline_partitions"]) == (1, 0)
    rows = {
        (r.topic, r.partition): (r.leader, r.isr, r.offline, r.leader_moved)
        for r in got.tables["partitions_after"].collect()
    }
    assert rows[("orders", 0)] == (2, [2, 3], False, True)
    assert rows[("doomed", 0)] == (1, [1, 2], False, False)
    # Failing 3 alone takes no partition offline: doomed-2 is being deleted.
    assert offline_per_set(spark, cluster, [(1,), (2,), (3,)], 1) == [0, 0, 0]
    # leaders (onReplicaElection / checkAndTriggerAutoLeaderRebalance skip it): broker 1's ratio
    # counts orders-0 only, and election.json does not name doomed-1.
    elected = leaders.answer(spark, cluster, LeadersOptions())
    assert elected.summary["imbalance_ratio"]["1"] == 0.0
    assert elected.summary["preferred_elections_now"] == 0
    assert elected.plans["election.json"] == {"partitions": []}
    # The controlled shutdown of 1 (§8.4 step 5) moves orders-0's leadership only.
    figures, _ = controlled_shutdown(cluster, [1])
    assert figures["shutdown_leaders_moved"] == 1
    assert figures["shutdown_offline_partitions"] == 0


def test_a_plan_moving_a_topic_being_deleted_is_refused() -> None:
    # KafkaController.maybeTriggerPartitionReassignment answers UNKNOWN_TOPIC_OR_PARTITION for a
    # topic queued for deletion.
    plan = plan_from_json(
        {"version": 1, "partitions": [{"topic": "doomed", "partition": 0, "replicas": [2, 1]}]},
        "plan.json",
    )
    current = {("doomed", 0): [1, 2]}
    assert check_plan(plan, current, (1, 2), {}) == []
    (problem,) = check_plan(plan, current, (1, 2), {}, deleting={"doomed"})
    assert (problem.topic, problem.partition, problem.field) == ("doomed", 0, "topic")
    assert problem.refused_by_kafka and "queued for deletion" in problem.message


# -- leader none proves the ISR down -------------------------------------------------------------


def test_a_leaderless_partition_proves_its_isr_down(spark: SparkSession, tmp_path: Path) -> None:
    # t-0 has no leader and ISR [3]: 3 is down (Kafka would have elected it). u-0 allows unclean
    # election and has no leader: both its replicas are down.
    path = _write(
        tmp_path,
        [
            _header("t", 3, 2, ""),
            _partition("t", 0, "none", "3,1", "3"),
            _partition("t", 1, "1", "1,2", "1,2"),
            _partition("t", 2, "2", "2,3", "2"),
            _header("u", 1, 2, "unclean.leader.election.enable=true"),
            _partition("u", 0, "-1", "4,5", "4"),
        ],
    )
    cluster = load_cluster(spark, describe=path)
    assert (cluster.brokers, cluster.down_brokers) == ((1, 2), (3, 4, 5))
    # fail 2: t-0 and u-0 stay offline; t-2 loses its leader and, 3 being down, goes offline
    # with 2 kept as its last ISR member (§6.3); 2 leaves t-1's ISR.
    got = failure.answer(spark, cluster, FailOptions(brokers=(2,)))
    summary = got.summary
    assert (summary["offline_partitions"], summary["leaders_moved"]) == (3, 0)
    assert summary["unclean_elections_needed"] == 0
    rows = {
        (r.topic, r.partition): (r.leader, r.isr) for r in got.tables["partitions_after"].collect()
    }
    assert rows == {
        ("t", 0): (-1, [3]),
        ("t", 1): (1, [1]),
        ("t", 2): (-1, [2]),
        ("u", 0): (-1, [4]),
    }
    assert offline_per_set(spark, cluster, [(1,), (2,)], 1) == [2, 3]
    with pytest.raises(WhatIfInputError, match="broker 3 is already down in describe"):
        failure.failed_brokers(cluster, FailOptions(brokers=(3,)))


def test_no_failure_brings_back_a_partition_kafka_left_offline(spark: SparkSession) -> None:
    # A ZooKeeper snapshot registers broker 3, yet t-0 has no leader (its replica there is
    # offline, e.g. a failed log dir): failing 1 does not elect 3.
    columns = empty_columns()
    for p, leader, replicas, isr in ((0, -1, [3, 1], [3]), (1, 1, [1, 3], [1, 3])):
        for name, value in (
            ("topic", "t"), ("partition", p), ("replicas", replicas), ("adding_replicas", []),
            ("removing_replicas", []), ("isr", isr), ("leader", leader), ("leader_epoch", 4),
            ("zk_version", 4), ("controller_epoch", 1), ("state", ONLINE if leader >= 0 else OFFLINE),
        ):  # fmt: skip
            columns[name].append(value)
    cluster = WhatIfCluster(
        partitions_frame(spark, columns), (1, 2, 3), dict.fromkeys((1, 2, 3)), {"t": TopicConfigs()}
    )
    got = failure.answer(spark, cluster, FailOptions(brokers=(1,)))
    rows = {r.partition: (r.leader, r.isr) for r in got.tables["partitions_after"].collect()}
    assert rows == {0: (-1, [3]), 1: (3, [3])}
    assert got.summary["offline_partitions"] == 1


# -- one rack-loss rule --------------------------------------------------------------------------

RACKS = "id,rack\n1,a\n2,a\n3,b\n4,b\n"


def test_rack_loss_agrees_across_fail_audit_exposure_roll_and_decommission(
    spark: SparkSession, tmp_path: Path
) -> None:
    # Racks a = {1, 2}, b = {3, 4}; min.insync.replicas=2.
    #   t-0 [1,3] ISR [1]    its whole ISR in a: offline if a fails (3 is out of sync)
    #   t-1 [1,2] ISR [1,2]  every replica in a: offline if a fails
    #   t-2 [1,3] ISR [1,3]  survives either rack, under min ISR
    #   d-0 [2,4] ISR [2]    unclean election on: a's loss elects 4 (ISR [4], under min ISR)
    #   t-3 [3,4] ISR [3,4]  offline if b fails
    path = _write(
        tmp_path,
        [
            _header("t", 4, 2, ""),
            _partition("t", 0, "1", "1,3", "1"),
            _partition("t", 1, "1", "1,2", "1,2"),
            _partition("t", 2, "1", "1,3", "1,3"),
            _partition("t", 3, "3", "3,4", "3,4"),
            _header("d", 1, 2, "unclean.leader.election.enable=true"),
            _partition("d", 0, "2", "2,4", "2"),
        ],
    )
    racks = _write(tmp_path, [RACKS.strip()], "racks.csv")
    cluster = load_cluster(spark, describe=path, rack_map=racks, config=["min.insync.replicas=2"])
    expected_offline = {"a": 2, "b": 1}
    # fail --rack: under min ISR a: t-2 [3], d-0 [4]; b: t-0 [1], t-2 [1], d-0 [2].
    expected_under = {"a": 2, "b": 3}
    for rack in ("a", "b"):
        got = failure.answer(spark, cluster, FailOptions(rack=rack)).summary
        assert got["offline_partitions"] == expected_offline[rack]
        assert got["under_min_isr_partitions"] == expected_under[rack]
    assert exposure.answer(spark, cluster, ExposureOptions()).summary["rack_loss"] == (
        expected_offline
    )
    # audit: moving t-1 to [1,3] (in sync once complete) leaves a with t-0 only.
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            {"version": 1, "partitions": [{"topic": "t", "partition": 1, "replicas": [1, 3]}]}
        )
    )
    audited = audit.answer(spark, cluster, AuditOptions(plan)).summary
    assert audited["rack_loss_offline_before"] == expected_offline
    assert audited["rack_loss_offline"] == {"a": 1, "b": 1}
    rolled = roll.answer(spark, cluster, RollOptions(by_rack=True)).summary
    assert [(b["brokers"], b["offline"], b["under_min_isr"]) for b in rolled["per_batch"]] == [
        ([1, 2], 2, 2),
        ([3, 4], 1, 3),
    ]
    # decommission of rack a: its controlled shutdown moves t-2's leadership to 3 (ISR [3]); t-0,
    # t-1 and d-0 remain led by a; once a stops, t-0 and t-1 are offline, d-0 goes unclean.
    figures, _ = controlled_shutdown(cluster, [1, 2])
    assert figures["shutdown_offline_partitions"] == expected_offline["a"]
    assert figures["shutdown_under_min_isr_partitions"] == expected_under["a"]
    assert figures["shutdown_remaining_partitions"] == 3
