"""Controller-to-broker requests read off a generation diff, per broker and kind (spec §15.1).

The events are built the way the controller builds them: broker failure and controlled shutdown
through the bulk state machines (whose outcomes carry the trail of transitions), creation,
reassignment and deletion as Kafka's end states of those flows with the transitions Kafka makes
on the way (spec §9.1, §10.5 example table, §9.5). Each event's diff is checkpointed once, as
the controller caches it after its commit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import IntEnum
from itertools import pairwise

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from controller.commit.diff import generation_diff
from controller.commit.requests import (
    BATCHES_SCHEMA,
    LEADER_AND_ISR,
    STOP_REPLICA,
    UPDATE_METADATA,
    request_batches,
    request_count,
    request_totals,
)
from statemachines import partition_states, replica_states
from statemachines import schemas as s
from statemachines.brokers import BrokerSet, ClusterView
from statemachines.election import (
    ControlledShutdownPartitionLeaderElectionStrategy,
    OfflinePartitionLeaderElectionStrategy,
)
from statemachines.partition_states import PartitionState
from statemachines.reference import Partition
from statemachines.replica_states import ReplicaState
from statemachines.state_change_trail import TRAIL, TRAIL_TYPE, encode
from tests.frames import compact_frame

_R = ReplicaState
_P = PartitionState
Transition = tuple[int | None, IntEnum, IntEnum]  # broker (None: the partition), from, to


def with_trails(
    spark: SparkSession, table: DataFrame, trails: Mapping[tuple[int, int], Sequence[Transition]]
) -> DataFrame:
    """``table`` with the ``state_change_trail`` of each (topic_index, partition) in ``trails``,
    as the state machines would have recorded those transitions."""
    rows = [(t, p, [encode(b, int(a), int(z)) for b, a, z in ts]) for (t, p), ts in trails.items()]
    schema = f"{s.TOPIC_INDEX} int, {s.PARTITION} int, {TRAIL} {TRAIL_TYPE.simpleString()}"
    return table.join(spark.createDataFrame(rows, schema), [s.TOPIC_INDEX, s.PARTITION], "left")


Batch = tuple[int, str, int, int, int, int]  # broker, kind, partitions, leader, follower, deletes


@dataclass(frozen=True)
class Event:
    """One controller event: its cached diff, the topic names and the brokers it could reach."""

    diff: DataFrame
    topics: DataFrame
    live_or_shutting_down: tuple[int, ...]
    deleting: tuple[int, ...] = ()


def event_of(
    spark: SparkSession,
    before: DataFrame | None,
    after: DataFrame,
    topics: dict[str, int],
    live: Sequence[int],
    deleting: Sequence[int] = (),
) -> Event:
    names = spark.createDataFrame([(i, t) for t, i in topics.items()], s.TOPICS_SCHEMA)
    diff = generation_diff(before, after).localCheckpoint()
    return Event(diff, names, tuple(live), tuple(deleting))


def three_partitions() -> list[Partition]:
    """Topic a on brokers 1..3, one partition led by each; a-2 has 2 out of its ISR."""
    return [
        Partition("a", 0, (1, 2, 3), (1, 2, 3), leader=1, controller_epoch=1),
        Partition("a", 1, (2, 3, 1), (2, 3, 1), leader=2, controller_epoch=1),
        Partition("a", 2, (3, 1, 2), (3, 1), leader=3, controller_epoch=1),
    ]


def broker_failure(spark: SparkSession) -> Event:
    """Broker 1 dies (§8.2): a-0 is elected offline (leader 2), then 1's replicas go Offline."""
    return failure_of(spark, three_partitions(), 1, [2, 3])


def failure_of(
    spark: SparkSession, partitions: list[Partition], dead: int, live: list[int]
) -> Event:
    """Broker ``dead`` dies (§8.2): what it led is elected offline, then its replicas go Offline."""
    before, topics = compact_frame(spark, partitions)
    view = ClusterView(BrokerSet.of(live), controller_epoch=1)
    led_by_dead = F.col(s.LEADER) == dead
    offline = partition_states.handle_state_changes(
        before, led_by_dead, PartitionState.OfflinePartition
    ).outcomes
    elected = partition_states.handle_state_changes(
        offline,
        led_by_dead,
        PartitionState.OnlinePartition,
        view,
        OfflinePartitionLeaderElectionStrategy(),
    ).outcomes
    after = replica_states.handle_state_changes(
        elected, BrokerSet.of([dead]), _R.OfflineReplica
    ).outcomes
    return event_of(spark, before, after, topics, live)


def controlled_shutdown(spark: SparkSession) -> Event:
    """Broker 1 shuts down (§8.4): a-0 (led by 1) moves to 2; 1's replicas of a-1, a-2 go Offline."""
    before, topics = compact_frame(spark, three_partitions())
    view = ClusterView(BrokerSet.of([2, 3]), BrokerSet.of([1]), controller_epoch=1)
    led = F.col(s.LEADER) == 1
    elected = partition_states.handle_state_changes(
        before,
        led,
        PartitionState.OnlinePartition,
        view,
        ControlledShutdownPartitionLeaderElectionStrategy(),
    ).outcomes
    after = replica_states.handle_state_changes(
        elected, lambda b, _k: (b == 1) & (F.col(s.PARTITION) != 0), _R.OfflineReplica
    ).outcomes
    return event_of(spark, before, after, topics, [1, 2, 3])


def topic_creation(spark: SparkSession) -> Event:
    """Topic t created with broker 3 dead (§9.1): t-2 has no live replica and stays New."""
    created = [
        Partition("t", 0, (1, 2), (1, 2), leader=1, controller_epoch=1),
        Partition("t", 1, (2, 3), (2,), leader=2, controller_epoch=1),
        Partition("t", 2, (3,), (), zk_version=-1, state=PartitionState.NewPartition),
    ]
    after, topics = compact_frame(spark, created)

    def created_on(replicas: Sequence[int], online: bool) -> list[Transition]:
        partition: list[Transition] = [(None, _P.NonExistentPartition, _P.NewPartition)]
        if online:
            partition.append((None, _P.NewPartition, _P.OnlinePartition))
        new = [(r, _R.NonExistentReplica, _R.NewReplica) for r in replicas]
        return [*partition, *new, *((r, _R.NewReplica, _R.OnlineReplica) for r in replicas)]

    t = topics["t"]
    trails = {(t, 0): created_on((1, 2), True), (t, 1): created_on((2, 3), True)}
    trails[(t, 2)] = created_on((3,), False)
    return event_of(spark, None, with_trails(spark, after, trails), topics, [1, 2])


def reassignment(spark: SparkSession) -> tuple[Event, Event]:
    """[1,2] → [2,3] (§10.1): phase A (RS [2,3,1], +3, −1, epoch bump, 3 New), then phase B
    once 3 joined the ISR (3 Online, reassign election of 2, 1 removed from the ISR and deleted).
    """
    start = Partition("r", 0, (1, 2), (1, 2), leader=1, controller_epoch=1)
    moving = replace(
        start,
        replicas=(2, 3, 1),
        adding_replicas=(3,),
        removing_replicas=(1,),
        leader_epoch=1,
        zk_version=1,
    )
    caught_up = replace(moving, isr=(1, 2, 3), zk_version=2)
    done = replace(
        start,
        replicas=(2, 3),
        isr=(2, 3),
        leader=2,
        leader_epoch=3,
        zk_version=4,
    )
    before, topics = compact_frame(spark, [start], w=3)
    r = (topics["r"], 0)
    phase_a, _ = compact_frame(spark, [moving], {("r", 0, 3): _R.NewReplica})
    a_trail = {r: [(3, _R.NonExistentReplica, _R.NewReplica)]}
    event_a = event_of(spark, before, with_trails(spark, phase_a, a_trail), topics, [1, 2, 3])
    caught, _ = compact_frame(spark, [caught_up], {("r", 0, 3): _R.NewReplica})
    phase_b, _ = compact_frame(spark, [done], w=3)
    chain = (
        _R.OnlineReplica,
        _R.OfflineReplica,
        _R.ReplicaDeletionStarted,
        _R.ReplicaDeletionSuccessful,
        _R.NonExistentReplica,
    )
    b_trail: list[Transition] = [
        (3, _R.NewReplica, _R.OnlineReplica),
        (None, _P.OnlinePartition, _P.OnlinePartition),
        *((1, a, b) for a, b in pairwise(chain)),
    ]
    event_b = event_of(spark, caught, with_trails(spark, phase_b, {r: b_trail}), topics, [1, 2, 3])
    return event_a, event_b


def deletion_start(spark: SparkSession) -> Event:
    """Topic d queued while broker 2 is dead (§9.5 onTopicDeletion): d-0 → Offline →
    NonExistent; replicas 1, 3 → Offline (ISR removals: epoch 3, leader -1) → DeletionStarted;
    replica 2 → DeletionIneligible.
    """
    queued = Partition(
        "d", 0, (1, 2, 3), (1, 3), leader=1, leader_epoch=1, zk_version=1, controller_epoch=1
    )
    started = replace(
        queued,
        isr=(3,),
        leader=-1,
        leader_epoch=3,
        zk_version=3,
        state=PartitionState.NonExistentPartition,
    )
    before, topics = compact_frame(spark, [queued], {("d", 0, 2): _R.OfflineReplica})
    after, _ = compact_frame(
        spark,
        [started],
        {
            ("d", 0, 1): _R.ReplicaDeletionStarted,
            ("d", 0, 2): _R.ReplicaDeletionIneligible,
            ("d", 0, 3): _R.ReplicaDeletionStarted,
        },
    )
    trail: list[Transition] = [
        (None, _P.OnlinePartition, _P.OfflinePartition),
        (None, _P.OfflinePartition, _P.NonExistentPartition),
        (2, _R.OfflineReplica, _R.ReplicaDeletionIneligible),
        (1, _R.OnlineReplica, _R.OfflineReplica),
        (3, _R.OnlineReplica, _R.OfflineReplica),
        (1, _R.OfflineReplica, _R.ReplicaDeletionStarted),
        (3, _R.OfflineReplica, _R.ReplicaDeletionStarted),
    ]
    after = with_trails(spark, after, {(topics["d"], 0): trail})
    return event_of(spark, before, after, topics, [1, 3], deleting=[topics["d"]])


def batches_of(event: Event) -> list[Batch]:
    batches = request_batches(event.diff, event.live_or_shutting_down, event.deleting)
    return sorted(tuple(r) for r in batches.collect())  # type: ignore[misc]


def _lair(b: int, n: int, leader: int) -> Batch:
    return (b, LEADER_AND_ISR, n, leader, n - leader, 0)


def _umr(b: int, n: int) -> Batch:
    return (b, UPDATE_METADATA, n, 0, 0, 0)


def _stop(b: int, n: int, deletes: int) -> Batch:
    return (b, STOP_REPLICA, n, 0, 0, deletes)


def test_broker_failure_leader_and_isr_to_survivors_and_nothing_to_the_dead_broker(
    spark: SparkSession,
) -> None:
    # a-0 (elected) and the ISR removals of a-1, a-2 all go to 2 and 3; broker 1 is dead, so its
    # StopReplica(delete=false) is dropped at send.
    assert batches_of(broker_failure(spark)) == sorted(
        [_lair(2, 3, leader=2), _lair(3, 3, leader=1), _umr(2, 3), _umr(3, 3)]
    )


def test_controlled_shutdown_stops_followed_replicas_and_moves_leadership(
    spark: SparkSession,
) -> None:
    # The shutting-down broker 1 gets LeaderAndIsr only for a-0 (the election includes it) and
    # StopReplica(delete=false) for the partitions it followed; the ISR removals go to the rest.
    event = controlled_shutdown(spark)
    batches = request_batches(event.diff, event.live_or_shutting_down, event.deleting)
    assert sorted(tuple(r) for r in batches.collect()) == sorted(
        [
            _lair(1, 1, leader=0),
            _lair(2, 3, leader=2),
            _lair(3, 3, leader=1),
            _stop(1, 2, deletes=0),
            _umr(1, 3),
            _umr(2, 3),
            _umr(3, 3),
        ]
    )
    assert request_totals(batches) == {
        "LeaderAndIsr": 3,
        "LeaderAndIsr_partitions": 7,
        "UpdateMetadata": 3,
        "UpdateMetadata_partitions": 9,
        "StopReplica": 1,
        "StopReplica_partitions": 2,
        "StopReplica_deletes": 0,
    }


def test_topic_creation_sends_leader_and_isr_to_the_isr_only(spark: SparkSession) -> None:
    # Init sends to the ISR (live replicas): the dead broker 3 is not reached, and t-2 (no live
    # replica, still New) has no leadership, so it is in no request.
    assert batches_of(topic_creation(spark)) == sorted(
        [_lair(1, 1, leader=1), _lair(2, 2, leader=1), _umr(1, 2), _umr(2, 2)]
    )


def test_reassignment_adds_then_removes_a_replica(spark: SparkSession) -> None:
    phase_a, phase_b = reassignment(spark)
    # A1 epoch bump to RS = [2,3,1] (3 also via A2's NewReplica), UpdateMetadata to all.
    assert batches_of(phase_a) == sorted(
        [
            _lair(1, 1, leader=1),
            _lair(2, 1, leader=0),
            _lair(3, 1, leader=0),
            *(_umr(b, 1) for b in (1, 2, 3)),
        ]
    )
    # B3/B4 announce to TRS [2,3]; the removed replica 1 gets one StopReplica, delete=true
    # (Kafka's delete=false then delete=true, merged).
    assert batches_of(phase_b) == sorted(
        [
            _lair(2, 1, leader=1),
            _lair(3, 1, leader=0),
            _stop(1, 1, deletes=1),
            *(_umr(b, 1) for b in (1, 2, 3)),
        ]
    )


def test_deletion_start_stops_and_deletes_live_replicas(spark: SparkSession) -> None:
    # No LeaderAndIsr for a queued topic; its UpdateMetadata goes to the live brokers;
    # StopReplica(delete=true) to the live replicas; the dead broker 2 gets nothing.
    assert batches_of(deletion_start(spark)) == sorted(
        [_stop(1, 1, deletes=1), _stop(3, 1, deletes=1), _umr(1, 1), _umr(3, 1)]
    )


def test_returning_replica_gets_leader_and_isr_alone(spark: SparkSession) -> None:
    # §8.1 step 4: broker 1 comes back; its replicas go Offline → Online with no leadership
    # change, so only broker 1 gets LeaderAndIsr (a-0 it leads, a-1 it follows).
    parts = [
        Partition("a", 0, (1, 2), (1, 2), leader=1, controller_epoch=1),
        Partition("a", 1, (2, 1), (2,), leader=2, controller_epoch=1),
    ]
    offline = {("a", 0, 1): _R.OfflineReplica, ("a", 1, 1): _R.OfflineReplica}
    before, topics = compact_frame(spark, parts, offline)
    after, _ = compact_frame(spark, parts)
    back = [(1, _R.OfflineReplica, _R.OnlineReplica)]
    after = with_trails(spark, after, {(topics["a"], 0): back, (topics["a"], 1): back})
    event = event_of(spark, before, after, topics, [1, 2])
    assert batches_of(event) == sorted([_lair(1, 2, leader=1), _umr(1, 2), _umr(2, 2)])


def test_leadership_change_of_a_queued_topic_is_not_announced(spark: SparkSession) -> None:
    before_p = Partition("q", 0, (1, 2), (1, 2), leader=1, controller_epoch=1)
    after_p = replace(before_p, isr=(1,), leader_epoch=1, zk_version=1)
    before, topics = compact_frame(spark, [before_p])
    after, _ = compact_frame(spark, [after_p])
    queued = event_of(spark, before, after, topics, [1, 2], deleting=[topics["q"]])
    assert batches_of(queued) == []
    plain = replace(queued, deleting=())
    assert batches_of(plain) == sorted(
        [_lair(1, 1, leader=1), _lair(2, 1, leader=0), _umr(1, 1), _umr(2, 1)]
    )


def test_no_changes_no_requests_and_zero_totals(spark: SparkSession) -> None:
    same, topics = compact_frame(spark, three_partitions())
    event = event_of(spark, same, same, topics, [1, 2, 3])
    batches = request_batches(event.diff, event.live_or_shutting_down)
    assert [f.name for f in batches.schema.fields] == BATCHES_SCHEMA.names
    assert request_totals(batches) == {
        "LeaderAndIsr": 0,
        "LeaderAndIsr_partitions": 0,
        "UpdateMetadata": 0,
        "UpdateMetadata_partitions": 0,
        "StopReplica": 0,
        "StopReplica_partitions": 0,
        "StopReplica_deletes": 0,
    }


def test_input_must_be_a_diff(spark: SparkSession) -> None:
    table, _ = compact_frame(spark, three_partitions())
    with pytest.raises(s.SchemaMismatchError):
        request_batches(table, [1])


def test_request_count_aggregates_the_totals_of_the_batches(spark: SparkSession) -> None:
    # The controller counts requests in its pass over the diff; the counts must be the batches'.
    same, topics = compact_frame(spark, three_partitions())
    events = [
        broker_failure(spark),
        controlled_shutdown(spark),
        topic_creation(spark),
        *reassignment(spark),
        deletion_start(spark),
        event_of(spark, same, same, topics, [1, 2, 3]),
    ]
    events.append(replace(events[0], live_or_shutting_down=()))  # every request dropped
    for event in events:
        args = (event.diff, event.live_or_shutting_down, event.deleting)
        count = request_count(*args)
        row = count.frame.agg(F.count(F.lit(1)).alias("_n"), *count.aggregates).first()
        assert row is not None
        assert count.totals(row) == request_totals(request_batches(*args)), event


def test_one_request_plan_serves_every_live_set(spark: SparkSession) -> None:
    # The brokers are a staged column, so an event with other live brokers reuses the plan's
    # Columns (building them costs thousands of JVM calls); ids beyond the word range cannot.
    event = broker_failure(spark)
    first = request_count(event.diff, [1, 2, 3], event.deleting)
    assert request_count(event.diff, [1, 2], event.deleting).aggregates is first.aggregates
    far = [1, 2, 3, 2_000_000]
    beyond = request_count(event.diff, far, event.deleting)
    assert beyond.aggregates is not first.aggregates
    row = beyond.frame.agg(*beyond.aggregates).first()
    assert row is not None
    assert beyond.totals(row) == request_totals(request_batches(event.diff, far, event.deleting))
    assert beyond.totals(row)[UPDATE_METADATA] == 4


@pytest.mark.parametrize(
    "brokers",
    [(1, 70, 200, 130), (1, 70, 2000, 130)],
    ids=["live ids in three 64-bit words", "ids spread over more words than are counted as bits"],
)
def test_request_count_counts_each_recipient_once_wherever_its_id_falls(
    spark: SparkSession, brokers: tuple[int, int, int, int]
) -> None:
    # Recipients are counted as bits of 64-bit words (or as a set when the ids spread wide): a
    # broker reached by several partitions counts once, brokers in other words each once.
    dead, *live = brokers
    partitions = [
        Partition("a", i, reps, reps, leader=reps[0], controller_epoch=1)
        for i, reps in enumerate([(dead, 70, 200), (dead, 130, live[1]), (70, dead, 130)])
    ]
    event = failure_of(spark, partitions, dead, live)
    count = request_count(event.diff, live)
    row = count.frame.agg(*count.aggregates).first()
    assert row is not None
    expected = request_totals(request_batches(event.diff, live))
    assert count.totals(row) == expected
    assert expected[LEADER_AND_ISR] == 3  # every survivor, once
    assert expected[STOP_REPLICA] == 0  # the dead broker is not reachable
