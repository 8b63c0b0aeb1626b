"""DROP TABLE, TRUNCATE and DROP INDEX free their storage's cells once no snapshot can read
them, on a real Postgres store of two shards."""

from __future__ import annotations

import asyncio
import os
import sys
import time

import asyncpg
import pytest

from percolator.clients.database import Database, connect
from percolator.server.metrics import definitions as metrics
from percolator.server.sql import catalog_store
from percolator.server.storage.cells import CellKey, Mutation, WriteKind
from percolator.server.storage_reclaimer import StorageReclaimer
from percolator.server.txn.gc import collect_garbage


@pytest.fixture
def db(api_db: Database) -> Database:
    return api_db


@pytest.fixture
def dsns(api_db: Database) -> list[str]:
    return api_db.client.store.dsns  # type: ignore[attr-defined,no-any-return]


async def stored_rows(dsns: list[str], storage: str) -> int:
    """Write records, locks and notifications of ``storage`` on every shard, counted in
    Postgres itself."""
    total = 0
    for dsn in dsns:
        conn = await asyncpg.connect(dsn)
        try:
            for table in ("percolator_write", "percolator_lock", "percolator_notify"):
                total += await conn.fetchval(
                    f"SELECT count(*) FROM {table} WHERE tbl = $1", storage
                )
        finally:
            await conn.close()
    return total


async def gc_now(db: Database) -> None:
    """A GC pass at the current time (as if no transaction of another process ran)."""
    await db.client.secondaries.drain()
    now = await db.client.clock.get_timestamp()
    await collect_garbage(db.client.store, db.client.resolver, now)


async def retired(db: Database) -> list[str]:
    async with db.begin() as txn:
        return [r.storage for r in await catalog_store.retired_storages(txn)]


async def test_truncate_frees_the_old_storage_after_the_last_old_snapshot(
    db: Database, dsns: list[str]
) -> None:
    await db.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
    await db.execute("CREATE INDEX t_v ON t (v)")
    await db.execute("INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 200) g")
    old = (await db.catalog()).tables["t"]
    old_storages = [old.storage, old.indexes[0].storage]
    await db.client.secondaries.drain()
    assert await stored_rows(dsns, old.storage) >= 400  # a marker and v per row

    reader = await db.begin()  # a snapshot from before the TRUNCATE
    await db.execute("TRUNCATE t")
    await db.execute("INSERT INTO t VALUES (1, 'new')")
    assert sorted(await retired(db)) == sorted(old_storages)

    reclaimer = StorageReclaimer(db.client)
    assert await reclaimer.run_once() == []  # the safe point has not moved
    assert metrics.RETIRED_STORAGES_PENDING._value.get() == 2  # the table's and the index's
    purged_before = metrics.RETIRED_ROWS_PURGED._value.get()
    await collect_garbage(db.client.store, db.client.resolver, reader.start_ts)
    assert await reclaimer.run_once() == []  # below the reader: it may still read them
    assert await stored_rows(dsns, old.storage) >= 400
    await reader.rollback()

    await gc_now(db)
    purged = await reclaimer.run_once()
    assert sorted(r.storage for r in purged) == sorted(old_storages)
    assert {r.table for r in purged} == {"t"}
    for storage in old_storages:
        assert await stored_rows(dsns, storage) == 0
    assert metrics.RETIRED_STORAGES_PENDING._value.get() == 0
    assert metrics.RETIRED_ROWS_PURGED._value.get() - purged_before >= 600  # 400 + 200
    assert await retired(db) == []
    assert await db.fetch("SELECT id, v FROM t") == [{"id": 1, "v": "new"}]
    assert await db.fetch("SELECT id FROM t WHERE v = 'new'") == [{"id": 1}]


async def test_drop_table_and_drop_index_are_reclaimed_and_rollback_keeps_everything(
    db: Database, dsns: list[str]
) -> None:
    await db.execute("CREATE TABLE a (id int PRIMARY KEY, v text)")
    await db.execute("CREATE INDEX a_v ON a (v)")
    await db.execute("INSERT INTO a VALUES (1, 'x'), (2, 'y')")
    table = (await db.catalog()).tables["a"]
    index = table.indexes[0].storage

    txn = await db.begin()  # a rolled-back drop retires nothing
    await (await db.sql(txn)).execute("DROP TABLE a")
    await txn.rollback()
    assert await retired(db) == []

    await db.execute("DROP INDEX a_v")
    assert await retired(db) == [index]
    reclaimer = StorageReclaimer(db.client)
    assert await reclaimer.run_once() == []  # first seen now: wait for the safe point
    await gc_now(db)
    assert [r.storage for r in await reclaimer.run_once()] == [index]
    assert await stored_rows(dsns, index) == 0
    assert await stored_rows(dsns, table.storage) > 0
    assert await db.fetch("SELECT v FROM a ORDER BY id") == [{"v": "x"}, {"v": "y"}]

    await db.execute("DROP TABLE a")
    assert await reclaimer.run_once() == []
    await gc_now(db)
    assert [r.storage for r in await reclaimer.run_once()] == [table.storage]
    assert await stored_rows(dsns, table.storage) == 0


async def test_a_committed_primary_in_a_dropped_table_is_rolled_forward_before_the_purge(
    db: Database, dsns: list[str]
) -> None:
    await db.execute("CREATE TABLE t (id int PRIMARY KEY)")
    await db.execute("CREATE TABLE other (id int PRIMARY KEY)")
    catalog = await db.catalog()
    primary = CellKey(catalog.tables["t"].storage, b"p", "c")
    secondary = CellKey(catalog.tables["other"].storage, b"s", "c")
    # A committer that dies after committing its primary (in t): its secondary stays locked.
    store, clock = db.client.store, db.client.clock
    start_ts = await clock.get_timestamp()
    mutations = [Mutation(primary, WriteKind.PUT, b"p"), Mutation(secondary, WriteKind.PUT, b"s")]
    assert await store.prewrite(start_ts, primary, 100, mutations) == []
    assert await store.commit(start_ts, await clock.get_timestamp(), [primary]) == []
    await db.execute("DROP TABLE t")
    reclaimer = StorageReclaimer(db.client)
    assert await reclaimer.run_once() == []
    await store.set_gc_safe_point(await clock.get_timestamp())
    assert await reclaimer.run_once() == []  # the old lock is not resolved yet
    assert await stored_rows(dsns, primary.table) == 1
    await gc_now(db)  # rolls the secondary forward from the primary's commit record
    assert [r.storage for r in await reclaimer.run_once()] == [primary.table]
    assert await stored_rows(dsns, primary.table) == 0
    read = await store.read(await clock.get_timestamp(), [secondary])
    assert (read[0].value, read[0].lock) == (b"s", None)


async def test_the_coordinator_process_reclaims_a_dropped_table(fresh_dsns) -> None:  # type: ignore[no-untyped-def]
    """In a deployment with a coordinator of its own, the coordinator's process runs the
    reclaimer (servers and clients that use it do not)."""
    (dsn,) = await fresh_dsns(1)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "percolator.server.cli", "coordinator",
        "--listen", "127.0.0.1:0", "--store", dsn,
        "--gc-interval", "0.2", "--gc-lifetime", "0.1",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        banner = (await proc.stdout.readline()).decode().strip()
        assert banner.startswith("percolator coordinator listening on "), banner
        db = await connect(dsn, coordinator=banner.rsplit(" on ", 1)[1])
        try:
            await db.execute("CREATE TABLE gone (id int PRIMARY KEY, v text)")
            await db.execute("INSERT INTO gone SELECT g, 'v' FROM generate_series(1, 50) g")
            storage = (await db.catalog()).tables["gone"].storage
            await db.execute("DROP TABLE gone")
            await db.client.secondaries.drain()
            assert await stored_rows([dsn], storage) > 0
            deadline = time.monotonic() + 30
            while await stored_rows([dsn], storage) > 0:
                assert time.monotonic() < deadline, "the coordinator never reclaimed it"
                await asyncio.sleep(0.2)
            assert storage not in await retired(db)
        finally:
            await db.close()
    finally:
        proc.terminate()
        assert await asyncio.wait_for(proc.wait(), 30) == 0
