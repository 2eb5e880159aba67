"""The driver path's handlers (``controller.row_handlers`` over ``statemachines.row_state_machines``)
against the Spark handlers on random tables: the same rows, trails, errors and counters.

Replica and partition states are drawn freely, so refused and failed transitions (and their
error entries) come up as often as applied ones."""

from __future__ import annotations

import os
from collections.abc import Callable

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from controller.handlers import brokers as hb
from controller.handlers import deletion as hd
from controller.handlers import election as he
from controller.handlers import isr as hi
from controller.handlers import reassignment as hr
from controller.handlers import reassignment_plans as rp
from controller.handlers import topics as ht
from controller.row_handlers import brokers as rb
from controller.row_handlers import deletion as rd
from controller.row_handlers import election as re_
from controller.row_handlers import isr as ri
from controller.row_handlers import reassignment as rr
from controller.row_handlers import topics as rt
from controller.row_handlers.event_rows import EventRows
from controller.topic_deletion_state import TopicDeletionState
from statemachines import schemas as s
from statemachines.brokers import BrokerSet, ClusterView
from statemachines.columns import in_partitions
from statemachines.compact_rows import CompactRow
from statemachines.election_kinds import ElectionTrigger, ElectionType
from statemachines.local_rows import local_frame
from statemachines.partition_states import PartitionState
from statemachines.replica_states import ReplicaState
from statemachines.row_state_machines import RowView
from statemachines.state_change_errors import ERRORS
from statemachines.state_change_trail import TRAIL
from tests.frames import compact_rows, topic_indices
from tests.strategies import Batch, W, batches

EXAMPLES = int(os.environ.get("KCE_INVARIANT_EXAMPLES", "3")) * 2
SETTINGS = settings(
    max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@st.composite
def tables(draw: st.DrawFn) -> tuple[Batch, dict]:
    """A batch of partitions and a random state for each replica."""
    batch = draw(batches())
    states = {
        (p.topic, p.partition, r): draw(st.sampled_from(list(ReplicaState)[1:]))
        for p in batch.parts
        for r in p.replicas
    }
    return batch, states


def _frame(spark: SparkSession, batch: Batch, states: dict) -> tuple[DataFrame, list[CompactRow]]:
    topics = topic_indices(batch.parts)
    rows = compact_rows(batch.parts, topics, W, states)
    names = s.compact_columns(W)
    frame = local_frame(spark, rows, s.compact_schema(W))
    return frame, [CompactRow.of(dict(zip(names, r, strict=True)), W) for r in rows]


def _views(batch: Batch, epoch: int = 4) -> tuple[ClusterView, RowView]:
    spark_view = ClusterView(BrokerSet.of(batch.live), BrokerSet.of(batch.shutting_down), epoch)
    return spark_view, RowView(batch.live, batch.shutting_down, epoch)


def _unclean(batch: Batch) -> tuple[list[int], Callable[[CompactRow], bool]]:
    topics = topic_indices(batch.parts)
    indices = sorted(topics[t] for t in batch.unclean_topics)
    return indices, lambda r: r.topic_index in indices


def _spark_rows(out: DataFrame, counters: tuple[str, ...]) -> tuple[dict, dict]:
    rows, counted = {}, {}
    w = s.width(out)
    for r in out.collect():
        d = r.asDict()
        row = CompactRow.of(d, w)
        rows[row.key] = row
        counted[row.key] = {c: d[c] for c in counters if d.get(c)}
    return rows, counted


def _driver_rows(step: EventRows) -> tuple[dict, dict]:
    counted: dict = {k: {} for k in step.rows}
    for name, values in step.counters.items():
        for key, n in values.items():
            counted[key][name] = n
    return step.rows, counted


def _same(out: DataFrame, step: EventRows, counters: tuple[str, ...]) -> None:
    want_rows, want_counted = _spark_rows(out, counters)
    got_rows, got_counted = _driver_rows(step)
    for key, row in want_rows.items():
        assert got_rows[key] == row, key
        assert got_counted[key] == want_counted[key], key
    assert set(step.counters) == set(counters)
    for key in set(got_rows) - set(want_rows):  # rows the Spark step left out: untouched
        assert got_rows[key].trail == () and got_rows[key].errors == () and not got_counted[key]


def _step(rows: list[CompactRow]) -> EventRows:
    return EventRows({r.key: r for r in rows})


FAILURE_COUNTERS = (hb.ELECTED, hb.FAILED_ELECTION, hb.UNCLEAN_ELECTED, hb.ISR_SHRINKS)


@SETTINGS
@given(tables(), st.data())
def test_broker_failure_and_startup(spark: SparkSession, table: tuple, data: st.DataObject) -> None:
    batch, states = table
    frame, rows = _frame(spark, batch, states)
    view, row_view = _views(batch)
    indices, unclean = _unclean(batch)
    brokers = sorted({r for p in batch.parts for r in p.replicas})
    chosen = data.draw(st.sets(st.sampled_from(brokers)))
    deleting = data.draw(st.sets(st.sampled_from(sorted({r.topic_index for r in rows}))))
    spark_unclean = F.col(s.TOPIC_INDEX).isin(indices)
    dead = chosen - batch.live - batch.shutting_down
    failed = hb.on_broker_failure(frame, BrokerSet.of(dead), view, spark_unclean, sorted(deleting))
    step = _step(rows)
    rb.on_broker_failure(step, dead, row_view, unclean, deleting)
    _same(failed, step, FAILURE_COUNTERS)
    new = chosen & batch.live
    started = hb.on_broker_startup(frame, BrokerSet.of(new), view, spark_unclean, sorted(deleting))
    step = _step(rows)
    rb.on_broker_startup(step, new, row_view, unclean, deleting)
    _same(started, step, FAILURE_COUNTERS)


@SETTINGS
@given(tables(), st.data())
def test_controlled_shutdown(spark: SparkSession, table: tuple, data: st.DataObject) -> None:
    batch, states = table
    brokers = sorted({r for p in batch.parts for r in p.replicas})
    broker = data.draw(st.sampled_from(brokers))
    batch = Batch(
        batch.parts, batch.live - {broker}, batch.shutting_down | {broker},
        batch.unclean_topics, batch.selected,
    )  # fmt: skip
    frame, rows = _frame(spark, batch, states)
    view, row_view = _views(batch)
    out = hb.on_controlled_shutdown(frame, broker, view, [])
    step = _step(rows)
    rb.on_controlled_shutdown(step, broker, row_view, ())
    _same(out, step, (*FAILURE_COUNTERS, "remaining"))


@SETTINGS
@given(tables(), st.data())
def test_replica_election(spark: SparkSession, table: tuple, data: st.DataObject) -> None:
    batch, states = table
    frame, rows = _frame(spark, batch, states)
    view, row_view = _views(batch)
    indices, unclean = _unclean(batch)
    kind = data.draw(st.sampled_from(list(ElectionType)))
    trigger = data.draw(st.sampled_from(list(ElectionTrigger)))
    topics = topic_indices(batch.parts)
    requested = sorted((topics[t], p) for t, p in batch.selected)
    keys = local_frame(spark, requested, "topic_index int, partition int")
    out = he.on_replica_election(
        frame, keys, kind, trigger, view, [], F.col(s.TOPIC_INDEX).isin(indices)
    )
    step = _step(rows)
    errors = re_.on_replica_election(step, requested, kind, trigger, row_view, (), unclean)
    _same(out, step, he.COUNTERS)
    want = {
        (r[s.TOPIC_INDEX], r[s.PARTITION]): r[he.ELECTION_ERROR]
        for r in out.collect()
        if r[he.ELECTION_ERROR] is not None
    }
    assert errors == want


@SETTINGS
@given(tables(), st.integers(0, 60), st.sampled_from([(2, 5), (2, 8)]))
def test_auto_rebalance(
    spark: SparkSession, table: tuple, threshold: int, version: tuple[int, int]
) -> None:
    batch, states = table
    frame, rows = _frame(spark, batch, states)
    view, row_view = _views(batch)
    out = he.check_and_trigger_auto_leader_rebalance(frame, view, threshold, kafka_version=version)
    step = _step(rows)
    re_.check_and_trigger_auto_leader_rebalance(
        step, rows, row_view, threshold, kafka_version=version
    )
    _same(out, step, (*he.COUNTERS, he.REBALANCE_CANDIDATE))


@SETTINGS
@given(tables(), st.data())
def test_alter_isr(spark: SparkSession, table: tuple, data: st.DataObject) -> None:
    batch, states = table
    frame, rows = _frame(spark, batch, states)
    items = []
    for r in rows:
        if data.draw(st.booleans()):
            isr = data.draw(st.lists(st.sampled_from(r.replicas), unique=True, min_size=1))
            sender = data.draw(st.sampled_from([r.leader, *r.replicas]))
            epoch = r.leader_epoch + data.draw(st.integers(-1, 1))
            version = r.zk_version + data.draw(st.integers(-1, 0))
            items.append((r.topic_index, r.partition, sender, epoch, isr, version))
    epoch = data.draw(st.integers(1, 9))  # the controller's, carried by every write
    small = data.draw(st.booleans())  # items broadcast, or joined by a shuffle
    out = hi.alter_isr(frame, local_frame(spark, items, hi.ALTER_ISR_SCHEMA), epoch, small)
    step = _step(rows)
    ri.alter_isr(step, items, epoch)
    _same(out, step, (hi.ISR_UPDATED,))
    want = {(r[s.TOPIC_INDEX], r[s.PARTITION]): r[hi.ALTER_ISR_ERROR] for r in out.collect()}
    assert step.kept[hi.ALTER_ISR_ERROR] == want


def test_trail_and_errors_read_back(spark: SparkSession) -> None:
    """A row's trail and errors survive the trip through Spark (the columns ``CompactRow.of``
    reads)."""
    row = CompactRow.of(
        {
            **dict(zip(s.compact_columns(1), (0, 0, 1, 1, 2, 0, 0, 1, 0, 0, 1, 1), strict=True)),
            TRAIL: [5, 7],
            ERRORS: [(1, 2, 3, None)],
        },
        1,
    )
    assert row.trail == (5, 7) and row.errors == ((1, 2, 3, None),)


@SETTINGS
@given(tables(), st.data())
def test_new_partition_creation(spark: SparkSession, table: tuple, data: st.DataObject) -> None:
    batch, states = table
    frame, rows = _frame(spark, batch, states)
    view, row_view = _views(batch)
    brokers = sorted({r for p in batch.parts for r in p.replicas} | {900})  # 900: never live
    n = data.draw(st.integers(1, 3))
    assignment = {
        p: data.draw(st.lists(st.sampled_from(brokers), min_size=1, max_size=W, unique=True))
        for p in range(n)
    }
    index = max(r.topic_index for r in rows) + 1
    new = ht.assigned_partition_rows(spark, {index: assignment}, W)
    out = ht.on_new_partition_creation(
        ht.add_partition_rows(frame, new), F.col(s.TOPIC_INDEX) == index, view
    )
    step = _step(rows)
    rt.on_new_partition_creation(step, rt.assigned_partition_rows({index: assignment}), row_view)
    _same(out, step, (ht.INITIALIZED, ht.INIT_FAILED))


@SETTINGS
@given(tables())
def test_maybe_complete_reassignment(spark: SparkSession, table: tuple) -> None:
    batch, states = table
    frame, rows = _frame(spark, batch, states)
    view, row_view = _views(batch)
    out = hr.maybe_complete_reassignment(frame, view)
    step = _step(rows)
    rr.maybe_complete_reassignment(step, row_view)
    _same(out, step, hr.COUNTERS)


@SETTINGS
@given(tables(), st.data(), st.booleans())
def test_reassignment_checks_and_start(
    spark: SparkSession, table: tuple, data: st.DataObject, api: bool
) -> None:
    """§10.4's checks, then ``onPartitionReassignment`` for the accepted entries: new
    targets (some on unknown or dead brokers), cancels, and entries for unknown partitions."""
    batch, states = table
    frame, rows = _frame(spark, batch, states)
    view, row_view = _views(batch)
    brokers = sorted({r for p in batch.parts for r in p.replicas} | {999})
    keys = [r.key for r in rows] + [(0, 99)]
    picked = data.draw(st.lists(st.sampled_from(keys), min_size=1, max_size=4, unique=True))
    targets = st.none() | st.lists(st.sampled_from(brokers), max_size=3).map(tuple)
    plan = [(t, p, data.draw(targets)) for t, p in picked]
    deleting = data.draw(st.sets(st.sampled_from(sorted({r.topic_index for r in rows}))))
    schema = f"{s.TOPIC_INDEX} int, {s.PARTITION} int, {rp.TARGET} array<int>"
    spark_plan = local_frame(
        spark, [(t, p, None if x is None else list(x)) for t, p, x in plan], schema
    )
    checked = rp.validate_reassignments(frame, spark_plan, view.live, sorted(deleting), api)
    want = {(r[s.TOPIC_INDEX], r[s.PARTITION]): r for r in checked.collect()}
    got = rr.validate_reassignments({r.key: r for r in rows}, plan, batch.live, deleting, api)
    for c in got:
        r = want[c.key]
        assert (c.error, c.width_needed, c.reassigning, c.completes) == (
            r[rp.ERROR],
            r[rp.WIDTH_NEEDED],
            r[rp.REASSIGNING],
            r[rp.COMPLETES],
        ), c
    accepted = [c for c in got if c.error == rp.NONE]
    if not accepted:
        return
    width = max(W, *(c.width_needed for c in accepted))
    start = local_frame(
        spark,
        [(*c.key, None if c.target is None else list(c.target)) for c in accepted],
        schema,
    )
    replaces = any(c.reassigning for c in accepted)
    completes = any(c.completes for c in accepted)
    out = hr.start_reassignment(frame, start, view, width, replaces, completes).drop(rp.ERROR)
    step = _step(rows)
    rr.start_reassignment(step, {c.key: c.target for c in accepted}, row_view, replaces, completes)
    _same(out, step, hr.COUNTERS)


def test_topic_znode_json_matches_spark(spark: SparkSession) -> None:
    """The driver's topic payload is the bootstrap's, byte for byte."""
    from controller.partition_store.bootstrap import topic_znode_json

    rows = [
        CompactRow(0, p, reps, reps[:1], (ReplicaState.OnlineReplica,) * len(reps), add, rem,
                   reps[0], 0, 0, 1, PartitionState.OnlinePartition)
        for p, reps, add, rem in [(0, (1, 2, 3), 0b100, 0b001), (1, (2, 3), 0, 0), (2, (3,), 0, 0)]
    ]  # fmt: skip
    public = spark.createDataFrame(
        [("t", r.partition, list(r.replicas), rr.positions(r.adding_mask, r),
          rr.positions(r.removing_mask, r)) for r in rows],
        f"{s.TOPIC} string, {s.PARTITION} int, {s.REPLICAS} array<int>, "
        f"{s.ADDING_REPLICAS} array<int>, {s.REMOVING_REPLICAS} array<int>",
    )  # fmt: skip
    (want,) = topic_znode_json(public.coalesce(1)).collect()
    assert rr.topic_znode_json(rows) == want["json"]


@SETTINGS
@given(tables(), st.data())
def test_topic_deletion_steps(spark: SparkSession, table: tuple, data: st.DataObject) -> None:
    """Each ``TopicDeletionManager`` entry point against its twin, from random deletion sets:
    the rows (completed topics' removed), counters, per-topic facts and StopReplica counts."""
    batch, states = table
    frame, rows = _frame(spark, batch, states)
    view, row_view = _views(batch)
    topics = sorted({r.topic_index for r in rows})
    queued = data.draw(st.sets(st.sampled_from(topics), min_size=1))
    started = data.draw(st.sets(st.sampled_from(sorted(queued))))
    ineligible = data.draw(st.sets(st.sampled_from(sorted(queued))))

    def deletion_state() -> TopicDeletionState:
        return TopicDeletionState(True, set(queued), set(started), set(ineligible))

    brokers = sorted({r for p in batch.parts for r in p.replicas})
    spark_manager = hd.TopicDeletionManager(deletion_state())
    row_manager = rd.RowTopicDeletionManager(deletion_state())
    step = _step(rows)
    kind = data.draw(st.sampled_from(["resume", "started", "offline", "response"]))
    if kind == "resume":
        out = spark_manager.resume_deletions(frame, view)
        result = row_manager.resume_deletions(step, row_view)
    elif kind == "started":
        new = data.draw(st.sets(st.sampled_from(brokers)))
        out = spark_manager.on_brokers_started(frame, BrokerSet.of(new), view)
        result = row_manager.on_brokers_started(step, new, row_view)
    elif kind == "offline":
        dead = BrokerSet.of(data.draw(st.sets(st.sampled_from(brokers))))
        out = spark_manager.fail_replica_deletion(frame, lambda b, _k: dead.contains(b), view)
        result = row_manager.fail_replica_deletion(step, lambda _r, b: b in dead.ids, row_view)
    else:
        broker = data.draw(st.sampled_from(brokers))
        keys = [r.key for r in rows]
        bad = data.draw(st.none() | st.sets(st.sampled_from(keys)))
        failed = None if bad is None else (lambda _b, _k: in_partitions(bad))
        out = spark_manager.on_stop_replica_response(frame, broker, failed, view)
        result = row_manager.on_stop_replica_response(step, broker, bad, row_view)
    assert out is not None and result is not None
    counters = (hd.STOP_REPLICA_DELETES, hd.ISR_SHRINKS)
    _same(out.partitions, step, counters)
    assert set(step.rows) == {(r[0], r[1]) for r in out.partitions.select(*rp.KEY).collect()}
    facts = sorted((r.asDict() for r in out.topics.collect()), key=lambda f: f[s.TOPIC_INDEX])
    assert result.topics == facts
    stops = {r[s.BROKER]: r[hd.STOP_REPLICA_DELETES] for r in out.stop_replica.collect()}
    assert result.stop_replica == stops
