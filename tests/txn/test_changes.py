"""Change streams: closed timestamps and reading a table's changes; the GC barrier of a job."""

from __future__ import annotations

import asyncio
import random
from typing import Any

from percolator.server.storage.cells import CellKey, Change, Mutation, WriteKind
from percolator.server.storage.store import CellStore
from percolator.server.txn.changes import closed_timestamp, read_changes
from percolator.server.txn.client import TransactionClient
from percolator.server.txn.coordinator import start_coordinator
from percolator.server.txn.distributed import (
    abort_distributed,
    begin_distributed,
    commit_distributed,
)
from percolator.server.txn.errors import Retryable
from percolator.server.txn.gc_barrier import hold_gc, hold_id, release_gc
from percolator.server.txn.timestamp_client import CoordinatorClient

from .conftest import FAST_CONFIG, WallClock

T = "t"


def k(row: str, col: str = "c", table: str = T) -> CellKey:
    return CellKey(table, row.encode(), col)


async def all_changes(client: TransactionClient, upto: int) -> list[Change]:
    return [c async for c in read_changes(client, T, 0, upto, page_size=7)]


async def crashed_after_commit_point(
    store: CellStore, clock: WallClock, cells: dict[CellKey, bytes]
) -> tuple[int, int]:
    """A committer that died right after committing its primary (the first cell): the other
    cells stay locks until someone rolls them forward."""
    start_ts = await clock.get_timestamp()
    muts = [Mutation(key, WriteKind.PUT, v) for key, v in cells.items()]
    assert await store.prewrite(start_ts, muts[0].key, 300, muts) == []
    commit_ts = await clock.get_timestamp()
    assert await store.commit(start_ts, commit_ts, [muts[0].key]) == []
    return start_ts, commit_ts


async def test_closed_timestamp_stays_below_a_lazily_committed_secondary(
    client: TransactionClient, clock: WallClock
) -> None:
    async with client.begin() as txn:
        txn.set(T, b"a", "c", b"1")
    first = txn.commit_ts
    assert first is not None
    start_ts, commit_ts = await crashed_after_commit_point(
        client.store, clock, {k("p", table="other"): b"p", k("b"): b"2"}
    )
    closed = await closed_timestamp(client, T, resolve_after_ms=None)
    assert first <= closed < start_ts
    assert [(c.key, c.commit_ts) for c in await all_changes(client, closed)] == [(k("a"), first)]
    # A reader rolls the secondary forward: the change appears, above the earlier bound.
    async with client.begin() as txn:
        assert await txn.get(T, b"b", "c") == b"2"
    later = await closed_timestamp(client, T, resolve_after_ms=None)
    assert later > commit_ts
    changes = await all_changes(client, later)
    assert [(c.key, c.commit_ts) for c in changes] == [(k("a"), first), (k("b"), commit_ts)]


async def test_closed_timestamp_resolves_a_stale_lock_itself(
    client: TransactionClient, clock: WallClock
) -> None:
    _, commit_ts = await crashed_after_commit_point(
        client.store, clock, {k("p", table="other"): b"p", k("b"): b"2"}
    )
    assert await closed_timestamp(client, T, resolve_after_ms=None) < commit_ts
    await asyncio.sleep(0.15)
    closed = await closed_timestamp(client, T, resolve_after_ms=100)
    assert closed > commit_ts
    assert [c.key for c in await all_changes(client, closed)] == [k("b")]


async def test_closed_timestamp_clears_the_late_writes_of_an_aborted_job(
    client: TransactionClient, clock: WallClock
) -> None:
    token = await begin_distributed(client, ttl_ms=60_000)
    await abort_distributed(client, token)
    # Late prewrites (a task racing the abort): orphan locks nobody reads.
    late = [Mutation(k(f"r{i}"), WriteKind.PUT, b"late") for i in range(30)]
    assert await client.store.prewrite(token.start_ts, token.primary, 60_000, late) == []
    assert await closed_timestamp(client, T, resolve_after_ms=None) < token.start_ts
    await asyncio.sleep(0.15)
    before = await clock.get_timestamp()
    assert await closed_timestamp(client, T, resolve_after_ms=100) > before
    assert await client.store.scan_locks(await clock.get_timestamp()) == []
    assert await all_changes(client, await clock.get_timestamp()) == []


async def test_closed_timestamp_ignores_other_tables_and_lock_only_locks(
    client: TransactionClient, clock: WallClock
) -> None:
    other = k("x", table="other")
    old_lock = Mutation(other, WriteKind.PUT, b"x")
    assert await client.store.prewrite(1, other, 60_000, [old_lock]) == []
    txn = await client.begin()
    txn.lock(T, b"a", "c")  # SELECT ... FOR UPDATE, prewritten by a commit in flight below
    lock_only = Mutation(k("a"), WriteKind.LOCK)
    assert await client.store.prewrite(txn.start_ts, k("a"), 60_000, [lock_only]) == []
    before = await clock.get_timestamp()
    closed = await closed_timestamp(client, T)
    assert closed > before


async def test_read_changes_pages_through_a_distributed_commit(
    client: TransactionClient, clock: WallClock
) -> None:
    token = await begin_distributed(client, ttl_ms=60_000)
    part = client.begin_part(token)
    for i in range(40):
        part.set(T, f"r{i:02d}".encode(), "c", b"v")
        part.set(T, f"r{i:02d}".encode(), "d", b"w")
    await part.commit()
    closed = await closed_timestamp(client, T)
    assert closed < token.start_ts
    assert await all_changes(client, closed) == []
    commit_ts = await commit_distributed(client, token)
    closed = await closed_timestamp(client, T)
    assert closed >= commit_ts
    changes = await all_changes(client, closed)
    assert [(c.key.row, c.key.column) for c in changes] == [
        (f"r{i:02d}".encode(), col) for i in range(40) for col in ("c", "d")
    ]
    assert {c.commit_ts for c in changes} == {commit_ts}
    after = [c async for c in read_changes(client, T, commit_ts, closed)]
    assert after == []


class SlowSecondaries:
    """A store whose commits of secondaries (and bulk commits) lag, as a busy committer's do."""

    def __init__(self, inner: CellStore, rng: random.Random) -> None:
        self._inner = inner
        self._rng = rng

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def commit(self, start_ts: int, commit_ts: int, keys: list[CellKey]) -> Any:
        if len(keys) > 1 or keys[0].table == T:
            await asyncio.sleep(self._rng.random() * 0.03)
        return await self._inner.commit(start_ts, commit_ts, keys)

    async def commit_locks(self, start_ts: int, commit_ts: int) -> int:
        await asyncio.sleep(self._rng.random() * 0.03)
        return await self._inner.commit_locks(start_ts, commit_ts)


async def test_no_change_ever_appears_at_or_below_a_returned_closed_timestamp(
    store: CellStore, clock: WallClock
) -> None:
    """Property, under concurrent writers (transactions over several tables whose secondaries
    commit late, committers that die after the commit point, distributed jobs committed and
    aborted): whatever a scan up to a closed timestamp returned is all there will ever be up
    to it."""
    rng = random.Random(7)
    slow: Any = SlowSecondaries(store, rng)
    writers = [TransactionClient(slow, clock, FAST_CONFIG) for _ in range(4)]
    reader = TransactionClient(store, clock, FAST_CONFIG)
    done = asyncio.Event()

    async def transactions(client: TransactionClient, seed: int) -> None:
        local = random.Random(seed)
        for i in range(25):
            rows = local.sample(range(12), local.randint(1, 3))

            async def body(txn: Any, rows: list[int] = rows, i: int = i) -> None:
                if local.random() < 0.5:  # the primary elsewhere: the table's cells lag
                    txn.set("other", b"p%d" % seed, "c", b"%d" % i)
                for r in rows:
                    txn.set(T, b"r%02d" % r, "c", b"%d/%d" % (seed, i))

            try:
                await client.run_in_transaction(body, retries=3)
            except Retryable:
                pass
            if local.random() < 0.1:
                cells = {k(f"q{seed}", table="other"): b"p", k(f"r{rows[0]:02d}"): b"crash"}
                try:
                    await crashed_after_commit_point(store, clock, cells)
                except AssertionError:
                    pass  # met a lock: skip this one

    async def jobs() -> None:
        for i in range(4):
            token = await begin_distributed(writers[0], ttl_ms=60_000)
            part = writers[1].begin_part(token)
            for r in range(12, 18):
                part.set(T, b"r%02d" % r, "c", b"job%d" % i)
            try:
                await part.commit()
                if i % 2:
                    await abort_distributed(writers[0], token)
                else:
                    await commit_distributed(writers[0], token)
            except Retryable:
                await abort_distributed(writers[0], token)

    observations: list[tuple[int, list[Change]]] = []

    async def poll() -> None:
        while not done.is_set():
            closed = await closed_timestamp(reader, T, resolve_after_ms=150)
            seen = [c async for c in read_changes(reader, T, 0, closed, page_size=5)]
            observations.append((closed, seen))
            await asyncio.sleep(rng.random() * 0.01)

    polling = asyncio.create_task(poll())
    await asyncio.gather(*(transactions(w, s) for s, w in enumerate(writers)), jobs())
    for w in writers:
        await w.close()
    await asyncio.sleep(0.2)  # crashed committers' locks become stale, and the poller resolves
    done.set()
    await polling
    # Quiesce: every lock left resolved (all TTLs are 300 ms), then everything ever committed.
    await asyncio.sleep(0.35)
    while locks := await store.scan_locks(await clock.get_timestamp()):
        await reader.resolver.resolve(locks)
    final_ts = await clock.get_timestamp()
    final = [c async for c in read_changes(reader, T, 0, final_ts)]
    assert len(final) > 50 and len(observations) > 10
    closed_values = [closed for closed, _ in observations]
    assert len(set(closed_values)) > 5, "the closed timestamp should advance"
    for closed, seen in observations:
        assert seen == [c for c in final if c.commit_ts <= closed], closed
    await reader.close()


async def test_gc_hold_keeps_the_safe_point_below_the_job(fresh_dsns) -> None:
    (dsn,) = await fresh_dsns(1)
    handle = await start_coordinator("127.0.0.1:0", dsn, gc_lifetime_ms=1)
    try:
        held = await handle.oracle.get_timestamp()
        await hold_gc(handle.address, "job-1", held, ttl_ms=60_000)
        assert hold_id("job-1") in {c.client_id for c in handle.registry.live_clients()}
        await asyncio.sleep(0.01)  # the GC lifetime (1 ms) alone would pass it now
        async with CoordinatorClient(handle.address) as coordinator:
            assert await coordinator.get_safe_point() == held - 1
            # Renewed at another ts, through an open client; then released.
            await hold_gc(coordinator, "job-1", held - 2**20, ttl_ms=60_000)
            assert await coordinator.get_safe_point() == held - 2**20 - 1
            await release_gc(coordinator, "job-1")
            assert await coordinator.get_safe_point() > held
        assert handle.registry.live_clients() == []
    finally:
        await handle.stop()
