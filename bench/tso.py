"""``percolator bench tso``: timestamps per second delivered through the coordinator.

For each number of concurrent requesters (asyncio tasks, each looping
``await source.get_timestamp()``), three figures from the same run:

- ``timestamps_per_s``: through a :class:`GrpcTimestampSource` (batching, one RPC in flight) to a
  ``percolator coordinator`` running in a separate process, so client and server do not share an
  event loop or a core;
- baseline ``unbatched_rpc_per_s``: the same requesters each sending their own RPC for one
  timestamp, i.e. the raw gRPC round-trip rate, what a client without batching gets. The gap
  between the two is what batching buys. Concurrency is capped at 1,000 RPCs: beyond about that
  many concurrent unary calls on one channel, grpc.aio starts failing calls with CANCELLED;
- baseline ``in_process_per_s``: the same requesters on the same batching client whose "RPC" is
  ``allocate`` on an oracle in this process: no network at all, so the ceiling the client's
  batching and this event loop can deliver to that many tasks. The gap between it and
  ``timestamps_per_s`` is what the RPC costs.

Plus ``oracle_allocate_per_s``: one task looping ``oracle.allocate(1)`` in process.

Every requester checks that its timestamps strictly increase. The JSON has ``timestamps_per_s``,
``unbatched_rpc_per_s`` and ``in_process_per_s`` as dicts keyed by the requester count (a string),
``rpcs_per_s`` and ``mean_batch`` for the batched runs, and ``oracle_allocate_per_s``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

import grpc

from percolator.server.storage.embedded import EmbeddedPostgres
from percolator.server.txn import eventloop
from percolator.server.txn.proto import coordinator_pb2 as pb
from percolator.server.txn.proto import coordinator_pb2_grpc as pb_grpc
from percolator.server.txn.timestamp_client import BatchingTimestampSource, GrpcTimestampSource
from percolator.server.txn.timestamps import TimestampOracle

TARGET_PER_S = 1_000_000
PAPER_PER_S = 2_000_000
WARMUP_S = 0.3
BASELINE_TABLE = "percolator_oracle_bench"
MAX_UNBATCHED = 1000


@dataclass
class TsoResult:
    """The figures of one run (see the module docstring)."""

    event_loop: str
    duration_s: float
    timestamps_per_s: dict[str, float] = field(default_factory=dict)
    rpcs_per_s: dict[str, float] = field(default_factory=dict)
    mean_batch: dict[str, float] = field(default_factory=dict)
    unbatched_rpc_per_s: dict[str, float] = field(default_factory=dict)
    in_process_per_s: dict[str, float] = field(default_factory=dict)
    oracle_allocate_per_s: float = 0.0
    target_per_s: int = TARGET_PER_S
    paper_per_s: int = PAPER_PER_S


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``percolator bench tso``."""
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument(
        "--requesters",
        default="1,100,10000",
        help="comma-separated numbers of concurrent requesters (default 1,100,10000)",
    )
    p.add_argument(
        "--duration", type=float, default=2.0, help="seconds measured per figure (default 2)"
    )
    p.add_argument(
        "--store",
        metavar="DSN",
        help="Postgres for the oracle's mark (default: an embedded one in a temporary folder)",
    )


def run(args: argparse.Namespace) -> int:
    """Start the coordinator process, measure, print."""
    counts = [int(n) for n in args.requesters.split(",") if n.strip()]
    with _store(args.store) as dsn, _coordinator_process(dsn) as address:
        result = eventloop.run(_measure(address, dsn, counts, args.duration))
    if args.json:
        print(json.dumps(asdict(result)))
    else:
        _print_table(result)
    return 0


@contextmanager
def _store(dsn: str | None) -> Iterator[str]:
    if dsn is not None:
        yield dsn
        return
    folder = Path(tempfile.mkdtemp(prefix="percolator-bench-"))
    pg = EmbeddedPostgres(folder)
    try:
        yield pg.start()
    finally:
        pg.stop()
        shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def _coordinator_process(dsn: str) -> Iterator[str]:
    cmd = [sys.executable, "-m", "percolator.server.cli", "coordinator"]
    cmd += ["--listen", "127.0.0.1:0", "--store", dsn]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if " on " not in line:
            proc.kill()
            _out, err = proc.communicate(timeout=10)
            raise RuntimeError(f"coordinator did not start: {line}{err}")
        yield line.rsplit(" on ", 1)[1].strip()
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@dataclass
class _Rate:
    per_s: float
    calls_per_s: float


async def _rate(
    get: Callable[[], Awaitable[int]],
    requesters: int,
    duration_s: float,
    calls: Callable[[], int] = lambda: 0,
) -> _Rate:
    """Timestamps per second delivered to ``requesters`` tasks looping on ``get``, and how many
    times per second the ``calls`` counter moved meanwhile."""
    done = 0
    stop = False

    async def requester() -> None:
        nonlocal done
        last = 0
        while not stop:
            ts = await get()
            if ts <= last:
                raise AssertionError(f"timestamp went backwards: {ts} after {last}")
            last = ts
            done += 1

    tasks = [asyncio.create_task(requester()) for _ in range(requesters)]
    await asyncio.sleep(WARMUP_S)
    start_done, start_calls, start = done, calls(), time.perf_counter()
    await asyncio.sleep(duration_s)
    end_done, end_calls, end = done, calls(), time.perf_counter()
    stop = True
    await asyncio.gather(*tasks)
    elapsed = end - start
    return _Rate((end_done - start_done) / elapsed, (end_calls - start_calls) / elapsed)


async def _measure(address: str, dsn: str, counts: list[int], duration_s: float) -> TsoResult:
    result = TsoResult(eventloop.loop_name(), duration_s)
    for n in counts:
        async with GrpcTimestampSource(address) as source:
            await source.get_timestamp()  # connect before measuring
            rate = await _rate(source.get_timestamp, n, duration_s, lambda: source.rpc_count)
        result.timestamps_per_s[str(n)] = rate.per_s
        result.rpcs_per_s[str(n)] = rate.calls_per_s
        result.mean_batch[str(n)] = rate.per_s / rate.calls_per_s if rate.calls_per_s else 0.0

    async with grpc.aio.insecure_channel(address) as channel:
        stub = pb_grpc.CoordinatorStub(channel)
        one = pb.GetTimestampsRequest(count=1)

        async def unbatched() -> int:
            response = await stub.GetTimestamps(one, timeout=30)
            return response.first

        for n in counts:
            rate = await _rate(unbatched, min(n, MAX_UNBATCHED), duration_s)
            result.unbatched_rpc_per_s[str(n)] = rate.per_s

    oracle = await TimestampOracle.open(dsn, table=BASELINE_TABLE)
    try:
        result.oracle_allocate_per_s = (await _rate(oracle.get_timestamp, 1, duration_s)).per_s
        local = BatchingTimestampSource(oracle.allocate, "in-process oracle")
        for n in counts:
            rate = await _rate(local.get_timestamp, n, duration_s)
            result.in_process_per_s[str(n)] = rate.per_s
        await local.close()
    finally:
        await oracle.close()
    return result


def _print_table(r: TsoResult) -> None:
    print(f"percolator bench tso ({r.event_loop}, {r.duration_s:g}s per figure, pid {os.getpid()})")
    print(
        f"{'requesters':>10}  {'via coordinator':>15}  {'mean batch':>10}  "
        f"{'baseline: unbatched RPCs':>24}  {'baseline: in-process':>20}"
    )
    for n in r.timestamps_per_s:
        print(
            f"{n:>10}  {r.timestamps_per_s[n]:>13,.0f}/s  {r.mean_batch[n]:>10,.1f}  "
            f"{r.unbatched_rpc_per_s.get(n, 0):>22,.0f}/s  {r.in_process_per_s.get(n, 0):>18,.0f}/s"
        )
    print(f"in-process oracle.allocate(1) loop: {r.oracle_allocate_per_s:,.0f}/s")
    print(f"target {r.target_per_s:,}/s; the paper reports {r.paper_per_s:,}/s")
