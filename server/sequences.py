"""Sequences (CREATE SEQUENCE, and those behind serial and identity columns): values handed out
outside the user's transaction.

As in Postgres, nextval() is not transactional: a rolled-back insert leaves a gap. Each process
reserves a block of values at a time with a short transaction of its own on the counter cell
(``__sequences``, row = the sequence's counter key), so concurrent inserters do not conflict on it;
values are unique across the deployment and increase within a process (like Postgres's CACHE).
The cell holds the last value reserved (absent: none yet, the first value is ``start``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from percolator.server.sql.catalog import SequenceDef
from percolator.server.sql.errors import (
    NUMERIC_VALUE_OUT_OF_RANGE,
    OBJECT_NOT_IN_PREREQUISITE_STATE,
    SqlError,
)
from percolator.server.txn.client import TransactionClient
from percolator.server.txn.transaction import Transaction

SEQUENCE_TABLE = "__sequences"
BLOCK = 32
SEQUENCE_LIMIT = "2200H"


@dataclass(frozen=True)
class Steps:
    """Where a sequence starts, how it moves, and where it stops (both bounds included)."""

    start: int = 1
    increment: int = 1
    minimum: int = 1
    maximum: int = (1 << 63) - 1


@dataclass
class _Block:
    next: int
    left: int


class SequenceAllocator:
    """Hands out values of every sequence, a reserved block at a time."""

    def __init__(self, client: TransactionClient, block: int = BLOCK) -> None:
        self._client = client
        self._block = block
        self._blocks: dict[str, _Block] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def nextval(self, key: str, steps: Steps = Steps(), name: str = "") -> int:
        """The next value of the sequence with this counter key (one transaction per block)."""
        value = self.nextval_nowait(key, steps)
        if value is not None:
            return value
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            value = self.nextval_nowait(key, steps)
            if value is not None:
                return value
            first, count = await self._client.run_in_transaction(
                lambda txn: self._reserve(txn, key, steps, name)
            )
            self._blocks[key] = _Block(first + steps.increment, count - 1)
            return first

    def nextval_nowait(self, key: str, steps: Steps = Steps()) -> int | None:
        """The next value if one is reserved already, else None."""
        block = self._blocks.get(key)
        if block is None or block.left <= 0:
            return None
        value = block.next
        block.next += steps.increment
        block.left -= 1
        return value

    async def setval(self, key: str, value: int, is_called: bool, steps: Steps) -> None:
        """The next nextval() returns ``value`` + increment (``is_called``) or ``value``. Other
        processes finish the block they reserved first, as in Postgres with CACHE."""
        last = value if is_called else value - steps.increment

        async def write(txn: Transaction) -> None:
            txn.set(SEQUENCE_TABLE, key.encode(), "v", str(last).encode())

        await self._client.run_in_transaction(write)
        self._blocks.pop(key, None)

    def forget(self, key: str) -> None:
        """Drop this process's reserved block of a sequence (its counter was reset)."""
        self._blocks.pop(key, None)

    async def _reserve(
        self, txn: Transaction, key: str, steps: Steps, name: str
    ) -> tuple[int, int]:
        """(first value, how many) of the next block, written to the counter cell."""
        row = key.encode()
        raw = await txn.get(SEQUENCE_TABLE, row, "v")
        first = steps.start if raw is None else int(raw) + steps.increment
        bound = steps.maximum if steps.increment > 0 else steps.minimum
        room = (bound - first) // steps.increment + 1
        if room <= 0:
            which = "maximum" if steps.increment > 0 else "minimum"
            raise SqlError(
                SEQUENCE_LIMIT,
                f'nextval: reached {which} value of sequence "{name or key}" ({bound})',
            )
        count = min(self._block, room)
        txn.set(SEQUENCE_TABLE, row, "v", str(first + (count - 1) * steps.increment).encode())
        return first, count


class SessionSequences:
    """One session's sequence functions: nextval, currval, setval and lastval as Postgres has
    them (currval and lastval remember this session's last values)."""

    def __init__(
        self,
        allocator: SequenceAllocator,
        find: Callable[[str], Awaitable[SequenceDef | None]] | None = None,
    ) -> None:
        self._allocator = allocator
        self._find = find
        self._current: dict[str, int] = {}
        self._last: int | None = None

    async def find(self, name: str) -> SequenceDef | None:
        """The sequence ``name`` in the newest catalog (one another server created since this
        one's catalog was last polled), or None."""
        return await self._find(name) if self._find is not None else None

    async def draw(self, counter: str, name: str, steps: Steps = Steps()) -> int:
        """The next value of the sequence ``name`` (whose counter cell is ``counter``)."""
        value = await self._allocator.nextval(counter, steps, name)
        self._current[name] = value
        self._last = value
        return value

    async def nextval(self, seq: SequenceDef) -> int:
        return await self.draw(seq.counter_key, seq.name, steps_of(seq))

    def currval(self, seq: SequenceDef) -> int:
        value = self._current.get(seq.name)
        if value is None:
            raise SqlError(
                OBJECT_NOT_IN_PREREQUISITE_STATE,
                f'currval of sequence "{seq.name}" is not yet defined in this session',
            )
        return value

    def lastval(self) -> int:
        if self._last is None:
            raise SqlError(
                OBJECT_NOT_IN_PREREQUISITE_STATE, "lastval is not yet defined in this session"
            )
        return self._last

    async def setval(self, seq: SequenceDef, value: int, is_called: bool = True) -> int:
        if not seq.minimum <= value <= seq.maximum:
            raise SqlError(
                NUMERIC_VALUE_OUT_OF_RANGE,
                f'setval: value {value} is out of bounds for sequence "{seq.name}" '
                f"({seq.minimum}..{seq.maximum})",
            )
        await self._allocator.setval(seq.counter_key, value, is_called, steps_of(seq))
        if is_called:
            self._current[seq.name] = value
        return value

    def restart(self, txn: Transaction, seq: SequenceDef, value: int) -> None:
        """ALTER SEQUENCE ... RESTART: the next value is ``value`` once ``txn`` commits."""
        last = value - seq.increment
        txn.set(SEQUENCE_TABLE, seq.counter_key.encode(), "v", str(last).encode())
        self._allocator.forget(seq.counter_key)


def steps_of(seq: SequenceDef) -> Steps:
    return Steps(seq.start, seq.increment, seq.minimum, seq.maximum)
