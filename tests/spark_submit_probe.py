"""Submitted by ``tests/test_standalone_cluster.py``: prints one JSON line of what a job sees under
``spark-submit`` — the session's master and shuffle partitions, and the files the driver and the
executors import the project from."""

from __future__ import annotations

import json

import spark_app
from spark_app.session import get_spark


def _origin(_: int) -> str:
    import statemachines

    return str(statemachines.__file__)


def main() -> None:
    spark = get_spark(app_name="spark-submit-probe")
    executors = spark.sparkContext.parallelize(range(2), 2).map(_origin).collect()
    seen = {
        "master": spark.sparkContext.master,
        "shuffle_partitions": spark.conf.get("spark.sql.shuffle.partitions"),
        "driver_imports": str(spark_app.__file__),
        "executor_imports": executors,
    }
    print(json.dumps(seen))
    spark.stop()


if __name__ == "__main__":
    main()
