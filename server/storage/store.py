"""The cell-store contract: single-row atomic, batched operations (the Bigtable contract).

The transaction layer is the only caller. Every operation takes a batch of cells that may live on
several shards; an implementation sends one batch per shard, in parallel, and each per-shard batch
is one round trip whose checks and writes are atomic per row (never a client-side read followed by
a write). Counts of round trips per operation are kept in :attr:`CellStore.stats`.

Semantics, per cell, that every implementation must give (the contract suite in
``tests/storage/test_contract.py`` checks them on every store):

prewrite
    Fails with LOCKED if a lock with another start_ts is on the cell; with DUPLICATE if our own
    lock (same start_ts) is there with another kind or value; with ROLLED_BACK if a rollback
    record at our start_ts exists; with WRITE_CONFLICT if any other write record has
    commit_ts >= max(start_ts, the mutation's ``since_ts``) (``conflict_ts``: the newest such);
    with TOO_OLD if start_ts <= the shard's GC safe point. Otherwise it takes the lock
    (idempotent: prewriting the same write again at the same start_ts succeeds). A ``since_ts``
    above start_ts only moves the lower bound of the conflict check (a READ COMMITTED statement
    that read the cell at that snapshot may overwrite versions committed before it); the
    rollback record check still looks at start_ts.
commit
    If our lock (same start_ts) is on the cell: replace it by a write record at commit_ts. If the
    lock is gone but our write record is there: success (idempotent). Otherwise a failure.
commit_primary
    The commit point: commits the primary as ``commit`` does and, in the same atomic step, the
    secondaries of the same transaction that share the primary's shard (up to
    ``WITH_PRIMARY_CELLS`` cells in all). If the primary's lock is gone, none of them is
    committed. The secondaries it leaves are returned, for the caller to commit.
rollback
    If our write record (not a rollback) is there: nothing changes and the cell is reported
    committed. Otherwise remove our lock if present and, when asked, leave a rollback record.
read
    See :class:`~percolator.server.storage.cells.CellRead`.
notifications
    A commit that turns a PUT or DELETE lock into a write record, on a cell that a
    :class:`~percolator.server.storage.cells.Watch` names, also sets the notification of
    (observer, table, row) in the same atomic step, with ts = max(its ts, commit_ts); a new
    write also clears the notification's attempts and parking. Notifications are kept apart from
    the cells (the paper's separate locality group): finding them never reads clean rows.
check_txn_status
    Inspects the primary; rolls it back atomically (leaving a rollback record) when the lock has
    expired at ``now_ts`` or, if ``rollback_if_missing``, when nothing of the transaction is there.
commit_locks / rollback_locks
    Every lock with the given start_ts, wherever it is, becomes a write record at commit_ts
    (with notifications, as a commit) or is removed (no rollback records), server-side and
    without the caller naming the cells. Atomic per row like commit and rollback: a reader
    rolling one of these cells forward at the same time moves it once. Locks prewritten by an
    older schema (Postgres: before version 4) may be left for readers to resolve.
scan_changes
    Committed PUT and DELETE records of a table with after_ts < commit_ts <= upto_ts, in
    (commit_ts, row, column) order; rollback and LOCK records are no changes. Raises
    SnapshotTooOld when after_ts is below the GC safe point (changes there may be collected).
oldest_lock / min_lock_start_ts
    A lock of the table with the smallest start_ts (and that start_ts), LOCK-kind locks
    excepted (they never commit a change), seen in one snapshot per shard in which every cell
    is either a lock or its write record (the basis of ``closed_timestamp``).
"""

from __future__ import annotations

import abc
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from percolator.server.storage.advisory import AdvisorySession
from percolator.server.storage.cells import (
    CellKey,
    CellRead,
    Change,
    ChangeCursor,
    ClearNotification,
    CommitFailure,
    CommitRequest,
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
    RowRead,
    TxnStatus,
    Watch,
)
from percolator.server.storage.channels import Channels, Deliver
from percolator.server.storage.packed import PackedCells, pack_rows
from percolator.server.storage.row_locks import RowLocks

PURGE_ROWS = 10_000
"""Rows of each kind (write records, locks, notifications) one statement of
:meth:`CellStore.purge_table` removes."""

WITH_PRIMARY_CELLS = 1024
"""Cells a primary's commit takes along (itself and secondaries of its shard): more would hold
up the commit point for what the background committer does after it."""


class RowRange(NamedTuple):
    """Row keys [start, end) of a table; ``end`` None: to the table's end."""

    start: bytes
    end: bytes | None


class PrimaryCommit(NamedTuple):
    """The outcome of :meth:`CellStore.commit_primary`."""

    committed: bool
    """The primary is committed: the transaction is."""
    rest: Sequence[CellKey]
    """Secondaries not committed with it, for the caller to commit."""


@dataclass
class StoreStats:
    """Round trips to the backing store, counted per operation name."""

    round_trips: Counter[str] = field(default_factory=Counter)

    def snapshot(self) -> dict[str, int]:
        """A copy of the counters, for diffing before and after an operation."""
        return dict(self.round_trips)


class CellStore(abc.ABC):
    """Single-row atomic, batched operations over one or more shards."""

    stats: StoreStats

    @property
    @abc.abstractmethod
    def shard_count(self) -> int:
        """How many shards the store spans."""

    @abc.abstractmethod
    def shard_of(self, table: str, row: bytes) -> int:
        """The shard that holds a row: a deterministic function of (table, row)."""

    @abc.abstractmethod
    async def prewrite(
        self,
        start_ts: int,
        primary: CellKey,
        ttl_ms: int,
        mutations: Sequence[Mutation],
    ) -> list[PrewriteFailure]:
        """Lock every cell and stage its data. Returns the cells that failed (empty: all locked).

        Cells not reported are locked, even when others failed: the caller rolls them back.
        """

    @abc.abstractmethod
    async def commit(
        self, start_ts: int, commit_ts: int, keys: Sequence[CellKey]
    ) -> list[CommitFailure]:
        """Turn our locks into write records at commit_ts. Returns the cells that failed."""

    async def commit_primary(
        self, start_ts: int, commit_ts: int, primary: CellKey, secondaries: Sequence[CellKey]
    ) -> PrimaryCommit:
        """Commit the primary and, with it, the secondaries on its shard (see the module
        docstring); the rest are returned to the caller."""
        shard = self.shard_of(primary.table, primary.row)
        along: list[CellKey] = [primary]
        rest: list[CellKey] = []
        for key in secondaries:
            if len(along) < WITH_PRIMARY_CELLS and self.shard_of(key.table, key.row) == shard:
                along.append(key)
            else:
                rest.append(key)
        failures = await self._commit_with_primary(start_ts, commit_ts, along)
        return PrimaryCommit(not any(f.key == primary for f in failures), rest)

    @abc.abstractmethod
    async def _commit_with_primary(
        self, start_ts: int, commit_ts: int, keys: Sequence[CellKey]
    ) -> list[CommitFailure]:
        """Commit ``keys`` (``keys[0]`` the primary, all on its shard) in one atomic step, each
        only if the primary's lock is still there (or is committed by this step)."""

    async def commit_batch(self, requests: Sequence[CommitRequest]) -> list[CommitFailure]:
        """:meth:`commit` for the cells of several transactions, sharing statements where the
        store can (the secondaries of transactions that committed at about the same time)."""
        failures: list[CommitFailure] = []
        for r in requests:
            failures += await self.commit(r.start_ts, r.commit_ts, r.keys)
        return failures

    @abc.abstractmethod
    async def rollback(
        self, start_ts: int, keys: Sequence[CellKey], *, leave_marker: bool
    ) -> list[CellKey]:
        """Remove our locks; returns the cells found already committed (left unchanged)."""

    @abc.abstractmethod
    async def read(self, ts: int, keys: Sequence[CellKey]) -> list[CellRead]:
        """Read cells as of ts, in the order given.

        Raises SnapshotTooOld when ts is below the shard's GC safe point.
        """

    @abc.abstractmethod
    def scan(
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
        """Stream the cells of rows in [start, end) as of ts, ordered by (row, column), or
        with ``reverse`` in descending (row, column) order, from the range's end.

        Yields cells with a value and cells blocked by a lock; absent and deleted cells are
        skipped. ``None`` bounds are open. Memory use is bounded by ``page_size`` per shard.
        Both directions read the same snapshot, page the same way and report the same locks
        (those with start_ts <= ts, LOCK-kind locks excepted).
        """

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
        """What :meth:`scan` finds, grouped into rows and yielded a page of rows at a time, in
        row order (descending with ``reverse``): rows with no value and no lock are left out.
        ``prefetch``: a bulk read that will consume every page; the store may fetch the next
        page while the caller works on this one. A store may answer this with less work per
        cell than :meth:`scan`; this default groups :meth:`scan`'s cells."""
        page: list[RowRead] = []
        cells = 0
        current: RowRead | None = None
        scan = self.scan(ts, table, start, end, columns, page_size=page_size, reverse=reverse)
        async for cell in scan:
            if current is None or cell.key.row != current.row:
                if current is not None:
                    page.append(current)
                    if cells >= page_size:
                        yield page
                        page, cells = [], 0
                current = RowRead(cell.key.row, {})
            cells += 1
            if cell.lock is not None:
                current = RowRead(current.row, current.values, (*current.locks, cell.lock))
            elif cell.value is not None:
                current.values[cell.key.column] = cell.value
        if current is not None:
            page.append(current)
        if page:
            yield page

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
    ) -> AsyncIterator[PackedCells | list[RowRead]]:
        """The cells of :meth:`scan_rows` for a bulk reader, packed (:mod:`.packed`) a page
        of about ``page_size`` cells at a time; column codes are positions in ``columns``.
        Rows are in key order within a page and from page to page of one shard, but pages of
        different shards may come in any order. A page on which a lock blocks a cell comes as
        :meth:`scan_rows` gives it instead (rows with their locks), for the caller to resolve.
        This default packs :meth:`scan_rows`' pages."""
        async for rows in self.scan_rows(
            ts, table, start, end, columns, page_size=page_size, prefetch=prefetch
        ):
            if any(r.locks for r in rows):
                yield rows
            else:
                yield pack_rows(((r.row, r.values) for r in rows), columns)

    @abc.abstractmethod
    async def check_txn_status(
        self, primary: CellKey, start_ts: int, now_ts: int, *, rollback_if_missing: bool
    ) -> TxnStatus:
        """The state of the transaction whose primary is ``primary`` (one round trip)."""

    @abc.abstractmethod
    async def heartbeat(self, primary: CellKey, start_ts: int, ttl_ms: int) -> bool:
        """Raise the TTL of our primary lock to at least ttl_ms. False if the lock is gone."""

    @abc.abstractmethod
    async def scan_locks(self, max_start_ts: int, limit: int = 1000) -> list[LockInfo]:
        """Locks with start_ts < max_start_ts, on every shard (for GC and diagnostics)."""

    @abc.abstractmethod
    async def set_gc_safe_point(self, safe_point: int) -> int:
        """Raise every shard's safe point (never lowers it); prewrites at or below now fail.

        Returns the safe point now in force (the highest one ever set).
        """

    @abc.abstractmethod
    async def gc(self, safe_point: int, *, max_records: int | None = None) -> GcResult:
        """Remove versions that no snapshot at or after safe_point can read.

        Keeps, per cell, the newest PUT at or below the safe point (a DELETE there is removed
        with everything older); removes rollback and LOCK records below it. The caller must
        first resolve every lock below the safe point.

        A sweep goes through the cells in key order. With ``max_records``, a call stops after
        about that many write records per shard (whole cells), and the next call on this
        store object continues after the last cell it looked at, starting over once a sweep
        reaches the end: repeated calls bound each pass's cost and still visit every cell.
        Without, the call sweeps everything from the first cell.
        """

    @abc.abstractmethod
    async def purge_table(self, table: str) -> int:
        """Remove every write record, lock and notification of ``table`` on every shard;
        returns how many rows went. For a table that no snapshot reads and no transaction
        writes any more (a dropped or truncated table's storage, past the GC safe point): the
        caller ensures it. Chunked: per shard, one round trip per PURGE_ROWS rows of each
        kind, and one that finds fewer."""

    # -- distributed transactions, change streams, partitioning ----------------------------

    @abc.abstractmethod
    async def commit_locks(self, start_ts: int, commit_ts: int) -> int:
        """Turn every lock with ``start_ts``, on every shard, into a write record at commit_ts
        (setting notifications like :meth:`commit`); returns how many moved.

        For a transaction whose primary is committed: its secondaries, found by start_ts
        server-side, never sent by the caller. Safe to run while readers roll the same locks
        forward, and to repeat.
        """

    @abc.abstractmethod
    async def rollback_locks(self, start_ts: int) -> int:
        """Remove every lock with ``start_ts`` on every shard, leaving no rollback records (the
        caller rolled the primary back first, with its marker); returns how many."""

    @abc.abstractmethod
    async def scan_changes(
        self,
        table: str,
        after_ts: int,
        upto_ts: int,
        *,
        limit: int,
        after: ChangeCursor | None = None,
    ) -> list[Change]:
        """Up to ``limit`` committed PUT/DELETE records of ``table`` with
        after_ts < commit_ts <= upto_ts, in (commit_ts, row, column) order, after ``after``.

        Complete only up to a closed timestamp (secondaries of transactions still committing
        are locks, not yet records). Raises SnapshotTooOld when after_ts is below the GC safe
        point. One round trip per shard.
        """

    @abc.abstractmethod
    async def first_change(
        self,
        table: str,
        ranges: Sequence[RowRange],
        after_ts: int,
        upto_ts: int,
        own_start_ts: int,
    ) -> CellKey | None:
        """A cell of ``table`` in one of ``ranges`` that another transaction changed or is
        changing: one it holds a PUT or DELETE lock on, or one with a PUT or DELETE record
        committed in (after_ts, upto_ts]; None if there is none (a SERIALIZABLE commit's
        check of what it read). Locks and records of ``own_start_ts`` do not count. One
        round trip per shard, each one snapshot: a lock that a commit moves to a record in
        the meantime is seen as one or the other."""

    @abc.abstractmethod
    async def oldest_lock(self, table: str) -> LockInfo | None:
        """A lock of the table with the smallest start_ts, LOCK-kind ones excepted; None when
        there is none. One round trip per shard, each one snapshot."""

    async def min_lock_start_ts(self, table: str) -> int | None:
        """The smallest start_ts among the table's locks, LOCK-kind ones excepted (None: no
        lock); :meth:`oldest_lock`'s start_ts."""
        lock = await self.oldest_lock(table)
        return None if lock is None else lock.start_ts

    @abc.abstractmethod
    async def sample_row_keys(self, table: str, n: int) -> list[bytes]:
        """Up to ``n - 1`` sorted, distinct row keys that split the table's rows into about
        ``n`` ranges of similar size (from exact quantiles on small tables, a sample on big
        ones; balance is approximate). One round trip per shard."""

    # -- notifications (observers) ------------------------------------------------------------

    @abc.abstractmethod
    async def watch(self, observer: str, table: str, columns: Sequence[str]) -> None:
        """From now on, commits to (table, column) notify ``observer`` (idempotent)."""

    @abc.abstractmethod
    async def unwatch(self, observer: str, table: str | None = None) -> None:
        """Remove the observer's watches of ``table``; with no table, remove all of its
        watches, notifications and counters."""

    @abc.abstractmethod
    async def list_watches(self) -> list[Watch]:
        """Every watch (the same on every shard)."""

    @abc.abstractmethod
    async def find_notifications(
        self,
        hash_from: int,
        hash_to: int,
        *,
        now_ms: int,
        limit: int,
        after: NotifyCursor | None = None,
    ) -> list[Notification]:
        """Up to ``limit`` runnable notifications with hash in [hash_from, hash_to], not parked
        and with retry_at_ms <= now_ms, in (hash, observer, table, row) order after ``after``,
        over every shard. One round trip per shard; reads notifications only."""

    @abc.abstractmethod
    async def clear_notifications(self, items: Sequence[ClearNotification]) -> None:
        """Remove each notification whose ts is below its ``below_ts`` (one round trip per
        shard; atomic per row with concurrent commits)."""

    @abc.abstractmethod
    async def defer_notifications(self, items: Sequence[DeferNotification]) -> None:
        """Record failed runs: count the attempt, set retry_at_ms, error and parking."""

    @abc.abstractmethod
    async def retry_parked(self, observer: str) -> int:
        """Unpark every parked notification of ``observer`` (attempts reset); how many."""

    @abc.abstractmethod
    async def parked_notifications(
        self, observer: str | None = None, limit: int = 1000
    ) -> list[ParkedNotification]:
        """Parked notifications (of one observer, or all), oldest ts first."""

    @abc.abstractmethod
    async def notification_summary(self) -> list[NotifySummary]:
        """Pending and parked counts and the oldest pending ts, per observer that has any."""

    @abc.abstractmethod
    async def add_observer_counters(self, deltas: Sequence[ObserverCounters]) -> None:
        """Add run counts to the observers' totals (one round trip)."""

    @abc.abstractmethod
    async def observer_counters(self) -> list[ObserverCounters]:
        """The totals of every observer that has any."""

    @abc.abstractmethod
    async def wait_for_notifications(self, timeout_s: float) -> bool:
        """Wait until some commit sets a notification on any shard, or ``timeout_s`` passes.
        True when woken by a notification. A hint only: callers still poll."""

    def channels(self, deliver: Deliver) -> Channels:
        """LISTEN / NOTIFY for this process's sessions (see channels.py): notifications on the
        channels it listens to go to ``deliver``."""
        raise NotImplementedError

    def advisory_session(self) -> AdvisorySession:
        """A new holder of advisory locks for one SQL session (see advisory.py)."""
        raise NotImplementedError

    def row_locks(self) -> RowLocks:
        """A new holder of pessimistic row locks for one transaction (see row_locks.py)."""
        raise NotImplementedError

    @abc.abstractmethod
    async def close(self) -> None:
        """Release connections."""
