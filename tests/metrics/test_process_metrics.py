"""The endpoints of real processes: ``percolator serve`` (observer metrics after observers
ran), ``percolator worker`` and ``percolator coordinator``, each with ``--metrics-listen``.
Each process has its own registry, so absolute values are exact here."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator

import psycopg
import pytest

from percolator.server.runtime import ServerProcess
from percolator.server.txn.timestamp_client import GrpcTimestampSource
from tests.metrics.conftest import scrape, value, wait_for


def start(args: list[str]) -> tuple[subprocess.Popen[str], list[str]]:
    """``percolator ARGS`` with its first two output lines (the banner, the metrics URL)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "percolator.server.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert proc.stdout is not None
    return proc, [proc.stdout.readline().strip(), proc.stdout.readline().strip()]


def stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    try:
        assert proc.wait(30) == 0
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise


def metrics_url(line: str) -> str:
    name, _, url = line.partition(": ")
    assert name == "metrics" and url.startswith("http://127.0.0.1:"), line
    return url


@pytest.fixture
def deployment(fresh_dsns) -> Iterator[ServerProcess]:  # type: ignore[no-untyped-def]
    """``percolator serve`` with its observer worker and metrics; a failing run parks at once."""
    (dsn,) = asyncio.run(fresh_dsns(1))
    proc = ServerProcess(
        dsn,
        "--metrics-listen", "127.0.0.1:0",
        "--observer-max-failures", "1",
        "--observer-retry-base", "0.05",
    )  # fmt: skip
    proc.start()
    yield proc
    proc.stop()


def test_observer_metrics_and_a_worker_process(deployment: ServerProcess) -> None:
    url = deployment.metrics_url
    assert url is not None and url.startswith("http://127.0.0.1:")
    with psycopg.connect(
        f"host=127.0.0.1 port={deployment.port} user=postgres dbname=postgres", autocommit=True
    ) as conn:
        conn.execute("CREATE TABLE src (id int PRIMARY KEY, v int)")
        conn.execute("CREATE TABLE dst (id int PRIMARY KEY, v int)")
        conn.execute(
            "CREATE OBSERVER copy_v ON src (v) AS $$ INSERT INTO dst VALUES (NEW.id, NEW.v) "
            "ON CONFLICT (id) DO UPDATE SET v = excluded.v $$"
        )
        # Divides by zero for every row: fails, and parks at its first failure.
        conn.execute(
            "CREATE OBSERVER broken ON src (v) AS $$ INSERT INTO dst VALUES "
            "(NEW.id + 1000, NEW.v / (NEW.v - NEW.v)) $$"
        )
        conn.execute("INSERT INTO src VALUES (1, 1), (2, 2), (3, 3)")

        samples = wait_for(
            url,
            lambda s: (
                value(s, "percolator_observer_commits_total", observer="copy_v") >= 3
                and value(s, "percolator_observer_parked_changes", observer="broken") == 3
                and value(s, "percolator_observer_pending_changes", observer="copy_v") == 0
            ),
        )
        assert conn.execute("SELECT count(*) FROM dst").fetchone() == (3,)

    assert value(samples, "percolator_observer_runs_total", observer="copy_v") >= 3
    assert value(samples, "percolator_observer_commits_total", observer="copy_v") >= 3
    assert value(samples, "percolator_observer_pending_changes", observer="copy_v") == 0
    assert value(samples, "percolator_observer_lag_seconds", observer="copy_v") == 0
    assert value(samples, "percolator_observer_parked_changes", observer="copy_v") == 0
    assert value(samples, "percolator_observer_failures_total", observer="broken") == 3
    assert value(samples, "percolator_observer_parked_total", observer="broken") == 3
    assert value(samples, "percolator_observer_parked_changes", observer="broken") == 3
    assert value(samples, "percolator_observer_commits_total", observer="broken") == 0
    assert value(samples, "percolator_statement_errors_total", sqlstate="22012") == 0  # not SQL
    # The process's own metrics come along (prometheus_client's process collector).
    assert value(samples, "process_resident_memory_bytes") > 0
    assert value(samples, "percolator_store_round_trips_total", operation="find_notifications")

    # A worker process, on the same coordinator: its endpoint answers with the same backlog.
    assert deployment.coordinator is not None
    worker, lines = start(
        [
            "worker", "--store", deployment.store_dsn, "--coordinator", deployment.coordinator,
            "--metrics-listen", "127.0.0.1:0",
        ]
    )  # fmt: skip
    try:
        assert lines[0].startswith("percolator worker running"), lines
        samples = wait_for(
            metrics_url(lines[1]),
            lambda s: (
                value(s, "percolator_store_round_trips_total", operation="find_notifications") > 0
            ),
        )
        assert value(samples, "percolator_build_info", version="0.1.0") == 1
        assert value(samples, "percolator_store_round_trips_total", operation="find_notifications")
        assert value(samples, "percolator_observer_parked_changes", observer="broken") == 3
        assert value(samples, "percolator_observer_pending_changes", observer="copy_v") == 0
    finally:
        stop(worker)


async def test_coordinator_process(fresh_dsns) -> None:  # type: ignore[no-untyped-def]
    (dsn,) = await fresh_dsns(1)
    proc, lines = start(
        [
            "coordinator",
            "--listen",
            "127.0.0.1:0",
            "--store",
            dsn,
            "--metrics-listen",
            "127.0.0.1:0",
        ]
    )
    try:
        assert lines[0].startswith("percolator coordinator listening on "), lines
        address = lines[0].rsplit(" on ", 1)[1]
        url = metrics_url(lines[1])
        async with GrpcTimestampSource(address) as clock:
            for _ in range(5):
                await clock.get_timestamp()
        samples = scrape(url)
        assert value(samples, "percolator_oracle_request_batch_size_count") == 5
        assert value(samples, "percolator_oracle_request_batch_size_sum") == 5
        assert value(samples, "percolator_oracle_request_seconds_count") == 5
        assert value(samples, "percolator_oracle_timestamps_total") == 5
        assert value(samples, "percolator_oracle_persist_seconds_count") >= 1
        assert value(samples, "percolator_gc_passes_total", result="ok") == 0  # none yet
    finally:
        stop(proc)
