"""The reference controller's event handlers, in Kafka's terms (plain Python, no Spark)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from statemachines.election_kinds import ElectionTrigger, ElectionType
from statemachines.partition_states import PartitionState
from statemachines.reference import Partition
from statemachines.reference_brokers import BrokerEventOutcome
from statemachines.reference_controller import ReferenceController
from statemachines.replica_states import ReplicaState

ONLINE = PartitionState.OnlinePartition
OFFLINE = PartitionState.OfflinePartition
ADMIN = ElectionTrigger.AdminClientTriggered
T0 = ("t", 0)


def _partition(
    replicas: tuple[int, ...], isr: tuple[int, ...], leader: int, topic: str = "t", pid: int = 0
) -> Partition:
    return Partition(topic, pid, replicas, isr, leader, 0, 0, 1, ONLINE)


def _controller(
    *partitions: Partition, live: tuple[int, ...] = (1, 2, 3, 4), unclean: tuple[str, ...] = ()
) -> ReferenceController:
    return ReferenceController.after_failover(
        partitions, live, controller_epoch=2, unclean_by_topic={t: True for t in unclean}
    )


def _leadership(p: Partition) -> tuple[int, tuple[int, ...], int, int, PartitionState]:
    return (p.leader, p.isr, p.leader_epoch, p.zk_version, p.state)


# ---- failover ------------------------------------------------------------------------------------


def test_failover_with_every_broker_live_marks_replicas_online_and_changes_no_partition() -> None:
    p = _partition((1, 2, 3), (1, 2), 2)
    rc = _controller(p)
    assert rc.partitions == {T0: p}
    assert rc.states == {("t", 0, r): ReplicaState.OnlineReplica for r in (1, 2, 3)}


def test_failover_with_a_broker_down_takes_its_replicas_offline_and_elects_its_partitions() -> None:
    """§5.4, §6.4: broker 3 is not registered. Its replica of t-0 (out of the ISR) goes
    ReplicaDeletionIneligible then OfflineReplica without a write; t-1, which it led, starts
    OfflinePartition, loses 3 from its ISR (leader -1, one write) and elects 1 (a second)."""
    t0 = _partition((1, 2, 3), (1, 2), 1)
    t1 = _partition((3, 1), (3, 1), 3, pid=1)
    rc = _controller(t0, t1, live=(1, 2))
    assert rc.partitions[T0] == t0
    assert _leadership(rc.partitions[("t", 1)]) == (1, (1,), 2, 2, ONLINE)
    assert rc.states[("t", 0, 3)] == rc.states[("t", 1, 3)] == ReplicaState.OfflineReplica
    assert rc.states[("t", 1, 1)] == ReplicaState.OnlineReplica


# ---- broker failure and startup (§8.1–§8.3) ----------------------------------------------------


def test_leader_failure_moves_leadership_to_the_next_live_isr_replica() -> None:
    rc = _controller(_partition((1, 2, 3), (1, 2, 3), 1))
    out = rc.on_broker_failure({1})
    p = rc.partitions[T0]
    assert _leadership(p) == (2, (2, 3), 1, 1, ONLINE)
    assert p.controller_epoch == 2
    assert out.elected == {T0} and not out.unclean
    assert rc.states[("t", 0, 1)] == ReplicaState.OfflineReplica
    assert rc.live == {2, 3, 4}


def test_follower_failure_removes_it_from_the_isr_and_keeps_the_leader() -> None:
    rc = _controller(_partition((1, 2, 3), (1, 2, 3), 1))
    rc.on_broker_failure({3})
    assert _leadership(rc.partitions[T0]) == (1, (1, 2), 1, 1, ONLINE)


def test_last_isr_replica_failure_leaves_the_partition_offline_without_unclean_election() -> None:
    rc = _controller(_partition((1, 2), (1,), 1))
    out = rc.on_broker_failure({1})
    # The election fails; the dead leader's OfflineReplica transition clears the leader but
    # keeps the last ISR member.
    assert out.failed == {T0}
    assert _leadership(rc.partitions[T0]) == (-1, (1,), 1, 1, OFFLINE)


def test_last_isr_replica_failure_elects_an_out_of_sync_replica_when_the_topic_allows() -> None:
    rc = _controller(_partition((1, 2), (1,), 1), unclean=("t",))
    out = rc.on_broker_failure({1})
    assert out.unclean == {T0}
    assert _leadership(rc.partitions[T0]) == (2, (2,), 1, 1, ONLINE)


def test_startup_of_the_last_isr_replica_brings_its_offline_partition_back() -> None:
    rc = _controller(_partition((1, 2), (1,), 1))
    rc.on_broker_failure({1})
    out = rc.on_broker_startup({1})
    assert out.elected == {T0}
    assert _leadership(rc.partitions[T0]) == (1, (1,), 2, 2, ONLINE)
    assert rc.states[("t", 0, 1)] == ReplicaState.OnlineReplica


def test_bounce_of_the_leader_is_a_failure_then_a_startup() -> None:
    rc = _controller(_partition((1, 2, 3), (1, 2, 3), 1))
    rc.process_broker_change(bounced={1})
    # Leadership moved while broker 1 was out; it comes back as an out-of-sync follower.
    assert _leadership(rc.partitions[T0]) == (2, (2, 3), 1, 1, ONLINE)
    assert rc.live == {1, 2, 3, 4}
    assert rc.states[("t", 0, 1)] == ReplicaState.OnlineReplica


# ---- controlled shutdown (§8.4) ----------------------------------------------------------------


class _Counting(ReferenceController):
    attempts = 0

    def on_controlled_shutdown(self, broker: int) -> BrokerEventOutcome:
        self.attempts += 1
        return super().on_controlled_shutdown(broker)


def _counting(*partitions: Partition) -> _Counting:
    rc = _controller(*partitions)
    return _Counting(rc.partitions, rc.states, rc.live, rc.controller_epoch, rc.unclean_by_topic)


def test_controlled_shutdown_moves_leadership_in_one_request_then_the_broker_exits() -> None:
    rc = _counting(_partition((1, 2, 3), (1, 2, 3), 1))
    remaining = rc.shut_down_broker(1, max_retries=3)
    assert remaining == set() and rc.attempts == 1
    assert _leadership(rc.partitions[T0]) == (2, (2, 3), 1, 1, ONLINE)
    assert 1 not in rc.live and not rc.shutting_down


def test_controlled_shutdown_retries_while_the_broker_still_leads_then_exits() -> None:
    # Broker 2 is out of sync: no other ISR replica can take over, so every attempt fails.
    rc = _counting(_partition((1, 2), (1,), 1))
    remaining = rc.shut_down_broker(1, max_retries=3)
    assert remaining == {T0} and rc.attempts == 3
    assert _leadership(rc.partitions[T0]) == (-1, (1,), 1, 1, OFFLINE)


def test_controlled_shutdown_of_a_follower_takes_it_out_of_the_isr() -> None:
    rc = _controller(_partition((1, 2, 3), (1, 2, 3), 1))
    out = rc.on_controlled_shutdown(3)
    assert out.remaining == set()
    assert _leadership(rc.partitions[T0]) == (1, (1, 2), 1, 1, ONLINE)
    assert rc.states[("t", 0, 3)] == ReplicaState.OfflineReplica
    assert rc.shutting_down == {3} and rc.view().live == frozenset({1, 2, 4})


def test_controlled_shutdown_leaves_single_replica_partitions_alone() -> None:
    rc = _controller(_partition((1,), (1,), 1))
    out = rc.on_controlled_shutdown(1)
    assert out.remaining == set()
    assert _leadership(rc.partitions[T0]) == (1, (1,), 0, 0, ONLINE)


def test_controlled_shutdown_of_a_broker_that_is_not_live_is_refused() -> None:
    rc = _controller(_partition((1, 2), (1, 2), 1))
    rc.on_broker_failure({2})
    with pytest.raises(ValueError, match="BROKER_NOT_AVAILABLE"):
        rc.on_controlled_shutdown(2)


# ---- elections (§11) --------------------------------------------------------------------------


def test_preferred_election_moves_leadership_back_to_the_first_replica() -> None:
    rc = _controller(
        _partition((1, 2, 3), (1, 2, 3), 2),
        _partition((1, 2), (1, 2), 1, pid=1),
        _partition((3, 1), (1,), 1, pid=2),
    )
    out = rc.on_replica_election(None, ElectionType.PREFERRED, ADMIN)
    assert out.errors == {
        T0: "NONE",
        ("t", 1): "ELECTION_NOT_NEEDED",
        ("t", 2): "PREFERRED_LEADER_NOT_AVAILABLE",
    }
    assert _leadership(rc.partitions[T0]) == (1, (1, 2, 3), 1, 1, ONLINE)
    assert rc.partitions[("t", 2)].leader == 1


def test_election_for_an_unknown_partition_answers_unknown_topic_or_partition() -> None:
    rc = _controller(_partition((1, 2), (1, 2), 1))
    out = rc.on_replica_election([("x", 0)], ElectionType.PREFERRED, ADMIN)
    assert out.errors == {("x", 0): "UNKNOWN_TOPIC_OR_PARTITION"}


def test_admin_unclean_election_elects_an_out_of_sync_replica_of_an_offline_partition() -> None:
    rc = _controller(_partition((1, 2), (1,), 1))
    rc.on_broker_failure({1})
    out = rc.on_replica_election([T0], ElectionType.UNCLEAN, ADMIN)
    assert out.errors == {T0: "NONE"} and out.unclean == {T0}
    assert _leadership(rc.partitions[T0]) == (2, (2,), 2, 2, ONLINE)


def test_auto_rebalance_elects_the_preferred_leader_of_an_imbalanced_broker() -> None:
    rc = _controller(_partition((1, 2), (1, 2), 2), _partition((2, 1), (1, 2), 2, pid=1))
    out = rc.check_and_trigger_auto_leader_rebalance(threshold_percentage=10)
    assert out.elected == {T0}
    assert rc.partitions[T0].leader == 1 and rc.partitions[("t", 1)].leader == 2


def test_topic_unclean_enable_elects_its_offline_partitions() -> None:
    rc = _controller(_partition((1, 2), (1,), 1), _partition((1, 2), (1,), 1, topic="u"))
    rc.on_broker_failure({1})
    out = rc.on_topic_unclean_leader_election_enable("t")
    assert out.unclean == {T0}
    assert rc.partitions[T0].leader == 2
    assert rc.partitions[("u", 0)].state == OFFLINE  # another topic: not triggered


def test_broker_level_unclean_enable_elects_every_offline_partition() -> None:
    rc = _controller(_partition((1, 2), (1,), 1), _partition((1, 2), (1,), 1, topic="u"))
    rc.on_broker_failure({1})
    out = rc.on_unclean_leader_election_enable({"t": True, "u": True})
    assert out.unclean == {T0, ("u", 0)}


# ---- topics (§9.1, §9.2) -----------------------------------------------------------------------


def test_new_topic_partitions_are_led_by_their_first_live_replica() -> None:
    rc = _controller(_partition((1, 2), (1, 2), 1))
    rc.on_broker_failure({3})
    out = rc.on_new_topics({"n": {0: [3, 2, 1], 1: [4, 1]}, "t": {0: [1, 2]}})
    assert out.initialized == {("n", 0), ("n", 1)}
    assert _leadership(rc.partitions[("n", 0)]) == (2, (2, 1), 0, 0, ONLINE)
    assert _leadership(rc.partitions[("n", 1)]) == (4, (4, 1), 0, 0, ONLINE)
    assert rc.states[("n", 0, 2)] == ReplicaState.OnlineReplica


def test_new_partition_without_a_live_replica_stays_new_until_one_starts() -> None:
    rc = _controller(_partition((1, 2), (1, 2), 1))
    rc.on_broker_failure({3})
    out = rc.on_new_topics({"n": {0: [3]}})
    assert out.init_failed == {("n", 0)}
    assert rc.partitions[("n", 0)].state == PartitionState.NewPartition
    rc.on_broker_startup({3})
    assert _leadership(rc.partitions[("n", 0)]) == (3, (3,), 0, 0, ONLINE)


def test_partition_addition_creates_only_the_added_partitions() -> None:
    p = _partition((1, 2), (1, 2), 1)
    rc = _controller(p)
    out = rc.on_partition_modifications("t", {0: [2, 3], 1: [3, 4]})
    assert out is not None and out.initialized == {("t", 1)}
    assert rc.partitions[T0] == p
    assert rc.partitions[("t", 1)].leader == 3


# ---- topic deletion (§9.5) ---------------------------------------------------------------------


def test_topic_deletion_sends_stop_replica_and_completes_on_successful_responses() -> None:
    rc = _controller(_partition((1, 2), (1, 2), 1), _partition((2, 3), (2, 3), 2, topic="k"))
    assert rc.on_topic_deletion({"t", "gone"}) == {"gone"}
    assert rc.states[("t", 0, 1)] == ReplicaState.ReplicaDeletionStarted
    assert rc.stop_replica_deletes == {1: 1, 2: 1}
    assert rc.on_partition_modifications("t", {0: [1, 2], 1: [1, 2]}) is None
    rc.on_stop_replica_response(1)
    assert "t" in rc.topics
    rc.on_stop_replica_response(2)
    assert rc.topics == {"k"} and rc.deleted_topics == {"t"}
    assert not any(k[0] == "t" for k in rc.states)
    assert rc.topics_to_be_deleted == set()


def test_topic_deletion_waits_for_a_dead_replica_and_resumes_when_it_starts() -> None:
    rc = _controller(_partition((1, 2), (1, 2), 1))
    rc.on_broker_failure({2})
    rc.on_topic_deletion({"t"})
    assert rc.states[("t", 0, 2)] == ReplicaState.ReplicaDeletionIneligible
    assert rc.topics_ineligible_for_deletion == {"t"}
    rc.on_stop_replica_response(1)
    assert rc.states[("t", 0, 1)] == ReplicaState.ReplicaDeletionSuccessful
    rc.on_broker_startup({2})
    assert rc.states[("t", 0, 2)] == ReplicaState.ReplicaDeletionStarted
    rc.on_stop_replica_response(2)
    assert rc.deleted_topics == {"t"} and not rc.partitions


def test_replicas_of_a_topic_being_deleted_fail_deletion_when_their_broker_dies() -> None:
    rc = _controller(_partition((1, 2), (1, 2), 1))
    rc.on_topic_deletion({"t"})
    before = rc.partitions[T0]
    rc.on_broker_failure({2})
    assert rc.states[("t", 0, 2)] == ReplicaState.ReplicaDeletionIneligible
    assert rc.partitions[T0] == before  # no election or ISR change for a topic being deleted


# ---- reassignment (§10) ------------------------------------------------------------------------


def test_reassignment_starts_then_completes_when_the_targets_join_the_isr() -> None:
    rc = _controller(_partition((1, 2, 3), (1, 2, 3), 1))
    out = rc.on_partition_reassignment({T0: [2, 3, 4]})
    assert out.errors == {T0: "NONE"} and out.started == {T0}
    assert rc.list_partition_reassignments() == {T0: ((2, 3, 4, 1), (4,), (1,))}
    assert rc.states[("t", 0, 4)] == ReplicaState.NewReplica
    # Broker 4 catches up (an ISR change the caller records), then the controller checks.
    rc.partitions[T0] = replace(rc.partitions[T0], isr=(1, 2, 3, 4))
    done = rc.maybe_complete_reassignment()
    assert done.completed == {T0} and done.leader_moved == {T0}
    p = rc.partitions[T0]
    assert (p.replicas, p.leader, p.adding_replicas, p.removing_replicas) == ((2, 3, 4), 2, (), ())
    assert 1 not in p.isr and ("t", 0, 1) not in rc.states
    assert rc.list_partition_reassignments() == {}


def test_reassignment_validation_answers_per_partition() -> None:
    rc = _controller(_partition((1, 2), (1, 2), 1), live=(1, 2, 3))
    out = rc.on_partition_reassignment({T0: [1, 9], ("t", 5): [1, 2], ("x", 0): None})
    assert out.errors == {
        T0: "INVALID_REPLICA_ASSIGNMENT",  # broker 9 is not live
        ("t", 5): "UNKNOWN_TOPIC_OR_PARTITION",
        ("x", 0): "NO_REASSIGNMENT_IN_PROGRESS",
    }
    assert rc.partitions[T0].replicas == (1, 2)


def test_cancelling_a_reassignment_restores_the_origin_replicas() -> None:
    rc = _controller(_partition((1, 2), (1, 2), 1))
    rc.on_partition_reassignment({T0: [3, 4]})
    out = rc.on_partition_reassignment({T0: None})
    assert out.errors == {T0: "NONE"} and out.completed == {T0}
    p = rc.partitions[T0]
    assert (p.replicas, p.adding_replicas, p.removing_replicas, p.leader) == ((1, 2), (), (), 1)
    assert {k for k in rc.states if k[:2] == T0} == {("t", 0, 1), ("t", 0, 2)}


def test_reassignment_to_an_offline_broker_runs_again_when_it_starts() -> None:
    """§8.1 step 6 (Kafka's testPartitionReassignmentResumesAfterReplicaComesOnline): phase A
    leaves the partition at epoch 1 while broker 2 is down; its startup runs phase A again
    (epoch 2); completion then elects 2 (epoch 3) and drops 1 from the ISR (epoch 4)."""
    rc = _controller(_partition((1,), (1,), 1), live=(1,))
    rc.on_partition_reassignment({T0: [2]}, api=False)
    assert rc.partitions[T0].leader_epoch == 1
    rc.on_broker_startup({2})
    assert rc.partitions[T0].leader_epoch == 2
    rc.partitions[T0] = replace(rc.partitions[T0], isr=(1, 2))  # 2 caught up
    rc.maybe_complete_reassignment()
    p = rc.partitions[T0]
    assert (p.replicas, p.leader, p.isr, p.leader_epoch) == ((2,), 2, (2,), 4)


# ---- ISR changes (§12.4, §12.5) and log directory failures (§8.6) -----------------------------


def test_alter_isr_answers_per_partition_and_writes_only_accepted_changes() -> None:
    rc = _controller(_partition((1, 2, 3), (1, 2, 3), 1), _partition((2, 3), (2, 3), 2, pid=1))
    errors = rc.on_alter_isr(
        1,
        {
            T0: (0, (1, 2), 0),  # shrink: written
            ("t", 1): (0, (2,), 0),  # broker 1 is not its leader but the epoch and version hold
            ("t", 9): (0, (1,), 0),
        },
    )
    assert errors == {T0: "NONE", ("t", 1): "NONE", ("t", 9): "UNKNOWN_TOPIC_OR_PARTITION"}
    assert _leadership(rc.partitions[T0]) == (1, (1, 2), 0, 1, ONLINE)
    # Written by this controller (epoch 2) over a state an earlier one (epoch 1) left.
    assert rc.partitions[T0].controller_epoch == 2
    assert rc.on_alter_isr(1, {T0: (0, (1, 2), 1)}) == {T0: "NONE"}  # unchanged: no write
    assert rc.partitions[T0].zk_version == 1
    assert rc.on_alter_isr(1, {T0: (0, (1, 2, 3), 0)}) == {T0: "INVALID_UPDATE_VERSION"}
    rc.partitions[T0] = replace(rc.partitions[T0], leader_epoch=4)
    assert rc.on_alter_isr(1, {T0: (3, (1,), 1)}) == {T0: "FENCED_LEADER_EPOCH"}


def test_isr_change_notification_reloads_the_cached_leadership() -> None:
    rc = _controller(_partition((1, 2, 3), (1, 2, 3), 1))
    states = {T0: (1, 0, (1, 3), 2, 1), ("x", 0): (1, 0, (1,), 2, 1)}
    assert rc.update_leader_and_isr_cache(states) == {T0}  # an unknown partition is skipped
    assert _leadership(rc.partitions[T0]) == (1, (1, 3), 0, 1, ONLINE)


def test_log_dir_failure_fails_the_replicas_until_the_broker_registers_again() -> None:
    rc = _controller(_partition((1, 2, 3), (1, 2, 3), 1))
    out = rc.on_log_dir_failure({1})
    assert out.elected == {T0} and 1 in rc.live
    assert _leadership(rc.partitions[T0]) == (2, (2, 3), 1, 1, ONLINE)
    assert rc.states[("t", 0, 1)] == ReplicaState.OfflineReplica
    assert rc.on_log_dir_failure({1}).elected == set()  # already failed: nothing more
    rc.on_broker_bounce({1})  # registers again: the directory is back
    assert rc.states[("t", 0, 1)] == ReplicaState.OnlineReplica
    assert rc.partitions[T0].offline_dir_replicas == frozenset()
