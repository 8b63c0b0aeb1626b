"""``percolator serve`` as a process: SIGTERM shuts it down gracefully (nothing half-committed),
its data survives a restart, and its logs can be JSON lines."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import subprocess
import sys
import time

import psycopg
import pytest

from tests.conftest import PostgresServer, create_database
from tests.server.conftest import server_process


def test_sigterm_rolls_back_open_transactions_and_keeps_committed_data(
    embedded_pg: PostgresServer,
) -> None:
    store = asyncio.run(create_database(embedded_pg.dsn, "stop"))
    with server_process(store) as server:
        with psycopg.connect(server.conninfo(), autocommit=True) as conn:
            conn.execute("CREATE TABLE kept (id int PRIMARY KEY, v text)")
            conn.execute("INSERT INTO kept VALUES (1, 'committed')")
        open_txn = psycopg.connect(server.conninfo())
        open_txn.execute("INSERT INTO kept VALUES (2, 'never committed')")
        # leaving the block sends SIGTERM: the server must end the open transaction itself
    with pytest.raises(psycopg.OperationalError):
        open_txn.execute("SELECT 1")
    open_txn.close()
    with server_process(store) as restarted:
        with psycopg.connect(restarted.conninfo(), autocommit=True) as conn:
            rows = conn.execute("SELECT id, v FROM kept ORDER BY id").fetchall()
    assert rows == [(1, "committed")]


def test_json_logs(embedded_pg: PostgresServer) -> None:
    store = asyncio.run(create_database(embedded_pg.dsn, "logs"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [
        sys.executable,
        "-m",
        "percolator.server.cli",
        "--log-level",
        "INFO",
        "--log-format",
        "json",
        "serve",
        "--store",
        store,
        "--listen",
        f"127.0.0.1:{port}",
        "--coordinator-listen",
        "127.0.0.1:0",
        "--auth",
        "trust",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().startswith(
            "percolator is running"
        )
        with psycopg.connect(f"host=127.0.0.1 port={port} user=postgres dbname=postgres") as conn:
            conn.execute("SELECT 1")
        time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0
    entries = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    assert entries, err[-2000:]
    assert all({"ts", "level", "logger", "msg"} <= e.keys() for e in entries)
    opened = [e for e in entries if e.get("user") == "postgres" and "pid" in e]
    assert opened, "a connection's log entry carries its user and backend pid"
