"""User-defined enum types (CREATE TYPE ... AS ENUM, ALTER TYPE, DROP TYPE) against real
Postgres, and through asyncpg, psycopg (text and binary) and SQLAlchemy."""

from __future__ import annotations

import asyncio
import enum
import shutil

import asyncpg
import psycopg
import pytest
import sqlalchemy as sa
from psycopg.types.enum import EnumInfo, register_enum

from tests.server import scripted
from tests.server.conftest import SqlServer
from tests.server.test_client_psql import ok, psql, psql_dsn

Pair = tuple[psycopg.Connection, psycopg.Connection]


@pytest.fixture(scope="module")
def pair(pg_pair: Pair) -> Pair:
    return pg_pair


def test_enum_ddl_and_values(pair: Pair) -> None:
    scripted.compare(
        *pair,
        [
            "CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')",
            "CREATE TYPE mood AS ENUM ('x')",
            "CREATE TYPE dup AS ENUM ('a', 'a')",
            "CREATE TYPE empty AS ENUM ()",
            "SELECT 'ok'::mood, 'happy'::mood < 'sad'::mood, 'sad'::mood < 'ok'::mood",
            "SELECT 'nope'::mood",
            "SELECT 'Sad'::mood",
            "SELECT 'ok'::mood::text, 'ok'::mood = 'ok'",
            "SELECT 'x'::nosuchtype",
            "CREATE TABLE person (id int PRIMARY KEY, name text, current_mood mood)",
            "INSERT INTO person VALUES (1, 'a', 'happy'), (2, 'b', 'sad'), (3, 'c', 'ok'),"
            " (4, 'd', NULL)",
            "INSERT INTO person VALUES (5, 'e', 'angry')",
            "INSERT INTO person VALUES (5, 'e', 'sad'::text)",
            "INSERT INTO person VALUES (5, 'e', 'sad'::text::mood)",
            "SELECT name, current_mood FROM person ORDER BY current_mood, name",
            "SELECT name FROM person WHERE current_mood > 'sad' ORDER BY name",
            "SELECT name FROM person WHERE current_mood = 'ok' ORDER BY name",
            "SELECT name FROM person WHERE current_mood = 'bad'",
            "SELECT name FROM person WHERE current_mood = 'ok'::text",
            "SELECT min(current_mood), max(current_mood) FROM person",
            "SELECT current_mood, count(*) FROM person GROUP BY current_mood"
            " ORDER BY current_mood DESC NULLS LAST",
            "SELECT name FROM person WHERE current_mood IN ('ok', 'happy') ORDER BY 1",
            "UPDATE person SET current_mood = 'ok' WHERE id = 2",
            "UPDATE person SET current_mood = 'meh' WHERE id = 2",
            "SELECT enum_range(NULL::mood), enum_first(NULL::mood), enum_last(NULL::mood)",
            "SELECT enum_range('ok'::mood, NULL), enum_range(NULL, 'ok'::mood)",
            "SELECT enum_range('ok'::mood, 'happy'::mood)",
            "SELECT format_type('mood'::regtype, NULL), 'mood'::regtype::text",
            "SELECT ARRAY['sad', 'ok']::mood[]",
            "SELECT 'ok'::mood = ANY('{ok,sad}'::mood[]), 'happy'::mood > ALL('{ok,sad}'::mood[])",
            "ALTER TYPE mood ADD VALUE 'ecstatic'",
            "ALTER TYPE mood ADD VALUE 'meh' BEFORE 'ok'",
            "ALTER TYPE mood ADD VALUE 'fine' AFTER 'ok'",
            "ALTER TYPE mood ADD VALUE 'first' BEFORE 'sad'",
            "ALTER TYPE mood ADD VALUE 'ok'",
            "ALTER TYPE mood ADD VALUE IF NOT EXISTS 'ok'",
            "ALTER TYPE mood ADD VALUE 'x' BEFORE 'nosuch'",
            "SELECT enum_range(NULL::mood)",
            "INSERT INTO person VALUES (6, 'f', 'meh'), (7, 'g', 'ecstatic'), (8, 'h', 'fine'),"
            " (9, 'i', 'first')",
            "SELECT name, current_mood FROM person ORDER BY current_mood, name",
            "SELECT name FROM person WHERE current_mood BETWEEN 'meh' AND 'fine' ORDER BY 1",
            "ALTER TYPE mood RENAME VALUE 'sad' TO 'blue'",
            "ALTER TYPE mood RENAME VALUE 'nosuch' TO 'x'",
            "ALTER TYPE mood RENAME VALUE 'ok' TO 'happy'",
            "SELECT name, current_mood FROM person ORDER BY current_mood, name",
            "SELECT enumlabel, enumsortorder FROM pg_enum e JOIN pg_type t ON t.oid = e.enumtypid"
            " WHERE t.typname = 'mood' ORDER BY enumsortorder",
            "SELECT typname, typtype, typcategory, typlen FROM pg_type WHERE typname IN"
            " ('mood', '_mood') ORDER BY typname",
            "SELECT t.typname FROM pg_type t JOIN pg_type a ON a.oid = t.typarray"
            " WHERE t.typname = 'mood'",
            "SELECT column_name, data_type, udt_name FROM information_schema.columns"
            " WHERE table_name = 'person' ORDER BY ordinal_position",
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute"
            " WHERE attrelid = 'person'::regclass AND attname = 'current_mood'",
            "DROP TYPE mood",
            "DROP TYPE nosuch",
            "DROP TYPE IF EXISTS nosuch",
            "DROP TABLE person",
            "DROP TYPE mood",
            "SELECT count(*) FROM pg_type WHERE typname = 'mood'",
            "DROP TYPE empty",
        ],
    )


def test_enum_keys_and_cascade(pair: Pair) -> None:
    scripted.compare(
        *pair,
        [
            "CREATE TYPE size AS ENUM ('small', 'medium', 'large')",
            "CREATE TABLE shirt (s size PRIMARY KEY, color text)",
            "INSERT INTO shirt VALUES ('large', 'red'), ('small', 'blue'), ('medium', 'green')",
            "INSERT INTO shirt VALUES ('small', 'x')",
            "SELECT * FROM shirt ORDER BY s",
            "SELECT * FROM shirt WHERE s = 'medium'",
            "SELECT * FROM shirt WHERE s > 'small' ORDER BY s DESC",
            "ALTER TYPE size ADD VALUE 'tiny' BEFORE 'small'",
            "ALTER TYPE size RENAME VALUE 'large' TO 'big'",
            "INSERT INTO shirt VALUES ('tiny', 'white')",
            "SELECT * FROM shirt ORDER BY s",
            "SELECT * FROM shirt WHERE s = 'big'",
            "SELECT * FROM shirt WHERE s < 'medium' ORDER BY s",
            "CREATE TABLE box (id int PRIMARY KEY, sz size, tag text)",
            "CREATE INDEX box_sz ON box (sz)",
            "INSERT INTO box VALUES (1, 'big', 'a'), (2, 'tiny', 'b'), (3, 'medium', 'c')",
            "SELECT id FROM box WHERE sz = 'tiny'",
            "SELECT id, sz FROM box ORDER BY sz DESC",
            "DROP TYPE size",
            "DROP TABLE shirt",
            "DROP TYPE size CASCADE",
            "SELECT * FROM box ORDER BY id",
            "DROP TABLE box",
        ],
    )


def test_other_create_type_forms_are_refused(sql_server: SqlServer) -> None:
    with psycopg.connect(sql_server.conninfo(), autocommit=True) as conn:
        for sql, what in [
            ("CREATE TYPE comp AS (a int, b text)", "composite types"),
            ("CREATE TYPE rng AS RANGE (subtype = int4)", "range types"),
            ("CREATE TYPE base (input = x, output = y)", "base types"),
            ("CREATE DOMAIN pos AS int CHECK (VALUE > 0)", "CREATE DOMAIN"),
        ]:
            with pytest.raises(psycopg.errors.FeatureNotSupported, match=what):
                conn.execute(sql)


def test_enum_errors_are_postgres_words(sql_server: SqlServer) -> None:
    with psycopg.connect(sql_server.conninfo(), autocommit=True) as conn:
        conn.execute("CREATE TYPE errmood AS ENUM ('sad', 'ok')")
        conn.execute("CREATE TABLE errt (id int PRIMARY KEY, m errmood)")
        with pytest.raises(psycopg.errors.InvalidTextRepresentation) as e:
            conn.execute("SELECT 'x'::errmood")
        assert str(e.value) == 'invalid input value for enum errmood: "x"'
        with pytest.raises(psycopg.errors.DependentObjectsStillExist) as d:
            conn.execute("DROP TYPE errmood")
        assert d.value.diag.message_primary == (
            "cannot drop type errmood because other objects depend on it"
        )
        assert d.value.diag.message_detail == "column m of table errt depends on type errmood"
        conn.execute("DROP TABLE errt")
        conn.execute("DROP TYPE errmood")


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
def test_psycopg_reads_labels(sql_server: SqlServer, binary: bool) -> None:
    name = f"pmood_{int(binary)}"
    with psycopg.connect(sql_server.conninfo(), autocommit=True) as conn:
        conn.execute(f"CREATE TYPE {name} AS ENUM ('sad', 'ok', 'happy')")
        conn.execute(f"CREATE TABLE {name}_t (id int PRIMARY KEY, m {name}, ms {name}[])")
        cur = conn.cursor(binary=binary)
        cur.execute(
            f"INSERT INTO {name}_t VALUES (%s, %s::{name}, %s::{name}[]), (2, 'sad', NULL)",
            (1, "happy", ["ok", "sad"]),
        )
        cur.execute(f"SELECT id, m, ms FROM {name}_t ORDER BY m")
        rows = cur.fetchall()
        if binary:
            # Unregistered, a binary enum is bytes to psycopg (as from Postgres): enum_send
            # sends the label.
            assert [(i, m) for i, m, _ in rows] == [(2, b"sad"), (1, b"happy")]
        else:
            assert rows == [(2, "sad", None), (1, "happy", "{ok,sad}")]
        oid = conn.execute(f"SELECT '{name}'::regtype::oid").fetchone()[0]  # type: ignore[index]
        assert cur.description is not None and cur.description[1].type_code == oid
        # With the type registered, psycopg maps labels to a Python enum both ways.
        info = EnumInfo.fetch(conn, name)
        assert info is not None and info.labels == ["sad", "ok", "happy"]

        class Mood(enum.Enum):
            sad = "sad"
            ok = "ok"
            happy = "happy"

        register_enum(info, conn, Mood)
        cur = conn.cursor(binary=binary)
        cur.execute(f"SELECT m, ms FROM {name}_t WHERE m > %s ORDER BY m", (Mood.sad,))
        assert cur.fetchall() == [(Mood.happy, [Mood.ok, Mood.sad])]


def test_asyncpg_introspects_enums(sql_server: SqlServer) -> None:
    async def main() -> None:
        conn = await asyncpg.connect(sql_server.url())
        try:
            await conn.execute("CREATE TYPE amood AS ENUM ('sad', 'ok', 'happy')")
            await conn.execute("CREATE TABLE amood_t (id int PRIMARY KEY, m amood, ms amood[])")
            await conn.execute("INSERT INTO amood_t VALUES ($1, $2, $3)", 1, "happy", ["ok", "sad"])
            await conn.execute("INSERT INTO amood_t VALUES (2, 'sad', NULL)")
            rows = await conn.fetch("SELECT id, m, ms FROM amood_t ORDER BY m")
            assert [tuple(r) for r in rows] == [(2, "sad", None), (1, "happy", ["ok", "sad"])]
            assert await conn.fetchval("SELECT m FROM amood_t WHERE m > $1", "ok") == "happy"
            with pytest.raises(asyncpg.InvalidTextRepresentationError):
                await conn.execute("INSERT INTO amood_t VALUES ($1, $2)", 3, "nope")
        finally:
            await conn.close()

    asyncio.run(main())


def test_sqlalchemy_enum_columns(sql_server: SqlServer) -> None:
    engine = sa.create_engine(sql_server.url("postgresql+psycopg"))
    metadata = sa.MetaData()
    t = sa.Table(
        "sa_person",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("mood", sa.Enum("sad", "ok", "happy", name="sa_mood")),
    )
    try:
        metadata.create_all(engine)
        with engine.begin() as conn:
            conn.execute(t.insert(), [{"id": 1, "mood": "happy"}, {"id": 2, "mood": "sad"}])
            rows = conn.execute(sa.select(t.c.id, t.c.mood).order_by(t.c.mood)).all()
            assert [tuple(r) for r in rows] == [(2, "sad"), (1, "happy")]
            got = conn.execute(sa.select(t.c.id).where(t.c.mood == "happy")).scalar_one()
            assert got == 1
        inspector = sa.inspect(engine)
        assert [e for e in inspector.get_enums() if e["name"] == "sa_mood"] == [
            {"name": "sa_mood", "schema": "public", "visible": True,
             "labels": ["sad", "ok", "happy"]}
        ]  # fmt: skip
        col = {c["name"]: c for c in inspector.get_columns("sa_person")}["mood"]
        assert isinstance(col["type"], sa.Enum)
        assert col["type"].name == "sa_mood" and col["type"].enums == ["sad", "ok", "happy"]
        reflected = sa.Table("sa_person", sa.MetaData(), autoload_with=engine)
        assert isinstance(reflected.c.mood.type, sa.Enum)
    finally:
        metadata.drop_all(engine)
        engine.dispose()
    with psycopg.connect(sql_server.conninfo()) as conn:
        gone = conn.execute("SELECT count(*) FROM pg_type WHERE typname = 'sa_mood'").fetchone()
        assert gone == (0,)


@pytest.mark.skipif(shutil.which("psql") is None, reason="psql is not installed")
def test_psql_describes_enum_types(sql_server: SqlServer, reference_dsn: str) -> None:
    setup = (
        "CREATE TYPE psqlmood AS ENUM ('sad', 'ok', 'happy');"
        " CREATE TABLE psqlmood_t (id int PRIMARY KEY, m psqlmood);"
    )
    ok(psql(sql_server, "-c", setup))
    ok(psql_dsn(reference_dsn, "-c", setup))
    for meta in ("\\dT+ psqlmood", "\\dT psql*", "\\d psqlmood_t"):
        assert ok(psql(sql_server, "-c", meta)) == ok(psql_dsn(reference_dsn, "-c", meta)), meta


def test_catalog_documents_keep_enum_columns_by_oid() -> None:
    """A column stores its enum type by OID; loading links it to the type's current labels,
    and cells and keys hold sort orders, which ADD VALUE and RENAME VALUE leave alone."""
    from percolator.server.sql import storage_codec
    from percolator.server.sql.catalog import (
        Catalog,
        ColumnDef,
        TableDef,
        enum_from_json,
        enum_to_json,
        link_enums,
        table_from_json,
        table_to_json,
    )
    from percolator.server.sql.types import EnumType, SqlType

    old = EnumType(20000, 20001, "m", ("a", "c"), (1.0, 2.0))
    col = ColumnDef(1, "x", SqlType(old, array=True))
    table = TableDef(5, "t", (col,), (), "s5")
    doc = table_to_json(table)
    assert doc["columns"][0]["type"] == ["ENUM", -1, True, 20000]  # type: ignore[index]
    new = EnumType(20000, 20001, "m", ("b", "a", "c2"), (0.0, 1.0, 2.0))  # ADD b, RENAME c
    loaded = link_enums(Catalog(tables={"t": table_from_json(doc)}, enums={"m": new}))
    assert loaded.tables["t"].columns[0].type == SqlType(new, array=True)
    assert enum_from_json(enum_to_json(new)) == new
    cell = storage_codec.store_encode(SqlType(old), "c")
    assert storage_codec.store_decode(SqlType(new), cell) == "c2"
