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
        c.execute("CREATE TABLE xd (w int, i int, q int, PRIMARY KEY (w, i))")
        c.execute("CREATE TABLE xu (id int PRIMARY KEY, code text UNIQUE)")
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
        ("SELECT * FROM xd WHERE (w, i) = (1, 2)", "Point Get on xd"),
        (
            "SELECT * FROM xd WHERE (w, i) IN ((1, 2), (3, 4))",
            "Point Get on xd (primary key (w, i) IN",
        ),
        ("SELECT * FROM xa WHERE id = 1 OR id = 7", "Point Get on xa"),
        ("SELECT * FROM xd WHERE (w, i) > (1, 2)", "Range Scan on xd (primary key w >="),
        ("SELECT * FROM xd WHERE (w, i) IN ((1, 2), (3, q))", "Seq Scan on xd"),
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


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        (
            "SELECT * FROM xa JOIN xb ON xb.id = xa.v WHERE xa.id = 1",
            [
                "Lookup Join",
                "  ->  Point Get on xa",
                "  ->  Point Get on xb (primary key id = xa.v)",
            ],
        ),
        (
            "SELECT * FROM xa JOIN xd ON xd.w = xa.id AND xd.i = xa.v WHERE xa.id BETWEEN 1 AND 9",
            [
                "Lookup Join",
                "  ->  Range Scan on xa",
                "  ->  Point Get on xd (primary key w = xa.id, i = xa.v)",
            ],
        ),
        (
            "SELECT * FROM xa JOIN xd ON xd.i = xa.v WHERE xa.id = 1 AND xd.w = 7",
            [
                "Lookup Join",
                "  ->  Point Get on xa",
                "  ->  Point Get on xd (primary key w = 7, i = xa.v)",
            ],
        ),
        (
            "SELECT * FROM xa JOIN xd ON xd.w = xa.v WHERE xa.v > 3",
            [
                "Lookup Join",
                "  ->  Seq Scan on xa",
                "  ->  Range Scan on xd (primary key w = xa.v)",
            ],
        ),
        (
            "SELECT * FROM xa LEFT JOIN xb ON xb.w = xa.v WHERE xa.id IN (1, 2)",
            [
                "Lookup Left Join",
                "  ->  Point Get on xa",
                "  ->  Index Lookup using xb_w on xb (w = xa.v)",
            ],
        ),
        (
            "SELECT * FROM xa JOIN xu ON xu.code = xa.v::text WHERE xa.id = 1",
            ["Lookup Join", "  ->  Point Get on xa", "  ->  Index Lookup using xu_code_key on xu"],
        ),
        (
            # only the left side is keyed: the sides swap, the bounded right side drives
            "SELECT * FROM xa JOIN xb ON xa.id = xb.aid WHERE xb.id = 3",
            [
                "Lookup Join",
                "  ->  Point Get on xb",
                "  ->  Point Get on xa (primary key id = xb.aid)",
            ],
        ),
        (
            "SELECT * FROM xa RIGHT JOIN xb ON xa.id = xb.aid WHERE xb.id < 3",
            [
                "Lookup Right Join",
                "  ->  Range Scan on xb",
                "  ->  Point Get on xa (primary key id = xb.aid)",
            ],
        ),
        (
            # both keyed: the side with the narrower access path drives
            "SELECT * FROM xa JOIN xb ON xa.id = xb.id WHERE xa.v > 1 AND xb.id = 4",
            [
                "Lookup Join",
                "  ->  Point Get on xb",
                "  ->  Point Get on xa (primary key id = xb.id)",
            ],
        ),
        (
            "SELECT * FROM xa JOIN xb ON xb.id = xa.v"
            " JOIN xd ON xd.w = xb.id AND xd.i = xa.id WHERE xa.id = 1",
            [
                "Lookup Join",
                "  ->  Lookup Join",
                "  ->  Point Get on xd (primary key w = xb.id, i = xa.id)",
            ],
        ),
    ],
)
def test_lookup_joins(conn: psycopg.Connection, sql: str, expected: list[str]) -> None:
    """A bounded side drives, the other is read by key (docs/sql.md, "How a statement runs")."""
    lines = plan(conn, sql).splitlines()
    for want in expected:
        assert any(line.startswith(want) for line in lines), (want, lines)
    assert lines[0] == expected[0], lines


@pytest.mark.parametrize(
    "sql",
    [
        # an unbounded outer side would read the keyed side batch by batch: scan both once
        "SELECT * FROM xa JOIN xb ON xb.id = xa.v",
        "SELECT * FROM xa LEFT JOIN xb ON xb.w = xa.v",
        # not keyed: xb.aid has no index
        "SELECT * FROM xa JOIN xb ON xb.aid = xa.id WHERE xa.id = 1",
        # the keyed side is the preserved side of the outer join
        "SELECT * FROM xa LEFT JOIN xb ON xa.id = xb.aid WHERE xb.id = 1",
        "SELECT * FROM xa FULL JOIN xb ON xb.id = xa.v WHERE xa.id = 1",
    ],
)
def test_hash_join_without_a_bounded_keyed_pair(conn: psycopg.Connection, sql: str) -> None:
    text = plan(conn, sql)
    assert "Lookup" not in text, text


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        (
            # top-N per group: the subquery runs per xa row, by xb's index on w
            "SELECT * FROM xa, LATERAL (SELECT * FROM xb WHERE xb.w = xa.id"
            " ORDER BY xb.id LIMIT 3) x",
            [
                "Nested Loop",
                "  ->  Seq Scan on xa",
                "  ->  Limit",
                "xb_w",
            ],
        ),
        (
            "SELECT * FROM xa LEFT JOIN LATERAL (SELECT * FROM xd WHERE xd.w = xa.id) x ON true",
            ["Nested Loop Left Join", "  ->  Seq Scan on xa", "Range Scan on xd"],
        ),
        (
            "SELECT * FROM xa CROSS JOIN LATERAL (SELECT * FROM xb WHERE xb.id = xa.v) x",
            ["Nested Loop", "  ->  Seq Scan on xa", "Point Get on xb"],
        ),
        (
            "SELECT * FROM xa, generate_series(1, xa.v) g",
            ["Nested Loop", "  ->  Seq Scan on xa", "  ->  Function Scan on generate_series"],
        ),
    ],
)
def test_lateral_runs_per_left_row(conn: psycopg.Connection, sql: str, expected: list[str]) -> None:
    """A LATERAL item that reads the left row is a dependent nested loop; its own access path
    is keyed by the left row's values, as a correlated subquery's is."""
    text = plan(conn, sql)
    lines = text.splitlines()
    assert lines[0] == expected[0], text
    for want in expected[1:]:
        assert any(want in line for line in lines), (want, text)


def test_function_without_reference_to_the_left_is_not_lateral(
    conn: psycopg.Connection,
) -> None:
    text = plan(conn, "SELECT * FROM xa, generate_series(1, 3) g")
    assert "Nested Loop" in text and "Function Scan" in text, text
    # an ordinary join: here the subquery's one row drives a lookup of xa by key
    text = plan(conn, "SELECT * FROM xa, LATERAL (SELECT 1 AS z) x WHERE x.z = xa.id")
    assert "Nested Loop" not in text and "Join" in text, text


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT v, count(*) FROM xa GROUP BY ROLLUP (v)", "MixedAggregate"),
        ("SELECT v, id, count(*) FROM xa GROUP BY GROUPING SETS ((v), (id))", "HashAggregate"),
        ("SELECT count(*) FROM xa GROUP BY GROUPING SETS ((), ())", "Aggregate"),
        ("SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY v) FROM xa", "Aggregate"),
    ],
)
def test_grouping_sets_and_ordered_set_aggregates(
    conn: psycopg.Connection, sql: str, expected: str
) -> None:
    """Postgres's labels: the empty grouping set beside hashed ones makes a MixedAggregate."""
    lines = plan(conn, sql).splitlines()
    assert lines[0] == expected
    assert lines[1].strip().startswith("->  Seq Scan on xa")


@pytest.mark.parametrize(
    ("sql", "sorted_"),
    [
        ("SELECT * FROM xa ORDER BY id LIMIT 5", False),
        ("SELECT v FROM xa WHERE id > 3 ORDER BY id", False),
        ("SELECT * FROM xd WHERE w = 1 ORDER BY w, i", False),
        ("SELECT * FROM xd ORDER BY w", False),
        ("SELECT * FROM xa WHERE id IN (3, 1) ORDER BY id", False),
        ("SELECT * FROM xa ORDER BY id DESC LIMIT 5", False),
        ("SELECT v FROM xa WHERE id < 30 ORDER BY id DESC", False),
        ("SELECT * FROM xd ORDER BY w DESC, i DESC", False),
        ("SELECT * FROM xd WHERE w = 1 ORDER BY w DESC", False),
        ("SELECT * FROM xa WHERE id IN (3, 1) ORDER BY id DESC", False),
        ("SELECT * FROM xb WHERE w = 3 ORDER BY id DESC", False),
        ("SELECT * FROM xd ORDER BY w DESC, i", True),  # mixed directions
        ("SELECT * FROM xd ORDER BY w, i DESC", True),
        ("SELECT * FROM xa ORDER BY id DESC NULLS LAST", True),  # as ASC NULLS FIRST does
        ("SELECT * FROM xa ORDER BY id NULLS FIRST", True),
        ("SELECT * FROM xa ORDER BY id DESC NULLS FIRST", False),
        ("SELECT * FROM xb WHERE aid = 3 ORDER BY id DESC", False),  # a filtered scan
        ("SELECT * FROM xb WHERE w = 3 ORDER BY aid DESC", True),
        ("SELECT * FROM xd ORDER BY i", True),
        ("SELECT * FROM xa ORDER BY v", True),
        ("SELECT * FROM xb WHERE w = 3 ORDER BY id", False),  # (w, id) entries: id order
        ("SELECT * FROM xb WHERE w = 3 ORDER BY aid", True),
    ],
)
def test_a_sort_by_the_primary_key_is_the_scan_order(
    conn: psycopg.Connection, sql: str, sorted_: bool
) -> None:
    """Rows come from a scan or a point get in primary-key order (keys are memcomparable):
    ``ORDER BY id LIMIT n`` reads the first rows instead of sorting the table, and
    ``ORDER BY id DESC LIMIT n`` the last ones, reading backward."""
    assert ("Sort" in plan(conn, sql)) is sorted_


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT * FROM xa ORDER BY id DESC LIMIT 5", "Seq Scan Backward on xa"),
        (
            "SELECT v FROM xa WHERE id < 30 ORDER BY id DESC",
            "Range Scan Backward on xa (primary key id < ...)",
        ),
        (
            "SELECT * FROM xa WHERE id IN (3, 1) ORDER BY id DESC",
            "Point Get Backward on xa (primary key id IN ...)",
        ),
        (
            "SELECT * FROM xb WHERE w = 3 ORDER BY id DESC LIMIT 2",
            "Index Lookup Backward using xb_w on xb (w = ...)",
        ),
        ("SELECT * FROM xa ORDER BY id LIMIT 5", "Seq Scan on xa"),
        ("SELECT * FROM xa ORDER BY v DESC LIMIT 5", "Seq Scan on xa"),
    ],
)
def test_a_descending_sort_by_the_key_reads_backward(
    conn: psycopg.Connection, sql: str, expected: str
) -> None:
    """EXPLAIN marks an access that reads in descending key order, as Postgres's "Index Scan
    Backward" does; any other order reads forward."""
    assert any(line.lstrip(" ->") == expected for line in plan(conn, sql).splitlines()), plan(
        conn, sql
    )


def test_data_modifying_ctes_show_under_the_main_plan(conn: psycopg.Connection) -> None:
    """Each data-modifying CTE's plan under ``CTE name``, as Postgres shows them; nothing
    runs."""
    sql = "WITH d AS (DELETE FROM xa WHERE id = 1 RETURNING *) INSERT INTO xc SELECT id, v FROM d"
    assert plan(conn, sql).splitlines() == [
        "Insert on xc",
        "  ->  CTE Scan on d",
        "  CTE d",
        "    ->  Delete on xa",
        "          ->  Point Get on xa (primary key id = ...)",
        "                Filter: (id = 1)",
    ]


@pytest.fixture(scope="module")
def users(conn: psycopg.Connection) -> psycopg.Connection:
    conn.execute("CREATE TABLE xe (id int PRIMARY KEY, email text, name text, a int, b int)")
    conn.execute("CREATE UNIQUE INDEX xe_lower_email ON xe (lower(email))")
    conn.execute("CREATE INDEX xe_sum ON xe ((a + b))")
    conn.execute("CREATE INDEX xe_name_id ON xe (lower(name), id)")
    return conn


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        (
            "SELECT * FROM xe WHERE lower(email) = 'a@x'",
            "Index Lookup using xe_lower_email on xe (lower(email) = ...)",
        ),
        ("SELECT * FROM xe WHERE a + b = 3", "Index Lookup using xe_sum on xe ((a + b) = ...)"),
        (
            "SELECT * FROM xe WHERE lower(name) = 'n' AND id = 4",
            "Point Get on xe (primary key id = ...)",
        ),
        (
            "SELECT * FROM xe WHERE lower(name) = 'n' AND a = 1",
            "Index Lookup using xe_name_id on xe (lower(name) = ...)",
        ),
        ("UPDATE xe SET a = 1 WHERE lower(email) = 'a@x'", "Index Lookup using xe_lower_email"),
        ("DELETE FROM xe WHERE lower(email) = 'a@x'", "Index Lookup using xe_lower_email"),
        ("SELECT * FROM xe WHERE upper(email) = 'A@X'", "Seq Scan on xe"),
        ("SELECT * FROM xe WHERE b + a = 3", "Seq Scan on xe"),
        ("SELECT * FROM xe WHERE lower(email) = name", "Seq Scan on xe"),
    ],
)
def test_expression_indexes(users: psycopg.Connection, sql: str, expected: str) -> None:
    """A conjunct ``expr = value`` whose side is an index's key expression (the same one:
    ``b + a`` is not ``a + b``, as in Postgres) is an index lookup, as a column's would be."""
    assert any(expected in line for line in plan(users, sql).splitlines()), plan(users, sql)
