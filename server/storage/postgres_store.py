"""The cell store on N Postgres shards, through asyncpg.

Each operation groups its cells by shard and sends one statement per shard, all shards in
parallel; each statement is a call of a server-side function (``schema.py``) or a single SELECT,
so the conflict check and the write happen in one round trip, atomically per row. A shard batch
touching more than ``MAX_ROWS_PER_STATEMENT`` distinct rows is split into chunks (one round trip
each, sent in parallel), which bounds the advisory locks one statement holds.
See ``docs/storage.md`` for the SQL and the round trips of each operation.

Notifications (observers) live on the shard of their row; watches are replicated on every shard
and the observers' counters are kept on the first. :meth:`PostgresCellStore.wait_for_notifications`
LISTENs on one dedicated connection per shard, outside the pools.
"""

from __future__ import annotations

import asyncio
import bisect
import heapq
import itertools
import operator
import sys
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, NamedTuple, TypeVar

import asyncpg

from percolator.server.storage import packed
from percolator.server.storage.advisory import AdvisorySession, PostgresAdvisorySession
from percolator.server.storage.cells import (
    CellKey,
    CellRead,
    Change,
    ChangeCursor,
    ClearNotification,
    CommitFailure,
    CommitRequest,
    CommitStatus,
    DeferNotification,
    GcResult,
    LockInfo,
    Mutation,
    Notification,
    NotifyCursor,
    NotifySummary,
    ObserverCounters,
    ParkedNotification,
    PrewriteFailure,
    PrewriteStatus,
    RowRead,
    TxnState,
    TxnStatus,
    Watch,
    WriteKind,
)
from percolator.server.storage.channels import Channels, Deliver, PostgresChannels
from percolator.server.storage.connection_pool import ConnectionPool, PoolClosed
from percolator.server.storage.errors import (
    CorruptRecordError,
    SchemaVersionError,
    SnapshotTooOld,
    StoreError,
    StoreResourceExhausted,
    StoreUnavailable,
    redact_dsn,
)
from percolator.server.storage.row_locks import PostgresRowLocks, RowLocks, ShardLockConnections
from percolator.server.storage.schema import MIGRATION_LOCK_KEY, MIGRATIONS, SCHEMA_VERSION
from percolator.server.storage.sharding import row_hash, shard_for
from percolator.server.storage.split_points import merge_split_points
from percolator.server.storage.statement_batcher import StatementBatcher
from percolator.server.storage.store import PURGE_ROWS, CellStore, RowRange, StoreStats

T = TypeVar("T")
C = TypeVar("C")
D = TypeVar("D")
P = TypeVar("P")
K = TypeVar("K")

STATEMENTS_PER_POOL_FRACTION = 16
"""Coalesced statements of one kind in flight per shard: a sixteenth of the pool (one for the
default pool of 16). Fewer statements in flight make larger shared ones: with 16 observer runs
in flight, one in flight instead of four took a web-index page from 6.6 to 3.7 statements and
its Postgres CPU down by a fifth."""
MAX_ROWS_PER_STATEMENT = 1024
"""Distinct rows per mutating statement: one advisory lock each, held until it commits."""
NOTIFY_BULK_ROWS = 10_000
"""Notifications one statement of ``retry_parked`` or of dropping an observer's notifications
handles; the store repeats the statement until one handles fewer."""
NOTIFY_CHANNEL = "percolator_notify"
"""The channel the commit function ``pg_notify``s when it sets a notification."""
LOCKS_PER_STATEMENT = MAX_ROWS_PER_STATEMENT
"""Locks one statement of ``commit_locks``/``rollback_locks`` moves (completed to whole rows;
about as many advisory locks); the store repeats the statement on a shard, keyset-paged, until
one finds fewer."""
PACKED_PAGE_BYTES = 8 << 20
"""About how many bytes a packed scan page may carry: the cells asked for follow the bytes per
cell of the page before, so that pages of wide values stay far below Postgres's 1 GB limit on
one aggregated value, and the reader's memory stays bounded."""
PACKED_FIRST_PAGE_CELLS = 1024
"""The cells a packed scan asks for first, before it knows how wide they are."""
BULK_MOVE_PARTS = 4
"""Key ranges of a transaction's locks on one shard that ``commit_locks``/``rollback_locks``
move at once, each a chain of chunks on its own connection, when it has at least this many
chunks' worth of locks there. One chain left Postgres on one core. Moving 600,000 locks on this
2-core machine took 5.65 s with 1 range, 3.69 s with 2, 3.61 s with 4 and 3.88 s with 8; 4
leaves room for a Postgres with more cores."""
SAMPLE_EXACT_CELLS = 100_000
"""Up to this many write records of a table on a shard, ``sample_row_keys`` reads its row keys
exactly; above, it samples."""
SAMPLE_ROWS = 100_000
"""About how many records of the whole write table a sampling ``sample_row_keys`` reads. A
Spark read plans its partitions with it before any task starts: at 1,000,000 (and as many for
the exact walk) it took 670 ms of a 2.2 s read of 1,000,000 rows, against 47 ms at 100,000, and
the median it found was no closer (1.6 % and 1.4 % of the rows off; whole pages are
sampled)."""

_PREWRITE_STATUS = {
    1: PrewriteStatus.WRITE_CONFLICT,
    2: PrewriteStatus.LOCKED,
    3: PrewriteStatus.ROLLED_BACK,
    4: PrewriteStatus.TOO_OLD,
    5: PrewriteStatus.DUPLICATE,
}
_COMMIT_STATUS = {1: CommitStatus.LOCK_MISSING, 2: CommitStatus.ROLLED_BACK}
_TXN_STATE = {
    1: TxnState.COMMITTED,
    2: TxnState.ROLLED_BACK,
    3: TxnState.LOCKED,
    4: TxnState.MISSING,
}

_LOCK_COLUMNS = "l.start_ts, l.primary_tbl, l.primary_rkey, l.primary_col, l.ttl_ms, l.kind"
_SAFE_POINT = "(SELECT safe_point FROM percolator_gc WHERE id = 1)"
_READ_ONE = f"""
SELECT {_LOCK_COLUMNS}, w.commit_ts, w.kind, w.value, {_SAFE_POINT}
FROM (SELECT 1) one
LEFT JOIN percolator_lock l
    ON l.tbl = $1 AND l.rkey = $2 AND l.col = $3 AND l.start_ts <= $4 AND l.kind <> 4
LEFT JOIN LATERAL (
    SELECT w.commit_ts, w.kind, w.value FROM percolator_write w
    WHERE w.tbl = $1 AND w.rkey = $2 AND w.col = $3 AND w.commit_ts <= $4 AND w.kind NOT IN (3, 4)
    ORDER BY w.commit_ts DESC LIMIT 1
) w ON true"""
_PRESENT = "WHERE l.start_ts IS NOT NULL OR w.commit_ts IS NOT NULL"
_SAFE_POINT_ROW = """
UNION ALL SELECT 0, NULL, NULL, NULL, NULL, NULL, NULL, safe_point, NULL, NULL
FROM percolator_gc WHERE id = 1"""
_READ_MANY = f"""
SELECT k.i, {_LOCK_COLUMNS}, w.commit_ts, w.kind, w.value
FROM (
    SELECT coalesce(u.tbl, $1[1]) AS tbl, u.rkey, u.col, coalesce(u.ts, $4[1]) AS ts, u.i
    FROM unnest($1::text[], $2::bytea[], $3::text[], $4::bigint[])
        WITH ORDINALITY AS u(tbl, rkey, col, ts, i)
) k
LEFT JOIN LATERAL (
    -- LIMIT keeps this an index probe per cell (the lock table churns; its statistics lie).
    SELECT * FROM percolator_lock l
    WHERE l.tbl = k.tbl AND l.rkey = k.rkey AND l.col = k.col AND l.start_ts <= k.ts
    AND l.kind <> 4 LIMIT 1
) l ON true
LEFT JOIN LATERAL (
    SELECT w.commit_ts, w.kind, CASE WHEN w.kind = 1 THEN w.value END AS value
    FROM percolator_write w
    WHERE w.tbl = k.tbl AND w.rkey = k.rkey AND w.col = k.col AND w.commit_ts <= k.ts
    AND w.kind NOT IN (3, 4)
    ORDER BY w.commit_ts DESC LIMIT 1
) w ON true
{_PRESENT}{_SAFE_POINT_ROW}"""
"""Cells at their timestamps (table and timestamp as arrays of one when all cells share
them, as in the set-based functions). Only cells with a lock or a record come back, and a
row ``i = 0`` carries the safe point in its ``commit_ts``: most cells of a batch read are
often absent (the rows an observer prefetches before inserting them), and each result row
costs the driver and the server more than the filter."""
_READ_ROW = f"""
SELECT k.i, {_LOCK_COLUMNS}, w.commit_ts, w.kind, w.value
FROM unnest($3::text[]) WITH ORDINALITY AS k(col, i)
LEFT JOIN LATERAL (
    SELECT * FROM percolator_lock l
    WHERE l.tbl = $1 AND l.rkey = $2 AND l.col = k.col AND l.start_ts <= $4
    AND l.kind <> 4 LIMIT 1
) l ON true
LEFT JOIN LATERAL (
    SELECT w.commit_ts, w.kind, CASE WHEN w.kind = 1 THEN w.value END AS value
    FROM percolator_write w
    WHERE w.tbl = $1 AND w.rkey = $2 AND w.col = k.col AND w.commit_ts <= $4
    AND w.kind NOT IN (3, 4)
    ORDER BY w.commit_ts DESC LIMIT 1
) w ON true
{_PRESENT}{_SAFE_POINT_ROW}"""
"""Several cells of one row at one timestamp: the row is sent once (the SQL layer's point
reads), which costs the driver a quarter of the parameter encoding of ``_READ_MANY``. The
result is shaped as ``_READ_MANY``'s."""
_PREWRITE_ONE = (
    "SELECT * FROM percolator_prewrite_one($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)"
)
_COMMIT_ONE = "SELECT percolator_commit_one($1, $2, $3, $4, $5, $6)"
_PREWRITE_EACH = (
    "SELECT * FROM percolator_prewrite_each($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)"
)
_COMMIT_EACH = "SELECT * FROM percolator_commit_each($1, $2, $3, $4, $5, $6)"
_PREWRITE_MANY = (
    "SELECT * FROM percolator_prewrite_many($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)"
)
_COMMIT_MANY = "SELECT * FROM percolator_commit_many($1, $2, $3, $4, $5, $6)"
_COMMIT_GUARDED = "SELECT * FROM percolator_commit_many($1, $2, $3, $4, $5, $6, true)"
_ROLLBACK = "SELECT * FROM percolator_rollback($1, $2, $3, $4, $5, $6)"
_CHECK_TXN_STATUS = "SELECT * FROM percolator_check_txn_status($1, $2, $3, $4, $5, $6, $7)"
_HEARTBEAT = "SELECT percolator_heartbeat($1, $2, $3, $4, $5, $6)"
_SCAN_LOCKS = f"""
SELECT l.tbl, l.rkey, l.col, {_LOCK_COLUMNS} FROM (
    SELECT * FROM percolator_lock l WHERE l.start_ts > 0 AND l.start_ts < $1 OFFSET 0
) l ORDER BY l.tbl, l.rkey, l.col LIMIT $2"""
"""GC's old locks: a range of the (partial) start_ts index, then the first by key. The fence
(OFFSET 0) keeps the planner from walking the primary key for the order instead, which reads
every lock (millions while a Spark job's are there) to find the few old ones."""
_SET_SAFE_POINT = """
UPDATE percolator_gc SET safe_point = GREATEST(safe_point, $1) WHERE id = 1
RETURNING safe_point"""
_GC_CHUNK = """
WITH head AS MATERIALIZED (
    SELECT tbl, rkey, col, commit_ts, kind, ctid FROM percolator_write
    WHERE (tbl, rkey, col) > ($2::text, $3::bytea, $4::text)
    ORDER BY tbl, rkey, col, commit_ts DESC LIMIT $5
), last AS MATERIALIZED (
    SELECT tbl, rkey, col FROM head ORDER BY tbl DESC, rkey DESC, col DESC LIMIT 1
), tail AS (
    SELECT w.* FROM last l CROSS JOIN LATERAL (
        SELECT w.tbl, w.rkey, w.col, w.commit_ts, w.kind, w.ctid FROM percolator_write w
        WHERE w.tbl = l.tbl AND w.rkey = l.rkey AND w.col = l.col OFFSET 0
    ) w
), recs AS MATERIALIZED (
    SELECT * FROM head UNION SELECT * FROM tail
), newest AS (
    SELECT DISTINCT ON (tbl, rkey, col) tbl, rkey, col, commit_ts, kind FROM recs
    WHERE commit_ts <= $1 AND kind IN (1, 2) ORDER BY tbl, rkey, col, commit_ts DESC
), doomed AS (
    SELECT r.ctid FROM recs r JOIN newest n USING (tbl, rkey, col)
    WHERE r.kind IN (1, 2)
    AND (r.commit_ts < n.commit_ts OR (r.commit_ts = n.commit_ts AND n.kind = 2))
    UNION ALL
    SELECT ctid FROM recs WHERE kind IN (3, 4) AND commit_ts < $1
), gone AS (
    DELETE FROM percolator_write WHERE ctid = ANY(ARRAY(SELECT ctid FROM doomed)) RETURNING kind
)
SELECT (SELECT count(*) FROM gone WHERE kind <> 3), (SELECT count(*) FROM gone WHERE kind = 3),
    (SELECT count(*) FROM head), l.tbl, l.rkey, l.col
FROM (SELECT 1) one LEFT JOIN last l ON true"""
"""One chunk of a GC sweep at safe point $1: the next $5 write records after the cell ($2, $3,
$4) in key order, and the rest of the last cell's (a cell's versions are judged together).
Returns (versions and LOCK records removed, rollback records removed, records in the chunk,
the last cell). Per cell, the newest PUT or DELETE at or below the safe point stays unless it is
a DELETE; older ones go, as do ROLLBACK and LOCK records below it. A short statement per chunk:
a pass never holds one snapshot (and vacuum's horizon) for the whole table."""
GC_CHUNK_RECORDS = 10_000
"""Write records one statement of a GC sweep looks at."""
_GC_START = ("", b"", "")
"""Before every cell key (table names are never empty)."""

_PURGE_TABLE = """
WITH l AS (
    DELETE FROM percolator_lock WHERE ctid = ANY(ARRAY(
        SELECT ctid FROM percolator_lock WHERE tbl = $1 LIMIT $2)) RETURNING 1
), w AS (
    DELETE FROM percolator_write WHERE ctid = ANY(ARRAY(
        SELECT ctid FROM percolator_write WHERE tbl = $1 LIMIT $2)) RETURNING 1
), n AS (
    DELETE FROM percolator_notify WHERE ctid = ANY(ARRAY(
        SELECT ctid FROM percolator_notify WHERE tbl = $1 LIMIT $2)) RETURNING 1
)
SELECT greatest((SELECT count(*) FROM l), (SELECT count(*) FROM w), (SELECT count(*) FROM n)),
    (SELECT count(*) FROM l) + (SELECT count(*) FROM w) + (SELECT count(*) FROM n)"""
"""One chunk of a dead table's rows: (the most of one kind, all). Rows are taken by ctid
from key ranges (the primary keys lead with tbl; notifications are few), so a chunk reads its
own rows only."""

_WATCH = """
INSERT INTO percolator_watch (tbl, col, observer) SELECT $1, c, $2 FROM unnest($3::text[]) c
ON CONFLICT DO NOTHING"""
_UNWATCH = "DELETE FROM percolator_watch WHERE observer = $1 AND ($2::text IS NULL OR tbl = $2)"
_UNWATCH_AND_COUNTERS = f"""
WITH counters AS (DELETE FROM percolator_observer_stats WHERE observer = $1)
{_UNWATCH}"""
_LIST_WATCHES = "SELECT tbl, col, observer FROM percolator_watch"
# SKIP LOCKED: a row locked by a commit in flight is left for the next statement, so this never
# waits for a row lock and never closes a deadlock cycle with a commit batch.
_DROP_NOTIFICATIONS = """
WITH s AS MATERIALIZED (
    SELECT observer, tbl, rkey FROM percolator_notify WHERE observer = $1
    LIMIT $2 FOR UPDATE SKIP LOCKED
), d AS (
    DELETE FROM percolator_notify n USING s
    WHERE n.observer = s.observer AND n.tbl = s.tbl AND n.rkey = s.rkey RETURNING 1
)
SELECT count(*) FROM d"""
_RETRY_PARKED = """
WITH s AS MATERIALIZED (
    SELECT observer, tbl, rkey FROM percolator_notify WHERE observer = $1 AND parked
    LIMIT $2 FOR UPDATE SKIP LOCKED
), u AS (
    UPDATE percolator_notify n SET parked = false, attempts = 0, retry_at_ms = 0,
        last_error = NULL
    FROM s WHERE n.observer = s.observer AND n.tbl = s.tbl AND n.rkey = s.rkey AND n.parked
    RETURNING 1
)
SELECT count(*) FROM u"""
_FIND_NOTIFICATIONS = "SELECT * FROM percolator_find_notifications($1, $2, $3, $4, $5, $6, $7, $8)"
_CLEAR_NOTIFICATIONS = "SELECT percolator_clear_notifications($1, $2, $3, $4, $5)"
_DEFER_NOTIFICATIONS = "SELECT percolator_defer_notifications($1, $2, $3, $4, $5, $6, $7, $8)"
_PARKED_NOTIFICATIONS = """
SELECT observer, tbl, rkey, ts, attempts, last_error FROM percolator_notify
WHERE parked AND ($1::text IS NULL OR observer = $1)
ORDER BY ts, observer, tbl, rkey LIMIT $2"""
_NOTIFY_SUMMARY = """
SELECT observer, count(*) FILTER (WHERE NOT parked), count(*) FILTER (WHERE parked),
    min(ts) FILTER (WHERE NOT parked)
FROM percolator_notify GROUP BY observer"""
# The later error wins (a missing time counts as the earliest); ties go to the newer delta
# (the rule of ObserverCounters.plus, which combines a batch's deltas first).
_LATER_ERROR = (
    "excluded.last_error IS NOT NULL "
    "AND COALESCE(excluded.last_error_ms, -1) >= COALESCE(s.last_error_ms, -1)"
)
_ADD_OBSERVER_COUNTERS = f"""
INSERT INTO percolator_observer_stats AS s
    (observer, runs, commits, conflicts, failures, last_error, last_error_ms)
SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[],
    $6::text[], $7::bigint[])
ON CONFLICT (observer) DO UPDATE SET
    runs = s.runs + excluded.runs,
    commits = s.commits + excluded.commits,
    conflicts = s.conflicts + excluded.conflicts,
    failures = s.failures + excluded.failures,
    last_error = CASE WHEN {_LATER_ERROR} THEN excluded.last_error ELSE s.last_error END,
    last_error_ms = CASE WHEN {_LATER_ERROR} THEN excluded.last_error_ms
        ELSE s.last_error_ms END"""
_OBSERVER_COUNTERS = """
SELECT observer, runs, commits, conflicts, failures, last_error, last_error_ms
FROM percolator_observer_stats ORDER BY observer"""


_COMMIT_LOCKS = "SELECT * FROM percolator_commit_locks($1, $2, $3, $4, $5)"
_COMMIT_LOCKS_UPTO = "SELECT * FROM percolator_commit_locks($1, $2, $3, $4, $5, $6, $7)"
_ROLLBACK_LOCKS = "SELECT * FROM percolator_rollback_locks($1, $2, $3, $4)"
_ROLLBACK_LOCKS_UPTO = "SELECT * FROM percolator_rollback_locks($1, $2, $3, $4, $5, $6)"
_LOCK_SPLITS = "SELECT * FROM percolator_lock_splits($1, $2, $3)"
_BEFORE_EVERY_LOCK = ("", b"")
"""The bulk moves' first cursor (tbl, rkey): before every lock of a table with a name."""
_OLDEST_LOCK = "SELECT * FROM percolator_oldest_lock($1)"
_SAMPLE_ROW_KEYS = "SELECT * FROM percolator_sample_row_keys($1, $2, $3, $4)"


def _scan_changes_sql(first: bool) -> str:
    """One page of a shard's changes, then the safe point in a row of its own.

    Parameters: $1 table, $2 after_ts, $3 upto_ts, $4 limit, then the cursor ($5 commit_ts,
    $6 row, $7 column) when not ``first``. A walk of ``percolator_write_changes``.
    """
    cursor = "" if first else " AND (commit_ts, rkey, col) > ($5, $6, $7)"
    return f"""
SELECT false AS meta, rkey, col, commit_ts, start_ts, kind, value FROM (
    SELECT rkey, col, commit_ts, start_ts, kind, value FROM percolator_write
    WHERE tbl = $1 AND kind IN (1, 2) AND commit_ts > $2 AND commit_ts <= $3{cursor}
    ORDER BY commit_ts, rkey, col LIMIT $4
) c
UNION ALL
SELECT true, NULL, NULL, NULL, {_SAFE_POINT}, NULL, NULL"""


_SCAN_CHANGES_SQL = {first: _scan_changes_sql(first) for first in (True, False)}

_FIRST_CHANGE = """
WITH r AS (SELECT * FROM unnest($2::bytea[], $3::bytea[]) AS r(lo, hi))
(SELECT l.rkey, l.col FROM percolator_lock l JOIN r ON l.rkey >= r.lo
    AND (r.hi IS NULL OR l.rkey < r.hi)
 WHERE l.tbl = $1 AND l.kind IN (1, 2) AND l.start_ts <> $6 LIMIT 1)
UNION ALL
(SELECT w.rkey, w.col FROM percolator_write w JOIN r ON w.rkey >= r.lo
    AND (r.hi IS NULL OR w.rkey < r.hi)
 WHERE w.tbl = $1 AND w.kind IN (1, 2) AND w.commit_ts > $4 AND w.commit_ts <= $5
    AND w.start_ts <> $6 LIMIT 1)
LIMIT 1"""
"""A SERIALIZABLE commit's check of a table's read ranges: $1 table, $2 / $3 the ranges'
starts and ends (NULL: the table's end), $4 / $5 the window of commit timestamps, $6 the
transaction's own start_ts. Recent records are found through ``percolator_write_changes``
((tbl, commit_ts, ...) for PUT and DELETE records), locks through the lock table's key."""


def _scan_sql(cursor: bool, near: bool, far: bool, reverse: bool) -> str:
    """One page of a scan: the newest visible write records and the blocking locks of the next
    page of cells, in one statement.

    The scan walks the range from its near end (ascending: ``start``; descending: ``end``,
    exclusive) toward its far end. Parameters: $1 table, $2 columns (or NULL), $3 ts, $4 page
    size, then the near bound when ``near`` (a row; with ``cursor``, the cursor's row and
    column, the page starting after it in the scan's direction), then the far bound when
    ``far``. An ascending scan always has a near bound (its start, or the empty key).

    A descending page walks the key indexes backward. The write table's index then yields
    each cell's versions oldest first, so Postgres orders the versions of each cell newest
    first for ``DISTINCT ON`` (an incremental sort, over each cell's few versions, never the
    range: the walk is presorted by row and column). A plan that kept the last version of
    each cell instead (``lead`` over the walk, no sort node) was a little slower, and its
    generic plan for a page bounded at both ends sorted the whole range.
    """
    n = itertools.count(5)
    conds = ["tbl = $1"]
    if near:
        if cursor:
            conds.append(f"(rkey, col) {'<' if reverse else '>'} (${next(n)}, ${next(n)})")
        else:
            conds.append(f"rkey {'<' if reverse else '>='} ${next(n)}")
    if far:
        conds.append(f"rkey {'>=' if reverse else '<'} ${next(n)}")
    conds.append("($2::text[] IS NULL OR col = ANY($2))")
    where = " AND ".join(conds)
    order = "rkey DESC, col DESC" if reverse else "rkey, col"
    return f"""
WITH w AS (
    SELECT DISTINCT ON (rkey, col) rkey, col, commit_ts, kind, value FROM percolator_write
    WHERE {where} AND commit_ts <= $3 AND kind NOT IN (3, 4)
    ORDER BY {order}, commit_ts DESC LIMIT $4
), l AS (
    SELECT rkey, col, start_ts, primary_tbl, primary_rkey, primary_col, ttl_ms, kind
    FROM percolator_lock WHERE {where} AND start_ts <= $3 AND kind <> 4
    ORDER BY {order} LIMIT $4
)
SELECT false AS is_lock, rkey, col, commit_ts, kind, value, NULL::bigint AS start_ts,
    NULL::text AS primary_tbl, NULL::bytea AS primary_rkey, NULL::text AS primary_col,
    NULL::integer AS ttl_ms FROM w
UNION ALL
SELECT true, rkey, col, NULL, kind, NULL, start_ts, primary_tbl, primary_rkey, primary_col,
    ttl_ms FROM l
UNION ALL
SELECT NULL, NULL, NULL, NULL, NULL, NULL, {_SAFE_POINT}, NULL, NULL, NULL, NULL"""


_SCAN_SQL = {
    shape: _scan_sql(*shape)
    for shape in itertools.product((False, True), repeat=4)
    # a cursor is a near bound; an ascending scan always has one
    if (shape[1] or not shape[0]) and (shape[1] or shape[3])
}
"""The scan statements by (cursor, near, far, reverse)."""


_SCAN_PACKED = "SELECT * FROM percolator_scan_packed($1, $2, $3, $4, $5, $6)"
"""One page of a packed scan (:mod:`.packed`, ``schema._V8_PACKED_SCAN``): the newest visible
write records of the next ``$6`` cells from ``$2`` on (before ``$3`` unless NULL), aggregated
into the three buffers, with the GC safe point and the first blocking lock of the range."""


async def _all(jobs: list[Coroutine[Any, Any, T]]) -> list[T]:
    """The results of ``jobs``, run in parallel; a single one is awaited directly (no task:
    most batches touch one shard)."""
    if len(jobs) == 1:
        return [await jobs[0]]
    return list(await asyncio.gather(*jobs))


def _raise_too_old(reads: list[CellRead | SnapshotTooOld]) -> list[CellRead]:
    """The reads, unless one was below the safe point: then its error."""
    for r in reads:
        if isinstance(r, SnapshotTooOld):
            raise r
    return reads  # type: ignore[return-value]


def _picker(order: list[int]) -> Callable[[Sequence[T]], list[T]]:
    """A function that takes the elements of a sequence at ``order`` (two or more indices)."""
    get = operator.itemgetter(*order)
    return lambda values: list(get(values))


def _one_if_same(values: list[T]) -> list[T]:
    """An argument of the set-based functions: one element when every cell has the same value
    (the functions read an array of one as that value for all), else the values."""
    return values[:1] if values.count(values[0]) == len(values) else values


def _each(values: list[T]) -> list[T]:
    """An argument of the per-cell loops: always one value per cell."""
    return values


_KINDS = {kind.value: kind for kind in WriteKind}


def _kind(code: int) -> WriteKind:
    kind = _KINDS.get(code)  # a dict, not WriteKind(code): this runs for every cell read
    if kind is None:
        raise CorruptRecordError(f"unknown record kind {code} in the store")
    return kind


def _lock_info(key: CellKey, r: asyncpg.Record | Sequence[Any], at: int) -> LockInfo:
    """A LockInfo from 6 columns starting at ``at``: start_ts, primary (3 columns), ttl, kind."""
    return LockInfo(
        key, r[at], CellKey(r[at + 1], r[at + 2], r[at + 3]), r[at + 4], _kind(r[at + 5])
    )


def _read_result(key: CellKey, r: asyncpg.Record | Sequence[Any], at: int) -> CellRead:
    """A CellRead from lock columns at ``at`` and write columns at ``at + 6``."""
    if r[at] is not None:
        return CellRead(key, None, lock=_lock_info(key, r, at))
    commit_ts, kind = r[at + 6], r[at + 7]
    if commit_ts is None:
        return CellRead(key, None)
    return CellRead(key, r[at + 8] if _kind(kind) is WriteKind.PUT else None, commit_ts)


class _PrewriteItem(NamedTuple):
    start_ts: int
    primary: CellKey
    ttl_ms: int
    mutation: Mutation


class _CommitItem(NamedTuple):
    start_ts: int
    commit_ts: int
    key: CellKey


@dataclass
class _Shard:
    index: int
    dsn: str
    pool: ConnectionPool
    reads: StatementBatcher[tuple[CellKey, int], CellRead | SnapshotTooOld] = field(init=False)
    prewrites: StatementBatcher[_PrewriteItem, PrewriteFailure | None] = field(init=False)
    commits: StatementBatcher[_CommitItem, CommitFailure | None] = field(init=False)
    primary_commits: StatementBatcher[_CommitItem, CommitFailure | None] = field(init=False)
    """Primaries with their secondaries of this shard (guarded: see commit_primary)."""
    gc_cursor: tuple[str, bytes, str] | None = None
    """The last cell a GC sweep of this shard looked at (None: start from the first)."""


class PostgresCellStore(CellStore):
    """Cells on Postgres shards; create with :meth:`connect`."""

    def __init__(
        self, shards: list[_Shard], connect_timeout: float, pool_size: int, coalesce: bool
    ) -> None:
        self._shards = shards
        self._timeout = connect_timeout
        self.stats = StoreStats()
        # LISTEN connections for wait_for_notifications, one per shard, opened on first use.
        self._listeners: list[asyncpg.Connection | None] = [None] * len(shards)
        self._listen_lock = asyncio.Lock()
        self._notified = asyncio.Event()
        self._lock_conns = [
            ShardLockConnections(sh.dsn, self._lock_connector(sh.dsn)) for sh in shards
        ]
        # Without coalescing no operation ever waits for a turn, so each goes alone.
        in_flight = max(1, pool_size // STATEMENTS_PER_POOL_FRACTION) if coalesce else sys.maxsize
        for sh in shards:
            sh.reads = StatementBatcher(
                lambda items, i=sh.index: self._read_cells(i, items), max_in_flight=in_flight
            )
            sh.prewrites = StatementBatcher(
                lambda items, i=sh.index: self._prewrite_cells(i, items),
                max_in_flight=in_flight,
            )
            sh.commits = StatementBatcher(
                lambda items, i=sh.index: self._commit_cells(i, items), max_in_flight=in_flight
            )
            sh.primary_commits = StatementBatcher(
                lambda items, i=sh.index: self._commit_cells(i, items, guard=True),
                max_in_flight=in_flight,
            )

    def channels(self, deliver: Deliver) -> Channels:
        """LISTEN / NOTIFY over Postgres's own, on the first shard."""
        shard = self._shards[0]

        def connect() -> Awaitable[asyncpg.Connection]:
            return asyncpg.connect(shard.dsn, timeout=self._timeout)

        def execute(sql: str, args: Sequence[Any]) -> Awaitable[Any]:
            return self._call("notify", shard, lambda conn: conn.execute(sql, *args))

        return PostgresChannels(deliver, connect, execute)

    def row_locks(self) -> RowLocks:
        """Row locks on connections of their own (Postgres advisory locks on the rows'
        shards; see row_locks.py)."""
        return PostgresRowLocks(self._lock_conns, self.shard_of)

    def _lock_connector(self, dsn: str) -> Callable[[], Awaitable[asyncpg.Connection]]:
        def connect() -> Awaitable[asyncpg.Connection]:
            return asyncpg.connect(dsn, timeout=self._timeout, server_settings=_SERVER_SETTINGS)

        return connect

    def advisory_session(self) -> AdvisorySession:
        """Advisory locks on a connection of their own to the first shard: Postgres's own
        advisory locks, released by Postgres if this process dies."""
        dsn = self._shards[0].dsn

        def connect() -> Awaitable[asyncpg.Connection]:
            return asyncpg.connect(dsn, timeout=self._timeout)

        return PostgresAdvisorySession(connect)

    @classmethod
    async def connect(
        cls,
        dsns: Sequence[str],
        *,
        pool_size: int = 16,
        connect_timeout: float = 10.0,
        coalesce: bool = True,
    ) -> PostgresCellStore:
        """Open a pool per shard (in parallel) and create or migrate each shard's schema.

        ``coalesce`` lets the concurrent reads, prewrites and commits of a shard share statements
        (:mod:`~percolator.server.storage.statement_batcher`); off, each is its own.
        """
        if not dsns:
            raise ValueError("a store needs at least one shard DSN")
        results = await asyncio.gather(
            *(_open_shard(i, dsn, pool_size, connect_timeout) for i, dsn in enumerate(dsns)),
            return_exceptions=True,
        )
        shards = [r for r in results if isinstance(r, _Shard)]
        failure = next((r for r in results if isinstance(r, BaseException)), None)
        if failure is not None:
            await asyncio.gather(*(s.pool.close() for s in shards), return_exceptions=True)
            raise failure
        return cls(shards, connect_timeout, pool_size, coalesce)

    @property
    def shard_count(self) -> int:
        return len(self._shards)

    @property
    def dsns(self) -> list[str]:
        """The shards' DSNs, in shard order."""
        return [s.dsn for s in self._shards]

    def shard_of(self, table: str, row: bytes) -> int:
        return shard_for(table, row, len(self._shards))

    # -- plumbing ------------------------------------------------------------------------------

    async def _call(
        self, op: str, shard: _Shard, fn: Callable[[asyncpg.Connection], Awaitable[T]]
    ) -> T:
        """Run one statement on a shard: one round trip, counted under ``op``."""
        self.stats.round_trips[op] += 1
        try:
            # No timeout on acquiring: waiting for a busy pool is load, not an outage; opening a
            # new connection is bounded by the pool's connect timeout.
            conn = await shard.pool.acquire()
            try:
                result = await fn(conn)
            except asyncpg.PostgresError:
                shard.pool.release(conn)  # the server reported it: the connection is in step
                raise
            except asyncpg.exceptions.InternalClientError as exc:
                # asyncpg can leave a connection whose server died mid-statement in a corrupt
                # protocol state ("cannot switch to state 12; another operation is in
                # progress", MagicStack/asyncpg#1069): drop it, never reuse it.
                shard.pool.discard(conn)
                raise StoreUnavailable(shard.dsn, f"the connection broke: {exc}") from exc
            except BaseException as exc:
                # Cancelled mid-statement, or a client-side failure: its state is unknown.
                shard.pool.discard(conn)
                if isinstance(exc, asyncpg.exceptions.InterfaceError) and conn.is_closed():
                    raise StoreUnavailable(shard.dsn, f"the connection broke: {exc}") from exc
                raise
            shard.pool.release(conn)
            return result
        except (
            TimeoutError,
            OSError,
            # Class 08 (the connection broke mid-statement: the shard crashed) and the
            # shard's own shutdown, crash-restart and start-up refusals: all mean "shard
            # unavailable", not a bug of ours.
            asyncpg.exceptions.PostgresConnectionError,
            asyncpg.exceptions.CannotConnectNowError,
            asyncpg.exceptions.AdminShutdownError,
            asyncpg.exceptions.CrashShutdownError,
            PoolClosed,
        ) as exc:
            raise StoreUnavailable(shard.dsn, f"{type(exc).__name__}: {exc}") from exc
        except asyncpg.exceptions.InsufficientResourcesError as exc:
            raise StoreResourceExhausted(shard.dsn, exc.sqlstate, str(exc)) from exc
        except asyncpg.PostgresError as exc:
            raise StoreError(f"shard {redact_dsn(shard.dsn)}: {exc}") from exc

    def _group(self, keys: Sequence[CellKey]) -> dict[int, list[list[int]]]:
        """Indices of ``keys`` per shard, in chunks of at most MAX_ROWS_PER_STATEMENT rows."""
        per_shard: dict[int, dict[tuple[str, bytes], list[int]]] = defaultdict(dict)
        n = len(self._shards)
        for i, k in enumerate(keys):
            per_shard[shard_for(k.table, k.row, n)].setdefault((k.table, k.row), []).append(i)
        chunks: dict[int, list[list[int]]] = {}
        for shard, rows in per_shard.items():
            groups = list(rows.values())
            chunks[shard] = [
                [i for g in groups[j : j + MAX_ROWS_PER_STATEMENT] for i in g]
                for j in range(0, len(groups), MAX_ROWS_PER_STATEMENT)
            ]
        return chunks

    async def _per_chunk(
        self,
        op: str,
        keys: Sequence[CellKey],
        run: Callable[[asyncpg.Connection, list[int]], Awaitable[list[T]]],
    ) -> list[T]:
        """Run ``run`` for every chunk of every shard in parallel; concatenate the results."""
        results = await _all(
            [
                self._call(op, self._shards[shard], lambda conn, idx=idx: run(conn, idx))
                for shard, chunks in self._group(keys).items()
                for idx in chunks
            ]
        )
        return [item for part in results for item in part]

    @staticmethod
    def _key_arrays(
        keys: Sequence[CellKey], idx: list[int]
    ) -> tuple[list[str], list[bytes], list[str], list[int]]:
        tbl, rows, cols, hashes = [], [], [], []
        for i in idx:
            k = keys[i]
            tbl.append(k.table)
            rows.append(k.row)
            cols.append(k.column)
            hashes.append(row_hash(k.table, k.row))
        return tbl, rows, cols, hashes

    # -- operations ----------------------------------------------------------------------------

    async def prewrite(
        self, start_ts: int, primary: CellKey, ttl_ms: int, mutations: Sequence[Mutation]
    ) -> list[PrewriteFailure]:
        if len(mutations) == 1:
            m = mutations[0]
            shard = self.shard_of(m.key.table, m.key.row)
            item = _PrewriteItem(start_ts, primary, ttl_ms, m)
            failure = await self._shards[shard].prewrites.submit(item)
            return [failure] if failure is not None else []
        items = [_PrewriteItem(start_ts, primary, ttl_ms, m) for m in mutations]
        chunks = self._group([m.key for m in mutations])
        results = await _all(
            [
                self._shards[shard].prewrites.submit_group([items[i] for i in idx])
                for shard, shard_chunks in chunks.items()
                for idx in shard_chunks
            ]
        )
        return [f for part in results for f in part if f is not None]

    async def _prewrite_cells(
        self, shard: int, items: list[_PrewriteItem]
    ) -> list[PrewriteFailure | None]:
        """Prewrite cells of one shard (of one transaction or several) in one statement."""
        if len(items) == 1:
            it = items[0]
            k, p = it.mutation.key, it.primary
            records = await self._call(
                "prewrite",
                self._shards[shard],
                lambda conn: conn.fetch(
                    _PREWRITE_ONE,
                    it.start_ts,
                    p.table,
                    p.row,
                    p.column,
                    it.ttl_ms,
                    k.table,
                    k.row,
                    k.column,
                    int(it.mutation.kind),
                    it.mutation.value,
                    row_hash(k.table, k.row),
                    it.mutation.since_ts,
                ),
            )
            return [self._prewrite_failure(k, records[0], 0) if records else None]
        # Columns unzipped in C (zip, itemgetter): this runs for every cell written.
        starts, primaries, ttls, mutations = zip(*items, strict=True)
        keys, kinds, values, sinces = zip(*mutations, strict=True)
        tables, rows, columns = zip(*keys, strict=True)
        hashes = list(map(row_hash, tables, rows))
        order = sorted(range(len(items)), key=hashes.__getitem__)  # row-lock order
        pick = _picker(order)
        ptables, prows, pcols = zip(*pick(primaries), strict=True)
        many = len(set(keys)) == len(keys)  # distinct cells
        shared = _one_if_same if many else _each
        args = (
            shared(pick(starts)),
            shared(list(ptables)),
            shared(list(prows)),
            shared(list(pcols)),
            shared(pick(ttls)),
            shared(pick(tables)),
            pick(rows),
            pick(columns),
            shared(list(map(int, pick(kinds)))),
            pick(values),
            pick(hashes),
            # Both functions read one element as every cell's: the common case (0, no READ
            # COMMITTED statement) costs one element whichever function runs.
            _one_if_same(pick(sinces)),
        )
        statement = _PREWRITE_MANY if many else _PREWRITE_EACH
        records = await self._call(
            "prewrite", self._shards[shard], lambda conn: conn.fetch(statement, *args)
        )
        results: list[PrewriteFailure | None] = [None] * len(items)
        for r in records:
            i = order[r[0] - 1]
            results[i] = self._prewrite_failure(keys[i], r)
        return results

    @staticmethod
    def _prewrite_failure(key: CellKey, r: asyncpg.Record, at: int = 1) -> PrewriteFailure:
        """A failure from a result row whose status code is at column ``at``."""
        status = _PREWRITE_STATUS[r[at]]
        if status in (PrewriteStatus.LOCKED, PrewriteStatus.DUPLICATE):
            return PrewriteFailure(key, status, lock=_lock_info(key, r, at + 2))
        return PrewriteFailure(key, status, conflict_ts=r[at + 1])

    async def commit(
        self, start_ts: int, commit_ts: int, keys: Sequence[CellKey]
    ) -> list[CommitFailure]:
        if len(keys) == 1:
            k = keys[0]
            shard = self.shard_of(k.table, k.row)
            item = _CommitItem(start_ts, commit_ts, k)
            failure = await self._shards[shard].commits.submit(item)
            return [failure] if failure is not None else []

        return await self._commit_items([_CommitItem(start_ts, commit_ts, k) for k in keys])

    async def _commit_with_primary(
        self, start_ts: int, commit_ts: int, keys: Sequence[CellKey]
    ) -> list[CommitFailure]:
        if len(keys) == 1:
            return await self.commit(start_ts, commit_ts, keys)
        shard = self._shards[self.shard_of(keys[0].table, keys[0].row)]
        results = await shard.primary_commits.submit_group(
            [_CommitItem(start_ts, commit_ts, k) for k in keys]
        )
        return [f for f in results if f is not None]

    async def commit_batch(self, requests: Sequence[CommitRequest]) -> list[CommitFailure]:
        return await self._commit_items(
            [_CommitItem(r.start_ts, r.commit_ts, k) for r in requests for k in r.keys]
        )

    async def _commit_items(self, items: list[_CommitItem]) -> list[CommitFailure]:
        """Commit cells of any transactions: a statement per shard and chunk, in parallel."""
        results = await _all(
            [
                self._shards[shard].commits.submit_group([items[i] for i in idx])
                for shard, shard_chunks in self._group([it.key for it in items]).items()
                for idx in shard_chunks
            ]
        )
        return [f for part in results for f in part if f is not None]

    async def _commit_cells(
        self, shard: int, items: list[_CommitItem], *, guard: bool = False
    ) -> list[CommitFailure | None]:
        """Commit cells of one shard (of one transaction or several) in one statement;
        ``guard``: each only with its primary (primaries and their secondaries: their locks are
        all there, so the cells are distinct)."""
        if len(items) == 1 and not guard:
            it = items[0]
            k = it.key
            code = await self._call(
                "commit",
                self._shards[shard],
                lambda conn: conn.fetchval(
                    _COMMIT_ONE,
                    it.start_ts,
                    it.commit_ts,
                    k.table,
                    k.row,
                    k.column,
                    row_hash(k.table, k.row),
                ),
            )
            return [CommitFailure(k, _COMMIT_STATUS[code]) if code else None]
        starts, commits, keys = zip(*items, strict=True)
        tables, rows, columns = zip(*keys, strict=True)
        hashes = list(map(row_hash, tables, rows))
        order = sorted(range(len(items)), key=hashes.__getitem__)  # row-lock order
        pick = _picker(order)
        many = guard or len(set(keys)) == len(keys)  # distinct cells
        shared = _one_if_same if many else _each
        args = (
            shared(pick(starts)),
            shared(pick(commits)),
            shared(pick(tables)),
            pick(rows),
            pick(columns),
            pick(hashes),
        )
        statement = _COMMIT_GUARDED if guard else _COMMIT_MANY if many else _COMMIT_EACH
        records = await self._call(
            "commit", self._shards[shard], lambda conn: conn.fetch(statement, *args)
        )
        results: list[CommitFailure | None] = [None] * len(items)
        for r in records:
            if r[1]:
                i = order[r[0] - 1]
                results[i] = CommitFailure(keys[i], _COMMIT_STATUS[r[1]])
        return results

    async def rollback(
        self, start_ts: int, keys: Sequence[CellKey], *, leave_marker: bool
    ) -> list[CellKey]:
        async def run(conn: asyncpg.Connection, idx: list[int]) -> list[CellKey]:
            records = await conn.fetch(
                _ROLLBACK, start_ts, leave_marker, *self._key_arrays(keys, idx)
            )
            return [keys[idx[r[0] - 1]] for r in records]

        return await self._per_chunk("rollback", keys, run)

    async def read(self, ts: int, keys: Sequence[CellKey]) -> list[CellRead]:
        if len(keys) == 1:
            k = keys[0]
            shard = self.shard_of(k.table, k.row)
            result = await self._shards[shard].reads.submit((k, ts))
            if isinstance(result, SnapshotTooOld):
                raise result
            return [result]
        if len(self._shards) == 1:  # no grouping by shard
            return _raise_too_old(await self._shards[0].reads.submit_group([(k, ts) for k in keys]))
        results: list[CellRead | SnapshotTooOld | None] = [None] * len(keys)
        by_shard: dict[int, list[int]] = defaultdict(list)
        for i, k in enumerate(keys):
            by_shard[self.shard_of(k.table, k.row)].append(i)

        async def run(shard: int, idx: list[int]) -> None:
            cells = [(keys[i], ts) for i in idx]
            reads = await self._shards[shard].reads.submit_group(cells)
            for i, result in zip(idx, reads, strict=True):
                results[i] = result

        await asyncio.gather(*(run(s, idx) for s, idx in by_shard.items()))
        return _raise_too_old(results)  # type: ignore[arg-type]

    async def _read_cells(
        self, shard: int, items: list[tuple[CellKey, int]]
    ) -> list[CellRead | SnapshotTooOld]:
        """Read cells of one shard, each at its own timestamp, in one statement. A cell read
        below the safe point gets an error of its own, so it fails only its own reader."""
        keys, ts = zip(*items, strict=True)
        if len(keys) == 1:
            k = keys[0]
            record = await self._call(
                "read",
                self._shards[shard],
                lambda conn: conn.fetchrow(_READ_ONE, k.table, k.row, k.column, ts[0]),
            )
            assert record is not None
            if ts[0] < record[9]:
                return [SnapshotTooOld(ts[0], record[9])]
            return [_read_result(k, record, 0)]
        tables, rows, cols = map(list, zip(*keys, strict=True))
        first = keys[0]
        if (
            tables.count(first.table) == len(keys)
            and rows.count(first.row) == len(keys)
            and ts.count(ts[0]) == len(ts)
        ):
            records = await self._call(
                "read",
                self._shards[shard],
                lambda conn: conn.fetch(_READ_ROW, first.table, first.row, cols, ts[0]),
            )
        else:
            tbl = _one_if_same(tables)
            stamps = _one_if_same(list(ts))
            records = await self._call(
                "read",
                self._shards[shard],
                lambda conn: conn.fetch(_READ_MANY, tbl, rows, cols, stamps),
            )
        found = {r[0]: r for r in records}  # by position, from 1
        safe_point = found.pop(0)[7]  # the row of _SAFE_POINT_ROW
        return [
            SnapshotTooOld(t, safe_point)
            if t < safe_point
            else (CellRead(k, None) if (r := found.get(i)) is None else _read_result(k, r, 1))
            for i, (k, t) in enumerate(zip(keys, ts, strict=True), 1)
        ]

    async def scan(
        self,
        ts: int,
        table: str,
        start: bytes | None,
        end: bytes | None,
        columns: Sequence[str] | None = None,
        *,
        page_size: int = 1000,
        reverse: bool = False,
    ) -> AsyncIterator[CellRead]:
        spec = _ScanSpec(ts, table, start, end, _column_list(columns), page_size, reverse)
        streams = [self._scan_shard(s, spec) for s in self._shards]
        if len(streams) == 1:
            async for cell in streams[0]:
                yield cell
            return
        async for cell in _merge(streams, reverse):
            yield cell

    async def _scan_shard(self, shard: _Shard, spec: _ScanSpec) -> AsyncIterator[CellRead]:
        cursor: tuple[bytes, str] | None = None
        while True:
            records = await self._scan_records(shard, spec, cursor)
            cells, cursor = _scan_page(spec, records)
            for cell in cells:
                yield cell
            if cursor is None:
                return

    async def _scan_records(
        self, shard: _Shard, spec: _ScanSpec, cursor: tuple[bytes, str] | None
    ) -> list[asyncpg.Record]:
        """One page of a shard's scan: write records and locks after the cursor, in the scan's
        direction (one round trip); SnapshotTooOld if GC has passed the scan's ts."""
        args: list[Any] = [spec.table, spec.columns, spec.ts, spec.page_size]
        near, far = (spec.end, spec.start) if spec.reverse else (spec.start or b"", spec.end)
        if cursor is not None:
            args += cursor
        elif near is not None:
            args.append(near)
        if far is not None:
            args.append(far)
        shape = (cursor is not None, cursor is not None or near is not None, far is not None)
        sql = _SCAN_SQL[(*shape, spec.reverse)]
        records = await self._call("scan", shard, lambda conn: conn.fetch(sql, *args))
        safe_point = next(r[_SCAN_START_TS] for r in records if r[_SCAN_IS_LOCK] is None)
        if spec.ts < safe_point:
            raise SnapshotTooOld(spec.ts, safe_point)
        return records

    async def scan_rows(
        self,
        ts: int,
        table: str,
        start: bytes | None,
        end: bytes | None,
        columns: Sequence[str] | None = None,
        *,
        page_size: int = 1000,
        prefetch: bool = False,
        reverse: bool = False,
    ) -> AsyncIterator[list[RowRead]]:
        spec = _ScanSpec(ts, table, start, end, _column_list(columns), page_size, reverse)
        streams = [self._scan_shard_rows(s, spec, prefetch) for s in self._shards]
        if len(streams) == 1:
            async for page in streams[0]:
                yield page
            return
        async for page in _merge_row_pages(streams, page_size, reverse):
            yield page

    async def _scan_shard_rows(
        self, shard: _Shard, spec: _ScanSpec, prefetch: bool
    ) -> AsyncIterator[list[RowRead]]:
        """One shard's rows, a page per round trip. The last row of a page may go on in the
        next page, so it is held back and completed from there. With ``prefetch``, the next
        page is asked for before this one is handed on, so Postgres works on it meanwhile."""

        async def fetch(
            cursor: tuple[bytes, str] | None,
        ) -> tuple[list[RowRead], tuple[bytes, str] | None]:
            return _rows_of_page(spec, await self._scan_records(shard, spec, cursor))

        held: RowRead | None = None
        async for rows, cursor in _pages(fetch, None, operator.itemgetter(1), prefetch):
            if held is not None:
                if rows and rows[0].row == held.row:
                    rows[0] = _joined(held, rows[0])
                else:
                    rows.insert(0, held)
                held = None
            if cursor is not None and rows:
                held = rows.pop()
            if rows:
                yield rows

    async def scan_packed(
        self,
        ts: int,
        table: str,
        start: bytes | None,
        end: bytes | None,
        columns: Sequence[str],
        *,
        page_size: int = 4096,
        prefetch: bool = False,
    ) -> AsyncIterator[packed.PackedCells | list[RowRead]]:
        """All shards at once, a page per round trip each, each page handed on as it comes
        (see the base class)."""
        names = tuple(columns)
        if not names or len(names) > packed.MAX_COLUMNS:
            async for page in super().scan_packed(
                ts, table, start, end, names, page_size=page_size, prefetch=prefetch
            ):
                yield page
            return
        # A full page ends inside its last row, which the next page reads again: a page must
        # hold more cells than one row can have.
        page_size = max(page_size, len(names) + 1)
        streams = [
            self._scan_shard_packed(shard, ts, table, start, end, names, page_size, prefetch)
            for shard in self._shards
        ]
        async for page in _as_they_come(streams):
            yield page

    async def _scan_shard_packed(
        self,
        shard: _Shard,
        ts: int,
        table: str,
        start: bytes | None,
        end: bytes | None,
        columns: tuple[str, ...],
        page_size: int,
        prefetch: bool,
    ) -> AsyncIterator[packed.PackedCells | list[RowRead]]:
        smallest = len(columns) + 1  # more cells than a row has (see scan_packed)

        def fetch(cursor: tuple[bytes, int]) -> Awaitable[_PackedPage]:
            at, cells = cursor
            return self._packed_page(shard, ts, table, at, end, columns, cells, smallest)

        def after(page: _PackedPage) -> tuple[bytes, int] | None:
            if page.resume is None:
                return None
            return page.resume, _next_page_cells(page, smallest, page_size)

        at = start or b""
        first = (at, max(smallest, min(page_size, PACKED_FIRST_PAGE_CELLS)))
        async for page in _pages(fetch, first, after, prefetch):
            if page.locked:
                upto = page.resume if page.resume is not None else end
                spec = _ScanSpec(ts, table, at, upto, list(columns), page.asked, False)
                async for rows in self._scan_shard_rows(shard, spec, False):
                    yield rows
            elif page.cells.count:
                yield page.cells
            if page.resume is not None:
                at = page.resume

    async def _packed_page(
        self,
        shard: _Shard,
        ts: int,
        table: str,
        at: bytes,
        end: bytes | None,
        columns: tuple[str, ...],
        cells: int,
        smallest: int,
    ) -> _PackedPage:
        """One page of a shard's packed scan from row ``at`` on, of up to ``cells`` cells (one
        round trip). A page whose values outgrow what one Postgres value may hold (1 GB) is
        asked for again, 16 times smaller, down to ``smallest`` cells."""
        while True:
            args = (table, at, end, ts, list(columns), cells)
            try:
                r = await self._call(
                    "scan", shard, lambda conn, a=args: conn.fetchrow(_SCAN_PACKED, *a)
                )
                break
            except StoreError as exc:
                too_large = isinstance(exc.__cause__, asyncpg.ProgramLimitExceededError)
                if not too_large or cells <= smallest:
                    raise
                cells = max(smallest, cells // 16)
        if ts < r["safe_point"]:
            raise SnapshotTooOld(ts, r["safe_point"])
        page = packed.PackedCells(r["cells"], r["keys"], r["vals"], r["layout"])
        size = len(page.keys) + len(page.values) + len(page.layout)
        resume: bytes | None = None
        if page.count == cells:
            page, resume = packed.split_last_row(page)
        lock = r["first_lock"]
        locked = lock is not None and (resume is None or lock < resume)
        return _PackedPage(page, resume, locked, cells, size)

    async def check_txn_status(
        self, primary: CellKey, start_ts: int, now_ts: int, *, rollback_if_missing: bool
    ) -> TxnStatus:
        shard = self._shards[self.shard_of(primary.table, primary.row)]
        r = await self._call(
            "check_txn_status",
            shard,
            lambda conn: conn.fetchrow(
                _CHECK_TXN_STATUS,
                primary.table,
                primary.row,
                primary.column,
                row_hash(primary.table, primary.row),
                start_ts,
                now_ts,
                rollback_if_missing,
            ),
        )
        assert r is not None
        state = _TXN_STATE[r[0]]
        if state == TxnState.LOCKED:
            lock = LockInfo(primary, start_ts, CellKey(r[2], r[3], r[4]), r[5], _kind(r[6]))
            return TxnStatus(state, lock=lock)
        return TxnStatus(state, commit_ts=r[1])

    async def heartbeat(self, primary: CellKey, start_ts: int, ttl_ms: int) -> bool:
        shard = self._shards[self.shard_of(primary.table, primary.row)]
        result = await self._call(
            "heartbeat",
            shard,
            lambda conn: conn.fetchval(
                _HEARTBEAT,
                primary.table,
                primary.row,
                primary.column,
                row_hash(primary.table, primary.row),
                start_ts,
                ttl_ms,
            ),
        )
        return result is not None

    async def scan_locks(self, max_start_ts: int, limit: int = 1000) -> list[LockInfo]:
        async def one(shard: _Shard) -> list[LockInfo]:
            records = await self._call(
                "scan_locks", shard, lambda conn: conn.fetch(_SCAN_LOCKS, max_start_ts, limit)
            )
            return [_lock_info(CellKey(r[0], r[1], r[2]), r, 3) for r in records]

        per_shard = await asyncio.gather(*(one(s) for s in self._shards))
        return sorted((lk for part in per_shard for lk in part), key=lambda lk: lk.key)[:limit]

    async def set_gc_safe_point(self, safe_point: int) -> int:
        points = await asyncio.gather(
            *(
                self._call(
                    "set_gc_safe_point", s, lambda conn: conn.fetchval(_SET_SAFE_POINT, safe_point)
                )
                for s in self._shards
            )
        )
        return min(points)

    async def gc(self, safe_point: int, *, max_records: int | None = None) -> GcResult:
        results = await asyncio.gather(
            *(self._gc_shard(s, safe_point, max_records) for s in self._shards)
        )
        return sum(results, GcResult())

    async def _gc_shard(self, shard: _Shard, safe_point: int, max_records: int | None) -> GcResult:
        """Chunks of the shard's sweep until ``max_records`` (or, with None, the whole
        shard from its first cell)."""
        if max_records is None:
            shard.gc_cursor = None
        total = GcResult()
        seen = 0
        while max_records is None or seen < max_records:
            after = shard.gc_cursor or _GC_START
            r = await self._call(
                "gc",
                shard,
                lambda conn, a=after: conn.fetchrow(_GC_CHUNK, safe_point, *a, GC_CHUNK_RECORDS),
            )
            total = total + GcResult(r[0], r[1])
            seen += r[2]
            if r[2] < GC_CHUNK_RECORDS:
                shard.gc_cursor = None  # the sweep is done: the next one starts over
                break
            shard.gc_cursor = (r[3], r[4], r[5])
        return total

    async def purge_table(self, table: str) -> int:
        async def one(shard: _Shard) -> int:
            total = 0
            while True:
                most, rows = await self._call(
                    "purge_table",
                    shard,
                    lambda conn: conn.fetchrow(_PURGE_TABLE, table, PURGE_ROWS),
                )
                total += rows
                if most < PURGE_ROWS:
                    return total

        return sum(await asyncio.gather(*(one(s) for s in self._shards)))

    # -- distributed transactions, change streams, partitioning ----------------------------

    async def commit_locks(self, start_ts: int, commit_ts: int) -> int:
        statements = (_COMMIT_LOCKS, _COMMIT_LOCKS_UPTO)
        return await self._move_locks("commit_locks", statements, start_ts, commit_ts)

    async def rollback_locks(self, start_ts: int) -> int:
        statements = (_ROLLBACK_LOCKS, _ROLLBACK_LOCKS_UPTO)
        return await self._move_locks("rollback_locks", statements, start_ts)

    async def _move_locks(self, op: str, statements: tuple[str, str], *args: int) -> int:
        """Run a chunked bulk statement on every shard (in parallel). A shard's locks of the
        transaction (``args[0]``) are cut into up to BULK_MOVE_PARTS key ranges, moved at once;
        each range's chunks go in turn, after the cursor the previous one returned, until none
        is returned. Each statement is its own Postgres transaction, so it holds about
        LOCKS_PER_STATEMENT advisory locks."""
        unbounded, bounded = statements

        async def part(
            shard: _Shard, after: tuple[str, bytes], upto: tuple[str, bytes] | None
        ) -> int:
            total = 0
            cursor: tuple[str, bytes] | None = after
            while cursor is not None:
                if upto is None:
                    sql, extra = unbounded, cursor
                else:
                    sql, extra = bounded, (*cursor, *upto)
                r = await self._call(
                    op,
                    shard,
                    lambda conn, sql=sql, x=extra: conn.fetchrow(
                        sql, *args, LOCKS_PER_STATEMENT, *x
                    ),
                )
                assert r is not None
                total += r["moved"]
                cursor = None if r["next_tbl"] is None else (r["next_tbl"], r["next_row"])
            return total

        async def one(shard: _Shard) -> int:
            cuts = await self._lock_splits(shard, args[0])
            starts = [_BEFORE_EVERY_LOCK, *cuts]
            ends: list[tuple[str, bytes] | None] = [*cuts, None]
            moved = await asyncio.gather(
                *(part(shard, a, b) for a, b in zip(starts, ends, strict=True))
            )
            return sum(moved)

        return sum(await asyncio.gather(*(one(s) for s in self._shards)))

    async def _lock_splits(self, shard: _Shard, start_ts: int) -> list[tuple[str, bytes]]:
        """Rows that cut a transaction's locks on a shard into about equal key ranges; none
        when it has too few locks there for parallel moves to pay (one round trip)."""
        records = await self._call(
            "lock_splits",
            shard,
            lambda conn: conn.fetch(
                _LOCK_SPLITS, start_ts, BULK_MOVE_PARTS, BULK_MOVE_PARTS * LOCKS_PER_STATEMENT
            ),
        )
        return sorted((r["tbl"], r["rkey"]) for r in records)

    async def scan_changes(
        self,
        table: str,
        after_ts: int,
        upto_ts: int,
        *,
        limit: int,
        after: ChangeCursor | None = None,
    ) -> list[Change]:
        if limit <= 0:
            return []
        sql = _SCAN_CHANGES_SQL[after is None]
        args: list[Any] = [table, after_ts, upto_ts, limit]
        if after is not None:
            args += [after.commit_ts, after.row, after.column]
        per_shard = await self._on_every_shard("scan_changes", lambda conn: conn.fetch(sql, *args))
        changes: list[list[Change]] = []
        for records in per_shard:
            safe_point = next(r["start_ts"] for r in records if r["meta"])
            if after_ts < safe_point:
                raise SnapshotTooOld(after_ts, safe_point)
            changes.append(
                [
                    Change(
                        CellKey(table, r["rkey"], r["col"]),
                        r["commit_ts"],
                        r["start_ts"],
                        _kind(r["kind"]),
                        r["value"] if _kind(r["kind"]) == WriteKind.PUT else None,
                    )
                    for r in records
                    if not r["meta"]
                ]
            )
        # Each shard's list is in order and holds its first `limit`: merging them and cutting
        # at `limit` gives the global first `limit`.
        merged = heapq.merge(*changes, key=lambda c: c.cursor)
        return list(itertools.islice(merged, limit))

    async def first_change(
        self,
        table: str,
        ranges: Sequence[RowRange],
        after_ts: int,
        upto_ts: int,
        own_start_ts: int,
    ) -> CellKey | None:
        if not ranges:
            return None
        starts = [r.start for r in ranges]
        ends = [r.end for r in ranges]
        per_shard = await self._on_every_shard(
            "first_change",
            lambda conn: conn.fetchrow(
                _FIRST_CHANGE, table, starts, ends, after_ts, upto_ts, own_start_ts
            ),
        )
        for r in per_shard:
            if r is not None:
                return CellKey(table, r["rkey"], r["col"])
        return None

    async def oldest_lock(self, table: str) -> LockInfo | None:
        per_shard = await self._on_every_shard(
            "oldest_lock", lambda conn: conn.fetchrow(_OLDEST_LOCK, table)
        )
        locks = [
            LockInfo(
                CellKey(table, r["rkey"], r["col"]),
                r["start_ts"],
                CellKey(r["primary_tbl"], r["primary_rkey"], r["primary_col"]),
                r["ttl_ms"],
                _kind(r["kind"]),
            )
            for r in per_shard
            if r is not None
        ]
        return min(locks, key=lambda lock: lock.start_ts, default=None)

    async def sample_row_keys(self, table: str, n: int) -> list[bytes]:
        if n < 2:
            return []
        per_shard = await self._on_every_shard(
            "sample_row_keys",
            lambda conn: conn.fetchrow(_SAMPLE_ROW_KEYS, table, n, SAMPLE_EXACT_CELLS, SAMPLE_ROWS),
        )
        return merge_split_points(
            [(list(r["points"] or []), r["row_keys"] or 0) for r in per_shard if r is not None],
            n,
        )

    # -- notifications (observers) ------------------------------------------------------------

    async def _on_every_shard(
        self, op: str, fn: Callable[[asyncpg.Connection], Awaitable[T]]
    ) -> list[T]:
        """One statement on every shard, in parallel; results in shard order."""
        return list(await asyncio.gather(*(self._call(op, s, fn) for s in self._shards)))

    async def watch(self, observer: str, table: str, columns: Sequence[str]) -> None:
        cols = list(columns)
        await self._on_every_shard(
            "watch", lambda conn: conn.execute(_WATCH, table, observer, cols)
        )

    async def unwatch(self, observer: str, table: str | None = None) -> None:
        # Watches first, committed on every shard, so that new commits stop notifying before
        # the observer's notifications are dropped.
        async def drop_watches(shard: _Shard) -> None:
            sql = _UNWATCH_AND_COUNTERS if table is None and shard.index == 0 else _UNWATCH
            await self._call("unwatch", shard, lambda conn: conn.execute(sql, observer, table))

        await asyncio.gather(*(drop_watches(s) for s in self._shards))
        if table is None:
            await self._until_short("unwatch", _DROP_NOTIFICATIONS, observer)

    async def list_watches(self) -> list[Watch]:
        # Every shard, not only the first: after a watch or unwatch that failed on some shard,
        # this shows what any shard still does (repeating the call repairs it).
        per_shard = await self._on_every_shard(
            "list_watches", lambda conn: conn.fetch(_LIST_WATCHES)
        )
        watches = {Watch(r[0], r[1], r[2]) for records in per_shard for r in records}
        return sorted(watches, key=lambda w: (w.table, w.column, w.observer))

    async def find_notifications(
        self,
        hash_from: int,
        hash_to: int,
        *,
        now_ms: int,
        limit: int,
        after: NotifyCursor | None = None,
    ) -> list[Notification]:
        if limit <= 0 or hash_from > hash_to:
            return []
        cursor = (
            (None, None, None, None)
            if after is None
            else (after.hash, after.observer, after.table, after.row)
        )
        args = (hash_from, hash_to, now_ms, limit, *cursor)
        per_shard = await self._on_every_shard(
            "find_notifications", lambda conn: conn.fetch(_FIND_NOTIFICATIONS, *args)
        )
        # Each shard's list is in order and holds its first `limit`: merging them and cutting
        # at `limit` gives the global first `limit`.
        found = heapq.merge(
            *(
                [Notification(r[0], r[1], r[2], r[3], r[4], r[5]) for r in records]
                for records in per_shard
            ),
            key=_notify_order,
        )
        return list(itertools.islice(found, limit))

    async def clear_notifications(self, items: Sequence[ClearNotification]) -> None:
        fields = ("observer", "table", "row", "below_ts")
        await self._notify_batch("clear_notifications", _CLEAR_NOTIFICATIONS, items, fields)

    async def defer_notifications(self, items: Sequence[DeferNotification]) -> None:
        fields = ("observer", "table", "row", "ts", "retry_at_ms", "error", "park")
        await self._notify_batch("defer_notifications", _DEFER_NOTIFICATIONS, items, fields)

    async def _notify_batch(
        self,
        op: str,
        sql: str,
        items: Sequence[ClearNotification] | Sequence[DeferNotification],
        fields: Sequence[str],
    ) -> None:
        """One statement per chunk of the items' rows: an array per field, then the rows'
        hashes (the function takes their advisory locks). Nothing for no items."""

        async def run(conn: asyncpg.Connection, idx: list[int]) -> list[None]:
            chunk = [items[i] for i in idx]
            arrays = [[getattr(it, f) for it in chunk] for f in fields]
            await conn.execute(sql, *arrays, [row_hash(it.table, it.row) for it in chunk])
            return []

        if items:
            keys = [CellKey(it.table, it.row, "") for it in items]
            await self._per_chunk(op, keys, run)

    async def retry_parked(self, observer: str) -> int:
        return await self._until_short("retry_parked", _RETRY_PARKED, observer)

    async def _until_short(self, op: str, sql: str, observer: str) -> int:
        """Repeat a bulk statement over up to NOTIFY_BULK_ROWS of the observer's notifications
        on every shard (in parallel) until it handles fewer; how many it handled in all."""

        async def one(shard: _Shard) -> int:
            total = 0
            while True:
                n = await self._call(
                    op, shard, lambda conn: conn.fetchval(sql, observer, NOTIFY_BULK_ROWS)
                )
                total += n
                if n < NOTIFY_BULK_ROWS:
                    return total

        return sum(await asyncio.gather(*(one(s) for s in self._shards)))

    async def parked_notifications(
        self, observer: str | None = None, limit: int = 1000
    ) -> list[ParkedNotification]:
        if limit <= 0:
            return []
        per_shard = await self._on_every_shard(
            "parked_notifications",
            lambda conn: conn.fetch(_PARKED_NOTIFICATIONS, observer, limit),
        )
        parked = heapq.merge(
            *([ParkedNotification(*r) for r in records] for records in per_shard),
            key=lambda p: (p.ts, p.observer, p.table, p.row),
        )
        return list(itertools.islice(parked, limit))

    async def notification_summary(self) -> list[NotifySummary]:
        per_shard = await self._on_every_shard(
            "notification_summary", lambda conn: conn.fetch(_NOTIFY_SUMMARY)
        )
        totals: dict[str, NotifySummary] = {}
        for records in per_shard:
            for observer, pending, parked, oldest in records:
                prev = totals.get(observer)
                if prev is not None:
                    pending += prev.pending
                    parked += prev.parked
                    if oldest is None or (prev.oldest_ts is not None and prev.oldest_ts < oldest):
                        oldest = prev.oldest_ts
                totals[observer] = NotifySummary(observer, pending, parked, oldest)
        return [totals[o] for o in sorted(totals)]

    async def add_observer_counters(self, deltas: Sequence[ObserverCounters]) -> None:
        if not deltas:
            return
        # One row per observer (an upsert may not touch a row twice), in key order (two
        # workers' upserts lock the rows in the same order).
        rows = _combine_counters(deltas)
        args = (
            [c.observer for c in rows],
            [c.runs for c in rows],
            [c.commits for c in rows],
            [c.conflicts for c in rows],
            [c.failures for c in rows],
            [c.last_error for c in rows],
            [c.last_error_ms if c.last_error is not None else None for c in rows],
        )
        await self._call(
            "add_observer_counters",
            self._shards[0],
            lambda conn: conn.execute(_ADD_OBSERVER_COUNTERS, *args),
        )

    async def observer_counters(self) -> list[ObserverCounters]:
        records = await self._call(
            "observer_counters", self._shards[0], lambda conn: conn.fetch(_OBSERVER_COUNTERS)
        )
        return [ObserverCounters(*r) for r in records]

    async def wait_for_notifications(self, timeout_s: float) -> bool:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        if not self._notified.is_set():
            await self._listen(deadline)
        try:
            async with asyncio.timeout_at(deadline):
                await self._notified.wait()
        except TimeoutError:
            return False
        self._notified.clear()
        return True

    async def _listen(self, deadline: float) -> None:
        """Open the LISTEN connections that are missing or dead. A shard that cannot be reached
        before ``deadline`` is retried on the next call; meanwhile the others still wake us."""
        async with self._listen_lock:
            missing = [
                s
                for s in self._shards
                if self._listeners[s.index] is None or self._listeners[s.index].is_closed()
            ]
            if missing:
                await asyncio.gather(*(self._open_listener(s, deadline) for s in missing))

    async def _open_listener(self, shard: _Shard, deadline: float) -> None:
        remaining = min(self._timeout, deadline - asyncio.get_running_loop().time())
        if remaining <= 0:
            return
        self.stats.round_trips["listen"] += 1
        conn: asyncpg.Connection | None = None
        listening = False
        try:
            async with asyncio.timeout(remaining):
                conn = await asyncpg.connect(
                    shard.dsn,
                    timeout=remaining,
                    server_settings={"application_name": "percolator-listen"},
                )
                await conn.add_listener(NOTIFY_CHANNEL, self._on_notify)
                listening = True
        except (TimeoutError, OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
            pass  # a hint only: the caller polls anyway, and the next call tries again
        finally:
            # Also on cancellation (the worker cancels a wait when woken otherwise): keep the
            # connection only if it listens, never leak a half-open one.
            if listening:
                self._listeners[shard.index] = conn
            elif conn is not None:
                conn.terminate()

    def _on_notify(self, _conn: object, _pid: int, _channel: str, _payload: str) -> None:
        self._notified.set()

    async def close(self) -> None:
        listeners = [c for c in self._listeners if c is not None]
        self._listeners = [None] * len(self._shards)
        await asyncio.gather(
            *(c.close(timeout=self._timeout) for c in listeners if not c.is_closed()),
            return_exceptions=True,
        )
        await asyncio.gather(*(s.pool.close() for s in self._shards), return_exceptions=True)
        await asyncio.gather(*(c.close() for c in self._lock_conns), return_exceptions=True)


def _notify_order(n: Notification) -> tuple[int, str, str, bytes]:
    """The order of notifications: the workers' scan index (hash, observer, tbl, rkey)."""
    return (n.hash, n.observer, n.table, n.row)


def _combine_counters(deltas: Sequence[ObserverCounters]) -> list[ObserverCounters]:
    """Deltas summed per observer, sorted by observer; the later error wins."""
    totals: dict[str, ObserverCounters] = {}
    for d in deltas:
        prev = totals.get(d.observer)
        totals[d.observer] = d if prev is None else prev.plus(d)
    return [totals[o] for o in sorted(totals)]


_SCAN_IS_LOCK, _SCAN_RKEY, _SCAN_COL, _SCAN_KIND, _SCAN_VALUE, _SCAN_START_TS = 0, 1, 2, 4, 5, 6
"""Positions of the columns of :func:`_scan_sql`'s records (read by index: the row scan's
per-cell work is the cost of a bulk read)."""
_SCAN_POSITION = operator.itemgetter(_SCAN_RKEY, _SCAN_COL)
_PUT = int(WriteKind.PUT)
_DELETE = int(WriteKind.DELETE)


@dataclass(frozen=True)
class _ScanSpec:
    """What a scan reads, the same for each of its shards and pages."""

    ts: int
    table: str
    start: bytes | None
    end: bytes | None
    columns: list[str] | None
    page_size: int
    reverse: bool
    """Descending (row, column) order: pages walk from the range's end toward its start."""


def _column_list(columns: Sequence[str] | None) -> list[str] | None:
    return list(columns) if columns is not None else None


class _Descending(Generic[K]):
    """A sort key that orders its value backward: what heaps and bisections of a descending
    scan compare, so that they share the ascending scan's code."""

    __slots__ = ("value",)

    def __init__(self, value: K) -> None:
        self.value = value

    def __lt__(self, other: _Descending[K]) -> bool:
        return other.value < self.value  # type: ignore[operator]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Descending) and self.value == other.value

    __hash__ = None  # type: ignore[assignment]


def _in_scan_order(reverse: bool) -> Callable[[Any], Any]:
    """The sort key that orders values as a scan in this direction yields them."""
    return _Descending if reverse else _as_is


def _as_is(value: T) -> T:
    return value


def _split_page(
    records: list[asyncpg.Record], spec: _ScanSpec
) -> tuple[list[asyncpg.Record], list[asyncpg.Record], tuple[bytes, str] | None]:
    """A scan page's write records and locks, each in the scan's (row, column) order and cut
    at the page's bound, and that bound: the cursor after the page, None at the end of the
    range.

    Writes and locks are each limited to the page size; where one list was cut short, cells
    past its last key (in the scan's direction) are not yet known, so the page ends at the
    nearer of those keys and the next starts after it.
    """
    writes = [r for r in records if r[_SCAN_IS_LOCK] is False]
    locks = [r for r in records if r[_SCAN_IS_LOCK]]
    if not _in_order(reversed(writes) if spec.reverse else writes):
        # Each list comes out of Postgres in the scan's order, but a plan is free to
        # interleave UNION ALL's branches: sort when the check finds it did.
        writes.sort(key=_SCAN_POSITION, reverse=spec.reverse)
    locks.sort(key=_SCAN_POSITION, reverse=spec.reverse)
    order = _in_scan_order(spec.reverse)
    full = [_SCAN_POSITION(rs[-1]) for rs in (writes, locks) if len(rs) >= spec.page_size]
    bound: tuple[bytes, str] | None = min(full, key=order) if full else None
    if bound is not None:

        def position(r: asyncpg.Record) -> Any:
            return order(_SCAN_POSITION(r))

        writes = writes[: bisect.bisect_right(writes, order(bound), key=position)]
        locks = locks[: bisect.bisect_right(locks, order(bound), key=position)]
    return writes, locks, bound


def _scan_lock(table: str, r: asyncpg.Record) -> LockInfo:
    """The lock of a scan record whose ``is_lock`` is true."""
    return LockInfo(
        CellKey(table, r[_SCAN_RKEY], r[_SCAN_COL]),
        r["start_ts"],
        CellKey(r["primary_tbl"], r["primary_rkey"], r["primary_col"]),
        r["ttl_ms"],
        _kind(r[_SCAN_KIND]),
    )


def _put_value(r: asyncpg.Record) -> bytes | None:
    """The value of a write record: None for a DELETE; an unknown kind raises."""
    kind = r[_SCAN_KIND]
    if kind == _PUT:
        return r[_SCAN_VALUE]
    if kind != _DELETE:
        _kind(kind)  # raises: an unknown record kind
    return None


def _scan_page(
    spec: _ScanSpec, records: list[asyncpg.Record]
) -> tuple[list[CellRead], tuple[bytes, str] | None]:
    """A scan page's cells up to its bound (a lock hides the value of its cell), in the
    scan's order, and the cursor after it."""
    table = spec.table
    writes, locks, bound = _split_page(records, spec)
    cells: dict[tuple[bytes, str], CellRead] = {}
    for r in writes:
        value = _put_value(r)
        if value is not None:
            cells[_SCAN_POSITION(r)] = CellRead(
                CellKey(table, r[_SCAN_RKEY], r[_SCAN_COL]), value, r["commit_ts"]
            )
    for r in locks:
        lock = _scan_lock(table, r)
        cells[_SCAN_POSITION(r)] = CellRead(lock.key, None, lock=lock)
    return [cells[pos] for pos in sorted(cells, reverse=spec.reverse)], bound


async def _pages(
    fetch: Callable[[C], Awaitable[P]], first: C, after: Callable[[P], C | None], prefetch: bool
) -> AsyncIterator[P]:
    """A scan's pages, one round trip each: ``fetch(first)``, then ``fetch`` of the cursor
    ``after(page)`` names, until it names none. With ``prefetch`` (a reader that will take every
    page) the next page is asked for before this one is handed on, so Postgres works on it
    while the caller does."""
    following: asyncio.Future[P] | None = None
    page = await fetch(first)
    try:
        while True:
            cursor = after(page)
            if prefetch and cursor is not None:
                following = asyncio.ensure_future(fetch(cursor))
            yield page
            if cursor is None:
                return
            if following is not None:
                page, following = await following, None
            else:
                page = await fetch(cursor)
    finally:
        if following is not None:
            following.cancel()


class _PackedPage(NamedTuple):
    """A packed scan page as a shard answered it."""

    cells: packed.PackedCells
    resume: bytes | None
    """Where the next page starts (the row the page was cut in); None: the range is done."""
    locked: bool
    """Whether a lock blocks a cell of the page's rows: they must be read as rows."""
    asked: int
    """The cells the page was asked for."""
    size: int
    """Bytes the page came with (its three buffers, before the cut row was taken off)."""


def _next_page_cells(page: _PackedPage, smallest: int, largest: int) -> int:
    """How many cells to ask for after ``page``: about PACKED_PAGE_BYTES at its bytes per
    cell."""
    if page.size == 0:
        return page.asked
    per_cell = page.size / page.asked
    return max(smallest, min(largest, int(PACKED_PAGE_BYTES / per_cell)))


def _rows_of_page(
    spec: _ScanSpec, records: list[asyncpg.Record]
) -> tuple[list[RowRead], tuple[bytes, str] | None]:
    """A scan page's records as rows, in the scan's order, and the cursor after the page
    (None at the end); the row-wise twin of :func:`_scan_page`, with no object per cell."""
    writes, locks, bound = _split_page(records, spec)
    rows: list[RowRead] = []
    row: bytes | None = None
    values: dict[str, bytes] = {}
    for r in writes:
        value = _put_value(r)
        if value is None:
            continue
        if r[_SCAN_RKEY] != row:
            row, values = r[_SCAN_RKEY], {}
            rows.append(RowRead(row, values))
        values[r[_SCAN_COL]] = value
    if locks:
        rows = _with_locks(spec, rows, locks)
    return rows, bound


def _in_order(records: Iterable[asyncpg.Record]) -> bool:
    """Whether the records are in strictly increasing (row, column) order: one comparison of
    columns per cell and of row keys per row, cheaper than sorting."""
    row: bytes | None = None
    col = ""
    for r in records:
        rkey = r[_SCAN_RKEY]
        if rkey != row:
            if row is not None and rkey < row:
                return False
            row, col = rkey, r[_SCAN_COL]
        elif r[_SCAN_COL] <= col:
            return False
        else:
            col = r[_SCAN_COL]
    return True


def _with_locks(spec: _ScanSpec, rows: list[RowRead], locks: list[asyncpg.Record]) -> list[RowRead]:
    """``rows`` with the page's locks added to theirs (a locked row may have no value yet),
    in the scan's order."""
    by_row: dict[bytes, list[LockInfo]] = defaultdict(list)
    for r in locks:
        by_row[r[_SCAN_RKEY]].append(_scan_lock(spec.table, r))
    merged = {row.row: row for row in rows}
    for rkey, infos in by_row.items():
        found = merged.get(rkey)
        values = found.values if found else {}
        for info in infos:
            values.pop(info.key.column, None)  # what the lock's owner may have changed
        merged[rkey] = RowRead(rkey, values, tuple(infos))
    return [merged[k] for k in sorted(merged, reverse=spec.reverse)]


def _joined(first: RowRead, rest: RowRead) -> RowRead:
    """One row whose cells came in two pages."""
    return RowRead(first.row, {**first.values, **rest.values}, (*first.locks, *rest.locks))


async def _as_they_come(streams: list[AsyncIterator[T]]) -> AsyncIterator[T]:
    """The items of all streams, each as soon as its stream yields it (order only within a
    stream). A stream runs ahead of the caller by one item at most. The first error of any
    stream is raised at once and the other streams are stopped; so they are when the caller
    stops early. One stream is iterated directly."""
    if len(streams) == 1:
        async for item in streams[0]:
            yield item
        return
    queue: asyncio.Queue[_Pumped[T]] = asyncio.Queue()

    async def pump(stream: AsyncIterator[T]) -> None:
        taken = asyncio.Semaphore(1)
        try:
            async for item in stream:
                await taken.acquire()  # the caller has taken this stream's previous item
                queue.put_nowait(_Pumped(item, taken, None))
            queue.put_nowait(_Pumped(None, None, None))
        except Exception as exc:
            queue.put_nowait(_Pumped(None, None, exc))

    tasks = [asyncio.ensure_future(pump(stream)) for stream in streams]
    try:
        running = len(tasks)
        while running:
            pumped = await queue.get()
            if pumped.error is not None:
                raise pumped.error
            if pumped.taken is None:
                running -= 1
                continue
            yield pumped.item  # type: ignore[misc]
            pumped.taken.release()
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class _Pumped(NamedTuple, Generic[T]):
    """What a stream of :func:`_as_they_come` hands over: an item (and the semaphore its
    stream waits on until the caller has taken it), its end (neither), or its error."""

    item: T | None
    taken: asyncio.Semaphore | None
    error: Exception | None


async def _merge_row_pages(
    streams: list[AsyncIterator[list[RowRead]]], page_size: int, reverse: bool
) -> AsyncIterator[list[RowRead]]:
    """Merge per-shard pages of rows, each stream in row order (descending with ``reverse``),
    into pages in that order (a row lives on one shard)."""
    order = _in_scan_order(reverse)
    pages: list[list[RowRead]] = await _firsts(streams, [])
    positions: list[int] = [0] * len(streams)
    heap: list[tuple[Any, int]] = [(order(page[0].row), i) for i, page in enumerate(pages) if page]
    heapq.heapify(heap)
    out: list[RowRead] = []
    while heap:
        _, i = heap[0]
        page, at = pages[i], positions[i]
        out.append(page[at])
        at += 1
        if at == len(page):
            page, at = await anext(streams[i], []), 0
            pages[i] = page
        positions[i] = at
        if page:
            heapq.heapreplace(heap, (order(page[at].row), i))
        else:
            heapq.heappop(heap)
        if len(out) >= page_size:
            yield out
            out = []
    if out:
        yield out


async def _firsts(streams: Sequence[AsyncIterator[T]], default: D) -> list[T | D]:
    """The first item of each stream (``default`` for an empty one), asked of all shards at
    once: one round trip of latency, not one per shard. A failure is raised once every shard
    has answered."""
    firsts = await asyncio.gather(
        *(anext(stream, default) for stream in streams), return_exceptions=True
    )
    for first in firsts:
        if isinstance(first, BaseException):
            raise first
    return firsts  # type: ignore[return-value]


async def _merge(streams: list[AsyncIterator[CellRead]], reverse: bool) -> AsyncIterator[CellRead]:
    """Merge per-shard streams that are each in key order (descending with ``reverse``; a row
    lives on one shard)."""
    order = _in_scan_order(reverse)
    heap: list[tuple[Any, int, CellRead]] = []
    for i, first in enumerate(await _firsts(streams, None)):
        if first is not None:
            heap.append((order(first.key), i, first))
    heapq.heapify(heap)
    while heap:
        _, i, cell = heapq.heappop(heap)
        yield cell
        following = await anext(streams[i], None)
        if following is not None:
            heapq.heappush(heap, (order(following.key), i, following))


_SERVER_SETTINGS = {
    "default_transaction_isolation": "read committed",
    "application_name": "percolator",
    # Our statements are fixed and run millions of times: planning each call (custom plans)
    # cost more than executing it in the server-side functions.
    "plan_cache_mode": "force_generic_plan",
    # Every statement of ours finds its rows by key. The lock and notify tables churn, and a
    # generic plan made while their statistics said "empty" scanned the whole (bloated) lock
    # table for every cell a read probed: 4.7 ms a 14-cell read at 20,000 web-index pages,
    # 0.1 ms with the index.
    "enable_seqscan": "off",
    # A generic plan's cost is an estimate over the whole table, far above jit_above_cost for
    # a scan page: Postgres compiled every page's statement anew (10 ms of 50 for 16,000 rows)
    # to run it once.
    "jit": "off",
}
"""Settings of every connection of the store's pools."""


async def _open_shard(index: int, dsn: str, pool_size: int, connect_timeout_s: float) -> _Shard:
    def connect() -> Coroutine[Any, Any, asyncpg.Connection]:
        return asyncpg.connect(dsn, timeout=connect_timeout_s, server_settings=_SERVER_SETTINGS)

    pool = ConnectionPool(connect, pool_size)
    try:
        conn = await pool.acquire()  # the first connection: an unreachable shard fails here
    except (TimeoutError, OSError, asyncpg.PostgresError, asyncpg.exceptions.InterfaceError) as exc:
        raise StoreUnavailable(dsn, f"{type(exc).__name__}: {exc}") from exc
    try:
        await _migrate(conn, dsn)
    except BaseException:
        pool.discard(conn)
        await pool.close()
        raise
    pool.release(conn)
    return _Shard(index, dsn, pool)


async def _migrate(conn: asyncpg.Connection, dsn: str) -> None:
    """Create or upgrade the shard's schema to SCHEMA_VERSION, one migrator at a time."""
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", MIGRATION_LOCK_KEY)
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS percolator_meta (key text PRIMARY KEY, value text)"
        )
        found = await conn.fetchval(
            "SELECT value FROM percolator_meta WHERE key = 'schema_version'"
        )
        version = int(found) if found is not None else 0
        if version > SCHEMA_VERSION:
            raise SchemaVersionError(
                f"shard {redact_dsn(dsn)} has schema version {version}, newer than this "
                f"Percolator's {SCHEMA_VERSION}: upgrade Percolator before using this store"
            )
        for v in range(version + 1, SCHEMA_VERSION + 1):
            for statement in MIGRATIONS[v]:
                await conn.execute(statement)
        if version != SCHEMA_VERSION:
            await conn.execute(
                "INSERT INTO percolator_meta VALUES ('schema_version', $1) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                str(SCHEMA_VERSION),
            )
