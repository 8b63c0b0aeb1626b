"""Fixtures for the transaction layer: a client over each store."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest

from percolator.server.storage.cells import ts_from_physical_ms
from percolator.server.storage.memory_store import MemoryCellStore
from percolator.server.storage.store import CellStore
from percolator.server.txn.client import TransactionClient
from percolator.server.txn.config import TxnConfig


class WallClock:
    """An in-process hybrid clock for tests: strictly increasing, wall-clock milliseconds in the
    high bits like the real oracle, without persistence. Counts how often it was asked."""

    def __init__(self) -> None:
        self._last = 0
        self.calls = 0

    async def get_timestamp(self) -> int:
        self.calls += 1
        self._last = max(self._last + 1, ts_from_physical_ms(int(time.time() * 1000)))
        return self._last


async def open_store(request: pytest.FixtureRequest, kind: str) -> CellStore:
    """A store of the given kind: "memory", "postgres" or "postgres-2-shards"."""
    if kind == "memory":
        return MemoryCellStore(shards=2)
    from percolator.server.storage.postgres_store import PostgresCellStore

    fresh_dsns = request.getfixturevalue("fresh_dsns")
    dsns = await fresh_dsns(2 if kind.endswith("2-shards") else 1)
    return await PostgresCellStore.connect(dsns)


FAST_CONFIG = TxnConfig(lock_wait_timeout_s=2.0, base_lock_ttl_ms=300)


@pytest.fixture(params=["memory", "postgres-2-shards"])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[CellStore]:
    s = await open_store(request, request.param)
    yield s
    await s.close()


@pytest.fixture
def clock() -> WallClock:
    return WallClock()


@pytest.fixture
async def client(store: CellStore, clock: WallClock) -> AsyncIterator[TransactionClient]:
    c = TransactionClient(store, clock, FAST_CONFIG)
    yield c
    await c.close()
