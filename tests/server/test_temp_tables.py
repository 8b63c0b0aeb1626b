"""Temporary tables: scripts compared with real Postgres, and what other sessions see."""

from __future__ import annotations

import psycopg
import pytest

from tests.server import scripted
from tests.server.conftest import SqlServer

Pair = tuple[psycopg.Connection, psycopg.Connection]


@pytest.fixture(scope="module")
def pair(pg_pair: Pair) -> Pair:
    return pg_pair


def test_temp_tables(pair: Pair) -> None:
    scripted.compare(
        *pair,
        [
            "CREATE TABLE t (a int PRIMARY KEY, b text)",
            "INSERT INTO t VALUES (1, 'regular')",
            "CREATE TEMP TABLE t (a int PRIMARY KEY, b text NOT NULL, c int UNIQUE CHECK (c > 0))",
            "SELECT * FROM t",
            "INSERT INTO t VALUES (2, 'temp', 5) RETURNING *",
            "INSERT INTO t VALUES (3, 'temp', 5)",
            "INSERT INTO t VALUES (4, 'temp', -1)",
            "SELECT * FROM t",
            "SELECT * FROM pg_temp.t",
            "CREATE INDEX t_b ON t (b)",
            "SELECT a FROM t WHERE b = 'temp'",
            "UPDATE pg_temp.t SET b = 'changed' WHERE a = 2",
            "SELECT relkind FROM pg_class WHERE relname = 't' AND relpersistence = 't'",
            "SELECT table_type FROM information_schema.tables"
            " WHERE table_name = 't' AND table_type <> 'BASE TABLE'",
            "SELECT nspname LIKE 'pg_temp_%' FROM pg_class c JOIN pg_namespace n"
            " ON n.oid = c.relnamespace WHERE relname = 't_b'",
            "CREATE TEMP TABLE t (x int)",
            "CREATE TEMPORARY TABLE s (id serial, v text)",
            "INSERT INTO s (v) VALUES ('x'), ('y') RETURNING *",
            "ALTER TABLE s ADD COLUMN w int DEFAULT 7",
            "SELECT * FROM s ORDER BY id",
            "TRUNCATE s",
            "SELECT count(*) FROM s",
            "DROP TABLE t",
            "SELECT * FROM t",
            "DROP TABLE s",
            "BEGIN",
            "CREATE TEMP TABLE r (a int)",
            "INSERT INTO r VALUES (1)",
            "SELECT * FROM r",
            "ROLLBACK",
            "SELECT * FROM r",
            "CREATE TEMP TABLE d (a int) ON COMMIT DELETE ROWS",
            "INSERT INTO d VALUES (1)",
            "SELECT * FROM d",
            "BEGIN",
            "INSERT INTO d VALUES (2)",
            "SELECT * FROM d",
            "COMMIT",
            "SELECT * FROM d",
            "BEGIN",
            "CREATE TEMP TABLE x (a int) ON COMMIT DROP",
            "INSERT INTO x VALUES (1)",
            "SELECT * FROM x",
            "COMMIT",
            "SELECT * FROM x",
            "CREATE TEMP TABLE p (a int) ON COMMIT PRESERVE ROWS",
            "BEGIN",
            "INSERT INTO p VALUES (1)",
            "SAVEPOINT s1",
            "DROP TABLE p",
            "ROLLBACK TO SAVEPOINT s1",
            "COMMIT",
            "SELECT * FROM p",
            "CREATE TABLE pg_temp.q (a int)",
            "SELECT relpersistence FROM pg_class WHERE relname = 'q'",
            "DROP TABLE q, p, d",
        ],
    )


def test_other_sessions(sql_server: SqlServer) -> None:
    with (
        psycopg.connect(sql_server.conninfo(), autocommit=True) as one,
        psycopg.connect(sql_server.conninfo(), autocommit=True) as two,
    ):
        one.execute("CREATE TEMP TABLE mine (a int)")
        one.execute("INSERT INTO mine VALUES (1)")
        with pytest.raises(psycopg.errors.UndefinedTable):
            two.execute("SELECT * FROM mine")
        assert two.execute("SELECT count(*) FROM pg_class WHERE relname = 'mine'").fetchone() == (
            0,
        )
        two.execute("CREATE TEMP TABLE mine (b text)")
        two.execute("INSERT INTO mine VALUES ('two')")
        # The same statement text in both sessions: never one session's plan in the other.
        assert one.execute("SELECT * FROM mine").fetchall() == [(1,)]
        assert two.execute("SELECT * FROM mine").fetchall() == [("two",)]
        assert one.execute("SELECT * FROM mine").fetchall() == [(1,)]
    with psycopg.connect(sql_server.conninfo(), autocommit=True) as three:
        with pytest.raises(psycopg.errors.UndefinedTable):
            three.execute("SELECT * FROM mine")
        three.execute("CREATE TEMP TABLE mine (c int)")
        assert three.execute("SELECT * FROM mine").fetchall() == []


def test_session_end_retires_storage(sql_server: SqlServer) -> None:
    with psycopg.connect(sql_server.conninfo(), autocommit=True) as one:
        one.execute("CREATE TEMP TABLE gone (a int PRIMARY KEY)")
        one.execute("INSERT INTO gone VALUES (1)")
    with psycopg.connect(sql_server.store_dsn) as store:
        rows = store.execute("SELECT 1").fetchall()
    assert rows == [(1,)]
