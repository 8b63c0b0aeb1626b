"""The system as a user runs it: `percolator serve`, the Python client API, `percolator gc`."""

from __future__ import annotations

import asyncio
import shutil
import signal
from asyncio.subprocess import PIPE
from pathlib import Path

import psycopg

import percolator.clients as percolator
from tests.txn.test_bank_chaos import free_port


async def test_serve_then_connect_write_read_and_gc(tmp_path: Path) -> None:
    port = free_port()
    exe = shutil.which("percolator")
    assert exe is not None
    serve = await asyncio.create_subprocess_exec(
        exe,
        "serve",
        "--data-dir",
        str(tmp_path),
        "--coordinator-listen",
        f"127.0.0.1:{port}",
        "--gc-interval",
        "3600",
        "--listen",
        "127.0.0.1:0",
        stdout=PIPE,
        stderr=PIPE,
    )
    assert serve.stdout is not None and serve.stderr is not None
    try:
        banner = ""
        while "coordinator:" not in banner:
            line = (await asyncio.wait_for(serve.stdout.readline(), 60)).decode()
            assert line, f"serve ended its output early: {banner!r}"
            banner += line
        assert f"127.0.0.1:{port}" in banner, banner
        sql_port = int(banner.split("port=")[1].split()[0])

        # SQL and the Python API see the same data.
        sql = await psycopg.AsyncConnection.connect(
            f"host=127.0.0.1 port={sql_port} user=postgres dbname=postgres", autocommit=True
        )
        await sql.execute("CREATE TABLE system_check (id int PRIMARY KEY, v text)")
        await sql.execute("INSERT INTO system_check VALUES (1, 'via SQL')")
        cur = await sql.execute("SELECT v FROM system_check WHERE id = 1")
        assert await cur.fetchone() == ("via SQL",)
        await sql.close()

        db = await percolator.connect(coordinator=f"127.0.0.1:{port}", data_dir=tmp_path)
        for i in range(3):
            async with db.begin() as txn:
                txn.set("accounts", b"alice", "balance", str(100 + i).encode())
        async with db.begin() as txn:
            assert await txn.get("accounts", b"alice", "balance") == b"102"
        await db.close()

        gc = await asyncio.create_subprocess_exec(
            exe,
            "gc",
            "--coordinator",
            f"127.0.0.1:{port}",
            "--data-dir",
            str(tmp_path),
            stdout=PIPE,
            stderr=PIPE,
        )
        out, err = await asyncio.wait_for(gc.communicate(), 120)
        assert gc.returncode == 0, err.decode()
        assert b"safe point" in out
    finally:
        serve.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(serve.wait(), 60) == 0


def test_connect_sync_with_its_own_oracle(tmp_path: Path) -> None:
    with percolator.connect_sync(data_dir=tmp_path) as db:
        with db.begin() as txn:
            txn.set("t", b"k", "c", b"v")
        assert db.run_in_transaction(lambda txn: txn.get("t", b"k", "c")) == b"v"
    # A second connection after the first closed: the data and the oracle's mark persist.
    with percolator.connect_sync(data_dir=tmp_path) as db, db.begin() as txn:
        assert txn.get("t", b"k", "c") == b"v"
