"""``--run DIR``: a ``kce run`` output directory as a what-if snapshot (``whatif.sources``).

``check_run`` needs no Spark (the directory, its table's Parquet footers read with pyarrow, and
``final_state.json``); ``load_run`` reads the table with Spark.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from spark_app.messages import cut
from statemachines import schemas as s
from whatif.cluster import BrokerDefaults, WhatIfCluster, WhatIfInputError, topic_configs

_SPARK_ERRORS = (PySparkException, Py4JJavaError)


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise WhatIfInputError(
            f"{path}: not readable JSON ({exc}) — rerun kce run or remove the file"
        ) from None


def _check_parquet(table: Path) -> None:
    """Every file of ``table`` has a readable Parquet footer with the partitions columns (footers
    only: the rows are read by Spark)."""
    files = sorted(table.rglob("*.parquet")) if table.is_dir() else [table]
    try:
        for file in files:
            problems = s.schema_problems(
                from_arrow_schema(pq.read_schema(file)), s.PARTITIONS_SCHEMA
            )
            if problems:
                raise WhatIfInputError(
                    f"{table}: not a partitions table ({'; '.join(problems)}) — pass the "
                    "partitions.parquet a kce run wrote"
                )
    except (OSError, pa.ArrowException) as exc:
        raise WhatIfInputError(
            f"{table}: not a readable Parquet table ({cut(str(exc))}) — rerun kce run to write it "
            "again"
        ) from None


def check_run(directory: Path) -> list[int] | None:
    """The checks of ``--run DIR`` that need no Spark: the directory and its table are there,
    and ``final_state.json``, when written, is valid; its live brokers (None: not written)."""
    table = directory / "partitions.parquet"
    if not directory.is_dir():
        raise WhatIfInputError(f"{directory}: no such directory — pass a kce run output directory")
    if not table.exists():
        raise WhatIfInputError(
            f"{table}: missing — the run wrote no final table (it ends with no active "
            "controller); pass the output directory of a run that finished with one"
        )
    _check_parquet(table)
    final = directory / "final_state.json"
    if not final.exists():
        return None
    state = _json(final)
    brokers_json = state.get("brokers") if isinstance(state, dict) else None
    live = brokers_json.get("live") if isinstance(brokers_json, dict) else None
    if not isinstance(live, list) or not all(type(b) is int and 0 <= b <= s.INT_MAX for b in live):
        raise WhatIfInputError(
            f"{final}: brokers.live is not a list of broker ids — rerun kce run or remove the file"
        )
    return live


def load_run(
    spark: SparkSession, directory: str | Path, defaults: BrokerDefaults | None = None
) -> WhatIfCluster:
    """``--run DIR``: the final partitions table of a ``kce run`` and its live brokers."""
    directory = Path(directory)
    defaults = defaults or BrokerDefaults()
    table = directory / "partitions.parquet"
    live = check_run(directory)
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
        if live is not None:
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
