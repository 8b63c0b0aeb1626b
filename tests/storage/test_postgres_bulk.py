"""What only the Postgres store has for distributed transactions and change streams: the
version 3 -> 4 migration, the bulk moves racing readers and notification batches, their round
trips, and the indexes they rely on."""

from __future__ import annotations

import asyncio
import itertools

import asyncpg

from percolator.server.storage.cells import (
    CellKey,
    Mutation,
    PrewriteStatus,
    WriteKind,
)
from percolator.server.storage.postgres_store import (
    BULK_MOVE_PARTS,
    LOCKS_PER_STATEMENT,
    PostgresCellStore,
)
from percolator.server.storage.schema import SCHEMA_VERSION
from percolator.server.storage.sharding import row_hash

from .test_contract import key, put, ts, write
from .test_postgres_store import notification_batches, old_prewrite, old_shard


async def test_version_3_shard_migrates_to_the_current_version(fresh_dsns) -> None:
    (dsn,) = await fresh_dsns(1)
    conn = await old_shard(dsn, 3)
    try:
        old = key("old")
        await old_prewrite(conn, ts(1), old, b"committed before")
        await conn.execute(
            "SELECT percolator_commit_one($1, $2, $3, $4, $5, $6)",
            ts(1),
            ts(2),
            old.table,
            old.row,
            old.column,
            row_hash(old.table, old.row),
        )
        pending = key("pending")
        await old_prewrite(conn, ts(3), pending, b"locked before")

        store = await PostgresCellStore.connect([dsn])
        version = await conn.fetchval(
            "SELECT value FROM percolator_meta WHERE key = 'schema_version'"
        )
        assert version == str(SCHEMA_VERSION)
        indexes = await conn.fetch(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename IN "
            "('percolator_lock', 'percolator_write') ORDER BY indexname"
        )
        defs = {r["indexname"]: r["indexdef"] for r in indexes}
        assert "(tbl, commit_ts, rkey, col) WHERE (kind = ANY" in defs["percolator_write_changes"]
        assert "(start_ts, tbl, rkey)" in defs["percolator_lock_start_ts"]

        # Records written before the upgrade are changes like any other.
        changes = await store.scan_changes("t", 0, ts(100), limit=10)
        assert [(c.key, c.value, c.commit_ts) for c in changes] == [
            (old, b"committed before", ts(2))
        ]
        # The old lock has no hash: the bulk move leaves it to readers (commit_one).
        assert await store.min_lock_start_ts("t") == ts(3)
        assert await store.commit_locks(ts(3), ts(4)) == 0
        assert await store.commit(ts(3), ts(4), [pending]) == []
        assert (await store.read(ts(5), [pending]))[0].value == b"locked before"
        # New prewrites keep the hash, and know DUPLICATE.
        fresh = key("fresh")
        assert await store.prewrite(ts(6), fresh, 3000, [put(fresh, b"x")]) == []
        kept = await conn.fetchval("SELECT hash FROM percolator_lock WHERE rkey = $1", fresh.row)
        assert kept == row_hash(fresh.table, fresh.row)
        dup = await store.prewrite(ts(6), fresh, 3000, [put(fresh, b"y")])
        assert [f.status for f in dup] == [PrewriteStatus.DUPLICATE]
        assert await store.commit_locks(ts(6), ts(7)) == 1
        await store.close()
    finally:
        await conn.close()


async def test_bulk_moves_round_trips(fresh_dsns) -> None:
    """docs/storage.md: per shard, one statement per LOCKS_PER_STATEMENT locks and one more;
    the scans one statement per shard."""
    store = await PostgresCellStore.connect(await fresh_dsns(2))
    try:
        p = CellKey("__txn", b"job", "p")
        n = 2 * LOCKS_PER_STATEMENT + 100
        muts = [put(key(f"r{i:05d}"), b"v") for i in range(n)]
        assert await store.prewrite(ts(1), p, 60_000, [put(p, b""), *muts]) == []
        per_shard = [0, 0]
        for m in muts:
            per_shard[store.shard_of(m.key.table, m.key.row)] += 1

        async def trips(op: str, action) -> tuple[int, object]:
            before = store.stats.snapshot().get(op, 0)
            result = await action
            return store.stats.snapshot().get(op, 0) - before, result

        assert await store.commit(ts(1), ts(2), [p]) == []
        expected = sum(c // LOCKS_PER_STATEMENT + 1 for c in per_shard)
        assert await trips("commit_locks", store.commit_locks(ts(1), ts(2))) == (expected, n)
        assert await trips("rollback_locks", store.rollback_locks(ts(1))) == (2, 0)
        assert (await trips("scan_changes", store.scan_changes("t", 0, ts(3), limit=10)))[0] == 2
        assert (await trips("oldest_lock", store.min_lock_start_ts("t")))[0] == 2
        assert (await trips("sample_row_keys", store.sample_row_keys("t", 4)))[0] == 2
    finally:
        await store.close()


async def test_many_locks_move_in_parallel_key_ranges(fresh_dsns) -> None:
    """A transaction with many locks on a shard has them moved by BULK_MOVE_PARTS chains of
    chunks at once, over disjoint key ranges that together cover every lock: commit moves
    each exactly once, rollback removes them all."""
    (dsn,) = await fresh_dsns(1)
    store = await PostgresCellStore.connect([dsn])
    try:
        n = BULK_MOVE_PARTS * LOCKS_PER_STATEMENT + 500
        for start, commit in ((ts(1), ts(2)), (ts(3), None)):
            p = CellKey("__txn", f"job{start}".encode(), "p")
            rows = [put(key(f"r{i:05d}", col), f"{start}".encode()) for i in range(n // 2)
                    for col in ("a", "b")]  # fmt: skip
            assert await store.prewrite(start, p, 60_000, [put(p, b""), *rows]) == []
            before = store.stats.snapshot()
            if commit is not None:
                assert await store.commit(start, commit, [p]) == []
                assert await store.commit_locks(start, commit) == n
                op = "commit_locks"
            else:
                assert await store.rollback_locks(start) == n + 1  # the primary too
                op = "rollback_locks"
            after = store.stats.snapshot()
            assert after["lock_splits"] - before.get("lock_splits", 0) == 1
            # Each range holds more than a chunk's worth: a full chunk, then the last one (one
            # chain alone would take n // LOCKS_PER_STATEMENT + 1 statements).
            assert after[op] - before.get(op, 0) == 2 * BULK_MOVE_PARTS
            assert await store.scan_locks(ts(10)) == []
        cells = [c async for c in store.scan(ts(10), "t", None, None, page_size=10_000)]
        assert len(cells) == n and {c.value for c in cells} == {f"{ts(1)}".encode()}
        assert {c.commit_ts for c in cells} == {ts(2)}
    finally:
        await store.close()


async def test_commit_locks_chunks_read_only_their_own_locks(fresh_dsns) -> None:
    """Each chunk of a bulk move reads about its own locks, not every lock of the table nor the
    entries of earlier or later chunks: two primary-key entries per moved cell (the walk that
    names the chunk's cells, the probe under the row lock), also once plpgsql has switched to
    its generic plans (after five calls on one connection)."""
    (dsn,) = await fresh_dsns(1)
    store = await PostgresCellStore.connect([dsn])
    conn = await asyncpg.connect(dsn)
    try:
        p = CellKey("__txn", b"job", "p")
        assert await store.prewrite(ts(1), p, 60_000, [put(p, b"")]) == []
        assert await store.commit(ts(1), ts(2), [p]) == []
        n = 12 * LOCKS_PER_STATEMENT
        # Locks as a distributed job's executors leave them, written directly: this is about
        # the plan of the move, and prewriting them one batch at a time would take long.
        await conn.execute(
            "INSERT INTO percolator_lock SELECT 't', int8send(g), 'c', $1, $2, $3, 'p', 60000, "
            "1, 'v'::bytea, hashint8(g) FROM generate_series(1, $4) g",
            ts(1),
            p.table,
            p.row,
            n,
        )
        await conn.execute("ANALYZE percolator_lock")
        query = "SELECT idx_tup_read FROM pg_stat_user_indexes WHERE indexrelname = $1"
        before = await conn.fetchval(query, "percolator_lock_pkey")
        assert await store.commit_locks(ts(1), ts(2)) == n
        # A backend reports its statistics when it exits.
        await store.close()
        for _ in range(50):
            after = await conn.fetchval(query, "percolator_lock_pkey")
            if after != before:
                break
            await asyncio.sleep(0.1)
        # Two index tuples per moved lock, and a few more per key range moved in parallel (a
        # range's last chunk reads past its end); a chunk reading the earlier or the later
        # chunks' entries again reads about 6.5 * n here.
        assert 2 * n <= after - before < 3 * n + 4 * BULK_MOVE_PARTS
    finally:
        await conn.close()
        await store.close()


async def test_commit_locks_writes_records_in_key_order(fresh_dsns) -> None:
    """A bulk commit inserts the write records in (tbl, rkey, col) order, whatever order the
    locks came in, so a later range scan reads the heap in order (schema version 6). Key
    ranges moved in parallel may share a page where one range's chunk ends, so the check is
    that a walk in key order goes from page to page about once per page."""
    (dsn,) = await fresh_dsns(1)
    store = await PostgresCellStore.connect([dsn])
    conn = await asyncpg.connect(dsn)
    try:
        p = CellKey("__txn", b"job", "p")
        assert await store.prewrite(ts(1), p, 60_000, [put(p, b"")]) == []
        n = 3 * LOCKS_PER_STATEMENT + 7
        rows = [f"r{i:05d}".encode() for i in range(n)]
        shuffled = sorted(rows, key=lambda r: row_hash("t", r))  # hash order: not key order
        for start in range(0, n, 500):
            batch = [
                put(CellKey("t", r, c), b"v") for r in shuffled[start : start + 500] for c in "ba"
            ]
            assert await store.prewrite(ts(1), p, 60_000, batch) == []
        assert await store.commit(ts(1), ts(2), [p]) == []
        assert await store.commit_locks(ts(1), ts(2)) == 2 * n
        stored = await conn.fetch(
            "SELECT ctid, rkey, col FROM percolator_write WHERE tbl = 't' ORDER BY ctid"
        )
        page_of = {(r["rkey"], r["col"]): r["ctid"][0] for r in stored}
        in_key_order = [page_of[(r, c)] for r in rows for c in "ab"]
        switches = sum(a != b for a, b in itertools.pairwise(in_key_order))
        # A walk in key order leaves each page about once (in hash order: at every cell).
        assert switches < 2 * len(set(in_key_order))
    finally:
        await conn.close()
        await store.close()


async def test_commit_locks_racing_readers_moves_each_cell_once(fresh_dsns) -> None:
    """Readers rolling cells forward (commit of single cells and batches) while commit_locks
    moves the same locks: every cell ends committed once, at the commit_ts, notified once."""
    dsns = await fresh_dsns(2)
    store = await PostgresCellStore.connect(dsns, pool_size=12, coalesce=False)
    try:
        await store.watch("obs", "t", ["c"])
        p = CellKey("__txn", b"job", "p")
        for round_ in range(5):
            start, commit = ts(100 * round_ + 1), ts(100 * round_ + 2)
            keys = [key(f"r{round_}-{i:04d}") for i in range(1500)]
            value = f"v{round_}".encode()
            muts = [put(k, value) for k in keys]
            assert await store.prewrite(start, p, 60_000, [put(p, b""), *muts]) == []
            assert await store.commit(start, commit, [p]) == []
            rolled = [keys[i::7] for i in range(7)]
            results = await asyncio.gather(
                store.commit_locks(start, commit),
                *(store.commit(start, commit, part) for part in rolled),
                *(store.commit(start, commit, [k]) for k in keys[:40]),
            )
            assert all(r == [] for r in results[1:]), f"round {round_}"
            # Under load the readers may move every cell before commit_locks starts.
            assert 0 <= results[0] <= len(keys)
            reads = await store.read(ts(100 * round_ + 3), keys)
            assert {(r.value, r.commit_ts, r.lock) for r in reads} == {(value, commit, None)}
            assert await _records_of(dsns, start) == len(keys) + 1
        found = await store.find_notifications(-(2**63), 2**63 - 1, now_ms=0, limit=10_000)
        assert len(found) == 5 * 1500
    finally:
        await store.close()


async def _records_of(dsns: list[str], start_ts: int) -> int:
    """Write records of one transaction over every shard (a cell moved twice would show)."""
    total = 0
    for dsn in dsns:
        conn = await asyncpg.connect(dsn)
        try:
            sql = "SELECT count(*) FROM percolator_write WHERE start_ts = $1"
            total += await conn.fetchval(sql, start_ts)
        finally:
            await conn.close()
    return total


async def test_commit_locks_and_notification_batches_never_deadlock(fresh_dsns) -> None:
    """commit_locks sets notify rows under its rows' advisory locks, like a commit batch; clear
    and defer batches over the same rows in the opposite order must never deadlock with it."""
    (dsn,) = await fresh_dsns(1)
    store = await PostgresCellStore.connect([dsn], pool_size=8, coalesce=False)
    try:
        await store.watch("obs", "t", ["c"])
        keys = [key(f"d{i:03d}") for i in range(300)]
        p = CellKey("__txn", b"job", "p")
        for i in range(15):
            start, commit = ts(10 * i + 1), ts(10 * i + 2)
            muts = [put(p, b""), *(put(k, b"v") for k in keys)]
            assert await store.prewrite(start, p, 3000, muts) == []
            assert await store.commit(start, commit, [p]) == []
            moved, *_ = await asyncio.gather(
                store.commit_locks(start, commit),
                *notification_batches(store, keys, start, commit),
            )
            assert moved == len(keys), f"round {i}"
        found = await store.find_notifications(-(2**63), 2**63 - 1, now_ms=0, limit=1000)
        assert len(found) == len(keys)
    finally:
        await store.close()


async def test_lock_only_write_then_value_is_a_duplicate_and_leaves_the_lock(fresh_dsns) -> None:
    """The DUPLICATE check compares kind and value of our own lock, NULL values included."""
    (dsn,) = await fresh_dsns(1)
    store = await PostgresCellStore.connect([dsn])
    try:
        a = key("a")
        await write(store, a, b"v", ts(1), ts(2))
        assert await store.prewrite(ts(3), a, 3000, [Mutation(a, WriteKind.DELETE)]) == []
        assert await store.prewrite(ts(3), a, 3000, [Mutation(a, WriteKind.DELETE)]) == []
        failures = await store.prewrite(ts(3), a, 3000, [Mutation(a, WriteKind.PUT, b"")])
        assert [f.status for f in failures] == [PrewriteStatus.DUPLICATE]
        assert await store.commit(ts(3), ts(4), [a]) == []
        assert (await store.read(ts(5), [a]))[0].value is None
    finally:
        await store.close()
