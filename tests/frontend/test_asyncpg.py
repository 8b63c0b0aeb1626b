"""asyncpg against the front end (and the fake engine)."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import asyncpg
import pytest

from percolator.server.frontend.config import AuthMethod
from percolator.server.frontend.listener import Server
from tests.frontend.conftest import MakeServer
from tests.frontend.fake_engine import PASSWORD, FakeEngine

TIMEOUT = 10.0


async def connect(server: Server, **kwargs: object) -> asyncpg.Connection:
    options: dict[str, object] = {"user": "u", "database": "db", "ssl": False}
    options.update(kwargs)
    return await asyncpg.connect(host="127.0.0.1", port=server.port, timeout=TIMEOUT, **options)


async def test_queries_params_and_errors(make_server: MakeServer) -> None:
    server = await make_server(auth_method=AuthMethod.SCRAM_SHA_256)
    conn = await connect(server, password=PASSWORD)
    try:
        assert await conn.fetchval("select 1") == 1
        assert await conn.fetchval("select $1::int", 41) == 41
        assert await conn.fetchrow("select $1::text, $2::int8", "x", 2**40) == ("x", 2**40)
        rows = await conn.fetch("select generate_series(1, 1000)")
        assert [r[0] for r in rows] == list(range(1, 1001))
        with pytest.raises(asyncpg.UndefinedColumnError):
            await conn.fetch("select fail")
        assert await conn.fetchval("select 2") == 2
        assert await conn.fetchrow(";") is None
        await conn.execute("begin; insert into t values (1); commit")
    finally:
        await conn.close(timeout=TIMEOUT)


async def test_cursor_prefetch_in_transaction(server: Server) -> None:
    conn = await connect(server)
    try:
        async with conn.transaction():
            assert conn.is_in_transaction()
            seen = [r[0] async for r in conn.cursor("select generate_series(1, 25)", prefetch=10)]
            assert seen == list(range(1, 26))
            cursor = await conn.cursor("select generate_series(1, 10)")
            assert [r[0] for r in await cursor.fetch(3)] == [1, 2, 3]
            assert (await cursor.fetchrow())[0] == 4
        assert not conn.is_in_transaction()
    finally:
        await conn.close(timeout=TIMEOUT)


async def test_timeout_cancels_statement(server: Server, engine: FakeEngine) -> None:
    conn = await connect(server)
    try:
        with pytest.raises(TimeoutError):
            await conn.fetchval("select pg_sleep(30)", timeout=0.3)
        assert await conn.fetchval("select 5") == 5
        assert engine.sessions[0].cancelled == 1
    finally:
        await conn.close(timeout=TIMEOUT)


async def test_md5_and_wrong_password(make_server: MakeServer) -> None:
    server = await make_server(auth_method=AuthMethod.MD5)
    conn = await connect(server, password=PASSWORD)
    await conn.close(timeout=TIMEOUT)
    conn = await connect(server, user="scramonly", password=PASSWORD)  # md5 -> SCRAM
    await conn.close(timeout=TIMEOUT)
    with pytest.raises(asyncpg.InvalidPasswordError, match='for user "u"'):
        await connect(server, password="wrong")
    with pytest.raises(asyncpg.InvalidPasswordError, match='for user "ghost"'):
        await connect(server, user="ghost", password=PASSWORD)


async def test_tls(make_server: MakeServer, tls_files: tuple[Path, Path]) -> None:
    cert, key = tls_files
    server = await make_server(tls_cert=cert, tls_key=key, auth_method=AuthMethod.SCRAM_SHA_256)
    context = ssl.create_default_context(cafile=str(cert))
    context.check_hostname = False
    conn = await connect(server, ssl=context, password=PASSWORD)
    try:
        assert conn.get_server_pid() > 0
        assert await conn.fetchval("select $1::text", "over tls") == "over tls"
    finally:
        await conn.close(timeout=TIMEOUT)
    # A server without TLS refuses the upgrade: asyncpg with ssl required gives up.
    plain = await make_server()
    with pytest.raises((ConnectionError, OSError)):
        await asyncio.wait_for(connect(plain, ssl=context), TIMEOUT)
