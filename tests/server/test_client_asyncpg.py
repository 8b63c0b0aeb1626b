"""asyncpg against the SQL server.

asyncpg prepares every statement with Parse + Describe + Flush (not Sync) and encodes each
argument with the codec of the parameter OID the server reports, in binary; it reads results
in binary; executemany pipelines Bind/Execute pairs; cursors use Execute row limits; COPY goes
through binary COPY; a pool runs its reset query on release; ``timeout=`` sends a
CancelRequest.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import io
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from decimal import Decimal

import asyncpg
import pytest

from tests.server.conftest import SqlServer

Check = Callable[[asyncpg.Connection], Awaitable[None]]


def run(server: SqlServer, check: Check) -> None:
    """Run ``check`` on a fresh asyncpg connection to ``server``."""

    async def main() -> None:
        conn = await asyncpg.connect(server.url())
        try:
            await check(conn)
        finally:
            await conn.close()

    asyncio.run(main())


def test_connect_and_fetch(sql_server: SqlServer) -> None:
    async def check(conn: asyncpg.Connection) -> None:
        assert conn.get_server_version().major >= 15
        await conn.execute(
            "CREATE TABLE people (id int PRIMARY KEY, name text NOT NULL, age smallint)"
        )
        status = await conn.execute("INSERT INTO people VALUES ($1, $2, $3)", 1, "ann", 31)
        assert status == "INSERT 0 1"
        await conn.execute("INSERT INTO people VALUES (2, 'bob', NULL), (3, 'cy', 40)")
        rows = await conn.fetch("SELECT id, name, age FROM people WHERE id > $1 ORDER BY id", 1)
        assert [tuple(r) for r in rows] == [(2, "bob", None), (3, "cy", 40)]
        assert rows[0]["name"] == "bob"
        row = await conn.fetchrow("SELECT name, age FROM people WHERE id = $1", 3)
        assert row is not None and dict(row) == {"name": "cy", "age": 40}
        assert await conn.fetchrow("SELECT name FROM people WHERE id = $1", 99) is None
        assert await conn.fetchval("SELECT count(*) FROM people WHERE age >= $1", 30) == 2
        assert await conn.fetchval("SELECT name FROM people WHERE name LIKE $1", "a%") == "ann"
        assert await conn.fetchval("SELECT $1::int8 * 2", 2**40) == 2**41
        assert await conn.fetchrow(";") is None  # SQLAlchemy's ping

    run(sql_server, check)


def test_parameter_types_come_from_the_statement(sql_server: SqlServer) -> None:
    async def check(conn: asyncpg.Connection) -> None:
        await conn.execute("CREATE TABLE ptypes (id int PRIMARY KEY, name text, big bigint)")
        statement = await conn.prepare("INSERT INTO ptypes VALUES ($1, $2, $3)")
        assert [t.name for t in statement.get_parameters()] == ["int4", "text", "int8"]
        statement = await conn.prepare("SELECT name FROM ptypes WHERE id = $1 AND big > $2")
        assert [t.name for t in statement.get_parameters()] == ["int4", "int8"]
        assert [(a.name, a.type.name) for a in statement.get_attributes()] == [("name", "text")]
        # asyncpg refuses an argument that does not fit the reported type, as with Postgres.
        with pytest.raises(asyncpg.DataError):
            await conn.fetchval("SELECT $1::text", 5)

    run(sql_server, check)


TYPED_DDL = """CREATE TABLE typed (
    id int PRIMARY KEY, i2 smallint, i4 int, i8 bigint, f4 real, f8 double precision,
    num numeric(20,6), txt text, vc varchar(20), bin bytea, flag boolean, day date,
    ts timestamp, tstz timestamptz, uid uuid, doc jsonb)"""

TYPED_ROW = {
    "i2": -7,
    "i4": 70_000,
    "i8": -(2**40),
    "f4": 1.5,
    "f8": 2.25e100,
    "num": Decimal("-12345.678900"),
    "txt": "héllo\n'quoted'",
    "vc": "short",
    "bin": b"\x00\x01\xff",
    "flag": False,
    "day": dt.date(1999, 12, 31),
    "ts": dt.datetime(2024, 1, 2, 3, 4, 5, 123456),
    "tstz": dt.datetime(2024, 1, 2, 3, 4, 5, 654321, tzinfo=dt.UTC),
    "uid": uuid.UUID("12345678-1234-5678-1234-567812345678"),
    "doc": '{"a": 1, "b": [true, null, "x"]}',
}


def test_every_common_type_round_trips(sql_server: SqlServer) -> None:
    async def check(conn: asyncpg.Connection) -> None:
        await conn.execute(TYPED_DDL)
        names = ", ".join(TYPED_ROW)
        marks = ", ".join(f"${i}" for i in range(2, len(TYPED_ROW) + 2))
        insert = f"INSERT INTO typed (id, {names}) VALUES ($1, {marks})"
        await conn.execute(insert, 1, *TYPED_ROW.values())
        await conn.execute(insert, 2, *([None] * len(TYPED_ROW)))
        row = await conn.fetchrow(f"SELECT {names} FROM typed WHERE id = $1", 1)
        assert row is not None
        got = dict(row)
        assert got.pop("doc").replace(" ", "") == TYPED_ROW["doc"].replace(" ", "")
        assert got == {k: v for k, v in TYPED_ROW.items() if k != "doc"}
        row = await conn.fetchrow(f"SELECT {names} FROM typed WHERE id = $1", 2)
        assert row is not None and set(row.values()) == {None}
        # Parameters compared with typed columns are encoded with the column's codec.
        found = await conn.fetchval(
            "SELECT id FROM typed WHERE uid = $1 AND day = $2 AND tstz = $3 AND num = $4",
            TYPED_ROW["uid"],
            TYPED_ROW["day"],
            TYPED_ROW["tstz"],
            TYPED_ROW["num"],
        )
        assert found == 1

    run(sql_server, check)


def test_executemany_and_reused_prepared_statements(sql_server: SqlServer) -> None:
    async def check(conn: asyncpg.Connection) -> None:
        await conn.execute("CREATE TABLE many (id int PRIMARY KEY, name text, score float8)")
        await conn.executemany(
            "INSERT INTO many VALUES ($1, $2, $3)", [(i, f"n{i}", i / 4) for i in range(100)]
        )
        assert await conn.fetchval("SELECT count(*) FROM many") == 100
        # executemany is atomic: one failing row rolls back all of them.
        with pytest.raises(asyncpg.UniqueViolationError):
            await conn.executemany("INSERT INTO many VALUES ($1, 'x', 0)", [(200,), (5,)])
        assert await conn.fetchval("SELECT count(*) FROM many WHERE id = 200") == 0
        statement = await conn.prepare("SELECT name, score FROM many WHERE id = $1")
        for i in (3, 50, 99):
            assert tuple(await statement.fetchrow(i)) == (f"n{i}", i / 4)
        assert await statement.fetchval(7) == "n7"
        assert [tuple(r) for r in await statement.fetch(8)] == [("n8", 2.0)]

    run(sql_server, check)


def test_transactions_and_savepoints(sql_server: SqlServer) -> None:
    async def check(conn: asyncpg.Connection) -> None:
        await conn.execute("CREATE TABLE tx (id int PRIMARY KEY)")
        async with conn.transaction():
            await conn.execute("INSERT INTO tx VALUES (1)")
            assert conn.is_in_transaction()
            async with conn.transaction():  # a savepoint
                await conn.execute("INSERT INTO tx VALUES (2)")
            with pytest.raises(asyncpg.UniqueViolationError):
                async with conn.transaction():
                    await conn.execute("INSERT INTO tx VALUES (3)")
                    await conn.execute("INSERT INTO tx VALUES (1)")
        assert not conn.is_in_transaction()
        assert [r[0] for r in await conn.fetch("SELECT id FROM tx ORDER BY id")] == [1, 2]
        with pytest.raises(RuntimeError):
            async with conn.transaction():
                await conn.execute("INSERT INTO tx VALUES (4)")
                raise RuntimeError
        transaction = conn.transaction(isolation="repeatable_read", readonly=True)
        await transaction.start()
        assert await conn.fetchval("SELECT count(*) FROM tx") == 2
        with pytest.raises(asyncpg.ReadOnlySQLTransactionError):
            await conn.execute("INSERT INTO tx VALUES (5)")
        await transaction.rollback()
        assert await conn.fetchval("SELECT count(*) FROM tx") == 2

    run(sql_server, check)


def test_cursors_fetch_in_batches(sql_server: SqlServer) -> None:
    async def check(conn: asyncpg.Connection) -> None:
        await conn.execute("CREATE TABLE seq (n int PRIMARY KEY)")
        await conn.execute("INSERT INTO seq SELECT * FROM generate_series(1, 100)")
        async with conn.transaction():
            seen = [r["n"] async for r in conn.cursor("SELECT n FROM seq ORDER BY n", prefetch=7)]
            assert seen == list(range(1, 101))
            cursor = await conn.cursor("SELECT n FROM seq WHERE n > $1 ORDER BY n", 90)
            assert [r[0] for r in await cursor.fetch(3)] == [91, 92, 93]
            assert (await cursor.fetchrow())[0] == 94
            assert [r[0] for r in await cursor.fetch(10)] == [95, 96, 97, 98, 99, 100]
            assert await cursor.fetch(5) == []

    run(sql_server, check)


def test_cursor_forward(sql_server: SqlServer) -> None:
    async def check(conn: asyncpg.Connection) -> None:
        await conn.execute("CREATE TABLE seq_fwd (n int PRIMARY KEY)")
        await conn.execute("INSERT INTO seq_fwd SELECT * FROM generate_series(1, 10)")
        async with conn.transaction():
            cursor = await conn.cursor("SELECT n FROM seq_fwd ORDER BY n")
            assert await cursor.forward(3) == 3
            assert [r[0] for r in await cursor.fetch(2)] == [4, 5]

    run(sql_server, check)


def test_copy_in_and_out(sql_server: SqlServer) -> None:
    async def check(conn: asyncpg.Connection) -> None:
        await conn.execute(
            "CREATE TABLE cp (id int PRIMARY KEY, name text, amount numeric(10,2), at timestamptz)"
        )
        when = dt.datetime(2021, 3, 4, 5, 6, 7, tzinfo=dt.UTC)
        records = [(i, f"r{i}", Decimal(i) / 4, when) for i in range(1, 51)]
        records.append((51, None, None, None))
        status = await conn.copy_records_to_table("cp", records=records)
        assert status == "COPY 51"
        status = await conn.copy_records_to_table(
            "cp", records=[(100, "x")], columns=["id", "name"]
        )
        assert status == "COPY 1"
        got = await conn.fetch("SELECT id, name, amount, at FROM cp WHERE id <= 51 ORDER BY id")
        assert [tuple(r) for r in got] == records
        chunks: list[bytes] = []

        async def sink(data: bytes) -> None:
            chunks.append(data)

        status = await conn.copy_from_query(
            "SELECT id, name FROM cp WHERE id <= 3 ORDER BY id", output=sink
        )
        assert status == "COPY 3"
        assert b"".join(chunks).decode() == "1\tr1\n2\tr2\n3\tr3\n"
        chunks.clear()
        status = await conn.copy_from_table("cp", columns=["id"], output=sink, format="csv")
        assert status == "COPY 52"
        assert sorted(int(x) for x in b"".join(chunks).decode().split()) == [
            *range(1, 52),
            100,
        ]

    run(sql_server, check)


def test_copy_from_query_with_arguments(sql_server: SqlServer) -> None:
    async def check(conn: asyncpg.Connection) -> None:
        await conn.execute("CREATE TABLE cp_args (id int PRIMARY KEY)")
        await conn.execute("INSERT INTO cp_args VALUES (1), (2), (3)")
        chunks: list[bytes] = []

        async def sink(data: bytes) -> None:
            chunks.append(data)

        query = "SELECT id FROM cp_args WHERE id <= $1 ORDER BY id"
        assert await conn.copy_from_query(query, 2, output=sink) == "COPY 2"
        assert b"".join(chunks) == b"1\n2\n"

    run(sql_server, check)


def test_copy_options_of_copy_to_table(sql_server: SqlServer) -> None:
    async def check(conn: asyncpg.Connection) -> None:
        await conn.execute("CREATE TABLE cp_opts (id serial PRIMARY KEY, t text, n int)")

        async def source() -> AsyncIterator[bytes]:
            for chunk in (b"t;n\n", b'"a;b";1\n";', b'";\n"";2\n'):
                yield chunk

        status = await conn.copy_to_table(
            "cp_opts",
            source=source(),
            columns=["t", "n"],
            format="csv",
            header=True,
            delimiter=";",
            force_not_null=["t"],
            force_null=["n"],
        )
        assert status == "COPY 3"
        rows = await conn.fetch("SELECT id, t, n FROM cp_opts ORDER BY id")
        assert [tuple(r) for r in rows] == [(1, "a;b", 1), (2, ";", None), (3, "", 2)]
        with pytest.raises(asyncpg.UniqueViolationError):
            await conn.copy_records_to_table("cp_opts", records=[(4, "x", 1), (1, "y", 2)])
        with pytest.raises(asyncpg.BadCopyFileFormatError, match='missing data for column "n"'):
            await conn.copy_to_table("cp_opts", source=io.BytesIO(b"5\tx\n"))
        assert await conn.fetchval("SELECT count(*) FROM cp_opts") == 3
        chunks: list[bytes] = []

        async def sink(data: bytes) -> None:
            chunks.append(data)

        # FORCE_QUOTE * quotes every value but NULL.
        await conn.copy_from_table(
            "cp_opts", columns=["t", "n"], output=sink, format="csv", force_quote=True, null="-"
        )
        assert sorted(b"".join(chunks).decode().splitlines()) == ['"","2"', '";",-', '"a;b","1"']

    run(sql_server, check)


def test_errors_map_to_exception_classes(sql_server: SqlServer) -> None:
    async def check(conn: asyncpg.Connection) -> None:
        await conn.execute("CREATE TABLE errs (id int PRIMARY KEY)")
        await conn.execute("INSERT INTO errs VALUES (1)")
        with pytest.raises(asyncpg.UniqueViolationError) as unique:
            await conn.execute("INSERT INTO errs VALUES ($1)", 1)
        assert unique.value.sqlstate == "23505"
        with pytest.raises(asyncpg.UndefinedTableError) as undefined:
            await conn.fetch("SELECT * FROM nowhere WHERE id = $1", 1)
        assert undefined.value.sqlstate == "42P01"
        with pytest.raises(asyncpg.PostgresSyntaxError) as syntax:
            await conn.fetch("SELECT id FROM errs WHERE")
        assert syntax.value.sqlstate == "42601"
        assert 1 <= int(syntax.value.position) <= len("SELECT id FROM errs WHERE") + 1
        with pytest.raises(asyncpg.DivisionByZeroError):
            await conn.fetchval("SELECT 1 / $1::int", 0)
        with pytest.raises(asyncpg.UndefinedColumnError):
            await conn.execute("SELECT nope FROM errs")
        assert await conn.fetchval("SELECT count(*) FROM errs") == 1

    run(sql_server, check)


def test_timeout_cancels_the_query(sql_server_process: SqlServer) -> None:
    async def check(conn: asyncpg.Connection) -> None:
        await conn.execute("CREATE TABLE big (id int PRIMARY KEY)")
        await conn.execute("INSERT INTO big SELECT * FROM generate_series(1, 150)")
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(asyncio.TimeoutError):
            await conn.fetchval("SELECT count(*) FROM big a, big b, big c", timeout=0.3)
        # The timeout is asyncpg's own; that the server stopped the query shows in how soon
        # the connection answers the next one (the full query runs for seconds).
        assert await conn.fetchval("SELECT count(*) FROM big") == 150
        assert loop.time() - started < 1.5

    run(sql_server_process, check)


def test_pool_release_runs_the_reset_query(sql_server: SqlServer) -> None:
    async def main() -> None:
        async with asyncpg.create_pool(sql_server.url(), min_size=1, max_size=2) as pool:
            async with pool.acquire() as conn:
                await conn.execute("SET application_name = 'pooled'")
                await conn.execute("CREATE TABLE pooled (id int)")
                await conn.execute("INSERT INTO pooled VALUES (1)")
            async with pool.acquire() as conn:
                # The reset query (... RESET ALL) ran on release without error.
                assert await conn.fetchval("SHOW application_name") == ""
                assert await conn.fetchval("SELECT count(*) FROM pooled") == 1
            assert await pool.fetchval("SELECT 40 + $1", 2) == 42

    asyncio.run(main())


def test_syntax_error_position_matches_postgres(sql_server: SqlServer) -> None:
    async def check(conn: asyncpg.Connection) -> None:
        with pytest.raises(asyncpg.PostgresSyntaxError) as syntax:
            await conn.fetch("SELEC 1")
        assert int(syntax.value.position) == 1
        with pytest.raises(asyncpg.PostgresSyntaxError) as syntax:
            await conn.fetch("SELECT * FROM pg_class WHERE")
        assert str(syntax.value) == "syntax error at end of input"
        assert int(syntax.value.position) == len("SELECT * FROM pg_class WHERE") + 1

    run(sql_server, check)


def test_reset_query_directly(sql_server: SqlServer) -> None:
    async def check(conn: asyncpg.Connection) -> None:
        await conn.execute(conn.get_reset_query())
        assert await conn.fetchval("SELECT 1") == 1

    run(sql_server, check)


def test_array_types_through_type_introspection(sql_server: SqlServer) -> None:
    """asyncpg has no builtin codec for int4[] or numeric[]: it sends its type-introspection
    query (WITH RECURSIVE typeinfo_tree ...) first, which the server answers."""

    async def check(conn: asyncpg.Connection) -> None:
        assert await conn.fetchval("SELECT ARRAY[1, 2, 3]") == [1, 2, 3]
        assert await conn.fetchval("SELECT ARRAY[1.5, 2]::numeric[]") == [
            Decimal("1.5"),
            Decimal("2"),
        ]
        assert await conn.fetchval("SELECT $1::int8[]", [7, None, 9]) == [7, None, 9]
        await conn.execute("CREATE TABLE arr_src (id int PRIMARY KEY, v int)")
        await conn.execute("INSERT INTO arr_src VALUES (1, 5), (2, 6)")
        assert await conn.fetchval("SELECT array_agg(v ORDER BY v) FROM arr_src") == [5, 6]

    run(sql_server, check)


def test_json_and_jsonb_come_back_as_text(sql_server: SqlServer) -> None:
    """asyncpg returns json and jsonb as their text unless a codec is set."""

    async def check(conn: asyncpg.Connection) -> None:
        row = await conn.fetchrow(
            "SELECT $1::jsonb -> 'a', jsonb_build_object('b', 2), '{\"x\":  1}'::json",
            '{"a": [1, 2]}',
        )
        assert tuple(row) == ("[1, 2]", '{"b": 2}', '{"x":  1}')

    run(sql_server, check)
