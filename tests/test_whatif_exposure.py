"""``kce whatif exposure``: copyset data-loss exposure and co-location failure domains — exact
figures on hand-worked placements, Kafka's ``--generate`` placement against the plain-Python
``assignReplicasToBrokers``, the DataFrame label propagation against a union-find, and the
command end to end."""

from __future__ import annotations

import itertools
import json
import random
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from spark_app.cli import main
from statemachines.assignment import assign_replicas_to_brokers
from whatif.colocation import (
    FailureDomains,
    colocation_edges,
    failure_domains,
    graphframes_available,
    label_propagation_components,
)
from whatif.exposure import (
    PlacementExposure,
    answer,
    distinct_replica_sets,
    kafka_generate_placement,
)
from whatif.options import ExposureOptions
from whatif.sources import load_cluster

DATA = Path(__file__).parent / "data" / "whatif"
COPYSETS = DATA / "exposure-copysets.txt"
RACKS = "id,rack\n1,a\n2,a\n3,b\n4,c\n"


def union_find(brokers: list[int], sets: list[tuple[int, ...]]) -> dict[int, int]:
    """Broker → smallest broker of its component, the plain way."""
    parent = {b: b for b in brokers}

    def root(b: int) -> int:
        while parent[b] != b:
            b = parent[b]
        return b

    for members in sets:
        for a, b in itertools.pairwise(members):
            ra, rb = root(a), root(b)
            parent[max(ra, rb)] = min(ra, rb)
    return {b: root(b) for b in brokers}


def exposure_of(
    sets: dict[tuple[int, ...], int], brokers: tuple[int, ...], racks: dict[int, str | None]
) -> PlacementExposure:
    component = union_find(list(brokers), list(sets))
    touched = {b: len({x for s in sets if b in s for x in s} - {b}) for b in brokers}
    return PlacementExposure(brokers, sets, racks, FailureDomains(component, touched, "test"))


# -- the figures (no Spark) ----------------------------------------------------------------------


def test_p_loss_counts_the_k_sets_equal_to_a_replica_set() -> None:
    # 4 brokers, RF 2, three partitions on {1,2}, {1,2}, {3,4}: two distinct sets. Of the
    # C(4,2) = 6 pairs that can fail together, {1,2} and {3,4} lose a partition: 2/6.
    sets = {(1, 2): 2, (3, 4): 1}
    got = exposure_of(sets, (1, 2, 3, 4), {1: "a", 2: "a", 3: "b", 4: "c"})
    assert got.loss_sets == {2: 2}
    assert got.p_loss == {2: Fraction(2, 6)}
    summary = got.summary()
    assert summary["distinct_replica_sets"] == 2
    assert summary["components"] == 2 and summary["max_brokers_touched"] == 1


def test_p_loss_per_replication_factor_and_rackless_brokers() -> None:
    # 5 brokers: an RF-1 partition on 1 (any single failure of 1 loses it: 1/5) and RF-3 sets
    # {1,2,3} and {2,3,4}: 2 of the C(5,3) = 10 triples. The RF-1 set is counted under K=1 only.
    # Broker 5 holds nothing: its own component, touching no one. No broker has a rack.
    sets = {(1,): 4, (1, 2, 3): 1, (2, 3, 4): 3}
    got = exposure_of(sets, (1, 2, 3, 4, 5), dict.fromkeys(range(1, 6)))
    assert got.p_loss == {1: Fraction(1, 5), 3: Fraction(2, 10)}
    assert got.domains.components == [[1, 2, 3, 4], [5]]
    assert got.domains.touched == {1: 2, 2: 3, 3: 3, 4: 2, 5: 0}
    assert got.summary()["p_loss"] == {"1": 0.2, "3": 0.2}


# -- Spark ---------------------------------------------------------------------------------------


def test_exposure_of_the_hand_worked_cluster(spark: SparkSession, tmp_path: Path) -> None:
    racks = tmp_path / "racks.csv"
    racks.write_text(RACKS, encoding="utf-8")
    cluster = load_cluster(spark, describe=COPYSETS, rack_map=racks)
    got = answer(spark, cluster, ExposureOptions(seed=7))
    summary = got.summary
    # As in the first test: {1,2} twice and {3,4}; 1-2 and 3-4 are the only links.
    assert summary["distinct_replica_sets"] == 2
    assert summary["p_loss"] == {"2": pytest.approx(2 / 6)}
    assert summary["loss_sets"] == {"2": 2}
    assert summary["rack_loss"] == {"a": 2, "b": 0, "c": 0}
    assert summary["components"] == 2
    assert summary["max_brokers_touched"] == 1
    assert summary["brokers_touched"] == {"1": 1, "2": 1, "3": 1, "4": 1}
    assert summary["failure_domains_engine"] == "dataframe"

    # --generate: Kafka's rack-aware assignReplicasToBrokers of 3 partitions, RF 2, on the
    # 4 racked brokers, the draws from Random(7); the figures follow from its sets.
    rng = random.Random(7)
    placed = assign_replicas_to_brokers([(1, "a"), (2, "a"), (3, "b"), (4, "c")], 3, 2, rng=rng)
    got_placed = {
        r["partition"]: list(r["replicas"])
        for r in kafka_generate_placement(spark, cluster, 7).collect()
    }
    assert got_placed == placed
    sets = {tuple(sorted(r)) for r in placed.values()}
    expected = exposure_of({s: 1 for s in sets}, (1, 2, 3, 4), {1: "a", 2: "a", 3: "b", 4: "c"})
    generated = summary["kafka_generate"]
    assert generated["distinct_replica_sets"] == len(sets)
    assert generated["p_loss"] == {"2": pytest.approx(len(sets) / 6)}
    assert generated["components"] == len(expected.domains.components)
    assert generated["max_brokers_touched"] == expected.domains.max_touched
    # Rack-aware placement never puts both replicas in one rack while another rack is free.
    assert generated["rack_loss"] == {"a": 0, "b": 0, "c": 0}
    assert len(got.lines) <= 10


def test_kafka_generate_uses_one_rng_over_topics_in_name_order(spark: SparkSession) -> None:
    # roll-racks.txt: orders (6 partitions, RF 3) and logs (2, RF 2) on brokers 1-6, no racks:
    # logs takes the first two draws, orders the next two.
    cluster = load_cluster(spark, describe=DATA / "roll-racks.txt")
    rng = random.Random(3)
    logs = assign_replicas_to_brokers(list(range(1, 7)), 2, 2, rng=rng)
    orders = assign_replicas_to_brokers(list(range(1, 7)), 6, 3, rng=rng)
    got = {
        (r["topic"], r["partition"]): list(r["replicas"])
        for r in kafka_generate_placement(spark, cluster, 3).collect()
    }
    assert got == {
        **{("logs", p): r for p, r in logs.items()},
        **{("orders", p): r for p, r in orders.items()},
    }


@st.composite
def placements(draw: st.DrawFn) -> tuple[list[int], list[list[int]]]:
    n = draw(st.integers(2, 9))
    brokers = list(range(1, n + 1))
    sets = draw(
        st.lists(
            st.lists(st.sampled_from(brokers), min_size=1, max_size=3, unique=True), max_size=8
        )
    )
    return brokers, sets


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(placements())
def test_label_propagation_matches_union_find(
    spark: SparkSession, case: tuple[list[int], list[list[int]]]
) -> None:
    brokers, sets = case
    frame = spark.createDataFrame([(s,) for s in sets], "replicas array<int>")
    component, degree = label_propagation_components(spark, brokers, colocation_edges(frame))
    assert component == union_find(brokers, [tuple(s) for s in sets])
    expected = {b: len({x for s in sets if b in s for x in s} - {b}) for b in brokers}
    assert {b: degree.get(b, 0) for b in brokers} == expected


def test_distinct_replica_sets_ignore_replica_order(spark: SparkSession) -> None:
    cluster = load_cluster(spark, describe=COPYSETS)
    got = {
        tuple(r["replicas"]): r["partitions"]
        for r in distinct_replica_sets(cluster.partitions).collect()
    }
    assert got == {(1, 2): 2, (3, 4): 1}


def test_graphframes_gives_the_dataframe_answer(spark: SparkSession) -> None:
    if not graphframes_available(spark):
        pytest.skip(
            "GraphFrames is not installed with its jar on the Spark classpath here (optional "
            "extra 'graph' plus the graphframes jar); the DataFrame implementation is the one "
            "in use and tested above"
        )
    cluster = load_cluster(spark, describe=DATA / "roll-racks.txt")
    sets = cluster.partitions.select("replicas")
    frames = failure_domains(spark, sets, cluster.brokers, use_graphframes=False)
    graph = failure_domains(spark, sets, cluster.brokers, use_graphframes=True)
    assert (graph.component, graph.touched) == (frames.component, frames.touched)


# -- end to end ----------------------------------------------------------------------------------


def test_kce_whatif_exposure_end_to_end(spark: SparkSession, tmp_path: Path) -> None:
    racks = tmp_path / "racks.csv"
    racks.write_text(RACKS, encoding="utf-8")
    out = tmp_path / "exposure"
    argv = ["whatif", "exposure", "--describe", str(COPYSETS), "--rack-map", str(racks)]
    assert main([*argv, "--seed", "7", "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["distinct_replica_sets"] == 2
    assert summary["p_loss"] == {"2": pytest.approx(1 / 3)}
    assert summary["components"] == 2 and summary["max_brokers_touched"] == 1
    assert summary["rack_loss"] == {"a": 2, "b": 0, "c": 0}
    assert set(summary["kafka_generate"]) >= {"distinct_replica_sets", "p_loss", "components"}
    for table in ("brokers", "replica_sets", "partitions"):
        assert (out / f"{table}.parquet").is_dir()
    report = (out / "report.html").read_text(encoding="utf-8")
    assert report.count("<svg") >= 2 and "Failure domains" in report
