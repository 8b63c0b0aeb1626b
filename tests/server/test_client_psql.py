"""psql 15 against the SQL server, through a subprocess: queries, meta-commands, errors, COPY,
transactions, and password authentication."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess

import pytest

from tests.conftest import PostgresServer, create_database
from tests.server.conftest import SqlServer, start_sql_server

pytestmark = pytest.mark.skipif(shutil.which("psql") is None, reason="psql is not installed")


def psql(
    server: SqlServer,
    *args: str,
    stdin: str | None = None,
    password: str | None = None,
    user: str | None = None,
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PGCONNECT_TIMEOUT": "10"}
    env.pop("PGPASSWORD", None)
    if password is not None:
        env["PGPASSWORD"] = password
    cmd = [
        "psql",
        "-X",
        "-h",
        server.host,
        "-p",
        str(server.port),
        "-U",
        user or server.user,
        "-d",
        "postgres",
        "-v",
        "ON_ERROR_STOP=1",
        *args,
    ]
    return subprocess.run(cmd, input=stdin, capture_output=True, text=True, env=env, timeout=60)


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_query_and_aligned_output(sql_server: SqlServer) -> None:
    ok(
        psql(
            sql_server,
            "-c",
            "CREATE TABLE items (id int PRIMARY KEY, name varchar(20), "
            "price numeric(8,2) NOT NULL DEFAULT 0, seen timestamptz)",
        )
    )
    ok(
        psql(
            sql_server,
            "-c",
            "INSERT INTO items VALUES (1, 'apple', 1.25, "
            "'2024-01-02 03:04:05+00'), (2, 'pear', 2, NULL)",
        )
    )
    out = ok(
        psql(sql_server, "-A", "-t", "-c", "SELECT id, name, price, seen FROM items ORDER BY id")
    )
    assert out.splitlines() == ["1|apple|1.25|2024-01-02 03:04:05+00", "2|pear|2.00|"]


def test_meta_commands_describe_the_table(sql_server: SqlServer) -> None:
    ok(
        psql(
            sql_server,
            "-c",
            "CREATE TABLE IF NOT EXISTS items (id int PRIMARY KEY, name "
            "varchar(20), price numeric(8,2) NOT NULL DEFAULT 0, seen timestamptz)",
        )
    )
    listing = ok(psql(sql_server, "-c", r"\dt"))
    assert "items" in listing and "table" in listing
    described = ok(psql(sql_server, "-c", r"\d items"))
    assert "character varying(20)" in described
    assert "numeric(8,2)" in described and "not null" in described
    assert "items_pkey" in described
    assert "postgres" in ok(psql(sql_server, "-c", r"\l"))
    assert "public" in ok(psql(sql_server, "-c", r"\dn"))
    assert "postgres" in ok(psql(sql_server, "-c", r"\du"))


def test_errors_carry_sqlstate_and_position(sql_server: SqlServer) -> None:
    result = psql(sql_server, "-v", "VERBOSITY=verbose", "-c", "SELECT nosuch FROM items")
    assert result.returncode != 0
    assert "42703" in result.stderr or "42P01" in result.stderr
    result = psql(sql_server, "-c", "SELECT * FROM items WHERE")
    assert result.returncode != 0 and "syntax error" in result.stderr


def test_script_with_transaction_and_copy(sql_server: SqlServer) -> None:
    script = """
CREATE TABLE ledger (id int PRIMARY KEY, amount int);
BEGIN;
INSERT INTO ledger VALUES (1, 10);
SAVEPOINT s;
INSERT INTO ledger VALUES (2, 20);
ROLLBACK TO SAVEPOINT s;
COMMIT;
COPY ledger (id, amount) FROM STDIN;
3\t30
4\t40
\\.
SELECT id, amount FROM ledger ORDER BY id;
"""
    out = ok(psql(sql_server, "-q", "-A", "-t", "-f", "-", stdin=script))
    assert out.split() == ["1|10", "3|30", "4|40"]
    copied = ok(
        psql(
            sql_server,
            "-c",
            "COPY (SELECT id, amount FROM ledger ORDER BY id) TO STDOUT WITH (FORMAT csv)",
        )
    )
    assert copied.split() == ["1,10", "3,30", "4,40"]


def test_failed_transaction_block_reports_25p02(sql_server: SqlServer) -> None:
    script = "BEGIN;\nSELECT 1/0;\nSELECT 1;\nROLLBACK;\n"
    result = psql(sql_server, "-v", "ON_ERROR_STOP=0", "-f", "-", stdin=script)
    assert "division by zero" in result.stderr
    assert "current transaction is aborted" in result.stderr


def test_commit_and_rollback_end_the_implicit_transaction_of_a_query(
    sql_server: SqlServer,
) -> None:
    """``psql -c`` sends its statements as one Query: one implicit transaction, which a
    COMMIT or ROLLBACK in it ends (with Postgres's warning), and later statements run in a
    new one."""
    ok(psql(sql_server, "-c", "CREATE TABLE implicit_end (a int)"))
    committed = psql(
        sql_server,
        "-v",
        "ON_ERROR_STOP=0",
        "-c",
        "INSERT INTO implicit_end VALUES (7); COMMIT; INSERT INTO implicit_end VALUES (8);"
        " SELECT 1/0",
    )
    assert "there is no transaction in progress" in committed.stderr
    assert "division by zero" in committed.stderr
    rolled_back = ok(psql(sql_server, "-c", "INSERT INTO implicit_end VALUES (9); ROLLBACK"))
    assert "ROLLBACK" in rolled_back
    out = ok(psql(sql_server, "-A", "-t", "-c", "SELECT a FROM implicit_end ORDER BY a"))
    assert out.split() == ["7"]


def test_rename_without_the_column_keyword_renames_the_column(sql_server: SqlServer) -> None:
    ok(psql(sql_server, "-c", "CREATE TABLE renamed_col (a int, b int)"))
    ok(psql(sql_server, "-c", "INSERT INTO renamed_col VALUES (1, 2)"))
    ok(psql(sql_server, "-c", "ALTER TABLE renamed_col RENAME b TO c"))
    out = ok(psql(sql_server, "-A", "-t", "-c", "SELECT a, c FROM renamed_col"))
    assert out.split() == ["1|2"]


@pytest.fixture(scope="module")
def password_server(embedded_pg: PostgresServer):  # type: ignore[no-untyped-def]
    store = asyncio.run(create_database(embedded_pg.dsn, "pw"))
    thread, server = start_sql_server(store, auth="scram-sha-256", password="s3cret")
    yield server
    thread.stop()


def test_scram_login_and_role_management(password_server: SqlServer) -> None:
    assert (
        ok(
            psql(password_server, "-A", "-t", "-c", "SELECT current_user", password="s3cret")
        ).strip()
        == "postgres"
    )
    bad = psql(password_server, "-c", "SELECT 1", password="wrong")
    assert bad.returncode != 0 and "password authentication failed" in bad.stderr
    ok(psql(password_server, "-c", "CREATE USER alice PASSWORD 'wonder'", password="s3cret"))
    as_alice = psql(
        password_server, "-A", "-t", "-c", "SELECT current_user", password="wonder", user="alice"
    )
    assert ok(as_alice).strip() == "alice"
    ok(psql(password_server, "-c", "ALTER USER alice PASSWORD 'land'", password="s3cret"))
    assert psql(password_server, "-c", "SELECT 1", password="wonder", user="alice").returncode != 0
    assert (
        ok(
            psql(password_server, "-A", "-t", "-c", "SELECT 1", password="land", user="alice")
        ).strip()
        == "1"
    )
    ok(psql(password_server, "-c", "DROP USER alice", password="s3cret"))
    gone = psql(password_server, "-c", "SELECT 1", password="land", user="alice")
    assert gone.returncode != 0 and "password authentication failed" in gone.stderr


FOREIGN_KEYS = """
CREATE TABLE fk_parent (id int PRIMARY KEY, code text UNIQUE, a int, b int, UNIQUE (a, b));
CREATE TABLE fk_child (
    id int PRIMARY KEY,
    p int REFERENCES fk_parent ON DELETE CASCADE,
    code text REFERENCES fk_parent (code) ON UPDATE CASCADE ON DELETE SET NULL,
    x int, y int,
    CONSTRAINT fk_child_xy FOREIGN KEY (y, x) REFERENCES fk_parent (b, a)
        ON UPDATE RESTRICT ON DELETE SET NULL
);
CREATE TABLE "Fk Other" (id int PRIMARY KEY, "Child" int REFERENCES fk_child);
"""


@pytest.fixture(scope="module")
def foreign_keys(sql_server: SqlServer, reference_dsn: str) -> tuple[SqlServer, str]:
    """The server and the reference Postgres after FOREIGN_KEYS ran on both."""
    ok(psql(sql_server, "-q", "-f", "-", stdin=FOREIGN_KEYS))
    ok(psql_dsn(reference_dsn, "-q", "-f", "-", stdin=FOREIGN_KEYS))
    return sql_server, reference_dsn


def _described(foreign_keys: tuple[SqlServer, str], table: str) -> tuple[str, str]:
    """``\\d table`` as psql prints it against the server and against Postgres."""
    server, reference = foreign_keys
    command = rf"\d {table}"
    return ok(psql(server, "-c", command)), ok(psql_dsn(reference, "-c", command))


def test_describe_shows_foreign_key_constraints(foreign_keys: tuple[SqlServer, str]) -> None:
    """``\\d`` of a referencing table: the "Foreign-key constraints:" footer, line for line as
    psql prints it against Postgres (pg_get_constraintdef's text, quoting, actions)."""
    ours, real = _described(foreign_keys, '"Fk Other"')
    assert ours == real
    ours, real = _described(foreign_keys, "fk_child")
    assert ours.split("Referenced by:")[0] == real.split("Referenced by:")[0]
    assert (
        '    "fk_child_p_fkey" FOREIGN KEY (p) REFERENCES fk_parent(id) ON DELETE CASCADE\n' in ours
    )


def test_describe_shows_references_to_the_table(foreign_keys: tuple[SqlServer, str]) -> None:
    """``\\d`` of a referenced table: the "Referenced by:" footer as against Postgres."""
    for table in ("fk_parent", "fk_child"):
        ours, real = _described(foreign_keys, table)
        assert ours == real, table


def psql_dsn(dsn: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """psql against a connection string (the reference Postgres)."""
    env = {**os.environ, "PGCONNECT_TIMEOUT": "10"}
    cmd = ["psql", "-X", "-d", dsn, "-v", "ON_ERROR_STOP=1", *args]
    return subprocess.run(cmd, input=stdin, capture_output=True, text=True, env=env, timeout=60)
