"""The emulated brokers around the controller modules: one ZooKeeper, one virtual clock."""
