"""Sequence values handed out a block at a time (server/sequences.py)."""

from __future__ import annotations

import asyncio

from percolator.server.sequences import SequenceAllocator, SessionSequences, Steps
from percolator.server.sql.catalog import SequenceDef
from percolator.server.storage.memory_store import MemoryCellStore
from percolator.server.txn.client import TransactionClient
from percolator.server.txn.transaction import Transaction

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


def _client() -> TransactionClient:
    return TransactionClient(MemoryCellStore(), WallClock(), FAST_CONFIG)


def test_new_steps_give_back_the_rest_of_the_block() -> None:
    """ALTER SEQUENCE changed the steps: the next value follows the last one handed out, not
    the end of the block reserved under the old steps."""

    async def draw() -> list[int]:
        allocator = SequenceAllocator(_client(), block=4)
        first = await allocator.nextval("s")
        tens = [await allocator.nextval("s", Steps(increment=10)) for _ in range(5)]
        return [first, *tens]

    assert asyncio.run(draw()) == [1, 11, 21, 31, 41, 51]


def test_a_block_another_process_reserved_after_is_not_given_back() -> None:
    async def draw() -> list[int]:
        client = _client()
        first, second = SequenceAllocator(client, block=4), SequenceAllocator(client, block=4)
        values = [await first.nextval("s"), await second.nextval("s")]
        values.append(await first.nextval("s", Steps(increment=10)))
        return values

    assert asyncio.run(draw()) == [1, 5, 18]  # after 8, the end of the second's block


def test_a_committed_restart_applies_once() -> None:
    """A restart written in a transaction (the ``r`` cell) starts the next reservation of
    every process over, and only that one; until it commits, nothing changes."""

    async def draw() -> list[int]:
        client = _client()
        allocator, other = SequenceAllocator(client, block=4), SequenceAllocator(client, block=4)
        session = SessionSequences(allocator)
        seq = SequenceDef("s", 1, "", "s")
        values = [await allocator.nextval("s"), await other.nextval("s")]

        async def restart(txn: Transaction) -> None:
            session.restart(txn, seq, 100)

        await client.run_in_transaction(restart)
        session.transaction_ended(committed=True)  # drops this process's block
        values += [await allocator.nextval("s"), await allocator.nextval("s")]
        values += [await other.nextval("s") for _ in range(4)]  # its block first
        return values

    assert asyncio.run(draw()) == [1, 5, 100, 101, 6, 7, 8, 104]
