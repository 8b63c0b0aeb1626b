"""What only the Postgres store has: schema versions, bad input, races, big batches."""

from __future__ import annotations

import asyncio
import time

import asyncpg
import pytest

from percolator.server.storage.cells import CellKey, Mutation, WriteKind
from percolator.server.storage.errors import (
    CorruptRecordError,
    SchemaVersionError,
    StoreUnavailable,
)
from percolator.server.storage.postgres_store import MAX_ROWS_PER_STATEMENT, PostgresCellStore
from percolator.server.storage.schema import SCHEMA_VERSION

from .test_contract import key, put, ts


async def test_schema_is_created_once_with_its_version(fresh_dsns) -> None:
    (dsn,) = await fresh_dsns(1)
    stores = await asyncio.gather(*(PostgresCellStore.connect([dsn]) for _ in range(4)))
    conn = await asyncpg.connect(dsn)
    try:
        version = await conn.fetchval(
            "SELECT value FROM percolator_meta WHERE key = 'schema_version'"
        )
        tables = await conn.fetchval(
            "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'percolator_%'"
        )
    finally:
        await conn.close()
    assert version == str(SCHEMA_VERSION)
    assert tables == 4
    for s in stores:
        await s.close()


async def test_newer_schema_version_is_refused(fresh_dsns) -> None:
    (dsn,) = await fresh_dsns(1)
    await (await PostgresCellStore.connect([dsn])).close()
    conn = await asyncpg.connect(dsn)
    await conn.execute(
        "UPDATE percolator_meta SET value = $1 WHERE key = 'schema_version'",
        str(SCHEMA_VERSION + 1),
    )
    await conn.close()
    with pytest.raises(SchemaVersionError, match="newer than this"):
        await PostgresCellStore.connect([dsn])


async def test_unreachable_postgres_fails_fast_naming_the_dsn() -> None:
    dsn = "postgresql://user:secret@127.0.0.1:1/nowhere"
    started = time.monotonic()
    with pytest.raises(StoreUnavailable) as err:
        await PostgresCellStore.connect([dsn], connect_timeout=2.0)
    assert time.monotonic() - started < 5
    assert "127.0.0.1:1/nowhere" in str(err.value)
    assert "secret" not in str(err.value)


async def test_unknown_record_kind_is_an_error_not_a_crash(fresh_dsns) -> None:
    (dsn,) = await fresh_dsns(1)
    store = await PostgresCellStore.connect([dsn])
    k = key("a")
    assert await store.prewrite(ts(1), k, 3000, [put(k, b"x")]) == []
    assert await store.commit(ts(1), ts(2), [k]) == []
    conn = await asyncpg.connect(dsn)
    await conn.execute("UPDATE percolator_write SET kind = 9")
    await conn.close()
    with pytest.raises(CorruptRecordError, match="unknown record kind 9"):
        await store.read(ts(3), [k, key("b")])
    await store.close()


async def test_prewrite_and_rollback_of_one_transaction_never_both_win(fresh_dsns) -> None:
    """The race that per-row locking closes: without it, under READ COMMITTED, a prewrite and a
    rollback (with marker) of the same start_ts could both pass their checks."""
    (dsn,) = await fresh_dsns(1)
    store = await PostgresCellStore.connect([dsn], pool_size=8)
    for i in range(150):
        k = key(f"race{i}")
        start = ts(10 + i)
        await asyncio.gather(
            store.prewrite(start, k, 3000, [put(k, b"x")]),
            store.rollback(start, [k], leave_marker=True),
        )
        # Either order is legal; what must never happen is a lock that outlives its rollback
        # (both passed their checks), which would let the transaction commit after all.
        assert (await store.read(ts(10_000), [k]))[0].lock is None, f"round {i}"
        assert await store.commit(start, ts(10_001), [k]), f"round {i} committed"
    await store.close()


async def test_big_batches_are_chunked_and_counted(fresh_dsns) -> None:
    dsns = await fresh_dsns(2)
    store = await PostgresCellStore.connect(dsns)
    cells = [CellKey("big", f"r{i:06d}".encode(), col) for i in range(2500) for col in "ab"]
    muts = [Mutation(c, WriteKind.PUT, b"v" * 100) for c in cells]
    rows_per_shard = [0, 0]
    for i in range(2500):
        rows_per_shard[store.shard_of("big", f"r{i:06d}".encode())] += 1
    expected = sum(-(-n // MAX_ROWS_PER_STATEMENT) for n in rows_per_shard)
    before = store.stats.snapshot().get("prewrite", 0)
    assert await store.prewrite(ts(1), cells[0], 3000, muts) == []
    assert store.stats.snapshot()["prewrite"] - before == expected
    assert await store.commit(ts(1), ts(2), cells) == []
    scanned = [c async for c in store.scan(ts(3), "big", None, None, ["b"], page_size=300)]
    assert [c.key for c in scanned] == [c for c in cells if c.column == "b"]
    await store.close()
