"""Snapshot reads and distributed transactions (the Spark connector's transaction layer), on the
in-memory store and on 2 Postgres shards. Each "task" is a TransactionClient of its own on the
same store, as a separate Spark worker process would be."""

from __future__ import annotations

import asyncio
import pickle
from collections.abc import AsyncIterator

import pytest

from percolator.server.storage.cells import CellKey, Mutation, TxnState, WriteKind
from percolator.server.storage.store import CellStore
from percolator.server.txn.client import TransactionClient
from percolator.server.txn.distributed import (
    TXN_TABLE,
    AlreadyCommitted,
    DistributedTxn,
    DuplicateWrite,
    abort_distributed,
    begin_distributed,
    commit_distributed,
    heartbeat_distributed,
)
from percolator.server.txn.errors import (
    TransactionAborted,
    TransactionTooOld,
    WriteConflict,
)
from percolator.server.txn.gc import collect_garbage
from percolator.server.txn.transaction import ReadOnlyTransactionError

from .conftest import FAST_CONFIG, WallClock

T = "t"


def k(row: str, col: str = "c") -> CellKey:
    return CellKey(T, row.encode(), col)


async def put_committed(client: TransactionClient, **cells: bytes) -> int:
    async with client.begin() as txn:
        for row, value in cells.items():
            txn.set(T, row.encode(), "c", value)
    await client.secondaries.drain()
    assert txn.commit_ts is not None
    return txn.commit_ts


@pytest.fixture
async def tasks(store: CellStore, clock: WallClock) -> AsyncIterator[list[TransactionClient]]:
    """Three clients standing for three Spark worker processes."""
    clients = [TransactionClient(store, clock, FAST_CONFIG) for _ in range(3)]
    yield clients
    for c in clients:
        await c.close()


async def write_part(
    task: TransactionClient, token: DistributedTxn, cells: dict[str, bytes]
) -> None:
    """What a Spark task does: a part over a pickled token, its writes, commit (prewrite)."""
    part = task.begin_part(pickle.loads(pickle.dumps(token)))
    for row, value in cells.items():
        part.set(T, row.encode(), "c", value)
    assert await part.commit() is None
    assert part.commit_ts is None


async def values(client: TransactionClient, rows: list[str]) -> list[bytes | None]:
    async with client.begin() as txn:
        return await txn.get_many([k(r) for r in rows])


# -- begin_at ---------------------------------------------------------------------------------


async def test_begin_at_reads_one_snapshot_and_refuses_writes(
    client: TransactionClient, clock: WallClock
) -> None:
    await put_committed(client, a=b"1", b=b"1")
    ts = await clock.get_timestamp()
    await put_committed(client, a=b"2", c=b"2")
    first, second = client.begin_at(ts), client.begin_at(ts)
    assert await first.get(T, b"a", "c") == b"1"
    assert [row async for row in second.scan(T)] == [(b"a", {"c": b"1"}), (b"b", {"c": b"1"})]
    await client.renew_snapshot(first)  # pinned: READ COMMITTED does not move it
    assert first.read_ts == ts and await first.get(T, b"c", "c") is None
    for write in (
        lambda: first.set(T, b"a", "c", b"x"),
        lambda: first.delete(T, b"a", "c"),
        lambda: first.lock(T, b"a", "c"),
    ):
        with pytest.raises(ReadOnlyTransactionError) as err:
            write()
        assert err.value.sqlstate == "25006"
    # Two snapshots at one ts: the process keeps holding GC back until both finish.
    assert client.min_running_start_ts() == ts
    assert await first.commit() is None
    assert client.min_running_start_ts() == ts
    await second.rollback()
    assert client.min_running_start_ts() is None


async def test_begin_at_below_the_safe_point_is_too_old(
    client: TransactionClient, clock: WallClock
) -> None:
    await put_committed(client, a=b"1")
    ts = await clock.get_timestamp()
    await put_committed(client, a=b"2")
    await collect_garbage(client.store, client.resolver, await clock.get_timestamp())
    with pytest.raises(TransactionTooOld):
        await client.begin_at(ts).get(T, b"a", "c")


# -- distributed transactions ------------------------------------------------------------------


async def test_a_distributed_write_from_three_tasks_appears_at_once(
    client: TransactionClient, tasks: list[TransactionClient], clock: WallClock
) -> None:
    await put_committed(client, r00=b"old")
    before_job = await client.begin()
    token = await begin_distributed(client, ttl_ms=60_000)
    assert token.primary.table == TXN_TABLE
    rows = {f"r{i:02d}": f"v{i}".encode() for i in range(30)}
    items = list(rows.items())
    await asyncio.gather(
        *(write_part(task, token, dict(items[i::3])) for i, task in enumerate(tasks))
    )
    # Prewritten, not committed: no change, every cell still a lock; an older snapshot reads
    # the old value, and a reader between start and commit waits rather than reading a part.
    assert await client.store.scan_changes(T, token.start_ts, 2**62, limit=100) == []
    now = await clock.get_timestamp()
    reads = await client.store.read(now, [k(r) for r in rows])
    assert all(r.lock is not None and r.lock.primary == token.primary for r in reads)
    assert await before_job.get(T, b"r00", "c") == b"old"
    during = await client.begin()
    waiting = asyncio.create_task(during.get_many([k(r) for r in rows]))
    await asyncio.sleep(0.05)
    assert not waiting.done()

    commit_ts = await commit_distributed(client, token)
    # The reader began before the commit point: it sees none of it, never a part.
    assert await waiting == [b"old"] + [None] * 29
    assert await values(client, list(rows)) == list(rows.values())
    after = await client.store.read(await clock.get_timestamp(), [k(r) for r in rows])
    assert {(r.commit_ts, r.lock) for r in after} == {(commit_ts, None)}
    assert await client.store.scan_locks(await clock.get_timestamp()) == []
    changes = await client.store.scan_changes(T, token.start_ts, commit_ts, limit=100)
    assert [(c.key.row.decode(), c.value) for c in changes] == items
    await during.rollback()
    await before_job.rollback()


async def test_commit_is_repeatable_and_abort_after_it_refused(
    client: TransactionClient, tasks: list[TransactionClient]
) -> None:
    token = await begin_distributed(client, ttl_ms=60_000)
    await write_part(tasks[0], token, {"a": b"1", "b": b"2"})
    commit_ts = await commit_distributed(client, token)
    # Called again (after an unknown outcome, say): the same commit_ts, nothing changes.
    assert await commit_distributed(client, token) == commit_ts
    with pytest.raises(AlreadyCommitted):
        await abort_distributed(client, token)
    assert await values(client, ["a", "b"]) == [b"1", b"2"]
    # A late task of a committed job cannot add to it.
    with pytest.raises(AlreadyCommitted):
        await write_part(tasks[1], token, {"c": b"3"})
    assert await values(client, ["c"]) == [None]


async def test_abort_leaves_nothing_and_late_writes_are_cleaned(
    client: TransactionClient, tasks: list[TransactionClient], clock: WallClock
) -> None:
    await put_committed(client, a=b"old")
    token = await begin_distributed(client, ttl_ms=60_000)
    await write_part(tasks[0], token, {"a": b"new", "b": b"new"})
    await write_part(tasks[1], token, {"c": b"new"})
    await abort_distributed(client, token)
    await abort_distributed(client, token)  # idempotent
    assert await values(client, ["a", "b", "c"]) == [b"old", None, None]
    assert await client.store.scan_locks(await clock.get_timestamp()) == []
    with pytest.raises(TransactionAborted):
        await commit_distributed(client, token)
    # A late task checks the job first.
    with pytest.raises(TransactionAborted):
        await write_part(tasks[2], token, {"d": b"late"})
    # One whose prewrite raced the abort leaves an orphan lock: the first reader meeting it
    # asks the primary, finds its rollback record, and removes it.
    orphan = Mutation(k("e"), WriteKind.PUT, b"late")
    assert await client.store.prewrite(token.start_ts, token.primary, 60_000, [orphan]) == []
    assert await values(client, ["e"]) == [None]
    assert client.resolver.counts["roll_back"] >= 1
    assert await client.store.scan_locks(await clock.get_timestamp()) == []


async def test_a_retried_part_succeeds(
    client: TransactionClient, tasks: list[TransactionClient]
) -> None:
    await put_committed(client, a=b"old")
    token = await begin_distributed(client, ttl_ms=60_000)
    await write_part(tasks[0], token, {"a": b"1", "b": b"2"})  # the attempt that "failed"
    # The retry reads what the first attempt read (the job's own locks are not in its snapshot,
    # and it does not wait for them), and prewrites the same cells again.
    retry = tasks[1].begin_part(token)
    assert await retry.get_many([k("a"), k("b")]) == [b"old", None]
    assert [row async for row in retry.scan(T)] == [(b"a", {"c": b"old"})]
    retry.set(T, b"a", "c", b"1")
    retry.set(T, b"b", "c", b"2")
    await retry.commit()
    await write_part(tasks[2], token, {"c": b"3"})
    await commit_distributed(client, token)
    assert await values(client, ["a", "b", "c"]) == [b"1", b"2", b"3"]


async def test_one_cell_written_differently_by_two_parts_is_a_duplicate(
    client: TransactionClient, tasks: list[TransactionClient]
) -> None:
    token = await begin_distributed(client, ttl_ms=60_000)
    await write_part(tasks[0], token, {"a": b"1", "b": b"1"})
    await write_part(tasks[1], token, {"b": b"1"})  # the same write: fine
    with pytest.raises(DuplicateWrite) as err:
        await write_part(tasks[2], token, {"c": b"1", "a": b"2"})
    assert err.value.sqlstate == "23505"
    assert "'t'" in str(err.value)
    await abort_distributed(client, token)
    assert await values(client, ["a", "b", "c"]) == [None, None, None]


async def test_an_ordinary_transaction_rewriting_a_cell_commits_its_last_write(
    client: TransactionClient,
) -> None:
    # One mutation per cell in the buffer: the committer never meets DUPLICATE.
    async with client.begin() as txn:
        txn.set(T, b"a", "c", b"1")
        txn.lock(T, b"a", "c")
        txn.delete(T, b"a", "c")
        txn.set(T, b"a", "c", b"2")
        txn.set(T, b"b", "c", b"x")
    await client.secondaries.drain()
    assert await values(client, ["a", "b"]) == [b"2", b"x"]


async def test_commit_locks_notifies_observers_of_the_job_rows(
    client: TransactionClient, tasks: list[TransactionClient]
) -> None:
    await client.store.watch("obs", T, ["c"])
    token = await begin_distributed(client, ttl_ms=60_000)
    await write_part(tasks[0], token, {"a": b"1"})
    await write_part(tasks[1], token, {"b": b"2"})
    commit_ts = await commit_distributed(client, token)
    found = await client.store.find_notifications(-(2**63), 2**63 - 1, now_ms=0, limit=10)
    assert sorted((n.observer, n.row, n.ts) for n in found) == [
        ("obs", b"a", commit_ts),
        ("obs", b"b", commit_ts),
    ]


async def test_a_reader_rolls_a_secondary_forward_after_the_commit_point(
    client: TransactionClient, tasks: list[TransactionClient], clock: WallClock
) -> None:
    token = await begin_distributed(client, ttl_ms=60_000)
    await write_part(tasks[0], token, {"a": b"1", "b": b"2"})
    # The driver dies right after the commit point: the secondaries stay locks.
    commit_ts = await clock.get_timestamp()
    assert await client.store.commit(token.start_ts, commit_ts, [token.primary]) == []
    assert await values(client, ["a", "b"]) == [b"1", b"2"]
    assert client.resolver.counts["roll_forward"] == 2
    reads = await client.store.read(await clock.get_timestamp(), [k("a"), k("b")])
    assert [(r.commit_ts, r.lock) for r in reads] == [(commit_ts, None)] * 2
    # The driver comes back: the commit completes with the same commit_ts.
    assert await commit_distributed(client, token) == commit_ts


async def test_a_job_whose_ttl_ran_out_is_rolled_back_by_a_reader(
    client: TransactionClient, tasks: list[TransactionClient], clock: WallClock
) -> None:
    token = await begin_distributed(client, ttl_ms=200)
    await write_part(tasks[0], token, {"a": b"1"})
    await asyncio.sleep(0.3)  # nobody keeps it alive
    assert await values(client, ["a"]) == [None]
    with pytest.raises(TransactionAborted):
        await commit_distributed(client, token)
    assert await client.store.scan_locks(await clock.get_timestamp()) == []


async def test_heartbeats_keep_a_job_alive(
    client: TransactionClient, tasks: list[TransactionClient], clock: WallClock
) -> None:
    token = await begin_distributed(client, ttl_ms=1000)
    for _ in range(3):
        await asyncio.sleep(0.4)
        assert await heartbeat_distributed(tasks[0], token)
    status = await client.store.check_txn_status(
        token.primary, token.start_ts, await clock.get_timestamp(), rollback_if_missing=False
    )
    assert status.state == TxnState.LOCKED  # 1.2 s after start_ts, with a 1 s TTL
    await write_part(tasks[1], token, {"a": b"1"})  # a part's prewrite beats as well
    await commit_distributed(client, token)
    assert not await heartbeat_distributed(tasks[0], token)


async def test_parts_conflict_like_transactions(
    client: TransactionClient, tasks: list[TransactionClient], clock: WallClock
) -> None:
    # A transaction that died after its prewrite, before the job began.
    dead_ts = await clock.get_timestamp()
    dead = [Mutation(k("p"), WriteKind.PUT, b"dead"), Mutation(k("c"), WriteKind.PUT, b"dead")]
    assert await client.store.prewrite(dead_ts, k("p"), 1, dead) == []
    await asyncio.sleep(0.01)
    token = await begin_distributed(client, ttl_ms=60_000)
    # A write committed after the job began.
    await put_committed(client, a=b"other")
    with pytest.raises(WriteConflict):
        await write_part(tasks[0], token, {"a": b"1"})
    # A live transaction's lock.
    live_ts = await clock.get_timestamp()
    live = Mutation(k("b"), WriteKind.PUT, b"live")
    assert await client.store.prewrite(live_ts, k("b"), 60_000, [live]) == []
    with pytest.raises(WriteConflict) as err:
        await write_part(tasks[1], token, {"b": b"1"})
    assert err.value.conflict_ts == live_ts
    # A dead transaction's lock is resolved (rolled back, from its primary) and the cell written.
    await write_part(tasks[2], token, {"c": b"1"})
    await commit_distributed(client, token)
    assert await values(client, ["c", "p"]) == [b"1", None]


def test_the_token_pickles() -> None:
    token = DistributedTxn(123, CellKey(TXN_TABLE, b"\x00" * 8, "p"), 600_000)
    assert pickle.loads(pickle.dumps(token)) == token
