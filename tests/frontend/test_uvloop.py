"""The front end on uvloop (the production event loop): its transports are not asyncio's."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import asyncpg
import pytest

from percolator.server.frontend.config import AuthMethod, FrontendConfig
from percolator.server.frontend.listener import serve
from tests.frontend.fake_engine import PASSWORD, FakeEngine

uvloop = pytest.importorskip("uvloop")


async def scenario(cert: Path, key: Path) -> None:
    engine = FakeEngine()
    config = FrontendConfig(
        port=0, auth_method=AuthMethod.SCRAM_SHA_256, tls_cert=cert, tls_key=key
    )
    server = await serve(engine, config)
    context = ssl.create_default_context(cafile=str(cert))
    context.check_hostname = False
    try:
        conn = await asyncpg.connect(
            host="127.0.0.1",
            port=server.port,
            user="u",
            password=PASSWORD,
            database="db",
            ssl=context,
            timeout=10,
        )
        assert await conn.fetchval("select $1::int", 3) == 3
        assert len(await conn.fetch("select generate_series(1, 20000)")) == 20000
        with pytest.raises(TimeoutError):
            await conn.fetchval("select pg_sleep(30)", timeout=0.3)
        assert await conn.fetchval("select 4") == 4
        await conn.close(timeout=10)
        await asyncio.wait_for(engine.sessions[0].closed.wait(), 10)
    finally:
        await server.shutdown(timeout=5)


async def test_tls_scram_and_cancel_on_uvloop(tls_files: tuple[Path, Path]) -> None:
    await asyncio.wait_for(asyncio.to_thread(uvloop.run, scenario(*tls_files)), 30)
