"""Connectors to other systems."""
