"""``prefetch`` of the Python API (observers and clients): rows of several tables read in one
batch, then found by the statements that follow without reading the store again."""

from __future__ import annotations

import pytest

from percolator.clients import Rows
from percolator.clients.database import Database
from percolator.server.sql.errors import SqlError


async def reads(db: Database) -> int:
    return db.client.store.stats.round_trips["read"]


@pytest.fixture
async def db(api_db: Database) -> Database:
    await api_db.execute("CREATE TABLE docs (url text PRIMARY KEY, c text, n int)")
    await api_db.execute("CREATE TABLE pairs (a text, b text, v text, PRIMARY KEY (a, b))")
    await api_db.execute("CREATE INDEX pairs_v ON pairs (v)")
    await api_db.execute("CREATE TABLE nokey (x int)")
    await api_db.execute(
        "INSERT INTO docs SELECT 'u' || g, 'c' || g, g FROM generate_series(1, 20) g"
    )
    await api_db.execute("INSERT INTO pairs VALUES ('a', 'b', 'old')")
    await api_db.client.secondaries.drain()
    return api_db


async def test_statements_after_a_prefetch_read_nothing_more(db: Database) -> None:
    async with db.begin() as txn:
        sql = await db.sql(txn)
        before = await reads(db)
        await sql.prefetch(
            {"docs": ["u1", "u2", "u3", "absent"], "pairs": [("a", "b"), ("a", "c")]}
        )
        assert await reads(db) - before == 2  # one batch: a round trip per shard
        before = await reads(db)
        rows = await sql.fetch(
            "SELECT url, c, n FROM docs WHERE url IN ($1, $2, $3, $4) ORDER BY url",
            "u1",
            "u2",
            "u3",
            "absent",
        )
        tag = await sql.execute(
            "INSERT INTO pairs VALUES ('a', 'b', 'new'), ('a', 'c', 'x') "
            "ON CONFLICT (a, b) DO UPDATE SET v = excluded.v"
        )
        assert await reads(db) - before == 0
    assert rows == [{"url": f"u{i}", "c": f"c{i}", "n": i} for i in (1, 2, 3)]
    assert tag == "INSERT 0 2"
    assert await db.fetch("SELECT a, b, v FROM pairs WHERE v IN ('new', 'x') ORDER BY b") == [
        {"a": "a", "b": "b", "v": "new"},
        {"a": "a", "b": "c", "v": "x"},
    ]


async def test_prefetch_of_some_columns(db: Database) -> None:
    async with db.begin() as txn:
        sql = await db.sql(txn)
        await sql.prefetch({"docs": ["u4", "u5"]}, columns={"docs": ["c"]})
        before = await reads(db)
        assert await sql.fetchval("SELECT c FROM docs WHERE url = 'u4'") == "c4"
        assert await reads(db) == before
        assert await sql.fetchval("SELECT n FROM docs WHERE url = 'u5'") == 5
        assert await reads(db) > before  # n was not prefetched


async def test_prefetch_of_rows_with_columns_of_their_own(db: Database) -> None:
    async with db.begin() as txn:
        sql = await db.sql(txn)
        before = await reads(db)
        await sql.prefetch(
            [
                Rows("docs", ["u8"]),
                Rows("docs", ["u9", "u10", "absent"], ["c"]),
                Rows("pairs", [("a", "b")], ["v"]),
            ]
        )
        assert await reads(db) - before == 2  # one batch: a round trip per shard
        before = await reads(db)
        assert await sql.fetchrow("SELECT c, n FROM docs WHERE url = 'u8'") == {"c": "c8", "n": 8}
        assert await sql.fetch(
            "SELECT url, c FROM docs WHERE url IN ('u9', 'u10', 'absent') ORDER BY url"
        ) == [{"url": "u10", "c": "c10"}, {"url": "u9", "c": "c9"}]
        assert await sql.fetchval("SELECT v FROM pairs WHERE a = 'a' AND b = 'b'") == "old"
        assert await reads(db) == before
        assert await sql.fetchval("SELECT n FROM docs WHERE url = 'u9'") == 9
        assert await reads(db) > before  # n of u9 was not prefetched


async def test_prefetch_sees_the_transactions_own_writes_and_snapshot(db: Database) -> None:
    async with db.begin() as txn:
        sql = await db.sql(txn)
        await sql.execute("UPDATE docs SET c = 'mine' WHERE url = 'u6'")
        await db.execute("UPDATE docs SET c = 'theirs' WHERE url = 'u7'")  # after our snapshot
        await sql.prefetch({"docs": ["u6", "u7"]})
        got = await sql.fetch("SELECT url, c FROM docs WHERE url IN ('u6', 'u7') ORDER BY url")
    assert got == [{"url": "u6", "c": "mine"}, {"url": "u7", "c": "c7"}]


@pytest.mark.parametrize(
    ("rows", "columns", "sqlstate"),
    [
        ({"missing": ["x"]}, None, "42P01"),
        ({"docs": ["u1"]}, {"docs": ["nope"]}, "42703"),
        ({"pairs": ["a"]}, None, "22023"),
        ({"nokey": [1]}, None, "0A000"),
        ([Rows("docs", ["u1"], ["nope"])], None, "42703"),
        ([Rows("pairs", [("a",)])], None, "22023"),
    ],
)
async def test_bad_prefetch_is_refused_and_the_transaction_goes_on(
    db: Database, rows: dict, columns: dict | None, sqlstate: str
) -> None:
    async with db.begin() as txn:
        sql = await db.sql(txn)
        with pytest.raises(SqlError) as info:
            await sql.prefetch(rows, columns)
        assert info.value.sqlstate == sqlstate
        assert await sql.fetchval("SELECT c FROM docs WHERE url = 'u1'") == "c1"
