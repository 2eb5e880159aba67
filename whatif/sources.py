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
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

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
    topic_configs,
)
from whatif.describe import load_describe
from whatif.zookeeper import ZkOptions, read_zk

__all__ = [
    "BrokerDefaults",
    "TopicConfigs",
    "WhatIfCluster",
    "WhatIfInputError",
    "ZkOptions",
    "load_cluster",
    "load_describe",
    "load_rack_map",
    "load_run",
    "load_scenario_cluster",
    "load_sizes",
    "read_zk",
]

_SPARK_ERRORS = (PySparkException, Py4JJavaError)


# -- CSV side files ------------------------------------------------------------------------------


def _csv_rows(path: Path, header: tuple[str, ...], option: str) -> Iterator[tuple[int, list[str]]]:
    """(line, cells) of every non-blank row after the required header."""
    expected = ",".join(header)
    try:
        # utf-8-sig: spreadsheets save CSV with a byte-order mark.
        with path.open(encoding="utf-8-sig", newline="") as f:
            reader = csv.reader(f)
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
    path = Path(path)
    cols: dict[str, list[Any]] = {s.TOPIC: [], s.PARTITION: [], "bytes": []}
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
    return columns_frame(spark, cols, SIZES_SCHEMA)


# -- kce run output ------------------------------------------------------------------------------


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise WhatIfInputError(
            f"{path}: not readable JSON ({exc}) — rerun kce run or remove the file"
        ) from None


def load_run(
    spark: SparkSession, directory: str | Path, defaults: BrokerDefaults | None = None
) -> WhatIfCluster:
    """``--run DIR``: the final partitions table of a ``kce run`` and its live brokers."""
    directory = Path(directory)
    defaults = defaults or BrokerDefaults()
    table = directory / "partitions.parquet"
    if not directory.is_dir():
        raise WhatIfInputError(f"{directory}: no such directory — pass a kce run output directory")
    if not table.exists():
        raise WhatIfInputError(
            f"{table}: missing — the run wrote no final table (it ends with no active "
            "controller); pass the output directory of a run that finished with one"
        )
    try:
        frame = spark.read.schema(s.PARTITIONS_SCHEMA).parquet(str(table))
        problems = s.schema_problems(spark.read.parquet(str(table)).schema, s.PARTITIONS_SCHEMA)
        if problems:
            raise WhatIfInputError(
                f"{table}: not a partitions table ({'; '.join(problems)}) — pass the "
                "partitions.parquet a kce run wrote"
            )
        frame = frame.select(*s.PARTITIONS_SCHEMA.fieldNames())
        # Reading the topics reads every file, so a corrupt one fails here and not mid-question.
        topics = sorted(r[0] for r in frame.select(s.TOPIC).distinct().collect())
        final = directory / "final_state.json"
        if final.exists():
            state = _json(final)
            brokers_json = state.get("brokers") if isinstance(state, dict) else None
            live = brokers_json.get("live") if isinstance(brokers_json, dict) else None
            if not isinstance(live, list) or not all(
                type(b) is int and 0 <= b <= s.INT_MAX for b in live
            ):
                raise WhatIfInputError(
                    f"{final}: brokers.live is not a list of broker ids — rerun kce run or "
                    "remove the file"
                )
            brokers = sorted(live)
        else:
            held = frame.select(F.explode(s.REPLICAS).alias(s.BROKER)).distinct().collect()
            brokers = sorted(r[0] for r in held)
    except _SPARK_ERRORS as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise WhatIfInputError(
            f"{table}: not a readable Parquet table ({first[:200]}) — rerun kce run to write it again"
        ) from None
    configs = {t: topic_configs(defaults, {}, str(table)) for t in topics}
    return WhatIfCluster(
        frame, tuple(brokers), dict.fromkeys(brokers), configs, defaults, source=f"run {directory}"
    )


# -- scenario ------------------------------------------------------------------------------------


def load_scenario_cluster(
    spark: SparkSession, path: str | Path, config: Sequence[str] = ()
) -> WhatIfCluster:
    """``--scenario FILE``: the cluster ``kce run`` would start from (before any event)."""
    try:
        scenario = load_scenario(path)
    except ScenarioError as err:
        raise WhatIfInputError(
            f"{format_problems(err.problems, str(path))}\nfix the scenario file"
        ) from None
    return scenario_cluster(spark, scenario, config, str(path))


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


def load_cluster(
    spark: SparkSession,
    *,
    describe: str | Path | None = None,
    zk: str | None = None,
    run: str | Path | None = None,
    scenario: str | Path | None = None,
    rack_map: str | Path | None = None,
    sizes: str | Path | None = None,
    config: Sequence[str] = (),
    zk_options: ZkOptions | None = None,
) -> WhatIfCluster:
    """The snapshot of exactly one source, with the side files applied."""
    given = {
        "--describe": describe, "--zk": zk, "--run": run, "--scenario": scenario,
    }  # fmt: skip
    chosen = [name for name, value in given.items() if value is not None]
    if len(chosen) != 1:
        raise WhatIfInputError(
            f"{' and '.join(chosen) or 'no source'} given — pass exactly one of {', '.join(given)}"
        )
    racks = load_rack_map(rack_map) if rack_map is not None else {}
    if scenario is not None:
        cluster = load_scenario_cluster(spark, scenario, config)
    else:
        defaults = broker_defaults(config)
        if describe is not None:
            cluster = load_describe(spark, describe, defaults, racks)
        elif zk is not None:
            snap = read_zk(spark, zk, defaults, zk_options)
            cluster = WhatIfCluster(
                snap.partitions, snap.brokers, snap.racks, snap.topic_configs, defaults,
                source=f"zk {zk}", deleting_topics=snap.deleting_topics,
            )  # fmt: skip
        else:
            assert run is not None
            cluster = load_run(spark, run, defaults)
    return WhatIfCluster(
        cluster.partitions,
        cluster.brokers,
        dict(sorted({**dict.fromkeys(cluster.brokers), **cluster.racks, **racks}.items())),
        cluster.topic_configs,
        cluster.broker_defaults,
        load_sizes(spark, sizes) if sizes is not None else None,
        cluster.source,
        cluster.deleting_topics,
        cluster.down_brokers,
    )
