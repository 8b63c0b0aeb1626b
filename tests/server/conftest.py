"""Fixtures for the SQL server: a real server (its own event loop, in a thread) over a fresh
database of the embedded Postgres, one per test module, and a plain Postgres database to
compare results with."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import psycopg
import pytest

from percolator.clients.database import Database, connect
from percolator.server.config import ServerConfig
from percolator.server.runtime import RunningServer, ServerProcess, ServerThread
from tests.conftest import PostgresServer, create_database


@dataclass(frozen=True)
class SqlServer:
    """A running Percolator SQL server and the Postgres database that stores its data."""

    host: str
    port: int
    user: str
    password: str | None
    store_dsn: str
    running: RunningServer

    def conninfo(self, **extra: str) -> str:
        """A libpq connection string (psql, psycopg)."""
        parts = {"host": self.host, "port": str(self.port), "user": self.user, "dbname": "postgres"}
        if self.password is not None:
            parts["password"] = self.password
        parts.update(extra)
        return " ".join(f"{k}={v}" for k, v in parts.items())

    def url(self, scheme: str = "postgresql") -> str:
        """A URL (asyncpg, SQLAlchemy with ``postgresql+psycopg`` / ``postgresql+asyncpg``)."""
        auth = self.user if self.password is None else f"{self.user}:{self.password}"
        return f"{scheme}://{auth}@{self.host}:{self.port}/postgres"


def start_sql_server(store_dsn: str, **settings: object) -> tuple[ServerThread, SqlServer]:
    """Start a server on a free port over ``store_dsn`` (trust auth unless told otherwise)."""
    config = ServerConfig(
        listen="127.0.0.1:0",
        coordinator_listen="127.0.0.1:0",
        **{"auth": "trust", **settings},  # type: ignore[arg-type]
    )
    thread = ServerThread(config, [store_dsn])
    running = thread.start()
    server = SqlServer("127.0.0.1", running.port, config.user, config.password, store_dsn, running)
    return thread, server


@pytest.fixture(scope="module")
def sql_server(embedded_pg: PostgresServer) -> Iterator[SqlServer]:
    """A Percolator SQL server on a fresh database, shared by the tests of one module."""
    store = asyncio.run(create_database(embedded_pg.dsn, "sql"))
    thread, server = start_sql_server(store)
    yield server
    thread.stop()


@pytest.fixture(scope="module")
def reference_dsn(embedded_pg: PostgresServer) -> str:
    """A fresh database on the real Postgres, to run the same statements and compare."""
    return asyncio.run(create_database(embedded_pg.dsn, "ref"))


@pytest.fixture(scope="module")
def pg_pair(
    sql_server: SqlServer, reference_dsn: str
) -> Iterator[tuple[psycopg.Connection, psycopg.Connection]]:
    """Autocommit connections to the module's server and to a fresh database of the real
    Postgres, for scripts run on both (``tests/server/scripted.py``)."""
    with (
        psycopg.connect(sql_server.conninfo(), autocommit=True) as ours,
        psycopg.connect(reference_dsn, autocommit=True) as ref,
    ):
        yield ours, ref


@contextlib.contextmanager
def server_process(store_dsn: str, *args: str) -> Iterator[SqlServer]:
    """``percolator serve`` as its own process (for tests whose timing a server sharing the
    test's interpreter lock would distort: cancellation, timeouts)."""
    proc = ServerProcess(store_dsn, *args)
    port = proc.start()
    try:
        yield SqlServer("127.0.0.1", port, "postgres", None, store_dsn, None)  # type: ignore[arg-type]
    finally:
        proc.stop(30)


@pytest.fixture(scope="module")
def sql_server_process(embedded_pg: PostgresServer) -> Iterator[SqlServer]:
    """A Percolator SQL server in its own process, on a fresh database."""
    store = asyncio.run(create_database(embedded_pg.dsn, "proc"))
    with server_process(store) as server:
        yield server


@pytest.fixture
async def api_db(fresh_dsns) -> AsyncIterator[Database]:
    """The Python client API over a fresh store of two shards."""
    database = await connect(",".join(await fresh_dsns(2)))
    yield database
    await database.close()
