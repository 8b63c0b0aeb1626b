"""CREATE FUNCTION ... LANGUAGE sql beyond the single statements of test_sql_semantics.py:
transactions, other sessions and plans seeing new definitions, schemas, psql's \\df / \\sf,
and what is refused."""

from __future__ import annotations

import psycopg
import pytest

from tests.server import scripted
from tests.server.conftest import SqlServer
from tests.server.test_client_psql import ok, psql, psql_dsn

Pair = tuple[psycopg.Connection, psycopg.Connection]


@pytest.fixture(scope="module")
def pair(pg_pair: Pair) -> Pair:
    return pg_pair


def test_definitions_are_transactional(pair: Pair) -> None:
    scripted.compare(
        *pair,
        [
            "BEGIN",
            "CREATE FUNCTION tx_one() RETURNS int LANGUAGE sql AS 'SELECT 1'",
            "SELECT tx_one()",
            "ROLLBACK",
            "SELECT tx_one()",
            "CREATE FUNCTION tx_two() RETURNS int LANGUAGE sql AS 'SELECT 2'",
            "BEGIN",
            "DROP FUNCTION tx_two()",
            "SELECT tx_two()",
            "ROLLBACK",
            "SELECT tx_two()",
        ],
    )


def test_schemas_and_search_path(pair: Pair) -> None:
    scripted.compare(
        *pair,
        [
            "CREATE SCHEMA fs",
            "CREATE FUNCTION fs.inc(int) RETURNS int LANGUAGE sql AS 'SELECT $1 + 1'",
            "CREATE FUNCTION inc(int) RETURNS int LANGUAGE sql AS 'SELECT $1 + 100'",
            "SELECT fs.inc(1), inc(1), public.inc(1)",
            "SET search_path = fs, public",
            "SELECT inc(1)",
            "RESET search_path",
            "SELECT inc(1)",
            "DROP SCHEMA fs",
            "DROP SCHEMA fs CASCADE",
            "SELECT fs.inc(1)",
            "SELECT inc(1)",
        ],
    )


def test_bodies_resolve_names_as_statements_do(pair: Pair) -> None:
    scripted.compare(
        *pair,
        [
            "CREATE SCHEMA fb",
            "CREATE TABLE fb.t (a int, b int)",
            "INSERT INTO fb.t VALUES (1, 2), (3, 4)",
            "CREATE FUNCTION fb_count() RETURNS bigint LANGUAGE sql AS 'SELECT count(*) FROM fb.t'",
            "SELECT fb_count()",
            "SET search_path = fb, public",
            "CREATE FUNCTION fb_sum() RETURNS bigint LANGUAGE sql AS 'SELECT sum(a) FROM t'",
            "SELECT fb_sum()",
            "RESET search_path",
            "CREATE TEMP TABLE fb_tmp (x int)",
            "INSERT INTO fb_tmp VALUES (5)",
            "CREATE FUNCTION fb_tmp_count() RETURNS bigint LANGUAGE sql"
            " AS 'SELECT count(*) FROM fb_tmp'",
            "SELECT fb_tmp_count()",
            # A parameter is hidden only by a column in scope where it is named.
            "CREATE FUNCTION fb_derived(x int) RETURNS int LANGUAGE sql"
            " AS 'SELECT x FROM (SELECT 100 AS x) s'",
            "SELECT fb_derived(1)",
            "CREATE FUNCTION fb_cte(x int) RETURNS int LANGUAGE sql"
            " AS 'WITH c(x) AS (SELECT 7) SELECT x FROM c'",
            "SELECT fb_cte(1)",
            "CREATE TABLE fb_t18 (a int)",
            "INSERT INTO fb_t18 VALUES (1), (2)",
            "CREATE FUNCTION fb_outer(a int) RETURNS bigint LANGUAGE sql"
            " AS 'SELECT a + (SELECT count(*) FROM fb_t18)'",
            "SELECT fb_outer(10)",
            "CREATE FUNCTION fb_upper(x int) RETURNS int LANGUAGE sql AS 'SELECT X + 1'",
            "SELECT fb_upper(1)",
            "CREATE FUNCTION fb_qualified(a int) RETURNS bigint LANGUAGE sql"
            " AS 'SELECT count(*) FROM fb_t18 WHERE a > fb_qualified.a'",
            "SELECT fb_qualified(1)",
            "/* a comment */ CREATE FUNCTION fb_atomic(x int) RETURNS int LANGUAGE sql"
            " BEGIN ATOMIC SELECT x + 1; END",
            "SELECT fb_atomic(1)",
            "CREATE TABLE fb_t16 (a int, b int)",
            "INSERT INTO fb_t16 VALUES (1, 2)",
            "CREATE FUNCTION fb_rows() RETURNS SETOF fb_t16 LANGUAGE sql AS 'SELECT * FROM fb_t16'",
            "ALTER TABLE fb_t16 ADD COLUMN c int DEFAULT 3",
            "SELECT * FROM fb_rows()",
            "CREATE FUNCTION fb_named(a int DEFAULT 1) RETURNS int LANGUAGE sql AS 'SELECT a'",
            "CREATE OR REPLACE FUNCTION fb_named(b int DEFAULT 1) RETURNS int LANGUAGE sql"
            " AS 'SELECT b'",
            "CREATE OR REPLACE FUNCTION fb_named(a int) RETURNS int LANGUAGE sql AS 'SELECT a'",
            "SELECT fb_named()",
        ],
    )


def test_refused_constructs(pair: Pair) -> None:
    ours, _ = pair
    refused = [
        "CREATE FUNCTION r1() RETURNS void LANGUAGE sql AS 'CREATE TABLE r1t (a int)'",
        "CREATE FUNCTION r2() RETURNS SETOF int LANGUAGE sql AS 'SELECT 1; SELECT 2'",
        "CREATE FUNCTION r3(OUT a int) LANGUAGE sql AS 'SELECT 1'",
        "CREATE FUNCTION r4() RETURNS int LANGUAGE c AS 'lib', 'symbol'",
        "CREATE FUNCTION r5(VARIADIC a int[]) RETURNS int LANGUAGE sql AS 'SELECT 1'",
        "CREATE FUNCTION r6() RETURNS TABLE(a int, b int) LANGUAGE sql AS 'SELECT 1, 2'",
        "SELECT r6()",
    ]
    outcomes = [scripted.run(ours, sql) for sql in refused]
    assert outcomes[:5] == [("error", "0A000")] * 5
    assert outcomes[5][0] == "ok"
    assert outcomes[6] == ("error", "0A000")
    # The session and the catalog are intact after the refusals.
    assert ours.execute("SELECT * FROM r6()").fetchall() == [(1, 2)]


def test_recursion_is_refused_not_endless(pair: Pair) -> None:
    ours, _ = pair
    ours.execute("CREATE FUNCTION rec_a(int) RETURNS int LANGUAGE sql AS 'SELECT $1'")
    ours.execute("CREATE FUNCTION rec_b(int) RETURNS int LANGUAGE sql AS 'SELECT rec_a($1)'")
    with pytest.raises(psycopg.errors.FeatureNotSupported, match="recursive SQL function"):
        ours.execute(
            "CREATE OR REPLACE FUNCTION rec_a(int) RETURNS int LANGUAGE sql AS 'SELECT rec_b($1)'"
        )
    assert ours.execute("SELECT rec_b(7)").fetchone() == (7,)


def test_another_session_and_a_prepared_statement_see_a_replaced_body(
    sql_server: SqlServer,
) -> None:
    with (
        psycopg.connect(sql_server.conninfo(), autocommit=True) as a,
        psycopg.connect(sql_server.conninfo(), autocommit=True) as b,
    ):
        a.execute("CREATE FUNCTION seen(x int) RETURNS int LANGUAGE sql AS 'SELECT x + 1'")
        # psycopg prepares a statement run this often: the plan holds the expansion.
        for _ in range(6):
            assert b.execute("SELECT seen(%s)", (1,), prepare=True).fetchone() == (2,)
        a.execute(
            "CREATE OR REPLACE FUNCTION seen(x int) RETURNS int LANGUAGE sql AS 'SELECT x * 10'"
        )
        assert b.execute("SELECT seen(%s)", (1,), prepare=True).fetchone() == (10,)
        a.execute("DROP FUNCTION seen")
        with pytest.raises(psycopg.errors.UndefinedFunction):
            b.execute("SELECT seen(%s)", (1,), prepare=True)


def test_a_function_reads_the_transaction_snapshot(sql_server: SqlServer) -> None:
    with (
        psycopg.connect(sql_server.conninfo(), autocommit=True) as a,
        psycopg.connect(sql_server.conninfo()) as b,
    ):
        a.execute("CREATE TABLE snap (k int PRIMARY KEY, v int)")
        a.execute("INSERT INTO snap VALUES (1, 10)")
        a.execute(
            "CREATE FUNCTION snap_v(int) RETURNS int LANGUAGE sql "
            "AS 'SELECT v FROM snap WHERE k = $1'"
        )
        b.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        assert b.execute("SELECT snap_v(1)").fetchone() == (10,)
        a.execute("UPDATE snap SET v = 20 WHERE k = 1")
        assert b.execute("SELECT snap_v(1)").fetchone() == (10,)
        b.execute("INSERT INTO snap VALUES (2, 30)")
        assert b.execute("SELECT snap_v(2)").fetchone() == (30,)
        b.rollback()
        assert b.execute("SELECT snap_v(1)").fetchone() == (20,)


FUNCTIONS = """
CREATE FUNCTION dfa(a int, b text DEFAULT 'x') RETURNS int LANGUAGE sql IMMUTABLE AS 'select a';
CREATE FUNCTION dfb(n int) RETURNS TABLE(x int, y text) LANGUAGE sql
    AS $$ SELECT g, 'v' || g FROM generate_series(1, n) g $$;
CREATE FUNCTION dfc(numeric) RETURNS SETOF numeric LANGUAGE sql STABLE STRICT AS 'SELECT $1';
"""


@pytest.fixture(scope="module")
def described(sql_server: SqlServer, reference_dsn: str) -> tuple[SqlServer, str]:
    """The same functions made on our server and on real Postgres, by psql."""
    ok(psql(sql_server, stdin=FUNCTIONS))
    ok(psql_dsn(reference_dsn, stdin=FUNCTIONS))
    return sql_server, reference_dsn


@pytest.mark.parametrize(
    "meta", [r"\df public.d*", r"\df+ dfa", r"\df dfb", r"\sf dfa", r"\sf dfb"]
)
def test_psql_lists_and_shows_functions(described: tuple[SqlServer, str], meta: str) -> None:
    server, reference = described
    assert ok(psql(server, "-c", meta)) == ok(psql_dsn(reference, "-c", meta))


def test_sql_functions_that_write_run_at_the_call(pair: Pair) -> None:
    scripted.compare(
        *pair,
        [
            "CREATE TABLE fw_users (id serial PRIMARY KEY, name text UNIQUE, visits int DEFAULT 0)",
            "CREATE FUNCTION fw_add(name text) RETURNS int LANGUAGE sql"
            " AS $$ INSERT INTO fw_users (name) VALUES (name) RETURNING id $$",
            "SELECT fw_add('ann'), fw_add('bob')",
            "SELECT * FROM fw_users ORDER BY id",
            "CREATE FUNCTION fw_visit(n text) RETURNS void LANGUAGE sql"
            " AS $$ UPDATE fw_users SET visits = visits + 1 WHERE name = n; $$",
            "SELECT fw_visit('ann')",
            "SELECT fw_visit(name) FROM fw_users WHERE name = 'bob'",
            "CREATE FUNCTION fw_count(n text) RETURNS int LANGUAGE sql AS $$"
            " UPDATE fw_users SET visits = visits + 1 WHERE name = n;"
            " SELECT visits FROM fw_users WHERE name = n $$",
            "SELECT fw_count('ann'), fw_count('nobody')",
            "SELECT * FROM fw_users ORDER BY id",
            "SELECT fw_add('ann')",
            "SELECT * FROM fw_users ORDER BY id",
            "BEGIN",
            "SELECT fw_add('cid')",
            "ROLLBACK",
            "SELECT * FROM fw_users ORDER BY id",
            "SELECT * FROM fw_add('dee') AS r(new_id)",
            "CREATE FUNCTION fw_bad(n text) RETURNS int LANGUAGE sql"
            " AS $$ UPDATE fw_users SET visits = 0 WHERE name = n $$",
            "CREATE FUNCTION fw_bad2() RETURNS int LANGUAGE sql"
            " AS $$ INSERT INTO no_such_table VALUES (1) RETURNING 1 $$",
        ],
    )


def test_procedures_and_call(pair: Pair) -> None:
    scripted.compare(
        *pair,
        [
            "CREATE TABLE pr_log (id serial PRIMARY KEY, msg text)",
            "CREATE PROCEDURE pr_add(m text) LANGUAGE sql"
            " AS $$ INSERT INTO pr_log (msg) VALUES (m) $$",
            "CALL pr_add('one')",
            "CALL pr_add(m => 'two')",
            "CREATE PROCEDURE pr_twice(m text, n int DEFAULT 2) LANGUAGE plpgsql AS $$"
            " BEGIN FOR i IN 1..n LOOP INSERT INTO pr_log (msg) VALUES (m || i); END LOOP; END $$",
            "CALL pr_twice('x')",
            "CALL public.pr_twice('y', 1)",
            "SELECT * FROM pr_log ORDER BY id",
            "SELECT pr_add('no')",
            "CREATE FUNCTION pr_fn(int) RETURNS int LANGUAGE sql AS 'SELECT $1'",
            "CALL pr_fn(1)",
            "CALL pr_nosuch(1)",
            "CALL pr_add(1.5)",
            "CALL pr_add('a') + 1",
            "DROP FUNCTION pr_add",
            "DROP PROCEDURE pr_fn",
            "BEGIN",
            "CALL pr_add('rolled back')",
            "ROLLBACK",
            "SELECT count(*) FROM pr_log",
            "CREATE OR REPLACE FUNCTION pr_add(m text) RETURNS int LANGUAGE sql AS 'SELECT 1'",
            "SELECT proname, prokind, prorettype::regtype, pg_get_function_arguments(oid),"
            " pg_get_function_result(oid) FROM pg_proc WHERE proname LIKE 'pr\\_%' ORDER BY 1",
            "DROP PROCEDURE pr_add, pr_twice",
            "DROP FUNCTION pr_fn",
        ],
    )


# -- LANGUAGE plpgsql ---------------------------------------------------------------------------


def test_plpgsql_functions_against_postgres(pair: Pair) -> None:
    scripted.compare(
        *pair,
        [
            "CREATE TABLE pl_acct (id int PRIMARY KEY, bal int)",
            "INSERT INTO pl_acct VALUES (1, 100), (2, 50)",
            "CREATE FUNCTION pl_add(a int, b int DEFAULT 1) RETURNS int LANGUAGE plpgsql"
            " AS $$ BEGIN RETURN a + b; END $$",
            "SELECT pl_add(1), pl_add(1, 2), pl_add(NULL), pl_add(b => 5, a => 1)",
            "SELECT * FROM pl_add(5) AS r",
            "SELECT pl_add(1.5)",
            "CREATE FUNCTION pl_bal(k int) RETURNS int LANGUAGE plpgsql STABLE AS $$"
            " DECLARE v int; BEGIN SELECT bal INTO v FROM pl_acct WHERE id = k;"
            " IF NOT FOUND THEN RETURN -1; END IF; RETURN v; END $$",
            "SELECT id, pl_bal(id) FROM pl_acct ORDER BY id",
            "SELECT pl_bal(9)",
            "SELECT id FROM pl_acct WHERE pl_bal(id) > 60",
            "CREATE FUNCTION pl_move(src int, dst int, amt int) RETURNS void LANGUAGE plpgsql"
            " AS $$ BEGIN UPDATE pl_acct SET bal = bal - amt WHERE id = src;"
            " UPDATE pl_acct SET bal = bal + amt WHERE id = dst;"
            " IF (SELECT bal FROM pl_acct WHERE id = src) < 0 THEN"
            " RAISE EXCEPTION 'insufficient funds in %', src; END IF; END $$",
            "SELECT pl_move(1, 2, 30)",
            "SELECT * FROM pl_acct ORDER BY id",
            "SELECT pl_move(2, 1, 500)",
            "SELECT * FROM pl_acct ORDER BY id",
            "UPDATE pl_acct SET bal = pl_add(bal) WHERE id = 1",
            "SELECT * FROM pl_acct ORDER BY id",
            "CREATE FUNCTION pl_fact(n int) RETURNS numeric LANGUAGE plpgsql IMMUTABLE AS $$"
            " BEGIN IF n <= 1 THEN RETURN 1; END IF; RETURN n * pl_fact(n - 1); END $$",
            "SELECT pl_fact(10), pl_fact(25)",
            "CREATE FUNCTION pl_sqlwrap(n int) RETURNS numeric LANGUAGE sql"
            " AS 'SELECT pl_fact(n) + 1'",
            "CREATE FUNCTION pl_plwrap(n int) RETURNS numeric LANGUAGE plpgsql"
            " AS $$ BEGIN RETURN pl_sqlwrap(n) * 2; END $$",
            "SELECT pl_plwrap(3)",
            "CREATE FUNCTION pl_bad() RETURNS int LANGUAGE plpgsql AS $$ BEGIN retur 1; END $$",
            "CREATE FUNCTION pl_noret() RETURNS int LANGUAGE plpgsql AS $$ BEGIN END $$",
            "SELECT pl_noret()",
            "SELECT proname, prolang, prorettype::regtype FROM pg_proc"
            " WHERE proname IN ('pl_add', 'pl_move') ORDER BY 1",
            "SELECT l.lanname FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang"
            " WHERE p.proname = 'pl_add'",
        ],
    )


def test_set_returning_plpgsql_functions_are_refused(pair: Pair) -> None:
    ours, _ = pair
    create = "CREATE FUNCTION pl_rows() RETURNS SETOF int LANGUAGE plpgsql AS $$ BEGIN END $$"
    assert scripted.run(ours, create) == ("error", "0A000")


def test_plpgsql_notices_and_errors_reach_the_client(pair: Pair) -> None:
    ours, _ = pair
    ours.execute(
        "CREATE FUNCTION pl_loud(x int) RETURNS int LANGUAGE plpgsql AS $$"
        " BEGIN RAISE NOTICE 'called with %', x; RETURN x; END $$"
    )
    heard: list[str] = []
    ours.add_notice_handler(lambda d: heard.append(d.message_primary or ""))
    try:
        rows = ours.execute("SELECT pl_loud(g) FROM generate_series(1, 3) g ORDER BY 1")
        assert rows.fetchall() == [(1,), (2,), (3,)]
        assert heard == ["called with 1", "called with 2", "called with 3"]
    finally:
        ours._notice_handlers.clear()
    ours.execute(
        "CREATE FUNCTION pl_fail(x int) RETURNS int LANGUAGE plpgsql AS $$"
        " BEGIN RAISE EXCEPTION 'bad %', x USING ERRCODE = '22023'; END $$"
    )
    with pytest.raises(psycopg.errors.InvalidParameterValue) as caught:
        ours.execute("SELECT pl_fail(7)")
    assert caught.value.diag.message_primary == "bad 7"
    assert "PL/pgSQL function pl_fail(integer) line 1 at RAISE" in (caught.value.diag.context or "")
    # In a transaction block the failure aborts it, as any error does.
    with ours.transaction():
        ours.execute("SELECT pl_loud(1)")
        with pytest.raises(psycopg.errors.InvalidParameterValue):
            ours.execute("SELECT pl_fail(1)")
        with pytest.raises(psycopg.errors.InFailedSqlTransaction):
            ours.execute("SELECT 1")
        raise psycopg.Rollback()


def test_plpgsql_nesting_is_bounded(pair: Pair) -> None:
    ours, _ = pair
    ours.execute(
        "CREATE FUNCTION pl_down(n int) RETURNS int LANGUAGE plpgsql AS $$"
        " BEGIN IF n = 0 THEN RETURN 0; END IF; RETURN pl_down(n - 1) + 1; END $$"
    )
    assert ours.execute("SELECT pl_down(30)").fetchone() == (30,)
    with pytest.raises(psycopg.errors.StatementTooComplex):
        ours.execute("SELECT pl_down(500)")
    assert ours.execute("SELECT pl_down(3)").fetchone() == (3,)
