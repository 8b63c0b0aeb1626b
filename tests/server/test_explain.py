"""EXPLAIN shows the access path and join the planner chose (docs/sql.md, "How a statement
runs"): the plan shapes the round trips and the work a statement costs."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from tests.server.conftest import SqlServer


@pytest.fixture(scope="module")
def conn(sql_server: SqlServer) -> Iterator[psycopg.Connection]:
    with psycopg.connect(sql_server.conninfo(), autocommit=True) as c:
        c.execute("CREATE TABLE xa (id int PRIMARY KEY, v int)")
        c.execute("CREATE TABLE xb (id int PRIMARY KEY, aid int, w int)")
        c.execute("CREATE TABLE xc (id int PRIMARY KEY, bid int)")
        c.execute("CREATE INDEX xb_w ON xb (w)")
        yield c


def plan(conn: psycopg.Connection, sql: str) -> str:
    return "\n".join(r[0] for r in conn.execute(f"EXPLAIN {sql}"))


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT * FROM xa WHERE id = 1", "Point Get on xa"),
        ("SELECT * FROM xa WHERE id IN (1, 2)", "Point Get on xa"),
        ("SELECT * FROM xa WHERE id BETWEEN 1 AND 5", "Range Scan on xa"),
        ("SELECT * FROM xb WHERE w = 3", "xb_w"),
        ("SELECT * FROM xa WHERE v = 3", "Seq Scan on xa"),
    ],
)
def test_access_paths(conn: psycopg.Connection, sql: str, expected: str) -> None:
    assert expected in plan(conn, sql)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM xa, xb WHERE xa.id = xb.aid",
        "SELECT * FROM xa CROSS JOIN xb WHERE xb.aid = xa.id AND xa.v > 1",
        "SELECT * FROM xa JOIN xb ON true WHERE xa.id = xb.aid",
        "SELECT * FROM xa, xb, xc WHERE xa.id = xb.aid AND xc.bid = xb.id",
    ],
)
def test_where_equalities_join_comma_separated_tables(conn: psycopg.Connection, sql: str) -> None:
    """Not a cross product filtered afterwards: the WHERE equality becomes the join's key."""
    text = plan(conn, sql)
    assert "Hash Join" in text and "Nested Loop" not in text, text


def test_where_does_not_move_into_the_nullable_side(conn: psycopg.Connection) -> None:
    text = plan(conn, "SELECT * FROM xa LEFT JOIN xb ON xa.id = xb.aid WHERE xb.w = xa.v")
    assert text.splitlines()[0].startswith("Filter"), text
