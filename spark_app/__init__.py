"""Spark application layer: the ``kce`` CLI, the ``spark-submit`` entry point and the session factory."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("kafka-controller-emulator")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0+local"
