"""Every branch of the Percolator protocol, on the in-memory store and on 2 Postgres shards."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from percolator.server.storage.cells import CellKey, Mutation, TxnState, WriteKind
from percolator.server.storage.errors import LimitExceeded
from percolator.server.storage.store import CellStore
from percolator.server.txn.client import TransactionClient
from percolator.server.txn.config import TxnConfig
from percolator.server.txn.errors import (
    LockWaitTimeout,
    SerializationFailure,
    TransactionAborted,
    TransactionClosed,
    TransactionTooLarge,
    WriteConflict,
)
from percolator.server.txn.transaction import Row, Transaction

from .conftest import FAST_CONFIG, WallClock


def k(row: str, col: str = "v", table: str = "acct") -> CellKey:
    return CellKey(table, row.encode(), col)


async def put_committed(client: TransactionClient, **cells: bytes) -> int:
    async with client.begin() as txn:
        for row, value in cells.items():
            txn.set("acct", row.encode(), "v", value)
    assert txn.commit_ts is not None
    await client.secondaries.drain()  # tests below write with the raw store next
    return txn.commit_ts


async def crashed_committer(
    store: CellStore,
    clock: WallClock,
    writes: dict[str, bytes],
    *,
    commit_primary: bool,
    ttl_ms: int = 300,
) -> tuple[int, int | None]:
    """Leave exactly what a committer that died leaves: all cells prewritten and, with
    ``commit_primary``, the primary committed (the commit point) but no secondary."""
    start_ts = await clock.get_timestamp()
    muts = [Mutation(k(row), WriteKind.PUT, v) for row, v in writes.items()]
    primary = muts[0].key
    assert await store.prewrite(start_ts, primary, ttl_ms, muts) == []
    if not commit_primary:
        return start_ts, None
    commit_ts = await clock.get_timestamp()
    assert await store.commit(start_ts, commit_ts, [primary]) == []
    return start_ts, commit_ts


async def test_commit_then_read(client: TransactionClient) -> None:
    await put_committed(client, a=b"1", b=b"2")
    async with client.begin() as txn:
        assert await txn.get("acct", b"a", "v") == b"1"
        assert await txn.get_many([k("a"), k("b"), k("zz")]) == [b"1", b"2", None]


async def test_reads_see_own_writes_and_a_fixed_snapshot(client: TransactionClient) -> None:
    await put_committed(client, a=b"old")
    reader = await client.begin()
    await put_committed(client, a=b"new")
    assert await reader.get("acct", b"a", "v") == b"old"
    reader.set("acct", b"a", "v", b"mine")
    assert await reader.get("acct", b"a", "v") == b"mine"
    await reader.rollback()


async def test_read_only_transaction_sends_nothing_at_commit(
    client: TransactionClient, clock: WallClock
) -> None:
    await put_committed(client, a=b"1")
    await client.secondaries.drain()
    txn = await client.begin()
    await txn.get("acct", b"a", "v")
    calls, trips = clock.calls, client.store.stats.snapshot()
    assert await txn.commit() is None
    assert clock.calls == calls, "a read-only commit must not take a commit_ts"
    assert client.store.stats.snapshot() == trips, "a read-only commit must not prewrite"


async def test_write_conflict_names_key_and_timestamps(client: TransactionClient) -> None:
    t1, t2 = await client.begin(), await client.begin()
    t1.set("acct", b"a", "v", b"t1")
    t2.set("acct", b"a", "v", b"t2")
    commit_ts = await t1.commit()
    with pytest.raises(WriteConflict) as err:
        await t2.commit()
    assert err.value.key == k("a")
    assert err.value.start_ts == t2.start_ts
    assert err.value.conflict_ts == commit_ts
    assert err.value.sqlstate == "40001"
    async with client.begin() as check:
        assert await check.get("acct", b"a", "v") == b"t1"


async def test_conflict_with_a_live_lock_aborts_the_later_writer(
    client: TransactionClient, clock: WallClock
) -> None:
    start_ts, _ = await crashed_committer(
        client.store, clock, {"a": b"x"}, commit_primary=False, ttl_ms=60_000
    )
    txn = await client.begin()
    txn.set("acct", b"a", "v", b"y")
    with pytest.raises(WriteConflict) as err:
        await txn.commit()
    assert err.value.conflict_ts == start_ts


async def test_read_waits_for_an_older_lock_then_sees_the_commit(
    client: TransactionClient, clock: WallClock
) -> None:
    await put_committed(client, a=b"old")
    store = client.store
    start_ts = await clock.get_timestamp()
    muts = [Mutation(k("a"), WriteKind.PUT, b"new")]
    assert await store.prewrite(start_ts, k("a"), 60_000, muts) == []
    commit_ts = await clock.get_timestamp()
    reader = await client.begin()  # starts after commit_ts was taken: must see "new"

    async def commit_later() -> None:
        await asyncio.sleep(0.2)
        assert await store.commit(start_ts, commit_ts, [k("a")]) == []

    committing = asyncio.create_task(commit_later())
    assert await reader.get("acct", b"a", "v") == b"new"
    await committing


async def test_roll_forward_after_committer_died_past_the_commit_point(
    client: TransactionClient, clock: WallClock
) -> None:
    _start_ts, commit_ts = await crashed_committer(
        client.store, clock, {"p": b"1", "s": b"2"}, commit_primary=True
    )
    async with client.begin() as txn:
        assert await txn.get("acct", b"s", "v") == b"2"
    assert client.resolver.counts["roll_forward"] == 1
    reads = await client.store.read(await clock.get_timestamp(), [k("s")])
    assert reads[0].lock is None and reads[0].commit_ts == commit_ts


async def test_roll_back_after_committer_died_after_prewrite(
    client: TransactionClient, clock: WallClock
) -> None:
    await put_committed(client, p=b"old-p", s=b"old-s")
    start_ts, _ = await crashed_committer(
        client.store, clock, {"p": b"new-p", "s": b"new-s"}, commit_primary=False, ttl_ms=200
    )
    await asyncio.sleep(0.3)  # the locks expire
    async with client.begin() as txn:
        assert await txn.get("acct", b"s", "v") == b"old-s"
        assert await txn.get("acct", b"p", "v") == b"old-p"
    status = await client.store.check_txn_status(
        k("p"), start_ts, await clock.get_timestamp(), rollback_if_missing=False
    )
    assert status.state == TxnState.ROLLED_BACK
    # The zombie committer wakes up: its commit of the primary must fail.
    late = await client.store.commit(start_ts, await clock.get_timestamp(), [k("p")])
    assert late, "a rolled-back transaction must not commit"


async def test_delayed_prewrite_after_rollback_fails(
    client: TransactionClient, clock: WallClock
) -> None:
    txn = await client.begin()
    txn.set("acct", b"p", "v", b"x")
    txn.set("acct", b"s", "v", b"y")
    # A resolver rolled the transaction back before its prewrite arrived (primary missing).
    status = await client.store.check_txn_status(
        k("p"), txn.start_ts, await clock.get_timestamp(), rollback_if_missing=True
    )
    assert status.state == TxnState.ROLLED_BACK
    with pytest.raises(TransactionAborted):
        await txn.commit()
    locks = await client.store.scan_locks(await clock.get_timestamp())
    assert locks == [], "an aborted commit must leave no lock"


class SlowPrimaryCommit:
    """A store whose commit of one transaction's primary takes ``delay_s``."""

    def __init__(self, inner: CellStore, delay_s: float) -> None:
        self._inner = inner
        self._delay_s = delay_s
        self.slow_start_ts: int | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def commit(self, start_ts: int, commit_ts: int, keys: Any) -> Any:
        if start_ts == self.slow_start_ts:
            await asyncio.sleep(self._delay_s)
        return await self._inner.commit(start_ts, commit_ts, keys)

    async def commit_primary(
        self, start_ts: int, commit_ts: int, primary: Any, secondaries: Any
    ) -> Any:
        if start_ts == self.slow_start_ts:
            await asyncio.sleep(self._delay_s)
        return await self._inner.commit_primary(start_ts, commit_ts, primary, secondaries)


async def test_heartbeats_keep_a_slow_committers_locks(store: CellStore, clock: WallClock) -> None:
    slow = SlowPrimaryCommit(store, delay_s=1.2)  # four times the 300 ms TTL
    writer = TransactionClient(slow, clock, FAST_CONFIG)  # type: ignore[arg-type]
    reader = TransactionClient(store, clock, FAST_CONFIG)
    txn = await writer.begin()
    slow.slow_start_ts = txn.start_ts
    txn.set("acct", b"p", "v", b"1")
    txn.set("acct", b"s", "v", b"2")
    committing = asyncio.create_task(txn.commit())
    await asyncio.sleep(0.8)  # past the original TTL, inside the slow commit
    waited_from = asyncio.get_running_loop().time()
    async with reader.begin() as r:
        # The reader meets the secondary lock. Heartbeats keep the primary alive, so it waits
        # instead of rolling the writer back, and then sees the commit (commit_ts < its start).
        assert await r.get("acct", b"s", "v") == b"2"
    assert asyncio.get_running_loop().time() - waited_from > 0.2
    assert await committing is not None
    assert reader.resolver.counts["roll_back"] == 0
    await writer.close()
    await reader.close()


async def test_a_transaction_that_read_long_gets_live_locks(
    store: CellStore, clock: WallClock
) -> None:
    """Lock TTLs count from start_ts: a transaction that read for longer than its TTL before
    committing must still prewrite locks that a reader treats as live, not roll back."""
    slow = SlowPrimaryCommit(store, delay_s=0.5)
    writer = TransactionClient(slow, clock, FAST_CONFIG)  # type: ignore[arg-type]
    reader = TransactionClient(store, clock, FAST_CONFIG)
    txn = await writer.begin()
    slow.slow_start_ts = txn.start_ts
    await asyncio.sleep(0.6)  # twice the 300 ms TTL, "reading"
    txn.set("acct", b"p", "v", b"1")
    txn.set("acct", b"s", "v", b"2")
    committing = asyncio.create_task(txn.commit())
    while not await store.scan_locks(1 << 62, limit=1):  # noqa: ASYNC110 (polls the store)
        await asyncio.sleep(0.001)
    async with reader.begin() as r:
        assert await r.get("acct", b"s", "v") == b"2"  # waited for the commit
    assert await committing is not None
    assert reader.resolver.counts["roll_back"] == 0
    await writer.close()
    await reader.close()


async def test_lock_wait_timeout(store: CellStore, clock: WallClock) -> None:
    client = TransactionClient(store, clock, TxnConfig(lock_wait_timeout_s=0.3))
    await crashed_committer(store, clock, {"a": b"x"}, commit_primary=False, ttl_ms=60_000)
    txn = await client.begin()
    with pytest.raises(LockWaitTimeout) as err:
        await txn.get("acct", b"a", "v")
    assert err.value.sqlstate == "55P03"
    await client.close()


async def test_run_in_transaction_retries_conflicts(client: TransactionClient) -> None:
    await put_committed(client, counter=b"0")

    async def increment(txn: Transaction) -> None:
        value = int(await txn.get("acct", b"counter", "v") or b"0")
        await asyncio.sleep(0.001)
        txn.set("acct", b"counter", "v", str(value + 1).encode())

    await asyncio.gather(*(client.run_in_transaction(increment, retries=50) for _ in range(8)))
    async with client.begin() as txn:
        assert await txn.get("acct", b"counter", "v") == b"8"


async def test_scan_merges_own_writes_and_hides_deletes(client: TransactionClient) -> None:
    await put_committed(client, a=b"1", b=b"2", c=b"3", d=b"4")
    async with client.begin() as txn:
        txn.delete("acct", b"b", "v")
        txn.set("acct", b"bb", "v", b"new")
        txn.set("acct", b"c", "v", b"33")
        rows = [row async for row in txn.scan("acct", b"a", b"d")]
    assert rows == [(b"a", {"v": b"1"}), (b"bb", {"v": b"new"}), (b"c", {"v": b"33"})]


async def test_reverse_scan_merges_own_writes_backward(
    client: TransactionClient, clock: WallClock
) -> None:
    """A scan in descending key order sees the same rows as the ascending one, backward: the
    transaction's own inserts, updates and deletes merged in, locks of others resolved."""
    await put_committed(client, a=b"1", b=b"2", c=b"3", d=b"4", e=b"5", f=b"6")
    # Past its commit point, the writer died: the reader rolls "e" forward.
    await crashed_committer(client.store, clock, {"a": b"11", "e": b"55"}, commit_primary=True)
    async with client.begin() as txn:
        txn.delete("acct", b"b", "v")
        txn.set("acct", b"bb", "v", b"new")
        txn.set("acct", b"c", "v", b"33")
        txn.set("acct", b"zz", "v", b"past the end")
        txn.set("acct", b"0", "v", b"before the start")
        for start, end in [(b"a", b"f"), (None, None), (b"bb", None), (None, b"c")]:
            forward = [row async for row in txn.scan("acct", start, end)]
            backward = [row async for row in txn.scan("acct", start, end, reverse=True)]
            assert backward == forward[::-1], (start, end)
            paged = txn.scan_pages("acct", start, end, page_size=1, reverse=True)
            assert [row async for page in paged for row in page] == backward
        assert [row async for row in txn.scan("acct", b"a", b"f", reverse=True)] == [
            (b"e", {"v": b"55"}),
            (b"d", {"v": b"4"}),
            (b"c", {"v": b"33"}),
            (b"bb", {"v": b"new"}),
            (b"a", {"v": b"11"}),
        ]


async def test_a_reverse_scan_claims_from_its_last_row_to_the_range_end(
    client: TransactionClient,
) -> None:
    """SERIALIZABLE: a reverse scan a LIMIT stopped claims [the last row fetched, end); one
    that ran to the start of its range claims the whole range; a change below the claim does
    not fail the commit, one inside it does."""
    await put_committed(client, a=b"1", b=b"2", c=b"3", d=b"4")
    txn = await client.begin()
    txn.track_reads()
    rows = txn.scan_pages("acct", b"a", b"y", page_size=1, reverse=True)
    assert (await anext(rows))[0][0] == b"d"
    await rows.aclose()
    assert txn.read_set is not None
    assert [tuple(r) for r in txn.read_set.ranges("acct")] == [(b"d", b"y")]
    assert len([row async for row in txn.scan("acct", None, b"c", reverse=True)]) == 2
    assert [tuple(r) for r in txn.read_set.ranges("acct")] == [(b"d", b"y"), (b"", b"c")]
    await txn.rollback()

    async def reader_writes_after(change: str) -> None:
        reader = await client.begin()
        reader.track_reads()
        rows = reader.scan_pages("acct", b"b", b"w", page_size=1, reverse=True)
        assert (await anext(rows))[0][0] == b"d"
        await rows.aclose()
        await put_committed(client, **{change: b"changed"})
        reader.set("acct", b"x", "v", b"written")
        await reader.commit()

    await reader_writes_after("c")  # below the claim [d, w)
    with pytest.raises(SerializationFailure):
        await reader_writes_after("dd")  # inside it


async def packed_rows(txn: Transaction, start: bytes, end: bytes) -> list[Row]:
    pages = txn.scan_packed("acct", start, end, ["v"], page_size=2)
    return sorted([row async for page in pages for row in page.rows(["v"])])


async def test_scan_packed_merges_own_writes_and_resolves_locks(
    client: TransactionClient, clock: WallClock
) -> None:
    await put_committed(client, a=b"1", b=b"2", c=b"3", d=b"4", e=b"5")
    store = client.store
    # Past its commit point, the writer died: the reader rolls "c" forward.
    await crashed_committer(store, clock, {"a": b"11", "c": b"33"}, commit_primary=True)
    async with client.begin() as txn:
        assert await packed_rows(txn, b"a", b"z") == [
            (b"a", {"v": b"11"}),
            (b"b", {"v": b"2"}),
            (b"c", {"v": b"33"}),
            (b"d", {"v": b"4"}),
            (b"e", {"v": b"5"}),
        ]
        txn.delete("acct", b"b", "v")
        txn.set("acct", b"bb", "v", b"new")
        assert await packed_rows(txn, b"a", b"d") == [
            (b"a", {"v": b"11"}),
            (b"bb", {"v": b"new"}),
            (b"c", {"v": b"33"}),
        ]


async def test_closed_transaction_and_limits(client: TransactionClient) -> None:
    txn = await client.begin()
    with pytest.raises(LimitExceeded):
        txn.set("acct", b"x" * 5000, "v", b"1")
    await txn.commit()
    with pytest.raises(TransactionClosed):
        txn.set("acct", b"a", "v", b"1")
    small = TransactionClient(client.store, client.clock, TxnConfig(max_cells_per_txn=3))
    big = await small.begin()
    for i in range(3):
        big.set("acct", str(i).encode(), "v", b"1")
    with pytest.raises(TransactionTooLarge):
        big.set("acct", b"3", "v", b"1")
    await big.rollback()


async def test_a_dropped_transaction_stops_holding_gc_back(client: TransactionClient) -> None:
    import gc

    txn = await client.begin()
    assert client.min_running_start_ts() == txn.start_ts
    del txn
    gc.collect()
    assert client.min_running_start_ts() is None


async def test_a_cell_read_again_in_one_snapshot_costs_no_round_trip(
    client: TransactionClient,
) -> None:
    await put_committed(client, a=b"1", b=b"2")
    txn = await client.begin()
    assert await txn.get_many([k("a"), k("b")]) == [b"1", b"2"]
    trips = client.store.stats.snapshot()
    await put_committed(client, a=b"changed")
    assert await txn.get("acct", b"a", "v") == b"1"
    assert await txn.get_many([k("b"), k("a")]) == [b"2", b"1"]
    assert client.store.stats.snapshot() != trips  # only the other transaction's round trips
    reads = client.store.stats.snapshot().get("read", 0) - trips.get("read", 0)
    assert reads == 0
    # Own writes still come first; a cell not read before is read.
    txn.set("acct", b"a", "v", b"mine")
    assert await txn.get_many([k("a"), k("c")]) == [b"mine", None]
    # A new snapshot (READ COMMITTED) reads again.
    await client.renew_snapshot(txn)
    assert await txn.get("acct", b"b", "v") == b"2"
    assert client.store.stats.snapshot().get("read", 0) - trips.get("read", 0) == 2
    await txn.rollback()


async def test_the_read_cache_keeps_within_its_byte_budget(
    client: TransactionClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    from percolator.server.txn import transaction as transaction_module

    monkeypatch.setattr(transaction_module, "READ_CACHE_BYTES", 10)
    await put_committed(client, small=b"12345", big=b"0123456789")
    txn = await client.begin()
    assert await txn.get_many([k("small"), k("big")]) == [b"12345", b"0123456789"]
    trips = client.store.stats.snapshot().get("read", 0)
    assert await txn.get("acct", b"small", "v") == b"12345"  # remembered
    assert client.store.stats.snapshot().get("read", 0) == trips
    assert await txn.get("acct", b"big", "v") == b"0123456789"  # over the budget: read again
    assert client.store.stats.snapshot().get("read", 0) == trips + 1
    await txn.rollback()


@pytest.mark.parametrize(("kind", "commits"), [(WriteKind.PUT, True), (WriteKind.DELETE, False)])
async def test_a_commit_check_of_presence_passes_a_concurrent_update(
    client: TransactionClient, store: CellStore, clock: WallClock, kind: WriteKind, commits: bool
) -> None:
    """A foreign key's check that its parent still exists meets the parent's cell locked by a
    transaction committing an UPDATE of it (the check and a NO KEY UPDATE do not wait for each
    other): the parent exists whether that one commits or not, so the check passes. A lock
    that deletes the cell still fails it (40001)."""
    from percolator.server.txn.commit_checks import StillPresent

    await put_committed(client, parent=b"p")
    child = await client.begin()
    assert await child.get("acct", b"parent", "v") == b"p"
    child.set("acct", b"child", "v", b"c")
    child.check_at_commit(StillPresent((k("parent"),)))
    other_ts = await clock.get_timestamp()
    value = b"p2" if kind is WriteKind.PUT else None
    assert (
        await store.prewrite(other_ts, k("parent"), 30_000, [Mutation(k("parent"), kind, value)])
        == []
    )
    if commits:
        await child.commit()
        async with client.begin() as txn:
            assert await txn.get("acct", b"child", "v") == b"c"
    else:
        with pytest.raises(WriteConflict):
            await child.commit()
    await store.rollback(other_ts, [k("parent")], leave_marker=True)


async def test_a_row_lock_wait_is_unbounded_on_one_shard(
    client: TransactionClient, store: CellStore
) -> None:
    """As in Postgres, a row-lock wait with no timeout of its own lasts as long as the holder
    when one shard's deadlock detector sees every cycle; with several shards it is bounded by
    the lock-wait timeout (a cycle across shards would go unseen)."""
    from percolator.server.storage.row_locks import LockWait, RowLockUnavailable

    holder, waiter = await client.begin(), await client.begin()
    row = [k("hot")]
    await holder.lock_rows(row, LockWait.WAIT)
    wait = asyncio.create_task(waiter.lock_rows(row, LockWait.WAIT))
    bound = FAST_CONFIG.lock_wait_timeout_s
    await asyncio.sleep(bound + 0.5)
    if store.shard_count == 1:
        assert not wait.done()
        await holder.rollback()
        (state,) = await asyncio.wait_for(wait, 5)
        assert state.taken and state.waited
    else:
        with pytest.raises(RowLockUnavailable):
            await wait
        await holder.rollback()
    await waiter.rollback()


async def test_a_weaker_row_lock_on_a_row_held_stronger_is_no_call(
    store: CellStore, clock: WallClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A transaction that holds a row FOR NO KEY UPDATE (it updated it) and then asks for KEY
    SHARE (a foreign key's check of it) sends no lock call: the stronger lock has it all."""
    from percolator.server.storage.row_locks import LockWait, RowLockMode

    calls: list[int] = []
    make = store.row_locks

    def counting() -> Any:
        locks = make()
        lock = locks.lock

        async def counted(*args: Any, **kwargs: Any) -> Any:
            calls.append(len(args[0]))
            return await lock(*args, **kwargs)

        locks.lock = counted  # type: ignore[method-assign]
        return locks

    monkeypatch.setattr(store, "row_locks", counting)
    client = TransactionClient(store, clock, FAST_CONFIG)
    try:
        txn = await client.begin()
        await txn.lock_rows([k("p")], LockWait.WAIT, mode=RowLockMode.NO_KEY_UPDATE)
        (again,) = await txn.lock_rows([k("p")], LockWait.WAIT, mode=RowLockMode.KEY_SHARE)
        assert again.taken and not again.changed
        assert calls == [1]
        await txn.lock_rows([k("p")], LockWait.WAIT, mode=RowLockMode.UPDATE)  # stronger: asked
        assert calls == [1, 1]
        await txn.rollback()
    finally:
        await client.close()
