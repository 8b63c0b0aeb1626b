"""Isolation anomalies through two real client connections: snapshot isolation prevents dirty
writes, dirty reads, lost updates and read skew; it allows write skew, which SELECT ... FOR
UPDATE prevents. Also the other isolation levels and read-only transactions."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

import psycopg
import pytest
from psycopg import errors

from tests.conftest import PostgresServer, create_database
from tests.server.conftest import SqlServer


@pytest.fixture
def table(sql_server: SqlServer) -> Iterator[str]:
    with psycopg.connect(sql_server.conninfo(), autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS acct")
        conn.execute("CREATE TABLE acct (id int PRIMARY KEY, bal int NOT NULL, on_call bool)")
        conn.execute("INSERT INTO acct VALUES (1, 100, true), (2, 100, true)")
    yield "acct"


def connect(server: SqlServer) -> psycopg.Connection:
    # Non-autocommit: psycopg sends BEGIN before the first statement, as applications do.
    return psycopg.connect(server.conninfo())


def assert_waits(statement: Future[object], seconds: float = 0.5) -> None:
    """The statement running in the background is still waiting after ``seconds``."""
    with pytest.raises(FutureTimeout):
        statement.result(timeout=seconds)


def balances(server: SqlServer) -> list[tuple[int, int]]:
    with psycopg.connect(server.conninfo(), autocommit=True) as conn:
        return conn.execute("SELECT id, bal FROM acct ORDER BY id").fetchall()


def test_dirty_write_is_prevented(sql_server: SqlServer, table: str) -> None:
    with connect(sql_server) as t1, connect(sql_server) as t2, ThreadPoolExecutor(1) as pool:
        t1.execute("UPDATE acct SET bal = 1 WHERE id = 1")
        # As in Postgres: the second writer of the row waits for the first at its statement,
        # and fails once the first has committed a change of it (REPEATABLE READ).
        second = pool.submit(t2.execute, "UPDATE acct SET bal = 2 WHERE id = 1")
        assert_waits(second)
        t1.commit()
        with pytest.raises(errors.SerializationFailure, match="concurrent update"):
            second.result(timeout=10)
        t2.rollback()
    assert balances(sql_server)[0] == (1, 1)


def test_dirty_read_is_prevented(sql_server: SqlServer, table: str) -> None:
    with connect(sql_server) as t1, connect(sql_server) as t2:
        t1.execute("UPDATE acct SET bal = 999 WHERE id = 1")
        assert t2.execute("SELECT bal FROM acct WHERE id = 1").fetchone() == (100,)
        t1.rollback()
        t2.rollback()


def test_lost_update_is_prevented(sql_server: SqlServer, table: str) -> None:
    with connect(sql_server) as t1, connect(sql_server) as t2, ThreadPoolExecutor(1) as pool:
        (b1,) = t1.execute("SELECT bal FROM acct WHERE id = 1").fetchone()  # type: ignore[misc]
        (b2,) = t2.execute("SELECT bal FROM acct WHERE id = 1").fetchone()  # type: ignore[misc]
        t1.execute("UPDATE acct SET bal = %s WHERE id = 1", (b1 + 10,))
        second = pool.submit(t2.execute, "UPDATE acct SET bal = %s WHERE id = 1", (b2 + 20,))
        assert_waits(second)
        t1.commit()
        with pytest.raises(errors.SerializationFailure):
            second.result(timeout=10)
        t2.rollback()
    assert balances(sql_server)[0] == (1, 110)


def test_a_writer_whose_rival_rolls_back_goes_on(sql_server: SqlServer, table: str) -> None:
    with connect(sql_server) as t1, connect(sql_server) as t2, ThreadPoolExecutor(1) as pool:
        t1.execute("UPDATE acct SET bal = bal + 1 WHERE id = 2")
        second = pool.submit(t2.execute, "UPDATE acct SET bal = bal + 5 WHERE id = 2")
        assert_waits(second)
        t1.rollback()
        assert second.result(timeout=10).rowcount == 1
        t2.commit()
    assert balances(sql_server)[1] == (2, 105)


def test_concurrent_increments_under_read_committed_all_apply(
    sql_server: SqlServer, table: str
) -> None:
    """Postgres's READ COMMITTED: the waiting UPDATE runs on the row's newest version once the
    first transaction commits; neither fails and no increment is lost."""
    with connect(sql_server) as t1, connect(sql_server) as t2, ThreadPoolExecutor(1) as pool:
        for t in (t1, t2):
            t.execute("SET TRANSACTION ISOLATION LEVEL READ COMMITTED")
        t1.execute("UPDATE acct SET bal = bal + 1 WHERE id = 2")
        second = pool.submit(t2.execute, "UPDATE acct SET bal = bal + 10 WHERE id = 2")
        assert_waits(second)
        t1.commit()
        assert second.result(timeout=10).rowcount == 1
        assert t2.execute("SELECT bal FROM acct WHERE id = 2").fetchone() == (111,)
        t2.commit()
    assert balances(sql_server)[1] == (2, 111)


def test_nowait_and_skip_locked(sql_server: SqlServer, table: str) -> None:
    with connect(sql_server) as t1, connect(sql_server) as t2:
        assert t1.execute("SELECT id FROM acct WHERE id = 1 FOR UPDATE").fetchall() == [(1,)]
        with pytest.raises(
            errors.LockNotAvailable, match=r"could not obtain lock on row in relation \"acct\""
        ):
            t2.execute("SELECT id FROM acct WHERE id = 1 FOR UPDATE NOWAIT")
        t2.rollback()
        # A job queue: the second worker passes the row the first holds and takes the next.
        rows = t2.execute("SELECT id FROM acct ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED")
        assert rows.fetchall() == [(2,)]
        t1.commit()
        t2.commit()


def test_lock_timeout_bounds_the_wait(sql_server: SqlServer, table: str) -> None:
    with connect(sql_server) as t1, connect(sql_server) as t2:
        t1.execute("UPDATE acct SET bal = 5 WHERE id = 1")
        t2.execute("SET lock_timeout = '200ms'")
        started = time.monotonic()
        with pytest.raises(errors.LockNotAvailable, match="lock timeout"):
            t2.execute("DELETE FROM acct WHERE id = 1")
        assert time.monotonic() - started < 5
        t2.rollback()
        t1.commit()
    assert balances(sql_server)[0] == (1, 5)


def test_deadlock_is_detected(sql_server: SqlServer, table: str) -> None:
    with connect(sql_server) as t1, connect(sql_server) as t2, ThreadPoolExecutor(1) as pool:
        t1.execute("UPDATE acct SET bal = 1 WHERE id = 1")
        t2.execute("UPDATE acct SET bal = 2 WHERE id = 2")
        first = pool.submit(t1.execute, "UPDATE acct SET bal = 1 WHERE id = 2")
        assert_waits(first)
        # t2 now closes the cycle: one of the two fails with 40P01, the other goes on.
        try:
            t2.execute("UPDATE acct SET bal = 2 WHERE id = 1")
        except errors.DeadlockDetected:
            t2.rollback()
            first.result(timeout=10)
            t1.commit()
            assert balances(sql_server) == [(1, 1), (2, 1)]
        else:
            with pytest.raises(errors.DeadlockDetected):
                first.result(timeout=10)
            t1.rollback()
            t2.commit()
            assert balances(sql_server) == [(1, 2), (2, 2)]


def test_optimistic_locking_is_a_setting(sql_server: SqlServer, table: str) -> None:
    """``percolator.locking = optimistic``: no row locks; the second committer fails."""
    with connect(sql_server) as t1, connect(sql_server) as t2:
        for t in (t1, t2):
            t.execute("SET percolator.locking = optimistic")
        t1.execute("UPDATE acct SET bal = bal + 1 WHERE id = 2")
        t2.execute("UPDATE acct SET bal = bal + 1 WHERE id = 2")  # no wait
        t2.commit()
        with pytest.raises(errors.SerializationFailure):
            t1.commit()
        with pytest.raises(errors.InvalidParameterValue):
            t1.execute("SET percolator.locking = sometimes")
    assert balances(sql_server)[1] == (2, 101)


def test_read_skew_is_prevented(sql_server: SqlServer, table: str) -> None:
    with connect(sql_server) as t1, connect(sql_server) as t2:
        (x,) = t1.execute("SELECT bal FROM acct WHERE id = 1").fetchone()  # type: ignore[misc]
        t2.execute("UPDATE acct SET bal = bal - 50 WHERE id = 1")
        t2.execute("UPDATE acct SET bal = bal + 50 WHERE id = 2")
        t2.commit()
        (y,) = t1.execute("SELECT bal FROM acct WHERE id = 2").fetchone()  # type: ignore[misc]
        assert x + y == 200  # the snapshot never shows half of t2
        (total,) = t1.execute("SELECT sum(bal) FROM acct").fetchone()  # type: ignore[misc]
        assert total == 200
        t1.commit()
    assert balances(sql_server) == [(1, 50), (2, 150)]


def test_write_skew_is_allowed_under_snapshot_isolation(sql_server: SqlServer, table: str) -> None:
    with connect(sql_server) as t1, connect(sql_server) as t2:
        for t in (t1, t2):
            (n,) = t.execute("SELECT count(*) FROM acct WHERE on_call").fetchone()  # type: ignore[misc]
            assert n == 2  # each sees another doctor on call
        t1.execute("UPDATE acct SET on_call = false WHERE id = 1")
        t2.execute("UPDATE acct SET on_call = false WHERE id = 2")
        t1.commit()
        t2.commit()  # different rows: both commit, the invariant breaks (documented)
    with psycopg.connect(sql_server.conninfo(), autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM acct WHERE on_call").fetchone() == (0,)


def test_select_for_update_prevents_write_skew(sql_server: SqlServer, table: str) -> None:
    with connect(sql_server) as t1, connect(sql_server) as t2, ThreadPoolExecutor(1) as pool:
        rows = t1.execute("SELECT id FROM acct WHERE on_call FOR UPDATE").fetchall()
        assert len(rows) == 2
        second = pool.submit(t2.execute, "SELECT id FROM acct WHERE on_call FOR UPDATE")
        assert_waits(second)
        t1.execute("UPDATE acct SET on_call = false WHERE id = 1")
        t1.commit()
        with pytest.raises(errors.SerializationFailure):
            second.result(timeout=10)
        t2.rollback()
    with psycopg.connect(sql_server.conninfo(), autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM acct WHERE on_call").fetchone() == (1,)


def test_for_update_of_locks_only_the_named_table(sql_server: SqlServer, table: str) -> None:
    with psycopg.connect(sql_server.conninfo(), autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS owner")
        conn.execute("CREATE TABLE owner (acct int PRIMARY KEY, name text)")
        conn.execute("INSERT INTO owner VALUES (1, 'ann'), (2, 'bob')")
    query = "SELECT a.id FROM acct a JOIN owner o ON o.acct = a.id WHERE a.id = 1 FOR UPDATE OF a"
    with connect(sql_server) as t1, connect(sql_server) as t2:
        t1.execute(query)
        t1.execute("UPDATE acct SET bal = bal WHERE id = 2")  # so that t1 commits writes
        t2.execute("UPDATE owner SET name = 'anna' WHERE acct = 1")  # owner rows: not locked
        t2.commit()
        t1.commit()
    with connect(sql_server) as t1, connect(sql_server) as t3:
        t1.execute(query)
        t3.execute("SET lock_timeout = '100ms'")
        with pytest.raises(errors.LockNotAvailable):
            t3.execute("UPDATE acct SET bal = 0 WHERE id = 1")  # the locked acct row
        t3.rollback()
        with pytest.raises(errors.UndefinedTable):
            t3.execute("SELECT 1 FROM acct FOR UPDATE OF nosuch")
        t1.commit()


def test_read_committed_sees_new_commits_each_statement(sql_server: SqlServer, table: str) -> None:
    with connect(sql_server) as t1, connect(sql_server) as t2:
        t1.execute("SET TRANSACTION ISOLATION LEVEL READ COMMITTED")
        assert t1.execute("SELECT bal FROM acct WHERE id = 1").fetchone() == (100,)
        t2.execute("UPDATE acct SET bal = 7 WHERE id = 1")
        t2.commit()
        assert t1.execute("SELECT bal FROM acct WHERE id = 1").fetchone() == (7,)
        assert t1.execute("SHOW transaction_isolation").fetchone() == ("read committed",)
        t1.commit()


def test_read_committed_never_loses_an_earlier_statements_update(
    sql_server: SqlServer, table: str
) -> None:
    """t1's first statement holds row 1's lock, so t2's write of it waits until t1 ends; a
    writer that takes no row locks (optimistic here) makes t1 fail at commit instead of
    being overwritten."""
    with connect(sql_server) as t1, connect(sql_server) as t2:
        t1.execute("SET TRANSACTION ISOLATION LEVEL READ COMMITTED")
        t1.execute("UPDATE acct SET bal = bal + 1 WHERE id = 1")
        t2.execute("SET percolator.locking = optimistic")
        t2.execute("UPDATE acct SET bal = bal + 10 WHERE id = 1")
        t2.commit()
        # A new statement reads a new snapshot, but t1's buffered write of row 1 was made
        # against the old one: committing it would erase t2's +10.
        assert t1.execute("SELECT bal FROM acct WHERE id = 2").fetchone() == (100,)
        with pytest.raises(errors.SerializationFailure):
            t1.commit()
    assert balances(sql_server)[0] == (1, 110)


def test_repeatable_read_is_the_default_and_keeps_its_snapshot(
    sql_server: SqlServer, table: str
) -> None:
    with connect(sql_server) as t1, connect(sql_server) as t2:
        assert t1.execute("SHOW transaction_isolation").fetchone() == ("repeatable read",)
        assert t1.execute("SELECT bal FROM acct WHERE id = 1").fetchone() == (100,)
        t2.execute("UPDATE acct SET bal = 8 WHERE id = 1")
        t2.commit()
        assert t1.execute("SELECT bal FROM acct WHERE id = 1").fetchone() == (100,)
        t1.commit()


def test_read_only_transactions_refuse_writes(sql_server: SqlServer, table: str) -> None:
    with psycopg.connect(sql_server.conninfo(), autocommit=True) as conn:
        conn.execute("BEGIN READ ONLY")
        assert conn.execute("SELECT count(*) FROM acct").fetchone() == (2,)
        with pytest.raises(errors.ReadOnlySqlTransaction):
            conn.execute("UPDATE acct SET bal = 0")
        conn.execute("ROLLBACK")
    assert balances(sql_server) == [(1, 100), (2, 100)]


def test_client_vanishing_mid_transaction_leaves_nothing_behind(
    sql_server: SqlServer, table: str
) -> None:
    conn = connect(sql_server)
    conn.execute("UPDATE acct SET bal = 0 WHERE id = 1")
    # Drop the TCP connection without a Terminate, mid-transaction.
    sock = socket.socket(fileno=conn.pgconn.socket)
    sock.shutdown(socket.SHUT_RDWR)
    sock.detach()
    with psycopg.connect(sql_server.conninfo(), autocommit=True) as other:
        # No lock was left: an update of the same row goes through at once.
        other.execute("SET statement_timeout = '2s'")
        other.execute("UPDATE acct SET bal = bal + 1 WHERE id = 1")
    assert balances(sql_server)[0] == (1, 101)
    conn.close()


def test_isolation_from_startup_options(sql_server: SqlServer, table: str) -> None:
    """PGOPTIONS as pgbench and libpq send it: a backslash keeps the space in the value."""
    # Quoted for the conninfo string, where a backslash escapes too.
    options = r"'-c default_transaction_isolation=read\\ committed -c lock_timeout=1s'"
    with psycopg.connect(sql_server.conninfo(options=options), autocommit=True) as conn:
        assert conn.execute("SHOW default_transaction_isolation").fetchone() == ("read committed",)
        assert conn.execute("SHOW lock_timeout").fetchone() == ("1s",)


def test_optimistic_locking_as_the_servers_default(embedded_pg: PostgresServer) -> None:
    """``percolator serve --locking optimistic``: sessions start without row locks (and may
    turn them on); a wrong value is refused before the server starts."""
    import argparse
    import asyncio

    from percolator.server import config as server_config
    from tests.server.conftest import server_process

    store = asyncio.run(create_database(embedded_pg.dsn, "opt"))
    with (
        server_process(store, "--locking", "optimistic") as server,
        psycopg.connect(server.conninfo(), autocommit=True) as conn,
    ):
        assert conn.execute("SHOW percolator.locking").fetchone() == ("optimistic",)
        conn.execute("SET percolator.locking = pessimistic")
        assert conn.execute("SHOW percolator.locking").fetchone() == ("pessimistic",)
    parser = argparse.ArgumentParser()
    server_config.add_arguments(parser)
    with pytest.raises(ValueError, match="locking must be"):
        server_config.load(parser.parse_args([]), environ={"PERCOLATOR_LOCKING": "sometimes"})
