"""Controller-to-broker requests read off a generation diff, per batch, broker and kind (spec §15.1).

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
from statemachines.state_change_trail import LEADER_EPOCH_BUMP, TRAIL, TRAIL_TYPE, encode
from tests.frames import compact_frame

_R = ReplicaState
_P = PartitionState
# broker (None: the partition), from, to, the request batch of the state-machine call
Transition = tuple[int | None, IntEnum, IntEnum | int, int]


def with_trails(
    spark: SparkSession, table: DataFrame, trails: Mapping[tuple[int, int], Sequence[Transition]]
) -> DataFrame:
    """``table`` with the ``state_change_trail`` of each (topic_index, partition) in ``trails``,
    as the state machines would have recorded those transitions."""
    rows = [
        (t, p, [encode(b, int(a), int(z), n) for b, a, z, n in ts]) for (t, p), ts in trails.items()
    ]
    schema = f"{s.TOPIC_INDEX} int, {s.PARTITION} int, {TRAIL} {TRAIL_TYPE.simpleString()}"
    return table.join(spark.createDataFrame(rows, schema), [s.TOPIC_INDEX, s.PARTITION], "left")


# batch, broker, kind, partitions, leader, follower, deletes
Batch = tuple[int, int, str, int, int, int, int]


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
        """onNewPartitionCreation's four calls: partitions New, replicas New, partitions
        Online, replicas Online."""
        new = [(r, _R.NonExistentReplica, _R.NewReplica, 2) for r in replicas]
        elected: list[Transition] = [(None, _P.NewPartition, _P.OnlinePartition, 3)]
        return [
            (None, _P.NonExistentPartition, _P.NewPartition, 1),
            *new,
            *(elected if online else []),
            *((r, _R.NewReplica, _R.OnlineReplica, 4) for r in replicas),
        ]

    t = topics["t"]
    trails = {(t, 0): created_on((1, 2), True), (t, 1): created_on((2, 3), True)}
    trails[(t, 2)] = created_on((3,), False)
    return event_of(spark, None, with_trails(spark, after, trails), topics, [1, 2])


def reassignment(spark: SparkSession) -> tuple[Event, Event]:
    """[1,2] → [2,3] (§10.1): phase A (RS [2,3,1], +3, −1, epoch bump, 3 New), then phase B
    once 3 joined the ISR (3 Online, reassign election of 2, 1 removed from the ISR and deleted),
    each step a batch of its own.
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
    a_trail: dict[tuple[int, int], list[Transition]] = {
        r: [
            (None, _P.OnlinePartition, LEADER_EPOCH_BUMP, 1),
            (3, _R.NonExistentReplica, _R.NewReplica, 2),
        ]
    }
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
        (3, _R.NewReplica, _R.OnlineReplica, 1),
        (None, _P.OnlinePartition, _P.OnlinePartition, 2),
        *((1, a, b, n) for n, (a, b) in enumerate(pairwise(chain), start=3)),
    ]
    event_b = event_of(spark, caught, with_trails(spark, phase_b, {r: b_trail}), topics, [1, 2, 3])
    return event_a, event_b


def deletion_start(spark: SparkSession) -> Event:
    """Topic d queued while broker 2 is dead (§9.5 onTopicDeletion): d-0 → Offline →
    NonExistent; replica 2 → DeletionIneligible; replicas 1, 3 → Offline (ISR removals: epoch 3,
    leader -1) → DeletionStarted; one call each.
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
        (None, _P.OnlinePartition, _P.OfflinePartition, 1),
        (None, _P.OfflinePartition, _P.NonExistentPartition, 2),
        (2, _R.OfflineReplica, _R.ReplicaDeletionIneligible, 3),
        (1, _R.OnlineReplica, _R.OfflineReplica, 4),
        (3, _R.OnlineReplica, _R.OfflineReplica, 4),
        (1, _R.OfflineReplica, _R.ReplicaDeletionStarted, 5),
        (3, _R.OfflineReplica, _R.ReplicaDeletionStarted, 5),
    ]
    after = with_trails(spark, after, {(topics["d"], 0): trail})
    return event_of(spark, before, after, topics, [1, 3], deleting=[topics["d"]])


def batches_of(event: Event) -> list[Batch]:
    batches = request_batches(event.diff, event.live_or_shutting_down, event.deleting)
    return sorted(tuple(r) for r in batches.collect())  # type: ignore[misc]


def _lair(batch: int, b: int, n: int, leader: int) -> Batch:
    return (batch, b, LEADER_AND_ISR, n, leader, n - leader, 0)


def _umr(batch: int, brokers: Sequence[int], n: int) -> list[Batch]:
    return [(batch, b, UPDATE_METADATA, n, 0, 0, 0) for b in brokers]


def _stop(batch: int, b: int, n: int, deletes: int) -> Batch:
    return (batch, b, STOP_REPLICA, n, 0, 0, deletes)


def test_broker_failure_announces_the_election_then_the_isr_removals(
    spark: SparkSession,
) -> None:
    # Appendix B.2: the offline election of a-0 is one batch (LeaderAndIsr to 2 and 3), the ISR
    # removals of broker 1's replicas the next (a-0 again, though 1 left its ISR at the
    # election, with a-1 and a-2); UpdateMetadata with each. Broker 1 is dead, so its
    # StopReplica(delete=false) is dropped at send.
    assert batches_of(broker_failure(spark)) == sorted(
        [
            _lair(2, 2, 1, leader=1),
            _lair(2, 3, 1, leader=0),
            *_umr(2, (2, 3), 1),
            _lair(3, 2, 3, leader=2),
            _lair(3, 3, 3, leader=1),
            *_umr(3, (2, 3), 3),
        ]
    )


def test_controlled_shutdown_moves_leadership_then_stops_followed_replicas(
    spark: SparkSession,
) -> None:
    # §8.4: the election of what broker 1 led is one batch (the shutting-down broker is among
    # its recipients); StopReplica(delete=false) for what it followed and the ISR removals'
    # LeaderAndIsr to the rest are the next.
    event = controlled_shutdown(spark)
    batches = request_batches(event.diff, event.live_or_shutting_down, event.deleting)
    assert sorted(tuple(r) for r in batches.collect()) == sorted(
        [
            _lair(1, 1, 1, leader=0),
            _lair(1, 2, 1, leader=1),
            _lair(1, 3, 1, leader=0),
            *_umr(1, (1, 2, 3), 1),
            _stop(2, 1, 2, deletes=0),
            _lair(2, 2, 2, leader=1),
            _lair(2, 3, 2, leader=1),
            *_umr(2, (1, 2, 3), 2),
        ]
    )
    assert request_totals(batches) == {
        "LeaderAndIsr": 5,
        "LeaderAndIsr_partitions": 7,
        "UpdateMetadata": 6,
        "UpdateMetadata_partitions": 9,
        "StopReplica": 1,
        "StopReplica_partitions": 2,
        "StopReplica_deletes": 0,
    }


def test_topic_creation_sends_leader_and_isr_to_the_isr_only(spark: SparkSession) -> None:
    # Init (the third call) sends to the ISR (live replicas): the dead broker 3 is not reached,
    # and t-2 (no live replica, still New) has no leadership, so it is in no request.
    assert batches_of(topic_creation(spark)) == sorted(
        [_lair(3, 1, 1, leader=1), _lair(3, 2, 2, leader=1), *_umr(3, (1, 2), 2)]
    )


def test_reassignment_adds_then_removes_a_replica(spark: SparkSession) -> None:
    phase_a, phase_b = reassignment(spark)
    # A1's epoch bump to RS = [2,3,1], then A2's NewReplica to 3; UpdateMetadata with each.
    assert batches_of(phase_a) == sorted(
        [
            _lair(1, 1, 1, leader=1),
            _lair(1, 2, 1, leader=0),
            _lair(1, 3, 1, leader=0),
            *_umr(1, (1, 2, 3), 1),
            _lair(2, 3, 1, leader=0),
            *_umr(2, (1, 2, 3), 1),
        ]
    )
    # B3's election announces to TRS [2,3]; B4 stops the removed replica 1 (delete=false) and
    # announces its ISR removal to TRS; B5 deletes it (delete=true).
    assert batches_of(phase_b) == sorted(
        [
            _lair(2, 2, 1, leader=1),
            _lair(2, 3, 1, leader=0),
            *_umr(2, (1, 2, 3), 1),
            _stop(3, 1, 1, deletes=0),
            _lair(3, 2, 1, leader=1),
            _lair(3, 3, 1, leader=0),
            *_umr(3, (1, 2, 3), 1),
            _stop(4, 1, 1, deletes=1),
        ]
    )


def test_deletion_start_stops_then_deletes_live_replicas(spark: SparkSession) -> None:
    # No LeaderAndIsr for a queued topic; StopReplica(delete=false) with the ISR removals, then
    # StopReplica(delete=true) with the deletion's UpdateMetadata, to the live brokers; the
    # dead broker 2 gets nothing.
    assert batches_of(deletion_start(spark)) == sorted(
        [
            _stop(4, 1, 1, deletes=0),
            _stop(4, 3, 1, deletes=0),
            _stop(5, 1, 1, deletes=1),
            _stop(5, 3, 1, deletes=1),
            *_umr(5, (1, 3), 1),
        ]
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
    back: list[Transition] = [(1, _R.OfflineReplica, _R.OnlineReplica, 1)]
    after = with_trails(spark, after, {(topics["a"], 0): back, (topics["a"], 1): back})
    event = event_of(spark, before, after, topics, [1, 2])
    assert batches_of(event) == sorted([_lair(1, 1, 2, leader=1), *_umr(1, (1, 2), 2)])


def test_an_isr_the_leader_changed_is_announced_by_update_metadata_alone(
    spark: SparkSession,
) -> None:
    # A leadership record no state machine changed is the leader's ISR change (AlterIsr, or
    # one read back after a notification, §12.4-12.5): UpdateMetadata only, in the
    # controller's own batch, and nothing at all for a topic queued for deletion.
    before_p = Partition("q", 0, (1, 2), (1, 2), leader=1, controller_epoch=1)
    after_p = replace(before_p, isr=(1,), zk_version=1)
    before, topics = compact_frame(spark, [before_p])
    after, _ = compact_frame(spark, [after_p])
    queued = event_of(spark, before, after, topics, [1, 2], deleting=[topics["q"]])
    assert batches_of(queued) == []
    plain = replace(queued, deleting=())
    assert batches_of(plain) == sorted(_umr(0, (1, 2), 1))


def test_two_batches_of_one_kind_are_two_requests(spark: SparkSession) -> None:
    # The same recipients in two calls: two LeaderAndIsr to each broker, where one call would
    # send one with both partitions.
    parts = [
        Partition("a", p, (1, 2), (1, 2), leader=1, leader_epoch=1, controller_epoch=1)
        for p in range(2)
    ]
    before, topics = compact_frame(spark, parts)
    elected = [replace(p, leader_epoch=2, zk_version=1) for p in parts]
    after, _ = compact_frame(spark, elected)
    a = topics["a"]

    def electing(batches: Sequence[int]) -> Event:
        trails = {
            (a, p): [(None, _P.OnlinePartition, _P.OnlinePartition, n)]
            for p, n in enumerate(batches)
        }
        return event_of(spark, before, with_trails(spark, after, trails), topics, [1, 2])

    one, two = (request_batches(electing(b).diff, [1, 2]) for b in [(1, 1), (1, 2)])
    assert request_totals(one)[LEADER_AND_ISR] == 2
    assert request_totals(one)[f"{LEADER_AND_ISR}_partitions"] == 4
    assert request_totals(two)[LEADER_AND_ISR] == 4
    assert request_totals(two)[f"{LEADER_AND_ISR}_partitions"] == 4
    assert request_totals(two)[UPDATE_METADATA] == 4


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


def test_request_count_reads_ids_beyond_the_word_range(spark: SparkSession) -> None:
    # Live ids up to a few thousand enter the plan as a column of 64-bit words; beyond that,
    # as a literal set.
    event = broker_failure(spark)
    far = [1, 2, 3, 2_000_000]
    beyond = request_count(event.diff, far, event.deleting)
    row = beyond.aggregated().first()
    assert row is not None
    assert beyond.totals(row) == request_totals(request_batches(event.diff, far, event.deleting))
    assert beyond.totals(row)[UPDATE_METADATA] == 8  # two batches, four brokers


@pytest.mark.parametrize(
    "brokers",
    [(1, 70, 200, 130), (1, 70, 2000, 130)],
    ids=["live ids in three 64-bit words", "ids spread over more words than are counted as bits"],
)
def test_request_count_counts_each_recipient_once_wherever_its_id_falls(
    spark: SparkSession, brokers: tuple[int, int, int, int]
) -> None:
    # Live brokers are 64-bit words (or a set when the ids spread wide): a broker reached by
    # several partitions of a batch counts once, brokers in other words each once.
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
    assert expected[LEADER_AND_ISR] == 6  # every survivor, once per batch
    assert expected[STOP_REPLICA] == 0  # the dead broker is not reachable
