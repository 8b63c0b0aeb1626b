"""Concurrent operations of different transactions share statements, each with its own
arguments; a transaction's cells of a shard stay together in one statement."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from percolator.server.storage.cells import CellKey, Mutation, PrewriteStatus, WriteKind
from percolator.server.storage.postgres_store import PostgresCellStore
from percolator.server.storage.statement_batcher import StatementBatcher
from percolator.server.txn.client import TransactionClient
from percolator.server.txn.errors import WriteConflict
from tests.txn.conftest import WallClock

from .test_contract import ts


async def _one_statement_in_flight(fresh_dsns) -> tuple[str, PostgresCellStore, TransactionClient]:
    """A fresh shard, a store on it whose pool allows one shared statement of a kind in flight,
    and a transaction client over it."""
    (dsn,) = await fresh_dsns(1)
    store = await PostgresCellStore.connect([dsn], pool_size=4)
    return dsn, store, TransactionClient(store, WallClock())


class _Recorder:
    """A ``run`` for the batcher that records each batch, answers after ``gate`` opens and
    fails a batch holding an item of ``poison``."""

    def __init__(self, poison: frozenset[str] = frozenset()) -> None:
        self.batches: list[list[str]] = []
        self.gate = asyncio.Event()
        self.poison = poison

    async def run(self, items: list[str]) -> list[str]:
        self.batches.append(list(items))
        await self.gate.wait()
        if self.poison.intersection(items):
            raise RuntimeError("shard down")
        return [f"{it}!" for it in items]


async def test_groups_stay_whole_and_get_their_own_results() -> None:
    rec = _Recorder()
    batcher: StatementBatcher[str, str] = StatementBatcher(rec.run, max_in_flight=1, max_batch=5)
    first = asyncio.create_task(batcher.submit_group(["a1", "a2"]))
    await asyncio.sleep(0)  # "a" is in flight; the others wait
    waiting = [
        asyncio.create_task(batcher.submit_group(["b1", "b2", "b3"])),
        asyncio.create_task(batcher.submit("c1")),
        asyncio.create_task(batcher.submit_group(["d1", "d2", "d3"])),
        asyncio.create_task(batcher.submit_group([f"e{i}" for i in range(7)])),
    ]
    await asyncio.sleep(0)
    rec.gate.set()
    assert await first == ["a1!", "a2!"]
    b, c, d, e = await asyncio.gather(*waiting)
    assert (b, c, d) == (["b1!", "b2!", "b3!"], "c1!", ["d1!", "d2!", "d3!"])
    assert e == [f"e{i}!" for i in range(7)]
    # Oldest first, up to max_batch items, a group never split; a larger group went alone and
    # at once, while "a" was in flight.
    assert rec.batches == [
        ["a1", "a2"],
        [f"e{i}" for i in range(7)],
        ["b1", "b2", "b3", "c1"],
        ["d1", "d2", "d3"],
    ]


async def test_a_cancelled_waiting_group_is_never_sent() -> None:
    rec = _Recorder()
    batcher: StatementBatcher[str, str] = StatementBatcher(rec.run, max_in_flight=1)
    first = asyncio.create_task(batcher.submit("a"))
    await asyncio.sleep(0)
    gone = asyncio.create_task(batcher.submit_group(["b1", "b2"]))
    kept = asyncio.create_task(batcher.submit("c"))
    await asyncio.sleep(0)
    gone.cancel()
    await asyncio.sleep(0)
    rec.gate.set()
    assert (await first, await kept) == ("a!", "c!")
    assert gone.cancelled()
    assert rec.batches == [["a"], ["c"]]


async def test_a_large_group_is_not_held_up_by_the_statement_in_flight() -> None:
    held = asyncio.Event()

    async def run(items: list[str]) -> list[str]:
        if items[0].startswith("small"):
            await held.wait()  # a statement in flight that takes long
        return [f"{it}!" for it in items]

    batcher: StatementBatcher[str, str] = StatementBatcher(run, max_in_flight=1, max_batch=4)
    small = asyncio.create_task(batcher.submit("small"))
    await asyncio.sleep(0)
    large = [f"large{i}" for i in range(5)]
    assert await asyncio.wait_for(batcher.submit_group(large), 5) == [f"{x}!" for x in large]
    assert not small.done()
    held.set()
    assert await small == "small!"


async def test_a_failed_statement_fails_every_group_in_it_and_no_other() -> None:
    rec = _Recorder(poison=frozenset({"a"}))
    batcher: StatementBatcher[str, str] = StatementBatcher(rec.run, max_in_flight=1, max_batch=4)
    first = asyncio.create_task(batcher.submit("x"))
    await asyncio.sleep(0)
    failing = [
        asyncio.create_task(batcher.submit("a")),
        asyncio.create_task(batcher.submit_group(["b1", "b2"])),
    ]
    last = asyncio.create_task(batcher.submit_group(["c1", "c2", "c3"]))
    await asyncio.sleep(0)
    rec.gate.set()
    assert await first == "x!"
    for task in failing:
        with pytest.raises(RuntimeError):
            await task
    assert await last == ["c1!", "c2!", "c3!"]
    assert rec.batches == [["x"], ["a", "b1", "b2"], ["c1", "c2", "c3"]]


async def test_the_groups_of_a_cancelled_sender_go_in_the_next_statement() -> None:
    rec = _Recorder()
    batcher: StatementBatcher[str, str] = StatementBatcher(rec.run, max_in_flight=1)
    sender = asyncio.create_task(batcher.submit("a"))
    await asyncio.sleep(0)
    rider = asyncio.create_task(batcher.submit_group(["b1", "b2"]))
    await asyncio.sleep(0)
    sender.cancel()
    await asyncio.sleep(0)
    rec.gate.set()
    assert await rider == ["b1!", "b2!"]
    assert sender.cancelled()
    assert rec.batches == [["a"], ["b1", "b2"]]


async def test_concurrent_reads_share_statements_at_their_own_timestamps(fresh_dsns) -> None:
    (dsn,) = await fresh_dsns(1)
    store = await PostgresCellStore.connect([dsn], pool_size=4)  # one read statement in flight
    keys = [CellKey("t", f"r{i}".encode(), "c") for i in range(50)]
    for version in range(3):
        muts = [Mutation(k, WriteKind.PUT, f"{k.row.decode()}@{version}".encode()) for k in keys]
        start = ts(10 * version + 1)
        assert await store.prewrite(start, keys[0], 3000, muts) == []
        assert await store.commit(start, start + 1, keys) == []
    before = store.stats.round_trips["read"]
    reads = [(k, version) for version in range(3) for k in keys]
    results = await asyncio.gather(*(store.read(ts(10 * version + 5), [k]) for k, version in reads))
    statements = store.stats.round_trips["read"] - before
    for (k, version), (result,) in zip(reads, results, strict=True):
        assert result.key == k
        assert result.value == f"{k.row.decode()}@{version}".encode()
    assert statements < len(reads) / 10, f"{statements} statements for {len(reads)} reads"

    unbatched = await PostgresCellStore.connect([dsn], pool_size=4, coalesce=False)
    before = unbatched.stats.round_trips["read"]
    await asyncio.gather(*(unbatched.read(ts(100), [k]) for k in keys))
    assert unbatched.stats.round_trips["read"] - before == len(keys)
    await unbatched.close()
    await store.close()


async def test_concurrent_prewrites_share_statements_each_with_its_own_since_ts(
    fresh_dsns,
) -> None:
    """Prewrites of several transactions in one statement: each cell's conflict check starts
    at its own since_ts (0: its transaction's start_ts)."""
    (dsn,) = await fresh_dsns(1)
    store = await PostgresCellStore.connect([dsn], pool_size=4)  # one statement in flight
    singles = [CellKey("t", f"s{i}".encode(), "c") for i in range(40)]
    pairs = [
        (CellKey("t", f"p{i}".encode(), "a"), CellKey("t", f"p{i}".encode(), "b"))
        for i in range(10)
    ]
    written = [*singles, *(k for pair in pairs for k in pair)]
    old = [Mutation(k, WriteKind.PUT, b"old") for k in written]
    assert await store.prewrite(ts(1), written[0], 3000, old) == []
    assert await store.commit(ts(1), ts(5), written) == []

    def since(i: int) -> int:
        return ts(6) if i % 2 == 0 else 0  # even: read at ts(6), after the old version

    before = store.stats.round_trips["prewrite"]
    results = await asyncio.gather(
        *(
            store.prewrite(ts(2, i), k, 3000, [Mutation(k, WriteKind.PUT, b"new", since(i))])
            for i, k in enumerate(singles)
        ),
        *(
            store.prewrite(
                ts(3, i),
                a,
                3000,
                [Mutation(a, WriteKind.PUT, b"new", ts(6)), Mutation(b, WriteKind.PUT, b"new")],
            )
            for i, (a, b) in enumerate(pairs)
        ),
    )
    statements = store.stats.round_trips["prewrite"] - before
    for i, failures in enumerate(results[: len(singles)]):
        expected = [] if i % 2 == 0 else [(PrewriteStatus.WRITE_CONFLICT, ts(5))]
        assert [(f.status, f.conflict_ts) for f in failures] == expected, i
    for (_, b), failures in zip(pairs, results[len(singles) :], strict=True):
        assert [(f.key, f.status, f.conflict_ts) for f in failures] == [
            (b, PrewriteStatus.WRITE_CONFLICT, ts(5))
        ]
    assert statements < len(results), f"{statements} statements for {len(results)} prewrites"
    await store.close()


async def test_concurrent_single_cell_transactions_share_write_statements(fresh_dsns) -> None:
    _, store, client = await _one_statement_in_flight(fresh_dsns)
    txns = [await client.begin() for _ in range(60)]
    for i, txn in enumerate(txns):
        # 40 on their own cells; 20 racing for two cells (ten each).
        row = f"own{i}" if i < 40 else f"hot{i % 2}"
        txn.set("t", row.encode(), "c", str(txn.start_ts).encode())
    before = store.stats.snapshot()
    outcomes = await asyncio.gather(*(t.commit() for t in txns), return_exceptions=True)
    after = store.stats.snapshot()
    assert all(isinstance(o, int) for o in outcomes[:40])
    for hot in (0, 1):
        racers = [
            (t, o)
            for i, (t, o) in enumerate(zip(txns, outcomes, strict=True))
            if i >= 40 and i % 2 == hot
        ]
        winners = [t for t, o in racers if isinstance(o, int)]
        assert len(winners) == 1, "first committer wins, the others conflict"
        assert all(isinstance(o, WriteConflict) for t, o in racers if t not in winners)
        async with client.begin() as check:
            value = await check.get("t", f"hot{hot}".encode(), "c")
        assert value == str(winners[0].start_ts).encode()
    statements = sum(after[op] - before.get(op, 0) for op in ("prewrite", "commit"))
    assert statements < 60, f"{statements} statements for 60 prewrites and 42 commits"
    await client.close()
    await store.close()


async def test_concurrent_multi_cell_reads_share_statements_at_their_own_timestamps(
    fresh_dsns,
) -> None:
    (dsn,) = await fresh_dsns(1)
    store = await PostgresCellStore.connect([dsn], pool_size=4)
    rows = [f"r{i}".encode() for i in range(30)]
    columns = ("a", "b", "c")
    for version in range(3):
        keys = [CellKey("t", r, c) for r in rows for c in columns]
        muts = [
            Mutation(k, WriteKind.PUT, f"{k.row.decode()}.{k.column}@{version}".encode())
            for k in keys
        ]
        start = ts(10 * version + 1)
        assert await store.prewrite(start, keys[0], 3000, muts) == []
        assert await store.commit(start, start + 1, keys) == []
    readers = [(r, version) for version in range(3) for r in rows]
    before = store.stats.round_trips["read"]
    results = await asyncio.gather(
        *(store.read(ts(10 * v + 5), [CellKey("t", r, c) for c in columns]) for r, v in readers)
    )
    statements = store.stats.round_trips["read"] - before
    for (r, version), reads in zip(readers, results, strict=True):
        assert [x.value for x in reads] == [f"{r.decode()}.{c}@{version}".encode() for c in columns]
    assert statements < len(readers) / 5, f"{statements} statements for {len(readers)} reads"
    await store.close()


async def test_concurrent_multi_cell_transactions_share_statements_and_conflict(
    fresh_dsns,
) -> None:
    dsn, store, client = await _one_statement_in_flight(fresh_dsns)
    txns = [await client.begin() for _ in range(40)]
    for i, txn in enumerate(txns):
        # 30 write three cells of their own row; 10 write three cells of one shared row.
        row = f"own{i}" if i < 30 else "hot"
        for c in ("a", "b", "c"):
            txn.set("t", row.encode(), c, f"{txn.start_ts}.{c}".encode())
    before = store.stats.snapshot()
    outcomes = await asyncio.gather(*(t.commit() for t in txns), return_exceptions=True)
    after = store.stats.snapshot()
    assert all(isinstance(o, int) for o in outcomes[:30])
    winners = [t for t, o in zip(txns[30:], outcomes[30:], strict=True) if isinstance(o, int)]
    assert len(winners) == 1, outcomes[30:]
    assert all(isinstance(o, WriteConflict) for o in outcomes[30:] if not isinstance(o, int))
    await client.secondaries.drain()
    async with client.begin() as check:
        for i, txn in enumerate(txns[:30]):
            for c in ("a", "b", "c"):
                got = await check.get("t", f"own{i}".encode(), c)
                assert got == f"{txn.start_ts}.{c}".encode()
        for c in ("a", "b", "c"):
            assert await check.get("t", b"hot", c) == f"{winners[0].start_ts}.{c}".encode()
    statements = sum(after[op] - before.get(op, 0) for op in ("prewrite", "commit"))
    assert statements < 40, f"{statements} statements for 40 prewrites and 31 commits"
    await client.close()
    await store.close()
    conn = await asyncpg.connect(dsn)
    try:
        assert await conn.fetchval("SELECT count(*) FROM percolator_lock") == 0
    finally:
        await conn.close()
