"""Reads a commit checks again: the one thing snapshot isolation does not give a foreign key.

A transaction that inserts a row referencing a parent read the parent in its snapshot; one that
deletes the parent read, in its own, that nothing referenced it. Their writes touch different
cells, so first-committer-wins does not see them collide, and both would commit: a dangling
reference (write skew). So each registers what its decision rests on, and the committer reads
it again after the prewrite, at commit_ts, before the commit point:

- :class:`StillPresent`: these cells must still hold a value (the parent rows);
- :class:`StillAbsent`: no row of this key range may hold a value in these columns that a
  predicate accepts (the referencing rows).

Why this is enough: both transactions prewrite first, then take commit_ts, then check. Of two
such transactions, the one whose check runs later runs it after the other's prewrite, and so
finds the other's lock (or its committed write, if the other is already done, since its
commit_ts is then below ours). A lock of another transaction on a checked cell is treated as a
conflict rather than waited for: two checkers waiting for each other would otherwise both
wait out the lock TTL. The cost is a read or a scan per check at commit, and an occasional
40001 for a transaction that raced with one that then rolled back.

Our own prewritten cells are judged by our own mutations (a DELETE of ours makes a cell
absent).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from percolator.server.storage.cells import CellKey, CellRead, Mutation, WriteKind
from percolator.server.storage.errors import SnapshotTooOld
from percolator.server.storage.store import CellStore
from percolator.server.txn.errors import SerializationFailure, WriteConflict
from percolator.server.txn.read_set import ReadSet


@dataclass(frozen=True)
class StillPresent:
    """Every one of ``keys`` must have a value at commit."""

    keys: tuple[CellKey, ...]


@dataclass(frozen=True)
class StillAbsent:
    """No row in [start, end) of ``table`` may have a value in ``column`` that ``matches``
    (given the row key and the value) accepts."""

    table: str
    start: bytes | None
    end: bytes | None
    column: str
    matches: Callable[[bytes, bytes], bool] | None = None


@dataclass(frozen=True)
class Unchanged:
    """SERIALIZABLE: nothing in ``reads`` may have been changed by another transaction since
    start_ts (a committed PUT or DELETE before commit_ts, or a write lock: see read_set.py)."""

    reads: ReadSet


CommitCheck = StillPresent | StillAbsent | Unchanged


async def run_checks(
    store: CellStore,
    start_ts: int,
    commit_ts: int,
    checks: Sequence[CommitCheck],
    mutations: Sequence[Mutation],
) -> None:
    """Raise :class:`WriteConflict` if a check fails at ``commit_ts``."""
    own = {m.key: m for m in mutations}
    present = [k for c in checks if isinstance(c, StillPresent) for k in c.keys]
    if present:
        for read in await store.read(commit_ts, list(dict.fromkeys(present))):
            if _kept_by_writer(read, start_ts):
                await _check_kept(store, read, start_ts, commit_ts)
            elif not _has_value(read, own, start_ts):
                raise _conflict(read, start_ts, commit_ts, "delete of a referenced row")
    for check in checks:
        if isinstance(check, StillAbsent):
            await _check_absent(store, start_ts, commit_ts, check, own)
        elif isinstance(check, Unchanged):
            await _check_unchanged(store, start_ts, commit_ts, check.reads)


async def _check_unchanged(store: CellStore, start_ts: int, commit_ts: int, reads: ReadSet) -> None:
    """Why it is enough, as for the checks above: of two writers that read what the other
    writes, the one checking later runs after the other's prewrite and finds its lock or,
    if the other committed first (below our commit_ts), its record."""
    found = await asyncio.gather(
        *(
            store.first_change(table, reads.ranges(table), start_ts, commit_ts, start_ts)
            for table in reads.tables()
        )
    )
    for changed in found:
        if changed is not None:
            raise SerializationFailure(changed, start_ts, commit_ts)


async def _check_absent(
    store: CellStore,
    start_ts: int,
    commit_ts: int,
    check: StillAbsent,
    own: dict[CellKey, Mutation],
) -> None:
    cells = store.scan(commit_ts, check.table, check.start, check.end, [check.column])
    async for read in cells:
        if not _has_value(read, own, start_ts):
            continue
        value = _value(read, own)
        if check.matches is None or check.matches(read.key.row, value):
            raise _conflict(read, start_ts, commit_ts, "insert of a referencing row")
    # Our own PUTs the scan cannot show yet (they are locks of ours) were checked by the
    # statement that wrote them.


def _kept_by_writer(read: CellRead, start_ts: int) -> bool:
    """Whether the cell is locked by a concurrent transaction that writes a value to it (or
    only locks it): it has a value at the end either way if it has one now. A referenced row
    updated meanwhile (the foreign key's check and a NO KEY UPDATE pass each other)."""
    lock = read.lock
    return (
        lock is not None
        and lock.start_ts != start_ts
        and lock.kind in (WriteKind.PUT, WriteKind.LOCK)
    )


async def _check_kept(store: CellStore, read: CellRead, start_ts: int, commit_ts: int) -> None:
    """The cell of :func:`_kept_by_writer` must have a committed value: read below the lock
    (nothing commits to a locked cell after its lock's start_ts but the lock's own
    transaction). One more round trip, only when a check meets such a lock."""
    assert read.lock is not None
    try:
        (before,) = await store.read(read.lock.start_ts - 1, [read.key])
    except SnapshotTooOld as exc:
        raise _conflict(read, start_ts, commit_ts, "delete of a referenced row") from exc
    if before.lock is not None or before.value is None:
        raise _conflict(read, start_ts, read.lock.start_ts, "lock of a concurrent transaction")


def _has_value(read: CellRead, own: dict[CellKey, Mutation], start_ts: int) -> bool:
    lock = read.lock
    if lock is not None and lock.start_ts != start_ts:
        raise _conflict(read, start_ts, lock.start_ts, "lock of a concurrent transaction")
    mine = own.get(read.key)
    if mine is not None and mine.kind is not WriteKind.LOCK:
        return mine.kind is WriteKind.PUT
    return read.value is not None


def _value(read: CellRead, own: dict[CellKey, Mutation]) -> bytes:
    mine = own.get(read.key)
    if mine is not None and mine.kind is WriteKind.PUT and mine.value is not None:
        return mine.value
    return read.value or b""


def _conflict(read: CellRead, start_ts: int, ts: int, reason: str) -> WriteConflict:
    return WriteConflict(read.key, start_ts, ts, reason)
