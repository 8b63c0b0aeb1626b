"""LISTEN / NOTIFY / pg_notify through real clients: psycopg's notifies(), asyncpg's
add_listener and psql; the same scenario on real Postgres must deliver the same."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Callable

import asyncpg
import psycopg
import pytest

from tests.server.conftest import SqlServer

Received = list[tuple[str, str, bool]]
"""(channel, payload, from the listening session itself)."""


def scenario(connect: Callable[[], psycopg.Connection]) -> Received:
    with connect() as listener, connect() as sender:
        listener.execute("LISTEN jobs")
        listener.execute('LISTEN "Mixed Case"')
        sender.execute("NOTIFY jobs, 'first'")
        sender.execute("BEGIN")
        sender.execute("NOTIFY jobs, 'twice'")
        sender.execute("NOTIFY jobs, 'twice'")  # one delivery: identical in one transaction
        sender.execute("SELECT pg_notify('Mixed Case', 'via function')")
        sender.execute("NOTIFY jobs, 'rolled back'")
        sender.execute("ROLLBACK")
        sender.execute("BEGIN")
        sender.execute("NOTIFY jobs, 'second'")
        sender.execute("SELECT pg_notify('Mixed Case', 'via function')")
        sender.execute("COMMIT")
        sender.execute("NOTIFY elsewhere, 'nobody listens'")
        listener.execute("NOTIFY jobs, 'to myself'")
        listener.execute("UNLISTEN jobs")
        sender.execute("NOTIFY jobs, 'after unlisten'")
        sender.execute('NOTIFY "Mixed Case"')
        out: Received = []
        # Five are due; a generous wait for them (a busy machine), then a short one for any
        # that should not come.
        for wait, count in ((15.0, 5), (0.5, None)):
            for n in listener.notifies(timeout=wait, stop_after=count):
                out.append((n.channel, n.payload, n.pid == listener.info.backend_pid))
        return out


def test_notifications_as_in_postgres(sql_server: SqlServer, reference_dsn: str) -> None:
    ours = scenario(lambda: psycopg.connect(sql_server.conninfo(), autocommit=True))
    ref = scenario(lambda: psycopg.connect(reference_dsn, autocommit=True))
    assert ours == ref
    assert len(ours) == 5


def test_listen_in_a_rolled_back_transaction_does_not_listen(sql_server: SqlServer) -> None:
    with (
        psycopg.connect(sql_server.conninfo(), autocommit=True) as listener,
        psycopg.connect(sql_server.conninfo(), autocommit=True) as sender,
    ):
        listener.execute("BEGIN")
        listener.execute("LISTEN later")
        listener.execute("ROLLBACK")
        sender.execute("NOTIFY later, 'x'")
        assert list(listener.notifies(timeout=0.5)) == []
        with pytest.raises(psycopg.errors.InvalidParameterValue):
            sender.execute("SELECT pg_notify('later', repeat('x', 8000))")


def test_asyncpg_listener(sql_server: SqlServer) -> None:
    async def check() -> list[tuple[str, str]]:
        listener = await asyncpg.connect(sql_server.url())
        sender = await asyncpg.connect(sql_server.url())
        got: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        try:
            await listener.add_listener("events", lambda _c, _p, ch, pl: got.put_nowait((ch, pl)))
            await sender.execute("NOTIFY events, 'hello'")
            await sender.execute("SELECT pg_notify('events', 'world')")
            return [await asyncio.wait_for(got.get(), 5) for _ in range(2)]
        finally:
            await listener.close()
            await sender.close()

    assert asyncio.run(check()) == [("events", "hello"), ("events", "world")]


def test_psql_shows_notifications(sql_server: SqlServer) -> None:
    result = subprocess.run(
        ["psql", sql_server.conninfo(), "-X", "-c", "LISTEN c1", "-c", "NOTIFY c1, 'hi'"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert 'Asynchronous notification "c1" with payload "hi" received' in result.stdout
