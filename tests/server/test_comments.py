"""COMMENT ON tables, views, columns, indexes, sequences and constraints, against real
Postgres: the statements, their errors, pg_description and obj_description / col_description,
psql's ``\\d+`` and ``\\dt+``, and SQLAlchemy's ``comment=`` and reflection."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator

import psycopg
import pytest
import sqlalchemy as sa

from percolator.server.sql import types as T
from percolator.server.sql.catalog import (
    CheckDef,
    ColumnDef,
    ForeignKeyDef,
    IndexDef,
    TableDef,
    ViewColumn,
    ViewDef,
    table_from_json,
    table_to_json,
    view_from_json,
    view_to_json,
)
from tests.server import scripted
from tests.server.conftest import SqlServer
from tests.server.test_client_psql import ok, psql, psql_dsn

Pair = tuple[psycopg.Connection, psycopg.Connection]

# pg_description without the built-in objects' rows (Postgres describes its functions, types,
# ...), with the object named rather than by OID (OIDs differ).
DESCRIBED = (
    "SELECT CASE WHEN d.classoid = 'pg_class'::regclass THEN c.relname"
    " ELSE con.conname END AS object, d.classoid::regclass::text, d.objsubid, d.description"
    " FROM pg_description d"
    " LEFT JOIN pg_class c ON c.oid = d.objoid AND d.classoid = 'pg_class'::regclass"
    " LEFT JOIN pg_constraint con ON con.oid = d.objoid"
    " AND d.classoid = 'pg_constraint'::regclass"
    " WHERE d.objoid >= 16384 ORDER BY 1, 2, 3"
)


@pytest.fixture(scope="module")
def pair(pg_pair: Pair) -> Pair:
    return pg_pair


def test_comment_on_objects(pair: Pair) -> None:
    scripted.compare(
        *pair,
        [
            "CREATE TABLE ct (id int PRIMARY KEY, v text CHECK (v <> ''), u int UNIQUE)",
            "CREATE INDEX ct_v ON ct (v)",
            "CREATE SEQUENCE cs",
            "CREATE VIEW cv AS SELECT id, v FROM ct",
            "CREATE TABLE cchild (id int, p int CONSTRAINT cchild_p REFERENCES ct)",
            "COMMENT ON TABLE ct IS 'the table'",
            "COMMENT ON COLUMN ct.v IS 'a value'",
            "COMMENT ON COLUMN public.ct.id IS 'the key'",
            'COMMENT ON COLUMN "ct"."u" IS $$it\'s unique$$',
            "COMMENT ON INDEX ct_v IS 'index on v'",
            "COMMENT ON INDEX ct_pkey IS 'the key''s index'",
            "COMMENT ON SEQUENCE cs IS 'a sequence'",
            "COMMENT ON VIEW cv IS 'a view'",
            "COMMENT ON COLUMN cv.v IS 'view column'",
            "COMMENT ON CONSTRAINT ct_pkey ON ct IS 'primary key'",
            "COMMENT ON CONSTRAINT ct_v_check ON ct IS 'not empty'",
            "COMMENT ON CONSTRAINT ct_u_key ON public.ct IS 'unique u'",
            "COMMENT ON CONSTRAINT cchild_p ON cchild IS 'references ct'",
            DESCRIBED,
            "SELECT obj_description('ct'::regclass, 'pg_class'), obj_description('ct'::regclass),"
            " obj_description('cs'::regclass, 'pg_class'), obj_description('cv'::regclass,"
            " 'pg_constraint')",
            "SELECT attname, col_description(attrelid, attnum) FROM pg_attribute"
            " WHERE attrelid = 'ct'::regclass AND attnum > 0 ORDER BY attnum",
            "SELECT col_description('cv'::regclass, 2), col_description('ct'::regclass, 9)",
            "SELECT conname, obj_description(oid, 'pg_constraint') FROM pg_constraint"
            " WHERE conrelid IN ('ct'::regclass, 'cchild'::regclass) ORDER BY conname",
            "SELECT obj_description('public'::regnamespace, 'pg_namespace')",
            # NULL and '' remove a comment; commenting again replaces it.
            "COMMENT ON COLUMN ct.v IS NULL",
            "COMMENT ON INDEX ct_v IS ''",
            "COMMENT ON TABLE ct IS E'the table,\\tagain\\x21 it''s \\\\ here'",
            DESCRIBED,
        ],
    )


def test_comments_follow_their_objects(pair: Pair) -> None:
    scripted.compare(
        *pair,
        [
            "CREATE TABLE rt (a int, b int, c int)",
            "COMMENT ON TABLE rt IS 'renamed table'",
            "COMMENT ON COLUMN rt.a IS 'column a'",
            "COMMENT ON COLUMN rt.c IS 'column c'",
            "ALTER TABLE rt RENAME TO rt2",
            "ALTER TABLE rt2 RENAME COLUMN c TO c2",
            "SELECT obj_description('rt2'::regclass, 'pg_class')",
            "SELECT attname, col_description(attrelid, attnum) FROM pg_attribute"
            " WHERE attrelid = 'rt2'::regclass AND attnum > 0 AND NOT attisdropped"
            " ORDER BY attnum",
            "CREATE VIEW rv AS SELECT b FROM rt2",
            "COMMENT ON VIEW rv IS 'the view'",
            "COMMENT ON COLUMN rv.b IS 'view column b'",
            "CREATE OR REPLACE VIEW rv AS SELECT b, c2 FROM rt2",
            "ALTER VIEW rv RENAME TO rv2",
            "SELECT obj_description('rv2'::regclass, 'pg_class'),"
            " col_description('rv2'::regclass, 1), col_description('rv2'::regclass, 2)",
            "DROP VIEW rv2",
            # Dropping a column drops its comment; a new column of that name has none.
            "ALTER TABLE rt2 DROP COLUMN a",
            "ALTER TABLE rt2 ADD COLUMN a int",
            "SELECT attname, col_description(attrelid, attnum) FROM pg_attribute"
            " WHERE attrelid = 'rt2'::regclass AND attnum > 0 AND NOT attisdropped"
            " ORDER BY attname",
            "DROP TABLE rt2",
            "CREATE TABLE rt2 (a int)",
            "SELECT obj_description('rt2'::regclass, 'pg_class')",
            "SELECT count(*) FROM pg_description WHERE objoid >= 16384"
            " AND description IN ('renamed table', 'column a', 'column c')",
            "DROP TABLE rt2",
        ],
    )


def test_comments_are_transactional(pair: Pair) -> None:
    scripted.compare(
        *pair,
        [
            "CREATE TABLE tx (id int)",
            "COMMENT ON TABLE tx IS 'kept'",
            "BEGIN",
            "COMMENT ON TABLE tx IS 'rolled back'",
            "SELECT obj_description('tx'::regclass, 'pg_class')",
            "ROLLBACK",
            "SELECT obj_description('tx'::regclass, 'pg_class')",
            "BEGIN",
            "SAVEPOINT s",
            "COMMENT ON TABLE tx IS 'after the savepoint'",
            "ROLLBACK TO SAVEPOINT s",
            "SELECT obj_description('tx'::regclass, 'pg_class')",
            "COMMENT ON TABLE tx IS NULL",
            "COMMIT",
            "SELECT obj_description('tx'::regclass, 'pg_class')",
            "DROP TABLE tx",
        ],
    )


def test_comment_errors(pair: Pair) -> None:
    scripted.compare(
        *pair,
        [
            "CREATE TABLE et (id int PRIMARY KEY, v int)",
            "CREATE VIEW ev AS SELECT id FROM et",
            "CREATE SEQUENCE es",
            "COMMENT ON TABLE nosuch IS 'x'",
            "COMMENT ON TABLE ev IS 'x'",
            "COMMENT ON VIEW et IS 'x'",
            "COMMENT ON INDEX et IS 'x'",
            "COMMENT ON SEQUENCE et IS 'x'",
            "COMMENT ON TABLE et_pkey IS 'x'",
            "COMMENT ON INDEX nosuch IS 'x'",
            "COMMENT ON SEQUENCE nosuch IS 'x'",
            "COMMENT ON COLUMN et.nosuch IS 'x'",
            "COMMENT ON COLUMN nosuch.v IS 'x'",
            "COMMENT ON COLUMN ev.nosuch IS 'x'",
            "COMMENT ON COLUMN et IS 'x'",
            "COMMENT ON COLUMN es.last_value IS 'x'",
            "COMMENT ON CONSTRAINT nosuch ON et IS 'x'",
            "COMMENT ON CONSTRAINT et_pkey ON nosuch IS 'x'",
            "COMMENT ON TABLE nosuch.et IS 'x'",
            "COMMENT ON TABLE et IS 42",
            "COMMENT ON TABLE et 'x'",
            "COMMENT ON TABLE et IS 'x'",
            "DROP VIEW ev",
            "DROP TABLE et",
            "DROP SEQUENCE es",
        ],
    )


@pytest.mark.parametrize(
    ("statement", "named"),
    [
        ("COMMENT ON FUNCTION f() IS 'x'", "COMMENT ON FUNCTION"),
        ("COMMENT ON ROLE postgres IS 'x'", "COMMENT ON ROLE"),
        ("COMMENT ON SCHEMA public IS 'x'", "COMMENT ON SCHEMA"),
        ("COMMENT ON DATABASE postgres IS 'x'", "COMMENT ON DATABASE"),
        ("COMMENT ON MATERIALIZED VIEW m IS 'x'", "COMMENT ON MATERIALIZED VIEW"),
    ],
)
def test_other_objects_are_refused(pair: Pair, statement: str, named: str) -> None:
    ours, _ = pair
    with pytest.raises(psycopg.errors.FeatureNotSupported, match=named):
        ours.execute(statement)


def test_comments_are_stored_with_the_catalog() -> None:
    """The catalog's JSON documents keep every comment (another server loads them)."""
    table = TableDef(
        1,
        "t",
        (ColumnDef(1, "a", T.INT4, comment="column"),),
        (1,),
        "s1",
        indexes=(IndexDef(2, "t_a", (1,), True, "s2", True, comment="ix", constraint_comment="u"),),
        checks=(CheckDef("t_check", "a > 0", comment="check"),),
        foreign_keys=(ForeignKeyDef("t_fk", (1,), 1, (1,), comment="fk"),),
        comment="table",
        pk_comment="pk",
        pk_index_comment="pk index",
    )
    assert table_from_json(json.loads(json.dumps(table_to_json(table)))) == table
    view = ViewDef(3, "v", "SELECT 1", (ViewColumn("x", T.INT4, "vc"),), comment="view")
    assert view_from_json(json.loads(json.dumps(view_to_json(view)))) == view


# -- psql --------------------------------------------------------------------------------------

PSQL_SETUP = """
CREATE TABLE described (id int PRIMARY KEY, name text NOT NULL, note varchar(20));
COMMENT ON TABLE described IS 'Things we describe';
COMMENT ON COLUMN described.name IS 'What it is called';
COMMENT ON COLUMN described.note IS 'Free text, with a ''quote''';
CREATE TABLE undescribed (id int);
"""

psql_only = pytest.mark.skipif(shutil.which("psql") is None, reason="psql is not installed")


@pytest.fixture(scope="module")
def described(sql_server: SqlServer, reference_dsn: str) -> tuple[SqlServer, str]:
    """The server and the reference Postgres after PSQL_SETUP ran on both."""
    ok(psql(sql_server, "-q", "-f", "-", stdin=PSQL_SETUP))
    ok(psql_dsn(reference_dsn, "-q", "-f", "-", stdin=PSQL_SETUP))
    return sql_server, reference_dsn


@psql_only
@pytest.mark.parametrize("command", [r"\d+ described", r"\dt+ described", r"\dt+ undescribed"])
def test_psql_shows_descriptions(described: tuple[SqlServer, str], command: str) -> None:
    server, reference = described
    ours = ok(psql(server, "-c", command))
    real = ok(psql_dsn(reference, "-c", command))
    if command.startswith(r"\dt+"):
        # Size and access method are storage facts of their own; compare the rest.
        ours, real = (
            _without_columns(ours, ("Size", "Access method")),
            _without_columns(real, ("Size", "Access method")),
        )
    assert ours == real


def _without_columns(table: str, names: tuple[str, ...]) -> list[list[str]]:
    """psql's aligned table as rows of stripped cells, leaving out the columns ``names``."""
    lines = [line for line in table.splitlines() if "|" in line]
    rows = [[cell.strip() for cell in line.split("|")] for line in lines]
    keep = [i for i, name in enumerate(rows[0]) if name not in names]
    return [[row[i] for i in keep] for row in rows]


# -- SQLAlchemy --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def engine(sql_server: SqlServer) -> Iterator[sa.Engine]:
    engine = sa.create_engine(sql_server.url("postgresql+psycopg"))
    yield engine
    engine.dispose()


def test_sqlalchemy_comments(engine: sa.Engine) -> None:
    metadata = sa.MetaData()
    sa.Table(
        "sa_commented",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True, comment="the key"),
        sa.Column("title", sa.String(50), comment="what it's called"),
        sa.Column("plain", sa.Text),
        comment="a table with comments",
    )
    metadata.create_all(engine)
    inspector = sa.inspect(engine)
    assert inspector.get_table_comment("sa_commented") == {"text": "a table with comments"}
    columns = {c["name"]: c.get("comment") for c in inspector.get_columns("sa_commented")}
    assert columns == {"id": "the key", "title": "what it's called", "plain": None}
    reflected = sa.Table("sa_commented", sa.MetaData(), autoload_with=engine)
    assert reflected.comment == "a table with comments"
    assert reflected.c.title.comment == "what it's called"
    with engine.begin() as conn:
        conn.execute(sa.text("COMMENT ON TABLE sa_commented IS NULL"))
    assert sa.inspect(engine).get_table_comment("sa_commented") == {"text": None}
    metadata.drop_all(engine)
