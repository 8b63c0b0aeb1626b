"""Bank transfers from several OS processes on 2 Postgres shards, SIGKILLed at random points.

After the chaos: the total balance is conserved, every acknowledged transfer is in the store,
and every lock left by a killed process is resolved.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from percolator.server.storage.cells import CellKey
from percolator.server.storage.embedded import EmbeddedPostgres
from percolator.server.storage.postgres_store import PostgresCellStore
from percolator.server.txn.client import TransactionClient
from percolator.server.txn.timestamp_client import GrpcTimestampSource

from .bank_worker import ACCOUNTS_TABLE, TRANSFERS_TABLE, WORKER_CONFIG, account_row

ACCOUNTS = 40
INITIAL_BALANCE = 1000
WORKERS = 3
CHAOS_SECONDS = float(os.environ.get("PERCOLATOR_CHAOS_SECONDS", "20"))
REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listens on port {port}")


@pytest.fixture
def shards(tmp_path: Path):
    servers = [EmbeddedPostgres(tmp_path / f"shard{i}") for i in range(2)]
    dsns = [pg.start() for pg in servers]
    yield dsns
    for pg in servers:
        pg.stop()


@pytest.fixture
def coordinator(shards: list[str], tmp_path: Path):
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "percolator.server.cli",
            "coordinator",
            "--listen",
            f"127.0.0.1:{port}",
            "--store",
            shards[0],
        ],
        stdout=subprocess.DEVNULL,
        stderr=open(tmp_path / "coordinator.log", "w"),
    )
    wait_for_port(port)
    yield f"127.0.0.1:{port}"
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)


def spawn_worker(
    shards: list[str], coordinator: str, ack_log: Path, seed: int, log_dir: Path
) -> subprocess.Popen[bytes]:
    args = [
        sys.executable,
        "-m",
        "tests.txn.bank_worker",
        "--coordinator",
        coordinator,
        "--accounts",
        str(ACCOUNTS),
        "--ack-log",
        str(ack_log),
        "--seed",
        str(seed),
    ]
    for dsn in shards:
        args += ["--dsn", dsn]
    return subprocess.Popen(
        args, cwd=REPO, stdout=subprocess.DEVNULL, stderr=open(log_dir / f"worker-{seed}.log", "w")
    )


async def open_client(shards: list[str], coordinator: str) -> TransactionClient:
    store = await PostgresCellStore.connect(shards)
    return TransactionClient(store, GrpcTimestampSource(coordinator), WORKER_CONFIG)


async def test_bank_total_is_conserved_under_sigkill(
    shards: list[str], coordinator: str, tmp_path: Path
) -> None:
    client = await open_client(shards, coordinator)
    async with client.begin() as txn:
        for i in range(ACCOUNTS):
            txn.set(ACCOUNTS_TABLE, account_row(i), "balance", str(INITIAL_BALANCE).encode())
    await client.secondaries.drain()

    ack_log = tmp_path / "acks.log"
    rng = random.Random(1234)
    seed = 0
    workers = []
    for _ in range(WORKERS):
        seed += 1
        workers.append(spawn_worker(shards, coordinator, ack_log, seed, tmp_path))
    kills = 0
    deadline = time.monotonic() + CHAOS_SECONDS
    while time.monotonic() < deadline:
        await asyncio.sleep(rng.uniform(0.2, 1.5))
        victim = rng.randrange(WORKERS)
        workers[victim].send_signal(signal.SIGKILL)
        workers[victim].wait()
        kills += 1
        seed += 1
        workers[victim] = spawn_worker(shards, coordinator, ack_log, seed, tmp_path)
    for w in workers:
        w.send_signal(signal.SIGKILL)
        w.wait()

    acked = ack_log.read_text().split() if ack_log.exists() else []
    assert kills >= 5
    assert len(acked) > 50, "the workers made too little progress to test anything"

    await asyncio.sleep(WORKER_CONFIG.base_lock_ttl_ms / 1000 + 0.2)  # dead workers' locks expire
    async with client.begin() as txn:
        balances = await txn.get_many(
            [CellKey(ACCOUNTS_TABLE, account_row(i), "balance") for i in range(ACCOUNTS)]
        )
        assert sum(int(b or b"0") for b in balances) == ACCOUNTS * INITIAL_BALANCE
        recorded = await txn.get_many(
            [CellKey(TRANSFERS_TABLE, t.encode(), "amount") for t in acked]
        )
        lost = [t for t, v in zip(acked, recorded, strict=True) if v is None]
        assert not lost, f"acknowledged transfers lost: {lost[:5]}"

    now = await client.clock.get_timestamp()
    leftover = await client.store.scan_locks(now, limit=100_000)
    print(
        f"{kills} kills, {len(acked)} acknowledged transfers, {len(leftover)} locks left "
        f"by killed workers, {client.resolver.counts} resolved by the final reads"
    )
    still_held = await client.resolver.resolve(leftover)
    assert still_held == []
    assert await client.store.scan_locks(await client.clock.get_timestamp()) == []
    await client.close()
    await client.store.close()
