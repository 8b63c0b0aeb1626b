"""CREATE / ALTER / DROP SEQUENCE and nextval, currval, setval, lastval, against real
Postgres (values are handed out a block per process, so only single-session orders are
compared)."""

from __future__ import annotations

import psycopg
import pytest

from tests.server import scripted
from tests.server.conftest import SqlServer

Pair = tuple[psycopg.Connection, psycopg.Connection]


@pytest.fixture(scope="module")
def pair(pg_pair: Pair) -> Pair:
    return pg_pair


def test_sequences(pair: Pair) -> None:
    scripted.compare(
        *pair,
        [
            "CREATE SEQUENCE s1",
            "SELECT currval('s1')",
            "SELECT nextval('s1'), nextval('s1')",
            "SELECT currval('s1'), lastval()",
            "CREATE SEQUENCE s2 START WITH 100 INCREMENT BY 50",
            "SELECT nextval('s2'), nextval('public.s2'), nextval('s2'::regclass)",
            "CREATE SEQUENCE IF NOT EXISTS s2",
            "CREATE SEQUENCE s2",
            "SELECT setval('s1', 41)",
            "SELECT nextval('s1')",
            "SELECT setval('s1', 7, false), nextval('s1')",
            "CREATE SEQUENCE down INCREMENT BY -1",
            "SELECT nextval('down'), nextval('down')",
            "CREATE SEQUENCE small MAXVALUE 2",
            "SELECT nextval('small'), nextval('small')",
            "SELECT nextval('small')",
            "SELECT setval('small', 5)",
            "ALTER SEQUENCE s1 RESTART WITH 1000",
            "SELECT nextval('s1')",
            "ALTER SEQUENCE s1 RESTART",
            "SELECT nextval('s1')",
            "SELECT nextval('nosuch')",
            "CREATE TABLE st (id int DEFAULT nextval('s2'), v text)",
            "INSERT INTO st (v) VALUES ('a'), ('b') RETURNING id, v",
            "INSERT INTO st VALUES (DEFAULT, 'c'), (nextval('s2') + 1, 'd') RETURNING id, v",
            "SELECT v, nextval('s1') FROM st WHERE v < 'c' ORDER BY v",
            "DROP SEQUENCE s2",
            "DROP TABLE st",
            "DROP SEQUENCE s2",
            "DROP SEQUENCE IF EXISTS s2, nosuch",
            "CREATE TABLE ser (id serial, v text)",
            "INSERT INTO ser (v) VALUES ('a') RETURNING id",
            "SELECT currval('ser_id_seq'), lastval()",
            "SELECT currval(pg_get_serial_sequence('ser', 'id'))",
            "DROP SEQUENCE ser_id_seq",
            "SELECT relname, relkind FROM pg_class WHERE relname IN ('s1', 'down', 'small')"
            " ORDER BY relname",
        ],
    )


def test_nextval_in_a_query_condition_runs_per_row(pair: Pair) -> None:
    """As in Postgres: a WHERE calls nextval once for each row it looks at."""
    for conn in pair:
        conn.execute("CREATE SEQUENCE IF NOT EXISTS s9")
    got = [
        [
            conn.execute("SELECT 1 WHERE 5 = nextval('s9')").fetchall(),
            conn.execute(
                "SELECT g FROM generate_series(1, 4) g WHERE nextval('s9') = 3"
            ).fetchall(),
            conn.execute("SELECT nextval('s9')").fetchone(),
        ]
        for conn in pair
    ]
    assert got[0] == got[1] == [[], [(2,)], (6,)]


def test_nextval_in_an_update_condition_is_refused(pair: Pair) -> None:
    ours, _ = pair
    ours.execute("CREATE SEQUENCE IF NOT EXISTS s10")
    ours.execute("CREATE TABLE IF NOT EXISTS seq_upd (id int PRIMARY KEY)")
    with pytest.raises(psycopg.errors.FeatureNotSupported, match="nextval"):
        ours.execute("UPDATE seq_upd SET id = 1 WHERE id = nextval('s10')")
    assert ours.execute("SELECT nextval('s10')").fetchone() == (1,)


def test_alter_sequence_applies_at_once(pair: Pair) -> None:
    """ALTER SEQUENCE's new increment and bounds apply to the next nextval, from the last value
    handed out (the rest of the block this server reserved is given back)."""
    scripted.compare(
        *pair,
        [
            "CREATE SEQUENCE alt1",
            "SELECT setval('alt1', 10)",
            "SELECT nextval('alt1')",
            "ALTER SEQUENCE alt1 INCREMENT BY 10",
            "SELECT nextval('alt1'), nextval('alt1')",
            "ALTER SEQUENCE alt1 INCREMENT BY -2",
            "SELECT nextval('alt1'), nextval('alt1')",
            "ALTER SEQUENCE alt1 INCREMENT BY 1 MAXVALUE 40",
            "SELECT nextval('alt1')",
            "SELECT setval('alt1', 39)",
            "SELECT nextval('alt1')",
            "SELECT nextval('alt1')",
            "BEGIN",
            "ALTER SEQUENCE alt1 MAXVALUE 100 INCREMENT BY 5",
            "SELECT nextval('alt1')",
            "ROLLBACK",
            "SELECT nextval('alt1')",
        ],
    )


def test_alter_sequence_reaches_other_sessions(sql_server: SqlServer, reference_dsn: str) -> None:
    """A session that drew from the sequence before another one altered it draws with the new
    increment next, from its last value (as Postgres's CACHE 1 sequences do)."""
    got = []
    for dsn in (sql_server.conninfo(), reference_dsn):
        with (
            psycopg.connect(dsn, autocommit=True) as a,
            psycopg.connect(dsn, autocommit=True) as b,
        ):
            a.execute("CREATE SEQUENCE alt2")
            first = a.execute("SELECT nextval('alt2')").fetchone()
            b.execute("ALTER SEQUENCE alt2 INCREMENT BY 100")
            got.append((first, a.execute("SELECT nextval('alt2')").fetchone()))
    assert got[0] == got[1] == ((1,), (101,))


def test_select_list_sees_calls_left_to_right(pair: Pair) -> None:
    """currval and lastval in a row see the nextval and setval calls before them, not those
    after them."""
    scripted.compare(
        *pair,
        [
            "CREATE SEQUENCE ord1",
            "SELECT nextval('ord1')",
            "SELECT currval('ord1'), nextval('ord1')",
            "SELECT setval('ord1', 10, true), currval('ord1'), nextval('ord1')",
            "SELECT setval('ord1', 10, false), currval('ord1'), lastval(), nextval('ord1')",
            "SELECT nextval('ord1') AS a, currval('ord1') + 1000 AS b, lastval() AS c,"
            " nextval('ord1') AS d, currval('ord1') AS e",
            "SELECT g, currval('ord1'), nextval('ord1'), currval('ord1')"
            " FROM generate_series(1, 3) g",
            "SELECT currval('ord1') FROM generate_series(1, 2) WHERE nextval('ord1') > 0",
            "CREATE SEQUENCE ord2",
            "SELECT CASE WHEN false THEN currval('ord2') END, coalesce(1, currval('ord2'))",
            "SELECT currval('ord2')",
            "SELECT currval('nosuch_ord')",
        ],
    )


def test_setval_discard_and_drop_for_lastval(pair: Pair) -> None:
    """setval counts for currval, and for lastval when nextval drew from its sequence last;
    DISCARD SEQUENCES / ALL forget both; lastval fails once its sequence is dropped."""
    scripted.compare(
        *pair,
        [
            "CREATE SEQUENCE lv1",
            "CREATE SEQUENCE lv2",
            "SELECT setval('lv2', 50)",
            "SELECT lastval()",
            "SELECT nextval('lv1')",
            "SELECT setval('lv1', 99)",
            "SELECT lastval(), currval('lv1')",
            "SELECT setval('lv2', 60)",
            "SELECT lastval(), currval('lv2')",
            "SELECT setval('lv1', 5, false)",
            "SELECT lastval(), currval('lv1')",
            "DISCARD SEQUENCES",
            "SELECT currval('lv1')",
            "SELECT lastval()",
            "SELECT nextval('lv1')",
            "DISCARD ALL",
            "SELECT lastval()",
            "SELECT nextval('lv2')",
            "DROP SEQUENCE lv2",
            "SELECT lastval()",
            "SELECT currval('lv1')",
            "CREATE SEQUENCE lv2",
            "SELECT currval('lv2')",
        ],
    )


def test_rename_sequence(pair: Pair) -> None:
    """ALTER SEQUENCE and ALTER TABLE ... RENAME TO rename a sequence; its values, currval and
    the column defaults drawing from it follow; ALTER TABLE does nothing else to one."""
    scripted.compare(
        *pair,
        [
            "CREATE SEQUENCE ren1",
            "SELECT nextval('ren1')",
            "ALTER TABLE ren1 RENAME TO ren2",
            "SELECT currval('ren2'), nextval('ren2')",
            "ALTER SEQUENCE ren2 RENAME TO ren3",
            "SELECT currval('ren3'), nextval('ren3'), lastval()",
            "SELECT nextval('ren1')",
            "ALTER SEQUENCE IF EXISTS ren1 RENAME TO ren4",
            "ALTER TABLE IF EXISTS ren1 RENAME TO ren4",
            "ALTER SEQUENCE ren1 RENAME TO ren4",
            "CREATE TABLE ren_t (id serial, v int DEFAULT nextval('ren3'))",
            "ALTER SEQUENCE ren3 RENAME TO ren_t",
            "ALTER TABLE ren3 ADD COLUMN x int",
            "ALTER SEQUENCE ren3 RENAME TO ren5",
            "ALTER SEQUENCE ren_t_id_seq RENAME TO ren_ids",
            "INSERT INTO ren_t DEFAULT VALUES RETURNING id, v",
            "SELECT pg_get_serial_sequence('ren_t', 'id')",
            "SELECT column_name, column_default FROM information_schema.columns"
            " WHERE table_name = 'ren_t' ORDER BY column_name",
            "DROP SEQUENCE ren5",
            "ALTER TABLE ren_t RENAME TO ren_t2",
            "INSERT INTO ren_t2 DEFAULT VALUES RETURNING id, v",
            "SELECT relname FROM pg_class WHERE relname LIKE 'ren%' ORDER BY relname",
        ],
    )


def test_restart_in_a_transaction(pair: Pair) -> None:
    """ALTER SEQUENCE ... RESTART is transactional: later nextvals of its transaction draw from
    the restarted sequence, a rollback undoes it, and it commits after a nextval of the same
    transaction reserved values."""
    scripted.compare(
        *pair,
        [
            "CREATE SEQUENCE rs1",
            "BEGIN",
            "SELECT nextval('rs1')",
            "ALTER SEQUENCE rs1 RESTART WITH 50",
            "SELECT nextval('rs1'), currval('rs1')",
            "COMMIT",
            "SELECT nextval('rs1')",
            "BEGIN",
            "ALTER SEQUENCE rs1 RESTART WITH 500",
            "SELECT nextval('rs1')",
            "SELECT setval('rs1', 700)",
            "SELECT nextval('rs1')",
            "ROLLBACK",
            "SELECT nextval('rs1'), currval('rs1'), lastval()",
        ],
    )


def test_truncate_restart_identity(pair: Pair) -> None:
    """TRUNCATE ... RESTART IDENTITY restarts the sequences owned by the truncated tables'
    columns (serial, identity, OWNED BY; not a DEFAULT's), in its transaction."""
    scripted.compare(
        *pair,
        [
            "CREATE TABLE tri (id serial PRIMARY KEY, n int GENERATED BY DEFAULT AS IDENTITY,"
            " w int)",
            "CREATE TABLE tri_child (id int GENERATED ALWAYS AS IDENTITY,"
            " p int REFERENCES tri (id))",
            "CREATE SEQUENCE tri_owned OWNED BY tri.w",
            "CREATE SEQUENCE tri_free",
            "ALTER TABLE tri ALTER COLUMN w SET DEFAULT 0",
            "INSERT INTO tri (w) VALUES (nextval('tri_owned')), (nextval('tri_free'))"
            " RETURNING id, n, w",
            "INSERT INTO tri_child (p) VALUES (1), (2) RETURNING id",
            "BEGIN",
            "TRUNCATE tri, tri_child RESTART IDENTITY",
            "INSERT INTO tri (w) VALUES (nextval('tri_owned')) RETURNING id, n, w",
            "SELECT currval('tri_id_seq')",
            "ROLLBACK",
            "INSERT INTO tri (w) VALUES (nextval('tri_owned')) RETURNING id, n, w",
            "TRUNCATE tri CONTINUE IDENTITY CASCADE",
            "INSERT INTO tri (w) VALUES (nextval('tri_free')) RETURNING id, n, w",
            "TRUNCATE tri RESTART IDENTITY CASCADE",
            "INSERT INTO tri (w) VALUES (nextval('tri_owned')), (nextval('tri_free'))"
            " RETURNING id, n, w",
            "INSERT INTO tri_child (p) VALUES (1) RETURNING id",
            "BEGIN",
            "INSERT INTO tri (w) VALUES (0) RETURNING id",
            "TRUNCATE tri, tri_child RESTART IDENTITY",
            "INSERT INTO tri (w) VALUES (0) RETURNING id",
            "COMMIT",
            "INSERT INTO tri (w) VALUES (0) RETURNING id",
            "TRUNCATE tri, tri_child",
            "INSERT INTO tri (w) VALUES (0) RETURNING id",
        ],
    )
