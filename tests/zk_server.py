"""The tests' throwaway ZooKeeper server: ``verify.zookeeper_server``'s (``kce verify`` starts
its real Kafka clusters on one too)."""

from verify.zookeeper_server import ZooKeeperMissingError, ZooKeeperServer, four_letter

__all__ = ["ZooKeeperMissingError", "ZooKeeperServer", "four_letter"]
