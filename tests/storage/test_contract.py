"""The cell-store contract, run against every store: in memory, Postgres, Postgres on 2 shards
(the ``store`` fixture of ``conftest.py``)."""

from __future__ import annotations

import asyncio

import pytest

from percolator.server.storage.cells import (
    CellKey,
    CommitRequest,
    CommitStatus,
    Mutation,
    PrewriteStatus,
    TxnState,
    WriteKind,
    ts_from_physical_ms,
)
from percolator.server.storage.errors import SnapshotTooOld
from percolator.server.storage.packed import PackedCells
from percolator.server.storage.store import CellStore

BASE_MS = 1_800_000_000_000


def ts(ms: int, logical: int = 0) -> int:
    """A timestamp ``ms`` milliseconds after a fixed base."""
    return ts_from_physical_ms(BASE_MS + ms) + logical


def key(row: str, col: str = "c", table: str = "t") -> CellKey:
    return CellKey(table, row.encode(), col)


def put(k: CellKey, value: bytes) -> Mutation:
    return Mutation(k, WriteKind.PUT, value)


async def write(store: CellStore, k: CellKey, value: bytes | None, start: int, commit: int):
    """One committed write of a single cell (PUT, or DELETE when value is None)."""
    kind = WriteKind.PUT if value is not None else WriteKind.DELETE
    assert await store.prewrite(start, k, 3000, [Mutation(k, kind, value)]) == []
    assert await store.commit(start, commit, [k]) == []


async def test_committed_value_is_visible_from_commit_ts(store: CellStore) -> None:
    k = key("a")
    await write(store, k, b"v1", ts(1), ts(2))
    before, at, after = (
        await store.read(ts(1, 5), [k]),
        await store.read(ts(2), [k]),
        await store.read(ts(9), [k]),
    )
    assert before[0].value is None and before[0].lock is None
    assert at[0].value == b"v1" and at[0].commit_ts == ts(2)
    assert after[0].value == b"v1"


async def test_read_returns_results_in_request_order(store: CellStore) -> None:
    keys = [key(f"r{i}", col) for i in range(5) for col in ("x", "y")]
    muts = [put(k, f"{k.row.decode()}/{k.column}".encode()) for k in keys]
    assert await store.prewrite(ts(1), keys[0], 3000, muts) == []
    assert await store.commit(ts(1), ts(2), keys) == []
    wanted = [*reversed(keys), key("absent")]
    results = await store.read(ts(3), wanted)
    assert [r.key for r in results] == wanted
    assert [r.value for r in results] == [*(m.value for m in reversed(muts)), None]


async def test_versions_and_delete(store: CellStore) -> None:
    k = key("a")
    await write(store, k, b"v1", ts(1), ts(2))
    await write(store, k, b"v2", ts(3), ts(4))
    await write(store, k, None, ts(5), ts(6))
    values = [(await store.read(t, [k]))[0].value for t in (ts(2), ts(4), ts(6))]
    assert values == [b"v1", b"v2", None]


async def test_lock_blocks_readers_at_or_after_its_start_ts(store: CellStore) -> None:
    k, primary = key("a"), key("p")
    await write(store, k, b"old", ts(1), ts(2))
    assert await store.prewrite(ts(5), primary, 4000, [put(k, b"new")]) == []
    older = (await store.read(ts(4), [k]))[0]
    assert older.value == b"old" and older.lock is None
    blocked = (await store.read(ts(6), [k]))[0]
    assert blocked.lock is not None
    assert blocked.lock.start_ts == ts(5)
    assert blocked.lock.primary == primary
    assert blocked.lock.ttl_ms == 4000
    assert blocked.lock.kind == WriteKind.PUT


async def test_lock_only_lock_does_not_block_reads_and_keeps_value(store: CellStore) -> None:
    k = key("a")
    await write(store, k, b"v1", ts(1), ts(2))
    assert await store.prewrite(ts(3), k, 3000, [Mutation(k, WriteKind.LOCK)]) == []
    assert (await store.read(ts(4), [k]))[0].value == b"v1"
    assert await store.commit(ts(3), ts(4), [k]) == []
    after = (await store.read(ts(5), [k]))[0]
    assert after.value == b"v1" and after.commit_ts == ts(2)


async def test_write_conflict_names_the_commit_ts(store: CellStore) -> None:
    k = key("a")
    await write(store, k, b"v1", ts(1), ts(5))
    failures = await store.prewrite(ts(4), k, 3000, [put(k, b"late")])
    assert len(failures) == 1
    assert failures[0].status == PrewriteStatus.WRITE_CONFLICT
    assert failures[0].conflict_ts == ts(5)
    assert await store.prewrite(ts(6), k, 3000, [put(k, b"ok")]) == []


async def test_prewrite_meets_another_lock(store: CellStore) -> None:
    k = key("a")
    assert await store.prewrite(ts(1), k, 3000, [put(k, b"x")]) == []
    failures = await store.prewrite(ts(2), key("b"), 3000, [put(k, b"y"), put(key("b"), b"z")])
    assert [f.key for f in failures] == [k]
    assert failures[0].status == PrewriteStatus.LOCKED
    assert failures[0].lock is not None and failures[0].lock.start_ts == ts(1)


async def test_prewrite_is_idempotent(store: CellStore) -> None:
    k = key("a")
    assert await store.prewrite(ts(1), k, 3000, [put(k, b"x")]) == []
    assert await store.prewrite(ts(1), k, 3000, [put(k, b"x")]) == []
    assert await store.commit(ts(1), ts(2), [k]) == []
    assert (await store.read(ts(3), [k]))[0].value == b"x"


async def test_commit_is_idempotent_and_fails_without_lock(store: CellStore) -> None:
    k = key("a")
    await write(store, k, b"x", ts(1), ts(2))
    assert await store.commit(ts(1), ts(2), [k]) == []
    failures = await store.commit(ts(7), ts(8), [key("never-locked")])
    assert [f.status for f in failures] == [CommitStatus.LOCK_MISSING]


async def test_rollback_with_marker_stops_a_delayed_prewrite(store: CellStore) -> None:
    k = key("a")
    assert await store.prewrite(ts(1), k, 3000, [put(k, b"x")]) == []
    assert await store.rollback(ts(1), [k], leave_marker=True) == []
    assert (await store.read(ts(2), [k]))[0].lock is None
    failures = await store.prewrite(ts(1), k, 3000, [put(k, b"x")])
    assert [f.status for f in failures] == [PrewriteStatus.ROLLED_BACK]
    failures = await store.commit(ts(1), ts(2), [k])
    assert [f.status for f in failures] == [CommitStatus.ROLLED_BACK]
    # The marker is not a value: a later transaction writes the cell.
    await write(store, k, b"y", ts(3), ts(4))
    assert (await store.read(ts(5), [k]))[0].value == b"y"


async def test_rollback_record_wins_over_a_newer_write(store: CellStore) -> None:
    k = key("a")
    assert await store.rollback(ts(1), [k], leave_marker=True) == []
    await write(store, k, b"later", ts(2), ts(3))
    failures = await store.prewrite(ts(1), k, 3000, [put(k, b"x")])
    assert [f.status for f in failures] == [PrewriteStatus.ROLLED_BACK]


def put_since(k: CellKey, value: bytes, since_ts: int) -> Mutation:
    """A PUT whose conflict check starts at ``since_ts`` (a READ COMMITTED statement's read)."""
    return Mutation(k, WriteKind.PUT, value, since_ts)


async def test_a_later_since_ts_overwrites_versions_committed_before_it(store: CellStore) -> None:
    k = key("a")
    await write(store, k, b"v1", ts(1), ts(5))
    # Another transaction's rollback record inside the skipped window is no conflict either.
    assert await store.rollback(ts(5, 1), [k], leave_marker=True) == []
    assert await store.prewrite(ts(4), k, 3000, [put_since(k, b"rc", ts(6))]) == []
    assert await store.commit(ts(4), ts(7), [k]) == []
    reads = [(await store.read(t, [k]))[0] for t in (ts(6), ts(7))]
    assert [(r.value, r.commit_ts) for r in reads] == [(b"v1", ts(5)), (b"rc", ts(7))]


async def test_a_since_ts_at_or_before_a_commit_still_conflicts(store: CellStore) -> None:
    k = key("a")
    await write(store, k, b"v1", ts(1), ts(5))
    await write(store, k, b"v2", ts(6), ts(8))
    for since in (ts(5), ts(8)):
        failures = await store.prewrite(ts(4), k, 3000, [put_since(k, b"late", since)])
        assert [(f.status, f.conflict_ts) for f in failures] == [
            (PrewriteStatus.WRITE_CONFLICT, ts(8))  # the newest conflicting version
        ], since
    assert (await store.read(ts(9), [k]))[0].lock is None


async def test_a_since_ts_of_zero_or_below_start_ts_checks_from_start_ts(store: CellStore) -> None:
    k = key("a")
    await write(store, k, b"v1", ts(1), ts(5))
    for since in (0, ts(2), ts(4)):
        failures = await store.prewrite(ts(4), k, 3000, [put_since(k, b"late", since)])
        assert [(f.status, f.conflict_ts) for f in failures] == [
            (PrewriteStatus.WRITE_CONFLICT, ts(5))
        ], since
    assert await store.prewrite(ts(6), k, 3000, [put_since(k, b"ok", ts(2))]) == []


async def test_a_since_ts_does_not_skip_our_own_rollback_record(store: CellStore) -> None:
    k, fresh = key("a"), key("fresh")
    assert await store.rollback(ts(3), [k, fresh], leave_marker=True) == []
    await write(store, k, b"later", ts(4), ts(5))
    for cell in (k, fresh):
        failures = await store.prewrite(ts(3), cell, 3000, [put_since(cell, b"x", ts(9))])
        assert [f.status for f in failures] == [PrewriteStatus.ROLLED_BACK], cell


async def _since_batch(store: CellStore, start: int, tag: str, *, duplicate: bool) -> None:
    """One prewrite of cells with and without a since_ts, each failing or locking as it would
    alone; ``duplicate`` sends one cell twice (the stores' per-cell path)."""
    skipped = [key(f"{tag}skip{i}") for i in range(4)]  # written at C, since after C
    at_c = [key(f"{tag}at{i}") for i in range(2)]  # written at C, since == C
    plain = [key(f"{tag}plain{i}") for i in range(2)]  # written at C, no since
    fresh = [key(f"{tag}fresh{i}") for i in range(4)]  # never written
    rolled = key(f"{tag}rolled")
    c = start + ts(2) - ts(1)
    for k in skipped + at_c + plain:
        await write(store, k, b"old", start - 1, c)
    assert await store.rollback(start, [rolled], leave_marker=True) == []
    muts = [
        *(put_since(k, b"new", c + 1) for k in skipped),
        *(put_since(k, b"new", c) for k in at_c),
        *(put(k, b"new") for k in plain),
        *(put_since(k, b"new", c + 1 if i % 2 else 0) for i, k in enumerate(fresh)),
        put_since(rolled, b"new", c + 1),
    ]
    if duplicate:
        muts.append(put(skipped[0], b"new"))  # our own lock, same write: a retry
    failures = await store.prewrite(start, skipped[0], 3000, muts)
    got = {f.key: (f.status, f.conflict_ts) for f in failures}
    assert {k: v for k, v in got.items() if k != rolled} == {
        **{k: (PrewriteStatus.WRITE_CONFLICT, c) for k in at_c + plain},
    }
    assert got[rolled][0] == PrewriteStatus.ROLLED_BACK
    assert await store.rollback(start, at_c + plain, leave_marker=False) == []
    locked = skipped + fresh
    assert await store.commit(start, c + 2, locked) == []
    reads = await store.read(c + 2, locked + at_c + plain)
    assert [r.value for r in reads] == [b"new"] * len(locked) + [b"old"] * 4


async def test_since_ts_per_cell_in_a_set_based_batch(store: CellStore) -> None:
    await _since_batch(store, ts(10), "s", duplicate=False)


async def test_since_ts_per_cell_in_a_batch_with_a_cell_twice(store: CellStore) -> None:
    await _since_batch(store, ts(10), "d", duplicate=True)


async def test_one_since_ts_for_every_cell_of_a_batch(store: CellStore) -> None:
    """Every cell with the same later since_ts (the stores may send it once)."""
    keys = [key(f"r{i}") for i in range(10)]
    for k in keys:
        await write(store, k, b"old", ts(1), ts(5))
    await write(store, keys[3], b"newer", ts(6), ts(7))
    failures = await store.prewrite(ts(4), keys[0], 3000, [put_since(k, b"x", ts(6)) for k in keys])
    assert [(f.key, f.status, f.conflict_ts) for f in failures] == [
        (keys[3], PrewriteStatus.WRITE_CONFLICT, ts(7))
    ]


async def test_rollback_without_marker_only_removes_the_lock(store: CellStore) -> None:
    k = key("a")
    assert await store.prewrite(ts(1), k, 3000, [put(k, b"x")]) == []
    assert await store.rollback(ts(1), [k], leave_marker=False) == []
    assert (await store.read(ts(2), [k]))[0].lock is None
    assert await store.prewrite(ts(3), k, 3000, [put(k, b"y")]) == []


async def test_rollback_never_undoes_a_commit(store: CellStore) -> None:
    k = key("a")
    await write(store, k, b"x", ts(1), ts(2))
    assert await store.rollback(ts(1), [k], leave_marker=True) == [k]
    assert (await store.read(ts(3), [k]))[0].value == b"x"


async def test_txn_status_committed_and_rolled_back(store: CellStore) -> None:
    p = key("p")
    await write(store, p, b"x", ts(1), ts(2))
    status = await store.check_txn_status(p, ts(1), ts(100), rollback_if_missing=True)
    assert status.state == TxnState.COMMITTED and status.commit_ts == ts(2)
    assert await store.prewrite(ts(3), p, 3000, [put(p, b"y")]) == []
    assert await store.rollback(ts(3), [p], leave_marker=True) == []
    status = await store.check_txn_status(p, ts(3), ts(100), rollback_if_missing=False)
    assert status.state == TxnState.ROLLED_BACK


async def test_txn_status_live_lock_then_expired(store: CellStore) -> None:
    p = key("p")
    assert await store.prewrite(ts(10), p, 1000, [put(p, b"x")]) == []
    alive = await store.check_txn_status(p, ts(10), ts(500), rollback_if_missing=True)
    assert alive.state == TxnState.LOCKED and alive.lock is not None
    assert alive.lock.ttl_ms == 1000
    expired = await store.check_txn_status(p, ts(10), ts(2000), rollback_if_missing=False)
    assert expired.state == TxnState.ROLLED_BACK
    assert (await store.read(ts(2001), [p]))[0].lock is None
    # The rollback left a marker on the primary: the transaction can no longer commit.
    assert [f.status for f in await store.commit(ts(10), ts(2002), [p])] == [
        CommitStatus.ROLLED_BACK
    ]


async def test_txn_status_missing_primary(store: CellStore) -> None:
    p = key("p")
    missing = await store.check_txn_status(p, ts(1), ts(2), rollback_if_missing=False)
    assert missing.state == TxnState.MISSING
    rolled = await store.check_txn_status(p, ts(1), ts(2), rollback_if_missing=True)
    assert rolled.state == TxnState.ROLLED_BACK
    late = await store.prewrite(ts(1), p, 3000, [put(p, b"late")])
    assert [f.status for f in late] == [PrewriteStatus.ROLLED_BACK]


async def test_txn_status_ignores_another_transactions_lock(store: CellStore) -> None:
    p = key("p")
    assert await store.prewrite(ts(5), p, 3000, [put(p, b"other")]) == []
    status = await store.check_txn_status(p, ts(1), ts(2), rollback_if_missing=False)
    assert status.state == TxnState.MISSING


async def test_heartbeat_extends_ttl(store: CellStore) -> None:
    p = key("p")
    assert await store.prewrite(ts(10), p, 1000, [put(p, b"x")]) == []
    assert await store.heartbeat(p, ts(10), 5000)
    assert await store.heartbeat(p, ts(10), 10)  # never lowers it
    status = await store.check_txn_status(p, ts(10), ts(3000), rollback_if_missing=True)
    assert status.state == TxnState.LOCKED and status.lock is not None
    assert status.lock.ttl_ms == 5000
    assert not await store.heartbeat(p, ts(99), 5000)


async def test_scan_orders_filters_and_skips_deleted(store: CellStore) -> None:
    rows = [f"r{i:03d}" for i in range(40)]
    muts = [put(key(r, col), f"{r}{col}".encode()) for r in rows for col in ("b", "a")]
    muts.append(put(key("r000", "x", table="other"), b"elsewhere"))
    assert await store.prewrite(ts(1), muts[0].key, 3000, muts) == []
    assert await store.commit(ts(1), ts(2), [m.key for m in muts]) == []
    await write(store, key("r005", "a"), None, ts(3), ts(4))

    cells = [c async for c in store.scan(ts(5), "t", b"r003", b"r007", page_size=3)]
    assert [(c.key.row, c.key.column) for c in cells] == [
        (b"r003", "a"),
        (b"r003", "b"),
        (b"r004", "a"),
        (b"r004", "b"),
        (b"r005", "b"),
        (b"r006", "a"),
        (b"r006", "b"),
    ]
    only_b = [c async for c in store.scan(ts(5), "t", None, None, ["b"], page_size=7)]
    assert [c.key.row for c in only_b] == [r.encode() for r in rows]
    assert all(c.value == c.key.row + b"b" for c in only_b)
    at_old_ts = [c async for c in store.scan(ts(3), "t", b"r005", b"r006")]
    assert [c.value for c in at_old_ts] == [b"r005a", b"r005b"]


async def test_scan_yields_locks(store: CellStore) -> None:
    await write(store, key("a"), b"1", ts(1), ts(2))
    assert await store.prewrite(ts(3), key("b"), 3000, [put(key("b"), b"2")]) == []
    cells = [c async for c in store.scan(ts(4), "t", None, None)]
    assert [(c.key.row, c.value, c.lock is not None) for c in cells] == [
        (b"a", b"1", False),
        (b"b", None, True),
    ]


async def rows_to_scan(store: CellStore, n: int, locked_row: str) -> list[str]:
    """Rows r000.. of cells a, b, c (value: row + column), committed at ts(2); then r005
    deleted and r006's a deleted at ts(4), and at ts(5) a lock on ``locked_row``'s b and one
    on the new row r100's a. Returns the rows' names."""
    rows = [f"r{i:03d}" for i in range(n)]
    muts = [put(key(r, col), f"{r}{col}".encode()) for r in rows for col in ("c", "b", "a")]
    assert await store.prewrite(ts(1), muts[0].key, 3000, muts) == []
    assert await store.commit(ts(1), ts(2), [m.key for m in muts]) == []
    for col in ("a", "b", "c"):
        await write(store, key("r005", col), None, ts(3), ts(4))  # the whole row deleted
    await write(store, key("r006", "a"), None, ts(3), ts(4))
    locked = [put(key(locked_row, "b"), b"new"), put(key("r100", "a"), b"new row")]
    assert await store.prewrite(ts(5), locked[0].key, 3000, locked) == []
    return rows


async def test_scan_rows_groups_what_scan_finds(store: CellStore) -> None:
    rows = await rows_to_scan(store, 30, "r010")

    def expected(row: str) -> tuple[bytes, dict[str, bytes], list[CellKey]]:
        values = {c: f"{row}{c}".encode() for c in ("a", "b", "c")}
        if row == "r006":
            del values["a"]
        if row == "r010":
            del values["b"]
            return row.encode(), values, [key("r010", "b")]
        return row.encode(), values, []

    want = [expected(r) for r in rows if r != "r005"]
    want.append((b"r100", {}, [key("r100", "a")]))
    for page_size in (1, 2, 3, 4, 1000):  # pages that cut rows in two, and one page
        pages = [p async for p in store.scan_rows(ts(6), "t", None, None, page_size=page_size)]
        assert all(pages)
        got = [(r.row, r.values, [lk.key for lk in r.locks]) for p in pages for r in p]
        assert got == want, page_size
    ranged = [
        (r.row, sorted(r.values))
        async for p in store.scan_rows(ts(6), "t", b"r004", b"r008", ["a"], page_size=2)
        for r in p
    ]
    assert ranged == [(b"r004", ["a"]), (b"r007", ["a"])]


async def test_reverse_scan_is_the_scan_backward(store: CellStore) -> None:
    """Descending (row, column) order, the same cells, bounds, columns and snapshot, over
    pages of every size (a page cut inside a row, on a deleted cell, on a lock)."""
    await rows_to_scan(store, 30, "r010")
    await write(store, key("r007", "b"), b"newer", ts(3), ts(4))
    await write(store, key("r008", "b"), b"too new", ts(7), ts(8))  # after the snapshot
    ranges = [(None, None), (b"r004", b"r012"), (b"r004", None), (None, b"r012"), (b"r1", None)]
    for start, end in ranges:
        for columns in (None, ["b", "c"]):
            forward = [c async for c in store.scan(ts(6), "t", start, end, columns)]
            for page_size in (1, 2, 3, 5, 1000):
                backward = store.scan(
                    ts(6), "t", start, end, columns, page_size=page_size, reverse=True
                )
                got = [c async for c in backward]
                assert got == forward[::-1], (start, end, columns, page_size)


async def test_reverse_scan_meets_the_same_locks(store: CellStore) -> None:
    """A reverse scan at ts reports the locks below ts (a new row's too), not those above it
    nor LOCK-kind ones, and each hides its cell's committed value."""
    for i in range(6):
        await write(store, key(f"r{i}"), f"v{i}".encode(), ts(1), ts(2))
    assert await store.prewrite(ts(3), key("r4"), 3000, [put(key("r4"), b"x")]) == []
    assert await store.prewrite(ts(3), key("r9"), 3000, [put(key("r9"), b"new")]) == []
    lock_only = Mutation(key("r2"), WriteKind.LOCK, None)
    assert await store.prewrite(ts(3), key("r2"), 3000, [lock_only]) == []
    assert await store.prewrite(ts(8), key("r1"), 3000, [put(key("r1"), b"later")]) == []
    for page_size in (1, 2, 1000):
        cells = [
            c async for c in store.scan(ts(5), "t", None, None, page_size=page_size, reverse=True)
        ]
        assert [(c.key.row, c.value, c.lock and c.lock.start_ts) for c in cells] == [
            (b"r9", None, ts(3)),
            (b"r5", b"v5", None),
            (b"r4", None, ts(3)),
            (b"r3", b"v3", None),
            (b"r2", b"v2", None),
            (b"r1", b"v1", None),
            (b"r0", b"v0", None),
        ], page_size


async def test_reverse_scan_rows_groups_rows_backward(store: CellStore) -> None:
    rows = await rows_to_scan(store, 30, "r010")
    forward = [r async for p in store.scan_rows(ts(6), "t", None, None) for r in p]
    assert len(forward) == len(rows)  # r005 deleted, r100 locked
    for page_size in (1, 2, 3, 4, 1000):  # pages that cut rows in two, and one page
        pages = [
            p
            async for p in store.scan_rows(
                ts(6), "t", None, None, page_size=page_size, reverse=True
            )
        ]
        assert all(pages)
        got = [r for p in pages for r in p]
        assert got == forward[::-1], page_size
    ranged = [
        (r.row, sorted(r.values))
        async for p in store.scan_rows(
            ts(6), "t", b"r004", b"r008", ["a"], page_size=2, reverse=True
        )
        for r in p
    ]
    assert ranged == [(b"r007", ["a"]), (b"r004", ["a"])]


async def test_reverse_scan_below_the_safe_point_is_refused(store: CellStore) -> None:
    await write(store, key("a"), b"1", ts(1), ts(2))
    await store.set_gc_safe_point(ts(5))
    with pytest.raises(SnapshotTooOld):
        [c async for c in store.scan(ts(4), "t", None, None, reverse=True)]


async def test_scan_packed_packs_clean_pages_and_hands_locked_ones_over_as_rows(
    store: CellStore,
) -> None:
    rows = await rows_to_scan(store, 40, "r030")
    await write(store, key("r007", "b"), b"newer", ts(3), ts(4))
    await write(store, key("r008", "b"), b"too new", ts(7), ts(8))  # after the snapshot
    columns = ["a", "b", "c"]

    def expected(row: str) -> tuple[bytes, dict[str, bytes]]:
        values = {c: f"{row}{c}".encode() for c in columns}
        if row == "r006":
            del values["a"]
        if row == "r007":
            values["b"] = b"newer"
        if row == "r030":
            del values["b"]
        return row.encode(), values

    want = [expected(r) for r in rows if r != "r005"]
    for page_size in (4, 7, 1000):  # pages cut inside rows, and one page
        got: list[tuple[bytes, dict[str, bytes]]] = []
        locks: list[CellKey] = []
        packed_pages = 0
        async for page in store.scan_packed(ts(6), "t", None, None, columns, page_size=page_size):
            if isinstance(page, PackedCells):
                packed_pages += 1
                got += page.rows(columns)
            else:
                got += [(r.row, r.values) for r in page if r.values]
                locks += [lk.key for r in page for lk in r.locks]
        assert sorted(got) == want, page_size
        assert sorted(locks) == [key("r030", "b"), key("r100", "a")]
        assert packed_pages > 0 or page_size == 1000  # one page: it has the locks
    ranged = [
        r
        async for page in store.scan_packed(ts(6), "t", b"r004", b"r009", ["b"], page_size=2)
        for r in page.rows(["b"])  # type: ignore[union-attr]
    ]
    assert ranged == [
        (f"r00{i}".encode(), {"b": b"newer" if i == 7 else f"r00{i}b".encode()})
        for i in (4, 6, 7, 8)
    ]


async def test_scan_locks_lists_old_locks(store: CellStore) -> None:
    assert await store.prewrite(ts(1), key("a"), 3000, [put(key("a"), b"1")]) == []
    assert await store.prewrite(ts(9), key("b"), 3000, [put(key("b"), b"2")]) == []
    locks = await store.scan_locks(ts(5))
    assert [(lk.key, lk.start_ts) for lk in locks] == [(key("a"), ts(1))]


async def test_gc_keeps_what_snapshots_at_the_safe_point_read(store: CellStore) -> None:
    a, b = key("a"), key("b")
    await write(store, a, b"a1", ts(1), ts(2))
    await write(store, a, b"a2", ts(3), ts(4))
    assert await store.prewrite(ts(5), a, 3000, [put(a, b"x")]) == []
    assert await store.rollback(ts(5), [a], leave_marker=True) == []
    await write(store, a, b"a3", ts(9), ts(10))
    await write(store, b, b"b1", ts(1), ts(2))
    await write(store, b, None, ts(3), ts(4))

    assert await store.set_gc_safe_point(ts(7)) == ts(7)
    assert await store.set_gc_safe_point(ts(6)) == ts(7)  # never lowered
    result = await store.gc(ts(7))
    # a1 (shadowed), b1 and b's delete (nothing left to read), the rollback record.
    assert result.versions_removed == 3
    assert result.rollback_records_removed == 1
    assert [r.value for r in await store.read(ts(7), [a, b])] == [b"a2", None]
    assert (await store.read(ts(10), [a]))[0].value == b"a3"
    too_old = await store.prewrite(ts(6), key("c"), 3000, [put(key("c"), b"c")])
    assert [f.status for f in too_old] == [PrewriteStatus.TOO_OLD]


async def test_one_round_trip_per_shard_batch(store: CellStore) -> None:
    keys = [key(f"r{i}") for i in range(20)]
    shards = {store.shard_of(k.table, k.row) for k in keys}
    before = store.stats.snapshot()
    assert await store.prewrite(ts(1), keys[0], 3000, [put(k, b"v") for k in keys]) == []
    assert await store.commit(ts(1), ts(2), keys) == []
    await store.read(ts(3), keys)
    after = store.stats.snapshot()
    for op in ("prewrite", "commit", "read"):
        assert after.get(op, 0) - before.get(op, 0) == len(shards), op


async def test_reads_below_the_safe_point_are_refused(store: CellStore) -> None:
    await write(store, key("a"), b"1", ts(1), ts(2))
    assert await store.set_gc_safe_point(ts(5)) == ts(5)
    assert [r.value for r in await store.read(ts(5), [key("a")])] == [b"1"]
    for keys in ([key("a")], [key("a"), key("b")]):
        with pytest.raises(SnapshotTooOld):
            await store.read(ts(4), keys)
    with pytest.raises(SnapshotTooOld):
        [c async for c in store.scan(ts(4), "t", None, None)]


async def test_a_batch_reports_each_cells_own_outcome(store: CellStore) -> None:
    """Many cells in one prewrite and one commit: each succeeds or fails as it would alone."""
    locked, newer, rolled, mine = key("locked"), key("newer"), key("rolled"), key("mine")
    fresh = [key(f"fresh{i:02}") for i in range(20)]
    assert await store.prewrite(ts(1), locked, 3000, [put(locked, b"other")]) == []
    await write(store, newer, b"v", ts(2), ts(12))
    await store.rollback(ts(10), [rolled], leave_marker=True)
    assert await store.prewrite(ts(10), mine, 3000, [put(mine, b"m")]) == []

    cells = [locked, newer, rolled, mine, *fresh]
    failures = await store.prewrite(ts(10), mine, 3000, [put(k, b"m") for k in cells])
    by_key = {f.key: f for f in failures}
    assert set(by_key) == {locked, newer, rolled}
    assert by_key[locked].status == PrewriteStatus.LOCKED
    assert by_key[locked].lock is not None and by_key[locked].lock.start_ts == ts(1)
    assert by_key[newer].status == PrewriteStatus.WRITE_CONFLICT
    assert by_key[newer].conflict_ts == ts(12)
    assert by_key[rolled].status == PrewriteStatus.ROLLED_BACK

    # Our own lock holding another value is a duplicate, the same value is a retry.
    failures = await store.prewrite(ts(10), mine, 3000, [put(mine, b"other"), put(fresh[0], b"m")])
    assert [(f.key, f.status) for f in failures] == [(mine, PrewriteStatus.DUPLICATE)]

    never = key("never")
    failures = await store.commit(ts(10), ts(11), [mine, *fresh, never, rolled])
    assert {(f.key, f.status) for f in failures} == {
        (never, CommitStatus.LOCK_MISSING),
        (rolled, CommitStatus.ROLLED_BACK),
    }
    reads = await store.read(ts(11), [mine, *fresh])
    assert [r.value for r in reads] == [b"m"] * 21
    assert await store.commit(ts(10), ts(11), [mine, *fresh]) == []


async def test_a_cell_twice_in_one_batch_is_written_once(store: CellStore) -> None:
    a, b = key("a"), key("b")
    assert await store.prewrite(ts(1), a, 3000, [put(a, b"x"), put(b, b"y"), put(a, b"x")]) == []
    failures = await store.prewrite(ts(1), a, 3000, [put(b, b"y"), put(b, b"other")])
    assert [(f.key, f.status) for f in failures] == [(b, PrewriteStatus.DUPLICATE)]
    assert await store.commit(ts(1), ts(2), [a, b, a]) == []
    assert [r.value for r in await store.read(ts(3), [a, b])] == [b"x", b"y"]


async def test_commit_batch_commits_several_transactions(store: CellStore) -> None:
    a = [key(f"a{i}") for i in range(12)]
    b = [key(f"b{i}") for i in range(12)]
    assert await store.prewrite(ts(1), a[0], 3000, [put(k, b"from 1") for k in a]) == []
    assert await store.prewrite(ts(2), b[0], 3000, [put(k, b"from 2") for k in b]) == []
    never = key("never")
    failures = await store.commit_batch(
        [CommitRequest(ts(1), ts(5), a), CommitRequest(ts(2), ts(6), [*b, never])]
    )
    assert [(f.key, f.status) for f in failures] == [(never, CommitStatus.LOCK_MISSING)]
    assert [r.value for r in await store.read(ts(5), a + b)] == [b"from 1"] * 12 + [None] * 12
    assert [r.value for r in await store.read(ts(6), b)] == [b"from 2"] * 12


async def test_commit_primary_takes_its_shards_secondaries_along(store: CellStore) -> None:
    primary, cells = key("p"), [key(f"s{i}", col) for i in range(10) for col in ("x", "y")]
    assert (
        await store.prewrite(ts(1), primary, 3000, [put(k, b"v") for k in [primary, *cells]]) == []
    )
    outcome = await store.commit_primary(ts(1), ts(2), primary, cells)
    assert outcome.committed
    home = store.shard_of(primary.table, primary.row)
    assert list(outcome.rest) == [k for k in cells if store.shard_of(k.table, k.row) != home]
    # Those taken along are write records now; the rest are still locks.
    reads = await store.read(ts(3), [primary, *cells])
    assert [r.lock is not None for r in reads] == [False] + [k in outcome.rest for k in cells]
    assert await store.commit(ts(1), ts(2), list(outcome.rest)) == []
    assert [r.value for r in await store.read(ts(3), cells)] == [b"v"] * len(cells)


async def test_commit_primary_commits_nothing_once_the_primary_is_rolled_back(
    store: CellStore,
) -> None:
    primary, cells = key("p"), [key(f"s{i}") for i in range(6)]
    assert (
        await store.prewrite(ts(1), primary, 3000, [put(k, b"v") for k in [primary, *cells]]) == []
    )
    # A reader found the primary's lock expired and rolled it back.
    assert await store.rollback(ts(1), [primary], leave_marker=True) == []
    outcome = await store.commit_primary(ts(1), ts(2), primary, cells)
    assert not outcome.committed
    # No secondary was committed: each is still a lock (which readers will roll back).
    reads = await store.read(ts(3), cells)
    assert all(r.lock is not None and r.lock.start_ts == ts(1) for r in reads)
    assert [r.value for r in await store.read(ts(3), [primary])] == [None]


async def test_commit_primary_is_idempotent(store: CellStore) -> None:
    primary, cells = key("p"), [key(f"s{i}") for i in range(3)]
    assert (
        await store.prewrite(ts(1), primary, 3000, [put(k, b"v") for k in [primary, *cells]]) == []
    )
    assert (await store.commit_primary(ts(1), ts(2), primary, cells)).committed
    again = await store.commit_primary(ts(1), ts(2), primary, cells)
    assert again.committed


async def test_concurrent_commit_primaries_commit_all_or_nothing_each(
    store: CellStore,
) -> None:
    """Guarded commits of several transactions at once (the store may put them in one
    statement): the one whose primary was rolled back commits nothing, the others all."""
    txns = [(ts(i + 1), key(f"p{i}"), [key(f"s{i}-{j}") for j in range(4)]) for i in range(6)]
    for start, primary, cells in txns:
        muts = [put(k, b"%d" % start) for k in [primary, *cells]]
        assert await store.prewrite(start, primary, 3000, muts) == []
    lost_start, lost_primary, lost_cells = txns[3]
    assert await store.rollback(lost_start, [lost_primary], leave_marker=True) == []
    outcomes = await asyncio.gather(
        *(store.commit_primary(s, ts(50 + i), p, c) for i, (s, p, c) in enumerate(txns))
    )
    assert [o.committed for o in outcomes] == [i != 3 for i in range(6)]
    for i, ((start, _, cells), outcome) in enumerate(zip(txns, outcomes, strict=True)):
        if i == 3:
            continue
        assert await store.commit(start, ts(50 + i), list(outcome.rest)) == []
        reads = await store.read(ts(99), cells)
        assert [r.value for r in reads] == [b"%d" % start] * len(cells)
    reads = await store.read(ts(99), lost_cells)
    assert all(r.lock is not None and r.lock.start_ts == lost_start for r in reads)


async def test_purge_table_removes_every_row_of_that_table_only(store: CellStore) -> None:
    await store.watch("obs", "t", ["c"])
    rows = [key(f"r{i}") for i in range(6)]
    for i, k in enumerate(rows):
        await write(store, k, b"1", ts(1), ts(2))
        await write(store, k, b"2" if i % 2 else None, ts(3), ts(4))
    assert await store.prewrite(ts(5), rows[0], 3000, [put(rows[0], b"x")]) == []
    assert await store.prewrite(ts(6), key("r9"), 3000, [put(key("r9"), b"y")]) == []
    assert await store.rollback(ts(6), [key("r9")], leave_marker=True) == []
    other = key("r0", table="u")
    await write(store, other, b"kept", ts(1), ts(2))
    assert await store.prewrite(ts(5), other, 3000, [put(other, b"x2")]) == []

    # 12 write records, 1 rollback record, 1 lock, 6 notifications.
    assert await store.purge_table("t") == 20
    reads = await store.read(ts(9), [*rows, key("r9")])
    assert [(r.value, r.lock) for r in reads] == [(None, None)] * 7
    assert [lk.key for lk in await store.scan_locks(ts(9))] == [other]
    found = await store.find_notifications(-(2**63), 2**63 - 1, now_ms=10**15, limit=100)
    assert found == []
    assert (await store.read(ts(3), [other]))[0].value == b"kept"
    assert await store.purge_table("t") == 0


async def test_purge_table_goes_in_chunks(
    store: CellStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from percolator.server.storage import memory_store, postgres_store

    monkeypatch.setattr(postgres_store, "PURGE_ROWS", 3)
    monkeypatch.setattr(memory_store, "PURGE_ROWS", 3)
    rows = [key(f"r{i}") for i in range(10)]
    assert await store.prewrite(ts(1), rows[0], 3000, [put(k, b"v") for k in rows]) == []
    assert await store.commit(ts(1), ts(2), rows) == []
    before = store.stats.snapshot().get("purge_table", 0)
    assert await store.purge_table("t") == 10
    assert [r.value for r in await store.read(ts(3), rows)] == [None] * 10
    # Per shard: a statement per 3 rows of the shard, and one that finds fewer.
    per_shard = [
        sum(store.shard_of(k.table, k.row) == s for k in rows) for s in range(store.shard_count)
    ]
    expected = sum(1 + n // 3 for n in per_shard)
    assert store.stats.snapshot()["purge_table"] - before == expected


async def test_gc_sweeps_a_bounded_part_per_call_and_every_cell_in_turn(
    store: CellStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from percolator.server.storage import postgres_store

    # Chunks of 7 records cut cells of 3 versions apart: a chunk completes its last cell.
    monkeypatch.setattr(postgres_store, "GC_CHUNK_RECORDS", 7)
    rows = [key(f"r{i:02}") for i in range(30)]
    for v, (start, commit) in enumerate([(1, 2), (3, 4), (5, 6)]):
        value = f"v{v}".encode()
        assert await store.prewrite(ts(start), rows[0], 3000, [put(k, value) for k in rows]) == []
        assert await store.commit(ts(start), ts(commit), rows) == []
    await store.set_gc_safe_point(ts(7))
    removed = []
    while sum(removed) < 60 and len(removed) < 10:
        removed.append((await store.gc(ts(7), max_records=20)).versions_removed)
    assert sum(removed) == 60  # two old versions of each of the 30 cells
    assert max(removed) < 60  # each call did a part
    assert [r.value for r in await store.read(ts(7), rows)] == [b"v2"] * 30
    # The sweep starts over: a version shadowed since is found by the calls that follow.
    await write(store, rows[0], b"v3", ts(8), ts(9))
    await store.set_gc_safe_point(ts(10))
    again = [(await store.gc(ts(10), max_records=20)).versions_removed for _ in range(4)]
    assert sum(again) == 1
    assert (await store.read(ts(10), [rows[0]]))[0].value == b"v3"
