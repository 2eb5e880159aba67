"""Time for the controller: clocks (virtual or system) and Kafka's hierarchical timing wheel."""
