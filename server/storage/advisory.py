"""Advisory locks (pg_advisory_lock and friends): locks on numbers that applications and
migration tools take to keep each other out, held by a session.

They must hold across every server process of a deployment, so the Postgres store keeps them
in Postgres itself: each SQL session that takes one gets a connection of its own to the first
shard, and takes Postgres's own advisory locks on it (:class:`PostgresAdvisorySession`). If the
server process dies, the connection closes and Postgres releases its locks: nothing lingers.
The memory store keeps them in a table of its process (:class:`LocalAdvisorySession`).

A key is one bigint or two integers. Locks are re-entrant per session, exclusive or shared, as
in Postgres. In the store they are all taken in Postgres's two-integer form (:func:`store_key`),
apart from the bigint locks the store takes on row hashes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

AdvisoryKey = tuple[int] | tuple[int, int]


class AdvisorySession(Protocol):
    """One SQL session's hold on advisory locks."""

    async def lock(self, key: AdvisoryKey, *, shared: bool, wait: bool) -> bool:
        """Take the lock (waiting for it, or False at once if ``wait`` is False and another
        session holds it in a conflicting mode)."""

    async def unlock(self, key: AdvisoryKey, *, shared: bool) -> bool:
        """Release one hold of the lock; False if this session did not hold it."""

    async def close(self) -> None:
        """Release every lock of the session."""


# -- in one process ---------------------------------------------------------------------------


@dataclass
class _Holders:
    exclusive: dict[int, int] = field(default_factory=dict)
    """Session id -> how many times it holds the lock exclusively."""
    shared: dict[int, int] = field(default_factory=dict)


class LocalLockTable:
    """The advisory locks of one process (the memory store's)."""

    def __init__(self) -> None:
        self._locks: dict[AdvisoryKey, _Holders] = {}
        self._changed = asyncio.Condition()

    def _free_for(self, holders: _Holders, session: int, shared: bool) -> bool:
        others_exclusive = any(s != session for s in holders.exclusive)
        if shared:
            return not others_exclusive
        return not others_exclusive and not any(s != session for s in holders.shared)

    async def lock(self, session: int, key: AdvisoryKey, shared: bool, wait: bool) -> bool:
        async with self._changed:
            while True:
                holders = self._locks.setdefault(key, _Holders())
                if self._free_for(holders, session, shared):
                    counts = holders.shared if shared else holders.exclusive
                    counts[session] = counts.get(session, 0) + 1
                    return True
                if not wait:
                    return False
                await self._changed.wait()

    async def unlock(self, session: int, key: AdvisoryKey, shared: bool) -> bool:
        async with self._changed:
            holders = self._locks.get(key)
            counts = None if holders is None else (holders.shared if shared else holders.exclusive)
            if counts is None or session not in counts:
                return False
            counts[session] -= 1
            if counts[session] == 0:
                del counts[session]
            self._changed.notify_all()
            return True

    async def release_all(self, session: int) -> None:
        async with self._changed:
            for holders in self._locks.values():
                holders.exclusive.pop(session, None)
                holders.shared.pop(session, None)
            self._changed.notify_all()


class LocalAdvisorySession:
    """A session's advisory locks in a :class:`LocalLockTable`."""

    def __init__(self, table: LocalLockTable) -> None:
        self._table = table
        self._id = id(self)

    async def lock(self, key: AdvisoryKey, *, shared: bool, wait: bool) -> bool:
        return await self._table.lock(self._id, key, shared, wait)

    async def unlock(self, key: AdvisoryKey, *, shared: bool) -> bool:
        return await self._table.unlock(self._id, key, shared)

    async def close(self) -> None:
        await self._table.release_all(self._id)


# -- in Postgres ------------------------------------------------------------------------------


class PostgresAdvisorySession:
    """A session's advisory locks, taken on a connection of its own to the first shard."""

    def __init__(self, connect: Callable[[], Awaitable[Any]]) -> None:
        self._connect = connect
        self._conn: Any = None
        self._guard = asyncio.Lock()

    async def _connection(self) -> Any:
        if self._conn is None or self._conn.is_closed():
            self._conn = await self._connect()
        return self._conn

    async def lock(self, key: AdvisoryKey, *, shared: bool, wait: bool) -> bool:
        name = f"pg_{'' if wait else 'try_'}advisory_lock{'_shared' if shared else ''}"
        async with self._guard:
            conn = await self._connection()
            result = await conn.fetchval(_call(name), *store_key(key))
        return True if wait else bool(result)

    async def unlock(self, key: AdvisoryKey, *, shared: bool) -> bool:
        name = f"pg_advisory_unlock{'_shared' if shared else ''}"
        async with self._guard:
            conn = await self._connection()
            return bool(await conn.fetchval(_call(name), *store_key(key)))

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close()


def _call(name: str) -> str:
    return f"SELECT {name}($1::int, $2::int)"


def store_key(key: AdvisoryKey) -> tuple[int, int]:
    """Where a user's lock lives among the store's own advisory locks: always the two-int4
    form, because the store takes bigint locks of its own on row hashes (a user's bigint lock
    there could stall writes to some rows). A bigint key is split into its two halves; so,
    unlike in Postgres, a bigint key and the two-int key of the same 64 bits are one lock."""
    if len(key) == 2:
        return key[0], key[1]
    (k,) = key
    return _int4(k >> 32), _int4(k & 0xFFFFFFFF)


def _int4(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v
