"""Controller events (Kafka's ``ControllerEvent`` set), the single-threaded event manager that
processes them, and the controller states they run in."""
