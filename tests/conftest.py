"""Shared fixtures: one embedded Postgres per test session, fresh databases per test module."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import pytest

from percolator.server.storage.embedded import EmbeddedPostgres


@dataclass(frozen=True)
class PostgresServer:
    """A Postgres server for tests; ``dsn`` reaches its ``postgres`` database as superuser."""

    dsn: str
    kind: str


def docker_engine_available() -> bool:
    """True when a Docker engine answers (not just the docker client being installed)."""
    if os.environ.get("PERCOLATOR_TEST_DOCKER") == "0" or shutil.which("docker") is None:
        return False
    result = subprocess.run(["docker", "info"], capture_output=True, timeout=20, check=False)
    return result.returncode == 0


@pytest.fixture(scope="session")
def embedded_pg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostgresServer]:
    """A real Postgres: in a container (testcontainers) where a Docker engine runs, else the
    embedded one started by the tests themselves (pgserver's binaries)."""
    if docker_engine_available():
        try:
            from testcontainers.community.postgres import PostgresContainer
        except ImportError:
            from testcontainers.postgres import PostgresContainer

        # The store takes one advisory lock per row of a batch: give it the same lock table
        # as the embedded server (docs/storage.md).
        container = PostgresContainer("postgres:16", driver=None).with_command(
            "postgres -c max_locks_per_transaction=1024 -c max_connections=300"
        )
        with container:
            yield PostgresServer(container.get_connection_url(), "docker")
        return
    pg = EmbeddedPostgres(Path(tmp_path_factory.mktemp("pg")))
    pg.start()
    yield PostgresServer(pg.dsn, "embedded")
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
def fresh_dsns(embedded_pg: PostgresServer):
    """A factory of DSNs of new, empty databases (one per shard)."""

    async def make(n: int = 1) -> list[str]:
        return [await create_database(embedded_pg.dsn) for _ in range(n)]

    return make


IN_CI = os.environ.get("CI") == "true"
