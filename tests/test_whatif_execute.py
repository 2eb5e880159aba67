"""``kce whatif execute PLAN.json``: a plan replayed in waves under caps, in virtual time.

The end-to-end runs use ``execute-cluster.yaml`` (brokers 1-5; topic a's partitions 0, 1, 2 on
brokers 1 and 2) and ``execute-plan.json``, which moves each partition's replica from broker 2 to
broker 3, 4 and 5 in turn. ``execute-sizes.csv`` gives them 102.4, 51.2 and 25.6 MB (100,000,
50,000 and 25,000 records of 1 KiB). At 100 MB/s a new replica copies them in 1.024, 0.512 and
0.256 s; each completes when the replication model sees it catch up, within 1 ms after.

* ``--max-moves-per-broker 1``: broker 2 takes part in every move, so they run one by one:
  3 waves, 1.024 + 0.512 + 0.256 = 1.792 s.
* the default caps: one wave; the new replicas are on three brokers, each copying at its own
  100 MB/s, so the largest decides: 1.024 s.
* ``--max-moves 2``: a-0 and a-1 first; a-2 starts when a-1 completes (0.512 s) and ends at
  0.768 s, before a-0: 2 waves, 1.024 s.
* ``--throttle 10000000``: one wave, and the throttles the tool sets; broker 1 leads the three
  partitions and shares its leader rate between the three new replicas: every byte at 10 MB/s,
  179.2 MB in 17.92 s.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from spark_app.cli import main
from tests.chromium import chromium, needs_chromium
from whatif.execute import _emulated
from whatif.execute_cluster import bytes_per_record, records_of
from whatif.execute_waves import Caps, Move, WavePlanner

DATA = Path(__file__).parent / "data" / "whatif"
SOURCE = [
    "--scenario",
    str(DATA / "execute-cluster.yaml"),
    "--sizes",
    str(DATA / "execute-sizes.csv"),
]
SIZES = (102_400_000, 51_200_000, 25_600_000)
FETCH = 100e6  # bytes/s


def _copy_s(size: int) -> float:
    return size / FETCH


def _after(got: float, hand: float, waves: int = 1) -> bool:
    """``got`` is ``hand`` or up to 1 ms later per wave (a completion is seen on the ms after)."""
    return hand - 1e-9 <= got <= hand + 0.001 * waves + 1e-9


# -- the wave planner (no Spark) -----------------------------------------------------------------


def _plan_moves() -> list[Move]:
    return [Move("a", p, (1, 2), (1, 3 + p), size) for p, size in enumerate(SIZES)]


def test_one_move_per_broker_serialises_moves_sharing_a_broker() -> None:
    planner = WavePlanner(_plan_moves(), Caps(per_broker=1))
    waves = []
    while not planner.done:
        wave = planner.next_wave()
        waves.append([m.partition for m in wave])
        planner.finished([m.key for m in wave])
    assert waves == [[0], [1], [2]]


def test_a_freed_slot_takes_the_next_move_in_plan_order() -> None:
    planner = WavePlanner(_plan_moves(), Caps(total=2))
    assert [m.partition for m in planner.next_wave()] == [0, 1]
    assert planner.next_wave() == []
    planner.finished([("a", 1)])
    assert [m.partition for m in planner.next_wave()] == [2]
    assert planner.load() == (2, {2: 2, 3: 1, 5: 1}, 0)


def test_a_move_of_a_reorder_occupies_no_broker_but_moves_a_leader() -> None:
    reorder = Move("a", 0, (1, 2), (2, 1), 10)
    assert reorder.brokers == frozenset() and reorder.moves_leader and reorder.copied_bytes == 0
    planner = WavePlanner([reorder, Move("a", 1, (1, 2), (3, 2), 10)], Caps(leader=1))
    assert [m.partition for m in planner.next_wave()] == [0]


@st.composite
def _moves_and_caps(draw: Any) -> tuple[list[Move], Caps, list[int]]:
    brokers = list(range(6))
    moves = []
    for p in range(draw(st.integers(1, 25))):
        rf = draw(st.integers(1, 3))
        before = tuple(draw(st.permutations(brokers))[:rf])
        after = tuple(draw(st.permutations(brokers))[: draw(st.integers(1, 3))])
        moves.append(Move("t", p, before, after, draw(st.integers(0, 10**9))))
    caps = Caps(
        draw(st.integers(1, 4)), draw(st.none() | st.integers(1, 6)), draw(st.integers(1, 3))
    )
    # Which moves in flight complete at each step: indices into the in-flight list.
    finishing = draw(st.lists(st.integers(0, 100), min_size=1, max_size=200))
    return moves, caps, finishing


@settings(max_examples=200, deadline=None)
@given(_moves_and_caps())
def test_caps_hold_in_every_wave_and_every_move_runs_once(
    case: tuple[list[Move], Caps, list[int]],
) -> None:
    moves, caps, finishing = case
    planner = WavePlanner(moves, caps)
    started: Counter[tuple[str, int]] = Counter()
    picks = iter(finishing)
    for _ in range(10 * len(moves) + 10):
        if planner.done:
            break
        wave = planner.next_wave()
        started.update(m.key for m in wave)
        flight = list(planner.in_flight.values())
        assert flight, "nothing in flight while moves are pending: the planner stalled"
        per_broker = Counter(b for m in flight for b in m.brokers)
        assert max(per_broker.values(), default=0) <= caps.per_broker
        assert caps.total is None or len(flight) <= caps.total
        assert sum(m.moves_leader for m in flight) <= caps.leader
        assert sum(m.moves_leader for m in wave) <= caps.leader
        # One or more moves in flight complete (the executor waits for at least one).
        index = next(picks, 0) % len(flight)
        planner.finished([flight[index].key, *[m.key for m in flight[index + 1 :: 3]]])
    assert planner.done
    assert started == Counter(m.key for m in moves)


def test_record_sizes_keep_record_counts_small() -> None:
    assert bytes_per_record(102_400_000) == 1024
    assert bytes_per_record(1 << 30) == 1024
    assert bytes_per_record((1 << 30) + 1) == 2048
    assert bytes_per_record(1 << 40) == 1 << 20
    assert records_of(102_400_000, 1024) == 100_000
    assert records_of(1, 1024) == 1 and records_of(0, 1024) == 0


# -- end to end ----------------------------------------------------------------------------------


def _execute(tmp_path: Path, name: str, *options: str) -> tuple[int, Path]:
    out = tmp_path / name
    plan = str(DATA / "execute-plan.json")
    return main(["whatif", "execute", plan, *SOURCE, *options, "--out", str(out)]), out


@pytest.fixture(scope="module")
def serial(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Path:
    rc, out = _execute(tmp_path_factory.mktemp("execute"), "serial", "--max-moves-per-broker", "1")
    assert rc == 0
    return out


def test_one_move_per_broker_takes_the_sum_of_the_copy_times(serial: Path) -> None:
    summary = json.loads((serial / "summary.json").read_text())
    assert summary["question"] == "execute"
    assert (summary["partitions_moved"], summary["bytes_moved"]) == (3, sum(SIZES))
    assert (summary["waves"], summary["peak_concurrent_moves"]) == (3, 1)
    hand = sum(_copy_s(b) for b in SIZES)  # 1.792 s
    assert _after(summary["makespan_seconds"], hand, waves=3)
    assert summary["peak_under_replicated_partitions"] == 1
    assert summary["max_moves_per_broker"] == 1 and summary["max_leader_moves"] == 1000
    starts = [w["started_s"] for w in summary["per_wave"]]
    ends = [w["finished_s"] for w in summary["per_wave"]]
    assert starts[0] == 0.0 and starts[1:] == ends[:-1]  # each wave when the last completed
    assert [w["bytes"] for w in summary["per_wave"]] == list(SIZES)
    lines = [json.loads(x) for x in (serial / "timeline.jsonl").read_text().splitlines()]
    assert max(x["moves_in_flight"] for x in lines) == 1
    assert lines[-1] == {
        "t_s": summary["makespan_seconds"], "moves_in_flight": 0,
        "under_replicated_partitions": 0, "completed": 3,
    }  # fmt: skip


def test_lifting_the_caps_runs_one_wave_and_finishes_sooner(
    serial: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out = _execute(tmp_path, "open", "--json")
    assert rc == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary == json.loads((out / "summary.json").read_text())
    assert (summary["waves"], summary["peak_concurrent_moves"]) == (1, 3)
    assert _after(summary["makespan_seconds"], _copy_s(SIZES[0]))
    serial_makespan = json.loads((serial / "summary.json").read_text())["makespan_seconds"]
    assert summary["makespan_seconds"] < serial_makespan
    assert summary["peak_under_replicated_partitions"] == 3


def test_a_cluster_wide_cap_starts_a_move_when_one_completes(tmp_path: Path) -> None:
    rc, out = _execute(tmp_path, "two", "--max-moves", "2")
    assert rc == 0
    waves = json.loads((out / "summary.json").read_text())["per_wave"]
    assert [w["partitions"] for w in waves] == [2, 1]
    assert _after(waves[1]["started_s"], _copy_s(SIZES[1]))
    assert _after(waves[1]["finished_s"], _copy_s(SIZES[1]) + _copy_s(SIZES[2]), waves=2)
    assert _after(waves[0]["finished_s"], _copy_s(SIZES[0]))


def test_a_throttle_shares_the_leaders_rate_between_the_new_replicas(tmp_path: Path) -> None:
    # --throttle 10 MB/s, as the tool sets it: partitions 0, 1, 2 all lead on broker 1, whose
    # leader rate the three new replicas share (each new broker's own follower rate holds one).
    # 3.33 MB/s each until a-2's 25.6 MB are in at 7.68 s; 5 MB/s each until a-1's are at
    # 12.8 s; 10 MB/s for a-0's last 51.2 MB: 17.92 s, all bytes at the leader's rate.
    rc, out = _execute(tmp_path, "throttled", "--throttle", "10000000")
    assert rc == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["throttle_bytes_per_s"] == 10_000_000 and summary["fetch_mb_per_s"] == 100.0
    assert summary["throttled_brokers"] == [1, 2, 3, 4, 5]
    (wave,) = summary["per_wave"]
    assert (wave["leader_throttled_replicas"], wave["follower_throttled_replicas"]) == (6, 3)
    assert _after(summary["makespan_seconds"], sum(SIZES) / 10e6, waves=3)
    moves = pq.read_table(out / "moves.parquet").to_pylist()
    done = {x["partition"]: x["finished_s"] for x in moves}
    assert _after(done[2], 7.68) and _after(done[1], 12.8, waves=2)


def test_a_plan_kafka_refuses_exits_2_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = tmp_path / "plan.json"
    entries = [{"topic": "a", "partition": 0, "replicas": [1, 9]}]
    plan.write_text(json.dumps({"version": 1, "partitions": entries}))
    out = tmp_path / "out"
    rc = main(["whatif", "execute", str(plan), *SOURCE, "--out", str(out)])
    assert rc == 2
    err = capsys.readouterr().err
    assert "Kafka refuses this plan" in err
    assert "error: a-0 replicas: unknown broker id(s) 9" in err  # the audit's line
    assert not out.exists() and list(tmp_path.iterdir()) == [plan]


@needs_chromium
def test_the_report_shows_the_moves_over_time(serial: Path, tmp_path: Path) -> None:
    dom = chromium(serial / "report.html", tmp_path / "profile", "--dump-dom").stdout
    assert dom.count("<svg") == 1
    for heading in ("Summary", "Moves over virtual time", "Waves"):
        assert f"<h2>{heading}</h2>" in dom
    assert "makespan_seconds" in dom


# -- what is emulated ----------------------------------------------------------------------------


def test_only_moved_partitions_and_those_with_a_down_replica_are_emulated() -> None:
    # An in-sync partition with no produce load changes nothing (§ replication: no demand on a
    # broker's fetch throughput, never out of the ISR); one with a replica on a down broker is
    # under-replicated (Kafka's UnderReplicatedPartitions counts it), so it stays.
    assignments = {"a": [[1, 2], [1, 2], [2, 9], [1, 2], [2, 1]], "b": [[1, 2]]}
    moves = [Move("a", 1, (1, 2), (1, 3), 1), Move("a", 4, (2, 1), (1, 2), 1)]
    assert _emulated(assignments, moves, [1, 2, 3]) == {
        ("a", 1): ("a", 0), ("a", 2): ("a", 1), ("a", 4): ("a", 2),
    }  # fmt: skip


def test_a_plan_moving_some_partitions_reports_them_under_their_own_ids(tmp_path: Path) -> None:
    # a-0 stays on brokers 1, 2 and is left out; a-1 and a-2 share broker 2, so one at a time.
    plan = tmp_path / "plan.json"
    entries = [{"topic": "a", "partition": p, "replicas": [1, 3 + p]} for p in (1, 2)]
    plan.write_text(json.dumps({"version": 1, "partitions": entries}))
    out = tmp_path / "out"
    rc = main(["whatif", "execute", str(plan), *SOURCE, "--max-moves-per-broker", "1",
               "--throttle", "100000000", "--out", str(out)])  # fmt: skip
    assert rc == 0
    moves = {x["partition"]: x for x in pq.read_table(out / "moves.parquet").to_pylist()}
    assert sorted(moves) == [1, 2] and (moves[1]["wave"], moves[2]["wave"]) == (1, 2)
    assert _after(moves[1]["finished_s"], _copy_s(SIZES[1]))
    assert _after(moves[2]["finished_s"], _copy_s(SIZES[1]) + _copy_s(SIZES[2]), waves=2)
