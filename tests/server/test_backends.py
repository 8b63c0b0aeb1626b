"""pg_stat_activity, pg_cancel_backend and pg_terminate_backend through a real client, as an
administrator finds and ends the session that holds locks others wait for."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

import psycopg
import pytest
from psycopg import errors

from tests.server.conftest import SqlServer


@pytest.fixture
def accounts(sql_server: SqlServer) -> Iterator[str]:
    with psycopg.connect(sql_server.conninfo(), autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS accounts")
        conn.execute("CREATE TABLE accounts (id int PRIMARY KEY, balance int)")
        conn.execute("INSERT INTO accounts VALUES (1, 100), (2, 100)")
    yield "accounts"


def activity(admin: psycopg.Connection, pid: int) -> tuple[object, ...]:
    row = admin.execute(
        "SELECT state, wait_event_type, query, xact_start IS NOT NULL FROM pg_stat_activity "
        "WHERE pid = %s",
        (pid,),
    ).fetchone()
    assert row is not None, f"no session {pid} in pg_stat_activity"
    return tuple(row)


def test_the_blocked_and_the_blocker_show_and_the_blocker_can_go(
    sql_server: SqlServer, accounts: str
) -> None:
    with (
        psycopg.connect(sql_server.conninfo()) as holder,
        psycopg.connect(sql_server.conninfo()) as waiter,
        psycopg.connect(sql_server.conninfo(), autocommit=True) as admin,
        ThreadPoolExecutor(1) as pool,
    ):
        holder.execute("UPDATE accounts SET balance = 0 WHERE id = 1")
        update = "UPDATE accounts SET balance = balance + 1 WHERE id = 1"
        blocked = pool.submit(waiter.execute, update)
        with pytest.raises(FutureTimeout):
            blocked.result(timeout=0.5)
        holder_pid, waiter_pid = holder.info.backend_pid, waiter.info.backend_pid
        assert activity(admin, holder_pid) == (
            "idle in transaction",
            None,
            "UPDATE accounts SET balance = 0 WHERE id = 1",
            True,
        )
        assert activity(admin, waiter_pid) == ("active", "Lock", update, True)
        mine = admin.info.backend_pid
        assert activity(admin, mine)[0] == "active"

        # The administrator ends the holder: its transaction rolls back, the waiter goes on.
        assert admin.execute("SELECT pg_terminate_backend(%s)", (holder_pid,)).fetchone() == (True,)
        assert blocked.result(timeout=10).rowcount == 1
        waiter.commit()
        with pytest.raises(psycopg.OperationalError):
            holder.execute("SELECT 1")
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            pids = [r[0] for r in admin.execute("SELECT pid FROM pg_stat_activity").fetchall()]
            if holder_pid not in pids:
                break
            time.sleep(0.05)
        assert holder_pid not in pids
        assert admin.execute("SELECT balance FROM accounts WHERE id = 1").fetchone() == (101,)
        assert admin.execute("SELECT pg_terminate_backend(999999)").fetchone() == (False,)


def test_cancel_ends_a_wait(sql_server: SqlServer, accounts: str) -> None:
    with (
        psycopg.connect(sql_server.conninfo()) as holder,
        psycopg.connect(sql_server.conninfo()) as waiter,
        psycopg.connect(sql_server.conninfo(), autocommit=True) as admin,
        ThreadPoolExecutor(1) as pool,
    ):
        holder.execute("SELECT * FROM accounts WHERE id = 2 FOR UPDATE")
        blocked = pool.submit(waiter.execute, "DELETE FROM accounts WHERE id = 2")
        with pytest.raises(FutureTimeout):
            blocked.result(timeout=0.5)
        pid = waiter.info.backend_pid
        assert admin.execute("SELECT pg_cancel_backend(%s)", (pid,)).fetchone() == (True,)
        with pytest.raises(errors.QueryCanceled):
            blocked.result(timeout=10)
        assert activity(admin, pid)[0] == "idle in transaction (aborted)"
        waiter.rollback()
        assert activity(admin, pid)[:2] == ("idle", None)
        holder.commit()


def test_another_users_backend_is_out_of_reach(sql_server: SqlServer, accounts: str) -> None:
    with psycopg.connect(sql_server.conninfo(), autocommit=True) as admin:
        admin.execute("DROP USER IF EXISTS clerk")
        admin.execute("CREATE USER clerk PASSWORD 'pw'")
        options = {"user": "clerk", "password": "pw"}
        with psycopg.connect(sql_server.conninfo(**options), autocommit=True) as clerk:
            with pytest.raises(errors.InsufficientPrivilege):
                clerk.execute("SELECT pg_cancel_backend(%s)", (admin.info.backend_pid,))
            # Another role's statement is not shown to it (it may hold a password).
            seen = clerk.execute(
                "SELECT query, state FROM pg_stat_activity WHERE pid = %s",
                (admin.info.backend_pid,),
            ).fetchone()
            assert seen == ("<insufficient privilege>", None)
            with pytest.raises(errors.QueryCanceled):  # its own statement, as in Postgres
                clerk.execute("SELECT pg_cancel_backend(pg_backend_pid())")
            # The superuser reaches everyone.
            pid = clerk.info.backend_pid
            assert admin.execute("SELECT pg_cancel_backend(%s)", (pid,)).fetchone() == (True,)
            assert clerk.execute("SELECT 1").fetchone() == (1,)


def wait_until_waiting(admin: psycopg.Connection, pid: int) -> str:
    """The wait_event of session ``pid`` once it waits for a lock."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        row = admin.execute(
            "SELECT wait_event FROM pg_stat_activity WHERE pid = %s AND wait_event_type = 'Lock'",
            (pid,),
        ).fetchone()
        if row is not None:
            return str(row[0])
        time.sleep(0.02)
    raise AssertionError(f"session {pid} never waited")


def test_pg_blocking_pids_names_the_holders(sql_server: SqlServer, accounts: str) -> None:
    """Row locks (two FOR SHARE holders block a writer) and advisory locks: the waiter's
    blockers are the holders, and nobody else; a session that waits for nothing has none."""
    with (
        psycopg.connect(sql_server.conninfo()) as sharer1,
        psycopg.connect(sql_server.conninfo()) as sharer2,
        psycopg.connect(sql_server.conninfo()) as writer,
        psycopg.connect(sql_server.conninfo(), autocommit=True) as bystander,
        psycopg.connect(sql_server.conninfo(), autocommit=True) as admin,
        ThreadPoolExecutor(1) as pool,
    ):
        for s in (sharer1, sharer2):
            s.execute("SELECT * FROM accounts WHERE id = 1 FOR SHARE")
        bystander.execute("SELECT * FROM accounts WHERE id = 2 FOR UPDATE")
        update = pool.submit(writer.execute, "UPDATE accounts SET balance = 0 WHERE id = 1")
        assert wait_until_waiting(admin, writer.info.backend_pid) == "tuple"
        blockers = admin.execute(
            "SELECT pg_blocking_pids(%s)", (writer.info.backend_pid,)
        ).fetchone()
        assert blockers == (sorted([sharer1.info.backend_pid, sharer2.info.backend_pid]),)
        assert admin.execute(
            "SELECT pg_blocking_pids(%s)", (sharer1.info.backend_pid,)
        ).fetchone() == ([],)
        sharer1.commit()
        assert admin.execute(
            "SELECT pg_blocking_pids(%s)", (writer.info.backend_pid,)
        ).fetchone() == ([sharer2.info.backend_pid],)
        sharer2.commit()
        update.result(timeout=10)
        writer.commit()

        # Advisory locks: the tester's helper says whether a session waits for given others.
        sharer1.execute("SELECT pg_advisory_lock(7)")
        sharer1.commit()  # a session-level lock outlives its transaction
        lock = pool.submit(writer.execute, "SELECT pg_advisory_lock(7)")
        assert wait_until_waiting(admin, writer.info.backend_pid) == "advisory"
        is_blocked = "SELECT pg_isolation_test_session_is_blocked(%s, %s)"
        pid = writer.info.backend_pid
        assert admin.execute(is_blocked, (pid, [sharer1.info.backend_pid])).fetchone() == (True,)
        assert admin.execute(is_blocked, (pid, [sharer2.info.backend_pid])).fetchone() == (False,)
        sharer1.execute("SELECT pg_advisory_unlock(7)")
        lock.result(timeout=10)
        writer.execute("SELECT pg_advisory_unlock(7)")
        writer.commit()
