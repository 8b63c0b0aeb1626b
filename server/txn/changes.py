"""Change streams: a table's committed changes in commit order, up to a closed timestamp.

A streaming reader (Spark Structured Streaming's source) follows a table with commit
timestamps as offsets: each micro-batch reads the changes with ``start < commit_ts <= end``,
where ``end`` is a :func:`closed_timestamp` of the table. Because no change with commit_ts at or
below a closed timestamp can appear later, the changes of an offset range never change: a
replayed batch (after a failure, from the checkpointed offsets) reads exactly the same changes,
which is what exactly-once delivery with a transactional or idempotent sink needs. The reader
must hold GC back at its committed offset (``gc_barrier.hold_gc``): below the GC safe point,
superseded versions are collected and ``scan_changes`` refuses to read (SnapshotTooOld).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from percolator.server.storage.cells import (
    Change,
    ChangeCursor,
    LockInfo,
    TxnState,
    ts_physical_ms,
)

if TYPE_CHECKING:
    from percolator.server.txn.client import TransactionClient

DEFAULT_RESOLVE_AFTER_MS = 10_000
"""A lock older than this that holds a closed timestamp back gets its transaction looked at."""


async def closed_timestamp(
    client: TransactionClient,
    table: str,
    *,
    resolve_after_ms: int | None = DEFAULT_RESOLVE_AFTER_MS,
) -> int:
    """A timestamp T such that every transaction that will ever commit a change of ``table``
    with commit_ts <= T has already fully committed it: all its write records in the table are
    there, so ``scan_changes(table, a, T)`` returns the same changes now and forever (until GC).

    T = min(b, m - 1), where b is a fresh timestamp taken first and m the smallest start_ts of
    a lock in the table (PUT/DELETE locks; LOCK-kind locks never commit a change), read from
    each shard after b was returned (``oldest_lock``). Round trips: 1 oracle, 1 per shard
    (more when a stale lock is resolved, below). While a transaction or a Spark job writes the
    table, T stays below its start_ts.

    Proof. Let X commit a change of the table at commit_ts c <= T. Then c <= b, and c != b
    (timestamps are unique), so c < b. The oracle is linearizable: a timestamp asked for after
    b was returned is above b, so X asked for c before b was returned, and X asks for its
    commit_ts only after all its prewrites finished (the two-phase committer; for a distributed
    transaction, the driver after every task succeeded). So every lock X ever takes in the
    table existed before our lock scan began, with start_ts s < c. A lock disappears only by
    becoming a write record (commit, roll forward, commit_locks) or by a rollback; X committed,
    so none of its locks is rolled back (a secondary is rolled back only after its primary).
    Each shard's scan is one snapshot in which each cell's lock -> write move is atomic. If one
    of X's cells in the table were still a lock in it, m <= s < c <= T <= m - 1: impossible. So
    every cell X writes in the table is a write record when the scan sees it, and stays one.
    Secondaries that X's committer leaves to be committed lazily are locks until then: exactly
    what the bound on m holds back. (The same argument fails without b: a transaction could
    prewrite after the scan and take a commit_ts below an unbounded T.)

    T is not monotonic across calls (a transaction that began long ago may lock the table
    after a call); a reader keeps the highest T it used, which stays closed.

    When the lock holding T back is older than ``resolve_after_ms`` (by its start_ts), its
    transaction is looked at, as a reader would: if it is over, all its locks are committed or
    removed at once, server-side (``commit_locks``/``rollback_locks``), and the locks read
    again. Otherwise a crashed committer's secondaries, or a late write of an aborted job, would
    hold the stream back until someone reads those cells or GC clears them. None turns it off.
    """
    b = await client.clock.get_timestamp()
    lock = await client.store.oldest_lock(table)
    if lock is not None and resolve_after_ms is not None:
        if ts_physical_ms(b) - ts_physical_ms(lock.start_ts) > resolve_after_ms:
            if await _finish_if_over(client, lock, b):
                # Still a scan after b was returned: the proof holds for it.
                lock = await client.store.oldest_lock(table)
    return b if lock is None else min(b, lock.start_ts - 1)


async def _finish_if_over(client: TransactionClient, lock: LockInfo, now_ts: int) -> bool:
    """Complete the transaction of ``lock`` if its primary says it is over (committed: commit
    every lock of it; rolled back, or expired: roll back, the primary first). True if it was."""
    status = await client.store.check_txn_status(
        lock.primary, lock.start_ts, now_ts, rollback_if_missing=lock.expired_at(now_ts)
    )
    if status.state == TxnState.COMMITTED:
        assert status.commit_ts is not None
        await client.store.commit_locks(lock.start_ts, status.commit_ts)
        return True
    if status.state == TxnState.ROLLED_BACK:
        await client.store.rollback_locks(lock.start_ts)
        return True
    return False


async def read_changes(
    client: TransactionClient,
    table: str,
    after_ts: int,
    upto_ts: int,
    *,
    page_size: int = 1000,
) -> AsyncIterator[Change]:
    """Every change of ``table`` with after_ts < commit_ts <= upto_ts, in (commit_ts, row,
    column) order, a page (one round trip per shard) at a time. Complete when upto_ts is a
    closed timestamp of the table. A row's cells written by one transaction are adjacent."""
    cursor: ChangeCursor | None = None
    while True:
        page = await client.store.scan_changes(
            table, after_ts, upto_ts, limit=page_size, after=cursor
        )
        for change in page:
            yield change
        if len(page) < page_size:
            return
        cursor = page[-1].cursor
