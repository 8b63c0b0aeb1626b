"""Shared fixtures: one embedded Postgres per test session, fresh databases per test module."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest

from percolator.server.storage.embedded import EmbeddedPostgres


@pytest.fixture(scope="session")
def embedded_pg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedPostgres]:
    """A real Postgres started by the tests themselves (pgserver's binaries)."""
    pg = EmbeddedPostgres(Path(tmp_path_factory.mktemp("pg")))
    pg.start()
    yield pg
    pg.stop()


def _dsn_for(base_dsn: str, database: str) -> str:
    head, _, query = base_dsn.partition("?")
    prefix = head.rsplit("/", 1)[0]
    return f"{prefix}/{database}?{query}" if query else f"{prefix}/{database}"


async def create_database(base_dsn: str, prefix: str = "t") -> str:
    """Create an empty database on the server and return its DSN."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    conn = await asyncpg.connect(base_dsn)
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    return _dsn_for(base_dsn, name)


@pytest.fixture
def fresh_dsns(embedded_pg: EmbeddedPostgres):
    """A factory of DSNs of new, empty databases (one per shard)."""

    async def make(n: int = 1) -> list[str]:
        return [await create_database(embedded_pg.dsn) for _ in range(n)]

    return make


IN_CI = os.environ.get("CI") == "true"
