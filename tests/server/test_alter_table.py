"""DDL as migration tools emit it, against real Postgres: RENAME CONSTRAINT, ALTER INDEX ...
RENAME, VALIDATE CONSTRAINT after NOT VALID, duplicate and missing names (42P07, 42701,
42710, 42704, 42P01, 42703), DROP of the wrong kind of relation (42809), CREATE TABLE (LIKE
...), CHECK and DEFAULT expressions checked at CREATE / ALTER TABLE, and the SQLSTATEs of
IF [NOT] EXISTS notices."""

from __future__ import annotations

import psycopg
import pytest

from tests.server import scripted

Pair = tuple[psycopg.Connection, psycopg.Connection]

_CONSTRAINTS = (
    "SELECT conname, contype FROM pg_constraint WHERE conrelid = '{t}'::regclass ORDER BY 1"
)
_INDEXES = "SELECT indexname FROM pg_indexes WHERE tablename = '{t}' ORDER BY 1"


@pytest.fixture(scope="module")
def pair(pg_pair: Pair) -> Pair:
    return pg_pair


def test_rename_constraint_and_index(pair: Pair) -> None:
    scripted.compare(
        *pair,
        [
            "CREATE TABLE rc (a int PRIMARY KEY, b int, c int CONSTRAINT rc_c_ck CHECK (c > 0))",
            "CREATE TABLE rc_other (x int)",
            "ALTER TABLE rc ADD CONSTRAINT rc_b_key UNIQUE (b)",
            "ALTER TABLE rc RENAME CONSTRAINT rc_c_ck TO rc_c_positive",
            "ALTER TABLE rc RENAME CONSTRAINT rc_b_key TO rc_b_unique",
            "ALTER TABLE rc RENAME CONSTRAINT rc_pkey TO rc_pk",
            _CONSTRAINTS.format(t="rc"),
            _INDEXES.format(t="rc"),
            # Duplicates: a constraint name of the table (42710), a relation name for a
            # constraint with an index (42P07); missing ones (42704, 42P01).
            "ALTER TABLE rc RENAME CONSTRAINT rc_c_positive TO rc_b_unique",
            "ALTER TABLE rc RENAME CONSTRAINT rc_b_unique TO rc_c_positive",
            "ALTER TABLE rc RENAME CONSTRAINT rc_b_unique TO rc_other",
            "ALTER TABLE rc RENAME CONSTRAINT nosuch TO x",
            "ALTER TABLE nosuch RENAME CONSTRAINT a TO b",
            "ALTER TABLE IF EXISTS nosuch RENAME CONSTRAINT a TO b",
            # ALTER INDEX renames the constraint of a unique or primary key index too.
            "ALTER INDEX rc_pk RENAME TO rc_pkey",
            "ALTER INDEX rc_b_unique RENAME TO rc_b_key",
            "CREATE INDEX rc_c_idx ON rc (c)",
            "ALTER INDEX rc_c_idx RENAME TO rc_c_index",
            "ALTER INDEX rc_c_index RENAME TO rc_other",
            "ALTER INDEX rc_c_index RENAME TO rc_pkey",
            "ALTER INDEX nosuch RENAME TO x",
            "ALTER INDEX IF EXISTS nosuch RENAME TO x",
            _CONSTRAINTS.format(t="rc"),
            _INDEXES.format(t="rc"),
            "CREATE INDEX rc_pkey ON rc (b)",
            "CREATE INDEX IF NOT EXISTS rc_c_index ON rc (b)",
            "DROP INDEX rc_c_index",
            "DROP INDEX rc_b_key",
            "ALTER TABLE rc DROP CONSTRAINT rc_b_key",
            # A renamed table keeps its primary key's name.
            "ALTER TABLE rc RENAME TO rc2",
            _INDEXES.format(t="rc2"),
            "ALTER TABLE rc2 RENAME COLUMN nosuch TO x",
            "DROP TABLE rc2, rc_other",
        ],
    )


def test_add_constraint_names(pair: Pair) -> None:
    scripted.compare(
        *pair,
        [
            "CREATE TABLE an (a int PRIMARY KEY, b int, c int CONSTRAINT an_c_ck CHECK (c > 0))",
            "CREATE TABLE an_rel (x int)",
            "ALTER TABLE an ADD CONSTRAINT an_c_ck CHECK (c > 1)",
            "ALTER TABLE an ADD CONSTRAINT an_c_ck UNIQUE (b)",
            "ALTER TABLE an ADD CONSTRAINT an_pkey UNIQUE (b)",
            "ALTER TABLE an ADD CONSTRAINT an_rel UNIQUE (b)",
            "ALTER TABLE an ADD CONSTRAINT an_rel CHECK (b > 0)",
            # Unnamed checks: named after their one column, numbered apart.
            "ALTER TABLE an ADD CHECK (b > 0), ADD CHECK (b < 100), ADD CHECK (b <> c)",
            "ALTER TABLE an ADD COLUMN d int CHECK (d > 0)",
            "ALTER TABLE an ADD COLUMN xmin int",
            "ALTER TABLE an ADD COLUMN e int CONSTRAINT an_c_ck CHECK (e > 0)",
            _CONSTRAINTS.format(t="an"),
            "CREATE TABLE an_dup (a int CONSTRAINT q CHECK (a > 0),"
            " b int CONSTRAINT q CHECK (b > 0))",
            "CREATE TABLE an_gen (a int, CHECK (a > 0), CHECK (a < 9), CHECK (a > b), b int)",
            _CONSTRAINTS.format(t="an_gen"),
            "DROP TABLE an, an_rel, an_gen",
        ],
    )


def test_not_valid_then_validate(pair: Pair) -> None:
    scripted.compare(
        *pair,
        [
            "CREATE TABLE nv_p (a int PRIMARY KEY)",
            "CREATE TABLE nv_c (a int, b int)",
            "INSERT INTO nv_p VALUES (1), (2)",
            "INSERT INTO nv_c VALUES (1, 20), (5, 5)",
            "ALTER TABLE nv_c ADD CONSTRAINT nv_fk FOREIGN KEY (a) REFERENCES nv_p",
            "ALTER TABLE nv_c ADD CONSTRAINT nv_fk FOREIGN KEY (a) REFERENCES nv_p NOT VALID",
            "ALTER TABLE nv_c ADD CONSTRAINT nv_ck CHECK (b > 10) NOT VALID",
            # New rows are checked at once; the old ones by VALIDATE CONSTRAINT.
            "INSERT INTO nv_c VALUES (1, 1)",
            "INSERT INTO nv_c VALUES (7, 70)",
            "ALTER TABLE nv_c VALIDATE CONSTRAINT nv_fk",
            "ALTER TABLE nv_c VALIDATE CONSTRAINT nv_ck",
            "DELETE FROM nv_c WHERE a = 5",
            "ALTER TABLE nv_c VALIDATE CONSTRAINT nv_fk",
            "ALTER TABLE nv_c VALIDATE CONSTRAINT nv_ck",
            "ALTER TABLE nv_c VALIDATE CONSTRAINT nosuch",
            "ALTER TABLE nv_p VALIDATE CONSTRAINT nv_p_pkey",
            "ALTER TABLE nv_c OWNER TO postgres",
            "ALTER TABLE nv_c ALTER COLUMN b SET STATISTICS 100",
            "SELECT * FROM nv_c ORDER BY a",
            "DROP TABLE nv_c, nv_p",
            # Unknown columns of a foreign key.
            "CREATE TABLE nv_p (a int PRIMARY KEY)",
            "CREATE TABLE nv_c (a int)",
            "ALTER TABLE nv_c ADD FOREIGN KEY (x) REFERENCES nv_p",
            "ALTER TABLE nv_c ADD FOREIGN KEY (a) REFERENCES nv_p (x)",
            "DROP TABLE nv_c, nv_p",
        ],
    )


def test_create_table_like(pair: Pair) -> None:
    scripted.compare(
        *pair,
        [
            "CREATE TABLE lk_src (id serial PRIMARY KEY, name text NOT NULL DEFAULT 'x',"
            " code int UNIQUE, n int CONSTRAINT lk_n_ck CHECK (n > 0))",
            "CREATE INDEX lk_src_name_idx ON lk_src (name)",
            "CREATE TABLE lk_bare (LIKE lk_src)",
            "CREATE TABLE lk_all (LIKE lk_src INCLUDING ALL)",
            "CREATE TABLE lk_some (extra int, LIKE lk_src INCLUDING DEFAULTS INCLUDING"
            " CONSTRAINTS EXCLUDING INDEXES)",
            "CREATE TABLE lk_missing (LIKE nosuch)",
            "CREATE TABLE lk_dup (name int, LIKE lk_src)",
            "SELECT table_name, column_name, is_nullable, column_default"
            " FROM information_schema.columns WHERE table_name LIKE 'lk%'"
            " ORDER BY table_name, ordinal_position",
            _CONSTRAINTS.format(t="lk_all"),
            _INDEXES.format(t="lk_all"),
            _CONSTRAINTS.format(t="lk_some"),
            "INSERT INTO lk_all (code, n) VALUES (1, 1)",
            "INSERT INTO lk_all (code, n) VALUES (1, 1)",
            "INSERT INTO lk_some (n) VALUES (0)",
            "INSERT INTO lk_bare (id, name) VALUES (1, NULL)",
            "DROP TABLE lk_bare, lk_all, lk_some, lk_src",
        ],
    )


def test_expressions_checked_at_ddl(pair: Pair) -> None:
    scripted.compare(
        *pair,
        [
            "CREATE TABLE ex_bad (a int CHECK (b > 0))",
            "CREATE TABLE ex_bad (a int DEFAULT 'x')",
            "CREATE TABLE ex_bad (a int DEFAULT b)",
            "CREATE TABLE ex_bad (a int DEFAULT (SELECT 1))",
            "CREATE TABLE ex_bad (a int CHECK (a > (SELECT 1)))",
            "CREATE TABLE ex (a int DEFAULT 1 + 2, t timestamptz DEFAULT now())",
            "ALTER TABLE ex ADD COLUMN b int DEFAULT 'y'",
            "ALTER TABLE ex ALTER COLUMN a SET DEFAULT 'z'",
            "ALTER TABLE ex ADD CONSTRAINT ex_ck CHECK (nosuch > 0)",
            "INSERT INTO ex DEFAULT VALUES",
            "SELECT a FROM ex",
            "DROP TABLE ex",
        ],
    )


def test_drop_wrong_kind(pair: Pair) -> None:
    scripted.compare(
        *pair,
        [
            "CREATE TABLE wk (a int PRIMARY KEY)",
            "CREATE VIEW wk_view AS SELECT * FROM wk",
            "CREATE INDEX wk_idx ON wk (a)",
            "CREATE SEQUENCE wk_seq",
            "DROP TABLE wk_idx",
            "DROP TABLE wk_seq",
            "DROP TABLE IF EXISTS wk_view",
            "DROP VIEW wk_idx",
            "DROP INDEX wk",
            "DROP INDEX IF EXISTS wk_view",
            "DROP INDEX wk_seq",
            "DROP INDEX wk_pkey",
            "DROP SEQUENCE wk",
            "DROP SEQUENCE IF EXISTS wk_pkey",
            "DROP SEQUENCE wk_seq",
            "DROP TABLE wk CASCADE",
        ],
    )


def _notices(conn: psycopg.Connection, sql: str) -> list[tuple[str | None, str | None]]:
    """(SQLSTATE, message) of the notices ``sql`` raises."""
    got: list[tuple[str | None, str | None]] = []

    def handler(diag: psycopg.errors.Diagnostic) -> None:
        got.append((diag.sqlstate, diag.message_primary))

    conn.add_notice_handler(handler)
    try:
        conn.execute(sql)
    finally:
        conn.remove_notice_handler(handler)
    return got


def test_if_exists_notice_sqlstates(pair: Pair) -> None:
    ours, ref = pair
    script = [
        "CREATE TABLE ne (a int)",
        "CREATE TABLE IF NOT EXISTS ne (a int)",
        "ALTER TABLE ne ADD COLUMN IF NOT EXISTS a int",
        "CREATE INDEX ne_a_idx ON ne (a)",
        "CREATE INDEX IF NOT EXISTS ne_a_idx ON ne (a)",
        "ALTER TABLE ne DROP COLUMN IF EXISTS nosuch",
        "ALTER TABLE ne DROP CONSTRAINT IF EXISTS nosuch",
        "DROP INDEX IF EXISTS nosuch",
        "DROP TABLE ne",
        "DROP TABLE IF EXISTS ne",
    ]
    for sql in script:
        assert _notices(ours, sql) == _notices(ref, sql), sql


def test_drop_and_replace_the_primary_key(pair: Pair) -> None:
    """Django and Alembic change a table's primary key by dropping the constraint, then adding
    another: the rows move to a hidden row id and back, indexes follow, NOT NULL stays."""
    scripted.compare(
        *pair,
        [
            "CREATE TABLE dpk (a int PRIMARY KEY, b int NOT NULL, c text UNIQUE)",
            "CREATE INDEX dpk_b ON dpk (b)",
            "INSERT INTO dpk SELECT g, g % 3, 'c' || g FROM generate_series(1, 20) g",
            "CREATE TABLE dpk_ref (x int REFERENCES dpk)",
            "ALTER TABLE dpk DROP CONSTRAINT dpk_pkey",
            "DROP TABLE dpk_ref",
            "ALTER TABLE dpk DROP CONSTRAINT dpk_pkey",
            _CONSTRAINTS.format(t="dpk"),
            _INDEXES.format(t="dpk"),
            "SELECT count(*), sum(a), sum(b) FROM dpk",
            "SELECT a, c FROM dpk WHERE b = 2 ORDER BY a",
            "SELECT a FROM dpk WHERE c = 'c7'",
            "INSERT INTO dpk VALUES (1, 1, 'c21')",
            "INSERT INTO dpk VALUES (NULL, 1, 'c22')",
            "INSERT INTO dpk VALUES (22, 1, 'c7')",
            "UPDATE dpk SET b = 9 WHERE a = 1",
            "DELETE FROM dpk WHERE a = 2",
            "SELECT a, b FROM dpk WHERE a < 4 ORDER BY a, b",
            "ALTER TABLE dpk DROP CONSTRAINT dpk_pkey",
            "ALTER TABLE dpk DROP CONSTRAINT IF EXISTS dpk_pkey",
            "DELETE FROM dpk WHERE a = 1 AND b = 1",
            "ALTER TABLE dpk ADD CONSTRAINT dpk_pk2 PRIMARY KEY (c)",
            _CONSTRAINTS.format(t="dpk"),
            "SELECT c, a FROM dpk WHERE c IN ('c3', 'c21') ORDER BY c",
            "ALTER TABLE dpk DROP CONSTRAINT dpk_pk2, ADD PRIMARY KEY (a)",
            _CONSTRAINTS.format(t="dpk"),
            "SELECT count(*) FROM dpk",
            "DROP TABLE dpk",
        ],
    )
