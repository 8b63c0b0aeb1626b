"""Sequence values handed out a block at a time (server/sequences.py)."""

from __future__ import annotations

import asyncio

from percolator.server.sequences import SequenceAllocator
from percolator.server.storage.memory_store import MemoryCellStore
from percolator.server.txn.client import TransactionClient

from .conftest import FAST_CONFIG, WallClock


def test_values_are_unique_across_blocks_and_allocators() -> None:
    async def draw() -> list[int]:
        client = TransactionClient(MemoryCellStore(), WallClock(), FAST_CONFIG)
        # Two allocators stand for two server processes sharing the counter.
        first, second = SequenceAllocator(client, block=4), SequenceAllocator(client, block=4)
        values = await asyncio.gather(*(a.nextval("s") for _ in range(15) for a in (first, second)))
        return list(values)

    values = asyncio.run(draw())
    assert len(values) == 30
    assert len(set(values)) == 30  # each block's last value was also the next block's first
    assert min(values) == 1 and max(values) <= 32  # at most one block partly unused each
