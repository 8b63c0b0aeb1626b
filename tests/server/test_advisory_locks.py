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


@pytest.mark.parametrize(
    "scenario", [exclusive_and_try, shared_locks, transaction_locks, closing_releases, waiting]
)
def test_advisory_locks_behave_as_in_postgres(
    sql_server: SqlServer, reference_dsn: str, scenario: Scenario
) -> None:
    ours = scenario(lambda: psycopg.connect(sql_server.conninfo(), autocommit=True))
    ref = scenario(lambda: psycopg.connect(reference_dsn, autocommit=True))
    assert ours == ref


def test_advisory_lock_outside_a_select_list_is_refused(sql_server: SqlServer) -> None:
    with psycopg.connect(sql_server.conninfo(), autocommit=True) as conn:
        with pytest.raises(psycopg.errors.FeatureNotSupported):
            conn.execute("SELECT 1 WHERE pg_try_advisory_lock(1)")
