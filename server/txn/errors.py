"""Errors a transaction raises. Each carries the SQLSTATE the SQL layer reports for it."""

from __future__ import annotations

from percolator.server.storage.cells import CellKey


class TxnError(Exception):
    """Base class of transaction errors."""

    sqlstate = "XX000"


class Retryable(TxnError):
    """The transaction was aborted by concurrency; running it again may succeed."""

    sqlstate = "40001"


class WriteConflict(Retryable):
    """Another transaction wrote (or is writing) a cell this one writes."""

    def __init__(self, key: CellKey, start_ts: int, conflict_ts: int, reason: str) -> None:
        super().__init__(
            f"write conflict on {describe_key(key)}: our start_ts {start_ts}, "
            f"conflicting {reason} at ts {conflict_ts}; retry the transaction"
        )
        self.key = key
        self.start_ts = start_ts
        self.conflict_ts = conflict_ts


class SerializationFailure(WriteConflict):
    """A SERIALIZABLE transaction read something another transaction changed before it could
    commit (a read-write dependency that could close a cycle)."""

    pg_message = "could not serialize access due to read/write dependencies among transactions"
    pg_hint = "The transaction might succeed if retried."

    def __init__(self, key: CellKey, start_ts: int, commit_ts: int) -> None:
        Retryable.__init__(
            self,
            f"{describe_key(key)}, read by the transaction with start_ts {start_ts}, was "
            f"changed by another before its commit at ts {commit_ts}; retry the transaction",
        )
        self.key = key
        self.start_ts = start_ts
        self.conflict_ts = commit_ts


class TransactionAborted(Retryable):
    """The transaction was rolled back by another party (its locks expired) before commit."""


class LockWaitTimeout(TxnError):
    """A lock held by a live transaction did not go away within the lock-wait timeout."""

    sqlstate = "55P03"

    def __init__(self, key: CellKey, lock_ts: int, waited_s: float) -> None:
        super().__init__(
            f"lock wait timeout on {describe_key(key)}: locked by the transaction with "
            f"start_ts {lock_ts}, still alive after {waited_s:.1f}s"
        )
        self.key = key
        self.lock_ts = lock_ts


class CommitOutcomeUnknown(TxnError):
    """The commit of the primary was sent but no answer came: it may or may not have happened."""

    sqlstate = "08007"


class TransactionTooLarge(TxnError):
    """The transaction writes more cells or bytes than the documented limits."""

    sqlstate = "54000"


class TransactionTooOld(Retryable):
    """The start_ts fell below the GC safe point: the snapshot may have been collected."""


class TransactionClosed(TxnError):
    """The transaction was already committed or rolled back."""

    sqlstate = "25000"


def describe_key(key: CellKey) -> str:
    """A short, printable description of a cell for error messages."""
    row = key.row.hex() if len(key.row) <= 32 else key.row[:32].hex() + "..."
    return f"table {key.table!r} row 0x{row} column {key.column!r}"
