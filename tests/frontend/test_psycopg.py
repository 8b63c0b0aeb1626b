"""psycopg 3 (libpq) against the front end (and the fake engine)."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from percolator.server.frontend.config import AuthMethod
from percolator.server.frontend.listener import Server
from tests.frontend.conftest import MakeServer
from tests.frontend.fake_engine import PASSWORD, FakeEngine

TIMEOUT = 10.0


async def connect(server: Server, **kwargs: object) -> psycopg.AsyncConnection:
    options: dict[str, object] = {"user": "u", "dbname": "db", "connect_timeout": 10}
    options.update(kwargs)
    return await asyncio.wait_for(
        psycopg.AsyncConnection.connect(host="127.0.0.1", port=server.port, **options), TIMEOUT
    )


async def test_transactions_and_params(make_server: MakeServer, engine: FakeEngine) -> None:
    server = await make_server(auth_method=AuthMethod.SCRAM_SHA_256)
    conn = await connect(server, password=PASSWORD)
    try:
        cur = await conn.execute("select 1, 'a'")
        assert await cur.fetchall() == [(1, "a")]
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        await conn.commit()
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert engine.sessions[0].executed[:3] == ["BEGIN", "select 1, 'a'", "COMMIT"]
        cur = await conn.execute("select %s::int, %s::text", (7, "seven"))
        assert await cur.fetchone() == (7, "seven")
        with pytest.raises(psycopg.errors.UndefinedColumn):
            await conn.execute("select fail")
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR
        await conn.rollback()
        await conn.set_autocommit(True)
        cur = await conn.execute("select generate_series(1, 300)")
        assert len(await cur.fetchall()) == 300
        await conn.execute("set application_name = 'pg3'")
        assert conn.info.parameter_status("application_name") == "pg3"
    finally:
        await conn.close()


async def test_pipeline(server: Server) -> None:
    conn = await connect(server, autocommit=True)
    try:
        async with conn.pipeline():
            c1 = await conn.execute("select %s::int", (1,))
            c2 = await conn.execute("select generate_series(1, 3)")
            c3 = await conn.execute("select %s::text", ("x",))
        assert await c1.fetchall() == [(1,)]
        assert await c2.fetchall() == [(1,), (2,), (3,)]
        assert await c3.fetchall() == [("x",)]
        with pytest.raises(psycopg.errors.UndefinedColumn):
            async with conn.pipeline():
                await conn.execute("select fail")
                await conn.execute("select 1")
        cur = conn.cursor()
        await cur.executemany("insert into t values (%s)", [(1,), (2,)])
        assert cur.rowcount == 2
        assert await (await conn.execute("select 9")).fetchone() == (9,)
    finally:
        await conn.close()


async def test_copy_in_and_out(server: Server, engine: FakeEngine) -> None:
    conn = await connect(server, autocommit=True)
    try:
        cur = conn.cursor()
        async with cur.copy("copy t from stdin") as copy:
            await copy.write_row((1, "a"))
            await copy.write_row((2, "b"))
        assert cur.rowcount == 2
        assert engine.copied == [b"1\ta\n2\tb\n"]
        async with cur.copy("copy t to stdout") as copy:
            rows = [row async for row in copy.rows()]
        assert rows == [("1", "one"), ("2", "two"), ("3", "three")]
    finally:
        await conn.close()


async def test_cancel_safe(server: Server, engine: FakeEngine) -> None:
    conn = await connect(server, autocommit=True)
    try:
        running = asyncio.create_task(conn.execute("select pg_sleep(30)"))
        await asyncio.wait_for(engine.sleeping.wait(), TIMEOUT)
        await asyncio.wait_for(conn.cancel_safe(timeout=TIMEOUT), TIMEOUT)
        with pytest.raises(psycopg.errors.QueryCanceled):
            await asyncio.wait_for(running, TIMEOUT)
        assert await (await conn.execute("select 3")).fetchone() == (3,)
    finally:
        await conn.close()
