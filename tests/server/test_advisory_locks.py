"""Advisory locks (pg_advisory_lock and friends) between real client connections; every
scenario runs on our server and on real Postgres, and the outcomes must agree."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import psycopg
import pytest

from tests.server.conftest import SqlServer

Scenario = Callable[[Callable[[], psycopg.Connection]], list[object]]


def _one(conn: psycopg.Connection, sql: str) -> object:
    return conn.execute(sql).fetchone()[0]  # type: ignore[index]


def exclusive_and_try(connect: Callable[[], psycopg.Connection]) -> list[object]:
    with connect() as a, connect() as b:
        out = [_one(a, "SELECT pg_advisory_lock(42)")]
        out.append(_one(b, "SELECT pg_try_advisory_lock(42)"))
        out.append(_one(b, "SELECT pg_try_advisory_lock(42, 0)"))  # the two-int space
        out.append(_one(a, "SELECT pg_advisory_lock(42)"))  # re-entrant
        out.append(_one(a, "SELECT pg_advisory_unlock(42)"))
        out.append(_one(b, "SELECT pg_try_advisory_lock(42)"))
        out.append(_one(a, "SELECT pg_advisory_unlock(42)"))
        out.append(_one(b, "SELECT pg_try_advisory_lock(42)"))
        out.append(_one(a, "SELECT pg_advisory_unlock(42)"))  # not held any more
        out.append(_one(b, "SELECT pg_advisory_unlock_all()"))
        out.append(_one(a, "SELECT pg_try_advisory_lock(42)"))
        out.append(_one(a, "SELECT pg_advisory_unlock(42)"))
    return out


def shared_locks(connect: Callable[[], psycopg.Connection]) -> list[object]:
    with connect() as a, connect() as b, connect() as c:
        return [
            _one(a, "SELECT pg_advisory_lock_shared(7)"),
            _one(b, "SELECT pg_try_advisory_lock_shared(7)"),
            _one(c, "SELECT pg_try_advisory_lock(7)"),
            _one(a, "SELECT pg_advisory_unlock_shared(7)"),
            _one(b, "SELECT pg_advisory_unlock_shared(7)"),
            _one(c, "SELECT pg_try_advisory_lock(7)"),
            _one(a, "SELECT pg_try_advisory_lock_shared(7)"),
        ]


def transaction_locks(connect: Callable[[], psycopg.Connection]) -> list[object]:
    with connect() as a, connect() as b:
        a.autocommit = False
        out = [_one(a, "SELECT pg_advisory_xact_lock(9)")]
        out.append(_one(b, "SELECT pg_try_advisory_lock(9)"))
        a.commit()
        out.append(_one(b, "SELECT pg_try_advisory_lock(9)"))
        out.append(_one(b, "SELECT pg_advisory_unlock(9)"))
    return out


def closing_releases(connect: Callable[[], psycopg.Connection]) -> list[object]:
    with connect() as b:
        with connect() as a:
            out = [_one(a, "SELECT pg_advisory_lock(11)")]
            out.append(_one(b, "SELECT pg_try_advisory_lock(11)"))
        deadline = time.monotonic() + 10
        taken = False
        while not taken and time.monotonic() < deadline:
            taken = bool(_one(b, "SELECT pg_try_advisory_lock(11)"))
            time.sleep(0.05)
        out.append(taken)
    return out


def waiting(connect: Callable[[], psycopg.Connection]) -> list[object]:
    with connect() as a, connect() as b:
        _one(a, "SELECT pg_advisory_lock(5)")
        got: list[float] = []

        def wait() -> None:
            _one(b, "SELECT pg_advisory_lock(5)")
            got.append(time.monotonic())

        waiter = threading.Thread(target=wait)
        waiter.start()
        time.sleep(0.5)
        still_waiting = not got
        released_at = time.monotonic()
        _one(a, "SELECT pg_advisory_unlock(5)")
        waiter.join(10)
        return [still_waiting, bool(got) and got[0] >= released_at]


def in_where(connect: Callable[[], psycopg.Connection]) -> list[object]:
    """A lock function in a query's WHERE runs for each row the scan finds."""
    with connect() as a, connect() as b:
        rows = a.execute(
            "SELECT g FROM generate_series(1, 3) g WHERE pg_try_advisory_lock(g) ORDER BY g"
        ).fetchall()
        out: list[object] = [[r[0] for r in rows]]
        out += [_one(b, f"SELECT pg_try_advisory_lock({g})") for g in (1, 2, 3, 4)]
        out.append(_one(a, "SELECT pg_advisory_unlock_all()"))
    return out


def sleeping(connect: Callable[[], psycopg.Connection]) -> list[object]:
    """pg_sleep and its two friends return void after the wait; statement_timeout ends it."""
    with connect() as a:
        started = time.monotonic()
        out: list[object] = [
            _one(a, "SELECT pg_sleep(0.2)"),
            _one(a, "SELECT pg_sleep_for('100 milliseconds')"),
            _one(a, "SELECT pg_sleep_until(now() + interval '100 milliseconds')"),
            _one(a, "SELECT pg_sleep(-1)"),
            _one(a, "SELECT pg_sleep(NULL)"),
        ]
        out.append(time.monotonic() - started >= 0.35)
        a.execute("SET statement_timeout = 200")
        started = time.monotonic()
        try:
            a.execute("SELECT pg_sleep(30)")
        except psycopg.errors.QueryCanceled as exc:
            out.append(exc.sqlstate)
        out.append(time.monotonic() - started < 5)
        out.append(_one(a, "SELECT 1"))  # the connection is still good
    return out


@pytest.mark.parametrize(
    "scenario",
    [
        exclusive_and_try,
        shared_locks,
        transaction_locks,
        closing_releases,
        waiting,
        in_where,
        sleeping,
    ],
)
def test_advisory_locks_behave_as_in_postgres(
    sql_server: SqlServer, reference_dsn: str, scenario: Scenario
) -> None:
    ours = scenario(lambda: psycopg.connect(sql_server.conninfo(), autocommit=True))
    ref = scenario(lambda: psycopg.connect(reference_dsn, autocommit=True))
    assert ours == ref


def test_advisory_lock_in_an_update_condition_is_refused(sql_server: SqlServer) -> None:
    with psycopg.connect(sql_server.conninfo(), autocommit=True) as conn:
        conn.execute("CREATE TABLE adv_upd (id int PRIMARY KEY)")
        with pytest.raises(psycopg.errors.FeatureNotSupported, match="pg_try_advisory_lock"):
            conn.execute("UPDATE adv_upd SET id = 2 WHERE pg_try_advisory_lock(1)")
        assert _one(conn, "SELECT 1") == 1
