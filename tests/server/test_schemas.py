"""Schemas (CREATE / DROP / ALTER SCHEMA, qualified names, search_path), compared with Postgres
statement by statement, then as psql's ``\\dn`` / ``\\dt s.*`` / ``\\d s.t`` and SQLAlchemy's
reflection with ``schema=`` see them."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import psycopg
import pytest
import sqlalchemy as sa

from tests.server.conftest import SqlServer
from tests.server.scripted import compare
from tests.server.test_client_psql import ok, psql, psql_dsn

SCRIPTS = {
    "create and drop schemas": [
        "CREATE SCHEMA sa",
        "CREATE SCHEMA sa",
        "CREATE SCHEMA IF NOT EXISTS sa",
        "CREATE SCHEMA pg_nope",
        "CREATE SCHEMA sb AUTHORIZATION postgres",
        "SELECT nspname FROM pg_namespace WHERE nspname IN ('sa', 'sb') ORDER BY 1",
        "SELECT schema_name FROM information_schema.schemata WHERE schema_name LIKE 's_' "
        "ORDER BY 1",
        "SELECT 'sa'::regnamespace::text",
        "DROP SCHEMA nosuch",
        "DROP SCHEMA IF EXISTS nosuch",
        "DROP SCHEMA sa, sb",
        "SELECT count(*) FROM pg_namespace WHERE nspname IN ('sa', 'sb')",
        "CREATE SCHEMA sc",
        "ALTER SCHEMA sc RENAME TO sd",
        "SELECT nspname FROM pg_namespace WHERE nspname IN ('sc', 'sd')",
        "DROP SCHEMA sd RESTRICT",
    ],
    "tables of the same name in two schemas": [
        "CREATE SCHEMA s1",
        "CREATE TABLE s1.t (id int PRIMARY KEY, v text)",
        "CREATE TABLE t (id int PRIMARY KEY, w int)",
        "INSERT INTO s1.t VALUES (1, 'a'), (2, 'b')",
        "INSERT INTO t VALUES (1, 10)",
        "SELECT * FROM s1.t ORDER BY id",
        "SELECT * FROM t",
        "SELECT s1.t.v, t.id FROM s1.t WHERE t.id = 2",
        "SELECT x.v, p.w FROM s1.t x JOIN public.t p ON p.id = x.id",
        "UPDATE s1.t SET v = 'bb' WHERE id = 2 RETURNING *",
        "DELETE FROM s1.t WHERE id = 1",
        "MERGE INTO s1.t m USING (VALUES (3, 'c')) v(id, v) ON m.id = v.id "
        "WHEN NOT MATCHED THEN INSERT VALUES (v.id, v.v)",
        "SELECT * FROM s1.t ORDER BY id",
        "INSERT INTO s1.t VALUES (3, 'dup')",
        "ALTER TABLE s1.t ADD COLUMN z int DEFAULT 5",
        "ALTER TABLE s1.t RENAME COLUMN z TO zz",
        "SELECT * FROM s1.t ORDER BY id",
        "SELECT n.nspname, c.relname, c.relkind FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relname IN ('t', 't_pkey') "
        "AND n.nspname IN ('public', 's1') ORDER BY 1, 2",
        "SELECT table_schema, table_name FROM information_schema.tables "
        "WHERE table_name = 't' ORDER BY 1",
        "SELECT table_schema, column_name FROM information_schema.columns "
        "WHERE table_name = 't' ORDER BY 1, 2",
        "SELECT 's1.t'::regclass::text, 't'::regclass::text",
        "SELECT * FROM nosuch.t",
        "CREATE TABLE nosuch.t (a int)",
        "TRUNCATE s1.t",
        "SELECT count(*) FROM s1.t",
        "DROP TABLE s1.t",
        "DROP TABLE t",
        "DROP SCHEMA s1",
    ],
    "search_path": [
        "CREATE SCHEMA sp",
        "CREATE TABLE sp.t (a int)",
        "CREATE TABLE t (b int)",
        "INSERT INTO sp.t VALUES (1)",
        "INSERT INTO t VALUES (2)",
        "SELECT current_schema(), current_schemas(false)",
        "SELECT * FROM t",
        "SET search_path TO sp, public",
        "SELECT current_schema(), current_schemas(true)",
        "SELECT * FROM t",
        "SELECT * FROM public.t",
        "CREATE TABLE made (x int)",
        "CREATE SEQUENCE sq",
        "SELECT nextval('sq'), nextval('sp.sq')",
        "CREATE INDEX made_x ON made (x)",
        "SELECT 'made'::regclass::text, 'public.t'::regclass::text",
        "RESET search_path",
        "SELECT 'sp.made'::regclass::text",
        "SELECT * FROM made",
        "SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n "
        "ON n.oid = c.relnamespace WHERE n.nspname = 'sp' ORDER BY 2",
        "SET search_path = nosuch",
        "SELECT current_schema()",
        "CREATE TABLE x (a int)",
        "RESET search_path",
        "DROP SCHEMA sp",
        "DROP SCHEMA sp CASCADE",
        "DROP TABLE t",
    ],
    "serial sequences, constraints and indexes live in the table's schema": [
        "CREATE SCHEMA sq1",
        "CREATE TABLE sq1.p (id serial PRIMARY KEY, name text UNIQUE, n int CHECK (n > 0))",
        "CREATE TABLE sq1.c (id int PRIMARY KEY, pid int REFERENCES sq1.p (id))",
        "INSERT INTO sq1.p (name, n) VALUES ('a', 1), ('b', 2)",
        "INSERT INTO sq1.p (name, n) VALUES ('a', 3)",
        "INSERT INTO sq1.p (name, n) VALUES ('c', 0)",
        "INSERT INTO sq1.c VALUES (1, 1)",
        "INSERT INTO sq1.c VALUES (2, 9)",
        "DELETE FROM sq1.p WHERE id = 1",
        "SELECT pg_get_serial_sequence('sq1.p', 'id')",
        "SELECT nextval('sq1.p_id_seq')",
        "SELECT column_default FROM information_schema.columns "
        "WHERE table_schema = 'sq1' AND table_name = 'p' AND column_name = 'id'",
        "SELECT conname, connamespace::regnamespace::text FROM pg_constraint "
        "WHERE conrelid IN ('sq1.p'::regclass, 'sq1.c'::regclass) ORDER BY 1",
        "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname = 'c_pid_fkey'",
        "SELECT constraint_schema, constraint_name, table_schema, table_name "
        "FROM information_schema.table_constraints WHERE table_schema = 'sq1' "
        "AND constraint_type <> 'CHECK' ORDER BY 2",
        "CREATE INDEX p_n ON sq1.p (n)",
        "SELECT schemaname, tablename, indexname, indexdef FROM pg_indexes "
        "WHERE schemaname = 'sq1' ORDER BY 3",
        "ALTER INDEX sq1.p_n RENAME TO p_n2",
        "DROP INDEX sq1.p_n2",
        "ALTER TABLE sq1.p DROP CONSTRAINT p_n_check",
        "ALTER TABLE sq1.c DROP CONSTRAINT c_pid_fkey",
        "ALTER TABLE sq1.p RENAME TO p2",
        "SELECT relname FROM pg_class WHERE relnamespace = 'sq1'::regnamespace ORDER BY 1",
        "DROP SCHEMA sq1 CASCADE",
    ],
    "views, sequences, enums and COPY-free DDL in a schema": [
        "CREATE SCHEMA sv",
        "CREATE TABLE sv.base (id int PRIMARY KEY, v text)",
        "INSERT INTO sv.base VALUES (1, 'x'), (2, 'y')",
        "CREATE VIEW sv.vv AS SELECT id, v FROM sv.base WHERE id > 1",
        "SELECT * FROM sv.vv",
        "SELECT schemaname, viewname FROM pg_views WHERE schemaname = 'sv'",
        "SELECT table_schema, table_name, table_type FROM information_schema.tables "
        "WHERE table_schema = 'sv' ORDER BY 2",
        "DROP VIEW sv.vv",
        "CREATE SEQUENCE sv.q",
        "SELECT nextval('sv.q'), currval('sv.q')",
        "ALTER SEQUENCE sv.q RENAME TO q2",
        "SELECT nextval('sv.q2')",
        "SELECT schemaname, sequencename FROM pg_sequences WHERE schemaname = 'sv'",
        "DROP SEQUENCE sv.q2",
        "CREATE TYPE sv.mood AS ENUM ('sad', 'happy')",
        "CREATE TABLE sv.m (id int, m sv.mood)",
        "INSERT INTO sv.m VALUES (1, 'happy')",
        "SELECT m FROM sv.m",
        "SELECT t.typname, n.nspname FROM pg_type t JOIN pg_namespace n "
        "ON n.oid = t.typnamespace WHERE t.typname = 'mood'",
        "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
        "WHERE attrelid = 'sv.m'::regclass AND attname = 'm'",
        "DROP SCHEMA sv",
        "DROP SCHEMA sv CASCADE",
        "SELECT count(*) FROM pg_type WHERE typname = 'mood'",
    ],
    "DROP SCHEMA CASCADE reaches into other schemas": [
        "CREATE SCHEMA x1",
        "CREATE SCHEMA x2",
        "CREATE TABLE x1.parent (id int PRIMARY KEY)",
        "CREATE TABLE x2.child (id int PRIMARY KEY, pid int REFERENCES x1.parent)",
        "CREATE VIEW x_parents AS SELECT id FROM x1.parent",
        "INSERT INTO x1.parent VALUES (1)",
        "INSERT INTO x2.child VALUES (1, 1)",
        "DROP SCHEMA x1",
        "DROP SCHEMA x1 CASCADE",
        "SELECT count(*) FROM pg_views WHERE viewname = 'x_parents'",
        "SELECT count(*) FROM pg_constraint WHERE conrelid = 'x2.child'::regclass "
        "AND contype = 'f'",
        "INSERT INTO x2.child VALUES (2, 99)",
        "CREATE SCHEMA x1",
        "CREATE TABLE x1.a (id int PRIMARY KEY)",
        "CREATE TABLE x2.b (id int REFERENCES x1.a)",
        "DROP SCHEMA x1, x2 CASCADE",
        "SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'x_'",
    ],
    "named constraints' indexes are in the table's schema": [
        "CREATE SCHEMA nk",
        "CREATE TABLE nk.t (id int, a int, CONSTRAINT pkx PRIMARY KEY (id), "
        "CONSTRAINT u_uq UNIQUE (a))",
        "CREATE TABLE u_uq (a int)",
        "CREATE TABLE pkx (a int)",
        "INSERT INTO nk.t VALUES (1, 1)",
        "INSERT INTO nk.t VALUES (1, 2)",
        "INSERT INTO nk.t VALUES (2, 1)",
        "SELECT conname, connamespace::regnamespace::text FROM pg_constraint "
        "WHERE conrelid = 'nk.t'::regclass ORDER BY 1",
        "ALTER TABLE nk.t DROP CONSTRAINT u_uq",
        "ALTER TABLE nk.t ADD CONSTRAINT u2 UNIQUE (a)",
        "ALTER TABLE nk.t RENAME CONSTRAINT u2 TO u3",
        "SELECT indexname FROM pg_indexes WHERE schemaname = 'nk' ORDER BY 1",
        "DROP TABLE u_uq",
        "DROP TABLE pkx",
        "DROP SCHEMA nk CASCADE",
    ],
    "a prepared statement follows the search path": [
        "CREATE SCHEMA pp",
        "CREATE TABLE pp.t (a text)",
        "CREATE TABLE t (a text)",
        "INSERT INTO pp.t VALUES ('in pp')",
        "INSERT INTO t VALUES ('in public')",
        "PREPARE q AS SELECT a FROM t",
        "EXECUTE q",
        "SET search_path = pp, public",
        "EXECUTE q",
        "RESET search_path",
        "EXECUTE q",
        "DEALLOCATE q",
        "DROP TABLE t",
        "DROP SCHEMA pp CASCADE",
    ],
    "DDL in a schema rolls back": [
        "BEGIN",
        "CREATE SCHEMA sr",
        "CREATE TABLE sr.t (a int)",
        "INSERT INTO sr.t VALUES (1)",
        "SELECT * FROM sr.t",
        "ROLLBACK",
        "SELECT count(*) FROM pg_namespace WHERE nspname = 'sr'",
        "SELECT * FROM sr.t",
    ],
}


@pytest.mark.parametrize("name", list(SCRIPTS))
def test_schemas_as_postgres(
    pg_pair: tuple[psycopg.Connection, psycopg.Connection], name: str
) -> None:
    ours, ref = pg_pair
    compare(ours, ref, SCRIPTS[name])


def test_temporary_table_comes_first(sql_server: SqlServer) -> None:
    """A temporary table shadows a table of the search path's schemas of the same name."""
    with psycopg.connect(sql_server.conninfo(), autocommit=True) as conn:
        conn.execute("CREATE SCHEMA st")
        conn.execute("CREATE TABLE st.tt (a int)")
        conn.execute("INSERT INTO st.tt VALUES (1)")
        conn.execute("SET search_path = st, public")
        conn.execute("CREATE TEMP TABLE tt (b int)")
        conn.execute("INSERT INTO tt VALUES (2)")
        assert conn.execute("SELECT * FROM tt").fetchall() == [(2,)]
        assert conn.execute("SELECT * FROM st.tt").fetchall() == [(1,)]
        conn.execute("DROP TABLE tt")
        assert conn.execute("SELECT * FROM tt").fetchall() == [(1,)]
        conn.execute("RESET search_path")
        conn.execute("DROP SCHEMA st CASCADE")


def test_copy_into_a_schema(sql_server: SqlServer) -> None:
    with psycopg.connect(sql_server.conninfo(), autocommit=True) as conn:
        conn.execute("CREATE SCHEMA sy")
        conn.execute("CREATE TABLE sy.t (a int, b text)")
        with conn.cursor().copy("COPY sy.t (a, b) FROM STDIN") as copy:
            copy.write_row((1, "x"))
        assert conn.execute("SELECT * FROM sy.t").fetchall() == [(1, "x")]
        conn.execute("DROP SCHEMA sy CASCADE")


PSQL_SETUP = """
DROP SCHEMA IF EXISTS shop CASCADE;
CREATE SCHEMA shop;
CREATE TABLE shop.parent (id serial PRIMARY KEY, name text NOT NULL UNIQUE);
CREATE TABLE shop.child (id int PRIMARY KEY, pid int REFERENCES shop.parent (id),
  note varchar(20));
CREATE INDEX child_note ON shop.child (note);
"""


@pytest.mark.skipif(shutil.which("psql") is None, reason="psql is not installed")
def test_psql_lists_and_describes_schemas(sql_server: SqlServer, reference_dsn: str) -> None:
    ok(psql(sql_server, "-q", "-f", "-", stdin=PSQL_SETUP))
    ok(psql_dsn(reference_dsn, "-q", "-f", "-", stdin=PSQL_SETUP))
    for command in (r"\dt shop.*", r"\di shop.*", r"\d shop.child", r"\d shop.parent"):
        ours = ok(psql(sql_server, "-c", command))
        real = ok(psql_dsn(reference_dsn, "-c", command))
        assert ours == real, command
    # \dn: ours also has schema percolator (the observers' views)
    ours = ok(psql(sql_server, "-c", r"\dn"))
    real = ok(psql_dsn(reference_dsn, "-c", r"\dn"))
    for out in (ours, real):
        rows = [[cell.strip() for cell in line.split("|")] for line in out.splitlines()]
        assert ["shop", "postgres"] in rows and ["public", "pg_database_owner"] in rows


@pytest.fixture(scope="module")
def reflected(sql_server: SqlServer) -> Iterator[sa.Inspector]:
    engine = sa.create_engine(sql_server.url("postgresql+psycopg"))
    with engine.begin() as conn:
        for statement in PSQL_SETUP.split(";"):
            if statement.strip():
                conn.exec_driver_sql(statement)
    yield sa.inspect(engine)
    engine.dispose()


def test_sqlalchemy_reflects_a_schema(reflected: sa.Inspector) -> None:
    i = reflected
    assert "shop" in i.get_schema_names()
    assert sorted(i.get_table_names(schema="shop")) == ["child", "parent"]
    assert "child" not in i.get_table_names()
    columns = i.get_columns("child", schema="shop")
    assert [(c["name"], str(c["type"]), c["nullable"]) for c in columns] == [
        ("id", "INTEGER", False),
        ("pid", "INTEGER", True),
        ("note", "VARCHAR(20)", True),
    ]
    assert i.get_pk_constraint("parent", schema="shop")["constrained_columns"] == ["id"]
    (fk,) = i.get_foreign_keys("child", schema="shop")
    assert (fk["referred_schema"], fk["referred_table"], fk["referred_columns"]) == (
        "shop",
        "parent",
        ["id"],
    )
    assert [ix["name"] for ix in i.get_indexes("child", schema="shop")] == ["child_note"]
    assert i.has_table("parent", schema="shop") and not i.has_table("parent")
    table = sa.Table("child", sa.MetaData(), autoload_with=i.bind, schema="shop")
    assert [fk.target_fullname for fk in table.foreign_keys] == ["shop.parent.id"]
