"""Where a row lives: a deterministic hash of (table, row key).

The same 64-bit hash serves two purposes: its unsigned value modulo the shard count picks the
shard, and its signed value is the per-row lock key a shard uses to make each batch atomic per
row (Bigtable's single-row transactions).
"""

from __future__ import annotations

import functools
import hashlib


@functools.lru_cache(maxsize=16384)  # a row's cells are hashed several times per batch
def row_hash(table: str, row: bytes) -> int:
    """A signed 64-bit hash of (table, row), stable across processes and versions."""
    digest = hashlib.blake2b(table.encode() + b"\x00" + row, digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def shard_for(table: str, row: bytes, shard_count: int) -> int:
    """The shard index of a row among ``shard_count`` shards."""
    if shard_count == 1:
        return 0
    return (row_hash(table, row) & 0xFFFF_FFFF_FFFF_FFFF) % shard_count
