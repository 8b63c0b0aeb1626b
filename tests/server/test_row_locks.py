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
