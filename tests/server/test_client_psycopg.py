"""psycopg 3 (sync and async) against the SQL server: the protocol paths psycopg really uses.

psycopg sends parameters with server-side binding (ints binary as int2/int4/int8 by magnitude,
strings as unknown), starts transactions with a simple ``BEGIN``, pipelines ``executemany``,
prepares statements after ``prepare_threshold`` executions and drops them with ``DEALLOCATE ALL``
after a ROLLBACK, and cancels through a CancelRequest on a new socket.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import threading
import time
import uuid
from decimal import Decimal

import psycopg
import pytest
from psycopg import errors, pq
from psycopg.types.json import Jsonb

from tests.server.conftest import SqlServer

IDLE = pq.TransactionStatus.IDLE
INTRANS = pq.TransactionStatus.INTRANS
INERROR = pq.TransactionStatus.INERROR


def connect(server: SqlServer, **kwargs: object) -> psycopg.Connection:
    """A psycopg connection to ``server``."""
    return psycopg.connect(server.conninfo(), **kwargs)  # type: ignore[arg-type]


def test_connect_and_simple_queries(sql_server: SqlServer) -> None:
    with connect(sql_server, autocommit=True) as conn:
        assert conn.info.server_version >= 150000
        assert conn.info.parameter_status("client_encoding") == "UTF8"
        assert conn.info.parameter_status("standard_conforming_strings") == "on"
        assert conn.execute("SELECT 1, 'two', NULL").fetchone() == (1, "two", None)
        conn.execute("CREATE TABLE simple_q (id int PRIMARY KEY, name text)")
        cur = conn.execute("INSERT INTO simple_q VALUES (1, 'a'), (2, 'b'), (3, 'c')")
        assert cur.rowcount == 3
        cur = conn.execute("SELECT id, name FROM simple_q WHERE id >= 2 ORDER BY id DESC")
        assert [d.name for d in cur.description] == ["id", "name"]
        assert cur.fetchall() == [(3, "c"), (2, "b")]
        # Several statements in one simple query: one result each.
        cur = conn.execute(
            "UPDATE simple_q SET name = 'z' WHERE id = 1; SELECT name FROM simple_q WHERE id = 1"
        )
        assert cur.statusmessage == "UPDATE 1"
        assert cur.nextset()
        assert cur.fetchone() == ("z",)


TYPED_ROW = {
    "i2": 7,
    "i4": 70_000,
    "i8": 2**40,
    "f8": 1.25,
    "num": Decimal("12345.678900"),
    "txt": "héllo 'quoted'",
    "bin": b"\x00\x01\xff",
    "flag": True,
    "day": dt.date(2024, 2, 29),
    "ts": dt.datetime(2024, 1, 2, 3, 4, 5, 123456),
    "tstz": dt.datetime(2024, 1, 2, 3, 4, 5, 654321, tzinfo=dt.UTC),
    "uid": uuid.UUID("12345678-1234-5678-1234-567812345678"),
    "doc": {"a": 1, "b": [True, None, "x"], "c": {"d": 1.5}},
}

TYPED_DDL = """CREATE TABLE typed (
    id int PRIMARY KEY, i2 smallint, i4 int, i8 bigint, f8 double precision, num numeric(20,6),
    txt text, bin bytea, flag boolean, day date, ts timestamp, tstz timestamptz, uid uuid,
    doc jsonb)"""


def _insert_typed(conn: psycopg.Connection, row_id: int, values: dict[str, object]) -> None:
    names = ", ".join(values)
    marks = ", ".join(["%s"] * len(values))
    params = [Jsonb(v) if k == "doc" and v is not None else v for k, v in values.items()]
    conn.execute(f"INSERT INTO typed (id, {names}) VALUES (%s, {marks})", [row_id, *params])


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
def test_parameters_of_every_common_type_round_trip(sql_server: SqlServer, binary: bool) -> None:
    with connect(sql_server, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS typed")
        conn.execute(TYPED_DDL)
        _insert_typed(conn, 1, TYPED_ROW)
        _insert_typed(conn, 2, dict.fromkeys(TYPED_ROW))
        cur = conn.cursor(binary=binary)
        names = ", ".join(TYPED_ROW)
        row = cur.execute(f"SELECT {names} FROM typed WHERE id = %s", [1]).fetchone()
        assert row is not None
        assert dict(zip(TYPED_ROW, row, strict=True)) == TYPED_ROW
        assert cur.execute(f"SELECT {names} FROM typed WHERE id = %s", [2]).fetchone() == (
            (None,) * len(TYPED_ROW)
        )
        # Parameters in WHERE clauses compare with the typed columns.
        cur.execute(
            "SELECT id FROM typed WHERE i8 = %s AND day = %s AND uid = %s AND flag = %s",
            [2**40, dt.date(2024, 2, 29), TYPED_ROW["uid"], True],
        )
        assert cur.fetchall() == [(1,)]


def test_int_parameters_by_magnitude(sql_server: SqlServer) -> None:
    with connect(sql_server, autocommit=True) as conn:
        for value in (1, -(2**15), 2**31 - 1, -(2**31), 2**62, -(2**63)):
            assert conn.execute("SELECT %s::bigint", [value]).fetchone() == (value,)
        # A literal-typed untyped string parameter takes its type from context.
        assert conn.execute("SELECT %s::int + 1", ["41"]).fetchone() == (42,)
        assert conn.execute("SELECT %b", [b"raw"]).fetchone() == (b"raw",)


def test_placeholders_written_without_spaces(sql_server: SqlServer) -> None:
    """psycopg sends ``%s,%s`` as ``$1,$2``, which sqlglot took for a dollar-quoted string."""
    with connect(sql_server) as conn:
        assert conn.execute("SELECT %s,%s", (1, 2)).fetchone() == (1, 2)
        assert conn.execute("SELECT %s::int+%s::int", (1, 2)).fetchone() == (3,)
        assert conn.execute("SELECT $$a,$$||%s", ("b",)).fetchone() == ("a,b",)
        conn.execute("CREATE TABLE nospace (a int, b int)")
        conn.execute("INSERT INTO nospace VALUES (%s,%s)", (3, 4))
        assert conn.execute("SELECT * FROM nospace WHERE a=%s", (3,)).fetchall() == [(3, 4)]


def test_transactions_begin_commit_rollback(sql_server: SqlServer) -> None:
    with connect(sql_server, autocommit=True) as setup:
        setup.execute("CREATE TABLE tx (id int PRIMARY KEY, v text)")
    with connect(sql_server) as conn:
        assert conn.info.transaction_status == IDLE
        conn.execute("INSERT INTO tx VALUES (1, 'committed')")
        assert conn.info.transaction_status == INTRANS
        conn.commit()
        assert conn.info.transaction_status == IDLE
        conn.execute("INSERT INTO tx VALUES (2, 'rolled back')")
        conn.rollback()
        assert conn.execute("SELECT id FROM tx ORDER BY id").fetchall() == [(1,)]
        conn.rollback()
        # An error fails the block until ROLLBACK.
        with pytest.raises(errors.UniqueViolation):
            conn.execute("INSERT INTO tx VALUES (1, 'dup')")
        assert conn.info.transaction_status == INERROR
        with pytest.raises(errors.InFailedSqlTransaction):
            conn.execute("SELECT 1")
        conn.rollback()
        assert conn.info.transaction_status == IDLE
        # Read-only / isolation options arrive in the BEGIN statement.
        conn.read_only = True
        conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        assert conn.execute("SELECT count(*) FROM tx").fetchone() == (1,)
        with pytest.raises(errors.ReadOnlySqlTransaction):
            conn.execute("INSERT INTO tx VALUES (3, 'ro')")
        conn.rollback()


def test_transaction_blocks_with_nested_savepoints(sql_server: SqlServer) -> None:
    with connect(sql_server, autocommit=True) as conn:
        conn.execute("CREATE TABLE nested (id int PRIMARY KEY)")
        with conn.transaction():
            conn.execute("INSERT INTO nested VALUES (1)")
            with conn.transaction():
                conn.execute("INSERT INTO nested VALUES (2)")
            with pytest.raises(errors.UniqueViolation), conn.transaction():
                conn.execute("INSERT INTO nested VALUES (3)")
                conn.execute("INSERT INTO nested VALUES (1)")
            with conn.transaction() as inner:
                conn.execute("INSERT INTO nested VALUES (4)")
                raise psycopg.Rollback(inner)
            assert conn.info.transaction_status == INTRANS
        assert conn.info.transaction_status == IDLE
        assert conn.execute("SELECT id FROM nested ORDER BY id").fetchall() == [(1,), (2,)]
        with pytest.raises(ZeroDivisionError), conn.transaction():
            conn.execute("INSERT INTO nested VALUES (5)")
            raise ZeroDivisionError
        assert conn.execute("SELECT count(*) FROM nested").fetchone() == (2,)


def test_executemany_and_explicit_pipeline(sql_server: SqlServer) -> None:
    with connect(sql_server, autocommit=True) as conn:
        conn.execute("CREATE TABLE many (id int PRIMARY KEY, name text, score float8)")
        cur = conn.cursor()
        cur.executemany(
            "INSERT INTO many VALUES (%s, %s, %s)", [(i, f"n{i}", i / 2) for i in range(50)]
        )
        assert conn.execute("SELECT count(*), sum(score) FROM many").fetchone() == (50, 612.5)
        cur.executemany("SELECT name FROM many WHERE id = %s", [(1,), (2,)], returning=True)
        names = []
        while True:
            names.append(cur.fetchone())
            if not cur.nextset():
                break
        assert names == [("n1",), ("n2",)]
        with conn.pipeline(), conn.transaction():
            c1 = conn.execute("INSERT INTO many VALUES (%s, %s, %s)", [100, "p", 1.0])
            c2 = conn.execute("SELECT name FROM many WHERE id = %s", [100])
            c3 = conn.execute("UPDATE many SET name = %s WHERE id < %s", ["low", 3])
        assert c1.rowcount == 1
        assert c2.fetchone() == ("p",)
        assert c3.rowcount == 3
        # An error inside a pipeline aborts the rest up to the Sync; the connection goes on.
        with pytest.raises(errors.UniqueViolation), conn.pipeline():
            conn.execute("INSERT INTO many VALUES (%s, 'dup', 0)", [1])
            conn.execute("INSERT INTO many VALUES (%s, 'never', 0)", [101])
        assert conn.execute("SELECT count(*) FROM many WHERE id = 101").fetchone() == (0,)


def test_prepared_statements_and_deallocate_all(sql_server: SqlServer) -> None:
    with connect(sql_server, prepare_threshold=2) as conn:
        conn.execute("CREATE TABLE prep (id int PRIMARY KEY, v text)")
        conn.commit()
        for i in range(6):
            conn.execute("INSERT INTO prep VALUES (%s, %s)", [i, str(i)])
            assert conn.execute("SELECT v FROM prep WHERE id = %s", [i]).fetchone() == (str(i),)
        conn.commit()
        # psycopg sends DEALLOCATE ALL after the ROLLBACK and prepares again with the same
        # names: the server must have dropped them.
        conn.execute("SELECT v FROM prep WHERE id = %s", [0])
        conn.rollback()
        for i in range(6, 12):
            conn.execute("INSERT INTO prep VALUES (%s, %s)", [i, str(i)])
            assert conn.execute("SELECT v FROM prep WHERE id = %s", [i]).fetchone() == (str(i),)
        conn.commit()
        assert conn.execute("SELECT count(*) FROM prep").fetchone() == (12,)
        conn.commit()
    # The same at the protocol level: a named statement, DEALLOCATE ALL, the same name again.
    with connect(sql_server, autocommit=True) as conn:
        pgconn = conn.pgconn
        assert pgconn.prepare(b"_pg3_0", b"SELECT 1").status == pq.ExecStatus.COMMAND_OK
        again = pgconn.prepare(b"_pg3_0", b"SELECT 2")
        assert again.status == pq.ExecStatus.FATAL_ERROR
        assert again.error_field(pq.DiagnosticField.SQLSTATE) == b"42P05"
        conn.execute("DEALLOCATE ALL")
        assert pgconn.prepare(b"_pg3_0", b"SELECT 3").status == pq.ExecStatus.COMMAND_OK
        result = pgconn.exec_prepared(b"_pg3_0", [])
        assert result.get_value(0, 0) == b"3"


def test_data_modifying_cte_with_parameters(sql_server: SqlServer) -> None:
    """``WITH ins AS (INSERT ... VALUES ($1) RETURNING id) SELECT id FROM ins`` through the
    extended protocol: the parameter typed by the CTE's INSERT, the statement prepared and
    run again (each run inserts once), the main statement's rows and command tag."""
    with connect(sql_server, autocommit=True) as conn:
        conn.execute("CREATE TABLE mcte (v text, id serial PRIMARY KEY)")
        sql = "WITH ins AS (INSERT INTO mcte VALUES (%s) RETURNING id) SELECT id FROM ins"
        assert conn.execute(sql, ["a"]).fetchall() == [(1,)]
        for i, v in enumerate(["b", "c"], 2):
            cur = conn.execute(sql, [v], prepare=True)
            assert cur.fetchall() == [(i,)]
            assert cur.statusmessage == "SELECT 1"
        cur = conn.execute(
            "WITH d AS (DELETE FROM mcte WHERE id <= %s RETURNING v) "
            "INSERT INTO mcte (v) SELECT v || %s FROM d",
            [2, "!"],
        )
        assert cur.statusmessage == "INSERT 0 2"
        rows = conn.execute("SELECT v FROM mcte ORDER BY v").fetchall()
        assert rows == [("a!",), ("b!",), ("c",)]


def test_copy_from_stdin_text(sql_server: SqlServer) -> None:
    with connect(sql_server, autocommit=True) as conn:
        conn.execute("CREATE TABLE cp_text (id int PRIMARY KEY, name text, amount numeric(10,2))")
        with conn.cursor() as cur:
            with cur.copy("COPY cp_text (id, name, amount) FROM STDIN") as copy:
                copy.write_row((1, "tab\there", Decimal("1.50")))
                copy.write_row((2, None, Decimal("-3.25")))
                copy.write(b"3\tthree\t0.01\n")
            assert cur.rowcount == 3
        rows = conn.execute("SELECT id, name, amount FROM cp_text ORDER BY id").fetchall()
        assert rows == [
            (1, "tab\there", Decimal("1.50")),
            (2, None, Decimal("-3.25")),
            (3, "three", Decimal("0.01")),
        ]


def test_copy_from_stdin_binary_and_to_stdout(sql_server: SqlServer) -> None:
    with connect(sql_server, autocommit=True) as conn:
        conn.execute("CREATE TABLE cp (id int PRIMARY KEY, name text, amount numeric(10,2))")
        with conn.cursor() as cur:
            with cur.copy("COPY cp (id, name, amount) FROM STDIN (FORMAT BINARY)") as copy:
                copy.set_types(["int4", "text", "numeric"])
                copy.write_row((1, "tab\there", Decimal("1.50")))
                copy.write_row((2, None, Decimal("-3.25")))
                copy.write_row((3, "back\\slash", Decimal("0.01")))
            assert cur.rowcount == 3
            with cur.copy("COPY cp TO STDOUT") as copy:
                lines = b"".join(copy).decode().splitlines()
            assert sorted(lines) == [
                "1\ttab\\there\t1.50",
                "2\t\\N\t-3.25",
                "3\tback\\\\slash\t0.01",
            ]
            query = "COPY (SELECT id, name FROM cp WHERE id > 1 ORDER BY id) TO STDOUT"
            with cur.copy(query) as copy:
                copy.set_types(["int4", "text"])
                assert list(copy.rows()) == [(2, None), (3, "back\\slash")]
            with cur.copy("COPY cp (id, amount) TO STDOUT (FORMAT BINARY)") as copy:
                copy.set_types(["int4", "numeric"])
                rows = sorted(copy.rows())
            assert rows == [(1, Decimal("1.50")), (2, Decimal("-3.25")), (3, Decimal("0.01"))]
        # A failed COPY FROM rolls back all of its rows.
        with (
            pytest.raises(errors.UniqueViolation),
            conn.cursor().copy("COPY cp (id, name) FROM STDIN (FORMAT BINARY)") as copy,
        ):
            copy.set_types(["int4", "text"])
            copy.write_row((10, "new"))
            copy.write_row((1, "dup"))
        assert conn.execute("SELECT count(*) FROM cp").fetchone() == (3,)


def _copy_round_trip(conn: psycopg.Connection) -> list[object]:
    """COPY in every format through psycopg (the CSV fed one byte per CopyData, so records,
    quoted fields and characters straddle messages), then out again."""
    conn.execute("DROP TABLE IF EXISTS cp_many")
    conn.execute(
        "CREATE TABLE cp_many (id serial PRIMARY KEY, n int, t text, ts timestamptz, "
        "d numeric, u uuid, arr int[], j jsonb, b bytea)"
    )
    columns = "n, t, ts, d, u, arr, j, b"
    types = ["int4", "text", "timestamptz", "numeric", "uuid", "int4[]", "jsonb", "bytea"]
    row = (
        1,
        "a\tb\n\\c é",
        dt.datetime(2020, 1, 2, 3, 4, 5, tzinfo=dt.UTC),
        Decimal("1.50"),
        uuid.UUID(int=5),
        [1, 2],
        Jsonb({"a": 1}),
        b"\x00\x01",
    )
    empty = (None,) * 8
    out: list[object] = []
    with conn.cursor() as cur:
        with cur.copy(f"COPY cp_many ({columns}) FROM STDIN") as copy:
            copy.write_row(row)
            copy.write_row(empty)
        with cur.copy(f"COPY cp_many ({columns}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(types)
            copy.write_row(row)
            copy.write_row(empty)
        with cur.copy("COPY cp_many (n, t) FROM STDIN (FORMAT CSV, HEADER)") as copy:
            for byte in 'n,t\n7,"x\r\n""é"""\n8,\n9,""\n'.encode():
                copy.write(bytes([byte]))
        with cur.copy("COPY cp_many TO STDOUT (FORMAT CSV, FORCE_QUOTE (t))") as copy:
            out.append(b"".join(copy))
        with cur.copy("COPY cp_many TO STDOUT (FORMAT BINARY)") as copy:
            copy.set_types(["int4", *types])
            out.append(list(copy.rows()))
        with pytest.raises(errors.InvalidTextRepresentation):
            with cur.copy("COPY cp_many (n) FROM STDIN") as copy:
                copy.write_row(("zz",))
        # psycopg sends CopyFail and raises the client's own error.
        with pytest.raises(ValueError):
            with cur.copy("COPY cp_many (n) FROM STDIN") as copy:
                copy.write_row((1,))
                raise ValueError("the client gives up")
    out.append(conn.execute("SELECT count(*) FROM cp_many").fetchone())
    return out


def test_copy_formats_as_postgres(sql_server: SqlServer, reference_dsn: str) -> None:
    with (
        connect(sql_server, autocommit=True) as conn,
        psycopg.connect(reference_dsn, autocommit=True) as ref,
    ):
        assert _copy_round_trip(conn) == _copy_round_trip(ref)


def test_errors_leave_the_connection_usable(sql_server: SqlServer) -> None:
    with connect(sql_server, autocommit=True) as conn:
        conn.execute("CREATE TABLE errs (id int PRIMARY KEY)")
        conn.execute("INSERT INTO errs VALUES (1)")
        with pytest.raises(errors.UniqueViolation) as unique:
            conn.execute("INSERT INTO errs VALUES (%s)", [1])
        assert unique.value.sqlstate == "23505"
        with pytest.raises(errors.UndefinedTable) as undefined:
            conn.execute("SELECT * FROM no_such_table")
        assert undefined.value.sqlstate == "42P01"
        with pytest.raises(errors.SyntaxError) as syntax:
            conn.execute("SELECT id FROM errs WHERE")
        assert syntax.value.sqlstate == "42601"
        assert syntax.value.diag.statement_position is not None
        assert int(syntax.value.diag.statement_position) > 0
        with pytest.raises(errors.UndefinedColumn):
            conn.execute("SELECT nope FROM errs WHERE id = %s", [1])
        with pytest.raises(errors.DivisionByZero):
            conn.execute("SELECT 1 / 0")
        assert conn.info.transaction_status == IDLE
        assert conn.execute("SELECT id FROM errs").fetchall() == [(1,)]


def test_constraint_violations_name_their_objects_as_postgres_does(
    sql_server: SqlServer, reference_dsn: str
) -> None:
    """A constraint violation's schema, table, column and constraint name fields (which
    drivers expose, and ORMs read to tell which constraint failed) are Postgres's."""
    setup = [
        "CREATE TABLE diag_parent (id int PRIMARY KEY, code text UNIQUE)",
        "CREATE TABLE diag_child (id int PRIMARY KEY, parent int NOT NULL"
        " CONSTRAINT diag_child_fk REFERENCES diag_parent (id), qty int CHECK (qty > 0))",
        "INSERT INTO diag_parent VALUES (1, 'a')",
        "INSERT INTO diag_child VALUES (1, 1, 1)",
    ]
    violations = [
        "INSERT INTO diag_parent VALUES (1, 'b')",
        "INSERT INTO diag_parent VALUES (2, 'a')",
        "INSERT INTO diag_child VALUES (2, NULL, 1)",
        "INSERT INTO diag_child VALUES (2, 1, 0)",
        "INSERT INTO diag_child VALUES (2, 9, 1)",
        "DELETE FROM diag_parent WHERE id = 1",
    ]

    def fields(conninfo: str) -> list[tuple[str | None, ...]]:
        out = []
        with psycopg.connect(conninfo, autocommit=True) as conn:
            for sql in setup:
                conn.execute(sql)
            for sql in violations:
                with pytest.raises(errors.IntegrityError) as failed:
                    conn.execute(sql)
                d = failed.value.diag
                out.append(
                    (d.sqlstate, d.schema_name, d.table_name, d.column_name, d.constraint_name)
                )
        return out

    ours = fields(sql_server.conninfo())
    assert ours == fields(reference_dsn)
    assert ours[0][1:] == ("public", "diag_parent", None, "diag_parent_pkey")


# 150 rows: the three-way cross join below has 3.4M rows and runs for seconds.
BIG_ROWS = 150


def _big_table(conn: psycopg.Connection, name: str) -> None:
    conn.execute(f"CREATE TABLE {name} (id int PRIMARY KEY)")
    conn.execute(f"INSERT INTO {name} SELECT * FROM generate_series(1, {BIG_ROWS})")


def test_cancel_a_long_query(sql_server_process: SqlServer) -> None:
    # A server of its own process: one on a thread of this process shares the interpreter
    # lock with psycopg's cancel, whose connection handshake (polled in Python with libpq 17
    # and later) then took 1-2 s while the query ran, sometimes longer than the query.
    with connect(sql_server_process, autocommit=True) as conn:
        _big_table(conn, "big_cancel")
        done = threading.Event()

        def keep_canceling() -> None:
            # As in Postgres, a cancel that arrives before the statement runs is ignored; on a
            # busy machine one sent after 0.3 s can, so send one every 0.3 s until it ends.
            while not done.wait(0.3):
                conn.cancel_safe()

        canceler = threading.Thread(target=keep_canceling)
        canceler.start()
        started = time.monotonic()
        try:
            with pytest.raises(errors.QueryCanceled) as canceled:
                conn.execute("SELECT count(*) FROM big_cancel a, big_cancel b, big_cancel c")
        finally:
            done.set()
            canceler.join()
        assert canceled.value.sqlstate == "57014"
        assert time.monotonic() - started < 10
        assert conn.execute("SELECT count(*) FROM big_cancel").fetchone() == (BIG_ROWS,)


def test_statement_timeout(sql_server: SqlServer) -> None:
    with connect(sql_server, autocommit=True) as conn:
        _big_table(conn, "big_timeout")
        conn.execute("SET statement_timeout = '200ms'")
        assert conn.execute("SHOW statement_timeout").fetchone() == ("200ms",)
        started = time.monotonic()
        with pytest.raises(errors.QueryCanceled):
            conn.execute("SELECT count(*) FROM big_timeout a, big_timeout b, big_timeout c")
        assert time.monotonic() - started < 10
        conn.execute("RESET statement_timeout")
        assert conn.execute("SELECT count(*) FROM big_timeout").fetchone() == (BIG_ROWS,)


def test_lateral_streams_and_times_out(sql_server: SqlServer) -> None:
    """A LATERAL join runs its right side per left row as the rows are asked for: a LIMIT
    ends a huge one at once, and statement_timeout stops one whose right sides are empty."""
    many = "generate_series(1, 100000000) a"
    with connect(sql_server, autocommit=True) as conn:
        started = time.monotonic()
        rows = conn.execute(f"SELECT * FROM {many}, LATERAL (SELECT a * 2 AS b) x LIMIT 2")
        assert rows.fetchall() == [(1, 2), (2, 4)]
        assert time.monotonic() - started < 5
        conn.execute("SET statement_timeout = '200ms'")
        with pytest.raises(errors.QueryCanceled):
            conn.execute(f"SELECT count(*) FROM {many}, LATERAL (SELECT 1 WHERE a < 0) x")
        assert time.monotonic() - started < 10
        conn.execute("RESET statement_timeout")


def test_async_connection(sql_server: SqlServer) -> None:
    async def run() -> None:
        async with await psycopg.AsyncConnection.connect(sql_server.conninfo()) as conn:
            await conn.execute("CREATE TABLE async_t (id int PRIMARY KEY, at timestamptz)")
            await conn.commit()
            when = dt.datetime(2020, 5, 6, 7, 8, 9, tzinfo=dt.UTC)
            async with conn.transaction():
                cur = conn.cursor()
                await cur.executemany("INSERT INTO async_t VALUES (%s, %s)", [(1, when), (2, None)])
            assert conn.info.transaction_status == IDLE
            cur = await conn.execute("SELECT id, at FROM async_t ORDER BY id", binary=True)
            assert await cur.fetchall() == [(1, when), (2, None)]
            await conn.rollback()
            async with conn.cursor() as cur:
                async with cur.copy("COPY async_t (id) FROM STDIN (FORMAT BINARY)") as copy:
                    copy.set_types(["int4"])
                    await copy.write_row((3,))
                await conn.commit()
                await cur.execute("SELECT count(*) FROM async_t")
                assert await cur.fetchone() == (3,)
            await conn.rollback()
            with pytest.raises(errors.UndefinedTable):
                await conn.execute("SELECT * FROM async_missing")
            await conn.rollback()
            cur = await conn.execute("SELECT %s::text", ["ok"])
            assert await cur.fetchone() == ("ok",)

    asyncio.run(run())


def test_jsonb_values_come_back_as_python_objects(sql_server: SqlServer) -> None:
    """psycopg loads json and jsonb results (text and binary) into Python values."""
    with connect(sql_server, autocommit=True) as conn:
        for binary in (False, True):
            row = (
                conn.cursor(binary=binary)
                .execute(
                    "SELECT jsonb_build_object('a', 1, 'b', ARRAY['x']), %s::jsonb -> 'k',"
                    " json_build_array(1.5, NULL)",
                    (Jsonb({"k": [1, {"z": None}]}),),
                )
                .fetchone()
            )
            assert row == ({"a": 1, "b": ["x"]}, [1, {"z": None}], [1.5, None])
