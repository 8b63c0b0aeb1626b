"""Subcommands of the `percolator` CLI: each module has ``register(subparsers)``."""
