"""What only the Postgres store has: schema versions, bad input, races, big batches, and the
exact round trips of docs/storage.md."""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import AsyncIterator, Awaitable

import asyncpg
import pytest

from percolator.server.storage.cells import (
    CellKey,
    ClearNotification,
    DeferNotification,
    Mutation,
    ObserverCounters,
    TxnState,
    WriteKind,
)
from percolator.server.storage.errors import (
    CorruptRecordError,
    SchemaVersionError,
    StoreResourceExhausted,
    StoreUnavailable,
)
from percolator.server.storage.postgres_store import (
    _SCAN_SQL,
    _SERVER_SETTINGS,
    MAX_ROWS_PER_STATEMENT,
    PostgresCellStore,
)
from percolator.server.storage.schema import MIGRATIONS, SCHEMA_VERSION
from percolator.server.storage.sharding import row_hash

from .test_contract import key, put, put_since, ts, write


async def test_schema_is_created_once_with_its_version(fresh_dsns) -> None:
    (dsn,) = await fresh_dsns(1)
    stores = await asyncio.gather(*(PostgresCellStore.connect([dsn]) for _ in range(4)))
    conn = await asyncpg.connect(dsn)
    try:
        version = await conn.fetchval(
            "SELECT value FROM percolator_meta WHERE key = 'schema_version'"
        )
        tables = await conn.fetchval(
            "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'percolator_%'"
        )
        overloads = await prewrite_overloads(conn)
    finally:
        await conn.close()
    assert version == str(SCHEMA_VERSION)
    assert tables == 7  # lock, write, gc, meta; watch, notify, observer_stats (version 3)
    assert overloads == PREWRITE_OVERLOADS
    for s in stores:
        await s.close()


async def test_newer_schema_version_is_refused(fresh_dsns) -> None:
    (dsn,) = await fresh_dsns(1)
    await (await PostgresCellStore.connect([dsn])).close()
    conn = await asyncpg.connect(dsn)
    await conn.execute(
        "UPDATE percolator_meta SET value = $1 WHERE key = 'schema_version'",
        str(SCHEMA_VERSION + 1),
    )
    await conn.close()
    with pytest.raises(SchemaVersionError, match="newer than this"):
        await PostgresCellStore.connect([dsn])


async def test_unreachable_postgres_fails_fast_naming_the_dsn() -> None:
    dsn = "postgresql://user:secret@127.0.0.1:1/nowhere"
    started = time.monotonic()
    with pytest.raises(StoreUnavailable) as err:
        await PostgresCellStore.connect([dsn], connect_timeout=2.0)
    assert time.monotonic() - started < 5
    assert "127.0.0.1:1/nowhere" in str(err.value)
    assert "secret" not in str(err.value)


async def test_a_corrupt_connection_is_a_shard_outage_and_is_dropped(
    fresh_dsns, monkeypatch: pytest.MonkeyPatch
) -> None:
    """asyncpg may leave a connection in a corrupt state when its server dies mid-statement
    (InternalClientError): that is 08006 like any outage, and the connection is not reused."""
    (dsn,) = await fresh_dsns(1)
    store = await PostgresCellStore.connect([dsn])
    try:
        await write(store, key("a"), b"1", ts(1), ts(2))
        broken: list[asyncpg.Connection] = []
        fetch = asyncpg.Connection.fetch

        async def corrupt_once(self: asyncpg.Connection, *args: object, **kw: object) -> object:
            if not broken:
                broken.append(self)
                raise asyncpg.exceptions.InternalClientError(
                    "cannot switch to state 12; another operation (2) is in progress"
                )
            return await fetch(self, *args, **kw)

        monkeypatch.setattr(asyncpg.Connection, "fetch", corrupt_once)
        with pytest.raises(StoreUnavailable, match="the connection broke"):
            [c async for c in store.scan(ts(3), "t", None, None)]
        assert broken[0].is_closed()
        assert [c.value async for c in store.scan(ts(3), "t", None, None)] == [b"1"]
    finally:
        await store.close()


async def test_a_full_disk_keeps_its_sqlstate(fresh_dsns, monkeypatch: pytest.MonkeyPatch) -> None:
    """A shard out of resources (Postgres class 53, here disk full as a full disk reports it)
    is reported with the shard's SQLSTATE, not as an internal error; the store stays usable."""
    (dsn,) = await fresh_dsns(1)
    store = await PostgresCellStore.connect([dsn])
    try:
        fetch = asyncpg.Connection.fetch
        failed: list[bool] = []

        async def full_once(self: asyncpg.Connection, *args: object, **kw: object) -> object:
            if not failed:
                failed.append(True)
                raise asyncpg.exceptions.DiskFullError(
                    'could not extend file "base/16385/16477.1": No space left on device'
                )
            return await fetch(self, *args, **kw)

        monkeypatch.setattr(asyncpg.Connection, "fetch", full_once)
        k = [key(f"r{i}") for i in range(3)]
        with pytest.raises(StoreResourceExhausted, match="No space left on device") as err:
            await store.prewrite(ts(1), k[0], 3000, [put(c, b"v") for c in k])
        assert err.value.sqlstate == "53100"
        assert await store.prewrite(ts(1), k[0], 3000, [put(c, b"v") for c in k]) == []
    finally:
        await store.close()


async def test_unknown_record_kind_is_an_error_not_a_crash(fresh_dsns) -> None:
    (dsn,) = await fresh_dsns(1)
    store = await PostgresCellStore.connect([dsn])
    k = key("a")
    assert await store.prewrite(ts(1), k, 3000, [put(k, b"x")]) == []
    assert await store.commit(ts(1), ts(2), [k]) == []
    conn = await asyncpg.connect(dsn)
    await conn.execute("UPDATE percolator_write SET kind = 9")
    await conn.close()
    with pytest.raises(CorruptRecordError, match="unknown record kind 9"):
        await store.read(ts(3), [k, key("b")])
    await store.close()


async def test_prewrite_and_rollback_of_one_transaction_never_both_win(fresh_dsns) -> None:
    """The race that per-row locking closes: without it, under READ COMMITTED, a prewrite and a
    rollback (with marker) of the same start_ts could both pass their checks."""
    (dsn,) = await fresh_dsns(1)
    store = await PostgresCellStore.connect([dsn], pool_size=8)
    for i in range(150):
        k = key(f"race{i}")
        start = ts(10 + i)
        await asyncio.gather(
            store.prewrite(start, k, 3000, [put(k, b"x")]),
            store.rollback(start, [k], leave_marker=True),
        )
        # Either order is legal; what must never happen is a lock that outlives its rollback
        # (both passed their checks), which would let the transaction commit after all.
        assert (await store.read(ts(10_000), [k]))[0].lock is None, f"round {i}"
        assert await store.commit(start, ts(10_001), [k]), f"round {i} committed"
    await store.close()


async def test_big_batches_are_chunked_and_counted(fresh_dsns) -> None:
    dsns = await fresh_dsns(2)
    store = await PostgresCellStore.connect(dsns)
    cells = [CellKey("big", f"r{i:06d}".encode(), col) for i in range(2500) for col in "ab"]
    muts = [Mutation(c, WriteKind.PUT, b"v" * 100) for c in cells]
    rows_per_shard = [0, 0]
    for i in range(2500):
        rows_per_shard[store.shard_of("big", f"r{i:06d}".encode())] += 1
    expected = sum(-(-n // MAX_ROWS_PER_STATEMENT) for n in rows_per_shard)
    before = store.stats.snapshot().get("prewrite", 0)
    assert await store.prewrite(ts(1), cells[0], 3000, muts) == []
    assert store.stats.snapshot()["prewrite"] - before == expected
    assert await store.commit(ts(1), ts(2), cells) == []
    scanned = [c async for c in store.scan(ts(3), "big", None, None, ["b"], page_size=300)]
    assert [c.key for c in scanned] == [c for c in cells if c.column == "b"]
    await store.close()


async def old_shard(dsn: str, version: int) -> asyncpg.Connection:
    """A connection to a shard as ``version`` of the code left it (its migrations, applied
    directly)."""
    conn = await asyncpg.connect(dsn)
    await conn.execute("CREATE TABLE percolator_meta (key text PRIMARY KEY, value text)")
    for v in range(1, version + 1):
        for statement in MIGRATIONS[v]:
            await conn.execute(statement)
    await conn.execute("INSERT INTO percolator_meta VALUES ('schema_version', $1)", str(version))
    return conn


async def old_prewrite(conn: asyncpg.Connection, start: int, k: CellKey, value: bytes) -> None:
    """A one-cell prewrite of ``k`` (its own primary) by the shard's own function, called
    directly: on a shard older than version 4, its lock keeps no hash."""
    await conn.execute(
        "SELECT * FROM percolator_prewrite_one($1, $2, $3, $4, 3000, $2, $3, $4, 1::smallint, "
        "$5, $6)",
        start,
        k.table,
        k.row,
        k.column,
        value,
        row_hash(k.table, k.row),
    )


async def test_an_older_shard_is_migrated_step_by_step(fresh_dsns) -> None:
    (dsn,) = await fresh_dsns(1)
    conn = await old_shard(dsn, 1)
    try:
        store = await PostgresCellStore.connect([dsn])
        version = await conn.fetchval(
            "SELECT value FROM percolator_meta WHERE key = 'schema_version'"
        )
    finally:
        await conn.close()
    assert version == str(SCHEMA_VERSION)
    k = key("a")
    assert await store.prewrite(ts(1), k, 3000, [put(k, b"x")]) == []
    assert await store.heartbeat(k, ts(1), 9000)
    await store.close()


PREWRITE_OVERLOADS = [
    ("percolator_prewrite_each", 12),
    ("percolator_prewrite_many", 12),
    ("percolator_prewrite_one", 12),
]
"""The prewrite functions of version 9 (with p_since), each its only overload."""


async def prewrite_overloads(conn: asyncpg.Connection) -> list[tuple[str, int]]:
    """(name, number of arguments) of every prewrite function on the shard."""
    rows = await conn.fetch(
        "SELECT proname::text, pronargs::integer FROM pg_proc "
        "WHERE proname LIKE 'percolator\\_prewrite\\_%' ORDER BY 1, 2"
    )
    return [tuple(r) for r in rows]


async def test_a_version_8_shard_gets_prewrites_with_a_since_ts(fresh_dsns) -> None:
    (dsn,) = await fresh_dsns(1)
    a, b, c, old = key("a"), key("b"), key("c"), key("old")
    conn = await old_shard(dsn, 8)
    try:
        await old_prewrite(conn, ts(1), a, b"v1")
        store = await PostgresCellStore.connect([dsn])
        version = await conn.fetchval(
            "SELECT value FROM percolator_meta WHERE key = 'schema_version'"
        )
        overloads = await prewrite_overloads(conn)
        # An older server still connected calls with version 8's arguments: since = start_ts.
        await old_prewrite(conn, ts(1), old, b"old")
    finally:
        await conn.close()
    assert version == str(SCHEMA_VERSION)
    assert overloads == PREWRITE_OVERLOADS
    assert await store.commit(ts(1), ts(3), [a, old]) == []
    # percolator_prewrite_one, _many (distinct cells), _each (a cell twice), each overwriting
    # the version committed after its start_ts and before its since_ts.
    assert await store.prewrite(ts(2), a, 3000, [put_since(a, b"one", ts(4))]) == []
    assert await store.commit(ts(2), ts(5), [a]) == []
    many = [put_since(a, b"many", ts(6)), put(b, b"many"), put_since(c, b"many", ts(6))]
    assert await store.prewrite(ts(4), a, 3000, many) == []
    assert await store.commit(ts(4), ts(7), [a, b, c]) == []
    each = [put_since(a, b"each", ts(8)), put_since(a, b"each", ts(8))]
    assert await store.prewrite(ts(6), a, 3000, each) == []
    assert await store.commit(ts(6), ts(9), [a]) == []
    reads = await store.read(ts(9), [a, b, c, old])
    assert [r.value for r in reads] == [b"each", b"many", b"many", b"old"]
    failures = await store.prewrite(ts(8), a, 3000, [put_since(a, b"late", ts(9))])
    assert [(f.key, f.conflict_ts) for f in failures] == [(a, ts(9))]
    await store.close()


def commit_many_args(cells: list[tuple[int, int, CellKey]]) -> list:
    """percolator_commit_many's arrays for (start_ts, commit_ts, key) cells, in lock order."""
    cells = sorted(cells, key=lambda c: row_hash(c[2].table, c[2].row))
    return [
        [c[0] for c in cells],
        [c[1] for c in cells],
        [c[2].table for c in cells],
        [c[2].row for c in cells],
        [c[2].column for c in cells],
        [row_hash(c[2].table, c[2].row) for c in cells],
    ]


async def test_a_version_9_shard_gets_the_guarded_commit(fresh_dsns) -> None:
    """Version 10: one percolator_commit_many, whose guard commits a transaction's cells in a
    shared statement only while its primary's lock is there; a version-9 caller (six
    arguments, no guard) still commits."""
    (dsn,) = await fresh_dsns(1)
    conn = await old_shard(dsn, 9)
    try:
        store = await PostgresCellStore.connect([dsn])
        overloads = await conn.fetch(
            "SELECT pronargs FROM pg_proc WHERE proname = 'percolator_commit_many'"
        )
        assert [r[0] for r in overloads] == [7]
        kept, lost = [key(f"k{i}") for i in range(3)], [key(f"l{i}") for i in range(3)]
        assert await store.prewrite(ts(1), kept[0], 3000, [put(k, b"k") for k in kept]) == []
        assert await store.prewrite(ts(2), lost[0], 3000, [put(k, b"l") for k in lost]) == []
        assert await store.rollback(ts(2), [lost[0]], leave_marker=True) == []
        cells = [(ts(1), ts(5), k) for k in kept] + [(ts(2), ts(6), k) for k in lost]
        failed = await conn.fetch(
            "SELECT idx FROM percolator_commit_many($1, $2, $3, $4, $5, $6, true)",
            *commit_many_args(cells),
        )
        assert len(failed) == 3  # the lost transaction's three cells
        reads = await store.read(ts(9), kept + lost)
        assert [r.value for r in reads] == [b"k"] * 3 + [None] * 3
        assert [r.lock is not None for r in reads] == [False] * 3 + [False, True, True]
        # Without the guard (as version 9 calls it) the orphaned secondaries would commit.
        await conn.fetch(
            "SELECT * FROM percolator_commit_many($1, $2, $3, $4, $5, $6)",
            *commit_many_args([(ts(2), ts(6), k) for k in lost[1:]]),
        )
        assert [r.value for r in await store.read(ts(9), lost[1:])] == [b"l", b"l"]
    finally:
        await conn.close()
    await store.close()


async def test_a_silent_server_times_out_instead_of_hanging() -> None:
    """A server that accepts the connection and never answers (a hung host, a firewall)."""
    accepted: list[asyncio.StreamWriter] = []

    async def accept(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    dsn = f"postgresql://u@127.0.0.1:{port}/db"
    started = time.monotonic()
    try:
        with pytest.raises(StoreUnavailable, match=f"127.0.0.1:{port}/db"):
            await PostgresCellStore.connect([dsn], connect_timeout=1.0)
    finally:
        for w in accepted:
            w.close()
        server.close()
        await server.wait_closed()
    assert time.monotonic() - started < 4


@pytest.fixture
async def two_shards(fresh_dsns) -> AsyncIterator[tuple[PostgresCellStore, list[str]]]:
    dsns = await fresh_dsns(2)
    store = await PostgresCellStore.connect(dsns)
    yield store, dsns
    await store.close()


def _keys_on_both_shards(store: PostgresCellStore, n: int) -> list[CellKey]:
    keys = [key(f"r{i:03d}") for i in range(n)]
    assert {store.shard_of(k.table, k.row) for k in keys} == {0, 1}
    return keys


async def _count(cells: AsyncIterator[object]) -> int:
    return sum([1 async for _ in cells])


async def test_round_trips_per_operation_are_as_documented(two_shards) -> None:
    """docs/storage.md, "Operations and their round trips": one statement per shard batch."""
    store, _ = two_shards
    keys = _keys_on_both_shards(store, 30)
    per_shard = [sum(store.shard_of(k.table, k.row) == s for k in keys) for s in (0, 1)]

    async def trips(op: str, action) -> int:
        before = store.stats.snapshot().get(op, 0)
        await action
        return store.stats.snapshot().get(op, 0) - before

    muts = [put(k, b"v") for k in keys]
    assert await trips("prewrite", store.prewrite(ts(1), keys[0], 3000, muts)) == 2
    assert await trips("heartbeat", store.heartbeat(keys[0], ts(1), 9000)) == 1
    assert await trips("scan_locks", store.scan_locks(ts(2))) == 2
    live = store.check_txn_status(keys[0], ts(1), ts(2), rollback_if_missing=False)
    assert await trips("check_txn_status", live) == 1
    assert await trips("commit", store.commit(ts(1), ts(2), keys)) == 2
    assert await trips("commit", store.commit(ts(1), ts(2), keys[:1])) == 1
    assert await trips("read", store.read(ts(3), keys)) == 2
    assert await trips("read", store.read(ts(3), keys[:1])) == 1
    assert await trips("prewrite", store.prewrite(ts(4), keys[0], 3000, muts[:1])) == 1
    assert await trips("rollback", store.rollback(ts(4), keys, leave_marker=True)) == 2

    # A scan sends a page per shard until a page comes back short: n // page_size + 1 each.
    page = 4
    scan = [c async for c in store.scan(ts(5), "t", None, None, page_size=page)]
    assert len(scan) == len(keys)
    assert store.stats.round_trips["scan"] == sum(n // page + 1 for n in per_shard)
    # A reverse scan pages the same way, from the range's end.
    backward = store.scan(ts(5), "t", None, None, page_size=page, reverse=True)
    assert await trips("scan", _count(backward)) == sum(n // page + 1 for n in per_shard)

    assert await trips("set_gc_safe_point", store.set_gc_safe_point(ts(5))) == 2
    assert await trips("gc", store.gc(ts(5))) == 2

    # Notifications.
    assert await trips("watch", store.watch("obs", "t", ["c"])) == 2
    assert await trips("list_watches", store.list_watches()) == 2
    await write(store, keys[0], b"w", ts(10), ts(11))
    await write(store, keys[1], b"w", ts(12), ts(13))
    found = store.find_notifications(-(2**63), 2**63 - 1, now_ms=0, limit=10)
    assert await trips("find_notifications", found) == 2
    both = [ClearNotification("obs", k.table, k.row, ts(1)) for k in keys]
    assert await trips("clear_notifications", store.clear_notifications(both)) == 2
    one = [DeferNotification("obs", "t", keys[0].row, ts(11), 0, "e", True)]
    assert await trips("defer_notifications", store.defer_notifications(one)) == 1
    assert await trips("clear_notifications", store.clear_notifications([])) == 0
    assert await trips("retry_parked", store.retry_parked("obs")) == 2
    assert await trips("parked_notifications", store.parked_notifications()) == 2
    assert await trips("notification_summary", store.notification_summary()) == 2
    deltas = [ObserverCounters("obs", runs=1), ObserverCounters("x", runs=1)]
    assert await trips("add_observer_counters", store.add_observer_counters(deltas)) == 1
    assert await trips("observer_counters", store.observer_counters()) == 1
    assert await trips("unwatch", store.unwatch("obs", "t")) == 2
    # Watches, then one statement per shard per NOTIFY_BULK_ROWS notifications (at least one).
    assert await trips("unwatch", store.unwatch("obs")) == 4
    # The first wait opens a listener per shard; it must last long enough for them to connect
    # (on a loaded machine 10 ms does not), or the next wait opens them again.
    assert await trips("listen", store.wait_for_notifications(1.0)) == 2
    assert await trips("listen", store.wait_for_notifications(0.01)) == 0


async def _wait_for_lock(conn: asyncpg.Connection, k: CellKey) -> None:
    query = "SELECT count(*) FROM percolator_lock WHERE tbl = $1 AND rkey = $2 AND col = $3"
    # Another process's table: polling it is the only way to watch it.
    async with asyncio.timeout(10):
        while True:
            if await conn.fetchval(query, k.table, k.row, k.column):
                return
            await asyncio.sleep(0.01)


async def test_shards_are_written_in_parallel(two_shards) -> None:
    """With one shard's row held, the other shard's part of the batch still completes."""
    store, dsns = two_shards
    keys = _keys_on_both_shards(store, 30)
    by_shard = {store.shard_of(k.table, k.row): k for k in keys}
    for n, (blocked, other) in enumerate([(0, 1), (1, 0)]):
        held = by_shard[blocked]
        blocker = await asyncpg.connect(dsns[blocked])
        watcher = await asyncpg.connect(dsns[other])
        try:
            await blocker.execute("SELECT pg_advisory_lock($1)", row_hash(held.table, held.row))
            start = ts(10 + n)
            muts = [put(by_shard[0], b"v"), put(by_shard[1], b"v")]
            task = asyncio.create_task(store.prewrite(start, by_shard[0], 3000, muts))
            await _wait_for_lock(watcher, by_shard[other])
            assert not task.done()
            await blocker.execute("SELECT pg_advisory_unlock_all()")
            assert await task == []
            await store.rollback(start, list(by_shard.values()), leave_marker=False)
        finally:
            await blocker.close()
            await watcher.close()


async def test_rows_live_on_their_shard_and_scans_merge_in_order(two_shards) -> None:
    store, dsns = two_shards
    keys = _keys_on_both_shards(store, 40)
    cells = [CellKey(k.table, k.row, col) for k in keys for col in ("a", "b")]
    assert await store.prewrite(ts(1), cells[0], 3000, [put(c, c.row) for c in cells]) == []
    assert await store.commit(ts(1), ts(2), cells) == []
    for shard, dsn in enumerate(dsns):
        conn = await asyncpg.connect(dsn)
        try:
            stored = await conn.fetch("SELECT DISTINCT rkey FROM percolator_write")
        finally:
            await conn.close()
        expected = {k.row for k in keys if store.shard_of(k.table, k.row) == shard}
        assert {r["rkey"] for r in stored} == expected
    scanned = [c async for c in store.scan(ts(3), "t", None, None, page_size=7)]
    assert [c.key for c in scanned] == sorted(cells)
    assert all(c.value == c.key.row for c in scanned)
    ranged = [c.key async for c in store.scan(ts(3), "t", b"r010", b"r020", ["b"], page_size=3)]
    assert ranged == [c for c in sorted(cells) if b"r010" <= c.row < b"r020" and c.column == "b"]


async def test_reverse_scans_merge_shards_backward(two_shards) -> None:
    store, _ = two_shards
    keys = _keys_on_both_shards(store, 40)
    cells = [CellKey(k.table, k.row, col) for k in keys for col in ("a", "b")]
    assert await store.prewrite(ts(1), cells[0], 3000, [put(c, c.row) for c in cells]) == []
    assert await store.commit(ts(1), ts(2), cells) == []
    backward = store.scan(ts(3), "t", b"r005", b"r030", ["b"], page_size=3, reverse=True)
    want = [c for c in cells if b"r005" <= c.row < b"r030" and c.column == "b"]
    assert [c.key async for c in backward] == sorted(want, reverse=True)
    pages = store.scan_rows(ts(3), "t", None, b"r020", page_size=5, reverse=True)
    rows = [r.row async for page in pages for r in page]
    assert rows == sorted((k.row for k in keys if k.row < b"r020"), reverse=True)


async def test_a_reverse_page_walks_the_key_indexes_backward(fresh_dsns) -> None:
    """Each shape of a reverse scan's statement, planned generically as the store's
    connections plan it, walks the write and lock tables' keys backward and stops after a
    page: no sort of the range (the incremental sort orders the versions of each cell)."""
    [dsn] = await fresh_dsns(1)
    store = await PostgresCellStore.connect([dsn])
    cells = [key(f"r{i:05d}", col) for i in range(3000) for col in ("a", "b")]
    for version in range(2):
        start = ts(1 + 2 * version)
        assert await store.prewrite(start, cells[0], 3000, [put(c, b"v") for c in cells]) == []
        assert await store.commit(start, start + 1, cells) == []
    await store.close()
    conn = await asyncpg.connect(dsn, server_settings=_SERVER_SETTINGS)
    try:
        await conn.execute("ANALYZE")
        bounds = {
            (False, False, False): [],
            (False, False, True): ["'r00100'::bytea"],
            (False, True, False): ["'r02000'::bytea"],
            (False, True, True): ["'r02000'::bytea", "'r00100'::bytea"],
            (True, True, False): ["'r02000'::bytea", "'b'"],
            (True, True, True): ["'r02000'::bytea", "'b'", "'r00100'::bytea"],
        }
        for n, (shape, values) in enumerate(bounds.items()):
            # PREPARE, so that EXPLAIN shows the generic plan (the parameters unknown)
            await conn.execute(f"PREPARE p{n} AS {_SCAN_SQL[(*shape, True)]}")
            args = ", ".join(["'t'", "NULL", str(ts(9)), "100", *values])
            explained = await conn.fetch(f"EXPLAIN (ANALYZE, COSTS OFF) EXECUTE p{n}({args})")
            plan = [r[0].strip() for r in explained]
            text = "\n".join(plan)
            assert "Index Cond: ((tbl = $1)" in text, text  # generic
            assert "Index Scan Backward using percolator_write_key" in text, text
            assert "Index Scan Backward using percolator_lock_pkey" in text, text
            assert not any(re.match(r"(->  )?Sort \(", line) for line in plan), text
            assert "Unique (actual time" in text and "rows=100 loops=1" in text, text
    finally:
        await conn.close()


async def test_unknown_lock_kind_is_an_error_and_the_store_stays_usable(fresh_dsns) -> None:
    (dsn,) = await fresh_dsns(1)
    store = await PostgresCellStore.connect([dsn])
    k, other = key("a"), key("b")
    await write(store, other, b"fine", ts(1), ts(2))
    assert await store.prewrite(ts(3), k, 3000, [put(k, b"x")]) == []
    conn = await asyncpg.connect(dsn)
    await conn.execute("UPDATE percolator_lock SET kind = 7")
    await conn.close()
    for attempt in (
        store.read(ts(4), [k]),
        store.scan_locks(ts(4)),
        store.check_txn_status(k, ts(3), ts(4), rollback_if_missing=False),
        store.prewrite(ts(5), k, 3000, [put(k, b"y")]),
    ):
        with pytest.raises(CorruptRecordError, match="unknown record kind 7"):
            await attempt
    with pytest.raises(CorruptRecordError):
        [c async for c in store.scan(ts(4), "t", None, None)]
    assert [r.value for r in await store.read(ts(4), [other])] == [b"fine"]
    await store.close()


async def test_heartbeat_and_expiry_check_never_both_win(fresh_dsns) -> None:
    """A heartbeat that reports the lock extended must not lose it to a concurrent check that
    read the old TTL (schema version 2 made the heartbeat take its row's lock)."""
    (dsn,) = await fresh_dsns(1)
    store = await PostgresCellStore.connect([dsn], pool_size=8)
    for i in range(150):
        k = key(f"hb{i}")
        start = ts(10 + i)
        assert await store.prewrite(start, k, 10, [put(k, b"x")]) == []
        expired_now = start + ts(100) - ts(0)  # 100 ms after start: past the 10 ms TTL
        extended, status = await asyncio.gather(
            store.heartbeat(k, start, 3_600_000),
            store.check_txn_status(k, start, expired_now, rollback_if_missing=False),
        )
        if extended:
            assert status.state == TxnState.LOCKED, f"round {i}"
        else:
            assert status.state == TxnState.ROLLED_BACK, f"round {i}"
    await store.close()


async def test_commit_and_rollback_of_one_transaction_never_both_win(fresh_dsns) -> None:
    (dsn,) = await fresh_dsns(1)
    store = await PostgresCellStore.connect([dsn], pool_size=8)
    for i in range(150):
        k = key(f"cr{i}")
        start = ts(10 + i)
        assert await store.prewrite(start, k, 3000, [put(k, b"x")]) == []
        failures, committed = await asyncio.gather(
            store.commit(start, start + 1, [k]),
            store.rollback(start, [k], leave_marker=True),
        )
        # Committed first: the rollback reports the cell committed. Rolled back first: the
        # commit fails. Never a commit that the rollback did not see.
        assert (failures == []) == (committed == [k]), f"round {i}"
        value = (await store.read(start + 2, [k]))[0].value
        assert value == (b"x" if committed else None), f"round {i}"
    await store.close()


async def test_version_2_shard_with_locks_migrates_to_the_current_version(fresh_dsns) -> None:
    (dsn,) = await fresh_dsns(1)
    conn = await old_shard(dsn, 2)
    try:
        # A transaction prewritten by version 2 (its functions, called directly).
        k = key("a")
        await old_prewrite(conn, ts(1), k, b"x")
        store = await PostgresCellStore.connect([dsn])
        version = await conn.fetchval(
            "SELECT value FROM percolator_meta WHERE key = 'schema_version'"
        )
        assert version == str(SCHEMA_VERSION)
        await store.watch("obs", "t", ["c"])
        assert await store.commit(ts(1), ts(2), [k]) == []
        found = await store.find_notifications(-(2**63), 2**63 - 1, now_ms=0, limit=10)
        assert [(n.row, n.ts) for n in found] == [(b"a", ts(2))]
        assert (await store.read(ts(3), [k]))[0].value == b"x"
        await store.close()
    finally:
        await conn.close()


async def test_a_commit_through_another_store_wakes_a_waiter(fresh_dsns) -> None:
    dsns = await fresh_dsns(2)
    waiting, writing = await asyncio.gather(
        PostgresCellStore.connect(dsns), PostgresCellStore.connect(dsns)
    )
    try:
        await writing.watch("obs", "t", ["c"])
        assert not await waiting.wait_for_notifications(0.2)  # subscribes on both shards
        for shard in (0, 1):
            k = next(
                key(f"r{i}") for i in range(100) if writing.shard_of("t", f"r{i}".encode()) == shard
            )
            task = asyncio.create_task(waiting.wait_for_notifications(10))
            await asyncio.sleep(0.05)
            assert not task.done()
            started = time.monotonic()
            await write(writing, k, b"v", ts(10 + 2 * shard), ts(11 + 2 * shard))
            assert await task, f"shard {shard}"
            assert time.monotonic() - started < 2
        # Nothing more happens: the timeout.
        started = time.monotonic()
        assert not await waiting.wait_for_notifications(0.3)
        assert time.monotonic() - started >= 0.29
    finally:
        await waiting.close()
        await writing.close()


async def test_a_dead_listener_is_reopened(fresh_dsns) -> None:
    (dsn,) = await fresh_dsns(1)
    store = await PostgresCellStore.connect([dsn])
    admin = await asyncpg.connect(dsn)
    try:
        await store.watch("obs", "t", ["c"])
        assert not await store.wait_for_notifications(0.1)
        killed = await admin.fetchval(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE application_name = 'percolator-listen' AND datname = current_database()"
        )
        assert killed == 1
        await asyncio.sleep(0.2)  # the client notices the closed socket
        # No exception: the next wait reconnects, and commits wake it again.
        before = store.stats.round_trips["listen"]
        assert not await store.wait_for_notifications(0.1)
        assert store.stats.round_trips["listen"] == before + 1
        task = asyncio.create_task(store.wait_for_notifications(10))
        await asyncio.sleep(0.05)
        await write(store, key("a"), b"v", ts(1), ts(2))
        assert await task
    finally:
        await admin.close()
        await store.close()


async def test_an_unreachable_listener_shard_only_times_out(fresh_dsns) -> None:
    (dsn,) = await fresh_dsns(1)
    store = await PostgresCellStore.connect([dsn], connect_timeout=0.5)
    try:
        # The listener opens its own connection to the shard's DSN: point it nowhere.
        store._shards[0].dsn = "postgresql://u@127.0.0.1:1/nowhere"
        started = time.monotonic()
        assert not await store.wait_for_notifications(0.3)
        assert 0.29 <= time.monotonic() - started < 2
    finally:
        await store.close()


def notification_batches(
    store: PostgresCellStore, keys: list[CellKey], start: int, commit: int
) -> list[Awaitable[object]]:
    """A worker's clear and defer batches over ``keys`` in reverse order and a retry_parked, to
    race a commit of the transaction (start, commit) that notifies them."""
    backwards = list(reversed(keys))
    return [
        store.clear_notifications(
            [ClearNotification("obs", k.table, k.row, start) for k in backwards]
        ),
        store.defer_notifications(
            [DeferNotification("obs", k.table, k.row, commit, 0, "e", False) for k in backwards]
        ),
        store.retry_parked("obs"),
    ]


async def test_commits_and_notification_batches_never_deadlock(fresh_dsns) -> None:
    """Commit batches set notify rows under their rows' advisory locks (ascending hash); clear
    and defer batches take the same locks first. Racing them in opposite row orders must never
    deadlock (Postgres would abort one after deadlock_timeout, failing a commit)."""
    (dsn,) = await fresh_dsns(1)
    store = await PostgresCellStore.connect([dsn], pool_size=8, coalesce=False)
    try:
        await store.watch("obs", "t", ["c"])
        keys = [key(f"d{i:02d}") for i in range(30)]
        for i in range(40):
            start, commit = ts(10 * i + 1), ts(10 * i + 2)
            assert await store.prewrite(start, keys[0], 3000, [put(k, b"v") for k in keys]) == []
            failures, *_ = await asyncio.gather(
                store.commit(start, commit, keys),
                *notification_batches(store, keys, start, commit),
            )
            assert failures == [], f"round {i}"
        found = await store.find_notifications(-(2**63), 2**63 - 1, now_ms=0, limit=100)
        assert len(found) == len(keys)
    finally:
        await store.close()


async def test_waits_cancelled_while_subscribing_leave_one_listener(
    fresh_dsns, monkeypatch
) -> None:
    """The observer worker cancels a wait when something else wakes it, possibly while the
    wait is still opening its LISTEN connection (connected, not yet listening). The store stays
    usable and ends with exactly one listener per shard."""
    (dsn,) = await fresh_dsns(1)
    store = await PostgresCellStore.connect([dsn])
    admin = await asyncpg.connect(dsn)
    subscribing = asyncio.Event()
    add_listener = asyncpg.Connection.add_listener

    async def slow_add_listener(self, channel, callback):  # widens the window to cancel in
        subscribing.set()
        await asyncio.sleep(0.5)
        await add_listener(self, channel, callback)

    try:
        monkeypatch.setattr(asyncpg.Connection, "add_listener", slow_add_listener)
        for _ in range(3):
            subscribing.clear()
            task = asyncio.create_task(store.wait_for_notifications(5))
            async with asyncio.timeout(5):
                await subscribing.wait()
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        monkeypatch.undo()
        assert not await store.wait_for_notifications(0.1)
        await asyncio.sleep(0.2)  # terminated connections leave pg_stat_activity
        listeners = await admin.fetchval(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE application_name = 'percolator-listen' AND datname = current_database()"
        )
        assert listeners == 1
        await store.watch("obs", "t", ["c"])
        await write(store, key("a"), b"v", ts(1), ts(2))
        assert await store.wait_for_notifications(5)
    finally:
        await admin.close()
        await store.close()
