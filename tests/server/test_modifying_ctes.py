"""How a statement with data-modifying CTEs hides its own writes from its reads
(server/planner/modifying_ctes.py), over the in-memory store: the SQL behaviour is compared
with Postgres in test_sql_semantics.py (script ``modifying_ctes``) and
isolation/modifying-cte.spec."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from percolator.server.planner.modifying_ctes import OwnWrites
from percolator.server.storage.memory_store import MemoryCellStore
from percolator.server.txn.client import TransactionClient
from percolator.server.txn.transaction import Transaction
from tests.txn.conftest import FAST_CONFIG, WallClock


@pytest.fixture
async def txn() -> AsyncIterator[Transaction]:
    """A transaction that wrote row ``a`` before the statement began."""
    client = TransactionClient(MemoryCellStore(shards=1), WallClock(), FAST_CONFIG)
    async with client.begin() as setup:
        setup.set("t", b"old", "v", b"0")
    txn = await client.begin()
    txn.set("t", b"a", "v", b"1")
    yield txn
    await txn.rollback()
    await client.close()


async def rows(txn: Transaction) -> dict[bytes, bytes]:
    return {row: cells["v"] async for row, cells in txn.scan("t")}


async def test_reads_see_the_writes_from_before_the_statement_only(txn: Transaction) -> None:
    own = OwnWrites(txn)
    txn.set("t", b"b", "v", b"2")  # the statement's writes
    txn.delete("t", b"old", "v")
    assert own.changed_rows() == {("t", b"b"), ("t", b"old")}
    async with own.hidden():
        assert await rows(txn) == {b"a": b"1", b"old": b"0"}
        assert await txn.get("t", b"b", "v") is None
    assert await rows(txn) == {b"a": b"1", b"b": b"2"}


async def test_writes_made_while_hidden_are_kept(txn: Transaction) -> None:
    own = OwnWrites(txn)
    txn.set("t", b"b", "v", b"2")
    async with own.hidden():
        txn.set("t", b"c", "v", b"3")
        txn.lock("t", b"b", "v")  # a read's LOCK record does not replace a write
    assert await rows(txn) == {b"a": b"1", b"b": b"2", b"c": b"3", b"old": b"0"}


async def test_an_error_while_hidden_brings_the_writes_back(txn: Transaction) -> None:
    own = OwnWrites(txn)
    txn.set("t", b"b", "v", b"2")
    with pytest.raises(RuntimeError):
        async with own.hidden():
            raise RuntimeError("the part failed")
    assert await rows(txn) == {b"a": b"1", b"b": b"2", b"old": b"0"}


async def test_a_row_lock_is_no_change(txn: Transaction) -> None:
    own = OwnWrites(txn)
    assert own.changed_rows() == set()
    txn.lock("t", b"old", "v")  # a row lock is no change
    assert own.changed_rows() == set()
    async with own.hidden():
        assert await rows(txn) == {b"a": b"1", b"old": b"0"}
