"""Sequences (CREATE SEQUENCE, and those behind serial and identity columns): values handed out
outside the user's transaction.

As in Postgres, nextval() is not transactional: a rolled-back insert leaves a gap. Each process
reserves a block of values at a time with a short transaction of its own on the counter cell
(``__sequences``, row = the sequence's counter key), so concurrent inserters do not conflict on it;
values are unique across the deployment and increase within a process (like Postgres's CACHE).

The row has two cells:

- ``v``: the last value reserved (absent: none yet, the first value is ``start``), written by
  the reserving transactions and by setval(); ``last;rid`` once a restart was applied.
- ``r``: ``last;rid``, written by a RESTART (``ALTER SEQUENCE ... RESTART``, ``TRUNCATE ...
  RESTART IDENTITY``) in the user's transaction, so that it is transactional as in Postgres
  without conflicting with the reservations other sessions commit meanwhile (they write ``v``
  only). ``rid`` names the restart; the first reservation after it that finds ``r``'s rid
  differing from ``v``'s starts from ``r``'s value.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from percolator.server.sql.catalog import Catalog, SequenceDef
from percolator.server.sql.errors import (
    NUMERIC_VALUE_OUT_OF_RANGE,
    OBJECT_NOT_IN_PREREQUISITE_STATE,
    SqlError,
)
from percolator.server.storage.cells import CellKey
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
    """Values this process reserved: those after ``last`` up to ``end``, for ``steps``."""

    steps: Steps
    last: int
    """The last value handed out."""
    end: int
    """The last value reserved (what the reservation wrote to ``v``)."""
    rid: str
    """The restart the reservation followed ("" for none)."""


def _parse(raw: bytes | None) -> tuple[int | None, str]:
    """(last value, restart id) of a ``v`` or ``r`` cell; (None, "") if absent."""
    if raw is None:
        return None, ""
    last, _, rid = raw.decode().partition(";")
    return int(last), rid


def _format(last: int, rid: str) -> bytes:
    return (f"{last};{rid}" if rid else str(last)).encode()


def _past(value: int, steps: Steps) -> int | None:
    """The bound ``value`` goes past in the sequence's direction, or None."""
    if steps.increment > 0:
        return steps.maximum if value > steps.maximum else None
    return steps.minimum if value < steps.minimum else None


def _limit_error(steps: Steps, bound: int, name: str) -> SqlError:
    which = "maximum" if steps.increment > 0 else "minimum"
    return SqlError(
        SEQUENCE_LIMIT, f'nextval: reached {which} value of sequence "{name}" ({bound})'
    )


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
            old = self._blocks.pop(key, None)
            block = await self._client.run_in_transaction(
                lambda txn: self._reserve(txn, key, steps, name or key, old)
            )
            self._blocks[key] = block
            return block.last

    def nextval_nowait(self, key: str, steps: Steps = Steps()) -> int | None:
        """The next value if one is reserved already, else None. A block reserved under other
        steps (ALTER SEQUENCE changed them since) is not used: the next reservation gives its
        rest back, so the new increment applies from the last value handed out, as in
        Postgres."""
        block = self._blocks.get(key)
        if block is None or block.steps != steps:
            return None
        value = block.last + steps.increment
        if (value > block.end) if steps.increment > 0 else (value < block.end):
            return None
        block.last = value
        return value

    async def setval(self, key: str, value: int, is_called: bool, steps: Steps) -> None:
        """The next nextval() returns ``value`` + increment (``is_called``) or ``value``. Other
        processes finish the block they reserved first, as in Postgres with CACHE."""
        last = value if is_called else value - steps.increment
        row = key.encode()

        async def write(txn: Transaction) -> None:
            # The restart ``r`` holds, if any, counts as applied: setval came after it.
            _, rid = _parse(await txn.get(SEQUENCE_TABLE, row, "r"))
            txn.set(SEQUENCE_TABLE, row, "v", _format(last, rid))

        await self._client.run_in_transaction(write)
        self._blocks.pop(key, None)

    def forget(self, key: str) -> None:
        """Drop this process's reserved block of a sequence (its counter was reset)."""
        self._blocks.pop(key, None)

    async def _reserve(
        self, txn: Transaction, key: str, steps: Steps, name: str, old: _Block | None
    ) -> _Block:
        """The next block, written to the counter cell; ``old`` is this process's previous
        block of the sequence (exhausted, or reserved under other steps)."""
        row = key.encode()
        cells = [CellKey(SEQUENCE_TABLE, row, "v"), CellKey(SEQUENCE_TABLE, row, "r")]
        v, r = await txn.get_many(cells)
        last, rid = _parse(v)
        restart_last, restart_rid = _parse(r)
        if restart_rid and restart_rid != rid:
            last, rid = restart_last, restart_rid  # a restart committed since
        elif old is not None and (last, rid) == (old.end, old.rid):
            # Nobody reserved after our block: give back the values it did not hand out.
            last = old.last
        first = steps.start if last is None else last + steps.increment
        if (bound := _past(first, steps)) is not None:
            raise _limit_error(steps, bound, name)
        bound = steps.maximum if steps.increment > 0 else steps.minimum
        count = min(self._block, (bound - first) // steps.increment + 1)
        end = first + (count - 1) * steps.increment
        txn.set(SEQUENCE_TABLE, row, "v", _format(end, rid))
        return _Block(steps, first, end, rid)


@dataclass
class _Restarted:
    """A sequence restarted by the session's open transaction: values drawn in it come from
    the ``r`` cell it writes (and go with it if it rolls back), as in Postgres."""

    txn: Transaction
    last: int
    rid: str


class SessionSequences:
    """One session's sequence functions: nextval, currval, setval and lastval as Postgres has
    them. currval remembers the last value of each sequence (by its counter key, so a rename
    keeps it and a sequence dropped and created again has none); lastval that of the sequence
    nextval drew from last."""

    def __init__(
        self,
        allocator: SequenceAllocator,
        find: Callable[[str], Awaitable[SequenceDef | None]] | None = None,
        transaction: Callable[[], Transaction | None] | None = None,
    ) -> None:
        self._allocator = allocator
        self._find = find
        self._transaction = transaction
        self._current: dict[str, int] = {}
        self._names: dict[str, str] = {}
        """Name → counter key, for currval of a sequence missing from a statement's catalog."""
        self._last_used: tuple[str, str] | None = None
        """(counter key, name) of the sequence nextval drew from last."""
        self._restarted: dict[str, _Restarted] = {}

    async def find(self, name: str) -> SequenceDef | None:
        """The sequence ``name`` in the newest catalog (one another server created since this
        one's catalog was last polled), or None."""
        return await self._find(name) if self._find is not None else None

    async def nextval(self, seq: SequenceDef) -> int:
        """nextval(): the sequence's next value, remembered for currval and lastval."""
        steps = steps_of(seq)
        value = self._draw_restarted(seq, steps)
        if value is None:
            value = await self._allocator.nextval(seq.counter_key, steps, seq.name)
        self._remember(seq, value)
        self._last_used = (seq.counter_key, seq.name)
        return value

    def currval(self, seq: SequenceDef | None, name: str) -> int:
        """currval() of ``seq`` (None: missing from the statement's catalog, named ``name``)."""
        key = seq.counter_key if seq is not None else self._names.get(name)
        value = self._current.get(key) if key is not None else None
        if value is None:
            raise SqlError(
                OBJECT_NOT_IN_PREREQUISITE_STATE,
                f'currval of sequence "{name}" is not yet defined in this session',
            )
        return value

    def lastval(self, catalog: Catalog) -> int:
        """lastval(): 55000 before any nextval, or once its sequence was dropped."""
        used = self._last_used
        if used is None or not _has_counter(catalog, used[0]):
            raise _no_lastval()
        return self._current[used[0]]

    async def lastval_anywhere(self, catalog: Catalog) -> int:
        """lastval(), looking the sequence up in the newest catalog too (another server may
        have created it since ``catalog``)."""
        used = self._last_used
        if used is not None and not _has_counter(catalog, used[0]):
            seq = await self.find(used[1])
            if seq is not None and seq.counter_key == used[0]:
                return self._current[used[0]]
        return self.lastval(catalog)

    async def setval(self, seq: SequenceDef, value: int, is_called: bool = True) -> int:
        """setval(): currval (and lastval, if nextval drew from ``seq`` last) become
        ``value`` when ``is_called``, as in Postgres."""
        if not seq.minimum <= value <= seq.maximum:
            raise SqlError(
                NUMERIC_VALUE_OUT_OF_RANGE,
                f'setval: value {value} is out of bounds for sequence "{seq.name}" '
                f"({seq.minimum}..{seq.maximum})",
            )
        restarted = self._restarted_now(seq.counter_key)
        if restarted is not None:
            self._write_restart(seq, restarted, value if is_called else value - seq.increment)
        else:
            await self._allocator.setval(seq.counter_key, value, is_called, steps_of(seq))
        if is_called:
            self._remember(seq, value)
        return value

    def restart(self, txn: Transaction, seq: SequenceDef, value: int) -> None:
        """ALTER SEQUENCE ... RESTART, TRUNCATE ... RESTART IDENTITY: the next value is
        ``value`` once ``txn`` commits (and in ``txn`` until then)."""
        restarted = _Restarted(txn, 0, str(txn.start_ts))
        self._restarted[seq.counter_key] = restarted
        self._write_restart(seq, restarted, value - seq.increment)

    def transaction_ended(self, committed: bool) -> None:
        """The open transaction ended: the restarts it committed drop this process's blocks
        of those sequences, so every session here draws from the restarted counter."""
        if committed:
            for key in self._restarted:
                self._allocator.forget(key)
        self._restarted.clear()

    def discard(self) -> None:
        """DISCARD SEQUENCES (and DISCARD ALL): currval and lastval are undefined again."""
        self._current.clear()
        self._names.clear()
        self._last_used = None

    def _remember(self, seq: SequenceDef, value: int) -> None:
        self._current[seq.counter_key] = value
        self._names[seq.name] = seq.counter_key

    def _restarted_now(self, key: str) -> _Restarted | None:
        """The restart of this sequence by the session's open transaction, if any."""
        restarted = self._restarted.get(key)
        current = self._transaction() if self._transaction is not None else None
        if restarted is None or restarted.txn is not current:
            return None
        return restarted

    def _draw_restarted(self, seq: SequenceDef, steps: Steps) -> int | None:
        """The next value of a sequence the open transaction restarted, else None."""
        restarted = self._restarted_now(seq.counter_key)
        if restarted is None:
            return None
        value = restarted.last + steps.increment
        if (bound := _past(value, steps)) is not None:
            raise _limit_error(steps, bound, seq.name)
        self._write_restart(seq, restarted, value)
        return value

    @staticmethod
    def _write_restart(seq: SequenceDef, restarted: _Restarted, last: int) -> None:
        restarted.last = last
        row = seq.counter_key.encode()
        restarted.txn.set(SEQUENCE_TABLE, row, "r", _format(last, restarted.rid))


def _has_counter(catalog: Catalog, key: str) -> bool:
    """Whether a sequence of ``catalog`` has this counter key (it was not dropped)."""
    return any(s.counter_key == key for s in catalog.sequences.values())


def _no_lastval() -> SqlError:
    return SqlError(OBJECT_NOT_IN_PREREQUISITE_STATE, "lastval is not yet defined in this session")


def steps_of(seq: SequenceDef) -> Steps:
    """The steps of a sequence's definition."""
    return Steps(seq.start, seq.increment, seq.minimum, seq.maximum)
