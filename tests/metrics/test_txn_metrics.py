"""The transaction layer's metrics, driven directly (over the memory store: the same hooks run
over Postgres, which the SQL and process tests cover): lock waits and resolutions, GC, the
batching timestamp client."""

from __future__ import annotations

import asyncio

import pytest

from percolator.server.storage.cells import CellKey, Mutation, WriteKind, ts_physical_ms
from percolator.server.storage.memory_store import MemoryCellStore
from percolator.server.txn.client import TransactionClient
from percolator.server.txn.config import TxnConfig
from percolator.server.txn.errors import LockWaitTimeout
from percolator.server.txn.gc import collect_garbage
from percolator.server.txn.timestamp_client import BatchingTimestampSource
from tests.metrics.conftest import delta, registry_samples, value
from tests.txn.conftest import WallClock


class Deltas:
    """How far samples of the registry moved since this was created."""

    def __init__(self) -> None:
        self._before = registry_samples()

    def moved(self, name: str, **labels: str) -> float:
        return delta(self._before, registry_samples(), name, **labels)


RESOLUTIONS = "percolator_lock_resolutions_total"


async def _orphan_lock(
    store: MemoryCellStore, clock: WallClock, keys: list[CellKey], ttl_ms: int
) -> int:
    """Prewrite ``keys`` (the first is the primary) as a transaction that then vanishes."""
    start_ts = await clock.get_timestamp()
    mutations = [Mutation(k, WriteKind.PUT, b"orphan") for k in keys]
    assert await store.prewrite(start_ts, keys[0], ttl_ms, mutations) == []
    return start_ts


async def test_lock_resolutions_by_outcome() -> None:
    store, clock = MemoryCellStore(), WallClock()
    client = TransactionClient(store, clock, TxnConfig(lock_wait_timeout_s=2.0))
    d = Deltas()
    # A dead transaction's expired locks: rolled back by the reader.
    dead = [CellKey("t", b"a", "v"), CellKey("t", b"b", "v")]
    await _orphan_lock(store, clock, dead, ttl_ms=1)
    await asyncio.sleep(0.01)
    async with client.begin() as txn:
        assert await txn.get_many(dead) == [None, None]
    assert d.moved(RESOLUTIONS, outcome="roll_back") == 2

    # A transaction that committed its primary and died before its secondary: rolled forward.
    keys = [CellKey("t", b"c", "v"), CellKey("t", b"d", "v")]
    start_ts = await _orphan_lock(store, clock, keys, ttl_ms=60_000)
    assert await store.commit(start_ts, await clock.get_timestamp(), keys[:1]) == []
    async with client.begin() as txn:
        assert await txn.get("t", b"d", "v") == b"orphan"
    assert d.moved(RESOLUTIONS, outcome="roll_forward") == 1
    assert d.moved("percolator_lock_wait_seconds_count") == 0  # neither had to wait
    await client.close()


async def test_lock_waits_and_timeouts() -> None:
    store, clock = MemoryCellStore(), WallClock()
    client = TransactionClient(store, clock, TxnConfig(lock_wait_timeout_s=0.3))
    d = Deltas()
    key = CellKey("t", b"live", "v")
    start_ts = await _orphan_lock(store, clock, [key], ttl_ms=60_000)  # a live owner
    txn = await client.begin()
    with pytest.raises(LockWaitTimeout):
        await txn.get("t", b"live", "v")
    await txn.rollback()
    assert d.moved("percolator_lock_wait_timeouts_total") == 1
    assert d.moved("percolator_lock_wait_seconds_count") == 1
    assert d.moved(RESOLUTIONS, outcome="held") >= 1

    # The owner rolls back while a reader waits: one wait that ends without a timeout.
    async def owner_gives_up() -> None:
        await asyncio.sleep(0.05)
        await store.rollback(start_ts, [key], leave_marker=True)

    async with client.begin() as txn:
        giving_up = asyncio.create_task(owner_gives_up())
        assert await txn.get("t", b"live", "v") is None
        await giving_up
    assert d.moved("percolator_lock_wait_seconds_count") == 2
    assert d.moved("percolator_lock_wait_timeouts_total") == 1
    assert d.moved("percolator_lock_wait_seconds_sum") >= 0.3 + 0.05
    await client.close()


async def test_gc_metrics() -> None:
    store, clock = MemoryCellStore(), WallClock()
    client = TransactionClient(store, clock)
    d = Deltas()
    for v in (b"1", b"2", b"3"):
        async with client.begin() as txn:
            txn.set("t", b"row", "v", v)
    safe_point = await clock.get_timestamp()
    report = await collect_garbage(store, client.resolver, safe_point)
    assert report.removed.versions_removed == 2  # the newest version below it stays
    assert d.moved("percolator_gc_passes_total", result="ok") == 1
    assert d.moved("percolator_gc_versions_removed_total") == 2
    assert (
        value(registry_samples(), "percolator_gc_safe_point_seconds")
        == ts_physical_ms(safe_point) / 1000
    )
    await client.close()


async def test_timestamp_client_batches() -> None:
    """Requests waiting together share one request; its size and latency are observed."""
    d = Deltas()
    next_ts = 1000
    fail = False

    async def fetch(count: int) -> int:
        nonlocal next_ts
        await asyncio.sleep(0.01)
        if fail:
            raise ConnectionError("coordinator gone")
        first, next_ts = next_ts, next_ts + count
        return first

    source = BatchingTimestampSource(fetch, "test")
    # Ten requests waiting before the first request is sent share it.
    got = await asyncio.gather(*(source.get_timestamp() for _ in range(10)))
    assert sorted(got) == list(range(1000, 1010))
    assert await source.get_timestamp() == 1010  # alone
    assert source.rpc_count == 2
    assert d.moved("percolator_timestamp_client_batch_size_count") == 2
    assert d.moved("percolator_timestamp_client_batch_size_sum") == 11
    assert d.moved("percolator_timestamp_client_rpc_seconds_count") == 2
    fail = True
    with pytest.raises(ConnectionError):
        await source.get_timestamp()
    assert d.moved("percolator_timestamp_client_rpc_errors_total") == 1
    assert d.moved("percolator_timestamp_client_rpc_seconds_count") == 2  # successes only
    await source.close()
