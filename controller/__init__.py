"""The controller's control plane: event queue, handlers, ZooKeeper access, timer (driver side)."""
