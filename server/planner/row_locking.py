"""Pessimistic row locks taken by statements: UPDATE, DELETE, MERGE, INSERT (the keys its rows
take) and SELECT ... FOR UPDATE lock the rows they change or return, as Postgres does, so a
second transaction waits at its statement instead of failing at commit (storage/row_locks.py).

Once a row is locked, the store says whether it changed after the statement's snapshot (the
transaction that held the lock committed a write of it). Under REPEATABLE READ that is
Postgres's serialization failure: 40001 at the statement. Under READ COMMITTED the statement
runs again on a new snapshot (:class:`RowChanged`, caught by the session), keeping the locks it
has, so the second run sees the rows' newest versions: Postgres re-checks the changed rows
instead, with the same outcome for a statement over one table.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from percolator.server.sql.bound import LockClause
from percolator.server.sql.errors import LOCK_NOT_AVAILABLE, SERIALIZATION_FAILURE, SqlError
from percolator.server.storage.cells import CellKey
from percolator.server.txn.transaction import LockWait, RowLock, RowLockUnavailable


@dataclass(frozen=True, slots=True)
class RowLocking:
    """How one statement takes row locks (``ExecContext.row_locking``; None: it takes none,
    as with ``percolator.locking = optimistic``)."""

    timeout_s: float | None = None
    """lock_timeout, when set; else the transaction layer's lock-wait timeout."""
    rerun_changed: bool = False
    """READ COMMITTED: a row changed since the snapshot re-runs the statement."""


class RowChanged(Exception):
    """A row the statement locked changed after its snapshot (READ COMMITTED: the session
    runs the statement again on a new snapshot)."""


async def lock_for_write(ctx: Any, codec: Any, keys: Sequence[bytes]) -> None:
    """Lock the rows (or unique index entries) a statement is about to write, waiting for
    their holders; ``codec`` names where they are (``storage``, ``existence``)."""
    locking: RowLocking | None = ctx.row_locking
    if locking is None or not keys:
        return
    outcomes = await _lock(ctx, locking, codec, keys, LockWait.WAIT)
    if any(o.changed for o in outcomes) or (
        locking.rerun_changed and any(o.waited for o in outcomes)
    ):
        # READ COMMITTED also runs again after a wait for a row that did not change: the
        # holder may have committed rows the statement's checks must see (a child of a parent
        # being deleted), which Postgres's foreign-key triggers see with a new snapshot.
        _changed(locking)


async def lock_for_reference(ctx: Any, cells: Sequence[CellKey]) -> None:
    """A foreign-key check's FOR KEY SHARE on the referenced rows (``cells``: the cells that
    exist iff they do), as Postgres takes: a concurrent DELETE of one waits for this
    transaction, and this one waits for an uncommitted DELETE. Under READ COMMITTED a row that
    changed or was waited for runs the statement again; under REPEATABLE READ the commit
    check decides (a parent updated meanwhile is no conflict)."""
    locking: RowLocking | None = ctx.row_locking
    if locking is None or not cells:
        return
    outcomes = await ctx.txn.lock_rows(cells, LockWait.WAIT, locking.timeout_s, shared=True)
    if locking.rerun_changed and any(o.changed or o.waited for o in outcomes):
        raise RowChanged()


async def lock_for_select(
    ctx: Any, codec: Any, found: list[tuple[bytes, Any]], clause: LockClause
) -> list[Any]:
    """SELECT ... FOR UPDATE / FOR SHARE: lock the rows found (``(key, row)`` pairs) and
    return the rows to yield: all of them, less those another transaction holds under SKIP
    LOCKED. Each row kept FOR UPDATE also gets a lock-only write at commit, which keeps writers
    that take no row locks (Spark, observers) from changing it under this transaction (write
    skew); FOR SHARE rows get none, since two sharers' lock-only writes would conflict."""
    locking: RowLocking | None = ctx.row_locking
    kept = found
    if locking is not None and found:
        keys = [k for k, _ in found]
        try:
            outcomes = await _lock(ctx, locking, codec, keys, clause.wait, clause.shared)
        except RowLockUnavailable as exc:
            if clause.wait is not LockWait.NOWAIT:
                raise
            raise SqlError(
                LOCK_NOT_AVAILABLE,
                f'could not obtain lock on row in relation "{codec.table.name}"',
            ) from exc
        if any(o.changed for o in outcomes if o.taken):
            _changed(locking)
        kept = [f for f, o in zip(found, outcomes, strict=True) if o.taken]
    if not clause.shared:
        for key, _ in kept:
            codec.lock(ctx.txn, key)
    return [row for _, row in kept]


async def _lock(
    ctx: Any,
    locking: RowLocking,
    codec: Any,
    keys: Sequence[bytes],
    wait: LockWait,
    shared: bool = False,
) -> list[RowLock]:
    """The transaction's lock_rows on the cells every write of these rows writes."""
    cells = [CellKey(codec.storage, k, codec.existence) for k in keys]
    outcomes: list[RowLock] = await ctx.txn.lock_rows(cells, wait, locking.timeout_s, shared=shared)
    return outcomes


def _changed(locking: RowLocking) -> None:
    if locking.rerun_changed:
        raise RowChanged()
    raise SqlError(SERIALIZATION_FAILURE, "could not serialize access due to concurrent update")
