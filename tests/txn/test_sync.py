"""The blocking facade, as a script would use it."""

from __future__ import annotations

import pytest

from percolator.server.storage.memory_store import MemoryCellStore
from percolator.server.txn.client import TransactionClient
from percolator.server.txn.errors import WriteConflict
from percolator.server.txn.sync import SyncTransaction, SyncTransactionClient

from .conftest import FAST_CONFIG, WallClock


def test_sync_facade_commits_reads_scans_and_retries() -> None:
    async def open_client() -> TransactionClient:
        return TransactionClient(MemoryCellStore(), WallClock(), FAST_CONFIG)

    with SyncTransactionClient(open_client) as db:
        with db.begin() as txn:
            for i in range(5):
                txn.set("t", f"r{i}".encode(), "c", str(i).encode())
        with db.begin() as txn:
            assert txn.get("t", b"r3", "c") == b"3"
            assert [row for row, _ in txn.scan("t", b"r1", b"r4")] == [b"r1", b"r2", b"r3"]

        a, b = db.begin(), db.begin()
        a.set("t", b"r0", "c", b"a")
        b.set("t", b"r0", "c", b"b")
        a.commit()
        with pytest.raises(WriteConflict):
            b.commit()

        def append(txn: SyncTransaction) -> bytes | None:
            current = txn.get("t", b"r0", "c")
            txn.set("t", b"r0", "c", (current or b"") + b"!")
            return current

        assert db.run_in_transaction(append) == b"a"
        with db.begin() as txn:
            assert txn.get("t", b"r0", "c") == b"a!"
