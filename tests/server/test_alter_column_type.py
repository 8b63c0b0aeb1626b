"""ALTER TABLE ... ALTER [COLUMN] c [SET DATA] TYPE t [USING expr], against real Postgres:
every row converted, constraints checked again, indexes rebuilt, keys moved, and Postgres's
errors (SQLSTATEs) when a value, a default, a view or a foreign key stands in the way."""

from __future__ import annotations

import psycopg
import pytest
import sqlglot

from percolator.server.sql import ddl
from percolator.server.sql.binder import Binder
from percolator.server.sql.catalog import Catalog
from percolator.server.sql.expr_binder import Params
from tests.server import scripted

Pair = tuple[psycopg.Connection, psycopg.Connection]


@pytest.fixture(scope="module")
def pair(pg_pair: Pair) -> Pair:
    return pg_pair


def test_widen_narrow_and_using(pair: Pair) -> None:
    scripted.compare(
        *pair,
        [
            "CREATE TABLE w (id int PRIMARY KEY, n int, s text, d numeric(10,3))",
            "INSERT INTO w VALUES (1, 10, '5', 1.234), (2, NULL, '-7', 2.355), (3, 30, NULL, NULL)",
            "ALTER TABLE w ALTER COLUMN n TYPE bigint",
            "SELECT * FROM w ORDER BY id",
            "SELECT n + 2147483647 FROM w WHERE id = 1",
            "INSERT INTO w VALUES (4, 9000000000, '1', 0)",
            "ALTER TABLE w ALTER n SET DATA TYPE text",
            "SELECT id, n, n || 'x' FROM w ORDER BY id",
            # text to integer has no assignment cast: USING is needed.
            "ALTER TABLE w ALTER s TYPE int",
            "ALTER TABLE w ALTER s TYPE int USING s::int",
            "SELECT id, s, s + 1 FROM w ORDER BY id",
            "ALTER TABLE w ALTER s TYPE bigint USING s * 100 + id",
            "SELECT id, s FROM w ORDER BY id",
            "ALTER TABLE w ALTER d TYPE numeric(10,1)",
            "SELECT id, d FROM w ORDER BY id",
            "ALTER TABLE w ALTER d TYPE real",
            "SELECT id, d FROM w ORDER BY id",
            # A value that does not convert fails the statement; nothing changes.
            "ALTER TABLE w ALTER n TYPE int USING n::int",
            "SELECT id, n, n || '!' FROM w ORDER BY id",
            "ALTER TABLE w ALTER n TYPE smallint USING n::bigint",
            "SELECT id, n FROM w ORDER BY id",
            "SELECT column_name, data_type, numeric_precision, numeric_scale"
            " FROM information_schema.columns WHERE table_name = 'w' ORDER BY ordinal_position",
            "DROP TABLE w",
        ],
    )


def test_varchar_shrink_and_several_actions(pair: Pair) -> None:
    scripted.compare(
        *pair,
        [
            "CREATE TABLE v (id int PRIMARY KEY, a varchar(10), b int, c text)",
            "INSERT INTO v VALUES (1, 'abcdef', 1, 'x'), (2, 'ab', 2, 'y')",
            "ALTER TABLE v ALTER a TYPE varchar(3)",
            "SELECT * FROM v ORDER BY id",
            "ALTER TABLE v ALTER a TYPE varchar(20)",
            "UPDATE v SET a = 'abc' WHERE id = 1",
            "ALTER TABLE v ALTER a TYPE varchar(3)",
            "INSERT INTO v VALUES (3, 'abcd', 3, 'z')",
            "ALTER TABLE v ALTER a TYPE char(5), ALTER b TYPE text, ALTER c TYPE varchar(1)",
            "SELECT id, a, b || '!', c FROM v ORDER BY id",
            # USING sees the old row, whatever the other actions change.
            "ALTER TABLE v ALTER b TYPE int USING b::int * 10, ALTER c TYPE text USING c || b",
            "SELECT id, b, c FROM v ORDER BY id",
            "ALTER TABLE v ALTER b TYPE bigint, ALTER b TYPE int",
            "ALTER TABLE v ALTER nosuch TYPE int",
            "ALTER TABLE v ALTER b TYPE int USING nosuch",
            "ALTER TABLE v ALTER b TYPE int USING 'x'",
            "ALTER TABLE v ALTER b TYPE int USING b > 5",
            "ALTER TABLE v ALTER b TYPE bigint, ADD COLUMN e int DEFAULT 7",
            "SELECT * FROM v ORDER BY id",
            "BEGIN",
            "ALTER TABLE v ALTER b TYPE text",
            "SELECT b || 'x' FROM v ORDER BY id",
            "ROLLBACK",
            "SELECT b + 1 FROM v ORDER BY id",
            "DROP TABLE v",
        ],
    )


def test_primary_key_and_indexes(pair: Pair) -> None:
    scripted.compare(
        *pair,
        [
            "CREATE TABLE p (id int PRIMARY KEY, code text, v int)",
            "CREATE INDEX p_v ON p (v)",
            "CREATE UNIQUE INDEX p_code ON p (code)",
            "INSERT INTO p VALUES (1, '01', 10), (2, '1', 20), (3, '3', 10), (300, NULL, NULL)",
            "ALTER TABLE p ALTER id TYPE bigint",
            "SELECT * FROM p WHERE id = 2",
            "SELECT * FROM p WHERE id >= 2 ORDER BY id",
            "INSERT INTO p VALUES (5000000000, '9', 1)",
            "INSERT INTO p VALUES (1, 'dup', 1)",
            "SELECT id FROM p WHERE v = 10 ORDER BY id",
            "ALTER TABLE p ALTER id TYPE text",
            "SELECT id FROM p ORDER BY id",
            "SELECT * FROM p WHERE id = '300'",
            "ALTER TABLE p ALTER id TYPE smallint USING id::smallint",
            "ALTER TABLE p ALTER v TYPE bigint",
            "SELECT id FROM p WHERE v = 10 ORDER BY id",
            "SELECT id FROM p WHERE v = 20",
            # '01' and '1' both become 1: the unique index is violated.
            "ALTER TABLE p ALTER code TYPE int USING code::int",
            "SELECT code FROM p WHERE code = '01'",
            "DELETE FROM p WHERE code = '01'",
            "ALTER TABLE p ALTER code TYPE int USING code::int",
            "SELECT id, code FROM p WHERE code = 1",
            "INSERT INTO p VALUES ('77', 1, 1)",
            "INSERT INTO p VALUES ('78', 2, 1)",
            "SELECT id, code FROM p ORDER BY code",
            # Two keys that become one value collide.
            "CREATE TABLE k (id text PRIMARY KEY, v int)",
            "INSERT INTO k VALUES ('01', 1), ('1', 2)",
            "ALTER TABLE k ALTER id TYPE int USING id::int",
            "SELECT * FROM k ORDER BY id",
            "DELETE FROM k WHERE id = '01'",
            "ALTER TABLE k ALTER id TYPE int USING id::int",
            "SELECT * FROM k WHERE id = 1",
            "ALTER TABLE k ALTER id TYPE json",
            "ALTER TABLE k ALTER id TYPE json USING to_json(id)",
            "DROP TABLE p, k",
        ],
    )


def test_constraints_and_defaults(pair: Pair) -> None:
    scripted.compare(
        *pair,
        [
            "CREATE TABLE c (id int PRIMARY KEY, n numeric(6,2) NOT NULL CHECK (n <> 1),"
            " s text DEFAULT '5', t text DEFAULT 'abc', z int DEFAULT 4)",
            "INSERT INTO c (id, n) VALUES (1, 0.8), (2, 2.5)",
            # 0.8 rounds to 1, which the check refuses.
            "ALTER TABLE c ALTER n TYPE int",
            "ALTER TABLE c ALTER n TYPE numeric(6,1)",
            "SELECT * FROM c ORDER BY id",
            "ALTER TABLE c ALTER n TYPE int USING NULL",
            "ALTER TABLE c ALTER n TYPE int USING CASE WHEN id = 1 THEN 7 ELSE n END",
            "SELECT * FROM c ORDER BY id",
            "INSERT INTO c (id, n) VALUES (3, 1)",
            "INSERT INTO c (id, n) VALUES (3, NULL)",
            # A text default cannot become an integer one.
            "ALTER TABLE c ALTER s TYPE int USING s::int",
            "ALTER TABLE c ALTER s DROP DEFAULT, ALTER s TYPE int USING s::int",
            "ALTER TABLE c ALTER z TYPE text",
            "ALTER TABLE c ALTER t TYPE varchar(2)",
            "INSERT INTO c (id, n) VALUES (4, 4)",
            "ALTER TABLE c ALTER t TYPE varchar(5)",
            "INSERT INTO c (id, n) VALUES (4, 4)",
            "SELECT id, s, t, z, z || '!' FROM c ORDER BY id",
            "SELECT column_name, column_default, is_nullable FROM information_schema.columns"
            " WHERE table_name = 'c' ORDER BY ordinal_position",
            "ALTER TABLE c ALTER n TYPE bigint",
            "INSERT INTO c (id, n) VALUES (5, 1)",
            "CREATE TABLE sr (id serial PRIMARY KEY, v text)",
            "INSERT INTO sr (v) VALUES ('a')",
            "ALTER TABLE sr ALTER id TYPE bigint",
            "INSERT INTO sr (v) VALUES ('b') RETURNING id",
            "CREATE TABLE ident (id int GENERATED ALWAYS AS IDENTITY, v text)",
            "ALTER TABLE ident ALTER id TYPE text",
            "DROP TABLE c, sr, ident",
        ],
    )


def test_views_and_foreign_keys(pair: Pair) -> None:
    scripted.compare(
        *pair,
        [
            "CREATE TABLE vt (id int PRIMARY KEY, a int, b int)",
            "INSERT INTO vt VALUES (1, 2, 3)",
            "CREATE VIEW vv AS SELECT id, a FROM vt",
            "ALTER TABLE vt ALTER a TYPE bigint",
            "ALTER TABLE vt ALTER b TYPE bigint",
            "SELECT * FROM vv",
            "DROP VIEW vv",
            "ALTER TABLE vt ALTER a TYPE bigint",
            "CREATE TABLE par (id int PRIMARY KEY, name text UNIQUE)",
            "CREATE TABLE chi (id int PRIMARY KEY, pid int REFERENCES par,"
            " pname text REFERENCES par (name))",
            "INSERT INTO par VALUES (1, 'one'), (2, 'two')",
            "INSERT INTO chi VALUES (10, 1, 'one'), (11, 2, NULL)",
            "ALTER TABLE chi ALTER pid TYPE text",
            "ALTER TABLE par ALTER id TYPE text",
            "ALTER TABLE chi ALTER pid TYPE bigint",
            "ALTER TABLE par ALTER id TYPE bigint",
            "ALTER TABLE chi ALTER pname TYPE varchar(10)",
            "ALTER TABLE chi ALTER pname TYPE int USING length(pname)",
            "SELECT * FROM chi ORDER BY id",
            "INSERT INTO chi VALUES (12, 3, NULL)",
            "INSERT INTO chi VALUES (12, 2, 'one')",
            "DELETE FROM par WHERE id = 1",
            "UPDATE par SET id = 5 WHERE id = 2",
            "ALTER TABLE par ALTER id TYPE int",
            "SELECT conname, contype FROM pg_constraint WHERE conrelid = 'chi'::regclass"
            " ORDER BY conname",
            # A converted child value that no longer references its parent.
            "ALTER TABLE chi ALTER pid TYPE int USING pid + 100",
            "DROP TABLE chi, par, vt",
        ],
    )


def test_table_without_primary_key(pair: Pair) -> None:
    scripted.compare(
        *pair,
        [
            "CREATE TABLE np (a int, b text NOT NULL, c int)",
            "CREATE INDEX np_a ON np (a)",
            "CREATE UNIQUE INDEX np_ab ON np (a, b)",
            "INSERT INTO np VALUES (1, '1', NULL), (2, '2', 5), (NULL, '3', 6)",
            "ALTER TABLE np ALTER b TYPE int USING b::int, ALTER a TYPE text",
            "SELECT * FROM np ORDER BY b",
            "SELECT b FROM np WHERE a = '2'",
            "INSERT INTO np VALUES ('2', 2, 0)",
            "ALTER TABLE np ALTER c TYPE text, ALTER c SET NOT NULL",
            "DELETE FROM np WHERE c IS NULL",
            "ALTER TABLE np ALTER c TYPE text, ALTER c SET NOT NULL",
            "SELECT * FROM np ORDER BY b",
            "DROP TABLE np",
        ],
    )


def _apply(catalog: Catalog, sql: str) -> ddl.DdlResult:
    node = sqlglot.parse_one(sql, read="postgres")
    return ddl.apply_ddl(catalog, node, Binder(catalog, Params()).exprs.bind_type)


def test_storages_of_one_statement() -> None:
    """Each index over a converted column gets one new storage per statement (two changes to
    its columns do not leave a storage behind that no catalog names), built once; a
    primary-key change moves the rows and every index, and keeps the column ids."""
    catalog = _apply(Catalog(), "CREATE TABLE t (id int PRIMARY KEY, a int, b int, c int)").catalog
    catalog = _apply(catalog, "CREATE INDEX t_ab ON t (a, b)").catalog
    catalog = _apply(catalog, "CREATE INDEX t_c ON t (c)").catalog
    before = catalog.table("t")
    result = _apply(catalog, "ALTER TABLE t ALTER a TYPE bigint, ALTER b TYPE text")
    after = result.catalog.table("t")
    assert [c.id for c in after.columns] == [c.id for c in before.columns]
    assert after.storage == before.storage
    old_ab, old_c = before.indexes
    new_ab, new_c = after.indexes
    assert new_ab.storage != old_ab.storage and new_c.storage == old_c.storage
    kinds = [type(a).__name__ for a in result.actions]
    assert kinds == ["ConvertColumns", "BuildIndex"]
    assert result.actions[1].index.storage == new_ab.storage  # type: ignore[union-attr]
    assert result.actions[0].conversions == ((2, None), (3, None))  # type: ignore[union-attr]

    result = _apply(catalog, "ALTER TABLE t ALTER a TYPE bigint, ALTER id TYPE bigint")
    after = result.catalog.table("t")
    assert after.storage != before.storage
    assert {ix.storage for ix in after.indexes}.isdisjoint(ix.storage for ix in before.indexes)
    assert [type(a).__name__ for a in result.actions] == ["ConvertColumns", "BuildIndex"]
    # The index rebuilt for the first change keeps the storage the move writes it into.
    assert result.actions[1].index.storage == after.indexes[0].storage  # type: ignore[union-attr]
