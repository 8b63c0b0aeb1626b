"""DO blocks: PL/pgSQL anonymous code blocks (server/plpgsql), through a real client.

Results that are rows are also compared with real Postgres in test_sql_semantics.py (the
``do_blocks`` script); here: notices, errors with their fields, and transactions.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import psycopg
import pytest
from psycopg import errors

from tests.server.conftest import SqlServer


@pytest.fixture
def conn(sql_server: SqlServer) -> Iterator[psycopg.Connection]:
    with psycopg.connect(sql_server.conninfo(), autocommit=True) as c:
        yield c


@dataclass(frozen=True)
class Seen:
    """A notice as the client got it (psycopg's Diagnostic lives only in the handler)."""

    severity: str | None
    sqlstate: str | None
    message_primary: str | None
    message_detail: str | None
    message_hint: str | None
    context: str | None


def _seen(diag: psycopg.errors.Diagnostic) -> Seen:
    return Seen(
        diag.severity,
        diag.sqlstate,
        diag.message_primary,
        diag.message_detail,
        diag.message_hint,
        diag.context,
    )


def _notices(conn: psycopg.Connection, sql: str) -> list[Seen]:
    """The notices ``sql`` raises (its error, if any, propagates after they are collected)."""
    seen: list[Seen] = []

    def handler(diag: psycopg.errors.Diagnostic) -> None:
        seen.append(_seen(diag))

    conn.add_notice_handler(handler)
    try:
        conn.execute(sql)
    finally:
        conn.remove_notice_handler(handler)
    return seen


def test_migration_idiom_creates_a_type_once(conn: psycopg.Connection) -> None:
    sql = """DO $$ BEGIN
        IF NOT EXISTS (SELECT 1 FROM pg_type WHERE typname = 'do_mood') THEN
            CREATE TYPE do_mood AS ENUM ('a', 'b');
        END IF;
    END $$;"""
    assert conn.execute(sql).statusmessage == "DO"
    conn.execute(sql)  # the second run finds the type and does nothing
    assert conn.execute("SELECT 'b'::do_mood").fetchone() == ("b",)
    conn.execute(
        "DO $$ BEGIN CREATE TYPE do_mood AS ENUM ('x'); "
        "EXCEPTION WHEN duplicate_object THEN NULL; END $$"
    )


def test_control_flow(conn: psycopg.Connection) -> None:
    conn.execute("CREATE TABLE do_flow (k text PRIMARY KEY, v int)")
    conn.execute(
        """DO $$
        DECLARE
            total int NOT NULL := 0;
            arr int[] := ARRAY[4, 5, 6];
            x int;
            steps text := '';
            c CONSTANT int := 10;
        BEGIN
            FOR i IN 1..5 LOOP total := total + i; END LOOP;
            INSERT INTO do_flow VALUES ('sum', total);
            FOR i IN REVERSE 10..1 BY 4 LOOP steps := steps || i || ' '; END LOOP;
            INSERT INTO do_flow VALUES ('reverse ' || trim(steps), 0);
            total := 0;
            FOREACH x IN ARRAY arr LOOP total := total + x; END LOOP;
            INSERT INTO do_flow VALUES ('foreach', total);
            x := 0;
            <<outer_loop>>
            LOOP
                x := x + 1;
                CONTINUE WHEN x % 2 = 0;
                EXIT outer_loop WHEN x > 7;
                total := total + 100;
            END LOOP;
            INSERT INTO do_flow VALUES ('loop', total);
            WHILE x > 0 LOOP x := x - 3; END LOOP;
            CASE x
                WHEN -1, -2 THEN INSERT INTO do_flow VALUES ('case', x);
                ELSE INSERT INTO do_flow VALUES ('case else', x);
            END CASE;
            CASE WHEN c > 5 THEN INSERT INTO do_flow VALUES ('searched', c); END CASE;
            IF x > 0 THEN NULL; ELSIF x = -1 THEN x := 1; ELSE x := 2; END IF;
            INSERT INTO do_flow VALUES ('if', x);
            <<blk>>
            BEGIN
                EXIT blk;
                INSERT INTO do_flow VALUES ('not reached', 0);
            END;
            RETURN;
            INSERT INTO do_flow VALUES ('after return', 0);
        END $$"""
    )
    rows = dict(conn.execute("SELECT k, v FROM do_flow").fetchall())
    assert rows == {
        "sum": 15,
        "reverse 10 6 2": 0,
        "foreach": 15,
        "loop": 415,
        "case else": 0,
        "searched": 10,
        "if": 2,
    }


def test_records_into_and_diagnostics(conn: psycopg.Connection) -> None:
    conn.execute("CREATE TABLE do_items (id int PRIMARY KEY, name text, qty int)")
    conn.execute("INSERT INTO do_items VALUES (1, 'a', 10), (2, 'b', 20), (3, 'c', 30)")
    notices = _notices(
        conn,
        """DO $$
        DECLARE
            r record;
            item do_items%ROWTYPE;
            q do_items.qty%TYPE;
            n bigint;
            new_id int;
            s text := '';
        BEGIN
            FOR r IN SELECT id, name FROM do_items ORDER BY id LOOP
                s := s || r.name;
            END LOOP;
            RAISE NOTICE 'names %, found %', s, found;
            SELECT * INTO item FROM do_items WHERE id = 2;
            SELECT qty INTO q FROM do_items WHERE id = 3;
            RAISE NOTICE 'item % % %, q %', item.id, item.name, item.qty, q;
            SELECT qty INTO q FROM do_items WHERE id = 99;
            RAISE NOTICE 'missing % %', q, found;
            UPDATE do_items SET qty = qty + 1 WHERE id < 3;
            GET DIAGNOSTICS n = ROW_COUNT;
            RAISE NOTICE 'updated % %', n, found;
            INSERT INTO do_items VALUES (4, 'd', 40) RETURNING id INTO new_id;
            DELETE FROM do_items WHERE id = 4 RETURNING * INTO r;
            RAISE NOTICE 'inserted % deleted % %', new_id, r.id, r.name;
            PERFORM 1 FROM do_items WHERE id = 42;
            RAISE NOTICE 'perform found %', found;
        END $$""",
    )
    assert [n.message_primary for n in notices] == [
        "names abc, found t",
        "item 2 b 20, q 30",
        "missing <NULL> f",
        "updated 2 t",
        "inserted 4 deleted 4 d",
        "perform found f",
    ]


def test_select_into_strict(conn: psycopg.Connection) -> None:
    with pytest.raises(errors.NoDataFound) as caught:
        conn.execute("DO $$ DECLARE x int; BEGIN SELECT 1 INTO STRICT x WHERE false; END $$")
    assert caught.value.diag.message_primary == "query returned no rows"
    with pytest.raises(errors.TooManyRows) as too_many:
        conn.execute(
            "DO $$ DECLARE x int; BEGIN SELECT g INTO STRICT x FROM generate_series(1, 2) g; END $$"
        )
    assert too_many.value.diag.message_hint == (
        "Make sure the query returns a single row, or use LIMIT 1."
    )
    with pytest.raises(errors.SyntaxError) as no_destination:
        conn.execute("DO $$ BEGIN SELECT 1; END $$")
    assert no_destination.value.diag.message_primary == "query has no destination for result data"


def test_dynamic_sql(conn: psycopg.Connection) -> None:
    notices = _notices(
        conn,
        """DO $$
        DECLARE tbl text := 'do dyn'; n int; r record;
        BEGIN
            EXECUTE format('CREATE TABLE %I (id int PRIMARY KEY, t text)', tbl);
            EXECUTE format('INSERT INTO %I VALUES ($1, $2), ($3, %L)', tbl, 'two')
                USING 1, 'one', 2;
            EXECUTE 'SELECT count(*) FROM ' || quote_ident(tbl) INTO n;
            GET DIAGNOSTICS n = ROW_COUNT;
            FOR r IN EXECUTE format('SELECT * FROM %I WHERE id >= $1 ORDER BY id', tbl)
                USING 1 LOOP
                RAISE NOTICE '% %', r.id, r.t;
            END LOOP;
            EXECUTE 'SELECT t FROM "do dyn" WHERE id = $1' INTO STRICT r USING 2;
            RAISE NOTICE 'strict %, rows %', r.t, n;
        END $$""",
    )
    assert [n.message_primary for n in notices] == ["1 one", "2 two", "strict two, rows 1"]
    with pytest.raises(errors.NullValueNotAllowed):
        conn.execute("DO $$ BEGIN EXECUTE NULL; END $$")


def test_notices_reach_the_client(conn: psycopg.Connection) -> None:
    notices = _notices(
        conn,
        """DO $$
        BEGIN
            RAISE NOTICE 'n % and % %%', 1, NULL;
            RAISE WARNING 'w' USING DETAIL = 'the detail', HINT = 'the hint';
            RAISE INFO 'i';
            RAISE LOG 'not for the client';
            RAISE DEBUG 'nor this';
            RAISE NOTICE USING MESSAGE = 'from using', ERRCODE = 'P0999';
        END $$""",
    )
    assert [(n.severity, n.sqlstate, n.message_primary) for n in notices] == [
        ("NOTICE", "00000", "n 1 and <NULL> %"),
        ("WARNING", "01000", "w"),
        ("INFO", "00000", "i"),
        ("NOTICE", "P0999", "from using"),
    ]
    assert notices[1].message_detail == "the detail"
    assert notices[1].message_hint == "the hint"
    assert notices[0].context == "PL/pgSQL function inline_code_block line 3 at RAISE"
    conn.execute("SET client_min_messages = warning")
    try:
        seen = _notices(conn, "DO $$ BEGIN RAISE NOTICE 'quiet'; RAISE WARNING 'loud'; END $$")
    finally:
        conn.execute("RESET client_min_messages")
    assert [n.message_primary for n in seen] == ["loud"]


def test_notices_before_an_error_are_sent(conn: psycopg.Connection) -> None:
    seen: list[Seen] = []

    def handler(diag: psycopg.errors.Diagnostic) -> None:
        seen.append(_seen(diag))

    conn.add_notice_handler(handler)
    with pytest.raises(errors.DivisionByZero) as caught:
        conn.execute("DO $$\nBEGIN\n  RAISE NOTICE 'first';\n  PERFORM 1/0;\nEND $$")
    conn.remove_notice_handler(handler)
    assert [n.message_primary for n in seen] == ["first"]
    assert caught.value.diag.context == (
        'SQL statement "SELECT 1/0"\nPL/pgSQL function inline_code_block line 4 at PERFORM'
    )


def test_raise_and_assert_errors(conn: psycopg.Connection) -> None:
    with pytest.raises(psycopg.Error) as caught:
        conn.execute(
            "DO $$ BEGIN RAISE EXCEPTION 'bad % thing', 42 "
            "USING ERRCODE = 'P1234', DETAIL = 'd', HINT = 'h'; END $$"
        )
    diag = caught.value.diag
    assert (diag.sqlstate, diag.message_primary, diag.message_detail, diag.message_hint) == (
        "P1234",
        "bad 42 thing",
        "d",
        "h",
    )
    assert diag.context == "PL/pgSQL function inline_code_block line 1 at RAISE"
    with pytest.raises(errors.RaiseException):
        conn.execute("DO $$ BEGIN RAISE 'plain'; END $$")
    with pytest.raises(errors.UniqueViolation) as named:
        conn.execute("DO $$ BEGIN RAISE unique_violation USING MESSAGE = 'dup'; END $$")
    assert named.value.diag.message_primary == "dup"
    with pytest.raises(errors.DivisionByZero):
        conn.execute("DO $$ BEGIN RAISE SQLSTATE '22012'; END $$")
    with pytest.raises(errors.AssertFailure) as failed:
        conn.execute("DO $$ BEGIN ASSERT 1 > 2, 'one is not more'; END $$")
    assert failed.value.diag.message_primary == "one is not more"
    with pytest.raises(errors.UndefinedObject):
        conn.execute("DO $$ BEGIN RAISE no_such_condition; END $$")


@pytest.mark.parametrize(
    ("sql", "sqlstate", "message", "position"),
    [
        ("DO $$ BEGIN foo; END $$", "42601", 'syntax error at or near "foo"', 13),
        ("DO $$ BEGIN IF true THEN END $$", "42601", "syntax error at end of input", None),
        ("DO $$ BEGIN x := 1; END $$", "42601", '"x" is not a known variable', 13),
        (
            "DO $$ DECLARE x int NOT NULL; BEGIN END $$",
            "22004",
            'variable "x" must have a default value, since it\'s declared NOT NULL',
            21,
        ),
        (
            "DO $$ DECLARE x CONSTANT int := 1; BEGIN x := 2; END $$",
            "22005",
            'variable "x" is declared CONSTANT',
            42,
        ),
        ("DO $$ BEGIN EXIT; END $$", "42601", None, 13),
        ("DO $$ BEGIN RETURN 1; END $$", "42804", None, None),
        ("DO $$ BEGIN RAISE NOTICE '% %', 1; END $$", "42601", None, None),
        # Refused here, unlike Postgres: cursors in PL/pgSQL.
        ("DO $$ DECLARE c CURSOR FOR SELECT 1; BEGIN OPEN c; END $$", "0A000", None, None),
        ("DO LANGUAGE plperl $$ BEGIN END $$", "42704", 'language "plperl" does not exist', None),
        ("DO LANGUAGE sql $$ SELECT 1 $$", "0A000", None, None),
        ("DO $$ DECLARE r record; BEGIN RAISE NOTICE '%', r.a; END $$", "55000", None, None),
        ("DO $$ BEGIN RAISE; END $$", "0Z002", None, None),
        ("DO $$ BEGIN SAVEPOINT s; END $$", "0A000", None, None),
    ],
)
def test_errors(
    conn: psycopg.Connection, sql: str, sqlstate: str, message: str | None, position: int | None
) -> None:
    with pytest.raises(psycopg.Error) as caught:
        conn.execute(sql)
    diag = caught.value.diag
    assert diag.sqlstate == sqlstate, diag.message_primary
    if message is not None:
        assert diag.message_primary == message
    if position is not None:
        assert diag.statement_position == str(position)
    assert conn.execute("SELECT 1").fetchone() == (1,)


def test_variable_and_column_of_one_name_is_ambiguous(conn: psycopg.Connection) -> None:
    conn.execute("CREATE TABLE do_amb (id int PRIMARY KEY, t text)")
    conn.execute("INSERT INTO do_amb VALUES (1, 'a'), (2, 'b')")
    with pytest.raises(errors.AmbiguousColumn):
        conn.execute("DO $$ DECLARE id int := 1; BEGIN DELETE FROM do_amb WHERE id = id; END $$")
    with pytest.raises(errors.AmbiguousColumn):
        conn.execute("DO $$ DECLARE t text := 'x'; BEGIN UPDATE do_amb SET t = upper(t); END $$")
    # A qualified column, an INSERT's column list and SET's target are not references.
    conn.execute(
        "DO $$ DECLARE t text := 'z'; k int := 2; BEGIN "
        "UPDATE do_amb SET t = 'y' WHERE do_amb.id = k; "
        "INSERT INTO do_amb (id, t) VALUES (k + 1, t); END $$"
    )
    assert conn.execute("SELECT id, t FROM do_amb ORDER BY id").fetchall() == [
        (1, "a"),
        (2, "y"),
        (3, "z"),
    ]


def test_autocommit_block_is_all_or_nothing(conn: psycopg.Connection) -> None:
    conn.execute("CREATE TABLE do_tx (id int PRIMARY KEY)")
    with pytest.raises(errors.UniqueViolation):
        conn.execute(
            "DO $$ BEGIN INSERT INTO do_tx VALUES (1); INSERT INTO do_tx VALUES (1); END $$"
        )
    assert conn.execute("SELECT count(*) FROM do_tx").fetchone() == (0,)
    conn.execute("DO $$ BEGIN INSERT INTO do_tx VALUES (1); INSERT INTO do_tx VALUES (2); END $$")
    assert conn.execute("SELECT count(*) FROM do_tx").fetchone() == (2,)


def test_block_is_part_of_the_open_transaction(conn: psycopg.Connection) -> None:
    conn.execute("CREATE TABLE do_tx2 (id int PRIMARY KEY)")
    conn.execute("BEGIN")
    conn.execute("INSERT INTO do_tx2 VALUES (1)")
    conn.execute("DO $$ BEGIN INSERT INTO do_tx2 SELECT max(id) + 1 FROM do_tx2; END $$")
    assert conn.execute("SELECT count(*) FROM do_tx2").fetchone() == (2,)
    conn.execute("ROLLBACK")
    assert conn.execute("SELECT count(*) FROM do_tx2").fetchone() == (0,)
    conn.execute("BEGIN")
    with pytest.raises(errors.DivisionByZero):
        conn.execute("DO $$ BEGIN INSERT INTO do_tx2 VALUES (5); PERFORM 1/0; END $$")
    with pytest.raises(errors.InFailedSqlTransaction):
        conn.execute("SELECT 1")
    conn.execute("ROLLBACK")
    assert conn.execute("SELECT count(*) FROM do_tx2").fetchone() == (0,)


def test_a_caught_error_undoes_the_blocks_work_only(conn: psycopg.Connection) -> None:
    conn.execute("CREATE TABLE do_tx3 (id int PRIMARY KEY, v int)")
    conn.execute("BEGIN")
    notices = _notices(
        conn,
        """DO $$
        DECLARE done int := 0;
        BEGIN
            INSERT INTO do_tx3 VALUES (0, 0);
            FOR i IN 1..4 LOOP
                BEGIN
                    INSERT INTO do_tx3 VALUES (i, i);
                    UPDATE do_tx3 SET v = v + 1 WHERE id = 0;
                    IF i % 2 = 0 THEN
                        INSERT INTO do_tx3 VALUES (0, -1);
                    END IF;
                    done := done + 1;
                EXCEPTION WHEN unique_violation THEN
                    RAISE NOTICE 'undone % (%): %', i, SQLSTATE, done;
                END;
            END LOOP;
        END $$""",
    )
    assert [n.message_primary for n in notices] == ["undone 2 (23505): 1", "undone 4 (23505): 2"]
    conn.execute("INSERT INTO do_tx3 VALUES (9, 9)")  # the transaction goes on
    conn.execute("COMMIT")
    assert conn.execute("SELECT id, v FROM do_tx3 ORDER BY id").fetchall() == [
        (0, 2),
        (1, 1),
        (3, 3),
        (9, 9),
    ]


def test_caught_errors_undo_ddl_and_settings(conn: psycopg.Connection) -> None:
    conn.execute(
        """DO $$ BEGIN
            SET application_name = 'kept';
            BEGIN
                CREATE TABLE do_gone (a int);
                SET application_name = 'undone';
                PERFORM 1/0;
            EXCEPTION WHEN division_by_zero THEN NULL;
            END;
        END $$"""
    )
    assert conn.execute("SHOW application_name").fetchone() == ("kept",)
    with pytest.raises(errors.UndefinedTable):
        conn.execute("SELECT * FROM do_gone")


def test_handlers(conn: psycopg.Connection) -> None:
    notices = _notices(
        conn,
        """DO $$
        DECLARE st text; msg text; det text;
        BEGIN
            BEGIN
                BEGIN
                    RAISE EXCEPTION 'inner' USING ERRCODE = 'check_violation', DETAIL = 'x';
                EXCEPTION WHEN unique_violation THEN RAISE NOTICE 'wrong handler';
                END;
            EXCEPTION WHEN integrity_constraint_violation OR division_by_zero THEN
                GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                    det = PG_EXCEPTION_DETAIL;
                RAISE NOTICE 'class handler: % % % %', st, msg, det, SQLERRM;
            END;
            BEGIN
                PERFORM 1/0;
            EXCEPTION WHEN SQLSTATE '22012' THEN RAISE NOTICE 'by sqlstate %', SQLSTATE;
            END;
        END $$""",
    )
    assert [n.message_primary for n in notices] == [
        "class handler: 23514 inner x inner",
        "by sqlstate 22012",
    ]
    # OTHERS does not catch an assertion; a bare RAISE re-raises the error being handled.
    with pytest.raises(errors.AssertFailure):
        conn.execute("DO $$ BEGIN ASSERT false; EXCEPTION WHEN others THEN NULL; END $$")
    with pytest.raises(errors.DivisionByZero):
        conn.execute("DO $$ BEGIN PERFORM 1/0; EXCEPTION WHEN others THEN RAISE; END $$")


def test_string_body_and_language_clause(conn: psycopg.Connection) -> None:
    seen = _notices(conn, "DO LANGUAGE plpgsql 'BEGIN RAISE NOTICE ''quoted body''; END'")
    assert [n.message_primary for n in seen] == ["quoted body"]
    seen = _notices(conn, "DO $body$ BEGIN RAISE NOTICE 'tagged'; END $body$ LANGUAGE plpgsql")
    assert [n.message_primary for n in seen] == ["tagged"]


def test_extended_protocol(conn: psycopg.Connection) -> None:
    seen = _notices(conn, "DO $$ BEGIN RAISE NOTICE 'x'; END $$")
    assert len(seen) == 1
    cur = conn.execute("DO $$ BEGIN PERFORM 1; END $$", prepare=True)
    assert cur.statusmessage == "DO"


def test_statement_timeout_stops_an_endless_loop(conn: psycopg.Connection) -> None:
    conn.execute("SET statement_timeout = '300ms'")
    try:
        with pytest.raises(errors.QueryCanceled):
            conn.execute("DO $$ BEGIN LOOP NULL; END LOOP; END $$")
        with pytest.raises(errors.QueryCanceled):
            # OTHERS does not catch a cancel.
            conn.execute(
                "DO $$ BEGIN LOOP BEGIN NULL; EXCEPTION WHEN others THEN NULL; END; "
                "END LOOP; END $$"
            )
    finally:
        conn.execute("RESET statement_timeout")
    assert conn.execute("SELECT 1").fetchone() == (1,)


def test_function_bodies_parse_with_parameters() -> None:
    """The interpreter's entry for a function body (CREATE FUNCTION ... LANGUAGE plpgsql):
    parameters by name and by number, a RETURN value."""
    from percolator.server.plpgsql import Param, parse_function
    from percolator.server.sql.errors import SqlError

    fn = parse_function(
        "DECLARE t int := a * 2; BEGIN RETURN t + $2 + b; END",
        [Param("a", "integer"), Param("b", "integer")],
        returns_void=False,
        name="f(integer,integer)",
    )
    assert len(fn.param_slots) == 2
    ret = fn.block.body[0]
    assert ret.expr.text == "SELECT $1 + $2 + $2"
    t_slot = fn.block.decls[0].slot
    assert [r.slot for r in ret.expr.params] == [t_slot, fn.param_slots[1]]
    with pytest.raises(SqlError) as caught:
        parse_function("BEGIN RETURN; END extra", [], returns_void=True, name="g()")
    assert caught.value.sqlstate == "42601"


def test_nested_do_notices_and_context(conn: psycopg.Connection) -> None:
    seen: list[Seen] = []

    def handler(diag: psycopg.errors.Diagnostic) -> None:
        seen.append(_seen(diag))

    inner = "DO $i$ BEGIN RAISE NOTICE ''%s''; PERFORM 1/0; END $i$"
    conn.add_notice_handler(handler)
    with pytest.raises(errors.DivisionByZero) as caught:
        conn.execute(
            "DO $$ BEGIN RAISE NOTICE 'outer'; "
            f"BEGIN EXECUTE '{inner % 'inner'}'; "
            "EXCEPTION WHEN division_by_zero THEN RAISE NOTICE 'caught'; END; "
            f"EXECUTE '{inner % 'again'}'; END $$"
        )
    conn.remove_notice_handler(handler)
    assert [n.message_primary for n in seen] == ["outer", "inner", "caught", "again"]
    assert caught.value.diag.context == (
        'SQL statement "SELECT 1/0"\n'
        "PL/pgSQL function inline_code_block line 1 at PERFORM\n"
        "SQL statement \"DO $i$ BEGIN RAISE NOTICE 'again'; PERFORM 1/0; END $i$\"\n"
        "PL/pgSQL function inline_code_block line 1 at EXECUTE"
    )


def test_commit_and_rollback_inside_a_block(conn: psycopg.Connection) -> None:
    conn.execute("CREATE TABLE do_batches (id int PRIMARY KEY)")
    with pytest.raises(errors.UniqueViolation):
        conn.execute(
            """DO $$ BEGIN
                FOR i IN 1..3 LOOP INSERT INTO do_batches VALUES (i); COMMIT; END LOOP;
                INSERT INTO do_batches VALUES (10);
                ROLLBACK;
                INSERT INTO do_batches VALUES (1);
            END $$"""
        )
    # Each COMMIT kept its batch; what followed the last one failed with the block.
    assert conn.execute("SELECT id FROM do_batches ORDER BY id").fetchall() == [(1,), (2,), (3,)]
    conn.execute("BEGIN")
    with pytest.raises(errors.InvalidTransactionTermination):
        conn.execute("DO $$ BEGIN COMMIT; END $$")
    conn.execute("ROLLBACK")
    with pytest.raises(errors.InvalidTransactionTermination) as caught:
        conn.execute("DO $$ BEGIN BEGIN COMMIT; EXCEPTION WHEN division_by_zero THEN END; END $$")
    assert caught.value.diag.message_primary == "cannot commit while a subtransaction is active"
    # DDL committed inside the block is seen by the block's next statements.
    conn.execute(
        "DO $$ BEGIN CREATE TABLE do_later (a int); COMMIT; INSERT INTO do_later VALUES (1); END $$"
    )
    assert conn.execute("SELECT a FROM do_later").fetchall() == [(1,)]


def test_adjacent_variables_and_output_names(conn: psycopg.Connection) -> None:
    """``a+b`` is two parameters (``$1+$2`` once substituted); an ORDER BY item naming an
    output column is that column, not a variable of the same name."""
    seen = _notices(
        conn,
        "DO $$ DECLARE a int := 1; b int := 2; n int := 0; r int; BEGIN"
        " RAISE NOTICE '%', a+b; RAISE NOTICE '%', greatest(a,b);"
        " SELECT g AS n INTO r FROM generate_series(1, 3) g ORDER BY n DESC LIMIT 1;"
        " RAISE NOTICE '%', r; END $$",
    )
    assert [s.message_primary for s in seen] == ["3", "2", "3"]


def test_commit_only_in_a_query_of_its_own(conn: psycopg.Connection) -> None:
    conn.execute("CREATE TABLE do_alone (a int)")
    with pytest.raises(errors.InvalidTransactionTermination):
        conn.execute("DO $$ BEGIN INSERT INTO do_alone VALUES (1); COMMIT; END $$; SELECT 1")
    assert conn.execute("SELECT count(*) FROM do_alone").fetchone() == (0,)
    conn.execute("DO $$ BEGIN INSERT INTO do_alone VALUES (1); COMMIT; END $$")
    assert conn.execute("SELECT count(*) FROM do_alone").fetchone() == (1,)


def test_a_caught_error_takes_back_notify(sql_server: SqlServer) -> None:
    with (
        psycopg.connect(sql_server.conninfo(), autocommit=True) as listener,
        psycopg.connect(sql_server.conninfo(), autocommit=True) as sender,
    ):
        listener.execute("LISTEN do_channel")
        sender.execute(
            "DO $$ BEGIN NOTIFY do_channel, 'undone'; PERFORM 1 / 0;"
            " EXCEPTION WHEN division_by_zero THEN NULL; END $$"
        )
        sender.execute("NOTIFY do_channel, 'kept'")
        got = [n.payload for n in listener.notifies(timeout=1.0, stop_after=1)]
        assert got == ["kept"]


def test_function_notices_in_order(conn: psycopg.Connection) -> None:
    conn.execute(
        "CREATE FUNCTION do_loud(x int) RETURNS int LANGUAGE plpgsql"
        " AS $$ BEGIN RAISE NOTICE 'in f %', x; RETURN x; END $$"
    )
    seen = _notices(
        conn, "DO $$ BEGIN RAISE NOTICE 'a'; PERFORM do_loud(1); RAISE NOTICE 'c'; END $$"
    )
    assert [s.message_primary for s in seen] == ["a", "in f 1", "c"]
