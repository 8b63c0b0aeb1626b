"""``percolator worker`` processes: a worker killed with SIGKILL in the middle of a run loses
nothing — another worker takes its slice once its lease ends and runs the change once."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from percolator.server.runtime import ServerProcess
from tests.conftest import PostgresServer, create_database
from tests.observers.test_observers_sql import q, status, wait_for

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def deployment(embedded_pg: PostgresServer) -> Iterator[ServerProcess]:
    """A SQL server process with the coordinator and no worker of its own."""
    store = asyncio.run(create_database(embedded_pg.dsn, "workers"))
    proc = ServerProcess(store, "--observer-workers", "0", "--catalog-poll", "0.2")
    proc.start()
    yield proc
    proc.stop(30)


def start_worker(deployment: ServerProcess, **env: str) -> subprocess.Popen[str]:
    assert deployment.coordinator is not None
    proc = subprocess.Popen(
        [sys.executable, "-m", "percolator.server.cli", "worker",
         "--store", deployment.store_dsn, "--coordinator", deployment.coordinator,
         "--lease-ms", "1500", "--catalog-poll", "0.2"],
        cwd=ROOT,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("percolator worker running"), line
    return proc


def test_a_killed_worker_loses_nothing(deployment: ServerProcess, tmp_path: Path) -> None:
    conninfo = f"host=127.0.0.1 port={deployment.port} user=postgres dbname=postgres"
    mark = tmp_path / "running"
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute("CREATE TABLE src (id int PRIMARY KEY, v text)")
        conn.execute(
            "CREATE TABLE runs (id int, seen text, run_ts bigint, PRIMARY KEY (id, run_ts))"
        )
        conn.execute(
            "CREATE OBSERVER rec ON src (v) EXECUTE 'tests.observers.programs:slow_record'"
        )
        doomed = start_worker(deployment, OBSERVER_MARK=str(mark), OBSERVER_SLEEP="60")
        try:
            conn.execute("INSERT INTO src VALUES (1, 'x')")
            wait_for(mark.exists, what="the run to begin")
        finally:
            doomed.send_signal(signal.SIGKILL)
            doomed.wait()
        assert q(conn, "SELECT count(*) FROM runs") == [(0,)]
        assert status(conn, "rec")["pending"] == 1
        survivor = start_worker(deployment)
        try:
            started = time.monotonic()
            wait_for(lambda: q(conn, "SELECT id, seen FROM runs") == [(1, "x")], what="rerun")
            # It waited for the dead worker's lease (1.5 s) at most, not for its run (60 s).
            assert time.monotonic() - started < 15
            wait_for(lambda: status(conn, "rec")["pending"] == 0, what="cleared")
            time.sleep(0.5)
            assert q(conn, "SELECT count(*) FROM runs") == [(1,)]
        finally:
            survivor.send_signal(signal.SIGTERM)
            assert survivor.wait(30) == 0
