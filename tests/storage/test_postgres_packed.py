"""The Postgres store's packed scan pages: against wide values a page's size in cells follows
the bytes per cell of the page before it, and a page too large for one Postgres value is asked
for again, smaller; the shards' pages are handed on as they come."""

from __future__ import annotations

import asyncio
import time

import asyncpg
import pytest

from percolator.server.storage import postgres_store
from percolator.server.storage.packed import PackedCells
from percolator.server.storage.postgres_store import PostgresCellStore

from .test_contract import key, put, ts

COLUMNS = ["a", "b", "c"]


async def wide_rows(store: PostgresCellStore, rows: int, width: int) -> None:
    """``rows`` rows of three cells of ``width`` bytes, committed at ts(2)."""
    muts = [
        put(key(f"r{i:03d}", c), bytes([i % 256]) * width) for i in range(rows) for c in COLUMNS
    ]
    assert await store.prewrite(ts(1), muts[0].key, 3000, muts) == []
    assert await store.commit(ts(1), ts(2), [m.key for m in muts]) == []


async def scanned(store: PostgresCellStore) -> tuple[list[bytes], int]:
    """The rows a packed scan finds, and its round trips."""
    before = store.stats.round_trips["scan"]
    rows: list[bytes] = []
    async for page in store.scan_packed(ts(3), "t", None, None, COLUMNS, page_size=4096):
        assert isinstance(page, PackedCells)
        for row, values in page.rows(COLUMNS):
            assert sorted(values) == COLUMNS
            rows.append(row)
    return rows, store.stats.round_trips["scan"] - before


async def test_wide_values_make_smaller_pages(fresh_dsns, monkeypatch: pytest.MonkeyPatch) -> None:
    (dsn,) = await fresh_dsns(1)
    store = await PostgresCellStore.connect([dsn])
    try:
        await wide_rows(store, 500, 1000)  # 1,500 cells: the first page takes 1,024
        rows, trips = await scanned(store)
        assert rows == [f"r{i:03d}".encode() for i in range(500)] and trips == 2
        monkeypatch.setattr(postgres_store, "PACKED_PAGE_BYTES", 30_000)  # about 30 cells
        rows, trips = await scanned(store)
        assert rows == [f"r{i:03d}".encode() for i in range(500)]
        assert trips > 1 + (1500 - 1024) // 30
    finally:
        await store.close()


async def test_a_page_too_large_for_postgres_is_asked_for_again_smaller(fresh_dsns) -> None:
    (dsn,) = await fresh_dsns(1)
    store = await PostgresCellStore.connect([dsn])
    conn = await asyncpg.connect(dsn)
    try:
        await wide_rows(store, 100, 10)
        # What Postgres raises when an aggregated value outgrows 1 GB, for any page of more
        # than 20 cells, raised by a wrapper around the real function.
        await conn.execute(
            "ALTER FUNCTION percolator_scan_packed(text, bytea, bytea, bigint, text[], integer) "
            "RENAME TO real_scan_packed"
        )
        await conn.execute(
            """CREATE FUNCTION percolator_scan_packed(
                p_tbl text, p_start bytea, p_end bytea, p_ts bigint, p_cols text[],
                p_limit integer)
            RETURNS TABLE (cells bigint, keys bytea, vals bytea, layout bytea,
                safe_point bigint, first_lock bytea)
            LANGUAGE plpgsql AS $$
            BEGIN
                IF p_limit > 20 THEN
                    RAISE EXCEPTION 'out of memory' USING ERRCODE = 'program_limit_exceeded';
                END IF;
                RETURN QUERY SELECT * FROM real_scan_packed(
                    p_tbl, p_start, p_end, p_ts, p_cols, p_limit);
            END $$"""
        )
        rows, trips = await scanned(store)
        assert rows == [f"r{i:03d}".encode() for i in range(100)]
        assert trips > 300 // 20
    finally:
        await conn.close()
        await store.close()


async def _stream(name: str, n: int, delay: float, log: list[str], fail: bool = False):
    try:
        for i in range(n):
            await asyncio.sleep(delay)
            yield f"{name}{i}"
        if fail:
            raise RuntimeError(f"{name} failed")
    finally:
        log.append(f"{name} closed")


async def test_shards_pages_are_handed_on_as_they_come() -> None:
    log: list[str] = []
    slow = _stream("slow", 2, 0.3, log)
    fast = _stream("fast", 3, 0, log)
    got = [item async for item in postgres_store._as_they_come([slow, fast])]
    assert got[:3] == ["fast0", "fast1", "fast2"] and got[3:] == ["slow0", "slow1"]
    assert sorted(log) == ["fast closed", "slow closed"]


async def test_a_failing_shard_stops_the_others_at_once() -> None:
    log: list[str] = []
    slow = _stream("slow", 1, 30, log)
    failing = _stream("bad", 1, 0, log, fail=True)
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="bad failed"):
        async for _ in postgres_store._as_they_come([slow, failing]):
            pass
    assert time.monotonic() - started < 5
    assert sorted(log) == ["bad closed", "slow closed"]


async def test_a_caller_that_stops_early_stops_every_shard() -> None:
    log: list[str] = []
    streams = [_stream(f"s{i}", 100, 0.01, log) for i in range(3)]
    merged = postgres_store._as_they_come(streams)
    assert (await anext(merged)).startswith("s")
    await merged.aclose()
    assert sorted(log) == ["s0 closed", "s1 closed", "s2 closed"]
