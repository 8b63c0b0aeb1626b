"""Shard DSN lists as given on command lines and in configuration."""

from __future__ import annotations

from collections.abc import Sequence


def parse_dsns(store: str | Sequence[str]) -> list[str]:
    """A list of shard DSNs from a comma-separated string or a sequence; shard i is item i."""
    dsns = [d.strip() for d in store.split(",")] if isinstance(store, str) else list(store)
    dsns = [d for d in dsns if d]
    if not dsns:
        raise ValueError("no store DSN given")
    return dsns
