"""The data plane: Kafka's partition/replica state machines and elections as lazy DataFrame transforms.

Nothing in this package runs a Spark action; the controller owns every commit point.
"""
