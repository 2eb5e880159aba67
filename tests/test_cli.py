"""The ``kce`` command line: version/help, strict config errors, and the quickstart job's results."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pyspark.sql import SparkSession

from spark_app import __version__, quickstart
from spark_app.cli import EXIT_INVALID, EXIT_OK, main
from statemachines import reference
from statemachines.partition_states import PartitionState
from statemachines.reference import Partition, View
from statemachines.replica_states import ReplicaState

SMALL = {
    "name": "small",
    "seed": 3,
    "spark": {"master": "local[2]"},
    "cluster": {
        "brokers": 6,
        "racks": 2,
        "topics": 8,
        "partitions_per_topic": 5,
        "replication_factor": 3,
    },
    "fail_brokers": [1, 4],
}


def _write(tmp_path: Path, doc: dict) -> str:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def test_version_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.strip() == f"kce {__version__}"
    assert main([]) == EXIT_OK
    assert "quickstart" in capsys.readouterr().out


def test_shipped_quickstart_config_is_valid() -> None:
    config = quickstart.load_config(Path(__file__).parents[1] / "configs" / "quickstart.yaml")
    assert config.cluster.topics * config.cluster.partitions_per_topic == 100_000


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"clusterr": {}}, "clusterr: Extra inputs are not permitted"),
        ({"fail_brokers": [99]}, "fail_brokers [99] are not brokers of the cluster"),
        (
            {"cluster": {**SMALL["cluster"], "replication_factor": 7}},
            "replication_factor 7 is larger",
        ),
        (
            {"cluster": {**SMALL["cluster"], "topics": "many"}},
            "cluster.topics: Input should be a valid integer",
        ),
    ],
)
def test_invalid_config_exits_2_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change: dict, expected: str
) -> None:
    assert main(["quickstart", _write(tmp_path, {**SMALL, **change})]) == EXIT_INVALID
    err = capsys.readouterr().err
    assert expected in err
    assert "Traceback" not in err


def test_missing_config_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["quickstart", "/nonexistent.yaml"]) == EXIT_INVALID
    assert "no such config file" in capsys.readouterr().err


def test_quickstart_matches_the_reference_sequence(spark: SparkSession, tmp_path: Path) -> None:
    """The bulk job equals Kafka's §8.2 sequence run partition by partition in the oracle."""
    config = quickstart.QuickstartConfig.model_validate(SMALL)
    result = quickstart.run(spark, config)

    c = config.cluster
    cluster = c.generate(spark, config.seed)
    parts = {
        (r.topic, r.partition): Partition(
            r.topic, r.partition, tuple(r.replicas), tuple(r.isr), r.leader, controller_epoch=1
        )
        for r in cluster.partitions.collect()
    }
    dead = set(config.fail_brokers)
    view = View(frozenset(range(c.brokers)) - dead, controller_epoch=2)
    offline = [k for k, p in parts.items() if p.leader in dead]
    step = reference.handle_partition_state_changes(parts, offline, PartitionState.OfflinePartition)
    step = reference.handle_partition_state_changes(
        step.partitions, offline, PartitionState.OnlinePartition, view, reference.offline_strategy()
    )
    states = {
        (t, p, b): ReplicaState.OnlineReplica for (t, p), q in parts.items() for b in q.replicas
    }
    replicas = reference.handle_replica_state_changes(
        step.partitions, states, [k for k in states if k[2] in dead], ReplicaState.OfflineReplica
    )
    after = replicas.partitions.values()
    leaders_after: dict[int, int] = {}
    for p in after:
        leaders_after[p.leader] = leaders_after.get(p.leader, 0) + 1
    assert result["elected"] == len(step.elected)
    assert result["no_leader_elected"] == len(step.failed)
    assert result["offline_partitions"] == leaders_after.get(-1, 0)
    got = {r["broker"]: r["leaders_after"] for r in result["brokers"] if r["leaders_after"]}
    assert got == leaders_after
    ratios = reference.imbalance_ratios(after)
    assert {
        r["broker"]: r["imbalance_after"] for r in result["brokers"] if r["broker"] in ratios
    } == {b: round(v, 4) for b, v in ratios.items()}
    assert quickstart.render(result).splitlines()[0].startswith("partitions: 40")
