"""Pessimistic row locks: what makes a SQL writer wait for another instead of failing at commit.

Percolator's own locks are written at commit (optimistic): two transactions that update one row
both run to their commit and the second fails. Postgres instead makes the second UPDATE (or
SELECT ... FOR UPDATE) wait at the statement until the first ends, fail at once with NOWAIT,
pass the row by with SKIP LOCKED, and report a deadlock (40P01) when two transactions wait for
each other. These locks give a SQL transaction the same: it takes them on the rows it is about
to change or lock, holds them until it has committed or rolled back, and the store reports, in
the same round trip, whether each row has changed since the caller's snapshot (the caller then
fails with 40001 or, under READ COMMITTED, reads the row again).

They order lockers among themselves only. Writers that take none (Spark, observers, the
transaction API) are still kept apart by the prewrite's conflict check, as always.

In the Postgres store a row lock is a session-level Postgres advisory lock, on the row's shard,
taken on a connection that the transaction holds from its first lock until it ends
(:class:`PostgresRowLocks`): Postgres does the waiting (a waiter wakes at once), NOWAIT, SKIP
LOCKED, lock timeouts and deadlock detection between the transactions locking on one shard. A
transaction that waits across shards in a cycle waits until its lock timeout instead. If the
server process dies, the connection closes and Postgres releases the locks. The lock's key is
the row's hash with a salt, so it never meets the advisory locks that the store's own functions
take on the plain row hash (nor a user's: those are in Postgres's two-integer space).

The memory store keeps them in a table of its process (:class:`LocalRowLockTable`), with the
same waits, timeouts and deadlock detection.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum, IntEnum
from typing import Any, Protocol

import asyncpg

from percolator.server.storage.cells import CellKey
from percolator.server.storage.errors import StoreError, StoreUnavailable
from percolator.server.storage.sharding import row_hash


class RowLockMode(IntEnum):
    """Postgres's four row-lock strengths, weakest first."""

    KEY_SHARE = 1
    """FOR KEY SHARE, and a foreign key's check of the row it references."""
    SHARE = 2
    """FOR SHARE."""
    NO_KEY_UPDATE = 3
    """FOR NO KEY UPDATE, and an UPDATE that changes no key column."""
    UPDATE = 4
    """FOR UPDATE, DELETE, an UPDATE of a key column, and the keys an INSERT takes."""


# A row's lock is two locks, on its key and on the rest of the row, each shared or exclusive
# (held as bits): Postgres's conflict table between the four strengths is then exactly "some
# part is exclusive in one and held at all in the other" (KEY SHARE meets only UPDATE; SHARE
# meets NO KEY UPDATE and UPDATE; NO KEY UPDATE meets everything but KEY SHARE).
KEY_SHARED = 1
KEY_EXCLUSIVE = 2
ROW_SHARED = 4
ROW_EXCLUSIVE = 8
HOLDS = {
    RowLockMode.KEY_SHARE: KEY_SHARED,
    RowLockMode.SHARE: KEY_SHARED | ROW_SHARED,
    RowLockMode.NO_KEY_UPDATE: ROW_EXCLUSIVE,
    RowLockMode.UPDATE: KEY_EXCLUSIVE | ROW_EXCLUSIVE,
}
"""The parts each strength holds, as bits."""
_PARTS = ((KEY_SHARED, KEY_EXCLUSIVE), (ROW_SHARED, ROW_EXCLUSIVE))


@functools.cache  # a handful of bit patterns, asked for every row a statement locks
def conflicts(a: int, b: int) -> bool:
    """Whether two transactions' holds (bits) of one row conflict."""
    return any(
        (a & exclusive and b & (shared | exclusive)) or (b & exclusive and a & (shared | exclusive))
        for shared, exclusive in _PARTS
    )


@functools.cache
def covers(held: int, asked: int) -> bool:
    """Whether holds ``held`` keep out everyone that ``asked`` would: then a transaction that
    has them need not take ``asked`` too. Postgres's strengths are nested this way (a holder
    of NO KEY UPDATE asking for KEY SHARE, as a foreign key's check of a row it updated
    does, already has all it needs), though their parts are not."""
    return all(conflicts(held, theirs) for theirs in HOLDS.values() if conflicts(asked, theirs))


ROW_LOCK_SALT = 0x2545_F491_4F6C_DD1D
"""XORed into a row's hash to make the key of its key part's lock (see the module
docstring)."""
ROW_PART_SALT = 0x5F0E_7A2B_C3D1_9E47
"""XORed into that to make the key of the lock on the rest of the row."""
IDLE_CONNECTIONS = 16
"""Connections per shard kept open for the next transaction that locks rows."""
MAX_LOCK_CONNECTIONS = 64
"""Connections per shard that hold row locks at once. A transaction that would need one more
(or whose shard refuses a connection: too many clients) goes without row locks there, as under
optimistic locking, rather than wait or fail: Postgres's connection slots are shared with the
store's own pools and with everyone else."""


class LockWait(Enum):
    """What a lock request does when another transaction holds the row."""

    WAIT = 0
    NOWAIT = 1
    """Fail with :class:`RowLockUnavailable` (55P03)."""
    SKIP_LOCKED = 2
    """Leave the row out: its state comes back with ``taken`` False."""


@dataclass(frozen=True, slots=True)
class RowLockState:
    """What the store saw of one row once the lock was taken."""

    taken: bool
    newest_commit_ts: int | None
    """commit_ts of the newest PUT or DELETE record of the row's cell, read after the lock
    was taken: later than the caller's snapshot means the row changed."""
    lock_start_ts: int | None
    """start_ts of a Percolator lock on the cell (a commit in progress: the caller resolves
    it and asks again)."""
    waited: bool = False
    """Another holder had the row: the lock was taken after it let go."""
    locked_commit_ts: int | None = None
    """commit_ts of the newest LOCK record of the cell (a FOR UPDATE holder's, at its
    commit): the row was locked, not changed."""


SKIPPED = RowLockState(False, None, None)
"""A row another holder keeps (SKIP LOCKED)."""
UNLOCKED = RowLockState(True, None, None)
"""A row let through without a lock (no lock connection to spare): as under optimistic
locking."""


class RowLockUnavailable(StoreError):
    """NOWAIT met a held row, or the lock timeout ran out (lock_not_available)."""

    sqlstate = "55P03"


class RowLockDeadlock(StoreError):
    """Transactions wait for each other's row locks; this one was chosen to fail."""

    sqlstate = "40P01"
    detail = "Transactions waited for each other's row locks; this one was chosen to fail."


LOCK_TIMEOUT = "canceling statement due to lock timeout"
DEADLOCK = "deadlock detected"
"""Postgres's own messages, which clients and test suites compare."""


class RowLocks(Protocol):
    """The row locks of one transaction."""

    async def lock(
        self, keys: Sequence[CellKey], wait: LockWait, timeout_s: float | None, holds: int
    ) -> list[RowLockState]:
        """Take ``holds`` (bits: HOLDS of a strength) on the rows of ``keys`` (one cell per
        row: the one every write of the row writes) and report each row's state, in the order
        given. ``timeout_s``: how long to wait for one row before RowLockUnavailable (None:
        as long as it takes; a deadlock still fails). Holds
        this transaction has already are taken again, which changes nothing; a stronger one
        over its own weaker one waits only for the other holders."""

    async def release(self) -> None:
        """Release every lock (the transaction ended)."""

    async def unlock(self, holds: Sequence[tuple[CellKey, int]]) -> None:
        """Give up some holds, each a row and the bits to give up (ROLLBACK TO SAVEPOINT: the
        locks taken since)."""


def lock_key(key: CellKey) -> int:
    """The advisory-lock key of a row's key part."""
    return _signed(row_hash(key.table, key.row) ^ ROW_LOCK_SALT)


def row_part_key(key_part: int) -> int:
    """The advisory-lock key of the rest of a row, from its key part's (:func:`lock_key`)."""
    return _signed(key_part ^ ROW_PART_SALT)


def _signed(h: int) -> int:
    """A 64-bit value as Postgres's bigint."""
    h &= 0xFFFF_FFFF_FFFF_FFFF
    return h - (1 << 64) if h >= 1 << 63 else h


# -- in Postgres ------------------------------------------------------------------------------

# A function of the connection's own (pg_temp), so the store's schema needs no migration for
# it. A volatile function's statements each take a new snapshot: the last one reads the rows'
# newest versions after the locks were taken, which one statement could not do (its snapshot
# would predate the wait).
_LOCK_FUNCTION = """CREATE OR REPLACE FUNCTION pg_temp.percolator_lock_rows(
    p_mode integer, p_holds integer, p_timeout_ms integer, p_key bigint[], p_key2 bigint[],
    p_tbl text[], p_row bytea[], p_col text[])
RETURNS TABLE (idx integer, taken boolean, waited boolean, newest bigint, locked bigint,
    lock_ts bigint)
LANGUAGE plpgsql
SET enable_seqscan = off SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    got boolean[] := '{}';
    blocked boolean[] := '{}';
    ok boolean;
    waits boolean;
    part integer;
    k bigint;
    shared boolean;
BEGIN
    PERFORM set_config('lock_timeout', p_timeout_ms::text, true);
    FOR i IN 1 .. coalesce(cardinality(p_key), 0) LOOP
        ok := true;
        waits := false;
        -- The key part first, then the rest of the row: always in this order.
        FOR j IN 0 .. 1 LOOP
            part := (p_holds >> (2 * j)) & 3;
            CONTINUE WHEN part = 0 OR NOT ok;
            k := CASE WHEN j = 0 THEN p_key[i] ELSE p_key2[i] END;
            shared := part = 1;
            IF shared THEN
                ok := pg_try_advisory_lock_shared(k);
            ELSE
                ok := pg_try_advisory_lock(k);
            END IF;
            IF NOT ok AND p_mode <> 0 AND j = 1 AND (p_holds & 3) <> 0 THEN
                -- NOWAIT or SKIP LOCKED: give back the key part this call took (session
                -- locks outlive the error NOWAIT raises).
                IF (p_holds & 3) = 1 THEN
                    PERFORM pg_advisory_unlock_shared(p_key[i]);
                ELSE
                    PERFORM pg_advisory_unlock(p_key[i]);
                END IF;
            END IF;
            IF NOT ok AND p_mode = 1 THEN
                RAISE EXCEPTION 'could not obtain lock on row in relation "%"', p_tbl[i]
                    USING ERRCODE = '55P03';
            END IF;
            IF NOT ok AND p_mode = 0 THEN
                waits := true;
                IF shared THEN
                    PERFORM pg_advisory_lock_shared(k);
                ELSE
                    PERFORM pg_advisory_lock(k);
                END IF;
                ok := true;
            END IF;
        END LOOP;
        blocked := blocked || waits;
        got := got || ok;
    END LOOP;
    RETURN QUERY
    SELECT k.i::integer, got[k.i], blocked[k.i],
        CASE WHEN got[k.i] THEN (SELECT w.commit_ts FROM percolator_write w
            WHERE w.tbl = k.tbl AND w.rkey = k.rkey AND w.col = k.col AND w.kind IN (1, 2)
            ORDER BY w.commit_ts DESC LIMIT 1) END,
        CASE WHEN got[k.i] THEN (SELECT w.commit_ts FROM percolator_write w
            WHERE w.tbl = k.tbl AND w.rkey = k.rkey AND w.col = k.col AND w.kind = 4
            ORDER BY w.commit_ts DESC LIMIT 1) END,
        CASE WHEN got[k.i] THEN (SELECT l.start_ts FROM percolator_lock l
            WHERE l.tbl = k.tbl AND l.rkey = k.rkey AND l.col = k.col LIMIT 1) END
    FROM unnest(p_tbl, p_row, p_col) WITH ORDINALITY AS k(tbl, rkey, col, i);
END $$"""

_LOCK_CALL = "SELECT * FROM pg_temp.percolator_lock_rows($1, $2, $3, $4, $5, $6, $7, $8)"
_UNLOCK_FUNCTION = """CREATE OR REPLACE FUNCTION pg_temp.percolator_unlock_rows(
    p_key bigint[], p_key2 bigint[], p_holds integer[])
RETURNS void
LANGUAGE plpgsql
SET client_min_messages = error
AS $$
DECLARE
    k bigint;
    part integer;
BEGIN
    -- Every hold of the part and mode: a row asked again after settling a Percolator lock
    -- on it was taken twice (advisory locks count their holds). The last call finds none;
    -- its warning is kept quiet.
    FOR i IN 1 .. coalesce(cardinality(p_key), 0) LOOP
        FOR j IN 0 .. 1 LOOP
            k := CASE WHEN j = 0 THEN p_key[i] ELSE p_key2[i] END;
            part := (p_holds[i] >> (2 * j)) & 3;
            IF part & 2 <> 0 THEN
                WHILE pg_advisory_unlock(k) LOOP END LOOP;
            END IF;
            IF part & 1 <> 0 THEN
                WHILE pg_advisory_unlock_shared(k) LOOP END LOOP;
            END IF;
        END LOOP;
    END LOOP;
END $$"""
_UNLOCK_CALL = "SELECT pg_temp.percolator_unlock_rows($1, $2, $3)"
_BROKEN = (
    OSError,
    TimeoutError,
    asyncpg.exceptions.InterfaceError,
    asyncpg.exceptions.InternalClientError,
)
"""A lock connection that failed under a call (its state unknown: it is closed)."""
_UNREACHABLE = (
    asyncpg.exceptions.TooManyConnectionsError,
    asyncpg.exceptions.CannotConnectNowError,
    asyncpg.exceptions.PostgresConnectionError,
    OSError,
    TimeoutError,
)
"""Why a shard may refuse or fail a new lock connection: too many clients, down, starting."""


@dataclass
class ShardLockConnections:
    """Idle lock connections to one shard, for the next transaction that locks rows."""

    dsn: str
    connect: Callable[[], Awaitable[Any]]
    idle: list[Any] = field(default_factory=list)
    in_use: int = 0
    limit: int = MAX_LOCK_CONNECTIONS

    async def acquire(self) -> Any | None:
        """A connection for one transaction's locks; None when ``limit`` are in use or the
        shard refuses or cannot take another connection (too many clients, down)."""
        while self.idle:
            conn = self.idle.pop()
            if not conn.is_closed():
                self.in_use += 1
                return conn
        if self.in_use >= self.limit:
            return None
        self.in_use += 1
        conn = None
        try:
            conn = await self.connect()
            await conn.execute(f"{_LOCK_FUNCTION};\n{_UNLOCK_FUNCTION}")  # one round trip
        except BaseException as exc:
            self.in_use -= 1
            if conn is not None:
                conn.terminate()
            if isinstance(exc, _UNREACHABLE):
                # The transaction's own statements on that shard will say so (08006); its
                # rows there go unlocked meanwhile, and it does not sit on the locks it holds
                # elsewhere waiting for this one.
                return None
            raise
        return conn

    def discard(self, conn: Any) -> None:
        """Close a connection in an unknown state: Postgres releases whatever it held."""
        self.in_use -= 1
        conn.terminate()

    async def release(self, conn: Any) -> None:
        """Give back a connection after releasing its locks (closed if that fails)."""
        try:
            await conn.execute("SELECT pg_advisory_unlock_all()")
        except Exception:
            self.discard(conn)
            return
        self.in_use -= 1
        if len(self.idle) < IDLE_CONNECTIONS:
            self.idle.append(conn)
        else:
            with contextlib.suppress(Exception):
                await conn.close()

    async def close(self) -> None:
        idle, self.idle = self.idle, []
        for conn in idle:
            with contextlib.suppress(Exception):
                await conn.close()


class PostgresRowLocks:
    """One transaction's row locks: a connection per shard it locks rows on, held until
    :meth:`release`. One round trip per shard per :meth:`lock`; one per shard to release."""

    def __init__(
        self, shards: Sequence[ShardLockConnections], shard_of: Callable[[str, bytes], int]
    ) -> None:
        self._shards = shards
        self._shard_of = shard_of
        self._conns: dict[int, Any] = {}

    async def lock(
        self, keys: Sequence[CellKey], wait: LockWait, timeout_s: float | None, holds: int
    ) -> list[RowLockState]:
        by_shard: dict[int, list[int]] = {}
        for i, k in enumerate(keys):
            by_shard.setdefault(self._shard_of(k.table, k.row), []).append(i)
        out: list[RowLockState] = [SKIPPED] * len(keys)
        key_parts = [lock_key(k) for k in keys]  # one row hash per row
        # Shard after shard, in order: a transaction waits on one shard at a time.
        for shard in sorted(by_shard):
            idx = sorted(by_shard[shard], key=key_parts.__getitem__)
            states = await self._lock_on(
                shard, [keys[i] for i in idx], [key_parts[i] for i in idx], wait, timeout_s, holds
            )
            for i, state in zip(idx, states, strict=True):
                out[i] = state
        return out

    async def _lock_on(
        self,
        shard: int,
        keys: list[CellKey],
        key_parts: list[int],
        wait: LockWait,
        timeout_s: float | None,
        holds: int,
    ) -> list[RowLockState]:
        where = self._shards[shard]
        try:
            conn = self._conns.get(shard)
            if conn is None:
                conn = await where.acquire()
                if conn is None:  # no connection to spare: these rows go unlocked
                    return [UNLOCKED] * len(keys)
                self._conns[shard] = conn
            records = await conn.fetch(
                _LOCK_CALL,
                wait.value,
                holds,
                0 if timeout_s is None else max(1, int(timeout_s * 1000)),  # 0: no limit
                key_parts,
                [row_part_key(k) for k in key_parts],
                [k.table for k in keys],
                [k.row for k in keys],
                [k.column for k in keys],
            )
        except asyncpg.PostgresError as exc:
            mapped = translate_lock_error(exc.sqlstate, str(exc))
            if mapped is not None:
                raise mapped from exc
            self._drop(shard)
            raise StoreUnavailable(where.dsn, f"row lock: {type(exc).__name__}: {exc}") from exc
        except _BROKEN as exc:
            self._drop(shard)
            raise StoreUnavailable(where.dsn, f"row lock: {type(exc).__name__}: {exc}") from exc
        except asyncio.CancelledError:
            # The call may still be running in Postgres, and asyncpg refuses the connection's
            # next statement until it has stopped: closed instead, which frees this
            # transaction's locks there (the prewrite's conflict check still keeps it safe).
            self._drop(shard)
            raise
        states = [SKIPPED] * len(keys)
        for r in records:
            states[r["idx"] - 1] = RowLockState(
                r["taken"], r["newest"], r["lock_ts"], r["waited"], r["locked"]
            )
        return states

    def _drop(self, shard: int) -> None:
        conn = self._conns.pop(shard, None)
        if conn is not None:
            self._shards[shard].discard(conn)

    async def unlock(self, holds: Sequence[tuple[CellKey, int]]) -> None:
        by_shard: dict[int, list[tuple[CellKey, int]]] = {}
        for key, bits in holds:
            by_shard.setdefault(self._shard_of(key.table, key.row), []).append((key, bits))

        async def on(shard: int, part: list[tuple[CellKey, int]]) -> None:
            conn = self._conns.get(shard)
            if conn is None:  # those rows went unlocked
                return
            key_parts = [lock_key(k) for k, _ in part]
            try:
                await conn.execute(
                    _UNLOCK_CALL,
                    key_parts,
                    [row_part_key(k) for k in key_parts],
                    [bits for _, bits in part],
                )
            except (asyncpg.PostgresError, *_BROKEN) as exc:
                self._drop(shard)  # closed: Postgres frees all of them, which is safe
                raise StoreUnavailable(self._shards[shard].dsn, f"row unlock: {exc}") from exc

        await asyncio.gather(*(on(shard, part) for shard, part in by_shard.items()))

    async def release(self) -> None:
        conns, self._conns = self._conns, {}
        # In parallel: waiters on every shard go on at once.
        await asyncio.gather(*(self._shards[shard].release(c) for shard, c in conns.items()))


def translate_lock_error(sqlstate: str | None, message: str) -> StoreError | None:
    """The row-lock error a Postgres error stands for, if any."""
    if sqlstate == "55P03":
        if "lock timeout" in message:
            message = LOCK_TIMEOUT
        return RowLockUnavailable(message)
    if sqlstate == "40P01":
        return RowLockDeadlock(DEADLOCK)
    return None


# -- in one process ---------------------------------------------------------------------------


class LocalRowLockTable:
    """The row locks of one process (the memory store's): the four strengths, with waits,
    timeouts and deadlock detection (a waiter that would close a cycle of waits fails)."""

    def __init__(
        self,
        states: Callable[[Sequence[CellKey]], list[tuple[int | None, int | None, int | None]]],
    ) -> None:
        """``states``: each cell's newest commit_ts of a change and of a LOCK record, and its
        lock's start_ts, read from the store."""
        self._states = states
        self._holders: dict[tuple[str, bytes], dict[int, int]] = {}
        """Per row, its holders and the holds of each (bits, as HOLDS)."""
        self._waiting_for: dict[int, tuple[tuple[str, bytes], int]] = {}
        self._changed = asyncio.Condition()

    def session(self) -> LocalRowLocks:
        return LocalRowLocks(self)

    async def lock(
        self,
        owner: int,
        keys: Sequence[CellKey],
        wait: LockWait,
        timeout_s: float | None,
        holds: int,
    ) -> list[RowLockState]:
        got = {
            k: await self._lock_one(owner, (k.table, k.row), holds, wait, timeout_s)
            for k in sorted(keys, key=lock_key)
        }
        states = self._states(keys)
        return [
            RowLockState(True, newest, lock_ts, got[k][1], locked) if got[k][0] else SKIPPED
            for k, (newest, locked, lock_ts) in zip(keys, states, strict=True)
        ]

    def _blockers(self, owner: int, row: tuple[str, bytes], holds: int) -> list[int]:
        """The other holders of ``row`` whose holds conflict with the ones asked for."""
        holders = self._holders.get(row, {})
        return [o for o, held in holders.items() if o != owner and conflicts(held, holds)]

    async def _lock_one(
        self,
        owner: int,
        row: tuple[str, bytes],
        holds: int,
        wait: LockWait,
        timeout_s: float | None,
    ) -> tuple[bool, bool]:
        """(taken, waited): SKIP LOCKED leaves a held row untaken."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        waited = False
        async with self._changed:
            while True:
                blockers = self._blockers(owner, row, holds)
                if not blockers:
                    holders = self._holders.setdefault(row, {})
                    holders[owner] = holders.get(owner, 0) | holds
                    return True, waited
                if wait is LockWait.SKIP_LOCKED:
                    return False, False
                if wait is LockWait.NOWAIT:
                    raise RowLockUnavailable(f'could not obtain lock on row in relation "{row[0]}"')
                if self._closes_cycle(owner, blockers):
                    raise RowLockDeadlock(DEADLOCK)
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise RowLockUnavailable(LOCK_TIMEOUT)
                self._waiting_for[owner] = (row, holds)
                waited = True
                try:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._changed.wait(), left)
                finally:
                    self._waiting_for.pop(owner, None)

    def _closes_cycle(self, owner: int, blockers: list[int]) -> bool:
        """Whether waiting for ``blockers`` would close a cycle of waits back to ``owner``."""
        seen: set[int] = set()
        stack = list(blockers)
        while stack:
            current = stack.pop()
            if current == owner:
                return True
            if current in seen:
                continue
            seen.add(current)
            waits = self._waiting_for.get(current)
            if waits is not None:
                stack.extend(self._blockers(current, *waits))
        return False

    async def unlock(self, owner: int, holds: Sequence[tuple[CellKey, int]]) -> None:
        async with self._changed:
            for key, bits in holds:
                row = (key.table, key.row)
                holders = self._holders.get(row, {})
                left = holders.get(owner, 0) & ~bits
                if left:
                    holders[owner] = left
                else:
                    holders.pop(owner, None)
                    if not holders:
                        self._holders.pop(row, None)
            self._changed.notify_all()

    async def release(self, owner: int) -> None:
        async with self._changed:
            for row in [r for r, holders in self._holders.items() if owner in holders]:
                holders = self._holders[row]
                del holders[owner]
                if not holders:
                    del self._holders[row]
            self._changed.notify_all()


class LocalRowLocks:
    """One transaction's locks in a :class:`LocalRowLockTable`."""

    def __init__(self, table: LocalRowLockTable) -> None:
        self._table = table
        self._id = id(self)

    async def lock(
        self, keys: Sequence[CellKey], wait: LockWait, timeout_s: float | None, holds: int
    ) -> list[RowLockState]:
        return await self._table.lock(self._id, keys, wait, timeout_s, holds)

    async def unlock(self, holds: Sequence[tuple[CellKey, int]]) -> None:
        await self._table.unlock(self._id, holds)

    async def release(self) -> None:
        await self._table.release(self._id)
