"""SQL-level PREPARE, EXECUTE and DEALLOCATE, against real Postgres."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from tests.server import scripted

Pair = tuple[psycopg.Connection, psycopg.Connection]


@pytest.fixture(scope="module")
def pair(pg_pair: Pair) -> Iterator[Pair]:
    ours, ref = pg_pair
    for conn in (ours, ref):
        conn.execute("CREATE TABLE pt (id int PRIMARY KEY, v text, n numeric(10,2))")
    yield pg_pair


def test_prepare_and_execute(pair: tuple[psycopg.Connection, ...]) -> None:
    scripted.compare(
        *pair,
        [
            "PREPARE ins (int, text, numeric) AS INSERT INTO pt VALUES ($1, $2, $3)"
            " RETURNING id, n",
            "EXECUTE ins(1, 'a', 2.345)",
            "EXECUTE ins (2, 'b', '7')",
            "EXECUTE ins(3, 'c')",
            "EXECUTE ins(4, 'x', 'abc')",
            "EXECUTE ins(1, 'dup', 0)",
            "PREPARE sel AS SELECT id, v FROM pt WHERE id >= $1 ORDER BY id",
            "EXECUTE sel(1)",
            "EXECUTE sel('2')",
            "PREPARE sel AS SELECT 1",
            "EXECUTE nosuch",
            "PREPARE up AS UPDATE pt SET v = v || '!' WHERE id = $1",
            "EXECUTE up(1)",
            "EXECUTE up(1 + 1)",
            "SELECT * FROM pt ORDER BY id",
            "PREPARE noargs AS SELECT count(*) AS c FROM pt",
            "EXECUTE noargs",
            "EXECUTE noargs(1)",
            "DEALLOCATE sel",
            "EXECUTE sel(1)",
            "DEALLOCATE PREPARE up",
            "EXECUTE up(1)",
            "DEALLOCATE ALL",
            "EXECUTE noargs",
        ],
    )


def test_prepare_errors(pair: tuple[psycopg.Connection, ...]) -> None:
    scripted.compare(
        *pair,
        [
            "PREPARE bad AS BEGIN",
            "PREPARE t1 (nosuchtype) AS SELECT $1",
            "PREPARE t2 AS SELECT nosuch FROM pt",
            "EXECUTE t2",
            "PREPARE t3 AS SELECT * FROM pt WHERE id = $1",
            "EXECUTE t3",
            "EXECUTE t3(1, 2)",
            "DEALLOCATE t3",
        ],
    )


def test_prepared_statement_survives_rollback_and_sees_new_rows(
    pair: tuple[psycopg.Connection, ...],
) -> None:
    scripted.compare(
        *pair,
        [
            "BEGIN",
            "PREPARE cnt AS SELECT count(*) FROM pt WHERE v LIKE $1",
            "ROLLBACK",
            "EXECUTE cnt('%')",
            "BEGIN",
            "INSERT INTO pt VALUES (10, 'ten', 1)",
            "EXECUTE cnt('t%')",
            "COMMIT",
            "EXECUTE cnt('t%')",
            "DEALLOCATE cnt",
        ],
    )
