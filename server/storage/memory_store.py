"""An in-memory cell store for fast unit tests.

It keeps the same semantics as the Postgres store (the contract suite runs against both) and
counts round trips the same way: one per shard batch. Each operation runs without awaiting
in the middle, so it is atomic on the event loop, like a single-row transaction.
"""

from __future__ import annotations

import asyncio
import bisect
from collections import defaultdict
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass

from percolator.server.storage.advisory import (
    AdvisorySession,
    LocalAdvisorySession,
    LocalLockTable,
)
from percolator.server.storage.cells import (
    CellKey,
    CellRead,
    Change,
    ChangeCursor,
    ClearNotification,
    CommitFailure,
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
    TxnState,
    TxnStatus,
    Watch,
    WriteKind,
)
from percolator.server.storage.channels import Channels, Deliver, LocalChannels
from percolator.server.storage.errors import SnapshotTooOld
from percolator.server.storage.row_locks import LocalRowLockTable, RowLocks
from percolator.server.storage.sharding import row_hash, shard_for
from percolator.server.storage.split_points import quantile_points
from percolator.server.storage.store import PURGE_ROWS, CellStore, RowRange, StoreStats

_LOCKS_PER_STATEMENT = 1024
"""As the Postgres store's LOCKS_PER_STATEMENT, for counting round trips the same way."""


@dataclass(frozen=True, slots=True)
class _Lock:
    info: LockInfo
    value: bytes | None


@dataclass(frozen=True, slots=True)
class _Write:
    commit_ts: int
    start_ts: int
    kind: WriteKind
    value: bytes | None


@dataclass(slots=True)
class _Notify:
    """One notification's mutable state (a row of ``percolator_notify``)."""

    ts: int
    hash: int
    attempts: int = 0
    retry_at_ms: int = 0
    parked: bool = False
    last_error: str | None = None


class _Cell:
    """One cell: an optional lock and its write records, newest first."""

    __slots__ = ("lock", "writes")

    def __init__(self) -> None:
        self.lock: _Lock | None = None
        self.writes: list[_Write] = []  # sorted by commit_ts descending

    def add_write(self, record: _Write) -> None:
        keys = [-w.commit_ts for w in self.writes]
        self.writes.insert(bisect.bisect_left(keys, -record.commit_ts), record)

    def record_of(self, start_ts: int) -> _Write | None:
        """Our write record (any kind) at or after start_ts."""
        for w in self.writes:
            if w.commit_ts < start_ts:
                return None
            if w.start_ts == start_ts:
                return w
        return None

    def visible(self, ts: int) -> _Write | None:
        """The newest PUT or DELETE record at or before ts."""
        for w in self.writes:
            if w.commit_ts <= ts and w.kind in (WriteKind.PUT, WriteKind.DELETE):
                return w
        return None


class MemoryCellStore(CellStore):
    """Cells in a dict; ``shards`` only changes how round trips are counted."""

    def __init__(self, shards: int = 1) -> None:
        self._shards = shards
        self._cells: dict[CellKey, _Cell] = defaultdict(_Cell)
        self._safe_point = 0
        self._gc_cursor: CellKey | None = None
        self.stats = StoreStats()
        self._watches: set[Watch] = set()
        self._notify: dict[tuple[str, str, bytes], _Notify] = {}
        self._counters: dict[str, ObserverCounters] = {}
        self._notified = asyncio.Event()
        self._advisory = LocalLockTable()
        self._row_locks = LocalRowLockTable(self._row_states)

    @property
    def shard_count(self) -> int:
        return self._shards

    def shard_of(self, table: str, row: bytes) -> int:
        return shard_for(table, row, self._shards)

    async def _round_trips(self, op: str, keys: Iterable[CellKey]) -> None:
        shards = {self.shard_of(k.table, k.row) for k in keys}
        self.stats.round_trips[op] += len(shards)
        await asyncio.sleep(0)  # let other tasks interleave between batches, as I/O would

    async def prewrite(
        self, start_ts: int, primary: CellKey, ttl_ms: int, mutations: Sequence[Mutation]
    ) -> list[PrewriteFailure]:
        await self._round_trips("prewrite", (m.key for m in mutations))
        failures = []
        for m in mutations:
            failure = self._prewrite_one(start_ts, primary, ttl_ms, m)
            if failure is not None:
                failures.append(failure)
        return failures

    def _prewrite_one(
        self, start_ts: int, primary: CellKey, ttl_ms: int, m: Mutation
    ) -> PrewriteFailure | None:
        if start_ts <= self._safe_point:
            return PrewriteFailure(m.key, PrewriteStatus.TOO_OLD)
        cell = self._cells[m.key]
        if cell.lock is not None:
            if cell.lock.info.start_ts != start_ts:
                return PrewriteFailure(m.key, PrewriteStatus.LOCKED, lock=cell.lock.info)
            value = m.value if m.kind == WriteKind.PUT else None
            if cell.lock.info.kind != m.kind or cell.lock.value != value:
                return PrewriteFailure(m.key, PrewriteStatus.DUPLICATE, lock=cell.lock.info)
            return None
        newer = [w for w in cell.writes if w.commit_ts >= start_ts]  # newest first
        if any(w.kind == WriteKind.ROLLBACK and w.start_ts == start_ts for w in newer):
            return PrewriteFailure(m.key, PrewriteStatus.ROLLED_BACK)
        # A later since_ts (READ COMMITTED) only moves the lower bound of the conflict window.
        since = max(start_ts, m.since_ts)
        if newer and newer[0].commit_ts >= since:
            return PrewriteFailure(
                m.key, PrewriteStatus.WRITE_CONFLICT, conflict_ts=newer[0].commit_ts
            )
        info = LockInfo(m.key, start_ts, primary, ttl_ms, m.kind)
        cell.lock = _Lock(info, m.value if m.kind == WriteKind.PUT else None)
        return None

    async def commit(
        self, start_ts: int, commit_ts: int, keys: Sequence[CellKey]
    ) -> list[CommitFailure]:
        await self._round_trips("commit", keys)
        failures = []
        for key in keys:
            cell = self._cells[key]
            if cell.lock is not None and cell.lock.info.start_ts == start_ts:
                self._commit_lock(key, cell, commit_ts)
                continue
            record = cell.record_of(start_ts)
            if record is None:
                failures.append(CommitFailure(key, CommitStatus.LOCK_MISSING))
            elif record.kind == WriteKind.ROLLBACK:
                failures.append(CommitFailure(key, CommitStatus.ROLLED_BACK))
        return failures

    async def _commit_with_primary(
        self, start_ts: int, commit_ts: int, keys: Sequence[CellKey]
    ) -> list[CommitFailure]:
        lock = self._cells[keys[0]].lock
        if lock is not None and lock.info.start_ts == start_ts:
            return await self.commit(start_ts, commit_ts, keys)
        # The primary is gone (committed already, or rolled back): its own outcome only.
        return await self.commit(start_ts, commit_ts, keys[:1])

    def _commit_lock(self, key: CellKey, cell: _Cell, commit_ts: int) -> None:
        """Turn the cell's lock into a write record, notifying watchers of a PUT or DELETE."""
        lock = cell.lock
        assert lock is not None
        cell.lock = None
        cell.add_write(_Write(commit_ts, lock.info.start_ts, lock.info.kind, lock.value))
        if lock.info.kind in (WriteKind.PUT, WriteKind.DELETE):
            self._notify_watchers(key, commit_ts)

    async def rollback(
        self, start_ts: int, keys: Sequence[CellKey], *, leave_marker: bool
    ) -> list[CellKey]:
        await self._round_trips("rollback", keys)
        committed = []
        for key in keys:
            if self._rollback_one(key, start_ts, leave_marker):
                committed.append(key)
        return committed

    def _rollback_one(self, key: CellKey, start_ts: int, leave_marker: bool) -> bool:
        """Roll back one cell; True if it turned out to be committed."""
        cell = self._cells[key]
        record = cell.record_of(start_ts)
        if record is not None:
            return record.kind != WriteKind.ROLLBACK
        if cell.lock is not None and cell.lock.info.start_ts == start_ts:
            cell.lock = None
        if leave_marker:
            cell.add_write(_Write(start_ts, start_ts, WriteKind.ROLLBACK, None))
        return False

    async def read(self, ts: int, keys: Sequence[CellKey]) -> list[CellRead]:
        await self._round_trips("read", keys)
        self._check_snapshot(ts)
        return [self._read_one(ts, key) for key in keys]

    def _check_snapshot(self, ts: int) -> None:
        if ts < self._safe_point:
            raise SnapshotTooOld(ts, self._safe_point)

    def _read_one(self, ts: int, key: CellKey) -> CellRead:
        cell = self._cells.get(key)
        if cell is None:
            return CellRead(key, None)
        lock = cell.lock
        if lock is not None and lock.info.start_ts <= ts and lock.info.kind != WriteKind.LOCK:
            return CellRead(key, None, lock=lock.info)
        record = cell.visible(ts)
        if record is None:
            return CellRead(key, None)
        return CellRead(
            key, record.value if record.kind == WriteKind.PUT else None, record.commit_ts
        )

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
        self._check_snapshot(ts)
        wanted = set(columns) if columns is not None else None
        keys = sorted(
            (
                k
                for k in self._cells
                if k.table == table
                and (start is None or k.row >= start)
                and (end is None or k.row < end)
                and (wanted is None or k.column in wanted)
            ),
            reverse=reverse,
        )
        shards = {self.shard_of(k.table, k.row) for k in keys} or {0}
        self.stats.round_trips["scan"] += max(len(shards), (len(keys) + page_size - 1) // page_size)
        for i, key in enumerate(keys):
            if i % page_size == 0:
                await asyncio.sleep(0)
            result = self._read_one(ts, key)
            if result.lock is not None or result.value is not None:
                yield result

    async def check_txn_status(
        self, primary: CellKey, start_ts: int, now_ts: int, *, rollback_if_missing: bool
    ) -> TxnStatus:
        await self._round_trips("check_txn_status", [primary])
        cell = self._cells[primary]
        record = cell.record_of(start_ts)
        if record is not None:
            if record.kind == WriteKind.ROLLBACK:
                return TxnStatus(TxnState.ROLLED_BACK)
            return TxnStatus(TxnState.COMMITTED, commit_ts=record.commit_ts)
        lock = cell.lock
        if lock is not None and lock.info.start_ts == start_ts:
            if not lock.info.expired_at(now_ts):
                return TxnStatus(TxnState.LOCKED, lock=lock.info)
        elif not rollback_if_missing:
            return TxnStatus(TxnState.MISSING)
        self._rollback_one(primary, start_ts, leave_marker=True)
        return TxnStatus(TxnState.ROLLED_BACK)

    async def heartbeat(self, primary: CellKey, start_ts: int, ttl_ms: int) -> bool:
        await self._round_trips("heartbeat", [primary])
        cell = self._cells.get(primary)
        if cell is None or cell.lock is None or cell.lock.info.start_ts != start_ts:
            return False
        info = cell.lock.info
        if ttl_ms > info.ttl_ms:
            cell.lock = _Lock(
                LockInfo(info.key, info.start_ts, info.primary, ttl_ms, info.kind),
                cell.lock.value,
            )
        return True

    async def scan_locks(self, max_start_ts: int, limit: int = 1000) -> list[LockInfo]:
        self.stats.round_trips["scan_locks"] += self._shards
        locks = sorted(
            (
                c.lock.info
                for c in self._cells.values()
                if c.lock is not None and c.lock.info.start_ts < max_start_ts
            ),
            key=lambda info: info.key,
        )
        return locks[:limit]

    async def set_gc_safe_point(self, safe_point: int) -> int:
        self.stats.round_trips["set_gc_safe_point"] += self._shards
        self._safe_point = max(self._safe_point, safe_point)
        return self._safe_point

    async def gc(self, safe_point: int, *, max_records: int | None = None) -> GcResult:
        self.stats.round_trips["gc"] += self._shards
        if max_records is None:
            self._gc_cursor = None
        keys = sorted(k for k in self._cells if self._gc_cursor is None or k > self._gc_cursor)
        total = GcResult()
        seen = 0
        for k in keys:
            cell = self._cells[k]
            seen += len(cell.writes)
            total = total + _gc_cell(cell, safe_point)
            if max_records is not None and seen >= max_records:
                self._gc_cursor = k
                return total
        self._gc_cursor = None
        return total

    async def purge_table(self, table: str) -> int:
        # Rows of each kind per shard (write records, locks, notifications), counted as the
        # Postgres store's statements go: per shard, one per PURGE_ROWS of its largest kind.
        per_shard = [[0, 0, 0] for _ in range(self._shards)]
        for k in [k for k in self._cells if k.table == table]:
            cell = self._cells.pop(k)
            counts = per_shard[self.shard_of(table, k.row)]
            counts[0] += len(cell.writes)
            counts[1] += cell.lock is not None
        for n in [n for n in self._notify if n[1] == table]:
            del self._notify[n]
            per_shard[self.shard_of(table, n[2])][2] += 1
        self.stats.round_trips["purge_table"] += sum(1 + max(c) // PURGE_ROWS for c in per_shard)
        return sum(map(sum, per_shard))

    # -- distributed transactions, change streams, partitioning ----------------------------

    def _locks_of(self, start_ts: int) -> tuple[list[tuple[CellKey, _Cell]], int]:
        """The cells locked by ``start_ts``, counting the round trips of the Postgres store's
        chunked statements (per shard: one per 1,024 locks, and one that finds fewer)."""
        found = [
            (k, c)
            for k, c in self._cells.items()
            if c.lock is not None and c.lock.info.start_ts == start_ts
        ]
        per_shard = [0] * self._shards
        for k, _ in found:
            per_shard[self.shard_of(k.table, k.row)] += 1
        return found, sum(n // _LOCKS_PER_STATEMENT + 1 for n in per_shard)

    async def commit_locks(self, start_ts: int, commit_ts: int) -> int:
        found, trips = self._locks_of(start_ts)
        self.stats.round_trips["commit_locks"] += trips
        for key, cell in found:
            self._commit_lock(key, cell, commit_ts)
        await asyncio.sleep(0)
        return len(found)

    async def rollback_locks(self, start_ts: int) -> int:
        found, trips = self._locks_of(start_ts)
        self.stats.round_trips["rollback_locks"] += trips
        for _, cell in found:
            cell.lock = None
        await asyncio.sleep(0)
        return len(found)

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
        self.stats.round_trips["scan_changes"] += self._shards
        if after_ts < self._safe_point:
            raise SnapshotTooOld(after_ts, self._safe_point)
        changes = sorted(
            (
                Change(key, w.commit_ts, w.start_ts, w.kind, w.value)
                for key, cell in self._cells.items()
                if key.table == table
                for w in cell.writes
                if w.kind in (WriteKind.PUT, WriteKind.DELETE) and after_ts < w.commit_ts <= upto_ts
            ),
            key=lambda c: c.cursor,
        )
        if after is not None:
            changes = [c for c in changes if c.cursor > after]
        return changes[:limit]

    async def first_change(
        self,
        table: str,
        ranges: Sequence[RowRange],
        after_ts: int,
        upto_ts: int,
        own_start_ts: int,
    ) -> CellKey | None:
        self.stats.round_trips["first_change"] += self._shards
        writes = (WriteKind.PUT, WriteKind.DELETE)
        for key, cell in sorted(self._cells.items()):
            if key.table != table or not any(
                r.start <= key.row and (r.end is None or key.row < r.end) for r in ranges
            ):
                continue
            lock = cell.lock
            if lock is not None and lock.info.start_ts != own_start_ts and lock.info.kind in writes:
                return key
            if any(
                w.kind in writes
                and after_ts < w.commit_ts <= upto_ts
                and w.start_ts != own_start_ts
                for w in cell.writes
            ):
                return key
        return None

    async def oldest_lock(self, table: str) -> LockInfo | None:
        self.stats.round_trips["oldest_lock"] += self._shards
        return min(
            (
                c.lock.info
                for k, c in self._cells.items()
                if k.table == table and c.lock is not None and c.lock.info.kind != WriteKind.LOCK
            ),
            key=lambda info: info.start_ts,
            default=None,
        )

    async def sample_row_keys(self, table: str, n: int) -> list[bytes]:
        if n < 2:
            return []
        self.stats.round_trips["sample_row_keys"] += self._shards
        rows = sorted(
            {
                k.row
                for k, c in self._cells.items()
                if k.table == table
                and any(w.kind in (WriteKind.PUT, WriteKind.DELETE) for w in c.writes)
            }
        )
        return sorted(set(quantile_points(rows, n)))

    # -- notifications (observers) ------------------------------------------------------------

    def _notify_watchers(self, key: CellKey, commit_ts: int) -> None:
        """Set the notifications of a committed PUT or DELETE (part of the commit's step)."""
        notified = False
        for w in self._watches:
            if w.table != key.table or w.column != key.column:
                continue
            n = self._notify.get((w.observer, key.table, key.row))
            if n is None:
                self._notify[(w.observer, key.table, key.row)] = _Notify(
                    commit_ts, row_hash(key.table, key.row)
                )
            else:
                # A new write: fresh attempts, unparked.
                n.ts = max(n.ts, commit_ts)
                n.attempts, n.retry_at_ms, n.parked, n.last_error = 0, 0, False, None
            notified = True
        if notified:
            self._notified.set()

    async def watch(self, observer: str, table: str, columns: Sequence[str]) -> None:
        self.stats.round_trips["watch"] += self._shards
        self._watches.update(Watch(table, c, observer) for c in columns)

    async def unwatch(self, observer: str, table: str | None = None) -> None:
        self.stats.round_trips["unwatch"] += self._shards
        self._watches = {
            w
            for w in self._watches
            if not (w.observer == observer and (table is None or w.table == table))
        }
        if table is None:
            self.stats.round_trips["unwatch"] += self._shards
            self._notify = {k: n for k, n in self._notify.items() if k[0] != observer}
            self._counters.pop(observer, None)

    async def list_watches(self) -> list[Watch]:
        self.stats.round_trips["list_watches"] += self._shards
        return sorted(self._watches, key=lambda w: (w.table, w.column, w.observer))

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
        self.stats.round_trips["find_notifications"] += self._shards
        cursor = (after.hash, after.observer, after.table, after.row) if after else None
        found = sorted(
            (n.hash, observer, table, row, n)
            for (observer, table, row), n in self._notify.items()
            if hash_from <= n.hash <= hash_to
            and not n.parked
            and n.retry_at_ms <= now_ms
            and (cursor is None or (n.hash, observer, table, row) > cursor)
        )
        return [
            Notification(observer, table, row, n.ts, h, n.attempts)
            for h, observer, table, row, n in found[:limit]
        ]

    async def clear_notifications(self, items: Sequence[ClearNotification]) -> None:
        await self._round_trips("clear_notifications", (_row_key(it) for it in items))
        for it in items:
            n = self._notify.get((it.observer, it.table, it.row))
            if n is not None and n.ts < it.below_ts:
                del self._notify[(it.observer, it.table, it.row)]

    async def defer_notifications(self, items: Sequence[DeferNotification]) -> None:
        await self._round_trips("defer_notifications", (_row_key(it) for it in items))
        for it in items:
            n = self._notify.get((it.observer, it.table, it.row))
            if n is not None and n.ts <= it.ts:
                n.attempts += 1
                n.retry_at_ms, n.last_error, n.parked = it.retry_at_ms, it.error, it.park

    async def retry_parked(self, observer: str) -> int:
        self.stats.round_trips["retry_parked"] += self._shards
        count = 0
        for (obs, _, _), n in self._notify.items():
            if obs == observer and n.parked:
                n.parked, n.attempts, n.retry_at_ms, n.last_error = False, 0, 0, None
                count += 1
        return count

    async def parked_notifications(
        self, observer: str | None = None, limit: int = 1000
    ) -> list[ParkedNotification]:
        self.stats.round_trips["parked_notifications"] += self._shards
        parked = sorted(
            (n.ts, obs, table, row, n)
            for (obs, table, row), n in self._notify.items()
            if n.parked and (observer is None or obs == observer)
        )
        return [
            ParkedNotification(obs, table, row, ts, n.attempts, n.last_error)
            for ts, obs, table, row, n in parked[: max(limit, 0)]
        ]

    async def notification_summary(self) -> list[NotifySummary]:
        self.stats.round_trips["notification_summary"] += self._shards
        pending: dict[str, int] = defaultdict(int)
        parked: dict[str, int] = defaultdict(int)
        oldest: dict[str, int] = {}
        for (obs, _, _), n in self._notify.items():
            if n.parked:
                parked[obs] += 1
            else:
                pending[obs] += 1
                oldest[obs] = min(oldest.get(obs, n.ts), n.ts)
        return [
            NotifySummary(obs, pending[obs], parked[obs], oldest.get(obs))
            for obs in sorted(pending.keys() | parked.keys())
        ]

    async def add_observer_counters(self, deltas: Sequence[ObserverCounters]) -> None:
        if not deltas:
            return
        self.stats.round_trips["add_observer_counters"] += 1
        for d in deltas:
            prev = self._counters.get(d.observer, ObserverCounters(d.observer))
            self._counters[d.observer] = prev.plus(d)

    async def observer_counters(self) -> list[ObserverCounters]:
        self.stats.round_trips["observer_counters"] += 1
        return [self._counters[o] for o in sorted(self._counters)]

    async def wait_for_notifications(self, timeout_s: float) -> bool:
        try:
            async with asyncio.timeout(timeout_s):
                await self._notified.wait()
        except TimeoutError:
            return False
        self._notified.clear()
        return True

    def channels(self, deliver: Deliver) -> Channels:
        return LocalChannels(deliver)

    def advisory_session(self) -> AdvisorySession:
        return LocalAdvisorySession(self._advisory)

    def row_locks(self) -> RowLocks:
        return self._row_locks.session()

    def _row_states(
        self, keys: Sequence[CellKey]
    ) -> list[tuple[int | None, int | None, int | None]]:
        """Each cell's newest commit_ts of a PUT or DELETE, its newest of a LOCK record, and
        its lock's start_ts."""
        out: list[tuple[int | None, int | None, int | None]] = []
        changes = (WriteKind.PUT, WriteKind.DELETE)
        for k in keys:
            cell = self._cells.get(k)
            if cell is None:
                out.append((None, None, None))
                continue
            newest = next((w.commit_ts for w in cell.writes if w.kind in changes), None)
            locked = next((w.commit_ts for w in cell.writes if w.kind == WriteKind.LOCK), None)
            lock_ts = None if cell.lock is None else cell.lock.info.start_ts
            out.append((newest, locked, lock_ts))
        return out

    async def close(self) -> None:
        return None


def _row_key(item: ClearNotification | DeferNotification) -> CellKey:
    """A key of the item's row, for counting the shards a batch touches."""
    return CellKey(item.table, item.row, "")


def _gc_cell(cell: _Cell, safe_point: int) -> GcResult:
    """Drop the versions of one cell that no snapshot at or after safe_point reads."""
    keep: list[_Write] = []
    versions = markers = 0
    seen_visible = False
    for w in cell.writes:  # newest first
        if w.commit_ts > safe_point:
            keep.append(w)
        elif w.kind in (WriteKind.ROLLBACK, WriteKind.LOCK):
            if w.commit_ts < safe_point:
                markers += w.kind == WriteKind.ROLLBACK
                versions += w.kind == WriteKind.LOCK
            else:
                keep.append(w)
        elif not seen_visible:
            seen_visible = True
            if w.kind == WriteKind.PUT:
                keep.append(w)
            else:
                versions += 1
        else:
            versions += 1
    cell.writes = keep
    return GcResult(versions, markers)
