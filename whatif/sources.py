"""Where a what-if snapshot comes from: ``load_cluster`` takes exactly one source.

* ``describe``: ``kafka-topics.sh --describe`` text (``whatif.describe``);
* ``zk``: a live ZooKeeper-mode cluster, read-only (``whatif.zookeeper``);
* ``run``: a ``kce run`` output directory (``partitions.parquet``; live brokers from
  ``final_state.json`` when it was written, else every broker holding a replica);
* ``scenario``: the starting cluster of a scenario file, as ``kce run`` would bootstrap it.

Beside the source: ``rack_map`` (CSV ``id,rack``) sets the racks of the brokers it lists (for
``describe``, whose text names no racks and no idle brokers, it also adds its brokers to the live
set, unless the snapshot proves them down); ``sizes`` (CSV ``topic,partition,bytes``) becomes ``WhatIfCluster.sizes``; ``config``
(``KEY=VALUE`` items) overrides Kafka's broker defaults, below each topic's own overrides.
A scenario's own ``config:`` sits between Kafka's defaults and ``config``.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from spark_app.cluster_builder import initial_partitions
from spark_app.scenario import Scenario, ScenarioError, format_problems, load_scenario
from statemachines import schemas as s
from whatif.cluster import (
    SIZES_SCHEMA,
    BrokerDefaults,
    TopicConfigs,
    WhatIfCluster,
    WhatIfInputError,
    broker_defaults,
    columns_frame,
    partitions_frame,
    proven_down,
    topic_configs,
)
from whatif.describe import describe_configs, parse_describe
from whatif.lines import bounded_lines
from whatif.run_source import check_run, load_run
from whatif.snapshot_checks import Known, check_rack_map, check_sizes
from whatif.zookeeper import ZkOptions, read_zk, read_zk_columns

__all__ = [
    "BrokerDefaults",
    "ClusterInput",
    "TopicConfigs",
    "WhatIfCluster",
    "WhatIfInputError",
    "ZkOptions",
    "load_cluster",
    "load_rack_map",
    "load_run",
    "load_scenario_cluster",
    "load_sizes",
    "read_cluster",
    "read_sizes",
    "read_zk",
]

# -- CSV side files ------------------------------------------------------------------------------


def _csv_rows(path: Path, header: tuple[str, ...], option: str) -> Iterator[tuple[int, list[str]]]:
    """(line, cells) of every non-blank row after the required header."""
    expected = ",".join(header)
    try:
        # utf-8-sig: spreadsheets save CSV with a byte-order mark.
        with path.open(encoding="utf-8-sig", newline="") as f:
            reader = csv.reader(bounded_lines(f, str(path)))
            first = next(reader, None)
            if first is None or [c.strip() for c in first] != list(header):
                got = "an empty file" if first is None else repr(",".join(first))
                raise WhatIfInputError(
                    f"{path}:1: the header must be {expected}, found {got} — "
                    f"start {option} with the line {expected}"
                )
            for cells in reader:
                if not any(c.strip() for c in cells):
                    continue
                if len(cells) != len(header):
                    raise WhatIfInputError(
                        f"{path}:{reader.line_num}: {len(cells)} fields, expected "
                        f"{len(header)} ({expected}) — write one row per line as {expected}"
                    )
                yield reader.line_num, [c.strip() for c in cells]
    except FileNotFoundError:
        raise WhatIfInputError(f"{path}: no such file — check the {option} path") from None
    except UnicodeDecodeError as exc:
        raise WhatIfInputError(
            f"{path}: not UTF-8 text ({exc.reason}) — save it as UTF-8"
        ) from None
    except csv.Error as exc:
        raise WhatIfInputError(f"{path}: not valid CSV ({exc}) — check the quoting") from None
    except OSError as exc:
        raise WhatIfInputError(
            f"{path}: cannot read it ({exc.strerror}) — check the path"
        ) from None


def _non_negative(text: str, what: str, where: str, most: int = s.INT_MAX) -> int:
    """An integer from 0 to ``most`` (Kafka's Int for ids; its Long for sizes in bytes)."""
    if not text.isdigit():
        raise WhatIfInputError(f"{where}: {what} {text!r} is not an integer >= 0 — fix the row")
    if int(text) > most:
        raise WhatIfInputError(f"{where}: {what} {text} is above {most:,} — fix the row")
    return int(text)


def load_rack_map(path: str | Path) -> dict[int, str | None]:
    """``--rack-map``: broker id -> rack; an empty rack means rackless (no ``broker.rack``)."""
    path = Path(path)
    racks: dict[int, str | None] = {}
    lines: dict[int, int] = {}
    for number, (id_text, rack) in _csv_rows(path, ("id", "rack"), "--rack-map"):
        where = f"{path}:{number}"
        broker = _non_negative(id_text, "broker id", where)
        if broker in racks:
            raise WhatIfInputError(
                f"{where}: broker {broker} is listed twice (first on line {lines[broker]}) — "
                "a broker has one rack; keep one row"
            )
        racks[broker] = rack or None
        lines[broker] = number
    return racks


def load_sizes(spark: SparkSession, path: str | Path) -> DataFrame:
    """``--sizes``: (topic, partition, bytes) per partition, from CSV ``topic,partition,bytes``."""
    return columns_frame(spark, read_sizes(path), SIZES_SCHEMA)


def read_sizes(path: str | Path) -> dict[str, list[Any]]:
    """``load_sizes`` before Spark: the validated rows as column lists."""
    path = Path(path)
    # "line" is not a column of the frame: it names a row in messages (``snapshot_checks``).
    cols: dict[str, list[Any]] = {s.TOPIC: [], s.PARTITION: [], "bytes": [], "line": []}
    seen: dict[tuple[str, int], int] = {}
    for number, (topic, partition_text, bytes_text) in _csv_rows(
        path, ("topic", "partition", "bytes"), "--sizes"
    ):
        where = f"{path}:{number}"
        if not topic:
            raise WhatIfInputError(f"{where}: the topic is empty — name the topic")
        partition = _non_negative(partition_text, "partition", where)
        size = _non_negative(bytes_text, "bytes", where, s.LONG_MAX)
        if (topic, partition) in seen:
            raise WhatIfInputError(
                f"{where}: {topic}-{partition} is listed twice (first on line "
                f"{seen[(topic, partition)]}) — keep one size per partition"
            )
        seen[(topic, partition)] = number
        cols[s.TOPIC].append(topic)
        cols[s.PARTITION].append(partition)
        cols["bytes"].append(size)
        cols["line"].append(number)
    return cols


# -- scenario ------------------------------------------------------------------------------------


def load_scenario_cluster(
    spark: SparkSession, path: str | Path, config: Sequence[str] = ()
) -> WhatIfCluster:
    """``--scenario FILE``: the cluster ``kce run`` would start from (before any event)."""
    return scenario_cluster(spark, _scenario(path), config, str(path))


def _scenario(path: str | Path) -> Scenario:
    try:
        return load_scenario(path)
    except ScenarioError as err:
        raise WhatIfInputError(
            f"{format_problems(err.problems, str(path))}\nfix the scenario file"
        ) from None


def scenario_cluster(
    spark: SparkSession, scenario: Scenario, config: Sequence[str] = (), where: str = "scenario"
) -> WhatIfCluster:
    """The starting cluster of a validated scenario (``where`` names it in messages)."""
    kafka = scenario.config
    base = BrokerDefaults(
        min_insync_replicas=kafka.min_insync_replicas,
        unclean_leader_election_enable=kafka.unclean_leader_election_enable,
        leader_imbalance_per_broker_percentage=kafka.leader_imbalance_per_broker_percentage,
        default_replication_factor=kafka.default_replication_factor,
    )
    defaults = broker_defaults(config, base)
    overrides = {t.name: t.config.overrides() for t in scenario.cluster.topics}
    configs = {
        topic: topic_configs(defaults, overrides.get(topic, {}), f"{where}: topic {topic}")
        for topic in scenario.topic_partition_counts()
    }
    return WhatIfCluster(
        initial_partitions(spark, scenario),
        scenario.initial_live_brokers(),
        {b.id: b.rack for b in scenario.brokers()},
        configs,
        defaults,
        source=f"scenario {where}",
    )


# -- one source ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClusterInput:
    """A snapshot read and validated in plain Python (``read_cluster``): every input error is
    raised before Spark starts. ``build`` makes its frames; only a ``--run`` table is read
    then (it is Parquet)."""

    source: Callable[[SparkSession], WhatIfCluster]
    racks: dict[int, str | None]
    sizes: dict[str, list[Any]] | None
    known: Known | None = None  # None: a --run table, read by Spark
    live: tuple[int, ...] = ()  # the snapshot's live brokers, with ``known``
    source_racks: dict[int, str | None] = field(default_factory=dict)
    name: str = ""  # the source, as messages name it ("describe FILE")
    down: tuple[int, ...] = ()  # brokers the snapshot proves down (not in ``live``)

    def merged_racks(self) -> dict[int, str | None]:
        """Every live broker's rack: the source's, then the rack map's (as ``build`` merges)."""
        return {**dict.fromkeys(self.live), **self.source_racks, **self.racks}

    def build(self, spark: SparkSession) -> WhatIfCluster:
        """The snapshot, with the side files applied."""
        cluster = self.source(spark)
        merged = {**dict.fromkeys(cluster.brokers), **cluster.racks, **self.racks}
        return WhatIfCluster(
            cluster.partitions,
            cluster.brokers,
            dict(sorted(merged.items())),
            cluster.topic_configs,
            cluster.broker_defaults,
            None if self.sizes is None else columns_frame(spark, self.sizes, SIZES_SCHEMA),
            cluster.source,
            cluster.deleting_topics,
            cluster.down_brokers,
        )


def read_cluster(
    *,
    describe: str | Path | None = None,
    zk: str | None = None,
    run: str | Path | None = None,
    scenario: str | Path | None = None,
    rack_map: str | Path | None = None,
    sizes: str | Path | None = None,
    config: Sequence[str] = (),
    zk_options: ZkOptions | None = None,
) -> ClusterInput:
    """Read and validate exactly one source and the side files, without Spark."""
    given = {
        "--describe": describe, "--zk": zk, "--run": run, "--scenario": scenario,
    }  # fmt: skip
    chosen = [name for name, value in given.items() if value is not None]
    if len(chosen) != 1:
        raise WhatIfInputError(
            f"{' and '.join(chosen) or 'no source'} given — pass exactly one of {', '.join(given)}"
        )
    racks = load_rack_map(rack_map) if rack_map is not None else {}
    sized = read_sizes(sizes) if sizes is not None else None
    snapshot = _read_source(describe, zk, run, scenario, racks, sized, config, zk_options)
    if snapshot.known is not None:
        if rack_map is not None:
            check_rack_map(snapshot.known, racks, rack_map)
        if sizes is not None and sized is not None:
            check_sizes(snapshot.known, sized, sizes)
    return snapshot


def _read_source(
    describe: str | Path | None,
    zk: str | None,
    run: str | Path | None,
    scenario: str | Path | None,
    racks: dict[int, str | None],
    sized: dict[str, list[Any]] | None,
    config: Sequence[str],
    zk_options: ZkOptions | None,
) -> ClusterInput:
    if scenario is not None:
        parsed = _scenario(scenario)
        live = parsed.initial_live_brokers()
        known = Known(parsed.topic_partition_counts(), frozenset(b.id for b in parsed.brokers()))
        return ClusterInput(
            lambda spark: scenario_cluster(spark, parsed, config, str(scenario)),
            racks, sized, known, live, {b.id: b.rack for b in parsed.brokers()},
            f"scenario {scenario}",
        )  # fmt: skip
    defaults = broker_defaults(config)
    if describe is not None:
        snap = parse_describe(describe)
        configs = describe_configs(describe, snap, defaults)
        named = tuple(sorted(snap.brokers | set(racks)))
        # The brokers named in replica lists or the rack map are live unless the snapshot proves
        # them down: the ISR of a partition Kafka left without a leader.
        down = tuple(sorted(proven_down(snap.columns, snap.deleting, configs)))
        brokers = tuple(b for b in named if b not in down)
        source = f"describe {describe}"

        def described(spark: SparkSession) -> WhatIfCluster:
            frame = partitions_frame(spark, snap.columns)
            return WhatIfCluster(
                frame, brokers, dict.fromkeys(named), configs, defaults, source=source,
                deleting_topics=frozenset(snap.deleting), down_brokers=down,
            )  # fmt: skip

        # Filtered output (--under-replicated-partitions, ...) has no topic header lines.
        known = Known.of_columns(
            snap.columns, named, filtered=not snap.config_lines, adds_brokers=True
        )
        return ClusterInput(described, racks, sized, known, brokers, {}, source, down)
    if zk is not None:
        cols, live, zk_racks, zk_configs, deleting = read_zk_columns(zk, defaults, zk_options)
        return ClusterInput(
            lambda spark: WhatIfCluster(
                partitions_frame(spark, cols), live, zk_racks, zk_configs, defaults,
                source=f"zk {zk}", deleting_topics=deleting,
            ),
            racks, sized, Known.of_columns(cols, live), live, zk_racks, f"zk {zk}",
        )  # fmt: skip
    assert run is not None
    check_run(Path(run))
    return ClusterInput(lambda spark: load_run(spark, run, defaults), racks, sized)


def load_cluster(spark: SparkSession, **sources: Any) -> WhatIfCluster:
    """The snapshot of exactly one source, with the side files applied (``read_cluster``'s
    keyword arguments)."""
    return read_cluster(**sources).build(spark)
