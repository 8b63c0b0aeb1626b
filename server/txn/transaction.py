"""A snapshot-isolated transaction, close to the paper's Figure 2.

Reads see the snapshot at start_ts (plus this transaction's own writes); writes are buffered and
sent at commit by :class:`~percolator.server.txn.committer.TwoPhaseCommitter`. A transaction that
wrote nothing commits without any round trip and without taking a commit_ts.

Two variants serve bulk work (the Spark connector): a *snapshot* transaction reads at a given
timestamp and refuses writes (:meth:`TransactionClient.begin_at`); a *part* of a distributed
transaction buffers writes the same way but its commit only prewrites them, as secondaries of
the distributed transaction's primary (:meth:`TransactionClient.begin_part`).
"""

from __future__ import annotations

import asyncio
import contextlib
import operator
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from types import TracebackType
from typing import TypeVar

from percolator.server.metrics import definitions as metrics
from percolator.server.storage.cells import (
    MAX_COLUMN_NAME_BYTES,
    MAX_ROW_KEY_BYTES,
    MAX_TABLE_NAME_BYTES,
    MAX_VALUE_BYTES,
    CellKey,
    CellRead,
    Mutation,
    RowRead,
    WriteKind,
)
from percolator.server.storage.errors import LimitExceeded, SnapshotTooOld
from percolator.server.storage.packed import PackedCells, pack_rows
from percolator.server.storage.row_locks import (
    HOLDS,
    LockWait,
    RowLockMode,
    RowLocks,
    RowLockState,
    conflicts,
    covers,
)
from percolator.server.storage.row_locks import (
    RowLockUnavailable as RowLockUnavailable,  # raised by lock_rows; the SQL layer catches it
)
from percolator.server.storage.store import CellStore
from percolator.server.txn.commit_checks import CommitCheck, Unchanged
from percolator.server.txn.committer import TwoPhaseCommitter
from percolator.server.txn.config import TxnConfig
from percolator.server.txn.errors import (
    LockWaitTimeout,
    TransactionClosed,
    TransactionTooLarge,
    TransactionTooOld,
    TxnError,
    WriteConflict,
)
from percolator.server.txn.lock_resolver import LockResolver
from percolator.server.txn.read_set import ReadSet, ScanClaim
from percolator.server.txn.secondary_committer import SecondaryCommitter
from percolator.server.txn.timestamps import TimestampSource

T = TypeVar("T")

Row = tuple[bytes, dict[str, bytes]]
"""A row from a scan: its key and its columns' values."""

WriteSink = Callable[[Sequence[Mutation], int], Awaitable[None]]
"""What a part of a distributed transaction does with its buffered writes at commit (the
mutations, one per cell, and their accounted size): prewrite them, nothing more."""


class ReadOnlyTransactionError(TxnError):
    """A write in a transaction that reads a fixed snapshot (:meth:`TransactionClient.begin_at`)."""

    sqlstate = "25006"


# Backoff while waiting for a live lock: starts short (most locks are released within a commit)
# and doubles up to a ceiling, until the lock-wait timeout.
_FIRST_BACKOFF_S = 0.002
_MAX_BACKOFF_S = 0.1
# Fixed cost assumed per buffered cell when accounting a transaction's size.
_CELL_OVERHEAD_BYTES = 64
READ_CACHE_CELLS = 4096
"""Cells a transaction remembers from its point reads (get, get_many). A snapshot never
changes, so a cell read again at the same read_ts (an INSERT's existence check of a row the
transaction has just selected, an observer's row read together with its ack) costs no round
trip. Beyond this many, or ``READ_CACHE_BYTES`` of values, further reads are not remembered."""
READ_CACHE_BYTES = 8 * 1024 * 1024
MAX_ROW_LOCKS = 10_000
"""Row locks one transaction takes at most (:meth:`Transaction.lock_rows`). They are advisory
locks (one or two per row), which live in Postgres's shared lock table
(max_locks_per_transaction times max_connections slots, for everyone): an UPDATE of a million
rows must not fill it. Rows beyond this are written without one, as under optimistic locking:
a writer of one of them waits for nothing, and the prewrite's conflict check still stops a
lost update."""


@dataclass(frozen=True)
class TxnServices:
    """What every transaction of one client shares."""

    store: CellStore
    clock: TimestampSource
    resolver: LockResolver
    secondaries: SecondaryCommitter
    config: TxnConfig
    on_finish: Callable[[int], None]
    """Called with start_ts once the transaction has committed or rolled back."""
    row_locks: Callable[[], RowLocks]
    """A holder of pessimistic row locks for one transaction (the store's)."""


@dataclass(frozen=True, slots=True)
class RowLockWait:
    """The rows a transaction waits to lock, and the holds it asks for (bits, as
    row_locks.HOLDS)."""

    keys: frozenset[CellKey]
    holds: int


@dataclass(frozen=True, slots=True)
class RowLock:
    """What :meth:`Transaction.lock_rows` did with one row."""

    taken: bool
    """False only under SKIP LOCKED, for a row another transaction holds."""
    changed: bool
    """Another transaction committed a write of the row after this transaction's snapshot
    (read_ts): what was read of it is stale."""
    waited: bool = False
    """Another transaction held the row: this one waited for it to end."""


_HELD = RowLock(True, False)
"""A row this transaction holds already (or goes without a lock: see MAX_ROW_LOCKS)."""

_CHANGED_HELD = RowLock(True, True)
"""A row this transaction holds already, found changed under the current snapshot."""

_RELEASING: set[asyncio.Task[None]] = set()
"""Releases of row locks of transactions dropped without an end (kept from the collector)."""


@dataclass(frozen=True)
class Savepoint:
    """A copy of a transaction's write buffer and of the row locks it held (see
    :meth:`Transaction.savepoint`)."""

    writes: dict[CellKey, Mutation]
    size: int
    held: dict[CellKey, int]


def _own_or(own: Mutation | None, read: bytes | None) -> bytes | None:
    """A cell's value for this transaction: its own buffered write (a lock-only write aside),
    else what was read."""
    return own.value if own is not None and own.kind != WriteKind.LOCK else read


class TransactionState(Enum):
    """Where a transaction is in its life."""

    ACTIVE = "active"
    COMMITTED = "committed"
    ROLLED_BACK = "rolled_back"


@dataclass(frozen=True)
class ReadGuard:
    """A cell read with a transaction's first read at each snapshot, and what to check of
    its value (see :meth:`Transaction.set_read_guard`)."""

    key: CellKey
    check: Callable[[bytes | None, frozenset[str]], Awaitable[None]]
    """Called with the cell's value and the store tables the transaction has used so far at
    this snapshot (those of the read it came with, of the table scanned, of its writes);
    raises to refuse the statement (the transaction stays open)."""


class Transaction:
    """One transaction. Use ``async with client.begin() as txn`` or call commit/rollback."""

    def __init__(
        self,
        services: TxnServices,
        start_ts: int,
        *,
        read_ts: int | None = None,
        writable: bool = True,
        sink: WriteSink | None = None,
    ) -> None:
        """``read_ts`` pins the snapshot (it never moves); ``writable=False`` refuses writes;
        ``sink`` receives the writes at commit instead of the two-phase committer."""
        self._s = services
        self.start_ts = start_ts
        self.read_ts = start_ts if read_ts is None else read_ts
        """The snapshot reads see: start_ts, or a later one under READ COMMITTED (see
        :meth:`TransactionClient.renew_snapshot`). Writes are always conflict-checked from
        start_ts."""
        self.pinned = read_ts is not None
        """True when the snapshot is fixed (begin_at, begin_part): renewing it does nothing."""
        self.writable = writable
        self.commit_ts: int | None = None
        self.state = TransactionState.ACTIVE
        self._writes: dict[CellKey, Mutation] = {}
        self._bytes = 0
        self._checks: list[CommitCheck] = []
        self._sink = sink
        self._cache: dict[CellKey, bytes | None] = {}
        self._cache_ts = self.read_ts
        self._cache_bytes = 0
        self._guard: ReadGuard | None = None
        self._guard_ts: int | None = None
        """The snapshot (read_ts) at which the guard last passed."""
        self._row_locks: RowLocks | None = None
        self._held: dict[CellKey, int] = {}
        """Rows this transaction holds row locks on, and its holds of each (bits, as
        row_locks.HOLDS)."""
        self._changed_at: dict[CellKey, int] = {}
        """Rows whose lock found them changed after the snapshot, and that snapshot
        (read_ts): asked again under it (a self-join's second row lock in one statement),
        such a held row is still reported changed."""
        self.row_lock_wait: RowLockWait | None = None
        """The rows a lock_rows call is out for (pg_stat_activity's wait_event,
        pg_blocking_pids)."""
        self._contended = False
        """A row this transaction locked had changed, or was being committed: its rows are
        hot, so its commit moves its secondaries itself before releasing its locks."""
        """Rows locked (and found unchanged, or read again since) by this transaction."""
        self._journal: dict[CellKey, Mutation | None] | None = None
        """While a statement may be undone: each key's buffered write before it."""
        self._decided_at: int | None = None
        """Inside :meth:`deciding_at`: the snapshot the writes being buffered were decided on."""
        self.read_set: ReadSet | None = None
        """What this transaction read, when it is SERIALIZABLE (see :meth:`track_reads`)."""
        self._locked_until: dict[CellKey, int] = {}
        """Row cells with a LOCK record committed after start_ts, found when this transaction
        took their row locks: writes of them are conflict-checked from after it (see
        :meth:`lock_rows`)."""

    # -- reads ---------------------------------------------------------------------------------

    def track_reads(self) -> None:
        """Make this transaction SERIALIZABLE: keep what it reads from the store, and have its
        commit check, if it writes, that none of it changed since its snapshot (read_set.py).
        Call before its first read."""
        self.read_set = ReadSet()

    async def get(self, table: str, row: bytes, column: str) -> bytes | None:
        """The value of one cell in this transaction's snapshot (None if absent)."""
        (value,) = await self.get_many([CellKey(table, row, column)])
        return value

    async def get_many(self, keys: Sequence[CellKey]) -> list[bytes | None]:
        """Several cells in one batch (one round trip per shard; none for cells written or
        already read by this transaction)."""
        self._check_active()
        writes = self._writes
        cache = self._snapshot_cache()
        remote = [
            k
            for k in keys
            if (k not in writes or writes[k].kind == WriteKind.LOCK) and k not in cache
        ]
        found: dict[CellKey, bytes | None] = {}
        if remote:
            found = {r.key: r.value for r in await self._read(remote)}
            self._remember(cache, found)
        out: list[bytes | None] = []
        for k in keys:
            own = writes.get(k)
            if own is not None and own.kind != WriteKind.LOCK:
                out.append(own.value)  # not read: neither in found nor in the cache
            else:
                out.append(found[k] if k in found else cache[k])
        return out

    async def read_newest(self, keys: Sequence[CellKey]) -> tuple[int, list[bytes | None]]:
        """The cells' values at a fresh timestamp, which it returns with them: READ COMMITTED's
        re-check of rows that changed after the statement's snapshot, read under their row
        locks, so what is read stays their newest version (Postgres's EvalPlanQual). This
        transaction's own writes win, as in :meth:`get_many`; the snapshot and its cache are
        left as they are. One timestamp, then one round trip per shard."""
        self._check_active()
        ts, results = await self._read_fresh(keys)
        writes = self._writes
        return ts, [_own_or(writes.get(k), r.value) for k, r in zip(keys, results, strict=True)]

    @contextlib.contextmanager
    def deciding_at(self, ts: int | None) -> Iterator[None]:
        """Writes buffered inside were decided on what was read at ``ts`` (rows re-read by
        :meth:`read_newest`), so versions committed before it are no conflict for them; a cell
        written before keeps its first bound. ``None``: no change."""
        if ts is None:
            yield
            return
        outer, self._decided_at = self._decided_at, ts
        try:
            yield
        finally:
            self._decided_at = outer

    def _snapshot_cache(self) -> dict[CellKey, bytes | None]:
        """The cells read at the current read_ts (emptied when READ COMMITTED moves it)."""
        if self._cache_ts != self.read_ts:
            self._cache = {}
            self._cache_ts = self.read_ts
            self._cache_bytes = 0
        return self._cache

    def _remember(
        self, cache: dict[CellKey, bytes | None], found: dict[CellKey, bytes | None]
    ) -> None:
        """Keep what a read found, within the cache's bounds."""
        for key, value in found.items():
            size = len(value) if value is not None else 0
            if len(cache) >= READ_CACHE_CELLS or self._cache_bytes + size > READ_CACHE_BYTES:
                return
            cache[key] = value
            self._cache_bytes += size

    async def scan(
        self,
        table: str,
        start: bytes | None = None,
        end: bytes | None = None,
        columns: Sequence[str] | None = None,
        *,
        reverse: bool = False,
    ) -> AsyncIterator[Row]:
        """Rows with row key in [start, end) in key order (descending with ``reverse``), with
        this transaction's writes."""
        async for page in self.scan_pages(table, start, end, columns, reverse=reverse):
            for row in page:
                yield row

    async def scan_pages(
        self,
        table: str,
        start: bytes | None = None,
        end: bytes | None = None,
        columns: Sequence[str] | None = None,
        *,
        page_size: int = 1000,
        prefetch: bool = False,
        reverse: bool = False,
    ) -> AsyncIterator[list[Row]]:
        """The rows of :meth:`scan`, a page at a time: about ``page_size`` cells per shard
        and round trip (larger pages suit bulk reads, smaller ones a scan with a LIMIT).
        ``prefetch``: the caller reads to the end, so the next page may be fetched early.
        ``reverse``: descending key order, from ``end`` down (what a SERIALIZABLE
        transaction claims grows from ``end`` down too).

        The read guard, when it has not passed at this snapshot yet, is checked alongside the
        first page (in parallel with it) and before any row is returned."""
        self._check_active()
        pages = self._scan_pages(table, start, end, columns, page_size, prefetch, reverse)
        async for page in self._guarded(table, pages):
            yield page

    async def scan_packed(
        self,
        table: str,
        start: bytes | None,
        end: bytes | None,
        columns: Sequence[str],
        *,
        page_size: int = 4096,
        prefetch: bool = False,
    ) -> AsyncIterator[PackedCells]:
        """The rows of :meth:`scan_pages` as packed cells (:mod:`~percolator.server.storage.
        packed`), for a bulk reader that decodes whole columns at a time. Column codes are
        positions in ``columns``. Rows come in key order within a page, but pages of different
        shards in any order. Locks are resolved and this transaction's writes merged, as in
        :meth:`scan_pages`; a page that needed either was packed here from rows."""
        self._check_active()
        pages = self._scan_packed(table, start, end, columns, page_size, prefetch)
        async for page in self._guarded(table, pages):
            yield page

    async def snapshot_range_empty(self, table: str, start: bytes, end: bytes, column: str) -> bool:
        """Whether the snapshot holds no record at all (no value, and no deleted one's) of
        ``column`` in the rows [start, end), leaving this transaction's own writes aside (see
        :meth:`has_write`). One round trip per shard; a lock on the range counts as a record,
        unresolved (the caller falls back to reading the cells it cares about)."""
        self._check_active()
        if self.read_set is not None:
            self.read_set.add_range(table, start, end)
        store = self._s.store
        pages = store.scan_packed(self.read_ts, table, start, end, [column], page_size=16)
        try:
            async with contextlib.aclosing(self._guarded(table, pages)) as guarded:
                return await anext(guarded, None) is None
        except SnapshotTooOld as exc:
            raise self._too_old(exc) from exc

    def has_write(self, key: CellKey) -> bool:
        """Whether this transaction has buffered a PUT or DELETE of ``key``."""
        own = self._writes.get(key)
        return own is not None and own.kind != WriteKind.LOCK

    async def _guarded(self, table: str, pages: AsyncIterator[T]) -> AsyncIterator[T]:
        """The pages, none before the read guard has passed (see :meth:`scan_pages`)."""
        guard = self._start_guard_check(table)
        try:
            async for page in pages:
                if guard is not None:
                    await guard
                    guard = None
                yield page
            if guard is not None:
                await guard
                guard = None
        finally:
            if guard is not None:  # the scan failed or its reader stopped first
                guard.cancel()

    def _start_guard_check(self, table: str) -> asyncio.Task[None] | None:
        if self._guard is None or self._guard_ts == self.read_ts:
            return None
        task = asyncio.ensure_future(self.check_read_guard(table))
        # Retrieved here when the scan gives up on it, so that it is never reported unretrieved.
        task.add_done_callback(lambda t: t.cancelled() or t.exception())
        return task

    async def _scan_pages(
        self,
        table: str,
        start: bytes | None,
        end: bytes | None,
        columns: Sequence[str] | None,
        page_size: int,
        prefetch: bool,
        reverse: bool = False,
    ) -> AsyncIterator[list[Row]]:
        own = self._own_writes_in(table, start, end, columns, reverse)
        claim = self._claim_scan(table, start, end, reverse)
        if own:
            page: list[Row] = []
            async for row in self._scan_merged(table, start, end, columns, own, reverse):
                if claim is not None:
                    claim.reached(row[0])
                page.append(row)
                if len(page) >= page_size:
                    yield page
                    page = []
            if claim is not None:
                claim.finished()
            if page:
                yield page
            return
        store = self._s.store
        try:
            async for rows in store.scan_rows(
                self.read_ts,
                table,
                start,
                end,
                columns,
                page_size=page_size,
                prefetch=prefetch,
                reverse=reverse,
            ):
                if claim is not None:
                    claim.reached_page(r.row for r in rows)
                found = [(r.row, await self._resolved(r) if r.locks else r.values) for r in rows]
                yield [row for row in found if row[1]]
            if claim is not None:
                claim.finished()
        except SnapshotTooOld as exc:
            raise self._too_old(exc) from exc

    async def _scan_packed(
        self,
        table: str,
        start: bytes | None,
        end: bytes | None,
        columns: Sequence[str],
        page_size: int,
        prefetch: bool,
    ) -> AsyncIterator[PackedCells]:
        if self._own_writes_in(table, start, end, columns):
            async for rows in self._scan_pages(table, start, end, columns, page_size, prefetch):
                yield pack_rows(rows, columns)
            return
        store = self._s.store
        claim = self._claim_scan(table, start, end)
        try:
            async for page in store.scan_packed(
                self.read_ts, table, start, end, columns, page_size=page_size, prefetch=prefetch
            ):
                if claim is not None:
                    _claim_page(claim, page)
                if isinstance(page, PackedCells):
                    yield page
                    continue
                found = [(r.row, await self._resolved(r) if r.locks else r.values) for r in page]
                yield pack_rows(found, columns)
            if claim is not None:
                claim.finished()
        except SnapshotTooOld as exc:
            raise self._too_old(exc) from exc

    def _claim_scan(
        self, table: str, start: bytes | None, end: bytes | None, reverse: bool = False
    ) -> ScanClaim | None:
        """The read set's claim for a scan beginning (None when reads are not kept)."""
        if self.read_set is None:
            return None
        return self.read_set.add_scan(table, start, end, reverse=reverse)

    async def _resolved(self, row: RowRead) -> dict[str, bytes]:
        """The values of a scanned row once the locks on its cells are resolved."""
        values = dict(row.values)
        for cell in await self._read([lock.key for lock in row.locks]):
            if cell.value is None:
                values.pop(cell.key.column, None)
            else:
                values[cell.key.column] = cell.value
        return values

    async def _scan_merged(
        self,
        table: str,
        start: bytes | None,
        end: bytes | None,
        columns: Sequence[str] | None,
        own: list[Mutation],
        reverse: bool,
    ) -> AsyncIterator[Row]:
        """The rows of a range in which this transaction has written, cell by cell."""
        current: bytes | None = None
        values: dict[str, bytes] = {}
        try:
            async for cell in self._merged_cells(table, start, end, columns, own, reverse):
                if cell.key.row != current:
                    if current is not None and values:
                        yield current, values
                    current, values = cell.key.row, {}
                if cell.value is not None:
                    values[cell.key.column] = cell.value
        except SnapshotTooOld as exc:
            raise self._too_old(exc) from exc
        if current is not None and values:
            yield current, values

    def _own_writes_in(
        self,
        table: str,
        start: bytes | None,
        end: bytes | None,
        columns: Sequence[str] | None,
        reverse: bool = False,
    ) -> list[Mutation]:
        """This transaction's buffered PUTs and DELETEs in the range, in the order a scan in
        that direction meets them."""
        wanted = set(columns) if columns is not None else None
        return sorted(
            (
                m
                for k, m in self._writes.items()
                if k.table == table
                and m.kind != WriteKind.LOCK
                and (start is None or k.row >= start)
                and (end is None or k.row < end)
                and (wanted is None or k.column in wanted)
            ),
            key=lambda m: m.key,
            reverse=reverse,
        )

    async def _merged_cells(
        self,
        table: str,
        start: bytes | None,
        end: bytes | None,
        columns: Sequence[str] | None,
        own: list[Mutation],
        reverse: bool,
    ) -> AsyncIterator[CellRead]:
        """The store's cells merged with our own writes (``own``, in the same order), in
        (row, column) order, descending with ``reverse``."""
        before = operator.gt if reverse else operator.lt
        i = 0
        cells = self._s.store.scan(self.read_ts, table, start, end, columns, reverse=reverse)
        async for cell in cells:
            while i < len(own) and before(own[i].key, cell.key):
                yield _as_read(own[i])
                i += 1
            if i < len(own) and own[i].key == cell.key:
                yield _as_read(own[i])
                i += 1
                continue
            if cell.lock is not None:
                cell = (await self._read([cell.key]))[0]
            yield cell
        for m in own[i:]:
            yield _as_read(m)

    def set_read_guard(self, guard: ReadGuard) -> None:
        """Read ``guard.key`` along with the first read from the store at each snapshot, and
        pass its value to ``guard.check``, which raises to refuse (the SQL layer checks that
        the catalog its statements were planned with is not older than the snapshot's). A scan
        reads it in parallel with its first page; a transaction that writes without having
        checked it at its snapshot checks it before committing, with one read of its own."""
        self._guard = guard
        self._guard_ts = None

    async def check_read_guard(self, *tables: str) -> None:
        """Check the read guard now, unless it passed at this snapshot already (``tables``:
        store tables about to be used besides those written). A commit of writes does this
        first; the SQL layer does it at the end of a statement that wrote without reading, to
        run the statement again if it is refused."""
        if self._guard is not None and self._guard_ts != self.read_ts:
            await self._read([], tables)

    async def _read(self, keys: Sequence[CellKey], tables: Sequence[str] = ()) -> list[CellRead]:
        """Read at start_ts, resolving locks and waiting for live ones up to the timeout."""
        if self.read_set is not None:
            for key in keys:
                self.read_set.add_rows(key.table, (key.row,))
        try:
            guard = self._guard
            if guard is None or self._guard_ts == self.read_ts:
                return await self._read_resolving(keys)
            results = await self._s.store.read(self.read_ts, [*keys, guard.key])
            used = frozenset([*tables, *(k.table for k in keys), *(k.table for k in self._writes)])
            await guard.check(await self._guard_value(guard.key, results.pop()), used)
            self._guard_ts = self.read_ts
            return await self._resolve_locks(keys, results)
        except SnapshotTooOld as exc:
            raise self._too_old(exc) from exc

    def _too_old(self, exc: SnapshotTooOld) -> TransactionTooOld:
        return TransactionTooOld(f"transaction {self.start_ts}: {exc}; retry it")

    async def _guard_value(self, key: CellKey, read: CellRead) -> bytes | None:
        """The guard cell's value at this snapshot. A lock of a transaction that committed
        (its secondaries still being committed) or died is resolved; a live one is not waited
        for (its committed value is taken): a Spark overwrite keeps the catalog's cells
        locked until its job commits, and every transaction would wait for the job."""
        if read.lock is None:
            return read.value
        if await self._s.resolver.resolve([read.lock]):
            return read.value  # held by a live transaction
        (again,) = await self._s.store.read(self.read_ts, [key])
        return again.value

    async def _read_resolving(self, keys: Sequence[CellKey]) -> list[CellRead]:
        return await self._resolve_locks(keys, await self._s.store.read(self.read_ts, keys))

    async def _resolve_locks(
        self, keys: Sequence[CellKey], results: list[CellRead], ts: int | None = None
    ) -> list[CellRead]:
        """``results`` of reading ``keys`` (at ``ts``, else read_ts) with every lock resolved
        (re-reading those cells)."""
        blocked = [i for i, r in enumerate(results) if r.lock is not None]
        if not blocked:
            return results
        started = time.monotonic()
        backoff = _FIRST_BACKOFF_S
        waiting = False  # met a live lock: this read is a lock wait (dead ones resolve at once)
        while blocked:
            locks = [results[i].lock for i in blocked]
            held = await self._s.resolver.resolve([lk for lk in locks if lk is not None])
            if held:
                waiting = True
                waited = time.monotonic() - started
                if waited >= self._s.config.lock_wait_timeout_s:
                    metrics.LOCK_WAIT_SECONDS.observe(waited)
                    metrics.LOCK_WAIT_TIMEOUTS.inc()
                    raise LockWaitTimeout(held[0].key, held[0].start_ts, waited)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, _MAX_BACKOFF_S)
            again = await self._s.store.read(
                self.read_ts if ts is None else ts, [keys[i] for i in blocked]
            )
            for i, result in zip(blocked, again, strict=True):
                results[i] = result
            blocked = [i for i in blocked if results[i].lock is not None]
        if waiting:
            metrics.LOCK_WAIT_SECONDS.observe(time.monotonic() - started)
        return results

    # -- pessimistic row locks ---------------------------------------------------------------

    async def lock_rows(
        self,
        keys: Sequence[CellKey],
        wait: LockWait,
        timeout_s: float | None = None,
        *,
        mode: RowLockMode = RowLockMode.UPDATE,
    ) -> list[RowLock]:
        """Lock rows until this transaction ends (see storage/row_locks.py), each given by
        the cell that every write of the row writes; waits for other holders up to
        ``timeout_s`` (default: unbounded on one shard, else the lock-wait timeout), then
        RowLockUnavailable (55P03).
        Reports, per row, whether it was taken and whether it changed after read_ts.

        A Percolator lock found on a cell (a commit in progress, or a writer that takes no row
        locks) is resolved, or waited for, as a read would, before the row's state is told.
        One round trip per shard (the first also takes a connection for the locks). Beyond
        MAX_ROW_LOCKS in a transaction, rows are reported taken and unchanged, unlocked.
        ``mode``: Postgres's lock strength (FOR KEY SHARE, FOR SHARE, FOR NO KEY UPDATE, FOR
        UPDATE), which decides whom the lock waits for and who waits for it.

        A row only locked since (a FOR UPDATE holder's LOCK record, committed) has not changed,
        as in Postgres, where a later writer of a row that was only locked goes on: this
        transaction's writes of that cell are conflict-checked from after the LOCK record (all
        the records up to it were seen here, none a change)."""
        self._check_writable()
        held = self._held
        holds = HOLDS[mode]
        # Not held yet, or held weaker than asked now.
        new = [k for k in dict.fromkeys(keys) if not covers(held.get(k, 0), holds)]
        if not new or len(held) + len(new) > MAX_ROW_LOCKS:
            return [self._held_lock(k) for k in keys]
        if self._row_locks is None:
            self._row_locks = self._s.row_locks()
        timeout = timeout_s if timeout_s is not None else self._row_lock_wait_bound()
        if wait is LockWait.WAIT:
            self.row_lock_wait = RowLockWait(frozenset(new), holds)
        try:
            states = await self._row_locks.lock(new, wait, timeout, holds)
        finally:
            self.row_lock_wait = None
        pending = [i for i, st in enumerate(states) if st.taken and st.lock_start_ts is not None]
        settled = bool(pending)
        while pending:
            await self._settle_cells([new[i] for i in pending])
            again = await self._row_locks.lock(
                [new[i] for i in pending], LockWait.WAIT, timeout, holds
            )
            for i, st in zip(pending, again, strict=True):
                states[i] = replace(st, waited=st.waited or states[i].waited)
            pending = [i for i in pending if states[i].lock_start_ts is not None]
        outcome = {k: self._row_lock(k, st) for k, st in zip(new, states, strict=True)}
        if settled or any(o.changed for o in outcome.values()):
            self._contended = True
        # A row held is not asked again: no writer that takes row locks can commit it until
        # we end, so it stays as read (a changed one makes the statement fail, or run again
        # on a snapshot taken after this, which sees its newest version).
        held.update((k, held.get(k, 0) | holds) for k, o in outcome.items() if o.taken)
        self._changed_at.update((k, self.read_ts) for k, o in outcome.items() if o.changed)
        return [outcome[k] if k in outcome else self._held_lock(k) for k in keys]

    def _held_lock(self, key: CellKey) -> RowLock:
        """What lock_rows reports for a row this transaction holds already: unchanged,
        unless its lock found it changed under the current snapshot. Then it is still
        stale for the statement (a self-join FOR UPDATE locks the row once per side, and
        READ COMMITTED must re-check both sides against its newest version, as Postgres's
        EvalPlanQual does)."""
        if self._changed_at.get(key) == self.read_ts:
            return _CHANGED_HELD
        return _HELD

    def _row_lock_wait_bound(self) -> float | None:
        """How long a row lock waits when the caller sets no timeout: as long as it takes on
        one shard, as in Postgres (whose deadlock detector sees every cycle of waits there);
        with several shards the lock-wait timeout, since a cycle across shards is not
        detected."""
        if self._s.store.shard_count == 1:
            return None
        return self._s.config.lock_wait_timeout_s

    @property
    def waiting_for_row_lock(self) -> bool:
        """Whether a lock_rows call that may wait is out."""
        return self.row_lock_wait is not None

    def blocks(self, waiting: RowLockWait) -> bool:
        """Whether this transaction holds one of the rows ``waiting`` asks for in a mode that
        conflicts with it (pg_blocking_pids)."""
        held = self._held
        return any(k in held and conflicts(held[k], waiting.holds) for k in waiting.keys)

    def _row_lock(self, key: CellKey, state: RowLockState) -> RowLock:
        newest = state.newest_commit_ts
        locked = state.locked_commit_ts
        if state.taken and locked is not None and locked >= self.start_ts:
            self._locked_until[key] = max(locked + 1, self._locked_until.get(key, 0))
        return RowLock(state.taken, newest is not None and newest > self.read_ts, state.waited)

    async def _settle_cells(self, keys: Sequence[CellKey]) -> None:
        """Resolve (or wait for) the Percolator locks on ``keys``: read them at a fresh
        timestamp, which sees every lock the row-lock call saw."""
        await self._read_fresh(keys)

    async def _read_fresh(self, keys: Sequence[CellKey]) -> tuple[int, list[CellRead]]:
        """``keys`` read at a new timestamp, with every Percolator lock met resolved or
        waited for; the timestamp and what was read."""
        ts = await self._s.clock.get_timestamp()
        return ts, await self._resolve_locks(keys, await self._s.store.read(ts, keys), ts)

    async def _release_row_locks(self) -> None:
        holder, self._row_locks = self._row_locks, None
        self._held = {}
        self._changed_at = {}
        if holder is not None:
            await holder.release()

    def drop_row_locks(self) -> None:
        """Release the row locks without waiting for it: the transaction failed and can only
        roll back, and Postgres frees an aborted transaction's locks at once, so that a
        deadlock's other party goes on."""
        holder, self._row_locks = self._row_locks, None
        self._held = {}
        self._changed_at = {}
        if holder is not None:
            _release_in_background(holder)

    # -- writes --------------------------------------------------------------------------------

    def set(self, table: str, row: bytes, column: str, value: bytes) -> None:
        """Buffer a write of one cell; it is sent at commit."""
        _check_limits(table, row, column, value)
        self._buffer(Mutation(CellKey(table, row, column), WriteKind.PUT, bytes(value)))

    def set_row(self, table: str, row: bytes, cells: Sequence[tuple[str, bytes]]) -> None:
        """Buffer writes of several cells of one row, as :meth:`set` does for each (the
        table and row are checked once: bulk loads write millions of cells this way)."""
        _check_limits(table, row, "", b"")
        self._check_writable()
        for column, value in cells:
            _check_cell_limits(column, value)
            self._keep(Mutation(CellKey(table, row, column), WriteKind.PUT, bytes(value)))

    def delete(self, table: str, row: bytes, column: str) -> None:
        """Buffer the deletion of one cell."""
        _check_limits(table, row, column, b"")
        self._buffer(Mutation(CellKey(table, row, column), WriteKind.DELETE))

    def lock(self, table: str, row: bytes, column: str) -> None:
        """Lock a cell without changing it (SELECT ... FOR UPDATE): a concurrent writer of it
        conflicts with this transaction, which prevents write skew."""
        _check_limits(table, row, column, b"")
        key = CellKey(table, row, column)
        if key not in self._writes:
            self._buffer(Mutation(key, WriteKind.LOCK))

    def _buffer(self, mutation: Mutation) -> None:
        self._check_writable()
        self._keep(mutation)

    def _check_writable(self) -> None:
        self._check_active()
        if not self.writable:
            raise ReadOnlyTransactionError(
                f"transaction {self.start_ts} reads the snapshot at ts {self.read_ts} and "
                "cannot write"
            )

    def _keep(self, mutation: Mutation) -> None:
        """Buffer a mutation of a writable, active transaction, within its size limits."""
        key = mutation.key
        previous = self._writes.get(key)
        if previous is not None:
            self._bytes -= _size(previous)
        elif len(self._writes) >= self._s.config.max_cells_per_txn:
            raise TransactionTooLarge(
                f"a transaction may write at most {self._s.config.max_cells_per_txn} cells"
            )
        decided = self._decided_at
        if decided is None and self.read_ts != self.start_ts and not self.pinned:
            decided = self.read_ts
        if decided is not None:
            # READ COMMITTED: the statement decided this write on the snapshot at read_ts, or
            # on the row's newest version (deciding_at), and holds the row's lock, so versions
            # committed before it are no conflict. A cell written again keeps its first bound:
            # what came between is not in what the earlier statement read.
            since = previous.since_ts if previous is not None else decided
            if since:
                mutation = mutation._replace(since_ts=since)
        floor = self._locked_until.get(key)
        if floor is not None and floor > max(mutation.since_ts, self.start_ts):
            mutation = mutation._replace(since_ts=floor)
        size = _size(mutation)
        if self._bytes + size > self._s.config.max_bytes_per_txn:
            raise TransactionTooLarge(
                f"a transaction may write at most {self._s.config.max_bytes_per_txn} bytes"
            )
        if self._journal is not None and key not in self._journal:
            self._journal[key] = previous
        self._writes[key] = mutation
        self._bytes += size

    def check_at_commit(self, check: CommitCheck) -> None:
        """Have the commit read ``check`` again at commit_ts, after the prewrite, and fail
        with a write conflict if it no longer holds (see commit_checks.py). Foreign keys
        register the reads they rest on this way."""
        self._check_active()
        self._checks.append(check)

    def savepoint(self) -> Savepoint:
        """The buffered writes as they are now (writes are buffered until commit, so a
        savepoint is a copy of the buffer, with no round trip)."""
        self._check_active()
        return Savepoint(dict(self._writes), self._bytes, dict(self._held))

    async def rollback_to(self, savepoint: Savepoint) -> None:
        """Discard the writes buffered since ``savepoint`` and release the row locks taken
        since (Postgres frees a rolled-back subtransaction's row locks): one round trip per
        shard that holds some."""
        self._check_active()
        self._writes = dict(savepoint.writes)
        self._bytes = savepoint.size
        before, held = savepoint.held, self._held
        holds = [(k, bits & ~before.get(k, 0)) for k, bits in held.items()]
        holds = [(k, bits) for k, bits in holds if bits]
        if not holds:
            return
        for k, _ in holds:
            if k in before:
                held[k] = before[k]
            else:
                del held[k]
        if self._row_locks is not None:
            await self._row_locks.unlock(holds)

    def start_journal(self) -> None:
        """Remember what the writes buffered from now on replace, so that :meth:`undo_journal`
        can take them back: a statement run again (READ COMMITTED), at a cost per cell it
        writes rather than per cell buffered, as a savepoint would be."""
        self._journal = {}

    def undo_journal(self) -> None:
        """Take back the writes buffered since :meth:`start_journal`; the journal restarts."""
        journal, self._journal = self._journal or {}, {}
        for key, previous in journal.items():
            current = self._writes.pop(key, None)
            if current is not None:
                self._bytes -= _size(current)
            if previous is not None:
                self._writes[key] = previous
                self._bytes += _size(previous)

    def stop_journal(self) -> None:
        self._journal = None

    def discard_writes(self, tables: Collection[str]) -> None:
        """Forget the buffered writes to ``tables``: a session's temporary tables whose rows
        must not outlive the commit (ON COMMIT DELETE ROWS, dropped before it)."""
        self._check_active()
        for key in [k for k in self._writes if k.table in tables]:
            self._bytes -= _size(self._writes.pop(key))

    @property
    def read_only(self) -> bool:
        """True while nothing has been written."""
        return not self._writes

    # -- end -----------------------------------------------------------------------------------

    async def commit(self) -> int | None:
        """Commit; returns commit_ts, or None for a read-only transaction (no round trip).

        A part of a distributed transaction prewrites its writes and returns None: they are
        committed later, all at once, by ``commit_distributed``."""
        self._check_active()
        if self._writes:
            await self.check_read_guard()
        try:
            if self._writes and self._sink is not None:
                mutations = list(self._writes.values())
                self._writes = {}
                await self._sink(mutations, self._bytes)
            elif self._writes:
                mutations = list(self._writes.values())
                self._writes = {}
                checks = (
                    [*self._checks, Unchanged(self.read_set)] if self.read_set else self._checks
                )
                committer = TwoPhaseCommitter(
                    self._s.store,
                    self._s.clock,
                    self._s.resolver,
                    self._s.secondaries,
                    self._s.config,
                    self.start_ts,
                    mutations,
                    self._bytes,
                    checks,
                    secondaries_now=self._contended,
                )
                self.commit_ts = await committer.commit()
            self.state = TransactionState.COMMITTED
            metrics.TXN_COMMITTED.inc()
        except BaseException as exc:
            self.state = TransactionState.ROLLED_BACK
            metrics.TXN_ROLLED_BACK.inc()
            if isinstance(exc, WriteConflict):
                metrics.TXN_CONFLICTS.inc()
            raise
        finally:
            self._s.on_finish(self.start_ts)
            if self._row_locks is not None:
                await self._release_row_locks()
        return self.commit_ts

    async def rollback(self) -> None:
        """Discard the buffered writes. Nothing was sent, so nothing needs cleaning."""
        if self.state != TransactionState.ACTIVE:
            return
        self._writes = {}
        self.state = TransactionState.ROLLED_BACK
        metrics.TXN_ROLLED_BACK.inc()
        self._s.on_finish(self.start_ts)
        if self._row_locks is not None:
            await self._release_row_locks()

    def _check_active(self) -> None:
        if self.state != TransactionState.ACTIVE:
            raise TransactionClosed(f"transaction {self.start_ts} is already {self.state.value}")

    def __del__(self) -> None:
        # Dropped without commit or rollback: nothing was sent, but it must stop holding the GC
        # safe point back (the client reports the oldest running start_ts).
        if self.state == TransactionState.ACTIVE:
            self._s.on_finish(self.start_ts)
        self.drop_row_locks()

    async def __aenter__(self) -> Transaction:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None and self.state == TransactionState.ACTIVE:
            await self.commit()
        else:
            await self.rollback()


def _release_in_background(holder: RowLocks) -> None:
    with contextlib.suppress(RuntimeError):  # no running loop: the process is ending
        task = asyncio.get_running_loop().create_task(holder.release())
        _RELEASING.add(task)
        task.add_done_callback(_RELEASING.discard)


def _as_read(m: Mutation) -> CellRead:
    return CellRead(m.key, m.value if m.kind == WriteKind.PUT else None)


def _size(m: Mutation) -> int:
    return len(m.key.row) + len(m.key.column) + len(m.value or b"") + _CELL_OVERHEAD_BYTES


def _check_limits(table: str, row: bytes, column: str, value: bytes) -> None:
    if len(table.encode()) > MAX_TABLE_NAME_BYTES:
        raise LimitExceeded(f"table name longer than {MAX_TABLE_NAME_BYTES} bytes")
    if len(row) > MAX_ROW_KEY_BYTES:
        raise LimitExceeded(f"row key of {len(row)} bytes exceeds {MAX_ROW_KEY_BYTES}")
    _check_cell_limits(column, value)


def _check_cell_limits(column: str, value: bytes) -> None:
    if len(column.encode()) > MAX_COLUMN_NAME_BYTES:
        raise LimitExceeded(f"column name longer than {MAX_COLUMN_NAME_BYTES} bytes")
    if len(value) > MAX_VALUE_BYTES:
        raise LimitExceeded(f"value of {len(value)} bytes exceeds {MAX_VALUE_BYTES}")


def _claim_page(claim: ScanClaim, page: PackedCells | list[RowRead]) -> None:
    """Extend a scan's claim over a page it fetched (packed, or rows)."""
    if isinstance(page, PackedCells):
        claim.reached_page(row for row, _, _ in page.cells())
    else:
        claim.reached_page(r.row for r in page)
