"""One SparkSession per test session (local[2]); README's command runs two, one per worker."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from spark_app.session import get_spark


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = get_spark("local[2]", {"spark.sql.shuffle.partitions": "4"})
    yield session
    session.stop()
