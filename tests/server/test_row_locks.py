"""Row locks through real clients, as Postgres users rely on them: job queues with SKIP LOCKED,
READ COMMITTED statements that see the row a waited-for transaction left, and waits that a
timeout or a cancel ends without leaving anything locked."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

import psycopg
import pytest
from psycopg import errors

from tests.server.conftest import SqlServer


@pytest.fixture
def jobs(sql_server: SqlServer) -> Iterator[str]:
    with psycopg.connect(sql_server.conninfo(), autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS jobs")
        conn.execute("CREATE TABLE jobs (id int PRIMARY KEY, state text NOT NULL, worker int)")
        conn.execute("INSERT INTO jobs SELECT g, 'queued', NULL FROM generate_series(1, 40) g")
    yield "jobs"


def test_a_job_queue_hands_each_job_to_one_worker(sql_server: SqlServer, jobs: str) -> None:
    """Four workers take jobs with FOR UPDATE SKIP LOCKED at READ COMMITTED (Postgres's
    default, where queues run): every job is done exactly once and no worker ever fails or
    waits for another's job. (Under REPEATABLE READ a worker whose snapshot predates another's
    commit of a job fails with 40001 when it locks that job, in Postgres as here.)"""
    done: list[tuple[int, int]] = []
    lock = threading.Lock()

    def worker(n: int) -> int:
        taken = 0
        with psycopg.connect(sql_server.conninfo()) as conn:
            conn.isolation_level = psycopg.IsolationLevel.READ_COMMITTED
            while True:
                row = conn.execute(
                    "SELECT id FROM jobs WHERE state = 'queued' ORDER BY id LIMIT 1 "
                    "FOR UPDATE SKIP LOCKED"
                ).fetchone()
                if row is None:
                    conn.rollback()
                    return taken
                time.sleep(0.01)  # the work, while the row stays locked
                conn.execute(
                    "UPDATE jobs SET state = 'done', worker = %s WHERE id = %s", (n, row[0])
                )
                conn.commit()
                taken += 1
                with lock:
                    done.append((row[0], n))

    with ThreadPoolExecutor(4) as pool:
        counts = list(pool.map(worker, range(4)))
    assert sum(counts) == 40
    assert sorted(job for job, _ in done) == list(range(1, 41))
    assert sum(1 for c in counts if c > 0) >= 2  # the work was shared
    with psycopg.connect(sql_server.conninfo(), autocommit=True) as conn:
        rows = conn.execute("SELECT id, worker FROM jobs ORDER BY id").fetchall()
    assert rows == sorted(done)


def test_read_committed_update_rechecks_its_condition(sql_server: SqlServer, jobs: str) -> None:
    """The waiting UPDATE runs again on the row the first transaction left: a row that no
    longer matches its WHERE is not updated (Postgres's READ COMMITTED)."""
    with (
        psycopg.connect(sql_server.conninfo()) as t1,
        psycopg.connect(sql_server.conninfo()) as t2,
        ThreadPoolExecutor(1) as pool,
    ):
        t2.execute("SET TRANSACTION ISOLATION LEVEL READ COMMITTED")
        t1.execute("UPDATE jobs SET state = 'done', worker = 1 WHERE id = 1")
        second = pool.submit(
            t2.execute, "UPDATE jobs SET worker = 2 WHERE id = 1 AND state = 'queued'"
        )
        with pytest.raises(FutureTimeout):
            second.result(timeout=0.5)
        t1.commit()
        assert second.result(timeout=10).rowcount == 0
        deleted = t2.execute("DELETE FROM jobs WHERE state = 'done' RETURNING id, worker")
        assert deleted.fetchall() == [(1, 1)]
        t2.commit()


def test_a_timed_out_wait_leaves_no_lock(sql_server: SqlServer, jobs: str) -> None:
    with (
        psycopg.connect(sql_server.conninfo()) as t1,
        psycopg.connect(sql_server.conninfo()) as t2,
        psycopg.connect(sql_server.conninfo()) as t3,
    ):
        t1.execute("SELECT * FROM jobs WHERE id = 2 FOR UPDATE")
        t2.execute("SET statement_timeout = '300ms'")
        with pytest.raises(errors.QueryCanceled):
            t2.execute("UPDATE jobs SET worker = 2 WHERE id = 2")
        t2.rollback()
        t1.commit()
        # Neither the holder nor the cancelled waiter keeps the row.
        t3.execute("SET lock_timeout = '2s'")
        assert t3.execute("UPDATE jobs SET worker = 3 WHERE id = 2").rowcount == 1
        t3.commit()


def test_nowait_error_keeps_the_connection_usable(sql_server: SqlServer, jobs: str) -> None:
    with (
        psycopg.connect(sql_server.conninfo()) as t1,
        psycopg.connect(sql_server.conninfo(), autocommit=True) as t2,
    ):
        t1.execute("UPDATE jobs SET worker = 1 WHERE id = 3")
        with pytest.raises(errors.LockNotAvailable) as raised:
            t2.execute("SELECT * FROM jobs WHERE id = 3 FOR UPDATE NOWAIT")
        assert raised.value.sqlstate == "55P03"
        assert t2.execute("SELECT worker FROM jobs WHERE id = 3").fetchone() == (None,)
        t1.commit()
        assert t2.execute("SELECT id FROM jobs WHERE id = 3 FOR UPDATE NOWAIT").fetchone() == (3,)


def test_for_share_lets_readers_share_and_keeps_writers_out(
    sql_server: SqlServer, jobs: str
) -> None:
    """FOR SHARE as in Postgres: two transactions share a row's lock (neither waits, both
    commit), a writer or FOR UPDATE waits for both, and FOR SHARE waits for a writer."""
    with (
        psycopg.connect(sql_server.conninfo()) as t1,
        psycopg.connect(sql_server.conninfo()) as t2,
        psycopg.connect(sql_server.conninfo()) as t3,
    ):
        assert t1.execute("SELECT id FROM jobs WHERE id = 4 FOR SHARE").fetchall() == [(4,)]
        assert t2.execute("SELECT id FROM jobs WHERE id = 4 FOR SHARE NOWAIT").fetchall() == [(4,)]
        assert t2.execute("SELECT id FROM jobs WHERE id = 4 FOR KEY SHARE NOWAIT").fetchall()
        with pytest.raises(errors.LockNotAvailable):
            t3.execute("SELECT id FROM jobs WHERE id = 4 FOR UPDATE NOWAIT")
        t3.rollback()
        assert (
            t3.execute("SELECT id FROM jobs WHERE id = 4 FOR UPDATE SKIP LOCKED").fetchall() == []
        )
        t3.rollback()
        t3.execute("SET lock_timeout = '300ms'")
        with pytest.raises(errors.LockNotAvailable):
            t3.execute("UPDATE jobs SET worker = 3 WHERE id = 4")
        t3.rollback()
        t1.commit()
        t2.commit()  # no conflict between the two sharers
        t3.execute("SET lock_timeout = '2s'")
        assert t3.execute("UPDATE jobs SET worker = 3 WHERE id = 4").rowcount == 1
        # Now the writer holds it: a sharer waits.
        with pytest.raises(errors.LockNotAvailable):
            t1.execute("SELECT id FROM jobs WHERE id = 4 FOR SHARE NOWAIT")
        t1.rollback()
        t3.commit()


def test_for_share_then_update_by_two_is_a_deadlock(sql_server: SqlServer, jobs: str) -> None:
    """Write skew under FOR SHARE: both check the row, then both write it. As in Postgres,
    each waits for the other's shared lock; one gets 40P01 and the other goes on."""
    with (
        psycopg.connect(sql_server.conninfo()) as t1,
        psycopg.connect(sql_server.conninfo()) as t2,
        ThreadPoolExecutor(2) as pool,
    ):
        for t in (t1, t2):
            t.execute("SELECT state FROM jobs WHERE id = 5 FOR SHARE")

        def update(conn: psycopg.Connection, n: int) -> str:
            try:
                conn.execute("UPDATE jobs SET worker = %s WHERE id = 5", (n,))
                conn.commit()
                return "committed"
            except errors.DeadlockDetected:
                conn.rollback()
                return "deadlock"

        outcomes = list(pool.map(update, (t1, t2), (1, 2)))
    assert sorted(outcomes) == ["committed", "deadlock"]


@pytest.fixture
def users(sql_server: SqlServer) -> Iterator[str]:
    with psycopg.connect(sql_server.conninfo(), autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS users")
        conn.execute("CREATE TABLE users (id int PRIMARY KEY, email text UNIQUE, visits int)")
    yield "users"


def read_committed(server: SqlServer) -> psycopg.Connection:
    conn = psycopg.connect(server.conninfo())
    conn.isolation_level = psycopg.IsolationLevel.READ_COMMITTED
    return conn


UPSERT = (
    "INSERT INTO users VALUES (1, 'a@x', 1) "
    "ON CONFLICT (id) DO UPDATE SET visits = users.visits + 1"
)


def test_concurrent_upserts_of_a_new_key_both_apply(sql_server: SqlServer, users: str) -> None:
    """The second inserter of a key waits for the first; once it commits, the second's
    ON CONFLICT DO UPDATE updates the row (READ COMMITTED, as in Postgres): no 40001."""
    with read_committed(sql_server) as t1, read_committed(sql_server) as t2:
        with ThreadPoolExecutor(1) as pool:
            t1.execute(UPSERT)
            second = pool.submit(t2.execute, UPSERT)
            with pytest.raises(FutureTimeout):
                second.result(timeout=0.5)
            t1.commit()
            assert second.result(timeout=10).rowcount == 1
            t2.commit()
        assert t1.execute("SELECT visits FROM users WHERE id = 1").fetchone() == (2,)
        t1.commit()


def test_a_second_insert_of_a_key_waits_then_fails_or_goes_on(
    sql_server: SqlServer, users: str
) -> None:
    with read_committed(sql_server) as t1, read_committed(sql_server) as t2:
        with ThreadPoolExecutor(1) as pool:
            # Another key, same unique email: the unique index's entry is locked too.
            t1.execute("INSERT INTO users VALUES (1, 'a@x', 0)")
            second = pool.submit(t2.execute, "INSERT INTO users VALUES (2, 'a@x', 0)")
            with pytest.raises(FutureTimeout):
                second.result(timeout=0.5)
            t1.commit()
            with pytest.raises(errors.UniqueViolation):
                second.result(timeout=10)
            t2.rollback()
            # The first rolls back: the second inserts.
            t1.execute("INSERT INTO users VALUES (3, 'c@x', 0)")
            second = pool.submit(t2.execute, "INSERT INTO users VALUES (3, 'c@x', 5)")
            with pytest.raises(FutureTimeout):
                second.result(timeout=0.5)
            t1.rollback()
            assert second.result(timeout=10).rowcount == 1
            t2.commit()
        assert t1.execute("SELECT id, visits FROM users ORDER BY id").fetchall() == [
            (1, 0),
            (3, 5),
        ]
        t1.commit()


@pytest.mark.parametrize("isolation", ["repeatable read", "read committed"])
def test_a_hot_row_loses_no_update(sql_server: SqlServer, jobs: str, isolation: str) -> None:
    """Clients increment one row, TPC-B style (another row first, then the hot one), retrying
    on 40001: every committed increment is in the final value, and under READ COMMITTED none
    needs a retry."""
    clients, each = 6, 25
    retries = [0] * clients

    def client(n: int) -> None:
        with psycopg.connect(sql_server.conninfo()) as conn:
            conn.execute(f"SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL {isolation}")
            conn.commit()
            done = 0
            while done < each:
                try:
                    conn.execute(
                        "UPDATE jobs SET worker = coalesce(worker, 0) + 1 WHERE id = %s", (n + 2,)
                    )
                    conn.execute("UPDATE jobs SET worker = coalesce(worker, 0) + 1 WHERE id = 1")
                    conn.commit()
                    done += 1
                except errors.SerializationFailure:
                    conn.rollback()
                    retries[n] += 1

    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(client, range(clients)))
    with psycopg.connect(sql_server.conninfo(), autocommit=True) as conn:
        assert conn.execute("SELECT worker FROM jobs WHERE id = 1").fetchone() == (clients * each,)
        per_client = conn.execute(
            "SELECT worker FROM jobs WHERE id BETWEEN 2 AND %s ORDER BY id", (clients + 1,)
        ).fetchall()
    assert per_client == [(each,)] * clients
    if isolation == "read committed":
        assert sum(retries) == 0


def test_a_queue_taken_by_update_with_a_skip_locked_subquery(
    sql_server: SqlServer, jobs: str
) -> None:
    """The one-statement queue: UPDATE ... WHERE id = (SELECT ... FOR UPDATE SKIP LOCKED)."""
    take = (
        "UPDATE jobs SET state = 'taken', worker = %s WHERE id = ("
        "SELECT id FROM jobs WHERE state = 'queued' ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED"
        ") RETURNING id"
    )
    with read_committed(sql_server) as t1, read_committed(sql_server) as t2:
        assert t1.execute(take, (1,)).fetchall() == [(1,)]
        assert t2.execute(take, (2,)).fetchall() == [(2,)]  # passes job 1, held by t1
        t1.commit()
        t2.commit()
        # A lock clause's NOWAIT holds for the tables it names, in subqueries too.
        t1.execute("SELECT 1 FROM jobs j WHERE j.id = 3 FOR UPDATE OF j")
        with pytest.raises(errors.LockNotAvailable):
            t2.execute("SELECT * FROM (SELECT id FROM jobs WHERE id = 3 FOR UPDATE NOWAIT) s")
        t1.rollback()
        t2.rollback()


def test_for_update_locks_the_rows_returned(sql_server: SqlServer, jobs: str) -> None:
    """Without a LIMIT every row read is locked (in batches); under one, only those taken."""
    with (
        psycopg.connect(sql_server.conninfo()) as t1,
        psycopg.connect(sql_server.conninfo(), autocommit=True) as t2,
    ):
        assert len(t1.execute("SELECT id FROM jobs WHERE id > 1 FOR UPDATE").fetchall()) == 39
        with pytest.raises(errors.LockNotAvailable):
            t2.execute("SELECT id FROM jobs WHERE id = 40 FOR UPDATE NOWAIT")
        assert t2.execute("SELECT id FROM jobs WHERE id = 1 FOR UPDATE NOWAIT").fetchone() == (1,)
        t1.rollback()
        assert t1.execute("SELECT id FROM jobs LIMIT 1 FOR UPDATE").fetchall() == [(1,)]
        assert t2.execute("SELECT id FROM jobs WHERE id = 2 FOR UPDATE NOWAIT").fetchone() == (2,)
        t1.rollback()


def test_a_row_that_does_not_match_stays_unlocked(sql_server: SqlServer, jobs: str) -> None:
    """A key lookup with another condition locks only the rows that pass it (Postgres locks the
    rows it updates); a lookup by key alone locks its row while reading it."""
    with (
        psycopg.connect(sql_server.conninfo()) as t1,
        psycopg.connect(sql_server.conninfo(), autocommit=True) as t2,
    ):
        assert t1.execute("UPDATE jobs SET worker = 1 WHERE id = 5 AND state = 'x'").rowcount == 0
        assert t2.execute("SELECT id FROM jobs WHERE id = 5 FOR UPDATE NOWAIT").fetchone() == (5,)
        assert t1.execute("DELETE FROM jobs WHERE id = 6").rowcount == 1
        with pytest.raises(errors.LockNotAvailable):
            t2.execute("SELECT id FROM jobs WHERE id = 6 FOR UPDATE NOWAIT")
        t1.rollback()


def test_a_sorted_for_update_locks_every_row_it_returns(sql_server: SqlServer, jobs: str) -> None:
    with (
        psycopg.connect(sql_server.conninfo()) as t1,
        psycopg.connect(sql_server.conninfo(), autocommit=True) as t2,
    ):
        rows = t1.execute("SELECT id FROM jobs ORDER BY id DESC FOR UPDATE").fetchall()
        assert rows == [(i,) for i in range(40, 0, -1)]
        for i in (1, 40):
            with pytest.raises(errors.LockNotAvailable):
                t2.execute("SELECT id FROM jobs WHERE id = %s FOR UPDATE NOWAIT", (i,))
        t1.rollback()


def test_an_idle_holder_timed_out_frees_its_rows(sql_server: SqlServer, jobs: str) -> None:
    """idle_in_transaction_session_timeout ends a session sitting on row locks; its waiter
    goes on."""
    with (
        psycopg.connect(sql_server.conninfo()) as holder,
        psycopg.connect(sql_server.conninfo()) as waiter,
        ThreadPoolExecutor(1) as pool,
    ):
        holder.execute("SET idle_in_transaction_session_timeout = '500ms'")
        holder.commit()
        holder.execute("UPDATE jobs SET worker = 1 WHERE id = 7")
        blocked = pool.submit(waiter.execute, "UPDATE jobs SET worker = 2 WHERE id = 7")
        assert blocked.result(timeout=8).rowcount == 1
        waiter.commit()
        with pytest.raises(errors.IdleInTransactionSessionTimeout):
            holder.execute("SELECT 1")
    with psycopg.connect(sql_server.conninfo(), autocommit=True) as conn:
        assert conn.execute("SELECT worker FROM jobs WHERE id = 7").fetchone() == (2,)


async def test_asyncpg_workers_share_a_queue(sql_server: SqlServer, jobs: str) -> None:
    """The same queue through asyncpg's prepared statements, three workers on one event loop."""
    import asyncio

    import asyncpg

    taken: list[int] = []

    async def worker() -> None:
        conn = await asyncpg.connect(sql_server.url())
        try:
            while True:
                async with conn.transaction(isolation="read_committed"):
                    job = await conn.fetchval(
                        "SELECT id FROM jobs WHERE state = 'queued' ORDER BY id LIMIT 1 "
                        "FOR UPDATE SKIP LOCKED"
                    )
                    if job is None:
                        return
                    await asyncio.sleep(0.005)
                    await conn.execute("UPDATE jobs SET state = 'done' WHERE id = $1", job)
                    taken.append(job)
        finally:
            await conn.close()

    await asyncio.gather(*(worker() for _ in range(3)))
    assert sorted(taken) == list(range(1, 41))
