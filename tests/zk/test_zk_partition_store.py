"""Bulk partition-state store on both backends: round trips, version checks, fencing, interop."""

from __future__ import annotations

import queue

import pytest
from kazoo.protocol.states import EventType
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from zk_helpers import elect

from controller.partition_store import (
    NEW_PARTITION_VERSION,
    STATES_SCHEMA,
    PartitionRegion,
    SparkStateStore,
    changed_states,
)
from controller.zk import ControllerMovedError, InMemoryZooKeeper, MalformedZnodeError
from controller.zk.paths import PartitionStateZNode
from statemachines.schemas import LEADER_EPOCH, PARTITION, TOPIC, ZK_VERSION, schema_problems


def _cluster(zk, topics: list[str]):
    client = zk.client()
    client.ensure_path("/brokers/topics")
    for topic in topics:
        client.create(f"/brokers/topics/{topic}", b'{"version":3,"partitions":{}}')
    return client, elect(client, 1)


def _states(
    spark: SparkSession, n: int, n_topics: int, version: int = NEW_PARTITION_VERSION
) -> DataFrame:
    df = spark.range(n).select(
        F.concat(F.lit("t"), (F.col("id") % n_topics).cast("string")).alias(TOPIC),
        (F.col("id") / n_topics).cast("int").alias(PARTITION),
        (F.col("id") % 5).cast("int").alias("leader"),
        F.lit(0).alias(LEADER_EPOCH),
        F.array((F.col("id") % 5).cast("int"), ((F.col("id") + 1) % 5).cast("int")).alias("isr"),
        F.lit(1).alias("controller_epoch"),
        F.lit(version).alias(ZK_VERSION),
    )
    return df


class _Started:
    """A ``zk`` fixture stand-in over one in-memory store with a partition region: started
    clients and their stores."""

    def __init__(self) -> None:
        self.region = PartitionRegion()
        self.store = InMemoryZooKeeper(region=self.region)

    def client(self):
        client = self.store.client()
        client.start()
        return client

    def state_store(self, client) -> SparkStateStore:
        return SparkStateStore(client, self.region)


def _rows(df: DataFrame) -> list[tuple]:
    return sorted(tuple(r) for r in df.collect())


def test_bulk_round_trip_of_100k_partition_states(zk, spark) -> None:
    n, topics = 100_000, [f"t{i}" for i in range(10)]
    client, epoch_version = _cluster(zk, topics)
    store = zk.state_store(client)
    assert store.write_states(_states(spark, n, 10), epoch_version).count() == 0

    read = store.read_states(spark)
    assert read.columns == STATES_SCHEMA.names
    assert schema_problems(read.schema, STATES_SCHEMA) == []
    expected = _states(spark, n, 10, version=0)
    assert read.count() == n
    assert read.exceptAll(expected).count() == 0  # same count, unique keys: equal
    assert sorted(client.get_children("/brokers/topics/t3/partitions"), key=int)[:3] == [
        "0",
        "1",
        "2",
    ]
    assert client.get_children("/brokers/topics/t3/partitions/7") == ["state"]

    # Bump the leader epoch of 1,000 partitions with the versions just read.
    subset = read.filter(F.col(PARTITION) < 100)
    bumped = subset.withColumn(LEADER_EPOCH, F.col(LEADER_EPOCH) + 1)
    assert store.write_states(bumped, epoch_version).count() == 0
    stale = store.write_states(bumped, epoch_version)  # same expected versions again
    assert stale.count() == 1000 and {r.error for r in stale.collect()} == {"BADVERSION"}
    after = store.read_states(spark, subset.select(TOPIC, PARTITION))
    assert after.count() == 1000
    assert after.agg(F.min(LEADER_EPOCH), F.max(LEADER_EPOCH), F.min(ZK_VERSION)).first() == (
        1,
        1,
        1,
    )


def test_create_update_errors_per_row(zk, spark) -> None:
    client, epoch_version = _cluster(zk, ["a"])
    store = zk.state_store(client)
    rows = [
        ("a", 0, 1, 0, [1, 2], 1, -1),
        ("a", 1, 2, 0, [2, 1], 1, -1),
    ]
    assert (
        store.write_states(spark.createDataFrame(rows, STATES_SCHEMA), epoch_version).count() == 0
    )
    attempt = [
        ("a", 0, 1, 1, [1], 1, -1),  # exists already
        ("nope", 0, 1, 0, [1], 1, -1),  # no topic znode
        ("a", 5, 1, 1, [1], 1, 0),  # no state to update
        ("a", 1, 2, 1, [2], 1, 3),  # wrong version
        ("a", 2, 1, 0, [1], 1, -1),  # fine: new partition
    ]
    failed = store.write_states(spark.createDataFrame(attempt, STATES_SCHEMA), epoch_version)
    assert {(r.topic, r.partition, r.error) for r in failed.collect()} == {
        ("a", 0, "NODEEXISTS"),
        ("nope", 0, "NONODE"),
        ("a", 5, "NONODE"),
        ("a", 1, "BADVERSION"),
    }
    assert _rows(store.read_states(spark)) == [
        ("a", 0, 1, 0, [1, 2], 1, 0),
        ("a", 1, 2, 0, [2, 1], 1, 0),
        ("a", 2, 1, 0, [1], 1, 0),
    ]
    assert client.exists("/brokers/topics/nope") is None


def test_a_bulk_write_takes_a_zxid_per_partition_written_as_single_writes_do(spark) -> None:
    """Kafka writes each partition's state in a transaction of its own: after a bulk write of
    two new rows and one refused, the next znode's czxid (a broker's epoch, when it registers)
    is where two single writes would have left it."""
    czxids = []
    for bulk in (True, False):
        zk = _Started()
        client, epoch_version = _cluster(zk, ["a"])
        store = zk.state_store(client)
        before = client.create("/probe-before", b"")
        rows = [("a", 0, 1, 0, [1, 2], 1, -1), ("a", 1, 2, 0, [2, 1], 1, -1)]
        refused = ("a", 9, 1, 0, [1], 1, 4)  # no state znode to update
        if bulk:
            frame = spark.createDataFrame([*rows, refused], STATES_SCHEMA)
            assert store.write_states(frame, epoch_version).count() == 1
        else:
            single = [(*r, 1) for r in (*rows, refused)]  # each written once
            assert len(store.write_state_rows(single, epoch_version)) == 1
        after = client.create("/probe-after", b"")
        czxids.append(client.exists(after).czxid - client.exists(before).czxid)
    assert czxids == [3, 3]


def test_a_topic_created_between_writes_takes_creates_at_the_next(zk, spark) -> None:
    client, epoch_version = _cluster(zk, ["a"])
    store = zk.state_store(client)
    first = [("a", 0, 1, 0, [1], 1, -1), ("b", 0, 1, 0, [1], 1, -1)]
    failed = store.write_states(spark.createDataFrame(first, STATES_SCHEMA), epoch_version)
    assert [(r.topic, r.error) for r in failed.collect()] == [("b", "NONODE")]
    client.create("/brokers/topics/b", b'{"version":3,"partitions":{}}')
    again = [("b", 0, 1, 0, [1], 1, -1), ("c", 0, 1, 0, [1], 1, -1)]
    failed = store.write_states(spark.createDataFrame(again, STATES_SCHEMA), epoch_version)
    assert [(r.topic, r.error) for r in failed.collect()] == [("c", "NONODE")]
    client.delete("/brokers/topics/a", recursive=True)
    last = [("a", 0, 1, 0, [1], 1, -1)]
    failed = store.write_states(spark.createDataFrame(last, STATES_SCHEMA), epoch_version)
    assert [(r.topic, r.error) for r in failed.collect()] == [("a", "NONODE")]
    assert _rows(store.read_states(spark)) == [("b", 0, 1, 0, [1], 1, 0)]


def test_a_row_written_several_times_ends_at_that_many_versions(zk, spark) -> None:
    client, epoch_version = _cluster(zk, ["a"])
    store = zk.state_store(client)
    schema = f"{STATES_SCHEMA.simpleString()[7:-1]}, writes int"
    created = [("a", 0, 1, 0, [1, 2], 1, -1, 1), ("a", 1, 2, 0, [2], 1, -1, 3)]
    assert store.write_states(spark.createDataFrame(created, schema), epoch_version).count() == 0
    # An election then an ISR removal: two writes, as Kafka's controller makes them.
    updated = [("a", 0, 2, 1, [2], 1, 0, 2), ("a", 1, 1, 1, [1], 1, 1, 2)]
    failed = store.write_states(spark.createDataFrame(updated, schema), epoch_version)
    assert [(r.partition, r.error) for r in failed.collect()] == [(1, "BADVERSION")]
    assert _rows(store.read_states(spark)) == [
        ("a", 0, 2, 1, [2], 1, 2),
        ("a", 1, 2, 0, [2], 1, 2),
    ]
    data, stat = client.get(PartitionStateZNode.path("a", 0))
    state = PartitionStateZNode.decode(data, PartitionStateZNode.path("a", 0))
    assert stat.version == 2 and state.leader == 2


def test_bulk_write_is_fenced_by_the_controller_epoch(zk, spark) -> None:
    client, epoch_version = _cluster(zk, ["a"])
    store = zk.state_store(client)
    rows = spark.createDataFrame([("a", 0, 1, 0, [1], 1, -1)], STATES_SCHEMA)
    store.write_states(rows, epoch_version)
    rival = zk.client()
    client.delete("/controller")
    elect(rival, 2)
    update = spark.createDataFrame([("a", 0, 2, 1, [2], 1, 0)], STATES_SCHEMA)
    with pytest.raises(ControllerMovedError):
        store.write_states(update, epoch_version)
    assert _rows(store.read_states(spark)) == [("a", 0, 1, 0, [1], 1, 0)]


def test_single_ops_and_watches_interoperate_with_bulk(zk, spark) -> None:
    client, epoch_version = _cluster(zk, ["a"])
    store = zk.state_store(client)
    store.write_states(_states(spark, 6, 1).withColumn(TOPIC, F.lit("a")), epoch_version)
    path = PartitionStateZNode.path("a", 2)
    data, stat = client.get(path)
    assert PartitionStateZNode.decode(data, path).leader == 2 and stat.version == 0
    events: queue.Queue = queue.Queue()
    client.get(path, watch=events.put)
    update = (
        store.read_states(spark).filter(F.col(PARTITION) == 2).withColumn(LEADER_EPOCH, F.lit(9))
    )
    store.write_states(update, epoch_version)
    assert events.get(timeout=10).type == EventType.CHANGED
    data, stat = client.get(path)
    assert PartitionStateZNode.decode(data, path).leader_epoch == 9 and stat.version == 1
    client.set(path, PartitionStateZNode.encode_fields(4, 10, [4], 1), version=1)
    assert _rows(store.read_states(spark).filter(F.col(PARTITION) == 2)) == [
        ("a", 2, 4, 10, [4], 1, 2)
    ]
    client.create("/brokers/topics/a/partitions/9", b"")
    client.create(
        "/brokers/topics/a/partitions/9/state", PartitionStateZNode.encode_fields(1, 0, [1], 1)
    )
    assert store.read_states(spark).count() == 7
    client.delete("/brokers/topics/a", recursive=True)
    assert client.exists(path) is None
    assert store.read_states(spark).count() == 0


def test_malformed_state_znode_is_reported_with_its_path(zk, spark) -> None:
    client, epoch_version = _cluster(zk, ["a"])
    store = zk.state_store(client)
    store.write_states(
        spark.createDataFrame([("a", 0, 1, 0, [1], 1, -1)], STATES_SCHEMA), epoch_version
    )
    client.set(PartitionStateZNode.path("a", 0), b'{"leader":"oops"}')
    with pytest.raises(MalformedZnodeError, match="/brokers/topics/a/partitions/0/state"):
        store.read_states(spark).collect()


def test_changed_states_keeps_only_rows_that_differ(spark) -> None:
    old = spark.createDataFrame(
        [("a", 0, 1, 0, [1], 1, 0), ("a", 1, 2, 0, [2], 1, 0)], STATES_SCHEMA
    )
    new = spark.createDataFrame(
        [("a", 0, 1, 0, [1], 1, 0), ("a", 1, 2, 1, [2], 1, 0), ("a", 2, 1, 0, [1], 1, -1)],
        STATES_SCHEMA,
    )
    assert [r.partition for r in changed_states(old, new).orderBy(PARTITION).collect()] == [1, 2]


def test_creates_into_a_populated_store_keep_its_partitioning(spark) -> None:
    # Creates are merged apart from the scan of the table (one small tail per write); the
    # table's partition count must not grow with every topic created.
    zk = _Started()
    store = zk.store
    client, epoch_version = _cluster(zk, [f"t{i}" for i in range(10)])
    writer = zk.state_store(client)
    assert writer.write_states(_states(spark, 1000, 10), epoch_version).count() == 0
    start = zk.region.table.rdd.getNumPartitions()
    for i in range(10):
        client.create(f"/brokers/topics/new{i}", b'{"version":3,"partitions":{}}')
        one = _states(spark, 3, 1).withColumn(TOPIC, F.lit(f"new{i}"))
        assert writer.write_states(one, epoch_version).count() == 0
    assert zk.region.table.rdd.getNumPartitions() <= 2 * start
    read = writer.read_states(spark)
    assert read.count() == 1030
    assert read.filter(F.col(TOPIC) == "new9").select(PARTITION).orderBy(PARTITION).collect() == [
        (0,),
        (1,),
        (2,),
    ]
    store.close()


def test_bulk_write_counts_outcomes_across_the_table_pass_and_the_new_rows(spark) -> None:
    # NONODE comes from both passes: a partition node without a state (in the table) and a
    # partition with no node at all (merged apart); the counts must add up, not overwrite.
    zk = _Started()
    store = zk.store
    client = zk.client()
    client.create("/brokers/topics/a", b'{"version":3,"partitions":{}}', makepath=True)
    client.create("/brokers/topics/a/partitions/0/state", b"{}", makepath=True)
    client.delete("/brokers/topics/a/partitions/0/state")
    rows = [("a", 0, 1, 1, [1], 1, 0), ("a", 7, 1, 1, [1], 1, 0), ("a", 8, 1, 0, [1], 1, -1)]
    updates = spark.createDataFrame(rows, STATES_SCHEMA).withColumn("writes", F.lit(1))
    outcome = zk.region.bulk_write(updates, 10, 0, ["a"], [], rows=3)
    assert outcome.counts == {("a", "NONODE"): 2, ("a", "created"): 1}
    assert {(r.partition, r.error) for r in outcome.failed.collect()} == {
        (0, "NONODE"),
        (7, "NONODE"),
    }
    store.close()


def test_small_writes_supersede_rows_through_a_delta_until_it_outgrows_its_bound(spark) -> None:
    # An event's few changed states must not rewrite the whole table; what they supersede must
    # read back everywhere (bulk reads, single ops, version checks) before and after the fold.
    zk = _Started()
    store, region = zk.store, zk.region
    region.broadcast_rows = 250
    client, epoch_version = _cluster(zk, [f"t{i}" for i in range(10)])
    writer = zk.state_store(client)

    def versions() -> dict[tuple[str, int], int]:
        return {
            (r[TOPIC], r[PARTITION]): r[ZK_VERSION] for r in writer.read_states(spark).collect()
        }

    assert writer.write_states(_states(spark, 1000, 10), epoch_version).count() == 0
    base = region.base
    first = _states(spark, 100, 10, version=0)  # partitions 0-9 of every topic
    assert writer.write_states(first, epoch_version).count() == 0
    assert writer.write_states(_states(spark, 100, 10, version=1), epoch_version).count() == 0
    path = PartitionStateZNode.path("t3", 50)
    client.set(path, PartitionStateZNode.encode_fields(4, 7, [4], 1), version=0)
    expected = {(f"t{t}", p): 2 if p < 10 else 0 for t in range(10) for p in range(100)}
    expected[("t3", 50)] = 1
    assert versions() == expected
    assert region.base is base and region.delta is not None  # 201 rows superseded, no new base
    # A read of named keys meets the delta's rows in place of the base's (a key named twice,
    # or without a node, reads as in the whole table).
    picked = [("t3", 50), ("t3", 5), ("t3", 5), ("t4", 60), ("t9", 99), ("t9", 100)]
    selection = spark.createDataFrame(picked, f"{TOPIC} string, {PARTITION} int")
    read = writer.read_states(spark, selection).collect()
    assert sorted((r[TOPIC], r[PARTITION], r[ZK_VERSION]) for r in read) == sorted(
        (*k, expected[k]) for k in set(picked) if k in expected
    )
    stale = writer.write_states(first, epoch_version).select("error").distinct().collect()
    assert stale == [("BADVERSION",)]
    assert client.get(PartitionStateZNode.path("t3", 5))[1].version == 2

    second = _states(spark, 200, 10, version=0).where(F.col(PARTITION) >= 10)
    assert writer.write_states(second, epoch_version).count() == 0
    assert region.base is not base and region.delta is None  # 301 > 250: folded into a new base
    expected |= {(f"t{t}", p): 1 for t in range(10) for p in range(10, 20)}
    assert versions() == expected
    data, stat = client.get(path)
    assert (PartitionStateZNode.decode(data, path).leader, stat.version) == (4, 1)
    store.close()


def test_replaced_bases_deltas_and_merges_are_freed_at_once(spark) -> None:
    # Spark's cleaner would free them only after some JVM GC: at 1e6 every replaced base held
    # 350 MB. What stays cached is the base and the last write's merge result, which holds the
    # delta (a small write rewrites the delta in its merge, not in a pass of its own).
    def cached() -> set[int]:
        return {int(i.id()) for i in spark.sparkContext._jsc.sc().getRDDStorageInfo()}

    before = cached()
    zk = _Started()
    store = zk.store
    zk.region.broadcast_rows = 250
    client, epoch_version = _cluster(zk, [f"t{i}" for i in range(10)])
    writer = zk.state_store(client)
    assert writer.write_states(_states(spark, 1000, 10), epoch_version).count() == 0
    for version in range(4):  # small writes: three deltas, then a fold into a new base
        small = _states(spark, 100, 10, version=version)
        assert writer.write_states(small, epoch_version).count() == 0
        assert len(cached() - before) <= 2
    whole = _states(spark, 1000, 10, version=4).where(F.col(PARTITION) < 10)
    whole = whole.unionByName(_states(spark, 1000, 10, version=0).where(F.col(PARTITION) >= 10))
    assert writer.write_states(whole, epoch_version).count() == 0  # 1,000 rows: a full merge
    assert len(cached() - before) <= 1  # its merge result is the new base
    assert zk.region.delta is None
    store.close()
    assert cached() - before == set()


def test_a_prefetch_reads_the_partitions_of_many_topics_for_the_single_ops_after_it(
    spark,
) -> None:
    zk = _Started()
    client, epoch_version = _cluster(zk, ["t0", "t1", "t2", "t3"])
    store = zk.state_store(client)
    store.write_states(_states(spark, 40, 4), epoch_version)
    rewritten = store.read_states(spark).filter((F.col(TOPIC) == "t1") & (F.col(PARTITION) == 2))
    store.write_states(rewritten.withColumn(LEADER_EPOCH, F.lit(9)), epoch_version)  # a delta row

    store.prefetch([("t0", 1), ("t1", 2), ("t3", 0), ("t2", 99)])
    group = "single ops after a prefetch"
    spark.sparkContext.setJobGroup(group, group)
    try:
        states = {
            (t, p): client.get(PartitionStateZNode.path(t, p))
            for t in ("t0", "t1", "t2", "t3")
            for p in range(10)
        }
        assert client.exists(PartitionStateZNode.path("t2", 99)) is None
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    assert list(spark.sparkContext.statusTracker().getJobIdsForGroup(group)) == []
    decoded = {k: (PartitionStateZNode.decode(d, "s"), st.version) for k, (d, st) in states.items()}
    assert {k: (s.leader, s.leader_epoch, v) for k, (s, v) in decoded.items()} == {
        (f"t{i % 4}", i // 4): (
            i % 5,
            9 if (i % 4, i // 4) == (1, 2) else 0,
            int((i % 4, i // 4) == (1, 2)),
        )
        for i in range(40)
    }
