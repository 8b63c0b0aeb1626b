"""The data model of the cell store: keys, mutations, locks and the results of each operation.

A cell is addressed by (table, row, column). Each cell holds:

- at most one *lock* (the Percolator ``lock`` column): the start_ts of the transaction that holds
  it, the key of that transaction's primary cell, a TTL, the kind of write it will make and, for
  a PUT, the value (the ``data`` column at start_ts is kept inside the lock until commit);
- *write records* at commit timestamps (the ``write`` column): each names the start_ts of the
  transaction that wrote it and its kind. A PUT record carries the value that transaction wrote,
  so a read is one index probe. A ROLLBACK record sits at commit_ts == start_ts of the
  transaction it rolled back and makes any later prewrite of that transaction fail.

Timestamps are 64-bit integers: ``physical milliseconds << TS_LOGICAL_BITS | logical``. The
storage layer needs the physical part only to decide whether a lock's TTL has expired.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum, IntEnum
from typing import NamedTuple

TS_LOGICAL_BITS = 18
"""Low bits of a timestamp that count within one millisecond (262,144 per ms)."""

# Limits enforced before anything is sent to a store (see docs/limits in README).
MAX_TABLE_NAME_BYTES = 128
MAX_ROW_KEY_BYTES = 4096
MAX_COLUMN_NAME_BYTES = 256
MAX_VALUE_BYTES = 16 * 1024 * 1024


def ts_physical_ms(ts: int) -> int:
    """The wall-clock milliseconds encoded in a timestamp."""
    return ts >> TS_LOGICAL_BITS


def ttl_from_now(start_ts: int, ttl_ms: int) -> int:
    """A lock TTL that ends ``ttl_ms`` from now: TTLs count from the start_ts's wall clock, so a
    transaction that read for a while before prewriting must add that time, or its fresh locks
    would already have expired and a reader could roll it back."""
    elapsed_ms = int(time.time() * 1000) - ts_physical_ms(start_ts)
    return max(elapsed_ms, 0) + ttl_ms


def ts_from_physical_ms(ms: int) -> int:
    """The smallest timestamp at wall-clock millisecond ``ms``."""
    return ms << TS_LOGICAL_BITS


class WriteKind(IntEnum):
    """What a lock will write, and what a write record says."""

    PUT = 1
    DELETE = 2
    ROLLBACK = 3
    LOCK = 4
    """Lock-only (SELECT ... FOR UPDATE): commits a record that leaves the value unchanged."""


class CellKey(NamedTuple):
    """The address of one cell. Ordering is (table, row, column), the store's scan order.

    A named tuple rather than a dataclass: every read and write builds and hashes keys (the
    transaction's buffers and read cache are dicts of them), and a tuple does both in C."""

    table: str
    row: bytes
    column: str


class Mutation(NamedTuple):
    """One cell that a transaction writes: a PUT with a value, a DELETE, or a LOCK (a named
    tuple, as :class:`CellKey`: one is built per cell written)."""

    key: CellKey
    kind: WriteKind
    value: bytes | None = None
    since_ts: int = 0
    """Write records with commit_ts >= max(start_ts, since_ts) conflict; 0 means start_ts (a
    READ COMMITTED statement that read the cell at a later snapshot passes that snapshot)."""


@dataclass(frozen=True, slots=True)
class LockInfo:
    """A lock found on a cell."""

    key: CellKey
    start_ts: int
    primary: CellKey
    ttl_ms: int
    kind: WriteKind

    def expired_at(self, now_ts: int) -> bool:
        """True when the TTL, counted from the physical time of start_ts, has run out."""
        return ts_physical_ms(self.start_ts) + self.ttl_ms < ts_physical_ms(now_ts)


class PrewriteStatus(Enum):
    """Why a prewrite of one cell did not take its lock."""

    WRITE_CONFLICT = "write_conflict"
    """A write record at or after our start_ts (or the mutation's later ``since_ts``) exists
    (``conflict_ts`` is the newest such commit_ts)."""
    LOCKED = "locked"
    """Another transaction's lock is on the cell (``lock`` describes it)."""
    ROLLED_BACK = "rolled_back"
    """Our own transaction was already rolled back on this cell (a rollback record exists)."""
    TOO_OLD = "too_old"
    """start_ts is at or below the shard's GC safe point."""
    DUPLICATE = "duplicate"
    """Our own lock (same start_ts) is on the cell with another write (kind or value): two parts
    of one distributed transaction wrote the cell differently (``lock`` describes ours).
    Prewriting the same write again is a success."""


@dataclass(frozen=True, slots=True)
class PrewriteFailure:
    """A cell a prewrite could not lock. Cells not reported failed are locked."""

    key: CellKey
    status: PrewriteStatus
    conflict_ts: int | None = None
    lock: LockInfo | None = None


class CommitStatus(Enum):
    """Why committing one cell failed."""

    LOCK_MISSING = "lock_missing"
    """Neither our lock nor our commit record is there: the transaction was rolled back."""
    ROLLED_BACK = "rolled_back"
    """A rollback record for our start_ts is there."""


@dataclass(frozen=True, slots=True)
class CommitRequest:
    """Cells of one transaction to commit (see :meth:`CellStore.commit_batch`)."""

    start_ts: int
    commit_ts: int
    keys: Sequence[CellKey]


@dataclass(frozen=True, slots=True)
class CommitFailure:
    """A cell that could not be committed. Committing an already-committed cell succeeds."""

    key: CellKey
    status: CommitStatus


class CellRead(NamedTuple):
    """The outcome of reading one cell at a timestamp.

    Exactly one of two cases: ``lock`` is set (a lock with start_ts <= read ts, other than a
    LOCK-kind lock, blocks the read and nothing else is known), or ``lock`` is None and ``value``
    is the newest PUT at or before the read ts (None when absent or deleted), ``commit_ts`` its
    commit timestamp (None when there is no PUT or DELETE record).
    """

    key: CellKey
    value: bytes | None
    commit_ts: int | None = None
    lock: LockInfo | None = None


@dataclass(frozen=True, slots=True)
class RowRead:
    """One row as a scan found it at a timestamp: the values of its cells that have one, and
    the locks that block the reading of others (almost always none); a locked cell has no
    value here, as in :meth:`CellStore.scan`, until its lock is resolved."""

    row: bytes
    values: dict[str, bytes]
    locks: tuple[LockInfo, ...] = ()


class TxnState(Enum):
    """The state of a transaction, as its primary cell tells it."""

    COMMITTED = "committed"
    ROLLED_BACK = "rolled_back"
    LOCKED = "locked"
    """The primary lock is present and has not expired: the transaction may still commit."""
    MISSING = "missing"
    """No lock, no commit record, no rollback record (only when not asked to roll back)."""


@dataclass(frozen=True, slots=True, order=True)
class ChangeCursor:
    """Where a scan of changes stopped: changes are ordered by (commit_ts, row, column)."""

    commit_ts: int
    row: bytes
    column: str


@dataclass(frozen=True, slots=True)
class Change:
    """A committed PUT or DELETE of one cell (a write record), for change streams."""

    key: CellKey
    commit_ts: int
    start_ts: int
    kind: WriteKind
    """PUT or DELETE."""
    value: bytes | None
    """The value written by a PUT; None for a DELETE."""

    @property
    def cursor(self) -> ChangeCursor:
        """The position of this change, to resume a scan after it."""
        return ChangeCursor(self.commit_ts, self.key.row, self.key.column)


@dataclass(frozen=True, slots=True)
class TxnStatus:
    """Answer of :meth:`CellStore.check_txn_status`."""

    state: TxnState
    commit_ts: int | None = None
    lock: LockInfo | None = None


@dataclass(frozen=True, slots=True)
class GcResult:
    """What one GC pass removed."""

    versions_removed: int = 0
    rollback_records_removed: int = 0

    def __add__(self, other: GcResult) -> GcResult:
        return GcResult(
            self.versions_removed + other.versions_removed,
            self.rollback_records_removed + other.rollback_records_removed,
        )


# -- notifications (observers) ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Watch:
    """A committed write of a PUT or DELETE to (table, column) notifies ``observer``."""

    table: str
    column: str
    observer: str


@dataclass(frozen=True, slots=True)
class Notification:
    """A dirty (observer, row): something the observer watches in the row changed.

    ``ts`` is the commit_ts of the newest such write (several writes collapse into one
    notification); ``hash`` is :func:`~percolator.server.storage.sharding.row_hash` of
    (table, row), the key workers split the notify space by.
    """

    observer: str
    table: str
    row: bytes
    ts: int
    hash: int
    attempts: int = 0


@dataclass(frozen=True, slots=True)
class NotifyCursor:
    """Where a scan of notifications stopped: they are ordered by (hash, observer, table, row)."""

    hash: int
    observer: str
    table: str
    row: bytes


@dataclass(frozen=True, slots=True)
class ClearNotification:
    """Remove the notification of (observer, table, row) if its ts is below ``below_ts``: the
    observer ran with a snapshot at ``below_ts``, so it saw every write committed before it.
    A newer write keeps the notification."""

    observer: str
    table: str
    row: bytes
    below_ts: int


@dataclass(frozen=True, slots=True)
class DeferNotification:
    """A failed run of (observer, table, row) for the change at ``ts``: count the attempt, hold
    it back until ``retry_at_ms`` (wall-clock ms), and park it when ``park``. Ignored if a newer
    write has raised the notification's ts since (that change gets fresh attempts)."""

    observer: str
    table: str
    row: bytes
    ts: int
    retry_at_ms: int
    error: str
    park: bool


@dataclass(frozen=True, slots=True)
class ParkedNotification:
    """A change whose observer failed too often; it waits for ``ALTER OBSERVER ... RETRY
    PARKED`` (or a new write to the row)."""

    observer: str
    table: str
    row: bytes
    ts: int
    attempts: int
    last_error: str | None


@dataclass(frozen=True, slots=True)
class NotifySummary:
    """Per observer, over every shard: notifications waiting to run and parked ones."""

    observer: str
    pending: int
    parked: int
    oldest_ts: int | None
    """The smallest ts among the pending (not parked) notifications."""


@dataclass(frozen=True, slots=True)
class ObserverCounters:
    """Counts of an observer's runs (kept on the first shard; workers add their deltas)."""

    observer: str
    runs: int = 0
    commits: int = 0
    conflicts: int = 0
    failures: int = 0
    last_error: str | None = None
    last_error_ms: int | None = None
    """Wall-clock ms of ``last_error``; when deltas are added, the later error wins."""

    def plus(self, delta: ObserverCounters) -> ObserverCounters:
        """These totals with ``delta`` added. The error kept is ``delta``'s if it has one that is
        not older (a missing time counts as the earliest), as the Postgres store's upsert
        decides; a kept time always comes with its error."""
        newer = delta.last_error is not None and (
            self.last_error is None
            or self.last_error_ms is None
            or (delta.last_error_ms is not None and delta.last_error_ms >= self.last_error_ms)
        )
        error = delta if newer else self
        return ObserverCounters(
            self.observer,
            self.runs + delta.runs,
            self.commits + delta.commits,
            self.conflicts + delta.conflicts,
            self.failures + delta.failures,
            error.last_error,
            error.last_error_ms if error.last_error is not None else None,
        )
