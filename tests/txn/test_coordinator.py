"""The coordinator over gRPC: batching rules, restarts, liveness and the GC safe point."""

from __future__ import annotations

import asyncio
import bisect
import itertools
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from percolator.server.storage.cells import ts_from_physical_ms
from percolator.server.txn.coordinator import CoordinatorHandle, start_coordinator
from percolator.server.txn.liveness import LivenessRegistry, LivenessReporter
from percolator.server.txn.timestamp_client import (
    BatchingTimestampSource,
    CoordinatorClient,
    CoordinatorUnavailable,
    GrpcTimestampSource,
)

NOW_TS = ts_from_physical_ms(1_700_000_000_000)


@pytest.fixture
async def coordinator(fresh_dsns) -> AsyncIterator[CoordinatorHandle]:
    (dsn,) = await fresh_dsns(1)
    handle = await start_coordinator("127.0.0.1:0", dsn, gc_lifetime_ms=60_000)
    yield handle
    await handle.stop()


def record_allocations(handle: CoordinatorHandle) -> list[int]:
    """Counts of the ranges the coordinator hands out, whatever the RPC (seen at the oracle)."""
    counts: list[int] = []
    original = handle.oracle.try_allocate

    def recording(count: int) -> int | None:
        first = original(count)
        if first is not None:  # None = retried after persisting: the same request again
            counts.append(count)
        return first

    handle.oracle.try_allocate = recording  # type: ignore[method-assign]
    return counts


@dataclass(frozen=True)
class Op:
    started: int
    returned: int
    ts: int


async def test_timestamps_are_linearizable_across_clients(
    coordinator: CoordinatorHandle,
) -> None:
    """Every timestamp is above every timestamp returned (by any client) before it was asked."""
    clock = itertools.count()
    ops: list[Op] = []
    sources = [GrpcTimestampSource(coordinator.address) for _ in range(3)]

    async def requester(source: GrpcTimestampSource) -> None:
        for _ in range(15):
            started = next(clock)
            ts = await source.get_timestamp()
            ops.append(Op(started, next(clock), ts))

    try:
        await asyncio.gather(*(requester(s) for s in sources for _ in range(100)))
    finally:
        for s in sources:
            await s.close()
    assert len({op.ts for op in ops}) == len(ops) == 3 * 100 * 15
    by_return = sorted(ops, key=lambda op: op.returned)
    returned_at = [op.returned for op in by_return]
    prefix_max = list(itertools.accumulate((op.ts for op in by_return), max))
    for op in ops:
        before = bisect.bisect_left(returned_at, op.started)
        if before:
            assert op.ts > prefix_max[before - 1]
    # Batching did happen: far fewer requests than timestamps.
    assert sum(s.rpc_count for s in sources) < len(ops) / 10


async def test_client_never_keeps_timestamps_for_later(coordinator: CoordinatorHandle) -> None:
    counts = record_allocations(coordinator)
    async with (
        GrpcTimestampSource(coordinator.address) as batching,
        CoordinatorClient(coordinator.address) as other,
    ):
        t_a = await batching.get_timestamp()
        t_b = await other.get_timestamps(1)
        t_c = await batching.get_timestamp()
        assert t_a < t_b < t_c  # a kept leftover of the first request would be below t_b
        # Requesters waiting together share one request of exactly their number.
        together = await asyncio.gather(*(batching.get_timestamp() for _ in range(50)))
        assert sorted(together) == together and together[0] > t_c
        t_d = await other.get_timestamps(1)
        assert await batching.get_timestamp() > t_d
    assert counts == [1, 1, 1, 50, 1, 1]


class GatedFetch:
    """An in-process oracle that allocates as soon as asked and whose answers the test releases
    one at a time (a slow network back)."""

    def __init__(self) -> None:
        self.next = 1
        self.requested: list[int] = []
        self.gate = asyncio.Event()

    def allocate_now(self, count: int) -> int:
        first, self.next = self.next, self.next + count
        return first

    async def __call__(self, count: int) -> int:
        self.requested.append(count)
        first = self.allocate_now(count)
        await self.gate.wait()
        self.gate.clear()
        return first


async def yield_until(predicate, timeout_s: float = 2.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline
        await asyncio.sleep(0)


async def test_requests_arriving_during_a_call_wait_for_the_next_one() -> None:
    fetch = GatedFetch()
    source = BatchingTimestampSource(fetch, "gated")
    first = asyncio.ensure_future(source.get_timestamp())
    await yield_until(lambda: fetch.requested == [1])
    # While the first answer travels back, another client takes a timestamp, then three
    # requesters arrive: sharing the first answer would give them timestamps below it.
    other = fetch.allocate_now(1)
    later = [asyncio.ensure_future(source.get_timestamp()) for _ in range(3)]
    await asyncio.sleep(0)
    fetch.gate.set()
    assert await first < other
    await yield_until(lambda: len(fetch.requested) == 2)
    assert fetch.requested == [1, 3]  # one call in flight, then exactly the three waiting
    fetch.gate.set()
    values = await asyncio.gather(*later)
    assert all(v > other for v in values)
    await source.close()


async def test_cancelled_requester_does_not_disturb_its_batch() -> None:
    fetch = GatedFetch()
    source = BatchingTimestampSource(fetch, "gated")
    waiters = [asyncio.ensure_future(source.get_timestamp()) for _ in range(3)]
    await yield_until(lambda: fetch.requested == [3])
    waiters[1].cancel()
    await asyncio.sleep(0)
    fetch.gate.set()
    first, last = await waiters[0], await waiters[2]
    assert last == first + 2
    assert waiters[1].cancelled()
    await source.close()


async def test_close_fails_waiting_requesters() -> None:
    fetch = GatedFetch()
    source = BatchingTimestampSource(fetch, "gated")
    waiter = asyncio.ensure_future(source.get_timestamp())
    await yield_until(lambda: fetch.requested == [1])
    await source.close()
    with pytest.raises(Exception, match="gated"):
        await waiter


async def test_unreachable_coordinator_fails_within_bounded_time() -> None:
    target = "127.0.0.1:1"
    started = time.monotonic()
    async with GrpcTimestampSource(target, timeout_s=1.0) as source:
        with pytest.raises(CoordinatorUnavailable, match=target):
            await source.get_timestamp()
    async with CoordinatorClient(target, timeout_s=1.0) as client:
        with pytest.raises(CoordinatorUnavailable, match=target):
            await client.get_safe_point()
    assert time.monotonic() - started < 5


def test_registry_leases_expire() -> None:
    now = [100.0]
    registry = LivenessRegistry(clock=lambda: now[0])
    ms = ts_from_physical_ms
    registry.keep_alive("a", NOW_TS - ms(5_000), lease_ms=1000)
    registry.keep_alive("b", NOW_TS - ms(9_000), lease_ms=500)
    registry.keep_alive("idle", 0, lease_ms=10_000)
    lifetime_ms = 1000
    assert registry.safe_point(NOW_TS, lifetime_ms) == NOW_TS - ms(9_000) - 1
    now[0] += 0.6  # b's lease ended
    assert {c.client_id for c in registry.live_clients()} == {"a", "idle"}
    assert registry.safe_point(NOW_TS, lifetime_ms) == NOW_TS - ms(5_000) - 1
    registry.keep_alive("a", 0, lease_ms=0)  # a leaves
    assert registry.safe_point(NOW_TS, lifetime_ms) == NOW_TS - ms(lifetime_ms)
    now[0] += 10  # everyone expired
    assert registry.live_clients() == []


def test_safe_point_is_bounded_by_gc_lifetime() -> None:
    registry = LivenessRegistry()
    registry.keep_alive("a", NOW_TS - 5, lease_ms=1000)
    ten_minutes = 600_000
    assert registry.safe_point(NOW_TS, ten_minutes) == NOW_TS - ts_from_physical_ms(ten_minutes)
    with pytest.raises(ValueError):
        registry.keep_alive("", 1, 1000)


async def test_safe_point_over_grpc(coordinator: CoordinatorHandle) -> None:
    async with CoordinatorClient(coordinator.address) as client:
        source = GrpcTimestampSource(coordinator.address)
        start_ts = await source.get_timestamp()
        await source.close()
        # Nothing running: the lifetime (60 s here) bounds the safe point.
        assert await client.get_safe_point() < start_ts - ts_from_physical_ms(59_000)
        reporter = LivenessReporter(client, lambda: start_ts, interval_s=1, lease_ms=5000)
        await reporter.report()
        assert await client.get_safe_point() < start_ts - ts_from_physical_ms(59_000)
        # A transaction older than the lifetime holds the safe point just below its start_ts.
        old_ts = start_ts - ts_from_physical_ms(120_000)
        assert await client.keep_alive("old-client", old_ts, 5000)
        assert await client.get_safe_point() == old_ts - 1
        await client.keep_alive("old-client", 0, 0)
        assert await client.get_safe_point() > old_ts
        await reporter.stop()
        assert [c.client_id for c in coordinator.registry.live_clients()] == []


async def read_address(proc: asyncio.subprocess.Process) -> str:
    assert proc.stdout is not None
    line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
    assert " on " in line, line
    return line.rsplit(" on ", 1)[1].strip()


async def start_process(dsn: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "percolator.server.cli",
        "coordinator",
        "--listen",
        "127.0.0.1:0",
        "--store",
        dsn,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


async def test_process_killed_and_restarted_only_goes_up(fresh_dsns) -> None:
    (dsn,) = await fresh_dsns(1)
    proc = await start_process(dsn)
    try:
        address = await read_address(proc)
        highest = 0
        async with CoordinatorClient(address) as client:
            # Run the oracle seconds ahead of the wall clock, so that a restart that ignored the
            # persisted mark would hand out smaller timestamps.
            for _ in range(8):
                count = 1 << 28
                highest = await client.get_timestamps(count) + count - 1
        async with GrpcTimestampSource(address) as source:
            highest = max(highest, *[await source.get_timestamp() for _ in range(10)])
    finally:
        proc.send_signal(signal.SIGKILL)
        await proc.wait()

    proc = await start_process(dsn)
    try:
        address = await read_address(proc)
        async with GrpcTimestampSource(address) as source:
            assert await source.get_timestamp() > highest
        proc.send_signal(signal.SIGTERM)  # clean shutdown
        assert await asyncio.wait_for(proc.wait(), 15) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
