"""An event's plans compile to the same code whichever brokers, epochs or zxids it carries.

Spark caches compiled plans by their generated source; the JVM's compiled (JIT-warm) code lives
with those classes. A per-event value that reaches the source (a lambda variable's fresh name, a
long literal, a common subexpression ordered by a literal's hash) makes every event compile anew
and run cold, which costs seconds at a million partitions. Each test builds the plans of events
that differ only in such values and compares their sources, or (the ZooKeeper write, whose plan
is internal to the store) counts the classes a repeated write compiles. The last ones check that
a commit's passes are generated code at all: an aggregate Spark cannot generate, or a method past
the JVM's 64 KB limit, makes it run the plan without generated code.
"""

from __future__ import annotations

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.classic.dataframe import DataFrame as ClassicDataFrame

from controller.commit.diff import with_previous
from controller.commit.requests import RequestCount, request_batches, request_count
from controller.commit.spark_path import event_totals
from controller.commit.state_change_log import state_change_lines
from controller.context import ControllerContext, LiveBroker
from controller.handlers import brokers as h
from controller.handlers import reassignment as hr
from controller.partition_store import STATES_SCHEMA, PartitionRegion, SparkStateStore
from controller.zk import InMemoryZooKeeper
from statemachines import schemas as s
from statemachines.brokers import BrokerSet, ClusterView
from statemachines.local_rows import local_frame
from statemachines.reference import Partition
from tests.frames import compact_frame
from tests.test_requests import broker_failure
from tests.zk.zk_helpers import elect

BROKERS = range(1, 13)


def generated_code(df: DataFrame) -> list[str]:
    """The Java source of every whole-stage subtree of ``df``'s executed plan (runs it once)."""
    df.collect()  # the adaptive plan is final once it has run
    subtrees = df._jdf.queryExecution().debug().codegenToSeq()
    return [subtrees.apply(i)._2() for i in range(subtrees.size())]


def _cluster(spark: SparkSession) -> tuple[DataFrame, dict[str, int]]:
    """Twelve partitions over brokers 1..12, RF 3, led by their first replica."""
    parts = [
        Partition("t", p, reps, reps, leader=reps[0], controller_epoch=1)
        for p in range(12)
        for reps in [tuple(1 + (p + k) % 12 for k in range(3))]
    ]
    return compact_frame(spark, parts)


def _failure_plan(df: DataFrame, dead: int, epoch: int = 1) -> DataFrame:
    live = BrokerSet.of(b for b in BROKERS if b != dead)
    view = ClusterView(live, controller_epoch=epoch)
    return h.on_broker_failure(df, BrokerSet.of([dead]), view, F.lit(False), deleting=[])


def test_broker_failure_plans_share_their_code_whichever_broker_fails(
    spark: SparkSession,
) -> None:
    df, _ = _cluster(spark)
    codes = [generated_code(_failure_plan(df, dead)) for dead in (3, 8, 11)]
    assert codes[0]
    assert codes[1] == codes[0]
    assert codes[2] == codes[0]


def test_broker_failure_plans_share_their_code_across_controller_epochs(
    spark: SparkSession,
) -> None:
    # Every failover bumps the epoch that elections and ISR removals write.
    df, _ = _cluster(spark)
    plans = [_failure_plan(df, 3, epoch) for epoch in (1, 2)]
    written = [p.where("leader_epoch > 0").select("controller_epoch").distinct() for p in plans]
    assert [[r[0] for r in w.collect()] for w in written] == [[1], [2]]
    codes = [generated_code(plan) for plan in plans]
    assert codes[0]
    assert codes[1] == codes[0]


def _request_plans(diff: DataFrame, live: tuple[int, ...]) -> list[DataFrame]:
    count = request_count(diff, live)
    return [request_batches(diff, live), count.frame.agg(*count.aggregates)]


def test_request_plans_share_their_code_whichever_brokers_are_live(spark: SparkSession) -> None:
    event = broker_failure(spark)
    first, second = (_request_plans(event.diff, live) for live in [(2, 3), (2, 3, 9)])
    for plans in zip(first, second, strict=True):
        codes = [generated_code(plan) for plan in plans]
        assert codes[0]
        assert codes[1] == codes[0]


def test_state_change_log_plans_share_their_code_across_controllers(
    spark: SparkSession,
) -> None:
    event = broker_failure(spark)
    codes = [
        generated_code(state_change_lines(event.diff, event.topics, controller, epoch))
        for controller, epoch in [(1, 1), (2, 7)]
    ]
    assert codes[0]
    assert codes[1] == codes[0]


def test_zookeeper_writes_compile_nothing_new_across_zxids(spark: SparkSession) -> None:
    # Through the store: the optimizer folds a literal zxid or time across the updates' join into
    # the merge's pass over the whole table, so only the real write path shows whether it does.
    region = PartitionRegion()
    store = InMemoryZooKeeper(region=region)
    client = store.client()
    client.start()
    client.ensure_path("/brokers/topics/a")
    epoch_version = elect(client, 1)
    writer = SparkStateStore(client, region)
    compiled = spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics

    def write(version: int) -> int:
        """Compilations during one write of the same rows at ``version`` (+1 on success)."""
        rows = [("a", p, 1, version, [1, 2], 1, version - 1 if version else -1) for p in range(8)]
        before = compiled.METRIC_COMPILATION_TIME().getCount()
        # Materialised, as the controller's diff is: local rows would be folded at planning.
        states = spark.createDataFrame(rows, STATES_SCHEMA).localCheckpoint()
        assert writer.write_states(states, epoch_version).count() == 0
        return int(compiled.METRIC_COMPILATION_TIME().getCount() - before)

    # With adaptive execution, a plan's whole-stage codegen ids follow the order in which its
    # query stages finished planning, which varies with the machine's load, and each new order
    # compiles once. Without it the ids are fixed, so only a per-write value compiles anew.
    adaptive = spark.conf.get("spark.sql.adaptive.enabled")
    spark.conf.set("spark.sql.adaptive.enabled", "false")
    try:
        write(0)  # creates the rows: the base
        write(1)  # a small write: the first delta
        write(2)  # the first merge with a delta: the same shapes of plan from here on
        compiled_at = [v for v in range(3, 9) if write(v)]
    finally:
        spark.conf.set("spark.sql.adaptive.enabled", adaptive)
        store.close()
    assert compiled_at == []


@pytest.fixture
def actions(monkeypatch: pytest.MonkeyPatch) -> list[DataFrame]:
    """Every frame a commit runs its action on (``first``), in order."""
    recorded: list[DataFrame] = []
    first = ClassicDataFrame.first

    def recording(self: ClassicDataFrame) -> object:
        recorded.append(self)
        return first(self)

    monkeypatch.setattr(ClassicDataFrame, "first", recording)
    return recorded


def test_a_commits_pass_over_every_row_runs_as_generated_code(
    spark: SparkSession, actions: list[DataFrame]
) -> None:
    # Every aggregate of a commit's action must be declarative: an imperative one (collect_list,
    # percentile) makes Spark plan an ObjectHashAggregate, which it runs without generated code.
    # At 1e7 an AlterIsr event that collected its replies that way took 18.2 s (15.2-15.5 s without).
    ctx = ControllerContext(spark)
    ctx.add_topic("t", 12)
    ctx.set_live_brokers(LiveBroker(b) for b in BROKERS if b != 3)
    ctx.commit(_cluster(spark)[0])
    assert ctx.partitions is not None
    actions.clear()  # the event's commit only
    failed = _failure_plan(with_previous(ctx.partitions, ctx.generation), 3)  # leads t-2
    totals = event_totals(tuple(ctx.live_brokers), (), [])
    gauges = ctx.commit(failed, "BrokerChange", (h.ELECTED, h.ISR_SHRINKS), (), totals)
    # Two actions: the touched rows with the event's totals, then the gauges over the new table.
    assert ctx.stamped and gauges.counters[h.ELECTED] == 1 and len(actions) == 2
    for action in actions:
        plan = action._jdf.queryExecution().executedPlan().toString()
        assert "HashAggregate" in plan
        assert "ObjectHashAggregate" not in plan and "SortAggregate" not in plan


@pytest.mark.parametrize("w", [4, 6])
def test_a_commits_passes_compile_within_the_jvms_method_limit(
    spark: SparkSession, actions: list[DataFrame], w: int
) -> None:
    # Moving RF 3 to new brokers widens the table (to 6 for three new ones). The diff's totals
    # test every replica slot many times, and a method of more than 64 KB fails to compile:
    # Spark logs the error and runs the plan without generated code, at every event that wide.
    ctx = ControllerContext(spark)
    ctx.add_topic("t", 8)
    brokers = range(1, 101)  # ids in two 64-bit words, as in the bench's clusters
    ctx.set_live_brokers(LiveBroker(b) for b in brokers)
    parts = [
        Partition("t", p, (1, 2, 3), (1, 2, 3), leader=1, controller_epoch=1) for p in range(8)
    ]
    ctx.commit(compact_frame(spark, parts)[0])
    view = ClusterView(BrokerSet.of(brokers), controller_epoch=1)
    target = [*range(4, w + 1), 1, 2, 3][:3]  # w - 3 new brokers: w replicas while moving

    def move(first_partition: int) -> DataFrame:
        """Four partitions from ``first_partition`` on move, read as the controller reads
        them: the whole table when the move widens it, else the rows from there on."""
        assert ctx.partitions is not None
        named = F.col(s.PARTITION) >= first_partition
        named_rows = [(0, p, target) for p in range(first_partition, first_partition + 4)]
        rows = local_frame(spark, named_rows, "topic_index int, partition int, target array<int>")
        table = with_previous(ctx.partitions, ctx.generation)
        table = table if s.width(ctx.partitions) < w else table.where(named)
        return hr.start_reassignment(
            table, rows, view, w, replaces_ongoing=False, may_complete=False
        )

    counts: list[RequestCount] = []
    totals = event_totals(tuple(ctx.live_brokers), (), counts)
    actions.clear()  # the moves' commits only
    ctx.commit(move(0), "AlterPartitionReassignments", hr.COUNTERS, (), totals)  # widens
    ctx.commit(move(4), "AlterPartitionReassignments", hr.COUNTERS, (), totals, partial=True)
    assert ctx.stamped and ctx.diff_totals is not None
    # The epoch bump reaches every replica of the new assignment, the adding ones included;
    # then each adding replica gets its NewReplica transition's, in a batch of its own.
    assert counts[-1].totals(ctx.diff_totals)["LeaderAndIsr"] == w + (w - 3)
    sizes = []  # the largest method of every whole-stage subtree (-1: it failed to compile)
    for action in actions:
        action.collect()  # the adaptive plan is final once it has run
        subtrees = action._jdf.queryExecution().debug().codegenToSeq()
        sizes += [subtrees.apply(i)._3().maxMethodCodeSize() for i in range(subtrees.size())]
    assert sizes and all(0 <= size < 64 * 1024 for size in sizes), sizes
