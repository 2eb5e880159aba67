"""Followers catching up through AlterIsr when the leaders' requests are Spark frames
(``AlterIsrFrame``): the same ISRs, writes and passes as the same requests as Python items.

A rack's recovery at 1e7 partitions sends millions of items; past
``EmulatedCluster.frame_catch_up_rows`` they stay a frame, so here that bound is 0 and the
result is compared with the items' run.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from controller.emulation.cluster import EmulatedCluster
from controller.events import controller_events as ev
from controller.partition_store import EmulatedEnsemble, bootstrap_cluster
from controller.records import ControllerSettings, EventRecord
from controller.zk.paths import PartitionStateZNode
from statemachines import schemas as s

pytestmark = pytest.mark.spark_path

BROKERS = (1, 2, 3, 4, 5)
PARTITIONS = 10


def _row(topic: str, p: int) -> tuple:
    replicas = [BROKERS[(p + k) % len(BROKERS)] for k in range(3)]
    return (topic, p, replicas, [], [], replicas, replicas[0], 0, 0, 1, "OnlinePartition")


def _start(spark: SparkSession, frame_rows: int) -> tuple[EmulatedCluster, list[EventRecord]]:
    records: list[EventRecord] = []
    settings = ControllerSettings(auto_leader_rebalance_enable=False)
    c = EmulatedCluster(spark, EmulatedEnsemble(), settings, on_event=records.append)
    c.frame_catch_up_rows = frame_rows
    rows = [_row(t, p) for t in ("t", "u") for p in range(PARTITIONS)]
    bootstrap_cluster(c.admin, {}, spark.createDataFrame(rows, s.PARTITIONS_SCHEMA), c.states)
    for b in BROKERS:
        c.add_broker(b)
        c.start_broker(b, start_controller=False)
    for b in BROKERS:
        c.brokers[b].controller.startup()
        c.drain()
    return c, records


def _states(c: EmulatedCluster) -> dict[str, tuple[int, int, list[int], int, int]]:
    out = {}
    for t in ("t", "u"):
        for p in range(PARTITIONS):
            data, stat = c.admin.get(PartitionStateZNode.path(t, p))
            st = PartitionStateZNode.decode(data, "")
            out[f"{t}-{p}"] = (st.leader, st.leader_epoch, list(st.isr), st.controller_epoch,
                               stat.version)  # fmt: skip
    return out


@pytest.fixture
def clusters(spark: SparkSession) -> Iterator[dict[str, tuple[EmulatedCluster, list]]]:
    runs = {"items": _start(spark, 1_000_000), "frames": _start(spark, 0)}
    yield runs
    for c, _ in runs.values():
        c.zookeeper.close()


def test_a_catch_up_sent_as_frames_rejoins_the_same_followers_in_the_same_passes(
    clusters: dict[str, tuple[EmulatedCluster, list[EventRecord]]],
) -> None:
    for c, _ in clusters.values():
        for b in (4, 5):  # two brokers fail: out of every ISR, leaders move
            c.crash(b)
        c.drain()
        for b in (4, 5):
            c.start_broker(b)
        c.drain()  # their replicas come back outside the ISR, then catch up
    (items, item_records), (frames, frame_records) = clusters["items"], clusters["frames"]
    assert _states(frames) == _states(items)
    # Every replica is back in its ISR (appended after the leaders that stayed).
    for name, (_leader, _epoch, isr, _cepoch, _version) in _states(frames).items():
        assert sorted(isr) == sorted(_row(*_key(name))[2]), name

    def passes(records: list[EventRecord]) -> list[tuple[int, int]]:
        return [
            (r.counters.get("coalesced_events", 0), r.counters.get("isr_updated", 0))
            for r in records
            if r.event == "AlterIsrReceived"
        ]

    # One pass for all leaders' requests, each lagging partition written once.
    assert passes(frame_records) == passes(item_records)
    lagging = [k for k in _states(items) if {4, 5} & set(_row(*_key(k))[2])]
    leaders = {_states(items)[k][0] for k in lagging}
    assert passes(frame_records)[-1] == (len(leaders) - 1, len(lagging))
    # The frames are freed once answered; what was committed from them reads on.
    for c, _ in clusters.values():
        c.crash(1)
        c.drain()
    assert _states(frames) == _states(items)


def _key(name: str) -> tuple[str, int]:
    topic, partition = name.split("-")
    return topic, int(partition)


def test_frame_requests_join_only_their_own_source_and_stale_senders_are_refused(
    clusters: dict[str, tuple[EmulatedCluster, list[EventRecord]]],
) -> None:
    c, records = clusters["frames"]
    active = c.active_controller()
    assert active is not None and active.ctx.partitions is not None
    spark = c.spark
    before = _states(c)
    # Leader of t-0 and t-1 shrinks their ISRs to itself; one request per leader.
    proposals = []
    for p in (0, 1):
        leader, epoch, _isr, _cepoch, version = before[f"t-{p}"]
        proposals.append(("t", p, leader, epoch, [leader], version))
    schema = (
        f"{s.TOPIC} string, {s.PARTITION} int, {s.LEADER} int, {s.LEADER_EPOCH} int, "
        f"{s.ISR} array<int>, {s.ZK_VERSION} int"
    )
    source = spark.createDataFrame(proposals, schema)
    other = spark.createDataFrame([("u", 0, 0, 0, [1], 0)], schema)
    replies: list[tuple[int, object]] = []

    def send(leader: int, frame: ev.AlterIsrFrame, epoch: int | None = None) -> None:
        request = ev.AlterIsrReceived(
            leader,
            c.brokers[leader].epoch if epoch is None else epoch,
            callback=lambda reply: replies.append((leader, reply)),
            frame=frame,
        )
        active.events.put(request)

    leaders = sorted({row[2] for row in proposals})
    mark = len(records)
    for leader in leaders:
        send(leader, ev.AlterIsrFrame(source, 1))
    send(leaders[0], ev.AlterIsrFrame(source, 1), epoch=-5)  # stale: refused, joins the pass
    send(1, ev.AlterIsrFrame(other, 1), epoch=-5)  # another source: a pass of its own
    active.events.run_until_idle()

    passes = [r for r in records[mark:] if r.event == "AlterIsrReceived"]
    assert [r.counters.get("coalesced_events", 0) for r in passes] == [len(leaders), 0]
    assert [r.counters.get("isr_updated", 0) for r in passes] == [2, 0]
    stale = [reply for leader, reply in replies if reply == "STALE_BROKER_EPOCH"]
    assert len(stale) == 2 and len(replies) == len(leaders) + 2
    after = _states(c)
    for p in (0, 1):
        leader, epoch, _isr, _cepoch, version = before[f"t-{p}"]
        assert after[f"t-{p}"] == (leader, epoch, [leader], active.ctx.epoch, version + 1)
    assert {k: v for k, v in after.items() if k not in ("t-0", "t-1")} == {
        k: v for k, v in before.items() if k not in ("t-0", "t-1")
    }
