"""SERIALIZABLE through two real client connections, against the anomalies snapshot isolation
allows: write skew on rows both read, and on a predicate (a phantom) through a scan or an
index; and what it must not refuse: transactions that read and write apart, read-only ones,
and a scan stopped by LIMIT that did not reach the row another transaction changed. Each
case also runs on the Postgres underneath, whose outcome (which transaction fails, with which
SQLSTATE) must be the same."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import psycopg
import pytest
from psycopg import errors

from tests.server.conftest import SqlServer

Step = Callable[[psycopg.Connection], None]


SETUP = [
    "DROP TABLE IF EXISTS doctors",
    "CREATE TABLE doctors (id int PRIMARY KEY, on_call bool NOT NULL)",
    "INSERT INTO doctors VALUES (1, true), (2, true)",
    "DROP TABLE IF EXISTS shifts",
    "CREATE TABLE shifts (id int PRIMARY KEY, day int NOT NULL)",
    "CREATE INDEX shifts_day ON shifts (day)",
    "INSERT INTO shifts SELECT i, 1000 + i FROM generate_series(1, 3000) i",
]


@pytest.fixture
def dsns(sql_server: SqlServer, reference_dsn: str) -> Iterator[dict[str, str]]:
    out = {"ours": sql_server.conninfo(), "postgres": reference_dsn}
    for dsn in out.values():
        with psycopg.connect(dsn, autocommit=True) as conn:
            for sql in SETUP:
                conn.execute(sql)
    yield out


def interleave(dsn: str, first: Step, second: Step) -> dict[str, str]:
    """Both steps in SERIALIZABLE transactions, one after the other, then both commits in
    the same order: how each ended ("ok" or the SQLSTATE of its failure)."""
    outcome: dict[str, str] = {}
    with psycopg.connect(dsn) as a, psycopg.connect(dsn) as b:
        for conn in (a, b):
            conn.isolation_level = psycopg.IsolationLevel.SERIALIZABLE
        first(a)
        second(b)
        for name, conn in (("first", a), ("second", b)):
            try:
                conn.commit()
                outcome[name] = "ok"
            except psycopg.Error as exc:
                outcome[name] = exc.sqlstate or "?"
                conn.rollback()
    return outcome


def both(dsns: dict[str, str], first: Step, second: Step) -> dict[str, str]:
    """The outcome on our server, checked to be Postgres's."""
    ours = interleave(dsns["ours"], first, second)
    assert ours == interleave(dsns["postgres"], first, second)
    return ours


def go_off_call(doctor: int) -> Step:
    def step(conn: psycopg.Connection) -> None:
        (on_call,) = conn.execute("SELECT count(*) FROM doctors WHERE on_call").fetchone()  # type: ignore[misc]
        if on_call >= 2:
            conn.execute("UPDATE doctors SET on_call = false WHERE id = %s", (doctor,))

    return step


def test_write_skew_is_prevented(dsns: dict[str, str]) -> None:
    assert both(dsns, go_off_call(1), go_off_call(2)) == {"first": "ok", "second": "40001"}
    with psycopg.connect(dsns["ours"]) as conn:
        assert conn.execute("SELECT count(*) FROM doctors WHERE on_call").fetchone() == (1,)


def test_the_failure_is_postgres_serialization_failure(dsns: dict[str, str]) -> None:
    with psycopg.connect(dsns["ours"]) as a, psycopg.connect(dsns["ours"]) as b:
        for conn in (a, b):
            conn.isolation_level = psycopg.IsolationLevel.SERIALIZABLE
        go_off_call(1)(a)
        go_off_call(2)(b)
        a.commit()
        with pytest.raises(errors.SerializationFailure, match="read/write dependencies"):
            b.commit()


def book(shift: int, day: int) -> Step:
    """Book a shift on ``day`` unless one is booked: a check of a predicate (no row yet)."""

    def step(conn: psycopg.Connection) -> None:
        (n,) = conn.execute("SELECT count(*) FROM shifts WHERE day = %s", (day,)).fetchone()  # type: ignore[misc]
        if n == 0:
            conn.execute("INSERT INTO shifts VALUES (%s, %s)", (shift, day))

    return step


def test_a_phantom_through_an_index_is_prevented(dsns: dict[str, str]) -> None:
    assert both(dsns, book(9001, 7), book(9002, 7)) == {"first": "ok", "second": "40001"}


def count_and_insert(shift: int) -> Step:
    """A predicate no index serves (a scan of the whole table), then an insert."""

    def step(conn: psycopg.Connection) -> None:
        conn.execute("SELECT count(*) FROM shifts WHERE day % 7 = 3").fetchone()
        conn.execute("INSERT INTO shifts VALUES (%s, 3)", (shift,))

    return step


def test_a_phantom_through_a_scan_is_prevented(dsns: dict[str, str]) -> None:
    assert both(dsns, count_and_insert(9003), count_and_insert(9004)) == {
        "first": "ok",
        "second": "40001",
    }


def touch(doctor: int) -> Step:
    def step(conn: psycopg.Connection) -> None:
        conn.execute("SELECT on_call FROM doctors WHERE id = %s", (doctor,)).fetchone()
        conn.execute("UPDATE doctors SET on_call = true WHERE id = %s", (doctor,))

    return step


def test_transactions_apart_both_commit(dsns: dict[str, str]) -> None:
    assert both(dsns, touch(1), touch(2)) == {"first": "ok", "second": "ok"}


def test_a_reader_is_never_refused(dsns: dict[str, str]) -> None:
    def read(conn: psycopg.Connection) -> None:
        conn.execute("SELECT count(*) FROM doctors WHERE on_call").fetchone()

    assert both(dsns, touch(1), read) == {"first": "ok", "second": "ok"}
    assert both(dsns, read, go_off_call(1)) == {"first": "ok", "second": "ok"}


def test_a_scan_claims_only_what_it_read(dsns: dict[str, str]) -> None:
    """A LIMIT scan of the first shifts, and a write of the last one by another transaction:
    no dependency, so both commit (the read set holds the pages the scan fetched only)."""

    def first_shift(conn: psycopg.Connection) -> None:
        conn.execute("SELECT id FROM shifts ORDER BY id LIMIT 1").fetchone()
        conn.execute("UPDATE doctors SET on_call = true WHERE id = 1")

    def last_shift(conn: psycopg.Connection) -> None:
        conn.execute("UPDATE shifts SET day = 0 WHERE id = 3000")

    outcome = interleave(dsns["ours"], last_shift, first_shift)
    assert outcome == {"first": "ok", "second": "ok"}


def test_a_reverse_scan_claims_from_the_end_down_to_what_it_read(
    dsns: dict[str, str],
) -> None:
    """``ORDER BY id DESC LIMIT 1`` reads the last shift only: a write of the first one by
    another transaction is no dependency, a write of the last one is (its commit fails)."""

    def last_shift(conn: psycopg.Connection) -> None:
        conn.execute("SELECT id FROM shifts ORDER BY id DESC LIMIT 1").fetchone()
        conn.execute("UPDATE doctors SET on_call = true WHERE id = 1")

    def change(shift: int) -> Step:
        def step(conn: psycopg.Connection) -> None:
            conn.execute("UPDATE shifts SET day = 0 WHERE id = %s", (shift,))

        return step

    outcome = interleave(dsns["ours"], change(1), last_shift)
    assert outcome == {"first": "ok", "second": "ok"}
    outcome = interleave(dsns["ours"], change(3000), last_shift)
    assert outcome == {"first": "ok", "second": "40001"}


def test_serializable_as_the_default(sql_server: SqlServer, dsns: dict[str, str]) -> None:
    with psycopg.connect(sql_server.conninfo(), autocommit=True) as conn:
        conn.execute("SET default_transaction_isolation = 'serializable'")
        assert conn.execute("SHOW transaction_isolation").fetchone() == ("serializable",)
        conn.execute("UPDATE doctors SET on_call = false WHERE id = 2")
        conn.execute("BEGIN")
        assert conn.execute("SHOW transaction_isolation").fetchone() == ("serializable",)
        assert conn.execute("SELECT on_call FROM doctors WHERE id = 2").fetchone() == (False,)
        conn.execute("COMMIT")
