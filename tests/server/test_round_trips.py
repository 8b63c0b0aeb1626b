"""Postgres round trips per SQL operation, counted by the store (the figures docs/sql.md
gives). Secondary commits run after the commit point and are counted separately."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import psycopg
import pytest

from percolator.server.planner import physical
from tests.conftest import PostgresServer, create_database
from tests.server.conftest import SqlServer, start_sql_server


@pytest.fixture(scope="module")
def sql_server(embedded_pg: PostgresServer) -> Iterator[SqlServer]:
    """A server that does not poll the catalog version (a poll is a read of its own)."""
    store = asyncio.run(create_database(embedded_pg.dsn, "rt"))
    thread, server = start_sql_server(store, catalog_poll=0.0, observer_workers=0)
    yield server
    thread.stop()


@pytest.fixture(scope="module")
def conn(sql_server: SqlServer) -> Iterator[psycopg.Connection]:
    with psycopg.connect(sql_server.conninfo(), autocommit=True) as c:
        c.execute("CREATE TABLE rt (id int PRIMARY KEY, a int, b text)")
        c.execute("CREATE TABLE rt_u (id int PRIMARY KEY, email text UNIQUE)")
        c.execute("INSERT INTO rt SELECT g, g, 'x' FROM generate_series(1, 50) g")
        c.execute("CREATE TABLE rt_l (id int PRIMARY KEY, ref int, tag text UNIQUE)")
        c.execute("CREATE INDEX rt_l_ref ON rt_l (ref)")
        c.execute("INSERT INTO rt_l SELECT g, g % 5, 't' || g FROM generate_series(1, 60) g")
        yield c


def settled(stats: object, quiet_s: float = 0.2, limit_s: float = 5.0) -> dict[str, int]:
    """The counters once they have not moved for ``quiet_s`` (background work has ended)."""
    deadline = time.monotonic() + limit_s
    last = stats.snapshot()  # type: ignore[attr-defined]
    while time.monotonic() < deadline:
        time.sleep(quiet_s)
        now = stats.snapshot()  # type: ignore[attr-defined]
        if now == last:
            return now
        last = now
    return last


def counted(
    server: SqlServer, conn: psycopg.Connection, sql: str, params: tuple[object, ...] = ()
) -> dict[str, int]:
    """Round trips by operation for one autocommit statement, secondaries included."""
    stats = server.running.engine.client.store.stats
    before = settled(stats)
    conn.execute(sql, params or None)
    after = settled(stats)  # secondary commits finish asynchronously after the commit point
    return {
        k: after.get(k, 0) - before.get(k, 0) for k in after if after.get(k, 0) != before.get(k, 0)
    }


def test_point_select_is_one_read(sql_server: SqlServer, conn: psycopg.Connection) -> None:
    assert counted(sql_server, conn, "SELECT a FROM rt WHERE id = 7") == {"read": 1}


def test_in_list_select_is_one_batched_read(
    sql_server: SqlServer, conn: psycopg.Connection
) -> None:
    assert counted(sql_server, conn, "SELECT a FROM rt WHERE id IN (1, 2, 3, 4)") == {"read": 1}


def test_small_table_scan_is_one_page(sql_server: SqlServer, conn: psycopg.Connection) -> None:
    # and the catalog's version cell, read in parallel with the page
    trips = counted(sql_server, conn, "SELECT count(*) FROM rt WHERE b = 'x'")
    assert trips == {"scan": 1, "read": 1}


def test_insert_reads_its_key_then_commits(sql_server: SqlServer, conn: psycopg.Connection) -> None:
    trips = counted(sql_server, conn, "INSERT INTO rt VALUES (100, 1, 'y'), (101, 2, 'z')")
    # existence check of both keys, one prewrite, the commit of the primary (the commit point)
    # with its secondaries: one shard, so one statement
    assert trips == {"read": 1, "prewrite": 1, "commit": 1}


def test_insert_with_unique_index_checks_it_in_one_more_read(
    sql_server: SqlServer, conn: psycopg.Connection
) -> None:
    trips = counted(sql_server, conn, "INSERT INTO rt_u VALUES (1, 'a@example.com')")
    assert trips == {"read": 2, "prewrite": 1, "commit": 1}  # the key, then the index entry


def test_select_by_an_index_expression_is_an_index_lookup(
    sql_server: SqlServer, conn: psycopg.Connection
) -> None:
    """``WHERE lower(email) = $1`` over an index on ``lower(email)``: a scan of its entries
    and a read of the row (and the catalog's version cell, read in parallel), not a scan of
    the table."""
    conn.execute("CREATE TABLE rt_x (id int PRIMARY KEY, email text)")
    conn.execute("CREATE UNIQUE INDEX rt_x_lower_email ON rt_x (lower(email))")
    conn.execute(
        "INSERT INTO rt_x SELECT g, 'User' || g || '@X.org' FROM generate_series(1, 3000) g"
    )
    sql = "SELECT id FROM rt_x WHERE lower(email) = %s"
    assert conn.execute(sql, ("user7@x.org",)).fetchall() == [(7,)]
    assert counted(sql_server, conn, sql, ("user7@x.org",)) == {"scan": 1, "read": 2}


def test_update_by_key(sql_server: SqlServer, conn: psycopg.Connection) -> None:
    trips = counted(sql_server, conn, "UPDATE rt SET a = a + 1 WHERE id IN (3, 4)")
    assert trips == {"read": 1, "prewrite": 1, "commit": 1}


def test_data_modifying_cte_costs_what_its_statements_cost(
    sql_server: SqlServer, conn: psycopg.Connection
) -> None:
    """A data-modifying CTE runs as its statement alone would; the parts' writes go out
    together in one prewrite and one commit. Hiding the statement's own writes from the main
    query's reads costs no round trip."""
    sql = "WITH u AS (UPDATE rt SET a = a + 1 WHERE id IN (5, 6) RETURNING id, a) SELECT * FROM u"
    assert counted(sql_server, conn, sql) == {"read": 1, "prewrite": 1, "commit": 1}
    conn.execute("CREATE TABLE rt_moved (id int PRIMARY KEY, a int, b text)")
    sql = "WITH d AS (DELETE FROM rt WHERE id = 7 RETURNING *) INSERT INTO rt_moved SELECT * FROM d"
    trips = counted(sql_server, conn, sql)
    # the DELETE's read of its row, the INSERT's check of its key
    assert trips == {"read": 2, "prewrite": 1, "commit": 1}


def test_serializable_update_checks_what_it_read_once_per_table(
    sql_server: SqlServer, conn: psycopg.Connection
) -> None:
    """A SERIALIZABLE writer's commit asks, per store table it read, whether anything there
    changed: one statement here (the catalog's version cell, read along, is the catalog
    guard's business, not a read of the transaction's)."""
    conn.execute("SET default_transaction_isolation = 'serializable'")
    try:
        trips = counted(sql_server, conn, "UPDATE rt SET a = a + 1 WHERE id IN (3, 4)")
    finally:
        conn.execute("RESET default_transaction_isolation")
    assert trips == {"read": 1, "prewrite": 1, "first_change": 1, "commit": 1}


def test_read_only_transaction_commits_without_a_round_trip(
    sql_server: SqlServer, conn: psycopg.Connection
) -> None:
    conn.execute("BEGIN")
    stats = sql_server.running.engine.client.store.stats
    conn.execute("SELECT a FROM rt WHERE id = 1")
    before = stats.snapshot()
    conn.execute("COMMIT")
    assert stats.snapshot() == before


def test_lookup_join_by_primary_key_is_one_read_per_batch(
    sql_server: SqlServer, conn: psycopg.Connection
) -> None:
    # the outer rows' point get, then one batched read of their matches
    sql = "SELECT rt.a, l.tag FROM rt JOIN rt_l l ON l.id = rt.a WHERE rt.id IN (1, 2, 3)"
    assert counted(sql_server, conn, sql) == {"read": 2}


def test_lookup_join_by_unique_index_reads_entries_then_rows(
    sql_server: SqlServer, conn: psycopg.Connection
) -> None:
    sql = "SELECT rt.a, l.id FROM rt JOIN rt_l l ON l.tag = 't' || rt.a WHERE rt.id IN (1, 2)"
    assert counted(sql_server, conn, sql) == {"read": 3}


def test_lookup_join_by_secondary_index_scans_each_key(
    sql_server: SqlServer, conn: psycopg.Connection
) -> None:
    # one index scan per distinct key of the batch (run concurrently), one read of the rows
    sql = "SELECT rt.a, l.id FROM rt JOIN rt_l l ON l.ref = rt.a WHERE rt.id IN (1, 2, 3)"
    assert counted(sql_server, conn, sql) == {"read": 2, "scan": 3}


def test_lookup_join_reads_once_per_batch_of_outer_rows(
    sql_server: SqlServer, conn: psycopg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(physical, "LOOKUP_BATCH", 20)
    # 50 outer rows from one page of a range scan (with the catalog's version read beside
    # it), looked up in 3 batches of at most 20
    sql = "SELECT rt.a, l.tag FROM rt LEFT JOIN rt_l l ON l.id = rt.a + 5 WHERE rt.id >= 1"
    assert counted(sql_server, conn, sql) == {"scan": 1, "read": 4}


@pytest.fixture(scope="module")
def big(conn: psycopg.Connection) -> str:
    """5,000 rows: a whole scan of them is about 15 pages of 1,000 cells."""
    conn.execute("CREATE TABLE rt_big (id int PRIMARY KEY, cust int, v text)")
    conn.execute("CREATE INDEX rt_big_cust ON rt_big (cust)")
    conn.execute("INSERT INTO rt_big SELECT g, g % 10, 'v' || g FROM generate_series(1, 5000) g")
    return "rt_big"


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        ("", {"scan": 1, "read": 1}),  # the page, and the catalog's version beside it
        ("WHERE id < 2500", {"scan": 1, "read": 1}),
        ("WHERE id > 10", {"scan": 1, "read": 1}),
        ("WHERE cust = 3", {"scan": 1, "read": 2}),  # a page of entries, a read of the rows
    ],
)
def test_order_by_key_desc_limit_reads_one_page_from_the_end(
    sql_server: SqlServer, conn: psycopg.Connection, big: str, where: str, expected: dict
) -> None:
    """``ORDER BY id DESC LIMIT 10`` reads backward from the end of the table (or range, or
    index entries) and stops after a page, as ``ORDER BY id LIMIT 10`` does from the start;
    a top-N sort read all 5,000 rows (15 pages)."""
    desc = counted(sql_server, conn, f"SELECT * FROM {big} {where} ORDER BY id DESC LIMIT 10")
    assert desc == expected
    assert counted(sql_server, conn, f"SELECT * FROM {big} {where} ORDER BY id LIMIT 10") == desc
    sorted_ = counted(sql_server, conn, f"SELECT * FROM {big} {where} ORDER BY v DESC LIMIT 10")
    assert sorted_["scan"] > 1 or where == "WHERE cust = 3"
