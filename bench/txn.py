"""`percolator bench txn`: the paper's Figure 8 on this machine, and multi-cell commits.

Single-cell mode (default) runs four workloads at the same concurrency against the same
Postgres server, alternating raw and Percolator rounds so that machine noise hits both:

- raw read:  ``SELECT v FROM kv WHERE k = $1`` through an asyncpg pool;
- read:      a read-only Percolator transaction reading one cell (start_ts + one read);
             concurrent point reads of a shard share statements (``statement_batcher.py``);
- read_unbatched: the same with each read its own statement, reported beside it;
- raw write: ``INSERT ... ON CONFLICT (k) DO UPDATE`` through an asyncpg pool;
- write:     a Percolator transaction writing one cell (start_ts, prewrite, commit_ts, commit).

``--cells N --shards S`` instead measures transactions that write N random cells spread over S
shards, and counts the Postgres round trips per commit (secondaries included). Its baseline:
transactions of N upserts on one raw Postgres database (no sharding, no snapshot isolation
across databases).

Both sides run on the same event loop (uvloop when installed, as ``percolator serve`` does).
The oracle is the in-process one, persisting its high-water mark in the first shard, as
``percolator serve`` runs it. Each figure is the best of ``--rounds`` rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import resource
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from percolator.bench.common import create_databases
from percolator.server.storage.embedded import EmbeddedPostgres
from percolator.server.storage.postgres_store import PostgresCellStore
from percolator.server.txn import eventloop
from percolator.server.txn.client import TransactionClient
from percolator.server.txn.errors import Retryable
from percolator.server.txn.timestamps import TimestampOracle

TABLE = "bench"
Op = Callable[[random.Random], Awaitable[bool]]
"""One benchmark operation; returns whether it completed (a conflict does not count)."""
COLUMN = "v"


@dataclass
class Setup:
    raw_pool: asyncpg.Pool
    store: PostgresCellStore
    oracle: TimestampOracle
    client: TransactionClient
    unbatched: TransactionClient
    """The same, on a store whose point reads are one statement each."""
    keys: list[bytes]

    async def close(self) -> None:
        await self.client.close()
        await self.unbatched.close()
        await self.unbatched.store.close()
        await self.store.close()
        await self.oracle.close()
        await self.raw_pool.close()


async def _no_reset(conn: asyncpg.Connection) -> None:
    """The raw baseline's sessions change no state either."""


def key_of(i: int) -> bytes:
    return f"user{i:08d}".encode()


async def setup(
    server_dsn: str, shards: int, concurrency: int, key_count: int, value: bytes
) -> Setup:
    raw_dsn, *shard_dsns = await create_databases(server_dsn, *["bench"] * (1 + shards))
    # Same pool settings as the store's: no reset query on release (a round trip each).
    raw_pool = await asyncpg.create_pool(
        raw_dsn, min_size=concurrency, max_size=concurrency, reset=_no_reset
    )
    await raw_pool.execute("CREATE TABLE kv (k bytea PRIMARY KEY, v bytea NOT NULL)")
    keys = [key_of(i) for i in range(key_count)]
    await raw_pool.executemany("INSERT INTO kv VALUES ($1, $2)", [(k, value) for k in keys])
    store = await PostgresCellStore.connect(shard_dsns, pool_size=concurrency)
    oracle = await TimestampOracle.open(shard_dsns[0])
    client = TransactionClient(store, oracle)
    for i in range(0, key_count, 5000):
        async with client.begin() as txn:
            for k in keys[i : i + 5000]:
                txn.set(TABLE, k, COLUMN, value)
    await client.secondaries.drain()
    await raw_pool.execute("VACUUM ANALYZE kv")
    unbatched_store = await PostgresCellStore.connect(
        shard_dsns, pool_size=concurrency, coalesce=False
    )
    unbatched = TransactionClient(unbatched_store, oracle)
    return Setup(raw_pool, store, oracle, client, unbatched, keys)


async def throughput(
    op: Callable[[random.Random], Awaitable[bool]], concurrency: int, seconds: float
) -> float:
    """Operations per second that ``op`` completed (returned True) across concurrent tasks."""
    done = 0
    deadline = time.monotonic() + seconds

    async def loop(seed: int) -> None:
        nonlocal done
        rng = random.Random(seed)
        while time.monotonic() < deadline:
            if await op(rng):
                done += 1

    started = time.monotonic()
    await asyncio.gather(*(loop(i) for i in range(concurrency)))
    return done / (time.monotonic() - started)


def single_cell_ops(
    s: Setup, value: bytes
) -> dict[str, Callable[[random.Random], Awaitable[bool]]]:
    keys = s.keys

    async def raw_read(rng: random.Random) -> bool:
        async with s.raw_pool.acquire() as conn:
            await conn.fetchval("SELECT v FROM kv WHERE k = $1", rng.choice(keys))
        return True

    async def read(rng: random.Random) -> bool:
        txn = await s.client.begin()
        await txn.get(TABLE, rng.choice(keys), COLUMN)
        await txn.commit()
        return True

    async def read_unbatched(rng: random.Random) -> bool:
        txn = await s.unbatched.begin()
        await txn.get(TABLE, rng.choice(keys), COLUMN)
        await txn.commit()
        return True

    async def raw_write(rng: random.Random) -> bool:
        async with s.raw_pool.acquire() as conn:
            await conn.execute(
                "INSERT INTO kv VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = excluded.v",
                rng.choice(keys),
                value,
            )
        return True

    async def write(rng: random.Random) -> bool:
        txn = await s.client.begin()
        txn.set(TABLE, rng.choice(keys), COLUMN, value)
        try:
            await txn.commit()
        except Retryable:
            return False
        return True

    return {
        "raw_read": raw_read,
        "read": read,
        "read_unbatched": read_unbatched,
        "raw_write": raw_write,
        "write": write,
    }


async def bench_single_cell(s: Setup, args: argparse.Namespace, value: bytes) -> dict:
    ops = single_cell_ops(s, value)
    best: dict[str, float] = {}
    for _ in range(args.rounds):
        for name in ("raw_read", "read", "read_unbatched", "raw_write", "write"):
            rate = await throughput(ops[name], args.concurrency, args.seconds)
            best[name] = max(best.get(name, 0.0), rate)
    return {
        "raw_read_ops": round(best["raw_read"]),
        "read_ops": round(best["read"]),
        "read_ratio": round(best["read"] / best["raw_read"], 3),
        "read_unbatched_ops": round(best["read_unbatched"]),
        "read_unbatched_ratio": round(best["read_unbatched"] / best["raw_read"], 3),
        "raw_write_ops": round(best["raw_write"]),
        "write_ops": round(best["write"]),
        "write_ratio": round(best["write"] / best["raw_write"], 3),
        "concurrency": args.concurrency,
        "seconds_per_round": args.seconds,
        "rounds": args.rounds,
    }


async def bench_multi_cell(s: Setup, args: argparse.Namespace, value: bytes) -> dict:
    committed = conflicts = 0

    async def txn_op(rng: random.Random) -> bool:
        nonlocal committed, conflicts
        txn = await s.client.begin()
        for k in rng.sample(s.keys, args.cells):
            txn.set(TABLE, k, COLUMN, value)
        try:
            await txn.commit()
        except Retryable:
            conflicts += 1
            return False
        committed += 1
        return True

    async def raw_txn_op(rng: random.Random) -> bool:
        rows = [(k, value) for k in sorted(rng.sample(s.keys, args.cells))]  # no deadlocks
        async with s.raw_pool.acquire() as conn, conn.transaction():
            await conn.executemany(
                "INSERT INTO kv VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = excluded.v", rows
            )
        return True

    raw_rate = await throughput(raw_txn_op, args.concurrency, args.seconds)
    before = s.store.stats.snapshot()
    rate = await throughput(txn_op, args.concurrency, args.seconds)
    await s.client.secondaries.drain()
    after = s.store.stats.snapshot()
    by_op = {op: n - before.get(op, 0) for op, n in after.items() if n != before.get(op, 0)}
    trips = sum(by_op.values())
    return {
        "cells": args.cells,
        "shards": args.shards,
        "tx_per_s": round(rate, 1),
        "cells_per_s": round(rate * args.cells),
        "raw_tx_per_s": round(raw_rate, 1),
        "tx_ratio": round(rate / raw_rate, 3),
        "round_trips_per_commit": round(trips / max(committed, 1), 2),
        "round_trips_by_op": by_op,
        "committed": committed,
        "conflicts": conflicts,
        "concurrency": args.concurrency,
    }


async def bench_big_txn(s: Setup, args: argparse.Namespace) -> dict:
    """Peak RSS of committing one transaction of ``--big-cells`` cells of 100-byte values."""
    baseline_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    started = time.monotonic()
    async with s.client.begin() as txn:
        for i in range(args.big_cells):
            txn.set("big", f"row{i:09d}".encode(), COLUMN, bytes(100))
    await s.client.secondaries.drain()
    seconds = time.monotonic() - started
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "big_txn_cells": args.big_cells,
        "peak_rss_mb": round(peak_mb, 1),
        "rss_before_mb": round(baseline_mb, 1),
        "big_txn_seconds": round(seconds, 2),
    }


async def main_async(args: argparse.Namespace) -> dict:
    value = bytes(random.Random(0).getrandbits(8) for _ in range(args.value_bytes))
    with tempfile.TemporaryDirectory(prefix="percolator-bench-") as tmp:
        pg: EmbeddedPostgres | None = None
        server_dsn = args.store
        if server_dsn is None:
            pg = EmbeddedPostgres(Path(tmp))
            server_dsn = pg.start()
        try:
            s = await setup(server_dsn, args.shards, args.concurrency, args.keys, value)
            try:
                if args.big_cells:
                    return await bench_big_txn(s, args)
                if args.cells > 1:
                    return await bench_multi_cell(s, args, value)
                return await bench_single_cell(s, args, value)
            finally:
                await s.close()
        finally:
            if pg is not None:
                pg.stop()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", help="a Postgres server DSN (default: embedded)")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=5.0, help="per workload per round")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--cells", type=int, default=1, help="cells written per transaction")
    parser.add_argument("--shards", type=int, default=1)
    parser.add_argument(
        "--big-cells",
        type=int,
        default=0,
        help="measure peak RSS of one transaction of this many cells instead",
    )
    parser.add_argument("--json", action="store_true", help="print JSON only")


def run(args: argparse.Namespace) -> int:
    result = eventloop.run(main_async(args))
    if args.json:
        print(json.dumps(result))
    else:
        for name, value in result.items():
            print(f"{name:>24}: {value}")
    return 0
