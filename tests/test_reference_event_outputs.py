"""An event's outputs read off its diff in Spark against the plain-Python rules, on random diffs
and trails: the broker requests (``controller.commit.requests`` and
``statemachines.reference_requests``, spec §15.1) and the state-change log
(``controller.commit.state_change_log`` and ``statemachines.reference_state_change_log``,
§16.2)."""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import DataFrame, Row, SparkSession

from controller.commit.diff import generation_diff, prev
from controller.commit.requests import request_batches, request_count, request_totals
from controller.commit.state_change_log import LINE_COLUMNS, state_change_lines
from statemachines import reference_requests as ref
from statemachines import reference_state_change_log as ref_log
from statemachines import schemas as s
from statemachines.partition_states import PartitionState
from statemachines.reference import Partition
from statemachines.replica_states import ReplicaState
from statemachines.state_change_trail import LEADER_EPOCH_BUMP, TRAIL, encode
from tests.frames import compact_frame
from tests.test_requests import with_trails

BROKERS = (1, 2, 3, 4, 5)
_BATCHES = (1, 2, 3, 65)


@st.composite
def events(draw: st.DrawFn) -> dict[str, Any]:
    """Partitions before and after an event, the event's trails, live brokers and deletions."""
    n = draw(st.integers(1, 4))
    before: list[Partition] = []
    after: list[Partition] = []
    states: dict[tuple[str, int, int], ReplicaState] = {}
    trails: dict[int, list[tuple[int | None, int, int, int]]] = {}
    for p in range(n):
        replicas = tuple(
            draw(st.lists(st.sampled_from(BROKERS), min_size=1, max_size=3, unique=True))
        )
        isr = tuple(r for r in replicas if draw(st.booleans())) or replicas[:1]
        led = draw(st.booleans())
        old = Partition(
            "t", p, replicas, isr, leader=isr[0] if led else -1,
            leader_epoch=draw(st.integers(0, 2)), zk_version=draw(st.sampled_from((-1, 0, 1))),
            controller_epoch=1,
        )  # fmt: skip
        new = old
        if draw(st.booleans()):
            new = replace(
                old,
                isr=tuple(draw(st.permutations(isr)))[: draw(st.integers(1, len(isr)))],
                leader_epoch=old.leader_epoch + draw(st.integers(0, 1)),
                zk_version=draw(st.sampled_from((-1, 0, 1, 2))),
            )
        before.append(old)
        after.append(new)
        for r in replicas:
            states[("t", p, r)] = draw(st.sampled_from(list(ReplicaState)))
        entries = []
        for _ in range(draw(st.integers(0, 4))):
            unit = draw(st.sampled_from((None, *replicas)))
            codes = list(PartitionState) if unit is None else list(ReplicaState)
            start = int(draw(st.sampled_from(codes)))
            end = LEADER_EPOCH_BUMP if unit is None and draw(st.booleans()) else None
            end = int(draw(st.sampled_from(codes))) if end is None else end
            entries.append((unit, start, end, draw(st.sampled_from(_BATCHES))))
        trails[p] = entries
    live = draw(st.lists(st.sampled_from(BROKERS), unique=True))
    return {
        "before": before, "after": after, "states": states, "trails": trails, "live": live,
        "deleting": draw(st.booleans()),
    }  # fmt: skip


def _changed(r: Row, w: int) -> ref.ChangedRow:
    """The diff row as the Python rules read it."""

    def leadership(side: Any) -> ref.Leadership:
        isr = tuple(x for x in (r[side(s.isr_col(k))] for k in range(w)) if x != s.EMPTY_SLOT)
        return ref.Leadership(
            r[side(s.LEADER)], r[side(s.LEADER_EPOCH)], r[side(s.ZK_VERSION)], isr
        )

    replicas = tuple(
        (r[s.replica_col(k)], ReplicaState(r[s.replica_state_col(k)]))
        for k in range(w)
        if r[s.replica_col(k)] is not None and r[s.replica_col(k)] != s.EMPTY_SLOT
    )
    return ref.ChangedRow(
        r[s.TOPIC_INDEX],
        r[s.PARTITION],
        replicas,
        leadership(lambda c: c),
        leadership(prev),
        tuple(r[TRAIL] or ()),
        removed=r[s.STATE_CODE] is None,
    )


_EXAMPLES = settings(
    max_examples=int(os.environ.get("KCE_INVARIANT_EXAMPLES", "3")) * 3,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _diff(spark: SparkSession, event: dict[str, Any]) -> tuple[DataFrame, dict[str, int]]:
    """The event's generation diff (checkpointed, as the controller holds it) and its topics."""
    old, topics = compact_frame(spark, event["before"], w=3)
    new, _ = compact_frame(spark, event["after"], event["states"], w=3)
    t = topics["t"]
    trails = {(t, p): [(u, a, z, b) for u, a, z, b in e] for p, e in event["trails"].items()}
    return generation_diff(old, with_trails(spark, new, trails)).localCheckpoint(), topics


@_EXAMPLES
@given(event=events())
def test_spark_counts_the_requests_the_python_rules_count(
    spark: SparkSession, event: dict[str, Any]
) -> None:
    diff, topics = _diff(spark, event)
    live, deleting = event["live"], [topics["t"]] if event["deleting"] else []
    expected = ref.request_totals((_changed(r, 3) for r in diff.collect()), live, deleting)
    assert request_totals(request_batches(diff, live, deleting)) == expected
    count = request_count(diff, live, deleting)
    row = count.aggregated().first()
    assert row is not None
    assert count.totals(row) == expected


@_EXAMPLES
@given(event=events())
def test_spark_renders_the_state_change_lines_the_python_rules_render(
    spark: SparkSession, event: dict[str, Any]
) -> None:
    diff, topics = _diff(spark, event)
    names = spark.createDataFrame([(i, n) for n, i in topics.items()], s.TOPICS_SCHEMA)
    lines = state_change_lines(diff, names, 3, 7).select(*LINE_COLUMNS)
    rows = [_changed(r, 3) for r in diff.collect()]
    expected = ref_log.state_change_lines(rows, {i: n for n, i in topics.items()}, 3, 7)
    assert sorted(map(tuple, lines.collect()), key=repr) == sorted(map(tuple, expected), key=repr)


def test_removed_partitions_send_nothing() -> None:
    leadership = ref.Leadership(1, 0, 0, (1,))
    gone = ref.ChangedRow(0, 0, (), leadership, leadership, (encode(1, 5, 6),), removed=True)
    assert set(ref.request_totals([gone], [1]).values()) == {0}
