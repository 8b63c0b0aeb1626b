"""Pessimistic row locks taken by statements: UPDATE, DELETE, MERGE, INSERT (the keys its rows
take) and SELECT ... FOR UPDATE lock the rows they change or return, as Postgres does, so a
second transaction waits at its statement instead of failing at commit (storage/row_locks.py).

Once a row is locked, the store says whether it changed after the statement's snapshot (the
transaction that held the lock committed a write of it). Under REPEATABLE READ that is
Postgres's serialization failure: 40001 at the statement. Under READ COMMITTED the changed rows
are re-checked, as Postgres's EvalPlanQual does: their newest versions are read (they stay
newest: we hold their locks) and go through the statement's filters again, with everything else
as the statement's snapshot had it (Node.recheck_keys); a row deleted or no longer matching is
left out, the others are updated, deleted or returned as they are now. The keys an INSERT
takes are looked up at their newest state likewise (lock_new_keys). Where rows cannot be
re-checked one by one (a join, a foreign key's check, an upsert's update, an UPDATE's new key),
the statement runs again on a new snapshot instead (:class:`RowChanged`, caught by the
session), keeping the locks it has.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from percolator.server.planner.row_codec import Row, RowCodec
from percolator.server.sql.bound import LockClause
from percolator.server.sql.errors import LOCK_NOT_AVAILABLE, SERIALIZATION_FAILURE, SqlError
from percolator.server.storage.cells import CellKey
from percolator.server.txn.transaction import (
    LockWait,
    RowLock,
    RowLockMode,
    RowLockUnavailable,
)

Recheck = Callable[[list[bytes]], Awaitable[tuple[int, dict[bytes, Row | None]]]]
"""Re-checks changed rows by key: the timestamp they were read at, and each row as the
statement yields it now, or None (see physical.Node.recheck_keys)."""


@dataclass(frozen=True, slots=True)
class RowLocking:
    """How one statement takes row locks (``ExecContext.row_locking``; None: it takes none,
    as with ``percolator.locking = optimistic``)."""

    timeout_s: float | None = None
    """lock_timeout, when set; else Transaction.lock_rows's default (unbounded on one shard,
    the lock-wait timeout on several)."""
    read_committed: bool = False
    """READ COMMITTED: a row changed since the snapshot is re-checked, or the statement runs
    again; else it is a serialization failure."""
    can_rerun: bool = True
    """False where the statement cannot run again (a cursor's rows are being fetched): a
    changed row that cannot be re-checked is a serialization failure."""


class RowChanged(Exception):
    """A row the statement locked changed after its snapshot (READ COMMITTED: the session
    runs the statement again on a new snapshot)."""


async def lock_for_write(
    ctx: Any,
    codec: Any,
    keys: Sequence[bytes],
    *,
    recheck: bool = False,
    referenced: bool = False,
    mode: RowLockMode = RowLockMode.UPDATE,
) -> set[bytes]:
    """Lock the rows (or unique index entries) a statement is about to write, waiting for
    their holders; ``codec`` names where they are (``storage``, ``existence``).

    Returns the rows that changed after the snapshot when the caller re-checks them
    (``recheck``, READ COMMITTED only). ``referenced``: rows other tables' foreign keys
    reference, whose checks of those tables must see what a holder we waited for committed
    (a child inserted while its parent was being deleted): under READ COMMITTED a wait runs
    the statement again, as Postgres's foreign-key triggers check with a new snapshot.
    ``mode``: NO_KEY_UPDATE for an UPDATE that changes no key column (a foreign key's check
    of the row does not wait for it)."""
    locking: RowLocking | None = ctx.row_locking
    if locking is None or not keys:
        return set()
    outcomes = await _lock(ctx, locking, codec, keys, LockWait.WAIT, mode)
    if locking.read_committed and referenced and any(o.waited for o in outcomes):
        stale_statement(locking)
    changed = {k for k, o in zip(keys, outcomes, strict=True) if o.changed}
    if changed and not (recheck and locking.read_committed):
        stale_statement(locking)
    return changed


async def lock_new_keys(ctx: Any, codec: Any, keys: Sequence[bytes]) -> set[bytes]:
    """Lock keys an INSERT (or an UPDATE's new values) is about to take, as FOR NO KEY UPDATE:
    a second taker waits for the first, as do the key's updaters and deleters, while a foreign
    key's check of an existing row of that key (FOR KEY SHARE) makes it wait for nothing, as
    in Postgres (whose INSERT finds such a row taken at once). Returns those that changed
    after the snapshot (their first taker committed): the caller finds out at their newest
    state whether they are taken now, as Postgres's unique check does, whatever the isolation
    level."""
    locking: RowLocking | None = ctx.row_locking
    if locking is None or not keys:
        return set()
    outcomes = await _lock(ctx, locking, codec, keys, LockWait.WAIT, RowLockMode.NO_KEY_UPDATE)
    return {k for k, o in zip(keys, outcomes, strict=True) if o.changed}


async def lock_for_reference(ctx: Any, cells: Sequence[CellKey]) -> None:
    """A foreign-key check's FOR KEY SHARE on the referenced rows (``cells``: the cells that
    exist iff they do), as Postgres takes: a concurrent DELETE of one waits for this
    transaction, and this one waits for an uncommitted DELETE. Under READ COMMITTED a row that
    changed or was waited for runs the statement again; under REPEATABLE READ one deleted
    since (or whose key changed) fails the statement with 40001, one updated is no conflict,
    and the commit check covers the rest."""
    locking: RowLocking | None = ctx.row_locking
    if locking is None or not cells:
        return
    outcomes = await ctx.txn.lock_rows(
        cells, LockWait.WAIT, locking.timeout_s, mode=RowLockMode.KEY_SHARE
    )
    if locking.read_committed:
        if any(o.changed or o.waited for o in outcomes):
            stale_statement(locking)
        return
    # REPEATABLE READ: a referenced row updated since is still the row the check found (its
    # key did not change: that would have deleted it here); one deleted, or whose key moved,
    # is Postgres's serialization failure at the statement.
    changed = [c for c, o in zip(cells, outcomes, strict=True) if o.changed]
    if changed:
        _, values = await ctx.txn.read_newest(changed)
        if any(v is None for v in values):
            stale_statement(locking)


async def lock_for_select(
    ctx: Any,
    codec: Any,
    found: list[tuple[bytes, Any]],
    clause: LockClause,
    recheck: Recheck | None = None,
) -> list[Any]:
    """SELECT ... FOR UPDATE / FOR SHARE: lock the rows found (``(key, row)`` pairs) and
    return the rows to yield: all of them, less those another transaction holds under SKIP
    LOCKED. Each row kept FOR UPDATE also gets a lock-only write at commit, which keeps writers
    that take no row locks (Spark, observers) from changing it under this transaction (write
    skew); FOR SHARE rows get none, since two sharers' lock-only writes would conflict.
    ``recheck``: how rows that changed are re-checked under READ COMMITTED (None: the
    statement runs again)."""
    locking: RowLocking | None = ctx.row_locking
    kept = found
    newest: dict[bytes, Any] = {}
    newest_ts: int | None = None
    if locking is not None and found:
        keys = [k for k, _ in found]
        try:
            outcomes = await _lock(ctx, locking, codec, keys, clause.wait, clause.strength)
        except RowLockUnavailable as exc:
            if clause.wait is not LockWait.NOWAIT:
                raise
            raise SqlError(
                LOCK_NOT_AVAILABLE,
                f'could not obtain lock on row in relation "{codec.table.name}"',
            ) from exc
        changed = [k for (k, _), o in zip(found, outcomes, strict=True) if o.taken and o.changed]
        if changed and clause.strength is RowLockMode.KEY_SHARE:
            changed = await _keys_moved(ctx, codec, changed)
        if changed:
            if recheck is None or not locking.read_committed:
                stale_statement(locking)
            newest_ts, newest = await recheck(changed)
        kept = [
            (k, newest.get(k, row))
            for (k, row), o in zip(found, outcomes, strict=True)
            if o.taken and (k not in newest or newest[k] is not None)
        ]
    if not clause.shared:
        txn = ctx.txn
        for key, _ in kept:
            with txn.deciding_at(newest_ts if key in newest else None):
                codec.lock(txn, key)
    return [row for _, row in kept]


async def _keys_moved(ctx: Any, codec: Any, keys: list[bytes]) -> list[bytes]:
    """Of rows locked FOR KEY SHARE that changed after the snapshot, those deleted since or
    whose key columns (the primary key's and the unique indexes') changed. Postgres's FOR KEY
    SHARE conflicts only with those changes: a row whose other columns were updated is locked
    as the snapshot read it, with no 40001 under REPEATABLE READ and no re-check under READ
    COMMITTED (its isolation test lock-committed-update). Two reads of the changed rows, at
    the snapshot and at their newest; only where such rows were found."""
    table = codec.table
    full = RowCodec(table)
    positions = [
        table.position(c)
        for c in (
            *table.primary_key,
            *(c for ix in table.indexes if ix.unique for c in ix.plain_column_ids),
        )
    ]
    before = await full.get_rows(ctx.txn, keys)
    _, now = await full.get_newest_rows(ctx.txn, keys)
    return [
        k
        for k, old, new in zip(keys, before, now, strict=True)
        if old is None or new is None or any(old[p] != new[p] for p in positions)
    ]


async def _lock(
    ctx: Any,
    locking: RowLocking,
    codec: Any,
    keys: Sequence[bytes],
    wait: LockWait,
    mode: RowLockMode,
) -> list[RowLock]:
    """The transaction's lock_rows on the cells every write of these rows writes."""
    cells = [CellKey(codec.storage, k, codec.existence) for k in keys]
    outcomes: list[RowLock] = await ctx.txn.lock_rows(cells, wait, locking.timeout_s, mode=mode)
    return outcomes


def stale_statement(locking: RowLocking) -> NoReturn:
    """What the statement has read is stale: it runs again, if it can (READ COMMITTED), else
    it fails with 40001."""
    if locking.read_committed and locking.can_rerun:
        raise RowChanged()
    raise SqlError(SERIALIZATION_FAILURE, "could not serialize access due to concurrent update")
