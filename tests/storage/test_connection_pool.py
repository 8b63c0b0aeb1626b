"""The store's connection pool against a real Postgres: bounded, fair to waiters, and never
hands out a closed or interrupted connection."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest

from percolator.server.storage.connection_pool import ConnectionPool, PoolClosed


@pytest.fixture
async def dsn(fresh_dsns) -> str:  # type: ignore[no-untyped-def]
    (one,) = await fresh_dsns(1)
    return one


@pytest.fixture
async def pool(dsn: str) -> AsyncIterator[ConnectionPool]:
    p = ConnectionPool(lambda: asyncpg.connect(dsn), max_size=2)
    yield p
    await p.close()


async def backend(conn: asyncpg.Connection) -> int:
    return await conn.fetchval("SELECT pg_backend_pid()")


async def test_connections_are_reused_and_bounded(pool: ConnectionPool) -> None:
    a = await pool.acquire()
    pid = await backend(a)
    pool.release(a)
    again = await pool.acquire()
    assert await backend(again) == pid  # the idle one, not a new one
    b = await pool.acquire()
    assert pool.size == 2
    third = asyncio.ensure_future(pool.acquire())
    await asyncio.sleep(0.05)
    assert not third.done()  # at max_size: waits for a release
    pool.release(b)
    assert await asyncio.wait_for(third, 5) is b
    pool.release(again)
    pool.release(b)


async def test_a_cancelled_waiter_does_not_keep_a_connection(pool: ConnectionPool) -> None:
    a, b = await pool.acquire(), await pool.acquire()
    waiter = asyncio.ensure_future(pool.acquire())
    await asyncio.sleep(0.01)
    waiter.cancel()
    pool.release(a)  # handed to nobody: the waiter is gone
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert await asyncio.wait_for(pool.acquire(), 5) is a
    pool.release(a)
    pool.release(b)


async def test_a_freed_slot_handed_to_a_cancelled_waiter_goes_to_the_next(
    pool: ConnectionPool,
) -> None:
    a, b = await pool.acquire(), await pool.acquire()
    first = asyncio.ensure_future(pool.acquire())
    second = asyncio.ensure_future(pool.acquire())
    await asyncio.sleep(0.01)
    pool.discard(a)  # the slot goes to the first waiter...
    first.cancel()  # ...which is cancelled before it could use it
    fresh = await asyncio.wait_for(second, 5)
    assert await fresh.fetchval("SELECT 1") == 1 and pool.size == 2
    with pytest.raises(asyncio.CancelledError):
        await first
    pool.release(fresh)
    pool.release(b)


async def test_a_discarded_connection_frees_its_slot_for_a_waiter(pool: ConnectionPool) -> None:
    a, b = await pool.acquire(), await pool.acquire()
    waiter = asyncio.ensure_future(pool.acquire())
    await asyncio.sleep(0.01)
    pool.discard(a)  # an interrupted statement: terminated, not reused
    fresh = await asyncio.wait_for(waiter, 5)
    assert a.is_closed() and fresh is not a and await fresh.fetchval("SELECT 1") == 1
    assert pool.size == 2
    pool.release(fresh)
    pool.release(b)


async def test_an_idle_connection_whose_server_went_away_is_replaced(
    pool: ConnectionPool, dsn: str
) -> None:
    a = await pool.acquire()
    pid = await backend(a)
    pool.release(a)
    admin = await asyncpg.connect(dsn)
    try:
        assert await admin.fetchval("SELECT pg_terminate_backend($1)", pid)
        for _ in range(100):  # the driver notices the closed socket
            if a.is_closed():
                break
            await asyncio.sleep(0.02)
    finally:
        await admin.close()
    conn = await pool.acquire()
    assert conn is not a and await backend(conn) != pid
    pool.release(conn)


async def test_close_fails_waiters_and_closes_idle_connections(pool: ConnectionPool) -> None:
    a, b = await pool.acquire(), await pool.acquire()
    pool.release(a)
    taken = await pool.acquire()
    waiter = asyncio.ensure_future(pool.acquire())
    await asyncio.sleep(0.01)
    pool.release(b)  # goes to the waiter
    got = await asyncio.wait_for(waiter, 5)
    late = asyncio.ensure_future(pool.acquire())
    await asyncio.sleep(0.01)
    await pool.close()
    with pytest.raises(PoolClosed):
        await late
    pool.release(taken)  # in use at close: terminated on its way back
    pool.release(got)
    assert taken.is_closed() and got.is_closed()
    assert pool.size == 0
    with pytest.raises(PoolClosed):
        await pool.acquire()
