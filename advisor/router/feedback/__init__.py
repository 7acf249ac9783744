"""Live feedback: the service's verified attempts as labels, drift from what the probe expected, gated promotion
and rollback."""
