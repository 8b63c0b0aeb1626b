"""Concurrent point reads share statements and each still reads at its own timestamp."""

from __future__ import annotations

import asyncio

from percolator.server.storage.cells import CellKey, Mutation, WriteKind
from percolator.server.storage.postgres_store import PostgresCellStore

from .test_contract import ts


async def test_concurrent_reads_share_statements_at_their_own_timestamps(fresh_dsns) -> None:
    (dsn,) = await fresh_dsns(1)
    store = await PostgresCellStore.connect([dsn], pool_size=4)  # one read statement in flight
    keys = [CellKey("t", f"r{i}".encode(), "c") for i in range(50)]
    for version in range(3):
        muts = [Mutation(k, WriteKind.PUT, f"{k.row.decode()}@{version}".encode()) for k in keys]
        start = ts(10 * version + 1)
        assert await store.prewrite(start, keys[0], 3000, muts) == []
        assert await store.commit(start, start + 1, keys) == []
    before = store.stats.round_trips["read"]
    reads = [(k, version) for version in range(3) for k in keys]
    results = await asyncio.gather(*(store.read(ts(10 * version + 5), [k]) for k, version in reads))
    statements = store.stats.round_trips["read"] - before
    for (k, version), (result,) in zip(reads, results, strict=True):
        assert result.key == k
        assert result.value == f"{k.row.decode()}@{version}".encode()
    assert statements < len(reads) / 10, f"{statements} statements for {len(reads)} reads"

    unbatched = await PostgresCellStore.connect([dsn], pool_size=4, batch_reads=False)
    before = unbatched.stats.round_trips["read"]
    await asyncio.gather(*(unbatched.read(ts(100), [k]) for k in keys))
    assert unbatched.stats.round_trips["read"] - before == len(keys)
    await unbatched.close()
    await store.close()
