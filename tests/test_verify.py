"""``kce verify`` without real Kafka: the normalised ZooKeeper snapshot both sides are read
into, its differences, the refusals of bad input (exit 2 before Spark or any JVM starts), and
the short CI set's coverage of every event type a real cluster plays."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from controller.zk import InMemoryZooKeeper, ZkClient
from spark_app.cli import EXIT_INVALID, main
from spark_app.scenario import EVENT_TYPES
from verify.real_events import UNPLAYABLE
from verify.snapshot import Difference, differences, take

VERIFY = Path(__file__).resolve().parent / "data" / "verify"


def _tree(topic_id: str = "AAAAAAAAAAAAAAAAAAAAAA") -> ZkClient:
    """A client of a tree as Kafka 2.8 writes it: one topic (version 3, with its id), an
    internal topic, a pending preferred election, a topic marked for deletion."""
    c = InMemoryZooKeeper().client()
    c.start()
    c.create("/controller_epoch", b"3", makepath=True)
    for b in (2, 1):
        c.create(f"/brokers/ids/{b}", b"{}", makepath=True)
    topic = {"version": 3, "partitions": {"1": [2, 1], "0": [1, 2]}, "topic_id": topic_id,
             "adding_replicas": {"0": [2]}, "removing_replicas": {}}  # fmt: skip
    c.create("/brokers/topics/orders", json.dumps(topic).encode(), makepath=True)
    for p, leader in ((0, 1), (1, 2)):
        state = {"controller_epoch": 3, "leader": leader, "version": 1, "leader_epoch": 4,
                 "isr": [leader]}  # fmt: skip
        c.create(f"/brokers/topics/orders/partitions/{p}/state", json.dumps(state).encode(),
                 makepath=True)  # fmt: skip
    c.create("/brokers/topics/__consumer_offsets", b'{"version":2,"partitions":{"0":[1]}}')
    c.create("/admin/preferred_replica_election", b'{"version":1,"partitions":[]}', makepath=True)
    c.create("/admin/delete_topics/orders", b"", makepath=True)
    return c


def test_a_snapshot_holds_what_the_controller_decides() -> None:
    """The keys compared (issue #56 item 3): partition state fields (Kafka's
    ``TopicPartitionStateZNode``), assignments with adding/removing replicas
    (``TopicZNode`` v3), ``/controller_epoch``, live brokers, pending admin znodes, topics marked
    for deletion; internal topics are the brokers' own and are left out."""
    snap, ids = take(_tree(), {})
    assert snap["/controller_epoch"] == 3
    assert snap["/brokers/ids"] == [1, 2]
    assert snap["/brokers/topics/orders#partitions"] == {"0": [1, 2], "1": [2, 1]}
    assert snap["/brokers/topics/orders#adding_replicas"] == {"0": [2]}
    assert snap["/brokers/topics/orders/partitions/1/state#leader"] == 2
    assert snap["/brokers/topics/orders/partitions/1/state#isr"] == [2]
    assert snap["/brokers/topics/orders/partitions/0/state#leader_epoch"] == 4
    assert snap["/brokers/topics/orders/partitions/0/state#controller_epoch"] == 3
    assert snap["/admin/preferred_replica_election"] == {"version": 1, "partitions": []}
    assert snap["/admin/reassign_partitions"] is None
    assert snap["/admin/delete_topics"] == ["orders"]
    assert not any("__consumer_offsets" in k for k in snap)
    assert snap["/brokers/topics/orders#topic_id"] == "new"
    assert ids == {"orders": "AAAAAAAAAAAAAAAAAAAAAA"}


def test_topic_ids_are_compared_by_their_stability_not_their_value() -> None:
    """Kafka draws a topic id at random (``Uuid.randomUuid`` in ``AdminZkClient``): two
    clusters never share one, so a snapshot says whether it is new, kept or changed."""
    _, first = take(_tree(), {})
    kept, _ = take(_tree(), first)
    changed, _ = take(_tree("BBBBBBBBBBBBBBBBBBBBBB"), first)
    assert kept["/brokers/topics/orders#topic_id"] == "kept"
    assert changed["/brokers/topics/orders#topic_id"] == "changed"
    other, _ = take(_tree("CCCCCCCCCCCCCCCCCCCCCC"), {})
    assert differences(take(_tree(), {})[0], other) == []


def test_differences_name_the_key_and_both_values() -> None:
    kafka, _ = take(_tree(), {})
    kce = {**kafka, "/brokers/topics/orders/partitions/0/state#leader": 2}
    del kce["/admin/delete_topics"]
    assert differences(kafka, kce) == [
        Difference("/admin/delete_topics", ["orders"], None),
        Difference("/brokers/topics/orders/partitions/0/state#leader", 1, 2),
    ]


CORE = yaml.safe_load((VERIFY / "core.yaml").read_text(encoding="utf-8"))


def _scenario(tmp_path: Path, **changes: object) -> Path:
    scenario = {**CORE, **changes}
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"events": [{"at": "1s", "type": "isr_change", "topic": "orders", "partition": 0,
                      "isr": [1]}]},
         "events[0] (isr_change at 1000 ms): an ISR change is the partition leader's own"),
        ({"events": [{"at": "1s", "type": "power_loss", "brokers": [1]}]},
         "events[0] (power_loss at 1000 ms): a replication event"),
        ({"kafka_version": "2.7"}, "kafka_version: '2.7', but --kafka 2.8.2 is Kafka 2.8"),
        ({"cluster": {**CORE["cluster"], "state": {"partitions": [
            {"topic": "orders", "partition": 0, "leader": 2, "isr": [2], "leader_epoch": 1,
             "zk_version": 1, "controller_epoch": 1}]}}},
         "cluster.state: a real cluster's partition states come from its controller"),
    ],
    ids=["isr-change", "replication-event", "version-mismatch", "explicit-state"],
)  # fmt: skip
def test_what_a_real_cluster_cannot_play_is_refused_before_anything_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], changes: dict[str, object], message: str
) -> None:
    """Exit 2, one message naming the event (or field) and why, no traceback, nothing written."""
    out = tmp_path / "out"
    assert main(["verify", str(_scenario(tmp_path, **changes)), "--out", str(out)]) == EXIT_INVALID
    err = capsys.readouterr().err
    assert err.startswith(f"kce: {tmp_path / 'scenario.yaml'} cannot be verified on real Kafka:")
    assert message in err
    assert "Traceback" not in err
    assert not out.exists()


def test_a_release_not_installed_says_how_to_install_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "empty-cache"))
    assert main(["verify", str(VERIFY / "core.yaml"), "--out", str(tmp_path / "o")]) == EXIT_INVALID
    err = capsys.readouterr().err
    assert "Apache Kafka 2.8.2 is not installed in" in err
    assert "run: bash .ci/setup --kafka" in err


def test_the_short_set_plays_every_event_type_a_real_cluster_can() -> None:
    """Issue #56 item 7: CI's verify set has every playable event type at least once, and
    both the API and the ZooKeeper path of reassignments and elections."""
    played: set[tuple[str, str | None]] = set()
    for path in sorted(VERIFY.glob("*.yaml")):
        for event in yaml.safe_load(path.read_text(encoding="utf-8"))["events"]:
            played.add((event["type"], event.get("via")))
    playable = set(EVENT_TYPES) - set(UNPLAYABLE)
    assert {t for t, _ in played} == playable
    for kind in ("reassign_partitions", "elect_leaders"):
        assert {(kind, "api"), (kind, "zk")} <= played
