"""The controller's event families, one module each: what Kafka's ``KafkaController`` does per
event, given narrow collaborators (the context, the ZooKeeper client, the committer) instead of
the whole controller."""
