"""The ``store`` fixture: every contract test runs on each store (memory, Postgres on 1 and 2
shards)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from percolator.server.storage.memory_store import MemoryCellStore
from percolator.server.storage.store import CellStore


@pytest.fixture(params=["memory", "postgres", "postgres-2-shards"])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[CellStore]:
    """A fresh, empty store of each kind."""
    if request.param == "memory":
        s: CellStore = MemoryCellStore()
    else:
        from percolator.server.storage.postgres_store import PostgresCellStore

        fresh_dsns = request.getfixturevalue("fresh_dsns")
        dsns = await fresh_dsns(2 if request.param.endswith("2-shards") else 1)
        s = await PostgresCellStore.connect(dsns)
    yield s
    await s.close()
