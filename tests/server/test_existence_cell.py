"""A table with a NOT NULL non-key column tells its rows by that column's cell, without a row
marker (planner/row_codec.py): rows still exist, conflict and disappear as in Postgres,
through every DDL that touches the column."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest

from percolator.clients import connect
from percolator.clients.database import Database
from percolator.server.sql.errors import SqlError


@pytest.fixture
async def shards(fresh_dsns) -> list[str]:
    return await fresh_dsns(2)


@pytest.fixture
async def db(shards: list[str]) -> AsyncIterator[Database]:
    database = await connect(",".join(shards))
    yield database
    await database.close()


async def marker_records(shards: list[str]) -> int:
    """Committed row-marker records (PUT) in the store, index entries included."""
    total = 0
    for dsn in shards:
        conn = await asyncpg.connect(dsn)
        try:
            total += await conn.fetchval(
                "SELECT count(*) FROM percolator_write WHERE col = '_' AND kind = 1"
            )
        finally:
            await conn.close()
    return total


async def settled(db: Database) -> None:
    await db.client.secondaries.drain()


async def test_rows_of_a_table_with_a_not_null_column_have_no_marker(
    db: Database, shards: list[str]
) -> None:
    await db.execute("CREATE TABLE plain (k int PRIMARY KEY, n int)")
    await db.execute("CREATE TABLE strict (k int PRIMARY KEY, v text NOT NULL, n int)")
    await settled(db)
    before = await marker_records(shards)
    await db.execute("INSERT INTO plain SELECT g, NULL FROM generate_series(1, 5) g")
    await db.execute("INSERT INTO strict SELECT g, 'v' || g, NULL FROM generate_series(1, 5) g")
    await settled(db)
    assert await marker_records(shards) - before == 5  # plain's rows only
    # Rows are found whether or not a read names the NOT NULL column.
    assert await db.fetch("SELECT count(*) AS c FROM strict") == [{"c": 5}]
    assert await db.fetch("SELECT k, n FROM strict WHERE k = 3") == [{"k": 3, "n": None}]
    assert len(await db.fetch("SELECT n FROM strict")) == 5
    await db.execute("DELETE FROM strict WHERE k IN (1, 2)")
    assert await db.fetch("SELECT k FROM strict ORDER BY k") == [{"k": 3}, {"k": 4}, {"k": 5}]
    assert await db.fetch("SELECT n FROM strict WHERE k = 1") == []


async def test_updates_of_different_columns_of_one_row_conflict(db: Database) -> None:
    await db.execute("CREATE TABLE acct (id int PRIMARY KEY, bal int NOT NULL, note text)")
    await db.execute("INSERT INTO acct VALUES (1, 100, NULL)")
    first = await db.client.begin()
    second = await db.client.begin()
    sql1, sql2 = await db.sql(first), await db.sql(second)
    await sql1.execute("UPDATE acct SET note = 'first' WHERE id = 1")
    # The row's lock makes the second writer wait, whichever column it changes; once the
    # first commits, the row has changed since the second's snapshot.
    waiting = asyncio.create_task(sql2.execute("UPDATE acct SET bal = bal + 1 WHERE id = 1"))
    await asyncio.sleep(0.3)
    assert not waiting.done()
    await first.commit()
    with pytest.raises(Exception) as raised:
        await waiting
    assert getattr(raised.value, "sqlstate", None) == "40001"
    await second.rollback()
    assert await db.fetch("SELECT bal, note FROM acct") == [{"bal": 100, "note": "first"}]


async def test_dropping_the_existence_column_keeps_every_row(db: Database) -> None:
    await db.execute("CREATE TABLE t (k int PRIMARY KEY, v int NOT NULL, w text)")
    await db.execute("INSERT INTO t SELECT g, g, NULL FROM generate_series(1, 4) g")
    await db.execute("ALTER TABLE t DROP COLUMN v")
    await db.execute("INSERT INTO t VALUES (5, NULL)")
    assert await db.fetch("SELECT k, w FROM t ORDER BY k") == [
        {"k": k, "w": None} for k in range(1, 6)
    ]
    await db.execute("UPDATE t SET w = 'x' WHERE k IN (1, 5)")
    await db.execute("DELETE FROM t WHERE k = 2")
    assert await db.fetch("SELECT k, w FROM t ORDER BY k") == [
        {"k": 1, "w": "x"},
        {"k": 3, "w": None},
        {"k": 4, "w": None},
        {"k": 5, "w": "x"},
    ]


async def test_drop_not_null_on_the_existence_column_gives_rows_a_marker(db: Database) -> None:
    await db.execute("CREATE TABLE t (k int PRIMARY KEY, v int NOT NULL)")
    await db.execute("INSERT INTO t SELECT g, g FROM generate_series(1, 3) g")
    await db.execute("ALTER TABLE t ALTER COLUMN v DROP NOT NULL")
    await db.execute("INSERT INTO t VALUES (4, NULL)")
    await db.execute("UPDATE t SET v = NULL WHERE k = 1")
    assert await db.fetch("SELECT k, v FROM t ORDER BY k") == [
        {"k": 1, "v": None},
        {"k": 2, "v": 2},
        {"k": 3, "v": 3},
        {"k": 4, "v": None},
    ]
    assert await db.fetch("SELECT count(*) AS c FROM t WHERE v IS NULL") == [{"c": 2}]


async def test_a_delete_planned_before_drop_not_null_conflicts_with_it(db: Database) -> None:
    await db.execute("CREATE TABLE t (k int PRIMARY KEY, v int NOT NULL)")
    await db.execute("INSERT INTO t VALUES (1, 1), (2, 2)")
    txn = await db.client.begin()
    await (await db.sql(txn)).execute("DELETE FROM t WHERE k = 1")
    await db.execute("ALTER TABLE t ALTER COLUMN v DROP NOT NULL")
    with pytest.raises(Exception) as raised:
        await txn.commit()
    assert getattr(raised.value, "sqlstate", None) == "40001"
    assert await db.fetch("SELECT k, v FROM t ORDER BY k") == [{"k": 1, "v": 1}, {"k": 2, "v": 2}]


async def test_a_new_not_null_column_is_filled_before_rows_are_told_by_it(db: Database) -> None:
    await db.execute("CREATE TABLE t (k int PRIMARY KEY, n int)")
    await db.execute("INSERT INTO t SELECT g, NULL FROM generate_series(1, 3) g")
    with pytest.raises(SqlError) as raised:
        await db.execute("ALTER TABLE t ADD COLUMN c int NOT NULL")
    assert raised.value.sqlstate == "23502"
    with pytest.raises(SqlError) as raised:
        await db.execute("ALTER TABLE t ADD COLUMN c int NOT NULL DEFAULT NULL")
    assert raised.value.sqlstate == "23502"
    await db.execute("ALTER TABLE t ADD COLUMN c int NOT NULL DEFAULT 7")
    assert await db.fetch("SELECT k, c FROM t ORDER BY k") == [{"k": k, "c": 7} for k in (1, 2, 3)]
    await db.execute("UPDATE t SET n = 1 WHERE k = 2")
    with pytest.raises(SqlError) as raised:
        await db.execute("ALTER TABLE t ALTER COLUMN n SET NOT NULL")
    assert raised.value.sqlstate == "23502"
    assert await db.fetch("SELECT count(*) AS c FROM t") == [{"c": 3}]


async def test_a_new_primary_key_moves_rows_with_their_existence(db: Database) -> None:
    await db.execute("CREATE TABLE t (k int NOT NULL, v text NOT NULL)")
    await db.execute("INSERT INTO t VALUES (1, 'a'), (2, 'b')")
    await db.execute("ALTER TABLE t ADD PRIMARY KEY (v)")
    assert await db.fetch("SELECT k, v FROM t ORDER BY k") == [
        {"k": 1, "v": "a"},
        {"k": 2, "v": "b"},
    ]
    await db.execute("DELETE FROM t WHERE v = 'a'")
    assert await db.fetch("SELECT k FROM t") == [{"k": 2}]
