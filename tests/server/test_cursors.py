"""SQL cursors (DECLARE, FETCH, MOVE, CLOSE) against real Postgres, and through the clients
that use them: psycopg's server-side cursors, asyncpg's Cursor and psql's FETCH_COUNT.

The scripts run statement by statement on our server and on the real Postgres under the tests,
and every outcome must agree: the rows, the command tag, or the SQLSTATE. Cursors here are
declared SCROLL when a script moves backward: Postgres lets a cursor declared without SCROLL
go backward when its plan can, which no plan of ours can (we answer 55000, as Postgres does
for such plans; tested on its own)."""

from __future__ import annotations

import asyncio
import os
import subprocess

import asyncpg
import psycopg
import pytest

from tests.server import scripted
from tests.server.conftest import SqlServer

SETUP = [
    "CREATE TABLE cur (n int PRIMARY KEY, word text)",
    "INSERT INTO cur SELECT g, 'w' || g FROM generate_series(1, 10) AS g",
]


@pytest.fixture(scope="module")
def pair(
    pg_pair: tuple[psycopg.Connection, psycopg.Connection],
) -> tuple[psycopg.Connection, ...]:
    for conn in pg_pair:
        for sql in SETUP:
            conn.execute(sql)
    return pg_pair


def compare(pair: tuple[psycopg.Connection, ...], script: list[str]) -> None:
    try:
        scripted.compare(*pair, script)
    finally:
        for conn in pair:
            conn.execute("ROLLBACK")
            conn.execute("CLOSE ALL")


def test_forward_fetch_and_move(pair: tuple[psycopg.Connection, ...]) -> None:
    compare(
        pair,
        [
            "BEGIN",
            "DECLARE c CURSOR FOR SELECT n, word FROM cur WHERE n > 2 ORDER BY n",
            "FETCH c",
            "FETCH 2 FROM c",
            "FETCH NEXT IN c",
            "MOVE 2 IN c",
            "FETCH FORWARD 1 FROM c",
            "MOVE FORWARD ALL FROM c",
            "FETCH c",
            "FETCH ALL FROM c",
            "CLOSE c",
            "FETCH c",
        ],
    )


def test_scroll_cursor_moves_both_ways(pair: tuple[psycopg.Connection, ...]) -> None:
    compare(
        pair,
        [
            "BEGIN",
            "DECLARE s SCROLL CURSOR FOR SELECT n FROM cur ORDER BY n",
            "FETCH 3 FROM s",
            "FETCH PRIOR FROM s",
            "FETCH RELATIVE 0 FROM s",
            "FETCH LAST FROM s",
            "FETCH NEXT FROM s",
            "FETCH NEXT FROM s",
            "FETCH PRIOR FROM s",
            "FETCH ABSOLUTE 4 FROM s",
            "FETCH ABSOLUTE -3 FROM s",
            "FETCH RELATIVE -2 FROM s",
            "FETCH RELATIVE 3 FROM s",
            "FETCH BACKWARD 3 FROM s",
            "FETCH -2 FROM s",
            "FETCH BACKWARD ALL FROM s",
            "FETCH PRIOR FROM s",
            "FETCH FIRST FROM s",
            "MOVE LAST IN s",
            "MOVE BACKWARD 4 IN s",
            "FETCH FORWARD 0 FROM s",
            "MOVE ABSOLUTE 0 IN s",
            "FETCH RELATIVE 0 FROM s",
            "MOVE ABSOLUTE 100 IN s",
            "FETCH ALL FROM s",
            "MOVE BACKWARD ALL IN s",
            "FETCH ABSOLUTE 11 FROM s",
            "FETCH PRIOR FROM s",
        ],
    )


def test_cursor_lifetimes(pair: tuple[psycopg.Connection, ...]) -> None:
    compare(
        pair,
        [
            "DECLARE outside CURSOR FOR SELECT 1",
            "BEGIN",
            "DECLARE a CURSOR FOR SELECT n FROM cur ORDER BY n",
            "DECLARE h CURSOR WITH HOLD FOR SELECT n, word FROM cur WHERE n <= 4 ORDER BY n",
            "FETCH h",
            # is_scrollable differs: true in Postgres where the plan can run backward
            "SELECT name, statement, is_holdable, is_binary FROM pg_cursors ORDER BY name",
            "COMMIT",
            "FETCH a",
            "FETCH 2 FROM h",
            "SELECT name FROM pg_cursors",
            "BEGIN",
            "DECLARE gone CURSOR WITH HOLD FOR SELECT 1",
            "ROLLBACK",
            "FETCH gone",
            "FETCH ALL FROM h",
            "CLOSE h",
            "CLOSE h",
            "DECLARE auto CURSOR WITH HOLD FOR SELECT n FROM cur WHERE n > 8 ORDER BY n",
            "FETCH ALL FROM auto",
            "CLOSE ALL",
            "FETCH auto",
        ],
    )


def test_savepoints_and_errors(pair: tuple[psycopg.Connection, ...]) -> None:
    compare(
        pair,
        [
            "BEGIN",
            "DECLARE before CURSOR FOR SELECT n FROM cur ORDER BY n",
            "SAVEPOINT sp",
            "DECLARE inside CURSOR FOR SELECT n FROM cur ORDER BY n",
            "FETCH inside",
            "ROLLBACK TO SAVEPOINT sp",
            "FETCH before",
            "FETCH inside",
            "ROLLBACK",
            "BEGIN",
            "SAVEPOINT outer_sp",
            "SAVEPOINT inner_sp",
            "DECLARE kept CURSOR FOR SELECT n FROM cur ORDER BY n",
            "RELEASE SAVEPOINT inner_sp",
            "SAVEPOINT again",
            "ROLLBACK TO SAVEPOINT again",
            "FETCH kept",
            "DECLARE kept CURSOR FOR SELECT 1",
            "FETCH kept",
            "ROLLBACK",
            "BEGIN",
            "DECLARE w CURSOR FOR INSERT INTO cur VALUES (99, 'x')",
            "ROLLBACK",
            "BEGIN",
            "DECLARE m CURSOR FOR SELECT nosuch FROM cur",
            "ROLLBACK",
            "BEGIN",
            # (Postgres computes a row when it is fetched, we a page of rows at a time: an
            # error in a row not fetched yet may show earlier here, so all are fetched.)
            "DECLARE z CURSOR FOR SELECT 10 / (n - 3) FROM cur ORDER BY n",
            "FETCH ALL FROM z",
            "FETCH z",
            "ROLLBACK",
            "FETCH FORWARD 5 FROM nowhere",
            "MOVE nowhere",
            "CLOSE nowhere",
        ],
    )


def test_cursor_does_not_see_later_writes(pair: tuple[psycopg.Connection, ...]) -> None:
    compare(
        pair,
        [
            "BEGIN",
            "INSERT INTO cur VALUES (11, 'w11')",
            "DECLARE c CURSOR FOR SELECT n, word FROM cur ORDER BY n",
            "FETCH 2 FROM c",
            "UPDATE cur SET word = 'changed' WHERE n IN (1, 5, 11)",
            "DELETE FROM cur WHERE n = 7",
            "INSERT INTO cur VALUES (12, 'w12')",
            "FETCH ALL FROM c",
            "SELECT n, word FROM cur WHERE n IN (1, 5, 7, 11, 12) ORDER BY n",
            "ROLLBACK",
        ],
    )


def test_cursor_without_scroll_only_goes_forward(sql_server: SqlServer) -> None:
    with psycopg.connect(sql_server.conninfo()) as conn:
        conn.execute("DECLARE f NO SCROLL CURSOR FOR SELECT n FROM cur ORDER BY n")
        assert conn.execute("FETCH 2 FROM f").fetchall() == [(1,), (2,)]
        assert conn.execute("FETCH ABSOLUTE 5 FROM f").fetchall() == [(5,)]
        assert conn.execute("MOVE RELATIVE 2 IN f").statusmessage == "MOVE 1"
        with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState) as info:
            conn.execute("FETCH PRIOR FROM f")
        hint = "Declare it with SCROLL option to enable backward scan."
        assert info.value.diag.message_hint == hint
        conn.rollback()
        conn.execute("DECLARE d CURSOR FOR SELECT n FROM cur ORDER BY n")
        with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState):
            conn.execute("FETCH LAST FROM d")
        conn.rollback()
        with pytest.raises(psycopg.errors.FeatureNotSupported):
            conn.execute("DECLARE b BINARY CURSOR FOR SELECT 1")


def test_read_committed_cursor_keeps_its_snapshot(sql_server: SqlServer) -> None:
    with (
        psycopg.connect(sql_server.conninfo()) as reader,
        psycopg.connect(sql_server.conninfo(), autocommit=True) as writer,
    ):
        reader.execute("SET TRANSACTION ISOLATION LEVEL READ COMMITTED")
        reader.execute("DECLARE rc CURSOR FOR SELECT n FROM cur WHERE n >= 9 ORDER BY n")
        assert reader.execute("FETCH rc").fetchall() == [(9,)]
        writer.execute("INSERT INTO cur VALUES (50, 'late')")
        try:
            # The next statement sees the commit; the cursor does not.
            assert reader.execute("SELECT count(*) FROM cur WHERE n = 50").fetchone() == (1,)
            assert reader.execute("FETCH ALL FROM rc").fetchall() == [(10,)]
        finally:
            reader.rollback()
            writer.execute("DELETE FROM cur WHERE n = 50")


def test_psycopg_server_side_cursors(sql_server: SqlServer) -> None:
    with psycopg.connect(sql_server.conninfo()) as conn:
        with conn.cursor("named") as cur:
            cur.itersize = 3
            cur.execute("SELECT n, word FROM cur WHERE n > %s ORDER BY n", (2,))
            assert [d.name for d in cur.description] == ["n", "word"]
            assert cur.fetchone() == (3, "w3")
            assert cur.fetchmany(2) == [(4, "w4"), (5, "w5")]
            assert list(cur) == [(n, f"w{n}") for n in range(6, 11)]
        with conn.cursor("scrolling", scrollable=True) as cur:
            cur.execute("SELECT n FROM cur ORDER BY n")
            assert cur.fetchmany(4) == [(1,), (2,), (3,), (4,)]
            cur.scroll(-2)
            assert cur.fetchone() == (3,)
            cur.scroll(7, mode="absolute")
            assert cur.fetchall() == [(8,), (9,), (10,)]
        with conn.cursor("binary", binary=True) as cur:
            cur.execute("SELECT n, word FROM cur WHERE n = %s", (7,))
            assert cur.fetchall() == [(7, "w7")]
        conn.commit()
    with psycopg.connect(sql_server.conninfo(), autocommit=True) as conn:
        with conn.cursor("held", withhold=True) as cur:
            cur.execute("SELECT n FROM cur WHERE n <= 3 ORDER BY n")
            assert cur.fetchall() == [(1,), (2,), (3,)]
        assert conn.execute("SELECT count(*) FROM pg_cursors").fetchone() == (0,)


def test_asyncpg_cursor_forward(sql_server: SqlServer) -> None:
    async def check() -> None:
        conn = await asyncpg.connect(sql_server.url())
        try:
            async with conn.transaction():
                cursor = await conn.cursor("SELECT n FROM cur WHERE n > $1 ORDER BY n", 1)
                assert await cursor.forward(3) == 3
                assert [r[0] for r in await cursor.fetch(2)] == [5, 6]
                assert await cursor.forward(10) == 4
                assert await cursor.fetch(1) == []
        finally:
            await conn.close()

    asyncio.run(check())


def test_psql_fetch_count(sql_server: SqlServer) -> None:
    env = {**os.environ, "PGCONNECT_TIMEOUT": "10"}
    query = "SELECT n, word FROM cur ORDER BY n"
    outputs = [
        subprocess.run(
            ["psql", sql_server.conninfo(), "-X", "-A", "-t", *extra, "-c", query],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
            check=True,
        ).stdout
        for extra in ([], ["-v", "FETCH_COUNT=3"])
    ]
    assert outputs[0] == outputs[1]
    assert outputs[1].splitlines()[:2] == ["1|w1", "2|w2"]


def test_a_for_update_cursor_locks_rows_as_it_fetches_them(sql_server: SqlServer) -> None:
    """As in Postgres: the rows fetched are locked until the transaction ends; those not
    fetched yet are not (another session changes them without waiting); WHERE CURRENT OF is
    refused by name."""
    with (
        psycopg.connect(sql_server.conninfo(), autocommit=True) as admin,
        psycopg.connect(sql_server.conninfo()) as reader,
    ):
        admin.execute("DROP TABLE IF EXISTS cur_lock")
        admin.execute("CREATE TABLE cur_lock (id int PRIMARY KEY, v int NOT NULL)")
        admin.execute("INSERT INTO cur_lock SELECT g, g FROM generate_series(1, 600) g")
        reader.execute("DECLARE c CURSOR FOR SELECT id FROM cur_lock ORDER BY id FOR UPDATE")
        assert reader.execute("FETCH 2 FROM c").fetchall() == [(1,), (2,)]
        with pytest.raises(psycopg.errors.LockNotAvailable):
            admin.execute("SELECT id FROM cur_lock WHERE id = 2 FOR UPDATE NOWAIT")
        assert admin.execute(
            "SELECT id FROM cur_lock WHERE id = 3 FOR UPDATE NOWAIT"
        ).fetchall() == [(3,)]
        assert admin.execute("UPDATE cur_lock SET v = 0 WHERE id = 500").rowcount == 1
        with pytest.raises(psycopg.errors.FeatureNotSupported, match="CURRENT OF"):
            reader.execute("UPDATE cur_lock SET v = 1 WHERE CURRENT OF c")
        reader.rollback()
