"""What must hold across the server processes of one deployment, checked with two servers over
one store: LISTEN/NOTIFY reaches a session of the other server, an advisory lock taken through
one server keeps out a session of the other, and a sequence hands out distinct values."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from tests.server.conftest import SqlServer, start_sql_server


@pytest.fixture(scope="module")
def other(sql_server: SqlServer) -> Iterator[SqlServer]:
    """A second server over the same store as ``sql_server``."""
    thread, server = start_sql_server(
        sql_server.store_dsn, coordinator=sql_server.running.coordinator_address
    )
    yield server
    thread.stop()


def test_notify_reaches_the_other_server(sql_server: SqlServer, other: SqlServer) -> None:
    with (
        psycopg.connect(sql_server.conninfo(), autocommit=True) as listener,
        psycopg.connect(other.conninfo(), autocommit=True) as sender,
    ):
        listener.execute("LISTEN across")
        sender.execute("NOTIFY across, 'from the other server'")
        got = [(n.channel, n.payload) for n in listener.notifies(timeout=15, stop_after=1)]
        assert got == [("across", "from the other server")]


def test_advisory_lock_holds_across_servers(sql_server: SqlServer, other: SqlServer) -> None:
    with (
        psycopg.connect(sql_server.conninfo(), autocommit=True) as a,
        psycopg.connect(other.conninfo(), autocommit=True) as b,
    ):
        a.execute("SELECT pg_advisory_lock(1234)")
        assert b.execute("SELECT pg_try_advisory_lock(1234)").fetchone() == (False,)
        a.execute("SELECT pg_advisory_unlock(1234)")
        assert b.execute("SELECT pg_try_advisory_lock(1234)").fetchone() == (True,)
        b.execute("SELECT pg_advisory_unlock(1234)")


def test_sequence_values_are_distinct_across_servers(
    sql_server: SqlServer, other: SqlServer
) -> None:
    with (
        psycopg.connect(sql_server.conninfo(), autocommit=True) as a,
        psycopg.connect(other.conninfo(), autocommit=True) as b,
    ):
        a.execute("CREATE SEQUENCE across_seq")
        values = []
        for _ in range(40):
            for conn in (a, b):
                values.append(conn.execute("SELECT nextval('across_seq')").fetchone()[0])
        assert len(set(values)) == len(values) == 80
