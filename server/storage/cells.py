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

from dataclasses import dataclass
from enum import Enum, IntEnum

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


@dataclass(frozen=True, slots=True, order=True)
class CellKey:
    """The address of one cell. Ordering is (table, row, column), the store's scan order."""

    table: str
    row: bytes
    column: str


@dataclass(frozen=True, slots=True)
class Mutation:
    """One cell that a transaction writes: a PUT with a value, a DELETE, or a LOCK."""

    key: CellKey
    kind: WriteKind
    value: bytes | None = None


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
    """A write record at or after our start_ts exists (``conflict_ts`` is its commit_ts)."""
    LOCKED = "locked"
    """Another transaction's lock is on the cell (``lock`` describes it)."""
    ROLLED_BACK = "rolled_back"
    """Our own transaction was already rolled back on this cell (a rollback record exists)."""
    TOO_OLD = "too_old"
    """start_ts is at or below the shard's GC safe point."""


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
class CommitFailure:
    """A cell that could not be committed. Committing an already-committed cell succeeds."""

    key: CellKey
    status: CommitStatus


@dataclass(frozen=True, slots=True)
class CellRead:
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


class TxnState(Enum):
    """The state of a transaction, as its primary cell tells it."""

    COMMITTED = "committed"
    ROLLED_BACK = "rolled_back"
    LOCKED = "locked"
    """The primary lock is present and has not expired: the transaction may still commit."""
    MISSING = "missing"
    """No lock, no commit record, no rollback record (only when not asked to roll back)."""


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
