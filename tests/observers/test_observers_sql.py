"""CREATE OBSERVER end to end: a real server with its in-process worker, driven with psycopg
(and psql), over a fresh database of the embedded Postgres."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from tests.conftest import PostgresServer, create_database
from tests.server.conftest import SqlServer, start_sql_server


@pytest.fixture(scope="module")
def server(embedded_pg: PostgresServer) -> Iterator[SqlServer]:
    store = asyncio.run(create_database(embedded_pg.dsn, "obs"))
    thread, srv = start_sql_server(
        store, observer_retry_base=0.05, observer_max_failures=3, catalog_poll=0.2
    )
    yield srv
    thread.stop()


@pytest.fixture
def conn(server: SqlServer) -> Iterator[psycopg.Connection]:
    with psycopg.connect(server.conninfo(), autocommit=True) as c:
        yield c


def q(conn: psycopg.Connection, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    cur = conn.execute(sql, args or None)
    return cur.fetchall() if cur.description else []


def wait_for(check: Callable[[], Any], timeout: float = 20.0, what: str = "condition") -> Any:
    """Poll ``check`` until it returns something truthy."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def status(conn: psycopg.Connection, name: str) -> dict[str, Any]:
    cur = conn.execute("SELECT * FROM percolator.observers WHERE name = %s", (name,))
    row = cur.fetchone()
    assert row is not None, f"observer {name} not in percolator.observers"
    return dict(zip([d.name for d in cur.description], row, strict=True))


def idle(conn: psycopg.Connection, name: str) -> bool:
    s = status(conn, name)
    return s["pending"] == 0


def reset(conn: psycopg.Connection, *tables: str) -> None:
    for name in q(conn, "SELECT name FROM percolator.observers"):
        conn.execute(f"DROP OBSERVER {name[0]}")
    for t in tables:
        conn.execute(f"DROP TABLE IF EXISTS {t}")


def source_and_copies(conn: psycopg.Connection) -> None:
    """Fresh tables ``src (id, v)`` and ``copies (id, v)``, and no observer."""
    reset(conn, "src", "copies")
    conn.execute("CREATE TABLE src (id int PRIMARY KEY, v text)")
    conn.execute("CREATE TABLE copies (id int PRIMARY KEY, v text)")


def test_sql_body_sees_new_row_and_deletes(conn: psycopg.Connection) -> None:
    reset(conn, "docs", "lengths")
    conn.execute("CREATE TABLE docs (id int PRIMARY KEY, body text)")
    conn.execute("CREATE TABLE lengths (id int PRIMARY KEY, n int, gone boolean, obs text)")
    conn.execute(
        """CREATE OBSERVER doc_length ON docs (body) AS $$
            INSERT INTO lengths VALUES (NEW.id, length(NEW.body), TG_DELETED, TG_NAME)
            ON CONFLICT (id) DO UPDATE SET n = excluded.n, gone = excluded.gone
        $$"""
    )
    conn.execute("INSERT INTO docs VALUES (1, 'abc'), (2, 'hello')")
    expected = [(1, 3, False, "doc_length"), (2, 5, False, "doc_length")]
    wait_for(lambda: q(conn, "SELECT * FROM lengths ORDER BY id") == expected, what="lengths")
    conn.execute("UPDATE docs SET body = 'abcdef' WHERE id = 1")
    conn.execute("DELETE FROM docs WHERE id = 2")
    expected = [(1, 6, False, "doc_length"), (2, None, True, "doc_length")]
    wait_for(lambda: q(conn, "SELECT * FROM lengths ORDER BY id") == expected, what="update")
    wait_for(lambda: idle(conn, "doc_length"), what="idle")
    s = status(conn, "doc_length")
    assert (s["table_name"], s["columns"], s["kind"], s["mode"]) == (
        "docs",
        "body",
        "sql",
        "strong",
    )
    wait_for(lambda: status(conn, "doc_length")["commits"] >= 4, what="counters flushed")


def test_python_observer_and_rows_written_by_psql(server: SqlServer) -> None:
    psql = shutil.which("psql")
    if psql is None:
        pytest.skip("psql is not installed")
    with psycopg.connect(server.conninfo(), autocommit=True) as conn:
        reset(conn, "src", "copies")
        conn.execute("CREATE TABLE src (id int PRIMARY KEY, v text)")
        conn.execute("CREATE TABLE copies (id int PRIMARY KEY, v text)")
        conn.execute(
            "CREATE OBSERVER mirror ON src (v) EXECUTE 'tests.observers.programs:copy_value'"
        )
        subprocess.run(
            [psql, server.conninfo(), "-v", "ON_ERROR_STOP=1", "-c",
             "INSERT INTO src VALUES (1, 'one'), (2, 'two');"
             " UPDATE src SET v = 'uno' WHERE id = 1"],
            check=True,
            capture_output=True,
        )  # fmt: skip
        wait_for(
            lambda: q(conn, "SELECT * FROM copies ORDER BY id") == [(1, "uno"), (2, "two")],
            what="copies",
        )
        s = status(conn, "mirror")
        assert s["kind"] == "python"
        assert s["definition"] == "tests.observers.programs:copy_value"


def test_chain_of_three_observers(conn: psycopg.Connection) -> None:
    reset(conn, "t1", "t2", "t3", "t4")
    for t in ("t1", "t2", "t3", "t4"):
        conn.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, v int)")
    for a, b in (("t1", "t2"), ("t2", "t3"), ("t3", "t4")):
        conn.execute(
            f"CREATE OBSERVER {a}_to_{b} ON {a} (v) AS $$ INSERT INTO {b} VALUES "
            f"(NEW.id, NEW.v + 1) ON CONFLICT (id) DO UPDATE SET v = excluded.v $$"
        )
    conn.execute("INSERT INTO t1 SELECT g, g * 10 FROM generate_series(1, 20) g")
    expected = [(i, i * 10 + 3) for i in range(1, 21)]
    wait_for(lambda: q(conn, "SELECT * FROM t4 ORDER BY id") == expected, what="t4")


def test_weak_observer_runs_without_ack(conn: psycopg.Connection) -> None:
    reset(conn, "events", "counts")
    conn.execute("CREATE TABLE events (id int PRIMARY KEY, kind text)")
    conn.execute("CREATE TABLE counts (kind text PRIMARY KEY, n int)")
    conn.execute(
        """CREATE OBSERVER tally ON events (kind) WEAK AS $$
            INSERT INTO counts VALUES (NEW.kind, 1)
            ON CONFLICT (kind) DO UPDATE SET n = counts.n + 1
        $$"""
    )
    conn.execute("INSERT INTO events SELECT g, 'k' || (g % 3) FROM generate_series(1, 30) g")
    wait_for(lambda: q(conn, "SELECT sum(n) FROM counts") == [(30,)], what="counts")
    assert status(conn, "tally")["mode"] == "weak"
    # One run per event here (a single worker); that a weak observer writes no ack cells is
    # checked on the runtime (test_worker.py::test_weak_observer_writes_no_ack).
    assert q(conn, "SELECT kind, n FROM counts ORDER BY kind") == [
        ("k0", 10),
        ("k1", 10),
        ("k2", 10),
    ]


def test_failure_retry_park_and_replay(conn: psycopg.Connection) -> None:
    source_and_copies(conn)
    conn.execute("CREATE OBSERVER picky ON src (v) EXECUTE 'tests.observers.programs:fragile'")
    conn.execute("INSERT INTO src VALUES (1, 'fine'), (2, 'poison'), (3, 'also fine')")
    # The poisoned row does not hold the others back.
    wait_for(
        lambda: q(conn, "SELECT * FROM copies ORDER BY id") == [(1, "fine"), (3, "also fine")],
        what="healthy rows",
    )
    wait_for(lambda: status(conn, "picky")["parked"] == 1, what="parked")
    s = wait_for(lambda: (st := status(conn, "picky"))["failures"] >= 3 and st, what="failures")
    assert s["pending"] == 0
    assert "cannot digest row 2" in s["last_error"]
    assert s["last_error_at"] is not None
    parked = q(
        conn, "SELECT observer, table_name, row_key, attempts FROM percolator.parked_changes"
    )
    assert parked == [("picky", "src", "(2)", 3)]
    # Replaying without a fix parks it again; fixing the row (a new write) lets it through.
    notices: list[str] = []
    conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
    conn.execute("ALTER OBSERVER picky RETRY PARKED")
    assert notices == ["1 parked change(s) will run again"]
    wait_for(lambda: status(conn, "picky")["failures"] >= 6, what="failing again")
    wait_for(lambda: status(conn, "picky")["parked"] == 1, what="parked again")
    conn.execute("UPDATE src SET v = 'cured' WHERE id = 2")
    wait_for(lambda: q(conn, "SELECT v FROM copies WHERE id = 2") == [("cured",)], what="cured")
    assert status(conn, "picky")["parked"] == 0


def test_pause_keeps_changes_pending_and_resume_runs_them_once(conn: psycopg.Connection) -> None:
    reset(conn, "src", "runs")
    conn.execute("CREATE TABLE src (id int PRIMARY KEY, v text)")
    conn.execute("CREATE TABLE runs (id int, seen text, run_ts bigint, PRIMARY KEY (id, run_ts))")
    conn.execute("CREATE OBSERVER rec ON src (v) EXECUTE 'tests.observers.programs:record'")
    conn.execute("ALTER OBSERVER rec PAUSE")
    assert status(conn, "rec")["paused"] is True
    for value in ("a", "b", "c", "d"):
        conn.execute(
            "INSERT INTO src VALUES (1, %s) ON CONFLICT (id) DO UPDATE SET v = excluded.v",
            (value,),
        )
    time.sleep(1.0)
    assert q(conn, "SELECT count(*) FROM runs") == [(0,)]
    s = status(conn, "rec")
    assert s["pending"] == 1 and s["lag_ms"] >= 500
    conn.execute("ALTER OBSERVER rec RESUME")
    # Four writes collapse into one run, which sees the last value.
    wait_for(lambda: q(conn, "SELECT id, seen FROM runs") == [(1, "d")], what="one run")
    wait_for(lambda: idle(conn, "rec"), what="idle")
    time.sleep(0.5)
    assert q(conn, "SELECT count(*) FROM runs") == [(1,)]


def test_an_update_that_leaves_the_observed_column_unchanged_runs_nothing(
    conn: psycopg.Connection,
) -> None:
    # v is the table's existence column (its NOT NULL non-key column) until it is observed:
    # then the existing rows get a row marker and v is written only when it changes.
    reset(conn, "src", "runs")
    conn.execute("CREATE TABLE src (id int PRIMARY KEY, v text NOT NULL, other int)")
    conn.execute("INSERT INTO src VALUES (1, 'a', 0), (2, 'b', 0)")
    conn.execute("CREATE TABLE runs (id int, seen text, run_ts bigint, PRIMARY KEY (id, run_ts))")
    conn.execute("CREATE OBSERVER rec ON src (v) EXECUTE 'tests.observers.programs:record'")
    conn.execute("UPDATE src SET other = 1")
    conn.execute("UPDATE src SET v = 'c' WHERE id = 2")
    wait_for(lambda: q(conn, "SELECT id, seen FROM runs") == [(2, "c")], what="one run")
    conn.execute("UPDATE src SET other = 2 WHERE id = 2")
    conn.execute("DELETE FROM src WHERE id = 1")
    wait_for(lambda: q(conn, "SELECT count(*) FROM runs WHERE id = 1") == [(1,)], what="delete")
    time.sleep(0.5)
    assert q(conn, "SELECT id, seen FROM runs ORDER BY run_ts") == [(2, "c"), (1, None)]
    assert q(conn, "SELECT id, v, other FROM src") == [(2, "c", 2)]


def test_drop_observer_stops_runs(conn: psycopg.Connection) -> None:
    source_and_copies(conn)
    conn.execute("CREATE OBSERVER m ON src (v) EXECUTE 'tests.observers.programs:copy_value'")
    conn.execute("INSERT INTO src VALUES (1, 'x')")
    wait_for(lambda: q(conn, "SELECT v FROM copies") == [("x",)], what="first copy")
    conn.execute("DROP OBSERVER m")
    conn.execute("UPDATE src SET v = 'y' WHERE id = 1")
    time.sleep(1.0)
    assert q(conn, "SELECT v FROM copies") == [("x",)]
    assert q(conn, "SELECT count(*) FROM percolator.observers") == [(0,)]
    conn.execute("DROP OBSERVER IF EXISTS m")
    with pytest.raises(psycopg.errors.UndefinedObject):
        conn.execute("DROP OBSERVER m")


def test_observer_ddl_is_transactional(conn: psycopg.Connection) -> None:
    source_and_copies(conn)
    conn.execute("BEGIN")
    conn.execute("CREATE OBSERVER m ON src (v) EXECUTE 'tests.observers.programs:copy_value'")
    assert q(conn, "SELECT name FROM percolator.observers") == [("m",)]
    conn.execute("ROLLBACK")
    assert q(conn, "SELECT name FROM percolator.observers") == []
    conn.execute("INSERT INTO src VALUES (1, 'x')")
    time.sleep(0.8)
    assert q(conn, "SELECT count(*) FROM copies") == [(0,)]


def test_bad_definitions_are_refused_and_register_nothing(conn: psycopg.Connection) -> None:
    reset(conn, "src", "other")
    conn.execute("CREATE TABLE src (id int PRIMARY KEY, v text)")
    cases = [
        ("CREATE OBSERVER o ON nope (v) AS $$ SELECT 1 $$", psycopg.errors.UndefinedTable),
        ("CREATE OBSERVER o ON src (nope) AS $$ SELECT 1 $$", psycopg.errors.UndefinedColumn),
        ("CREATE OBSERVER o ON src (v) AS $$ SELEC 1 $$", psycopg.errors.SyntaxError),
        ("CREATE OBSERVER o ON src (v) AS $$ SELECT NEW.nope $$", psycopg.errors.UndefinedColumn),
        ("CREATE OBSERVER o ON src (v) AS $$ INSERT INTO nope VALUES (1) $$",
         psycopg.errors.UndefinedTable),
        ("CREATE OBSERVER o ON src (v) AS $$ CREATE TABLE x (a int) $$",
         psycopg.errors.FeatureNotSupported),
        ("CREATE OBSERVER o ON src (v) AS $$ SELECT $1 $$", psycopg.errors.SyntaxError),
        ("CREATE OBSERVER o ON src (v) EXECUTE 'no_such_module_xyz:f'",
         psycopg.errors.UndefinedFunction),
        ("CREATE OBSERVER o ON src (v) EXECUTE 'tests.observers.programs:missing'",
         psycopg.errors.UndefinedFunction),
        ("CREATE OBSERVER o ON src (v) EXECUTE 'tests.observers.programs:not_async'",
         psycopg.errors.InvalidFunctionDefinition),
        ("CREATE OBSERVER o ON src (v) EXECUTE 'nocolon'",
         psycopg.errors.InvalidFunctionDefinition),
        ("CREATE OBSERVER o ON src (v)", psycopg.errors.SyntaxError),
    ]  # fmt: skip
    for sql, error in cases:
        with pytest.raises(error):
            conn.execute(sql)
    assert q(conn, "SELECT count(*) FROM percolator.observers") == [(0,)]
    conn.execute("CREATE OBSERVER o ON src (v) AS $$ SELECT NEW.v $$")
    with pytest.raises(psycopg.errors.DuplicateObject):
        conn.execute("CREATE OBSERVER o ON src (id) AS $$ SELECT 1 $$")
    with pytest.raises(psycopg.errors.UndefinedObject):
        conn.execute("ALTER OBSERVER nope PAUSE")
    # The table and column an observer watches cannot be dropped from under it.
    with pytest.raises(psycopg.errors.DependentObjectsStillExist):
        conn.execute("DROP TABLE src")
    with pytest.raises(psycopg.errors.DependentObjectsStillExist):
        conn.execute("ALTER TABLE src DROP COLUMN v")
    conn.execute("DROP OBSERVER o")
    conn.execute("DROP TABLE src")


def test_syntax_error_position_points_into_the_body(conn: psycopg.Connection) -> None:
    reset(conn, "src")
    conn.execute("CREATE TABLE src (id int PRIMARY KEY, v text)")
    sql = "CREATE OBSERVER o ON src (v) AS $$ SELECT 1; SELEC 2 $$"
    with pytest.raises(psycopg.errors.SyntaxError) as info:
        conn.execute(sql)
    position = info.value.diag.statement_position
    assert position is not None
    assert sql[int(position) - 1 :] == "SELEC 2 $$"


def test_truncate_moves_the_watch_to_the_new_storage(conn: psycopg.Connection) -> None:
    source_and_copies(conn)
    conn.execute("CREATE OBSERVER m ON src (v) EXECUTE 'tests.observers.programs:copy_value'")
    conn.execute("INSERT INTO src VALUES (1, 'before')")
    wait_for(lambda: q(conn, "SELECT v FROM copies") == [("before",)], what="before")
    conn.execute("TRUNCATE src")
    conn.execute("INSERT INTO src VALUES (2, 'after')")
    wait_for(
        lambda: q(conn, "SELECT * FROM copies ORDER BY id") == [(1, "before"), (2, "after")],
        what="after truncate",
    )


def test_observers_fire_for_rows_written_through_the_python_api(
    server: SqlServer, conn: psycopg.Connection
) -> None:
    import percolator.clients as percolator

    source_and_copies(conn)
    conn.execute("CREATE OBSERVER m ON src (v) EXECUTE 'tests.observers.programs:copy_value'")

    async def write() -> list[dict[str, Any]]:
        db = await percolator.connect(
            server.store_dsn, coordinator=server.running.coordinator_address
        )
        try:
            assert await db.execute("INSERT INTO src VALUES ($1, $2)", 1, "api") == "INSERT 0 1"
            async with db.begin() as txn:
                sql = await db.sql(txn)
                await sql.execute("INSERT INTO src VALUES ($1, $2)", 2, "in a transaction")
                txn.set("unrelated", b"k", "c", b"cell API in the same transaction")
            return await db.fetch("SELECT id, v FROM src ORDER BY id")
        finally:
            await db.close()

    rows = asyncio.run(write())
    assert rows == [{"id": 1, "v": "api"}, {"id": 2, "v": "in a transaction"}]
    wait_for(
        lambda: (
            q(conn, "SELECT * FROM copies ORDER BY id") == [(1, "api"), (2, "in a transaction")]
        ),
        what="copies of rows written through the Python API",
    )


def test_python_api_jsonb_parameters_take_python_values(
    server: SqlServer, conn: psycopg.Connection
) -> None:
    import percolator.clients as percolator

    reset(conn, "j")
    conn.execute("CREATE TABLE j (id int PRIMARY KEY, v jsonb)")

    async def run() -> list[dict[str, Any]]:
        db = await percolator.connect(
            server.store_dsn, coordinator=server.running.coordinator_address
        )
        try:
            await db.execute("INSERT INTO j VALUES ($1, $2)", 1, {"b": 1, "a": [1, 2]})
            await db.execute("INSERT INTO j VALUES ($1, $2)", 2, '{"b": 1,   "a": [1,2]}')
            with pytest.raises(Exception, match="json"):
                await db.execute("INSERT INTO j VALUES ($1, $2)", 3, "{not json")
            return await db.fetch(
                "SELECT id FROM j WHERE v = $1 ORDER BY id", {"a": [1, 2], "b": 1}
            )
        finally:
            await db.close()

    assert asyncio.run(run()) == [{"id": 1}, {"id": 2}]
    assert q(conn, "SELECT v::text FROM j WHERE id = 2") == [('{"a": [1, 2], "b": 1}',)]
