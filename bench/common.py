"""What several benchmarks share: fresh databases on the embedded Postgres, reaching a server
process, and waiting for a bulk load's background commits."""

from __future__ import annotations

import asyncio
import time
import uuid

import asyncpg

from percolator.server.runtime import ServerProcess
from percolator.server.storage.postgres_store import PostgresCellStore


async def create_databases(base: str, *prefixes: str) -> list[str]:
    """One new database per prefix on the server of ``base``; their DSNs, in order."""
    conn = await asyncpg.connect(base)
    names = [f"{p}_{uuid.uuid4().hex[:8]}" for p in prefixes]
    try:
        for n in names:
            await conn.execute(f'CREATE DATABASE "{n}"')
    finally:
        await conn.close()
    head, _, query = base.partition("?")
    prefix = head.rsplit("/", 1)[0]
    return [f"{prefix}/{n}?{query}" if query else f"{prefix}/{n}" for n in names]


def sql_conninfo(server: ServerProcess) -> str:
    """A libpq connection string for a started :class:`ServerProcess` (trust authentication)."""
    return f"host=127.0.0.1 port={server.port} user=postgres dbname=postgres"


async def wait_for_secondaries(store_dsn: str, timeout_s: float = 900.0) -> None:
    """Wait until the load's transactions have committed their secondaries.

    A COPY of 100,000 rows commits its primary, then 300,000 secondary cells in the
    background; measuring while that runs (and while readers resolve the cells still locked)
    would measure the load, not the workload."""
    store = await PostgresCellStore.connect([store_dsn])
    try:
        deadline = time.monotonic() + timeout_s
        while await store.scan_locks(1 << 62, limit=1):
            if time.monotonic() > deadline:
                raise RuntimeError("the load's secondary commits did not finish")
            await asyncio.sleep(0.5)
    finally:
        await store.close()
