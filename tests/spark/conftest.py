"""Fixtures for the Spark connector: one Spark session (local[2,2]) and one Percolator
deployment (an in-process SQL server over a fresh database, with its coordinator) for all the
connector's tests, which create tables with SQL, load and read them with Spark, and check the
results with SQL."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from percolator.connectors.spark.options import Connection
from percolator.connectors.spark.runtime import open_database, run
from tests.conftest import PostgresServer, create_database
from tests.server.conftest import SqlServer, start_sql_server


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # PySpark 4.3 warns that it does not fully support pandas 3; the connector uses no pandas.
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.path).startswith(here):
            item.add_marker(
                pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas")
            )


@dataclass(frozen=True)
class Deployment:
    """A running Percolator deployment for Spark jobs."""

    server: SqlServer

    @property
    def options(self) -> dict[str, str]:
        """The connection options every Spark job passes."""
        coordinator = self.server.running.coordinator_address
        assert coordinator is not None
        return {"store": self.server.store_dsn, "coordinator": coordinator}

    def connection(self) -> Connection:
        opts = self.options
        return Connection((opts["store"],), opts["coordinator"])

    def timestamp(self) -> int:
        """A fresh timestamp from the coordinator (what asOf takes)."""

        async def ts() -> int:
            async with open_database(self.connection()) as db:
                return await db.client.clock.get_timestamp()

        return run(ts())

    def locks(self, table: str) -> list[Any]:
        """The locks left in a table's cells (and its indexes')."""

        async def scan() -> list[Any]:
            async with open_database(self.connection()) as db:
                t = (await db.catalog()).table(table)
                storages = {t.storage} | {ix.storage for ix in t.indexes}
                locks = await db.store.scan_locks(1 << 62, limit=100_000)
                return [lk for lk in locks if lk.key.table in storages]

        return run(scan())

    def sql(self, statement: str, *args: Any) -> list[tuple[Any, ...]]:
        """Run one statement through the SQL server (autocommit); its rows, if any."""
        import psycopg

        with psycopg.connect(self.server.conninfo(), autocommit=True) as conn:
            cur = conn.execute(statement, args or None)
            return cur.fetchall() if cur.description else []


@pytest.fixture(scope="package")
def deployment(embedded_pg: PostgresServer) -> Iterator[Deployment]:
    """A Percolator SQL server (with coordinator and an observer worker) on a fresh database,
    shared by the Spark tests (each creates tables of its own)."""
    store = asyncio.run(create_database(embedded_pg.dsn, "spark"))
    thread, server = start_sql_server(store)
    try:
        yield Deployment(server)
    finally:
        thread.stop()


@pytest.fixture(scope="package")
def spark() -> Iterator[Any]:
    """One Spark session for all the connector's tests (a JVM start costs seconds), with the
    percolator data source registered: ``local[2,2]``, two threads, and a failed task is tried
    once more (the retry tests need that; Spark's plain ``local[2]`` never retries)."""
    if shutil.which("java") is None:
        pytest.skip("no Java on PATH (Spark needs a JRE 17)")
    from pyspark.sql import SparkSession

    from percolator.connectors.spark import register

    # Spark's Python workers must run this interpreter (it has pyarrow and percolator).
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master("local[2,2]")
        .appName("percolator-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.python.worker.reuse", "true")
        .config("spark.sql.python.filterPushdown.enabled", "true")
        .config("spark.driver.extraJavaOptions", "-Dlog4j.rootLogger=ERROR,console")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    try:
        yield session
    finally:
        session.stop()
