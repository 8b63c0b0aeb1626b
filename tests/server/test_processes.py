"""``percolator serve --processes 2``: an acceptor process and two SQL worker processes behind
one port. Connections spread over the workers; what one worker's session commits, DDL
included, the other's sees at once; write conflicts and row locks hold across them; a
CancelRequest reaches a session whatever worker it lands on; max_connections counts all of
them; a worker that dies is started again."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import asyncpg
import psutil
import psycopg
import pytest
from psycopg import errors

from percolator.server.runtime import ServerProcess
from tests.conftest import PostgresServer, create_database
from tests.server.conftest import SqlServer

MAX_CONNECTIONS = 5


@pytest.fixture(scope="module")
def pool(embedded_pg: PostgresServer) -> Iterator[tuple[SqlServer, ServerProcess]]:
    store = asyncio.run(create_database(embedded_pg.dsn, "procs"))
    # No poll of the store for others' DDL: what a worker knows of another's comes through the
    # pool's shared catalog version (or a statement's own reload).
    proc = ServerProcess(
        store,
        "--processes",
        "2",
        "--max-connections",
        str(MAX_CONNECTIONS),
        "--catalog-poll",
        "3600",
    )
    port = proc.start()
    try:
        yield SqlServer("127.0.0.1", port, "postgres", None, store, None), proc  # type: ignore[arg-type]
    finally:
        proc.stop(60)


@pytest.fixture
def server(pool: tuple[SqlServer, ServerProcess]) -> SqlServer:
    return pool[0]


def _connect(server: SqlServer, **kwargs: object) -> psycopg.Connection:
    """A connection, retrying while the connections of an earlier test are still being
    counted down (a worker reports each end to the acceptor)."""
    deadline = time.monotonic() + 10
    while True:
        try:
            return psycopg.connect(server.conninfo(), autocommit=True, **kwargs)  # type: ignore[arg-type]
        except psycopg.OperationalError as exc:
            if "too many clients" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


@contextlib.contextmanager
def _one_per_worker(server: SqlServer) -> Iterator[tuple[psycopg.Connection, psycopg.Connection]]:
    """Two connections open at once, on different workers (the worker's index is the backend
    pid modulo the worker count). The acceptor gives a connection to the worker with the
    fewest; right after earlier connections closed, their ends may not be counted yet."""
    deadline = time.monotonic() + 10
    while True:
        conns = [_connect(server) for _ in range(2)]
        by_worker = {c.info.backend_pid % 2: c for c in conns}
        if len(by_worker) == 2 or time.monotonic() > deadline:
            break
        for c in conns:
            c.close()
        time.sleep(0.1)
    try:
        assert sorted(by_worker) == [0, 1]
        yield by_worker[0], by_worker[1]
    finally:
        for c in conns:
            c.close()


def test_connections_spread_over_the_workers(server: SqlServer) -> None:
    conns = [_connect(server) for _ in range(4)]
    try:
        pids = [c.execute("SELECT pg_backend_pid()").fetchone()[0] for c in conns]  # type: ignore[index]
        assert pids == [c.info.backend_pid for c in conns]
        assert sorted(pid % 2 for pid in pids) == [0, 0, 1, 1]
        assert len(set(pids)) == 4
    finally:
        for c in conns:
            c.close()


def test_ddl_and_commits_are_seen_by_the_other_worker_at_once(server: SqlServer) -> None:
    with _one_per_worker(server) as (first, second):
        first.execute("CREATE TABLE shared_t (id int PRIMARY KEY, v text)")
        second.execute("INSERT INTO shared_t VALUES (1, 'from worker 1')")
        assert first.execute("SELECT v FROM shared_t").fetchall() == [("from worker 1",)]
        # Each commit's timestamp is below the next snapshot's, whichever process takes it.
        for i in range(2, 202):
            writer, reader = (first, second) if i % 2 else (second, first)
            writer.execute("INSERT INTO shared_t VALUES (%s, 'x')", (i,))
            assert reader.execute("SELECT count(*) FROM shared_t").fetchone() == (i,)
        second.execute("ALTER TABLE shared_t ADD COLUMN w int DEFAULT 7")
        assert first.execute("SELECT w FROM shared_t WHERE id = 1").fetchone() == (7,)
        first.execute("DROP TABLE shared_t")
        with pytest.raises(errors.UndefinedTable):
            second.execute("SELECT * FROM shared_t")


def test_ddl_through_one_worker_is_in_the_others_catalog_at_its_next_statement(
    server: SqlServer,
) -> None:
    # pg_class is read from the worker's catalog, not the store: only the shared catalog
    # version tells the second worker that the first changed it.
    query = "SELECT count(*) FROM pg_class WHERE relname = 'seen_t'"
    with _one_per_worker(server) as (first, second):
        assert second.execute(query).fetchone() == (0,)
        first.execute("CREATE TABLE seen_t (id int)")
        assert second.execute(query).fetchone() == (1,)
        first.execute("DROP TABLE seen_t")
        assert second.execute(query).fetchone() == (0,)


def test_workers_stop_when_their_acceptor_is_killed(embedded_pg: PostgresServer) -> None:
    store = asyncio.run(create_database(embedded_pg.dsn, "orphans"))
    proc = ServerProcess(store, "--processes", "2")
    proc.start()
    try:
        assert proc._proc is not None
        workers = psutil.Process(proc._proc.pid).children()
        assert len(workers) == 2
        os.kill(proc._proc.pid, signal.SIGKILL)
        proc._proc.wait()
        _, alive = psutil.wait_procs(workers, timeout=30)
        assert alive == [], "a worker went on serving without its acceptor"
    finally:
        proc.stop()


def test_a_write_conflict_across_workers_fails_one_transaction(server: SqlServer) -> None:
    with _one_per_worker(server) as (first, second):
        first.execute("CREATE TABLE conflict_t (id int PRIMARY KEY, n int)")
        first.execute("INSERT INTO conflict_t VALUES (1, 0)")
        first.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        second.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        second.execute("SELECT n FROM conflict_t WHERE id = 1")
        first.execute("UPDATE conflict_t SET n = n + 1 WHERE id = 1")
        result: list[BaseException | None] = []

        def update_in_second() -> None:
            try:
                second.execute("UPDATE conflict_t SET n = n + 10 WHERE id = 1")
                result.append(None)
            except psycopg.Error as exc:
                result.append(exc)

        # The second waits for the first's row lock, held in another process's transaction.
        waiter = threading.Thread(target=update_in_second)
        waiter.start()
        waiter.join(1.0)
        assert waiter.is_alive(), "the second UPDATE must wait for the first's row lock"
        first.execute("COMMIT")
        waiter.join(10)
        assert isinstance(result[0], errors.SerializationFailure)
        second.execute("ROLLBACK")
        assert second.execute("SELECT n FROM conflict_t").fetchall() == [(1,)]
        first.execute("DROP TABLE conflict_t")


@pytest.mark.parametrize("target_worker", [0, 1])
def test_cancel_reaches_a_session_on_either_worker(server: SqlServer, target_worker: int) -> None:
    # With one connection on each worker the acceptor hands the cancel's connection to
    # worker 0, so cancelling worker 1's session takes the forwarding path.
    with _one_per_worker(server) as conns:
        target = conns[target_worker]
        timer = threading.Timer(0.5, target.cancel)
        timer.start()
        started = time.monotonic()
        with pytest.raises(errors.QueryCanceled):
            target.execute("SELECT pg_sleep(30)")
        timer.join()
        assert time.monotonic() - started < 10
        assert target.execute("SELECT 1").fetchone() == (1,)


def test_max_connections_counts_every_worker(server: SqlServer) -> None:
    conns = [_connect(server) for _ in range(MAX_CONNECTIONS)]
    try:
        assert {c.info.backend_pid % 2 for c in conns} == {0, 1}
        with pytest.raises(asyncpg.TooManyConnectionsError, match="too many clients"):
            asyncio.run(asyncpg.connect(server.url()))
        conns.pop().close()
        _connect(server).close()  # a place is free again once the end is counted
    finally:
        for c in conns:
            c.close()


def test_a_worker_that_dies_is_started_again(pool: tuple[SqlServer, ServerProcess]) -> None:
    server, proc = pool
    assert proc._proc is not None
    workers = psutil.Process(proc._proc.pid).children()
    assert len(workers) == 2
    with _one_per_worker(server) as (_, doomed):
        victim = _worker_holding(workers, doomed)
        os.kill(victim.pid, signal.SIGKILL)
        with pytest.raises(psycopg.OperationalError):
            doomed.execute("SELECT 1")
    deadline = time.monotonic() + 30
    while True:
        children = psutil.Process(proc._proc.pid).children()
        if len(children) == 2 and victim.pid not in {c.pid for c in children}:
            try:
                with _one_per_worker(server) as (a, b):
                    assert a.execute("SELECT 1").fetchone() == (1,)
                    assert b.execute("SELECT 1").fetchone() == (1,)
                return
            except AssertionError:
                pass  # the new worker is still starting: both went to the other one
        assert time.monotonic() < deadline, "the dead worker was not started again"
        time.sleep(0.2)


def _worker_holding(workers: list[psutil.Process], conn: psycopg.Connection) -> psutil.Process:
    """The worker process whose socket is the other end of ``conn``'s (its OS pid is not the
    session's backend pid)."""
    with socket.socket(fileno=os.dup(conn.pgconn.socket)) as sock:
        client_port = sock.getsockname()[1]
    for worker in workers:
        for c in worker.net_connections(kind="tcp"):
            if c.raddr and c.raddr.port == client_port:
                return worker
    raise AssertionError("no worker holds the connection")


@pytest.mark.parametrize(
    ("flags", "code", "message"),
    [
        (["--processes", "0"], 2, "processes must be between 1 and 256"),
        (["--processes", "2", "--coordinator", "127.0.0.1:1"], 1, "leave out coordinator"),
        (["--processes", "2", "--metrics-listen", "127.0.0.1:0"], 1, "metrics_listen"),
    ],
)
def test_settings_processes_cannot_serve_are_refused(
    flags: list[str], code: int, message: str
) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "percolator.server.cli", "serve", "--store",
         "postgresql://nobody@127.0.0.1:1/none", *flags],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert out.returncode == code, out.stderr
    assert message in out.stderr


def _listed(conn: psycopg.Connection, pid: int, state: str) -> bool:
    """Whether ``conn``'s pg_stat_activity shows the session ``pid`` in ``state`` (another
    worker's rows are published every tenth of a second: poll)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        row = conn.execute("SELECT state FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()
        if row == (state,):
            return True
        time.sleep(0.05)
    return False


def test_pg_stat_activity_lists_every_workers_sessions(server: SqlServer) -> None:
    with _one_per_worker(server) as (first, second):
        second.execute("BEGIN")
        second.execute("SELECT 1")
        assert _listed(first, second.info.backend_pid, "idle in transaction")
        assert _listed(second, first.info.backend_pid, "idle")
        assert _listed(second, second.info.backend_pid, "active")  # its own query
        second.execute("ROLLBACK")
        assert _listed(first, second.info.backend_pid, "idle")


@pytest.mark.parametrize("terminate", [False, True])
def test_pg_cancel_and_terminate_backend_reach_another_worker(
    server: SqlServer, terminate: bool
) -> None:
    with _one_per_worker(server) as (first, second):
        target = second.info.backend_pid
        outcome: list[BaseException | None] = []

        def sleep() -> None:
            try:
                second.execute("SELECT pg_sleep(30)")
                outcome.append(None)
            except psycopg.Error as exc:
                outcome.append(exc)

        sleeper = threading.Thread(target=sleep)
        sleeper.start()
        assert _listed(first, target, "active")
        function = "pg_terminate_backend" if terminate else "pg_cancel_backend"
        assert first.execute(f"SELECT {function}(%s)", (target,)).fetchone() == (True,)
        sleeper.join(10)
        assert not sleeper.is_alive()
        if terminate:
            assert isinstance(outcome[0], psycopg.OperationalError)
            assert "terminating connection" in str(outcome[0])
        else:
            assert isinstance(outcome[0], errors.QueryCanceled)
            assert second.execute("SELECT 1").fetchone() == (1,)
        assert first.execute(f"SELECT {function}(%s)", (2_000_000_001,)).fetchone() == (False,)


def test_a_killed_acceptors_shared_directory_is_removed_by_the_next_pool() -> None:
    from percolator.server import worker_pool

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = worker_pool._new_shared_dir()
    (stale / "owner").write_text(str(dead.pid))
    (stale / "timestamps").write_bytes(b"\0" * 24)
    fresh = worker_pool._new_shared_dir()
    try:
        assert not stale.exists()
        assert (fresh / "owner").read_text() == str(os.getpid())
        again = worker_pool._new_shared_dir()  # a live owner's directory stays
        assert fresh.exists()
        shutil.rmtree(again)
    finally:
        shutil.rmtree(fresh, ignore_errors=True)
