"""A shard's pool of asyncpg connections, for autocommit statements only.

The store runs one autocommit statement per round trip and never changes a session's state
(settings are fixed at connect, advisory locks are transaction-scoped), so a connection needs
no reset between uses. asyncpg's own pool resets anyway (a hook call), and wraps every acquire
and release in timeouts, a shielded task and proxy objects: 10-20 µs of client CPU per
statement on the 2-core VM of BENCHMARKS.md (35-43 against 23-28 µs for a pooled ``SELECT 1``,
a one-off measurement), several ``getpid()`` system calls among them (Python 3.11's
``get_running_loop``). Here acquiring an idle connection is a list pop, releasing one a push.

A connection comes back to the pool only in a known state: closed connections are dropped,
and one whose statement was interrupted (cancelled, or the driver's state was broken) is
terminated by the caller (:meth:`ConnectionPool.discard`) instead of being released.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any

import asyncpg

Connect = Callable[[], Coroutine[Any, Any, asyncpg.Connection]]

CLOSE_TIMEOUT_S = 5.0
"""How long closing an idle connection may wait for the server before it is cut."""


class PoolClosed(Exception):
    """The pool was closed while a caller waited for a connection."""


class ConnectionPool:
    """At most ``max_size`` connections made by ``connect``, opened on demand and kept."""

    def __init__(self, connect: Connect, max_size: int) -> None:
        if max_size < 1:
            raise ValueError("a pool needs at least one connection")
        self._connect = connect
        self._max_size = max_size
        self._idle: list[asyncpg.Connection] = []
        self._waiters: deque[asyncio.Future[asyncpg.Connection | None]] = deque()
        self._size = 0  # open connections plus those being opened
        self._closed = False

    @property
    def size(self) -> int:
        """Connections open or being opened."""
        return self._size

    async def acquire(self) -> asyncpg.Connection:
        """An idle connection, else a new one while under ``max_size``, else the next one
        released. Opening one may fail (the connect function's errors); waiting does not time
        out: a busy pool is load, not an outage."""
        while True:
            if self._closed:
                raise PoolClosed("the connection pool is closed")
            while self._idle:
                conn = self._idle.pop()
                if not conn.is_closed():
                    return conn
                self._drop(conn)  # its server went away while it was idle
            if self._size < self._max_size:
                return await self._open()
            waiter: asyncio.Future[asyncpg.Connection | None]
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                conn = await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    # Handed a connection or a free slot as we were cancelled: pass it on.
                    handed = waiter.result()
                    if handed is not None:
                        self.release(handed)
                    elif not self._closed:
                        self._wake_one(None)
                raise
            if conn is not None:
                return conn
            # None: a slot was freed (a connection dropped): loop to open one or take one.

    async def _open(self) -> asyncpg.Connection:
        self._size += 1
        try:
            return await self._connect()
        except BaseException:
            self._size -= 1
            self._wake_one(None)
            raise

    def release(self, conn: asyncpg.Connection) -> None:
        """Give back a connection after a completed statement (closed ones are dropped)."""
        if conn.is_closed() or self._closed:
            self._drop(conn)
            return
        if not self._wake_one(conn):
            self._idle.append(conn)

    def discard(self, conn: asyncpg.Connection) -> None:
        """Terminate a connection whose state is unknown (an interrupted statement) instead of
        giving it back; a later acquire opens a new one."""
        self._drop(conn)

    def _drop(self, conn: asyncpg.Connection) -> None:
        conn.terminate()
        self._size -= 1
        if not self._closed:
            self._wake_one(None)

    def _wake_one(self, conn: asyncpg.Connection | None) -> bool:
        """Hand ``conn`` (or, with None, a free slot) to the first live waiter."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(conn)
                return True
        return False

    async def close(self) -> None:
        """Close the idle connections; those in use are terminated when they come back.
        Waiters get :class:`PoolClosed`."""
        self._closed = True
        idle, self._idle = self._idle, []
        self._size -= len(idle)
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_exception(PoolClosed("the connection pool is closed"))
        closing = (c.close(timeout=CLOSE_TIMEOUT_S) for c in idle)
        await asyncio.gather(*closing, return_exceptions=True)
