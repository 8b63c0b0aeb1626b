"""Query plans and the executor."""
