"""Where ``.ci/setup --kafka`` put Apache Kafka's jars: one directory per release under the
user's cache (``${XDG_CACHE_HOME:-~/.cache}/kce/kafka-<version>/libs``), resolved from Maven
Central through ``.ci/kafka/pom.xml``."""

from __future__ import annotations

import os
from pathlib import Path

# The releases ``kce verify --kafka`` runs, and the emulated ``kafka_version`` each stands for.
RELEASES: dict[str, str] = {"2.8.2": "2.8", "3.4.1": "3.4"}
DEFAULT_RELEASE = "2.8.2"


class KafkaMissingError(ValueError):
    """The requested release is unknown or not installed."""


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kce"


def kafka_libs(release: str) -> Path:
    """The directory holding ``release``'s broker and tools jars with their dependencies."""
    if release not in RELEASES:
        raise KafkaMissingError(
            f"--kafka {release}: kce verify runs Apache Kafka {', '.join(RELEASES)}; "
            "pick one of them"
        )
    libs = cache_dir() / f"kafka-{release}" / "libs"
    if not any(libs.glob(f"kafka_2.13-{release}.jar")):
        raise KafkaMissingError(
            f"Apache Kafka {release} is not installed in {libs}; run: bash .ci/setup --kafka"
        )
    return libs


def classpath(release: str) -> str:
    """A JVM class path of every jar of ``release`` (Java expands ``dir/*``)."""
    return str(kafka_libs(release) / "*")
