"""SQL cursors: DECLARE, FETCH, MOVE and CLOSE.

A cursor is a query's rows read as the client asks for them, in the transaction that declared
it. As in Postgres:

- a cursor is positioned before its first row, on a row, or after its last row; FETCH returns
  the rows it passes over and MOVE only counts them;
- a cursor declared without SCROLL reads forward only (Postgres refuses backward motion for
  plans that cannot run backward, which is every plan here); a SCROLL cursor keeps the rows it
  has read, so that it can go back over them;
- a cursor WITHOUT HOLD ends with its transaction; one WITH HOLD outlives the commit: its
  remaining rows are read into memory before the commit (Postgres copies them to a tuplestore
  the same way), and it is dropped if the transaction rolls back.

A cursor sees its transaction as it was at DECLARE. Reads are lazy, so before the transaction
writes or (READ COMMITTED) takes a new snapshot, the session has its open cursors read the
rest of their rows first (:meth:`Cursors.settle`): a cursor that is only fetched from streams,
one interleaved with writes holds its remaining rows in memory.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field

from percolator.server.engine_api import ResultColumn
from percolator.server.sql.errors import (
    DUPLICATE_CURSOR,
    INVALID_CURSOR_NAME,
    OBJECT_NOT_IN_PREREQUISITE_STATE,
    SqlError,
)
from percolator.server.sql.utility import FetchCursor, Motion

log = logging.getLogger(__name__)

Row = tuple[object, ...]


def not_found(name: str) -> SqlError:
    """34000, as Postgres words it for cursors and portals alike."""
    return SqlError(INVALID_CURSOR_NAME, f'cursor "{name}" does not exist')


def _forward_only() -> SqlError:
    return SqlError(
        OBJECT_NOT_IN_PREREQUISITE_STATE,
        "cursor can only scan forward",
        hint="Declare it with SCROLL option to enable backward scan.",
    )


@dataclass
class Cursor:
    """One declared cursor and where it stands."""

    name: str
    statement: str
    columns: list[ResultColumn]
    scroll: bool
    hold: bool
    binary: bool
    depth: int
    """Savepoints open when it was declared (ROLLBACK TO an older one closes it)."""
    source: AsyncIterator[Row] | None
    """The query's rows not read yet; None once all are read."""
    created: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.UTC))
    committed: bool = False
    """WITH HOLD and its transaction committed: its rows are all in memory."""
    position: int = 0
    """0 before the first row, k on row k, read + 1 after the last."""
    read: int = 0
    """Rows taken from ``source`` so far."""
    kept: list[Row] = field(default_factory=list)
    """SCROLL: every row read so far (row k is kept[k - 1]). Forward only: rows read ahead of
    the position by :meth:`settle`, the next one first."""
    on_close: Callable[[], Awaitable[None]] | None = None
    """A protocol portal shared with SQL: how CLOSE (or the end of the transaction) closes
    the portal itself."""

    @property
    def shared(self) -> bool:
        """A protocol portal: its rows are the front end's to read, never settled here."""
        return self.on_close is not None

    @property
    def exhausted(self) -> bool:
        return self.source is None

    async def _pull(self) -> Row | None:
        source = self.source
        if source is None:
            return None
        try:
            row = await anext(source)
        except StopAsyncIteration:
            self.source = None
            return None
        self.read += 1
        return row

    async def settle(self) -> None:
        """Read every remaining row into memory, so that nothing more is read from the
        transaction (before it writes, renews its snapshot or commits)."""
        while (row := await self._pull()) is not None:
            self.kept.append(row)

    async def row(self, k: int) -> Row | None:
        """Row ``k`` (1-based), reading up to it; None past the end. A forward-only cursor
        asks only for rows after its position."""
        if self.scroll:
            while len(self.kept) < k and (row := await self._pull()) is not None:
                self.kept.append(row)
            return self.kept[k - 1] if k <= len(self.kept) else None
        # Forward only: rows kept by settle() come first, then the source.
        skip = k - self.position - 1
        assert skip >= 0
        while True:
            row = self.kept.pop(0) if self.kept else await self._pull()
            if row is None or skip == 0:
                return row
            skip -= 1

    async def end(self) -> int:
        """The number of rows (reads them all)."""
        if not self.scroll:
            raise _forward_only()
        await self.settle()
        return len(self.kept)

    async def close(self) -> None:
        source, self.source = self.source, None
        self.kept = []
        aclose = getattr(source, "aclose", None)
        if aclose is not None:
            try:
                await aclose()
            except Exception:
                log.debug("closing cursor %s", self.name, exc_info=True)
        if self.on_close is not None:
            await self.on_close()

    # -- motion --------------------------------------------------------------------------

    async def step(self, forward: bool) -> Row | None:
        """Move one row on; the row arrived at, or None at either end."""
        if forward:
            row = await self.row(self.position + 1)
            self.position = self.position + 1 if row is not None else self._after_last()
            return row
        if not self.scroll:
            raise _forward_only()
        if self.position <= 1:
            self.position = 0
            return None
        self.position -= 1
        return self.kept[self.position - 1]

    def _after_last(self) -> int:
        return (len(self.kept) if self.scroll else self.read) + 1

    async def go_to(self, k: int) -> Row | None:
        """Move to row ``k`` (negative: from the end); the row, or None when ``k`` is outside
        the rows (the cursor then stands before the first or after the last)."""
        if k < 0:
            k = await self.end() + 1 + k
        if k <= self.position and not self.scroll:
            raise _forward_only()
        if k <= 0:
            self.position = 0
            return None
        row = await self.row(k)
        self.position = k if row is not None else self._after_last()
        return row


class Cursors:
    """A session's open cursors, by name."""

    def __init__(self) -> None:
        self._open: dict[str, Cursor] = {}

    def __bool__(self) -> bool:
        """Whether any cursor is open (the session's per-transaction hooks skip otherwise)."""
        return bool(self._open)

    def __iter__(self) -> Iterator[Cursor]:
        return iter(list(self._open.values()))

    def get(self, name: str) -> Cursor:
        cursor = self._open.get(name)
        if cursor is None:
            raise not_found(name)
        return cursor

    def find(self, name: str) -> Cursor | None:
        return self._open.get(name)

    def check_new(self, name: str) -> None:
        """42P03 if a cursor of that name is open."""
        if name in self._open:
            raise SqlError(DUPLICATE_CURSOR, f'cursor "{name}" already exists')

    def add(self, cursor: Cursor) -> None:
        self.check_new(cursor.name)
        self._open[cursor.name] = cursor

    def forget(self, name: str) -> None:
        """Drop a shared protocol portal that the front end closed itself."""
        self._open.pop(name, None)

    async def close(self, name: str | None) -> None:
        """CLOSE name, or every cursor (None)."""
        if name is None:
            await self._drop(lambda c: True)
            return
        cursor = self.get(name)
        del self._open[name]
        await cursor.close()

    async def settle(self) -> None:
        """Have the open transaction's cursors read the rest of their rows now."""
        for cursor in self:
            if not cursor.committed and not cursor.shared:
                await cursor.settle()

    async def before_commit(self) -> None:
        """Read the rows of the cursors WITH HOLD that the commit lets outlive it."""
        for cursor in self:
            if cursor.hold and not cursor.committed:
                await cursor.settle()

    async def after_transaction(self, committed: bool) -> None:
        """End the cursors that end with the transaction: all but the held ones after a
        commit, all that it declared after a rollback."""
        await self._drop(lambda c: not c.committed and not (committed and c.hold))
        for cursor in self:
            cursor.committed = True

    async def after_rollback_to(self, depth: int) -> None:
        """ROLLBACK TO the savepoint ``depth`` savepoints deep (the first is 0): the cursors
        declared since it was set end."""
        await self._drop(lambda c: not c.committed and c.depth > depth)

    def after_release(self, depth: int) -> None:
        """RELEASE of the savepoint ``depth`` deep: its cursors now belong to the one
        around it."""
        for cursor in self:
            cursor.depth = min(cursor.depth, depth)

    async def _drop(self, which: Callable[[Cursor], bool]) -> None:
        for cursor in self:
            if which(cursor):
                del self._open[cursor.name]
                await cursor.close()


async def fetch_rows(cursor: Cursor, stmt: FetchCursor) -> AsyncIterator[Row]:
    """The rows FETCH returns, read as the client takes them (FETCH ALL streams)."""
    motion = stmt.motion
    if motion in (Motion.ABSOLUTE, Motion.RELATIVE):
        assert stmt.count is not None
        row = await _jump(cursor, motion, stmt.count)
        if row is not None:
            yield row
        return
    forward = motion is Motion.FORWARD
    if stmt.count == 0:
        row = await _jump(cursor, Motion.RELATIVE, 0)
        if row is not None:
            yield row
        return
    left = stmt.count
    while left is None or left > 0:
        row = await cursor.step(forward)
        if row is None:
            return
        yield row
        if left is not None:
            left -= 1


async def move(cursor: Cursor, stmt: FetchCursor) -> int:
    """MOVE: the count its command tag reports."""
    count = 0
    async for _ in fetch_rows(cursor, stmt):
        count += 1
    return count


async def _jump(cursor: Cursor, motion: Motion, count: int) -> Row | None:
    if motion is Motion.ABSOLUTE:
        return await cursor.go_to(count)
    target = cursor.position + count
    if count > 0:
        return await cursor.go_to(target)
    if not cursor.scroll:
        raise _forward_only()
    if target <= 0:
        cursor.position = 0
        return None
    if target > len(cursor.kept):
        return None  # after the last row (it stays there)
    cursor.position = target
    return cursor.kept[target - 1]
