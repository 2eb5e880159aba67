"""``kce verify``: a scenario played on real Apache Kafka brokers and on the emulator, step by
step, their ZooKeeper trees compared after each step.

``kafka_install`` finds the Kafka jars ``.ci/setup --kafka`` resolved from Maven Central;
``real_cluster`` runs Debian's ZooKeeper and the brokers; ``real_events`` plays scenario events
with Kafka's own tools and signals; ``emulator_side`` steps ``kce run``'s playback; ``snapshot``
reads both trees into one normalised form and diffs them; ``command`` is the CLI.
"""
