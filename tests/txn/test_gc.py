"""MVCC GC: removes unreadable versions without losing a committed write."""

from __future__ import annotations

import pytest

from percolator.server.storage.cells import CellKey, Mutation, WriteKind
from percolator.server.txn.client import TransactionClient
from percolator.server.txn.errors import TransactionTooOld
from percolator.server.txn.gc import collect_garbage

from .conftest import WallClock


async def write(client: TransactionClient, row: bytes, value: bytes) -> None:
    async with client.begin() as txn:
        txn.set("t", row, "c", value)
    await client.secondaries.drain()


async def test_gc_removes_old_versions_and_keeps_the_snapshot(
    client: TransactionClient, clock: WallClock
) -> None:
    for i in range(5):
        await write(client, b"a", f"v{i}".encode())
    reader = await client.begin()
    await write(client, b"a", b"after")
    report = await collect_garbage(client.store, client.resolver, reader.start_ts)
    assert report.removed.versions_removed == 4
    assert await reader.get("t", b"a", "c") == b"v4"
    async with client.begin() as txn:
        assert await txn.get("t", b"a", "c") == b"after"


async def test_gc_rolls_forward_before_removing_a_primary_commit_record(
    client: TransactionClient, clock: WallClock
) -> None:
    store = client.store
    p, s = CellKey("t", b"p", "c"), CellKey("t", b"s", "c")
    start_ts = await clock.get_timestamp()
    muts = [Mutation(p, WriteKind.PUT, b"p1"), Mutation(s, WriteKind.PUT, b"s1")]
    assert await store.prewrite(start_ts, p, 300, muts) == []
    commit_ts = await clock.get_timestamp()
    assert await store.commit(start_ts, commit_ts, [p]) == []  # the committer dies here
    await write(client, b"p", b"p2")  # shadows the primary's commit record
    report = await collect_garbage(store, client.resolver, await clock.get_timestamp())
    assert report.locks_resolved == 1
    async with client.begin() as txn:
        assert await txn.get("t", b"s", "c") == b"s1"
        assert await txn.get("t", b"p", "c") == b"p2"


async def test_transaction_older_than_the_safe_point_cannot_read(
    client: TransactionClient, clock: WallClock
) -> None:
    await write(client, b"a", b"1")
    old = await client.begin()
    await write(client, b"a", b"2")
    await collect_garbage(client.store, client.resolver, await clock.get_timestamp())
    with pytest.raises(TransactionTooOld):
        await old.get("t", b"a", "c")
    with pytest.raises(TransactionTooOld):
        [row async for row in old.scan("t")]


async def test_transaction_older_than_the_safe_point_cannot_commit(
    client: TransactionClient, clock: WallClock
) -> None:
    old = await client.begin()
    old.set("t", b"x", "c", b"1")
    await collect_garbage(client.store, client.resolver, await clock.get_timestamp())
    with pytest.raises(TransactionTooOld):
        await old.commit()


async def test_coordinator_gc_waits_for_reported_transactions(fresh_dsns) -> None:
    """Periodic GC in the coordinator never collects what a reported running transaction
    reads; once that client stops reporting (crashed, lease over), GC catches up."""
    import asyncio

    from percolator.server.storage.postgres_store import PostgresCellStore
    from percolator.server.txn.coordinator import start_coordinator
    from percolator.server.txn.liveness import LivenessReporter
    from percolator.server.txn.timestamp_client import CoordinatorClient, GrpcTimestampSource

    dsns = await fresh_dsns(2)
    store = await PostgresCellStore.connect(dsns)
    handle = await start_coordinator(
        "127.0.0.1:0", dsns[0], gc_lifetime_ms=1, gc_store=store, gc_interval_s=0.2
    )
    clock = GrpcTimestampSource(handle.address)
    client = TransactionClient(store, clock)
    control = CoordinatorClient(handle.address)
    reporter = LivenessReporter(control, client.min_running_start_ts, interval_s=0.1, lease_ms=500)
    await write(client, b"a", b"old")
    reader = await client.begin()
    await reporter.report()  # the reader is registered before anything newer is written
    reporter.start()
    for i in range(5):
        await write(client, b"a", f"new{i}".encode())
    await asyncio.sleep(1.0)  # five GC passes
    assert await reader.get("t", b"a", "c") == b"old"

    await reporter.stop()
    await reader.rollback()
    await asyncio.sleep(1.5)  # the lease ends; GC passes at a safe point near now
    async with client.begin() as txn:
        assert await txn.get("t", b"a", "c") == b"new4"
    versions = 0
    import asyncpg

    for dsn in dsns:
        conn = await asyncpg.connect(dsn)
        versions += await conn.fetchval(
            "SELECT count(*) FROM percolator_write WHERE tbl = 't' AND rkey = 'a'"
        )
        await conn.close()
    assert versions == 1, "only the newest version is left"
    await client.close()
    await control.close()
    await clock.close()
    await handle.stop()
    await store.close()
