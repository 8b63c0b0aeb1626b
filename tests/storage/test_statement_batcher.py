"""Concurrent single-cell operations share statements, each with its own arguments."""

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

    unbatched = await PostgresCellStore.connect([dsn], pool_size=4, coalesce=False)
    before = unbatched.stats.round_trips["read"]
    await asyncio.gather(*(unbatched.read(ts(100), [k]) for k in keys))
    assert unbatched.stats.round_trips["read"] - before == len(keys)
    await unbatched.close()
    await store.close()


async def test_concurrent_single_cell_transactions_share_write_statements(fresh_dsns) -> None:
    from percolator.server.txn.client import TransactionClient
    from percolator.server.txn.errors import WriteConflict
    from tests.txn.conftest import WallClock

    (dsn,) = await fresh_dsns(1)
    store = await PostgresCellStore.connect([dsn], pool_size=4)
    client = TransactionClient(store, WallClock())
    txns = [await client.begin() for _ in range(60)]
    for i, txn in enumerate(txns):
        # 40 on their own cells; 20 racing for two cells (ten each).
        row = f"own{i}" if i < 40 else f"hot{i % 2}"
        txn.set("t", row.encode(), "c", str(txn.start_ts).encode())
    before = store.stats.snapshot()
    outcomes = await asyncio.gather(*(t.commit() for t in txns), return_exceptions=True)
    after = store.stats.snapshot()
    assert all(isinstance(o, int) for o in outcomes[:40])
    for hot in (0, 1):
        racers = [
            (t, o)
            for i, (t, o) in enumerate(zip(txns, outcomes, strict=True))
            if i >= 40 and i % 2 == hot
        ]
        winners = [t for t, o in racers if isinstance(o, int)]
        assert len(winners) == 1, "first committer wins, the others conflict"
        assert all(isinstance(o, WriteConflict) for t, o in racers if t not in winners)
        async with client.begin() as check:
            value = await check.get("t", f"hot{hot}".encode(), "c")
        assert value == str(winners[0].start_ts).encode()
    statements = sum(after[op] - before.get(op, 0) for op in ("prewrite", "commit"))
    assert statements < 60, f"{statements} statements for 60 prewrites and 42 commits"
    await client.close()
    await store.close()
