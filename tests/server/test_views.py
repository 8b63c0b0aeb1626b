"""Views (CREATE / DROP / ALTER VIEW, querying them, dependencies, the catalogs), against real
Postgres; psql's \\dv and \\d+ and SQLAlchemy's reflection of a view."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import psycopg
import pytest
import sqlalchemy as sa

from percolator.clients.database import Database
from percolator.server.engine import Engine, EngineConfig
from percolator.server.session import run_autocommit
from tests.server import scripted
from tests.server.conftest import SqlServer
from tests.server.test_client_psql import ok, psql


@pytest.fixture(scope="module")
def pair(sql_server: SqlServer, reference_dsn: str) -> Iterator[tuple[psycopg.Connection, ...]]:
    with (
        psycopg.connect(sql_server.conninfo(), autocommit=True) as ours,
        psycopg.connect(reference_dsn, autocommit=True) as ref,
    ):
        for conn in (ours, ref):
            conn.execute("CREATE TABLE vt (id int PRIMARY KEY, name text, n int)")
            conn.execute("INSERT INTO vt VALUES (1, 'a', 10), (2, 'b', 20), (3, 'c', NULL)")
            conn.execute("CREATE TABLE vu (id int, tag text)")
            conn.execute("INSERT INTO vu VALUES (1, 'x'), (1, 'y'), (3, 'z')")
        yield ours, ref


def test_create_and_query(pair: tuple[psycopg.Connection, ...]) -> None:
    scripted.compare(
        *pair,
        [
            "CREATE VIEW v1 AS SELECT * FROM vt WHERE n IS NOT NULL",
            "SELECT * FROM v1 ORDER BY id",
            "SELECT name, n * 2 AS d FROM v1 WHERE id > 1",
            "CREATE VIEW v2 (ident, label) AS SELECT id, name FROM vt",
            "SELECT * FROM v2 ORDER BY 1",
            "SELECT label FROM v2 WHERE ident = 2",
            "SELECT x.ident FROM v2 AS x ORDER BY 1",
            "SELECT * FROM v2 AS x (a) ORDER BY a",
            "CREATE VIEW v3 AS SELECT v1.name, vu.tag FROM v1 JOIN vu ON vu.id = v1.id",
            "SELECT * FROM v3 ORDER BY 1, 2",
            "CREATE VIEW v4 AS SELECT count(*) AS c, sum(n) FROM vt",
            "SELECT * FROM v4",
            "SELECT v2.label, v4.c FROM v2, v4 ORDER BY 1",
            "WITH w AS (SELECT 1 AS one) SELECT * FROM v1, w ORDER BY id",
            "SELECT (SELECT count(*) FROM v3) AS n",
            "SELECT id FROM vt WHERE id IN (SELECT ident FROM v2) ORDER BY 1",
            "CREATE VIEW v5 AS SELECT 'lit' AS l, 1 + 1 AS two",
            "SELECT * FROM v5",
            "CREATE VIEW v6 AS SELECT name FROM vt ORDER BY id DESC LIMIT 2",
            "SELECT * FROM v6",
            "CREATE VIEW v7 AS WITH q AS (SELECT id FROM vt) SELECT id FROM q UNION ALL "
            "SELECT id FROM vu",
            "SELECT * FROM v7 ORDER BY 1",
            "ALTER TABLE vt ADD COLUMN extra int",
            "SELECT * FROM v1 ORDER BY id",
            "DROP VIEW v7, v6, v5, v4, v3, v2, v1",
            "SELECT * FROM v1",
        ],
    )


def test_create_errors(pair: tuple[psycopg.Connection, ...]) -> None:
    scripted.compare(
        *pair,
        [
            "CREATE VIEW e1 AS SELECT * FROM nosuch",
            "CREATE VIEW e1 AS SELECT nosuch FROM vt",
            "CREATE VIEW vt AS SELECT 1",
            "CREATE VIEW e1 (a, b) AS SELECT 1",
            "CREATE VIEW e1 AS SELECT 1 AS a, 2 AS a",
            "CREATE VIEW e1 AS SELECT id FROM vt",
            "CREATE VIEW e1 AS SELECT id FROM vt",
            "CREATE TABLE e1 (x int)",
            "CREATE INDEX ON e1 (id)",
            "CREATE OR REPLACE VIEW vt AS SELECT 1",
            "CREATE OR REPLACE VIEW e1 AS SELECT id, name FROM vt",
            "SELECT * FROM e1 ORDER BY id",
            "CREATE OR REPLACE VIEW e1 AS SELECT id FROM vt",
            "CREATE OR REPLACE VIEW e1 AS SELECT name, id FROM vt",
            "CREATE OR REPLACE VIEW e1 AS SELECT id::text AS id, name FROM vt",
            "DROP TABLE e1",
            "DROP VIEW vt",
            "DROP VIEW nosuch",
            "DROP VIEW IF EXISTS nosuch, e1",
            "SELECT * FROM e1",
        ],
    )


def test_views_are_read_only(pair: tuple[psycopg.Connection, ...]) -> None:
    # Views with an aggregate or DISTINCT, which Postgres cannot update either.
    scripted.compare(
        *pair,
        [
            "CREATE VIEW ro AS SELECT DISTINCT name FROM vt",
            "INSERT INTO ro VALUES ('q')",
            "UPDATE ro SET name = 'q'",
            "DELETE FROM ro",
            "TRUNCATE ro",
            "ALTER TABLE ro ADD COLUMN z int",
            "DROP VIEW ro",
        ],
    )


def test_dependencies(pair: tuple[psycopg.Connection, ...]) -> None:
    scripted.compare(
        *pair,
        [
            "CREATE TABLE dt (a int, b text, c int)",
            "INSERT INTO dt VALUES (1, 'one', 100), (2, 'two', 200)",
            "CREATE VIEW dv AS SELECT a, b FROM dt",
            "CREATE VIEW dw AS SELECT b FROM dv",
            "DROP TABLE dt",
            "DROP VIEW dv",
            "ALTER TABLE dt DROP COLUMN b",
            "ALTER TABLE dt DROP COLUMN c",
            "SELECT * FROM dv ORDER BY a",
            "ALTER TABLE dt RENAME COLUMN b TO bee",
            "SELECT * FROM dv ORDER BY a",
            "SELECT * FROM dw ORDER BY 1",
            "ALTER TABLE dt RENAME TO dt2",
            "SELECT * FROM dv ORDER BY a",
            "INSERT INTO dt2 VALUES (3, 'three')",
            "SELECT * FROM dw ORDER BY 1",
            "ALTER VIEW dv RENAME TO dv2",
            "SELECT * FROM dw ORDER BY 1",
            "SELECT * FROM dv2 ORDER BY 1",
            "ALTER TABLE dv2 RENAME TO dv",
            "SELECT a FROM dv ORDER BY 1",
            "ALTER TABLE dt2 DROP COLUMN bee CASCADE",
            "SELECT * FROM dw",
            "SELECT * FROM dv",
            "CREATE VIEW dv AS SELECT a FROM dt2",
            "CREATE VIEW dw AS SELECT a FROM dv",
            "DROP VIEW dv CASCADE",
            "SELECT * FROM dw",
            "CREATE VIEW dv AS SELECT a FROM dt2",
            "DROP TABLE dt2 CASCADE",
            "SELECT * FROM dv",
            "CREATE VIEW c1 AS SELECT 1 AS a",
            "CREATE VIEW c2 AS SELECT a FROM c1",
            "CREATE OR REPLACE VIEW c1 AS SELECT a FROM c2",
            "SELECT * FROM c1",
            "DROP VIEW c1",
            "DROP VIEW c1 CASCADE",
            "SELECT * FROM c2",
        ],
    )


def test_transactional(pair: tuple[psycopg.Connection, ...]) -> None:
    scripted.compare(
        *pair,
        [
            "BEGIN",
            "CREATE VIEW tv AS SELECT id FROM vt",
            "SELECT * FROM tv ORDER BY 1",
            "ROLLBACK",
            "SELECT * FROM tv",
        ],
    )


def test_catalogs(pair: tuple[psycopg.Connection, ...]) -> None:
    scripted.compare(
        *pair,
        [
            "CREATE VIEW cv (ident, label) AS SELECT id, name FROM vt",
            "SELECT relname, relkind, relnatts FROM pg_class WHERE relname = 'cv'",
            "SELECT attname, format_type(atttypid, atttypmod), attnum FROM pg_attribute "
            "WHERE attrelid = 'cv'::regclass ORDER BY attnum",
            "SELECT schemaname, viewname FROM pg_views WHERE schemaname = 'public'",
            "SELECT table_name, table_type FROM information_schema.tables "
            "WHERE table_schema = 'public' ORDER BY 1",
            "SELECT table_name FROM information_schema.views WHERE table_schema = 'public'",
            "SELECT column_name, data_type, ordinal_position FROM information_schema.columns "
            "WHERE table_name = 'cv' ORDER BY ordinal_position",
            "SELECT c.relname FROM pg_class c WHERE c.relkind = 'v' "
            "AND c.relnamespace = 'public'::regnamespace",
            "SELECT pg_get_viewdef('cv'::regclass) IS NOT NULL",
            "DROP VIEW cv",
        ],
    )


@pytest.mark.skipif(shutil.which("psql") is None, reason="psql is not installed")
def test_psql_describe_view(sql_server: SqlServer) -> None:
    ok(psql(sql_server, "-c", "CREATE TABLE pv_t (id int PRIMARY KEY, label varchar(10))"))
    ok(psql(sql_server, "-c", "CREATE VIEW pv AS SELECT id, upper(label) AS big FROM pv_t"))
    listed = ok(psql(sql_server, "-c", "\\dv"))
    assert "pv" in listed and "view" in listed and "pv_t" not in listed
    described = ok(psql(sql_server, "-c", "\\d pv"))
    assert 'View "public.pv"' in described
    assert "big" in described and "integer" in described
    assert "View definition" not in described
    verbose = ok(psql(sql_server, "-c", "\\d+ pv"))
    assert "View definition:" in verbose and "pv_t" in verbose
    out = ok(psql(sql_server, "-c", "SELECT * FROM pv"))
    assert "(0 rows)" in out


def test_sqlalchemy_views(sql_server: SqlServer, reference_dsn: str) -> None:
    ref_url = "postgresql+psycopg://" + reference_dsn.split("://", 1)[1]
    ours = sa.create_engine(sql_server.url("postgresql+psycopg"))
    ref = sa.create_engine(ref_url)
    try:
        for engine in (ours, ref):
            with engine.begin() as conn:
                conn.exec_driver_sql(
                    "CREATE TABLE sa_t (id int PRIMARY KEY, name text NOT NULL, score numeric(6,2))"
                )
                conn.exec_driver_sql("INSERT INTO sa_t VALUES (1, 'a', 1.5), (2, 'b', NULL)")
                conn.exec_driver_sql(
                    "CREATE VIEW sa_v AS SELECT id, name, score FROM sa_t WHERE score IS NOT NULL"
                )
        results = []
        for engine in (ours, ref):
            inspector = sa.inspect(engine)
            names = [n for n in inspector.get_view_names() if n.startswith("sa_")]
            assert "sa_v" not in inspector.get_table_names()
            definition = inspector.get_view_definition("sa_v")
            assert "sa_t" in definition and "score" in definition
            table = sa.Table("sa_v", sa.MetaData(), autoload_with=engine)
            columns = [(c.name, str(c.type)) for c in table.columns]
            with engine.connect() as conn:
                rows = conn.execute(sa.select(table).order_by(table.c.id)).all()
            results.append((names, columns, [tuple(map(str, r)) for r in rows]))
        assert results[0] == results[1]
    finally:
        ours.dispose()
        ref.dispose()


def test_joins_distinct_on_and_renames(pair: tuple[psycopg.Connection, ...]) -> None:
    scripted.compare(
        *pair,
        [
            "CREATE TABLE ja (id int, x text)",
            "CREATE TABLE jb (id int, y int)",
            "INSERT INTO ja VALUES (1, 'p'), (2, 'q')",
            "INSERT INTO jb VALUES (2, 5), (3, 6)",
            "CREATE VIEW fj AS SELECT * FROM ja FULL JOIN jb USING (id)",
            "SELECT * FROM fj ORDER BY id",
            "CREATE VIEW don AS SELECT DISTINCT ON (id) id, x FROM ja ORDER BY id, x DESC",
            "SELECT * FROM don",
            "CREATE VIEW p (k) AS SELECT id, x FROM ja",
            "SELECT p.* FROM p ORDER BY 1",
            "SELECT t.k FROM p t WHERE t.x = 'q'",
            "CREATE OR REPLACE VIEW p (k) AS SELECT id + 10, x, 1 AS extra FROM ja",
            "SELECT * FROM p ORDER BY 1",
            "COPY p TO STDOUT",
            "SELECT * FROM ja NATURAL JOIN p",
            "CREATE VIEW agg AS SELECT x, count(*) FROM ja GROUP BY x HAVING count(*) > 0",
            "ALTER TABLE ja RENAME COLUMN x TO xx",
            "SELECT * FROM agg ORDER BY 1",
            "SELECT * FROM fj ORDER BY id",
            "ALTER TABLE jb DROP COLUMN y",
            "ALTER TABLE ja DROP COLUMN id",
        ],
    )


def test_subqueries_of_a_view_and_of_its_query(pair: tuple[psycopg.Connection, ...]) -> None:
    # The view's subqueries are bound by a binder of their own: they must not take the
    # query's subqueries' places.
    scripted.compare(
        *pair,
        [
            "CREATE VIEW vsub AS SELECT (SELECT max(n) FROM vt) AS m, "
            "(SELECT count(*) FROM vu) AS c",
            "SELECT (SELECT count(*) FROM vt) AS k, m, c, (SELECT min(id) FROM vu) FROM vsub",
            "SELECT m FROM vsub WHERE c = (SELECT count(*) FROM vu WHERE tag > 'w')",
            "DROP VIEW vsub",
        ],
    )


def test_array_concatenation(pair: tuple[psycopg.Connection, ...]) -> None:
    # psql's \\d+ concatenates arrays (reloptions).
    scripted.compare(
        *pair,
        [
            "SELECT ARRAY[1, 2] || ARRAY[3]",
            "SELECT ARRAY[1, 2] || 3",
            "SELECT 0 || ARRAY[1]",
            "SELECT NULL::text[] || ARRAY['a']",
            "SELECT ARRAY['a'] || '{b,c}'",
            "SELECT NULL::int[] || NULL::int[]",
            "SELECT ARRAY[1] || ARRAY['x']",
        ],
    )


async def test_a_view_replaced_through_another_server_is_seen_at_once(api_db: Database) -> None:
    # The other server never polls: only the catalog guard tells it the view changed (the
    # tables its plan reads did not).
    other = Engine(api_db.client, EngineConfig(catalog_poll_s=0))
    await other.start()
    try:
        await api_db.execute("CREATE TABLE ga (x int)")
        await api_db.execute("CREATE TABLE gb (x int)")
        await api_db.execute("INSERT INTO ga VALUES (1)")
        await api_db.execute("INSERT INTO gb VALUES (2)")
        await api_db.execute("CREATE VIEW gv AS SELECT x FROM ga")
        await other.refresh_catalog()
        assert (await run_autocommit(other, "SELECT x FROM gv")).rows == [(1,)]
        await api_db.execute("CREATE OR REPLACE VIEW gv AS SELECT x FROM gb")
        assert (await run_autocommit(other, "SELECT x FROM gv")).rows == [(2,)]
    finally:
        await other.close()
