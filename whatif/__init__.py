"""``kce whatif``: offline failure, rebalance and placement planning over a cluster snapshot.

A snapshot (``--describe`` text, a live ZooKeeper read-only, a ``kce run`` output, or a
scenario's cluster) becomes the project's partitions table; each question runs Kafka's own rules
over it in bulk and writes ``summary.json``, Parquet tables, Kafka-format plans and ``report.html``.
"""
