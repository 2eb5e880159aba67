"""The controller's commit point: one generation of the partitions table per commit, its diff,
gauges, ZooKeeper state writes, broker request counts and state-change log."""
