"""CREATE / ALTER / DROP SEQUENCE and nextval, currval, setval, lastval, against real
Postgres (values are handed out a block per process, so only single-session orders are
compared)."""

from __future__ import annotations

import psycopg
import pytest

from tests.server import scripted

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
