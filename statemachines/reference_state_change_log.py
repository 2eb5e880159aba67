"""Kafka's state-change log lines of one event (spec §16.2), rendered by the plain-Python rules.

The twin of ``controller.commit.state_change_log``: one line per transition of a changed row's
trail (the controller's leader-epoch bumps are no transitions and are left out), a replica's
transition to OfflineReplica in a partition with leadership preceded by its ISR-removal line,
each as (topic, partition, broker, level, line, step, exception). Tests hold the Spark lines to
these.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

from statemachines import state_change_trail as t
from statemachines.compact_rows import ErrorEntry
from statemachines.partition_states import VALID_PREVIOUS_STATES as PARTITION_PREVIOUS
from statemachines.partition_states import PartitionState
from statemachines.reference_requests import ChangedRow, Leadership
from statemachines.replica_states import VALID_PREVIOUS_STATES as REPLICA_PREVIOUS
from statemachines.replica_states import ReplicaState
from statemachines.state_change_errors import (
    CONTROLLER,
    EPOCH,
    ERROR_STEP,
    ILLEGAL_STATE,
    LIVE,
    PARTITION,
    STATE_CHANGE_FAILED,
)
from statemachines.states import allowed_names

_P, _R = PartitionState, ReplicaState


class Line(NamedTuple):
    """One line of ``state.change.logger`` (the columns of ``state_change_log.LINE_COLUMNS``)."""

    topic: str
    partition: int
    broker: int | None
    level: str
    line: str
    step: int
    exception: str | None = None


def _leader_and_isr(now: Leadership) -> str:
    """Kafka 2.8 ``LeaderAndIsr.toString``."""
    isr = ", ".join(map(str, now.isr))
    return (
        f"LeaderAndIsr(leader={now.leader}, leaderEpoch={now.leader_epoch}, isr=List({isr}), "
        f"zkVersion={now.zk_version})"
    )


def _leadership_record(now: Leadership, epoch: int) -> str:
    """``LeaderIsrAndControllerEpoch.toString``; Kafka pairs it with its own epoch here."""
    isr = ",".join(map(str, now.isr))
    return (
        f"(Leader:{now.leader},ISR:{isr},LeaderEpoch:{now.leader_epoch},"
        f"ZkVersion:{now.zk_version},ControllerEpoch:{epoch})"
    )


def state_change_lines(
    rows: Iterable[ChangedRow],
    topics: Mapping[int, str],
    controller_id: int,
    epoch: int,
) -> list[Line]:
    """Every line of the event: ``rows`` are its changed rows, and ``topics`` names every topic
    index (an unnamed one renders as ``topic_index=<n>``)."""
    prefix = f"[Controller id={controller_id} epoch={epoch}] "
    out: list[Line] = []
    for row in rows:
        partition = row.partition
        topic = topics.get(row.topic_index, f"topic_index={row.topic_index}")
        tp = f"{topic}-{partition}"
        entries = [t.decode(e) for e in row.trail]
        transitions = [
            (unit, a, z) for unit, a, z in entries if unit is not None or z != t.LEADER_EPOCH_BUMP
        ]
        seen: dict[int | None, int] = {}
        for unit, start, end in transitions:
            nth = seen.get(unit, 0)
            seen[unit] = nth + 1
            if unit is None:
                to = _P(end).name
                if end == _P.NewPartition:
                    assigned = ",".join(str(r) for r, _ in row.replicas)
                    line = (
                        f"Changed partition {tp} state from {_P(start).name} to NewPartition "
                        f"with assigned replicas {assigned}"
                    )
                elif end == _P.OnlinePartition:
                    line = (
                        f"Changed partition {tp} from {_P(start).name} to OnlinePartition with "
                        f"state {_leader_and_isr(row.now)}"
                    )
                else:
                    line = f"Changed partition {tp} state from {_P(start).name} to {to}"
                level = "INFO" if end in (_P.NewPartition, _P.OnlinePartition) else "TRACE"
                out.append(Line(topic, partition, None, level, prefix + line, nth))
                continue
            if end == _R.OfflineReplica and row.now.exists:
                removal = (
                    f"Partition {tp} state changed to {_leadership_record(row.now, epoch)} after "
                    f"removing replica {unit} from the ISR as part of transition to OfflineReplica"
                )
                out.append(Line(topic, partition, unit, "INFO", prefix + removal, 2 * nth))
            line = (
                f"Changed state of replica {unit} for partition {tp} from {_R(start).name} "
                f"to {_R(end).name}"
            )
            out.append(Line(topic, partition, unit, "TRACE", prefix + line, 2 * nth + 1))
    return out


def error_lines(
    rows: Iterable[tuple[int, int, Sequence[ErrorEntry]]],
    topics: Mapping[int, str],
    controller_id: int,
    epoch: int,
    live: Iterable[int],
) -> list[Line]:
    """The ERROR line of every refused or failed transition: ``rows`` are (topic index,
    partition, the row's ``state_change_errors``); the twin of
    ``controller.commit.state_change_error_lines``."""
    me = f"Controller {controller_id} epoch {epoch}"
    alive = "Set(" + ", ".join(str(b) for b in sorted(live)) + ")"
    out: list[Line] = []
    for topic_index, partition, errors in rows:
        topic = topics.get(topic_index, f"topic_index={topic_index}")
        tp = f"{topic}-{partition}"
        for pos, (broker, current, target, failure) in enumerate(errors):
            if broker is None:
                start, end = _P(current).name, _P(target).name
                allowed = allowed_names(_P(target), PARTITION_PREVIOUS)
                line = f"{me} failed to change state for partition {tp} from {start} to {end}"
                who = f"Partition {tp} should be in one of "
            else:
                start, end = _R(current).name, _R(target).name
                allowed = allowed_names(_R(target), REPLICA_PREVIOUS)
                line = (
                    f"{me} initiated state change of replica {broker} for partition {tp} "
                    f"from {start} to {end} failed"
                )
                who = f"Replica [Topic={topic},Partition={partition},Replica={broker}] should be in the "
            if failure is None:
                exception = (
                    f"{ILLEGAL_STATE}: {who}{allowed} states before moving to {end} state. "
                    f"Instead it is in {start} state"
                )
            else:
                why = failure
                for placeholder, value in (
                    (PARTITION, tp), (CONTROLLER, str(controller_id)), (EPOCH, str(epoch)),
                    (LIVE, alive),
                ):  # fmt: skip
                    why = why.replace(placeholder, value)
                exception = f"{STATE_CHANGE_FAILED}: {why}"
            prefix = f"[Controller id={controller_id} epoch={epoch}] "
            out.append(
                Line(topic, partition, broker, "ERROR", prefix + line, ERROR_STEP + pos, exception)
            )
    return out
