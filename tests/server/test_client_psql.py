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


META = """
CREATE SCHEMA meta;
CREATE TYPE meta.mood AS ENUM ('sad', 'ok', 'happy');
CREATE TABLE meta.parent (
    id serial PRIMARY KEY, code text UNIQUE NOT NULL, created timestamptz DEFAULT now()
);
COMMENT ON TABLE meta.parent IS 'the parents';
COMMENT ON COLUMN meta.parent.code IS 'a code';
CREATE TABLE meta.child (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    pid int REFERENCES meta.parent ON DELETE CASCADE,
    qty numeric(8,2) NOT NULL DEFAULT 0 CHECK (qty >= 0), m meta.mood, name varchar(20)
);
CREATE INDEX child_name_idx ON meta.child (name);
CREATE TABLE meta.gen (
    id int PRIMARY KEY, price numeric(8,2), qty int NOT NULL,
    total numeric GENERATED ALWAYS AS (price * qty::numeric) STORED,
    tag text GENERATED ALWAYS AS (lower('Q' || qty)) STORED NOT NULL
);
CREATE TABLE meta.users (id int PRIMARY KEY, email text, name text, a int, b int);
CREATE UNIQUE INDEX users_lower_email ON meta.users (lower(email));
CREATE INDEX ON meta.users ((a + b) DESC, (a::text));
CREATE INDEX ON meta.users (lower(name), id);
CREATE SEQUENCE meta.seq1 START 10 INCREMENT 5;
CREATE VIEW meta.v_join AS
    SELECT c.id, p.code AS pc, c.qty * 2 AS dbl, upper(c.name)
    FROM meta.child c JOIN meta.parent p ON p.id = c.pid
    WHERE c.name LIKE 'a%' AND c.qty BETWEEN 1 AND 5 ORDER BY c.id LIMIT 10;
CREATE VIEW meta.v_left AS
    SELECT p.code, c.id FROM meta.parent p LEFT JOIN meta.child c ON c.pid = p.id
    WHERE p.code = 'x' OR c.id IS NULL;
CREATE VIEW meta.v_one AS SELECT id, qty FROM meta.child WHERE qty > 1;
CREATE VIEW meta.v_misc AS
    SELECT DISTINCT c.name FROM meta.child c, meta.parent p WHERE c.pid = p.id
    ORDER BY c.name DESC NULLS LAST OFFSET 2 LIMIT 5;
CREATE VIEW meta.v_in AS
    SELECT c.id, count(*) AS n FROM meta.child c CROSS JOIN meta.parent p
    WHERE c.name IN ('a', 'b') AND c.m = 'ok' AND p.id NOT IN (1, 2)
    GROUP BY c.id HAVING count(*) > 1 ORDER BY 2 DESC;
COMMENT ON VIEW meta.v_one IS 'big ones';
"""


@pytest.fixture(scope="module")
def meta_objects(sql_server: SqlServer, reference_dsn: str) -> tuple[SqlServer, str]:
    """The server and the reference Postgres after META ran on both."""
    ok(psql(sql_server, "-q", "-f", "-", stdin=META))
    ok(psql_dsn(reference_dsn, "-q", "-f", "-", stdin=META))
    return sql_server, reference_dsn


@pytest.mark.parametrize(
    "command",
    [
        r"\d meta.child",
        r"\d+ meta.child",
        r"\d meta.gen",
        r"\d+ meta.gen",
        r"\d+ meta.parent",
        r"\d meta.child_name_idx",
        r"\d+ meta.child_pkey",
        r"\d meta.users",
        r"\d+ meta.users",
        r"\d meta.users_lower_email",
        r"\d meta.users_expr_a_idx",
        r"\d meta.seq1",
        r"\d+ meta.parent_id_seq",
        r"\d meta.child_id_seq",
        r"\d meta.c*",
        r"\d+ meta.v_join",
        r"\d+ meta.v_left",
        r"\sv meta.v_join",
        r"\sv meta.v_misc",
        r"\sv meta.v_in",
        r"\dt meta.*",
        r"\di meta.*",
        r"\ds meta.*",
        r"\dv meta.*",
        r"\dv+ meta.*",
        r"\dn meta",
        r"\dn+ meta",
        r"\dT meta.*",
        r"\dT+ meta.*",
        r"\dd meta.*",
        r"\dD",
        r"\dy",
        r"\dc",
        r"\do meta.*",
        r"\dX",
        r"\des",
        r"\dew",
        r"\drds",
        r"\dRs",
        r"\dl",
        r"\encoding",
    ],
)
def test_meta_command_prints_as_against_postgres(
    meta_objects: tuple[SqlServer, str], command: str
) -> None:
    """psql's meta-commands print, line for line, what they print against Postgres."""
    server, reference = meta_objects
    assert ok(psql(server, "-c", command)) == ok(psql_dsn(reference, "-c", command))


def test_meta_commands_without_a_reference_twin(meta_objects: tuple[SqlServer, str]) -> None:
    """Listings that differ from the reference Postgres by design: the single-table view's
    columns are qualified (Postgres 15's pg_get_viewdef; the reference is 16), sizes are not
    tracked, there is one database and no function in pg_proc."""
    server, _ = meta_objects
    view = ok(psql(server, "-c", r"\d+ meta.v_one"))
    assert "View definition:\n SELECT child.id,\n    child.qty\n   FROM meta.child\n" in view
    assert "  WHERE child.qty > 1::numeric;\n" in view
    assert "| big ones" in ok(psql(server, "-c", r"\dv+ meta.v_one"))
    assert "0 bytes" in ok(psql(server, "-c", r"\dt+ meta.*"))
    assert "public" in ok(psql(server, "-c", r"\dn+"))
    assert "postgres" in ok(psql(server, "-c", r"\l+"))
    assert "List of functions" in ok(psql(server, "-c", r"\df+ lower"))
    assert "Parameter" in ok(psql(server, "-c", r"\dconfig"))
    assert "0 rows" in ok(psql(server, "-c", r"\dx"))
    assert "You are connected to database" in ok(psql(server, "-c", r"\conninfo"))


# COPY cases run on both servers: (setup, COPY statement, data on stdin, query after it). Each
# case has its own table; the reference is Postgres 16, so nothing here differs from 15 to 16.
_COPY_TABLE = "CREATE TABLE {t} (a int PRIMARY KEY, b text, c text DEFAULT 'dflt')"
COPY_CASES = {
    "text_escapes": (
        "COPY {t} (a, b) FROM STDIN",
        "1\ta\\tb\\\\c\\101\\x41\\n\n2\t\\N\n\\.\n3\tx\n",
    ),
    "text_escaped_delimiter": ("COPY {t} FROM STDIN (DELIMITER ',')", "1,a\\,b,\\N\n"),
    "text_bad_octal_utf8": ("COPY {t} (a, b) FROM STDIN", "1\t\\377\n"),
    "missing_column": ("COPY {t} FROM STDIN", "1\tx\n"),
    "extra_column": ("COPY {t} FROM STDIN", "1\tx\ty\tz\n"),
    "convert_before_missing": ("COPY {t} FROM STDIN (FORMAT csv)", "x\n"),
    "duplicate_key_keeps_nothing": ("COPY {t} FROM STDIN", "1\tx\ty\n1\tx\ty\n"),
    "not_null_keeps_nothing": ("COPY {t} FROM STDIN", "2\tx\ty\n\\N\tx\ty\n"),
    "csv_header_and_quotes": (
        "COPY {t} FROM STDIN WITH CSV HEADER",
        'a,b,c\n1,"x,""y""\n",""\n2,,z\n',
    ),
    "csv_header_match": ("COPY {t} FROM STDIN (FORMAT csv, HEADER match)", "a,b,c\n1,x,y\n"),
    "csv_header_mismatch": ("COPY {t} FROM STDIN (FORMAT csv, HEADER match)", "a,q,c\n1,x,y\n"),
    "text_header_field_count": ("COPY {t} FROM STDIN (HEADER match)", "a\tb\n1\tx\ty\n"),
    "csv_null_and_quoted_null": ("COPY {t} FROM STDIN (FORMAT csv, NULL 'N')", '1,"N",N\n'),
    "csv_escape": ("COPY {t} FROM STDIN (FORMAT csv, ESCAPE '\\')", '1,"a\\"b\\\\c",\n'),
    "csv_force_not_null": ("COPY {t} FROM STDIN (FORMAT csv, FORCE_NOT_NULL (b))", "1,,\n"),
    "csv_force_null": ("COPY {t} FROM STDIN (FORMAT csv, FORCE_NULL (b, c))", '1,"",""\n'),
    "csv_old_force_not_null": ("COPY {t} FROM STDIN CSV FORCE NOT NULL b", "1,,\n"),
    "csv_unterminated": ("COPY {t} FROM STDIN (FORMAT csv)", '1,"x\n'),
    "csv_end_marker": ("COPY {t} FROM STDIN (FORMAT csv)", "1,x,y\n\\.\n2,x,y\n"),
    "old_delimiter_null": ("COPY {t} FROM STDIN WITH DELIMITER ',' NULL 'NUL'", "1,NUL,y\n"),
    "e_string_delimiter": ("COPY {t} FROM STDIN WITH DELIMITER E'\\t'", "1\tx\ty\n"),
    "to_text": ("COPY {t} TO STDOUT (DELIMITER '|')", None),
    "to_csv_header": ("COPY {t} TO STDOUT (FORMAT csv, HEADER)", None),
    "to_csv_escape_null": ("COPY {t} TO STDOUT (FORMAT csv, ESCAPE '\\', NULL 'N')", None),
    "to_csv_force_quote_all": ("COPY {t} TO STDOUT (FORMAT csv, FORCE_QUOTE *)", None),
    "to_csv_force_quote_columns": ("COPY {t} TO STDOUT CSV FORCE QUOTE b", None),
    "to_single_column_end_marker": ("COPY {t} (b) TO STDOUT (FORMAT csv)", None),
    "to_latin1": ("COPY (SELECT b FROM {t} ORDER BY a) TO STDOUT (ENCODING 'LATIN1')", None),
    "bad_format": ("COPY {t} TO STDOUT (FORMAT xml)", None),
    "unknown_option": ("COPY {t} TO STDOUT (foo 1)", None),
    "repeated_option": ("COPY {t} TO STDOUT (FORMAT csv, FORMAT csv)", None),
    "header_match_to": ("COPY {t} TO STDOUT (FORMAT csv, HEADER match)", None),
    "header_binary": ("COPY {t} TO STDOUT (FORMAT binary, HEADER)", None),
    "quote_in_text_mode": ("COPY {t} TO STDOUT (QUOTE '\"')", None),
    "multi_character_delimiter": ("COPY {t} TO STDOUT (DELIMITER ',,')", None),
    "delimiter_in_null": ("COPY {t} TO STDOUT (DELIMITER ',', NULL ',')", None),
    "force_quote_in": ("COPY {t} FROM STDIN (FORMAT csv, FORCE_QUOTE *)", ""),
    "force_not_null_star": ("COPY {t} FROM STDIN (FORMAT csv, FORCE_NOT_NULL *)", ""),
    "force_quote_unlisted": ("COPY {t} (a) TO STDOUT (FORMAT csv, FORCE_QUOTE (b))", None),
    "column_twice": ("COPY {t} (a, a) FROM STDIN", ""),
    "bad_encoding_name": ("COPY {t} TO STDOUT (ENCODING 'nope')", None),
    "text_escaped_newline": ("COPY {t} (a, b) FROM STDIN", "1\tx\\\ny\n2\tz\n"),
    "values_to": ("COPY (VALUES (1, 'x'), (2, NULL)) TO STDOUT (FORMAT csv, HEADER)", None),
    "select_into_to": ("COPY (SELECT a INTO TEMP {t}_x FROM {t}) TO STDOUT", None),
    "query_with_columns": ("COPY (SELECT a FROM {t}) (a) TO STDOUT", None),
    "query_from": ("COPY (SELECT a FROM {t}) FROM STDIN", ""),
}


@pytest.mark.parametrize("name", sorted(COPY_CASES))
def test_copy_as_postgres(sql_server: SqlServer, reference_dsn: str, name: str) -> None:
    """COPY's rows, output, SQLSTATE and message as Postgres's (CONTEXT aside: not sent)."""
    statement, data = COPY_CASES[name]
    t = f"cp_{name}"
    setup = [
        _COPY_TABLE.format(t=t),
        f"INSERT INTO {t} VALUES (1, 'a|b\\c\"d', NULL), (2, '', 'N'), (3, '\\.', 'é')",
    ]
    if data is not None:
        setup.append(f"DELETE FROM {t}")
    query = f"SELECT a, b, c, b IS NULL AS bn, c IS NULL AS cn FROM {t} ORDER BY a"
    _assert_copy_as_postgres(
        sql_server, reference_dsn, [*setup, statement.format(t=t), query], data
    )


def _assert_copy_as_postgres(
    server: SqlServer, reference_dsn: str, statements: list[str], data: str | None
) -> None:
    """The statements (one a COPY reading ``data``) print the same output and ERROR lines
    on both servers."""
    args = ["-v", "ON_ERROR_STOP=0", "-v", "VERBOSITY=verbose"]
    for sql in statements:
        args += ["-c", sql]

    def run(result: subprocess.CompletedProcess[str]) -> tuple[str, list[str]]:
        errors = [line for line in result.stderr.splitlines() if line.startswith("ERROR:")]
        return result.stdout, errors

    ours = run(psql(server, *args, stdin=data))
    assert ours == run(psql_dsn(reference_dsn, *args, stdin=data))


# A row that fails NOT NULL or CHECK (the CONTEXT line names its line and text) or takes a key
# already there (its line only).
COPY_CONSTRAINT_CASES = {
    "not_null": ("COPY {t} FROM STDIN", "1\t5\ta\n2\t\\N\tb\n"),
    "check_text": ("COPY {t} FROM STDIN", "1\t5\ta\n2\t-1\tb\n3\t4\tc\n"),
    "check_csv": ("COPY {t} FROM STDIN (FORMAT csv)", '3,7,x\n4,0,"y,z"\n'),
    "check_columns": ("COPY {t} (v, id) FROM STDIN", "8\t1\n-8\t2\n"),
    "duplicate_in_the_data": ("COPY {t} FROM STDIN", "1\t5\ta\n2\t6\tb\n1\t7\tc\n"),
    "duplicate_of_a_stored_row": ("COPY {t} FROM STDIN", "5\t5\ta\n9\t6\tb\n"),
}


@pytest.mark.parametrize("name", sorted(COPY_CONSTRAINT_CASES))
def test_copy_constraint_errors_name_the_line_as_postgres(
    sql_server: SqlServer, reference_dsn: str, name: str
) -> None:
    statement, data = COPY_CONSTRAINT_CASES[name]
    t = f"cpc_{name}"
    args = ["-v", "ON_ERROR_STOP=0"]
    for sql in (
        f"CREATE TABLE {t} (id int PRIMARY KEY, v int NOT NULL CHECK (v > 0), w text)",
        f"INSERT INTO {t} VALUES (9, 9, 'stored')",
        statement.format(t=t),
        f"SELECT count(*) FROM {t}",
    ):
        args += ["-c", sql]

    def run(result: subprocess.CompletedProcess[str]) -> tuple[str, list[str]]:
        wanted = ("ERROR:", "CONTEXT:")
        return result.stdout, [
            line for line in result.stderr.splitlines() if line.startswith(wanted)
        ]

    ours = run(psql(sql_server, *args, stdin=data))
    assert any(line.startswith("CONTEXT:  COPY") for line in ours[1]), ours
    assert ours == run(psql_dsn(reference_dsn, *args, stdin=data))


# COPY of a table with a generated column (g): left out of COPY without a column list, either
# way; a list naming it is 42P10; the rows COPY FROM writes get it computed.
GENERATED_COPY_CASES = {
    "from_without_list": ("COPY {t} FROM STDIN", "5\t1\n6\t\\N\n"),
    "from_with_list": ("COPY {t} (b, a) FROM STDIN (FORMAT csv)", "2,7\n"),
    "from_naming_it": ("COPY {t} (a, g) FROM STDIN", "8\t80\n"),
    "to_without_list": ("COPY {t} TO STDOUT (FORMAT csv, HEADER)", None),
    "to_naming_it": ("COPY {t} (a, g) TO STDOUT", None),
}


def test_copy_into_a_table_with_an_expression_index_as_postgres(
    sql_server: SqlServer, reference_dsn: str
) -> None:
    """COPY FROM writes the entries of an index on an expression (a later row whose
    expression's value is taken is refused, 23505)."""
    t = "cpx"
    statements = [
        f"CREATE TABLE {t} (id int PRIMARY KEY, email text)",
        f"CREATE UNIQUE INDEX {t}_lower_email ON {t} (lower(email))",
        f"INSERT INTO {t} VALUES (1, 'A@x')",
        f"COPY {t} FROM STDIN",
        f"SELECT id FROM {t} WHERE lower(email) = 'b@x'",
        f"INSERT INTO {t} VALUES (3, 'b@X')",
    ]
    _assert_copy_as_postgres(sql_server, reference_dsn, statements, "2\tB@X\n")


@pytest.mark.parametrize("name", sorted(GENERATED_COPY_CASES))
def test_copy_with_a_generated_column_as_postgres(
    sql_server: SqlServer, reference_dsn: str, name: str
) -> None:
    statement, data = GENERATED_COPY_CASES[name]
    t = f"cpg_{name}"
    statements = [
        f"CREATE TABLE {t} (a int PRIMARY KEY, b int, "
        "g int GENERATED ALWAYS AS (a * 10 + b) STORED CHECK (g < 1000))",
        f"CREATE INDEX ON {t} (g)",
        f"INSERT INTO {t} (a, b) VALUES (1, 1), (2, NULL)",
        statement.format(t=t),
        f"SELECT * FROM {t} ORDER BY a",
        f"SELECT a FROM {t} WHERE g = 51",
    ]
    _assert_copy_as_postgres(sql_server, reference_dsn, statements, data)
