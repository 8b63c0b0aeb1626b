"""Sequences (behind serial columns): values handed out outside the user's transaction.

As in Postgres, nextval() is not transactional: a rolled-back insert leaves a gap. Each process
reserves a block of values at a time with a short transaction of its own on the counter cell
(``__sequences``, row = the sequence's counter key), so concurrent inserters do not conflict on it;
values are unique across the deployment and increase within a process (like Postgres's CACHE).
"""

from __future__ import annotations

import asyncio

from percolator.server.sql.errors import SqlError
from percolator.server.txn.client import TransactionClient
from percolator.server.txn.transaction import Transaction

SEQUENCE_TABLE = "__sequences"
BLOCK = 32


class SequenceAllocator:
    """Hands out values of every sequence, a reserved block at a time."""

    def __init__(self, client: TransactionClient, block: int = BLOCK) -> None:
        self._client = client
        self._block = block
        self._ranges: dict[str, tuple[int, int]] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def nextval(self, key: str) -> int:
        """The next value of the sequence with this counter key (one transaction per block)."""
        value = self.nextval_nowait(key)
        if value is not None:
            return value
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            value = self.nextval_nowait(key)
            if value is not None:
                return value
            first = await self._client.run_in_transaction(lambda txn: self._reserve(txn, key))
            # The block is [first, first + block - 1]: its last value is not the next one's first.
            self._ranges[key] = (first + 1, first + self._block - 1)
            return first

    def nextval_nowait(self, key: str) -> int | None:
        """The next value if one is reserved already, else None."""
        current = self._ranges.get(key)
        if current is None:
            return None
        nxt, last = current
        if nxt > last:
            return None
        self._ranges[key] = (nxt + 1, last)
        return nxt

    async def _reserve(self, txn: Transaction, key: str) -> int:
        row = str(key).encode()
        raw = await txn.get(SEQUENCE_TABLE, row, "v")
        last = int(raw) if raw is not None else 0
        if last + self._block >= 1 << 63:
            raise SqlError("2200H", "nextval: reached maximum value of sequence")
        txn.set(SEQUENCE_TABLE, row, "v", str(last + self._block).encode())
        return last + 1
