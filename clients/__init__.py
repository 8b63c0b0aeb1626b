"""Python client API."""
