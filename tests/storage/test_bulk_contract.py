"""The cell-store contract for distributed transactions, change streams and partitioning,
run against every store: in memory, Postgres, Postgres on 2 shards (``conftest.py``)."""

from __future__ import annotations

import itertools

import pytest

from percolator.server.storage.cells import (
    CellKey,
    Change,
    ChangeCursor,
    Mutation,
    PrewriteStatus,
    WriteKind,
)
from percolator.server.storage.errors import SnapshotTooOld
from percolator.server.storage.store import CellStore

from .test_contract import key, put, ts, write
from .test_notify_contract import clear, note, pending


def delete(k: CellKey) -> Mutation:
    return Mutation(k, WriteKind.DELETE)


def lock_only(k: CellKey) -> Mutation:
    return Mutation(k, WriteKind.LOCK)


# -- DUPLICATE ------------------------------------------------------------------------------


async def test_our_own_lock_with_another_write_is_a_duplicate(store: CellStore) -> None:
    k, p = key("a"), key("p")
    assert await store.prewrite(ts(1), p, 3000, [put(k, b"x")]) == []
    assert await store.prewrite(ts(1), p, 3000, [put(k, b"x")]) == []  # a retry: success
    for other in (put(k, b"y"), delete(k), lock_only(k), put(k, b"")):
        failures = await store.prewrite(ts(1), p, 3000, [other])
        assert [f.status for f in failures] == [PrewriteStatus.DUPLICATE], other
        assert failures[0].lock is not None and failures[0].lock.start_ts == ts(1)
        assert failures[0].lock.kind == WriteKind.PUT
    # The first write stands.
    assert await store.commit(ts(1), ts(2), [k]) == []
    assert (await store.read(ts(3), [k]))[0].value == b"x"


async def test_duplicate_in_a_batch_fails_only_that_cell(store: CellStore) -> None:
    p = key("p")
    cells = [key(f"r{i}") for i in range(6)]
    assert await store.prewrite(ts(1), p, 3000, [put(k, b"v") for k in cells]) == []
    again = [put(k, b"v") for k in cells[:3]] + [put(cells[3], b"other"), delete(cells[4])]
    failures = await store.prewrite(ts(1), p, 3000, again)
    assert sorted((f.key, f.status) for f in failures) == [
        (cells[3], PrewriteStatus.DUPLICATE),
        (cells[4], PrewriteStatus.DUPLICATE),
    ]
    deleted = key("gone")
    assert await store.prewrite(ts(1), p, 3000, [delete(deleted)]) == []
    assert await store.prewrite(ts(1), p, 3000, [delete(deleted)]) == []


# -- commit_locks / rollback_locks ----------------------------------------------------------


async def _prewrite_job(store: CellStore, start: int, rows: int) -> tuple[CellKey, list[Mutation]]:
    """A primary in a table of its own and secondaries over two tables, two columns each."""
    primary = CellKey("__txn", start.to_bytes(8, "big"), "p")
    assert await store.prewrite(start, primary, 60_000, [put(primary, b"")]) == []
    muts = [
        put(key(f"r{i:04d}", col, table), f"{table}/{i}/{col}".encode())
        for i in range(rows)
        for col in ("c", "d")
        for table in ("t", "u")
    ]
    assert await store.prewrite(start, primary, 60_000, muts) == []
    return primary, muts


async def test_commit_locks_commits_every_lock_of_the_transaction(store: CellStore) -> None:
    await write(store, key("r0001"), b"old", ts(1), ts(2))
    primary, muts = await _prewrite_job(store, ts(3), 20)
    # Another transaction's lock, older and younger, is not ours to touch.
    other = key("zz")
    assert await store.prewrite(ts(4), other, 3000, [put(other, b"other")]) == []
    assert await store.commit(ts(3), ts(5), [primary]) == []

    assert await store.commit_locks(ts(3), ts(5)) == len(muts)
    reads = await store.read(ts(6), [m.key for m in muts])
    assert [(r.value, r.commit_ts, r.lock) for r in reads] == [(m.value, ts(5), None) for m in muts]
    assert (await store.read(ts(4, 1), [key("r0001")]))[0].value == b"old"
    # Idempotent: nothing left to move, and a commit of a moved cell still succeeds.
    assert await store.commit_locks(ts(3), ts(5)) == 0
    assert await store.commit(ts(3), ts(5), [muts[0].key]) == []
    left = await store.scan_locks(ts(100))
    assert [(lk.key, lk.start_ts) for lk in left] == [(other, ts(4))]


async def test_commit_locks_moves_deletes_and_lock_only_locks(store: CellStore) -> None:
    a, b = key("a"), key("b")
    await write(store, a, b"a1", ts(1), ts(2))
    await write(store, b, b"b1", ts(1), ts(2))
    p = key("p")
    assert await store.prewrite(ts(3), p, 3000, [put(p, b""), delete(a), lock_only(b)]) == []
    assert await store.commit(ts(3), ts(4), [p]) == []
    assert await store.commit_locks(ts(3), ts(4)) == 2
    assert [r.value for r in await store.read(ts(5), [a, b])] == [None, b"b1"]
    # The LOCK record conflicts like any write record.
    late = await store.prewrite(ts(3, 1), b, 3000, [put(b, b"late")])
    assert [(f.status, f.conflict_ts) for f in late] == [(PrewriteStatus.WRITE_CONFLICT, ts(4))]


async def test_commit_locks_sets_notifications_like_a_commit(store: CellStore) -> None:
    await store.watch("obs", "t", ["c", "d"])
    await store.watch("second", "t", ["d"])
    a, b, c = key("a", "c"), key("a", "d"), key("b", "c")
    unwatched, locked = key("a", "x"), key("c", "c")
    await write(store, b, b"old", ts(1), ts(2))
    # That write notified row a: clear it, so what is found below is commit_locks' own.
    await store.clear_notifications([clear(b, ts(3)), clear(b, ts(3), "second")])
    assert await pending(store) == []
    p = key("p", table="__txn")
    muts = [put(p, b""), put(a, b"1"), delete(b), put(c, b"2"), put(unwatched, b"3")]
    muts.append(lock_only(locked))
    assert await store.prewrite(ts(3), p, 3000, muts) == []
    assert await store.commit(ts(3), ts(4), [p]) == []
    assert await store.commit_locks(ts(3), ts(4)) == 5
    found = sorted(await pending(store), key=lambda n: (n.row, n.observer))
    # Two watched cells of row a: one notification per observer; the LOCK notifies nobody.
    assert found == [note(a, ts(4)), note(a, ts(4), "second"), note(c, ts(4))]


async def test_rollback_locks_removes_every_lock_and_leaves_no_record(store: CellStore) -> None:
    await write(store, key("r0001"), b"old", ts(1), ts(2))
    primary, muts = await _prewrite_job(store, ts(3), 20)
    other = key("zz")
    assert await store.prewrite(ts(4), other, 3000, [put(other, b"other")]) == []
    assert await store.rollback(ts(3), [primary], leave_marker=True) == []

    assert await store.rollback_locks(ts(3)) == len(muts)
    reads = await store.read(ts(6), [m.key for m in muts])
    assert [r.lock for r in reads] == [None] * len(muts)
    assert (await store.read(ts(6), [key("r0001")]))[0].value == b"old"
    assert await store.rollback_locks(ts(3)) == 0
    assert [lk.key for lk in await store.scan_locks(ts(100))] == [other]
    # No marker on secondaries: only the primary's tells a late prewrite it is over.
    again = await store.prewrite(ts(3), primary, 3000, [put(primary, b"")])
    assert [f.status for f in again] == [PrewriteStatus.ROLLED_BACK]
    assert await store.prewrite(ts(3), primary, 3000, [muts[0]]) == []


async def test_commit_locks_of_many_locks_and_its_round_trips(store: CellStore) -> None:
    primary, muts = await _prewrite_job(store, ts(3), 700)  # 2,800 locks
    assert await store.commit(ts(3), ts(5), [primary]) == []
    per_shard = [0] * store.shard_count
    for m in muts:
        per_shard[store.shard_of(m.key.table, m.key.row)] += 1
    before = store.stats.snapshot().get("commit_locks", 0)
    assert await store.commit_locks(ts(3), ts(5)) == len(muts)
    trips = store.stats.snapshot()["commit_locks"] - before
    # Per shard one statement per 1,024 locks, and the one that finds fewer (docs/storage.md).
    assert trips == sum(n // 1024 + 1 for n in per_shard)
    reads = await store.read(ts(6), [m.key for m in muts])
    assert all(r.value == m.value for r, m in zip(reads, muts, strict=True))


# -- scan_changes -----------------------------------------------------------------------------


def change(k: CellKey, value: bytes | None, start: int, commit: int) -> Change:
    kind = WriteKind.PUT if value is not None else WriteKind.DELETE
    return Change(k, commit, start, kind, value)


async def test_scan_changes_in_commit_order_within_bounds(store: CellStore) -> None:
    a, b, c = key("a"), key("b"), key("c", "x")
    await write(store, b, b"b1", ts(1), ts(2))
    await write(store, a, b"a1", ts(3), ts(4))
    muts = [put(c, b"c1"), put(a, b"a2"), Mutation(b, WriteKind.DELETE)]
    assert await store.prewrite(ts(5), a, 3000, muts) == []
    assert await store.commit(ts(5), ts(6), [m.key for m in muts]) == []
    await write(store, key("a", table="other"), b"elsewhere", ts(7), ts(8))
    # Neither a rollback nor a LOCK record is a change.
    assert await store.prewrite(ts(9), a, 3000, [put(a, b"no")]) == []
    assert await store.rollback(ts(9), [a], leave_marker=True) == []
    assert await store.prewrite(ts(10), a, 3000, [lock_only(a)]) == []
    assert await store.commit(ts(10), ts(11), [a]) == []

    everything = await store.scan_changes("t", 0, ts(100), limit=100)
    assert everything == [
        change(b, b"b1", ts(1), ts(2)),
        change(a, b"a1", ts(3), ts(4)),
        change(a, b"a2", ts(5), ts(6)),
        change(b, None, ts(5), ts(6)),
        change(c, b"c1", ts(5), ts(6)),
    ]
    # after_ts is exclusive, upto_ts inclusive.
    assert await store.scan_changes("t", ts(2), ts(4), limit=100) == everything[1:2]
    assert await store.scan_changes("t", ts(4), ts(5), limit=100) == []
    assert await store.scan_changes("t", ts(6), ts(100), limit=100) == []


async def test_scan_changes_pages_with_a_cursor(store: CellStore) -> None:
    # Many changes at one commit_ts (a bulk job) and some around it.
    await write(store, key("m"), b"before", ts(1), ts(2))
    bulk = [put(key(f"r{i:03d}", col), f"{i}{col}".encode()) for i in range(30) for col in "xy"]
    assert await store.prewrite(ts(3), bulk[0].key, 3000, bulk) == []
    assert await store.commit(ts(3), ts(4), [m.key for m in bulk]) == []
    await write(store, key("a"), b"after", ts(5), ts(6))
    everything = await store.scan_changes("t", 0, ts(100), limit=1000)
    assert len(everything) == 62
    assert [c.cursor for c in everything] == sorted(c.cursor for c in everything)

    pages: list[list[Change]] = []
    cursor: ChangeCursor | None = None
    while True:
        page = await store.scan_changes("t", 0, ts(100), limit=7, after=cursor)
        if not page:
            break
        pages.append(page)
        cursor = page[-1].cursor
    assert [len(p) for p in pages] == [7] * 8 + [6]
    assert [c for p in pages for c in p] == everything
    assert await store.scan_changes("t", 0, ts(100), limit=0) == []


async def test_scan_changes_below_the_safe_point_is_refused(store: CellStore) -> None:
    await write(store, key("a"), b"1", ts(1), ts(2))
    await store.set_gc_safe_point(ts(5))
    assert len(await store.scan_changes("t", ts(5), ts(9), limit=10)) == 0
    with pytest.raises(SnapshotTooOld):
        await store.scan_changes("t", ts(4), ts(9), limit=10)


# -- min_lock_start_ts ------------------------------------------------------------------------


async def test_oldest_lock_of_a_table(store: CellStore) -> None:
    assert await store.min_lock_start_ts("t") is None
    elsewhere = key("a", table="other")
    assert await store.prewrite(ts(1), elsewhere, 3000, [put(elsewhere, b"x")]) == []
    # A LOCK-kind lock never commits a change: it does not count.
    assert await store.prewrite(ts(2), key("a"), 3000, [lock_only(key("a"))]) == []
    assert await store.min_lock_start_ts("t") is None
    cells = [key(f"r{i}") for i in range(10)]
    assert await store.prewrite(ts(5), cells[0], 3000, [put(k, b"v") for k in cells]) == []
    assert await store.prewrite(ts(3), key("b"), 3000, [delete(key("b"))]) == []
    assert await store.min_lock_start_ts("t") == ts(3)
    assert await store.min_lock_start_ts("other") == ts(1)
    oldest = await store.oldest_lock("t")
    assert oldest is not None
    assert (oldest.key, oldest.start_ts, oldest.primary, oldest.kind) == (
        key("b"),
        ts(3),
        key("b"),
        WriteKind.DELETE,
    )
    assert await store.rollback(ts(3), [key("b")], leave_marker=True) == []
    assert await store.min_lock_start_ts("t") == ts(5)
    assert await store.commit(ts(5), ts(6), cells) == []
    assert await store.min_lock_start_ts("t") is None


# -- sample_row_keys --------------------------------------------------------------------------


async def test_sample_row_keys_splits_rows_evenly(store: CellStore) -> None:
    assert await store.sample_row_keys("t", 4) == []
    rows = [f"r{i:03d}".encode() for i in range(200)]
    muts = [put(CellKey("t", r, col), b"v") for r in rows for col in ("_", "1")]
    assert await store.prewrite(ts(1), muts[0].key, 3000, muts) == []
    assert await store.commit(ts(1), ts(2), [m.key for m in muts]) == []
    await write(store, key("zzz", table="other"), b"v", ts(3), ts(4))

    points = await store.sample_row_keys("t", 4)
    assert points == sorted(set(points)) and 1 <= len(points) <= 3
    ranges: list[bytes | None] = [b"", *points, None]
    sizes = [
        sum(1 for r in rows if lo is not None and r >= lo and (hi is None or r < hi))
        for lo, hi in itertools.pairwise(ranges)
    ]
    assert sum(sizes) == len(rows)
    assert max(sizes) <= 2 * len(rows) / 4, sizes  # exact balance is not required
    if store.shard_count == 1:
        assert points == [b"r049", b"r099", b"r149"]
    assert await store.sample_row_keys("t", 1) == []
    few = await store.sample_row_keys("other", 8)
    assert few == [] or few == [b"zzz"]
