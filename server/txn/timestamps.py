"""The timestamp oracle: strictly increasing hybrid timestamps, durable across restarts.

A timestamp is ``physical_ms << TS_LOGICAL_BITS | logical`` (see
:mod:`percolator.server.storage.cells`). The oracle hands out contiguous ranges: the first
timestamp of a range is ``max(last + 1, now)``, so the physical part follows the wall clock, never
goes backwards when the clock does, and a logical part that runs out simply carries into the next
millisecond (the range is plain integer arithmetic).

Durability: a *high-water mark* ``H`` lives in one row of a Postgres table. Every timestamp handed
out is below the mark that was persisted before it was handed out; on start the oracle loads ``H``
and begins strictly above it. So a restart, even after ``kill -9``, never repeats or goes below a
timestamp handed out before. The mark is written one *window* (default 3 s) ahead and renewed in
the background once a third of the window is left, so persisting stays off the hot path; only a
burst that outruns the window waits for a write.

One oracle per store: the oracle holds a session-level advisory lock on its connection for its
lifetime, so a second coordinator on the same table fails to start instead of handing out the
same timestamps twice. Postgres releases the lock when the connection dies, including when the
process is killed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Protocol, runtime_checkable

import asyncpg

from percolator.server.metrics import definitions as metrics
from percolator.server.storage.cells import ts_from_physical_ms
from percolator.server.storage.errors import redact_dsn

log = logging.getLogger(__name__)

DEFAULT_TABLE = "percolator_oracle"
DEFAULT_WINDOW_MS = 3000
# A renewal starts when less than this fraction of the window is left above what was handed out.
RENEW_FRACTION = 1 / 3
# Class id of the advisory lock (the two-int4 form, a key space apart from the single-bigint
# locks the cell store takes per row): "PCTR".
ADVISORY_LOCK_CLASS = 0x50435452
STATEMENT_TIMEOUT_S = 10.0
DEFAULT_LOCK_WAIT_S = 15.0
"""How long start waits for the lock: the backend of a killed predecessor may still be exiting."""


def wall_clock_ms() -> int:
    """Milliseconds since the Unix epoch, from the system clock."""
    return time.time_ns() // 1_000_000


@runtime_checkable
class TimestampSource(Protocol):
    """Anything that hands out timestamps from the oracle; what the transaction layer uses."""

    async def get_timestamp(self) -> int:
        """A timestamp greater than every timestamp handed out before this call began."""
        ...


class OracleError(Exception):
    """The oracle cannot persist its high-water mark or cannot take ownership of its store."""


class TimestampOracle:
    """Hands out strictly increasing timestamps; persists a high-water mark ahead of them.

    Create with :meth:`open`. Not thread-safe: use it from one event loop.
    """

    def __init__(
        self,
        dsn: str,
        *,
        table: str = DEFAULT_TABLE,
        window_ms: int = DEFAULT_WINDOW_MS,
        clock_ms: Callable[[], int] = wall_clock_ms,
        lock_wait_s: float = DEFAULT_LOCK_WAIT_S,
    ) -> None:
        if not table.isidentifier():
            raise ValueError(f"oracle table name must be a plain identifier, got {table!r}")
        if window_ms <= 0:
            raise ValueError("window_ms must be positive")
        self._dsn = dsn
        self._table = table
        self._window = ts_from_physical_ms(window_ms)
        self._renew_below = int(self._window * RENEW_FRACTION)
        self._clock_ms = clock_ms
        self._lock_wait_s = lock_wait_s
        self._conn: asyncpg.Connection | None = None
        self._persist_lock = asyncio.Lock()
        self._renewal: asyncio.Task[None] | None = None
        self._closed = False
        self._last = 0
        """The last timestamp handed out (or the loaded mark, right after open)."""
        self._limit = 0
        """The persisted high-water mark: every timestamp handed out is below it."""
        self.persist_count = 0
        """How many times the mark was written (for tests and metrics)."""

    @classmethod
    async def open(
        cls,
        dsn: str,
        *,
        table: str = DEFAULT_TABLE,
        window_ms: int = DEFAULT_WINDOW_MS,
        clock_ms: Callable[[], int] = wall_clock_ms,
        lock_wait_s: float = DEFAULT_LOCK_WAIT_S,
    ) -> TimestampOracle:
        """Connect, create the table if missing, take ownership and load the mark."""
        oracle = cls(
            dsn, table=table, window_ms=window_ms, clock_ms=clock_ms, lock_wait_s=lock_wait_s
        )
        await oracle._connect()
        return oracle

    @property
    def last(self) -> int:
        """The last timestamp handed out (the loaded mark before the first allocation)."""
        return self._last

    @property
    def persisted_mark(self) -> int:
        """The high-water mark known to be in Postgres; everything handed out is below it."""
        return self._limit

    def _now_ts(self) -> int:
        return ts_from_physical_ms(self._clock_ms())

    async def get_timestamp(self) -> int:
        """One timestamp (so an oracle is itself a :class:`TimestampSource`)."""
        first = self.try_allocate(1)  # the common case, without another coroutine layer
        return first if first is not None else await self.allocate(1)

    async def allocate(self, count: int) -> int:
        """Reserve ``count`` timestamps ``[first, first + count)`` and return ``first``.

        Every timestamp is greater than any handed out before, by this oracle or by an earlier
        one on the same store.
        """
        if count < 1:
            raise ValueError(f"count must be at least 1, got {count}")
        while True:
            first = self.try_allocate(count)
            if first is not None:
                return first
            metrics.ORACLE_PERSIST_WAITS.inc()
            await self._persist(max(self.last + 1, self._now_ts()) + count)

    def try_allocate(self, count: int) -> int | None:
        """Like :meth:`allocate` without waiting: None when the range would reach the persisted
        mark (call :meth:`allocate`, which waits for a new mark)."""
        if self._closed:
            raise OracleError("the timestamp oracle is closed")
        now = self._now_ts()
        last = self._last
        first = last + 1 if last >= now else now
        end = first + count
        limit = self._limit
        if end > limit:
            return None
        self._last = end - 1
        metrics.ORACLE_TIMESTAMPS.inc(count)
        # Renew ahead of need so that a steady stream of requests never waits for Postgres.
        if limit - (end if end > now else now) < self._renew_below and self._renewal is None:
            self._renewal = asyncio.get_running_loop().create_task(self._renew())
        return first

    async def _renew(self) -> None:
        try:
            await self._persist(max(self.last + 1, self._now_ts()))
        except Exception:
            # The hot path will retry synchronously when it reaches the mark and report the error.
            log.warning(
                "timestamp oracle: background renewal of the high-water mark failed", exc_info=True
            )
        finally:
            self._renewal = None

    async def _persist(self, at_least: int) -> None:
        """Make the persisted mark cover ``at_least`` (exclusive) plus one window."""
        async with self._persist_lock:
            if self._closed:
                raise OracleError("the timestamp oracle is closed")
            # Another caller may have renewed while we waited; then nothing to do unless this
            # renewal is ahead-of-time and the remaining window is short again.
            if self.persisted_mark - at_least >= self._renew_below:
                return
            mark = max(at_least, self._now_ts()) + self._window
            conn = await self._connection()
            started = time.monotonic()
            try:
                stored = await conn.fetchval(
                    f"UPDATE {self._table} SET high_water = GREATEST(high_water, $1) "
                    "WHERE id = 1 RETURNING high_water",
                    mark,
                    timeout=STATEMENT_TIMEOUT_S,
                )
            except (asyncpg.PostgresError, OSError, asyncpg.InterfaceError) as exc:
                self._drop_connection()
                raise OracleError(
                    f"cannot persist the timestamp high-water mark in {redact_dsn(self._dsn)}: "
                    f"{exc}"
                ) from exc
            metrics.ORACLE_PERSIST_SECONDS.observe(time.monotonic() - started)
            # Only another writer can have put a larger mark there: never go below it.
            self._publish_mark(stored, raise_last=stored != mark)
            self.persist_count += 1

    async def _connection(self) -> asyncpg.Connection:
        if self._conn is None or self._conn.is_closed():
            await self._connect()
        assert self._conn is not None
        return self._conn

    async def _connect(self) -> None:
        try:
            conn = await asyncpg.connect(self._dsn, timeout=10)
        except (TimeoutError, OSError, asyncpg.PostgresError) as exc:
            raise OracleError(
                f"cannot reach the oracle store {redact_dsn(self._dsn)}: {exc}"
            ) from exc
        try:
            await self._take_ownership(conn)
            await conn.execute(
                f"CREATE TABLE IF NOT EXISTS {self._table} "
                "(id int PRIMARY KEY CHECK (id = 1), high_water bigint NOT NULL)"
            )
            await conn.execute(
                f"INSERT INTO {self._table} (id, high_water) VALUES (1, 0) "
                "ON CONFLICT (id) DO NOTHING"
            )
            mark = await conn.fetchval(f"SELECT high_water FROM {self._table} WHERE id = 1")
        except BaseException:
            await conn.close()
            raise
        if mark > self.persisted_mark:
            # Written by a predecessor (or, after a reconnect, by a coordinator that took over
            # meanwhile): start strictly above anything it may have handed out. The first
            # allocation then writes a new mark.
            self._publish_mark(mark, raise_last=True)
        self._conn = conn

    def _publish_mark(self, mark: int, *, raise_last: bool) -> None:
        """``mark`` is the persisted high-water mark now; with ``raise_last`` nothing at or
        below it may be handed out any more."""
        if raise_last:
            self._last = max(self._last, mark)
        self._limit = mark

    async def _take_ownership(self, conn: asyncpg.Connection) -> None:
        deadline = time.monotonic() + self._lock_wait_s
        while True:
            got = await conn.fetchval(
                "SELECT pg_try_advisory_lock($1, hashtext($2))", ADVISORY_LOCK_CLASS, self._table
            )
            if got:
                return
            if time.monotonic() >= deadline:
                raise OracleError(
                    f"another timestamp oracle owns table {self._table} in "
                    f"{redact_dsn(self._dsn)} (its advisory lock is held); "
                    "only one coordinator may run per store"
                )
            await asyncio.sleep(0.2)

    def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None and not conn.is_closed():
            conn.terminate()

    async def close(self) -> None:
        """Stop handing out timestamps and release the store (and its advisory lock)."""
        if self._closed:
            return
        renewal = self._renewal
        if renewal is not None:
            try:
                await renewal
            except asyncio.CancelledError:
                pass
        async with self._persist_lock:
            self._closed = True
            conn, self._conn = self._conn, None
            if conn is not None and not conn.is_closed():
                await conn.close()


class LocalTimestampSource:
    """A :class:`TimestampSource` over an oracle in the same process (one timestamp a call)."""

    def __init__(self, oracle: TimestampOracle) -> None:
        self._oracle = oracle

    async def get_timestamp(self) -> int:
        """The next timestamp from the oracle."""
        first = self._oracle.try_allocate(1)
        return first if first is not None else await self._oracle.allocate(1)
