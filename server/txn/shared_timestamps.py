"""Timestamps shared by the processes of one machine, without a round trip to the coordinator.

``percolator serve --processes N`` runs the coordinator in its first process and the SQL front end
in N worker processes on the same machine. A transaction needs a timestamp to start and one to
commit; over gRPC each costs more CPU than the rest of a point read, so the workers take theirs
from a small memory-mapped file instead: the oracle's (last handed out, persisted high-water
mark) pair, read and advanced under an exclusive ``flock``. The coordinator's process owns the
oracle and persists the mark one window ahead, as a lone oracle does; it renews the mark on a
timer, since allocations in other processes do not pass through its code. Every timestamp is
still strictly greater than every one handed out before (in any process), and below a mark
that was persisted first.

The lock is a kernel file lock: a process killed while holding it releases it, and the critical
section is a few arithmetic operations between two system calls.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import mmap
import os
import struct
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from percolator.server.metrics import definitions as metrics
from percolator.server.storage.cells import ts_from_physical_ms
from percolator.server.txn.timestamp_client import CoordinatorUnavailable
from percolator.server.txn.timestamps import (
    DEFAULT_LOCK_WAIT_S,
    DEFAULT_TABLE,
    DEFAULT_WINDOW_MS,
    OracleError,
    TimestampOracle,
    wall_clock_ms,
)

log = logging.getLogger(__name__)

# last handed out, persisted mark, closed flag (little-endian int64s).
_LAYOUT = struct.Struct("<qqq")
TIMESTAMPS_FILE = "timestamps"
"""A pool directory's file holding the range (:meth:`SharedRange.create` in a directory)."""
RENEW_INTERVAL_S = 0.1
"""How often the owner looks at how much of the window is left."""
WAIT_STEP_S = 0.002
DEFAULT_WAIT_S = 10.0
"""How long a worker waits for the owner to renew a mark it reached before giving up."""


def shared_memory_dir() -> str | None:
    """``/dev/shm`` where there is one (files there live in memory), else the default
    temporary directory."""
    return "/dev/shm" if os.path.isdir("/dev/shm") else None


def _now_ts() -> int:
    return ts_from_physical_ms(wall_clock_ms())


class SharedRange:
    """The oracle's (last, mark) pair in a file mapped by every process of the machine."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd = fd
        self._map = mmap.mmap(fd, _LAYOUT.size)

    @classmethod
    def create(cls, directory: Path | None = None) -> SharedRange:
        """A new, zeroed range in a fresh file, readable by this user only: ``timestamps`` in
        ``directory``, or a temporary file (in ``/dev/shm`` where there is one)."""
        if directory is None:
            fd, name = tempfile.mkstemp(prefix="percolator-ts-", dir=shared_memory_dir())
            path = Path(name)
        else:
            path = directory / TIMESTAMPS_FILE
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        os.ftruncate(fd, _LAYOUT.size)
        return cls(path, fd)

    @classmethod
    def open(cls, path: str | Path) -> SharedRange:
        """The range another process created at ``path``."""
        return cls(Path(path), os.open(path, os.O_RDWR))

    def take(self, count: int, now: int) -> int | None:
        """Hand out ``count`` timestamps from ``max(last + 1, now)``; None when they would
        reach the persisted mark. Raises :class:`OracleError` once the owner closed it."""
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            last, mark, closed = _LAYOUT.unpack_from(self._map)
            if closed:
                raise OracleError("the timestamp oracle is closed")
            first = last + 1 if last >= now else now
            end = first + count
            if end > mark:
                return None
            _LAYOUT.pack_into(self._map, 0, end - 1, mark, 0)
            return first
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def read(self) -> tuple[int, int]:
        """(last handed out, persisted mark)."""
        fcntl.flock(self._fd, fcntl.LOCK_SH)
        try:
            last, mark, _ = _LAYOUT.unpack_from(self._map)
            return last, mark
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def publish(self, mark: int, *, raise_last: bool, closed: bool = False) -> None:
        """Make ``mark`` the persisted mark (raising last to it with ``raise_last``)."""
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            last, _, _ = _LAYOUT.unpack_from(self._map)
            if raise_last:
                last = max(last, mark)
            _LAYOUT.pack_into(self._map, 0, last, mark, int(closed))
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self, *, unlink: bool = False) -> None:
        """Unmap (and with ``unlink``, as its creator, remove the file)."""
        self._map.close()
        os.close(self._fd)
        if unlink:
            self.path.unlink(missing_ok=True)


class SharedTimestampOracle(TimestampOracle):
    """A :class:`TimestampOracle` whose (last, mark) pair lives in a :class:`SharedRange`, so
    that other processes can take timestamps from it with a :class:`SharedTimestampSource`."""

    def __init__(self, dsn: str, shared: SharedRange, **kwargs: object) -> None:
        super().__init__(dsn, **kwargs)  # type: ignore[arg-type]
        self.shared = shared
        self._keeper: asyncio.Task[None] | None = None

    @classmethod
    async def open_shared(
        cls,
        dsn: str,
        shared: SharedRange,
        *,
        table: str = DEFAULT_TABLE,
        window_ms: int = DEFAULT_WINDOW_MS,
        clock_ms: Callable[[], int] = wall_clock_ms,
        lock_wait_s: float = DEFAULT_LOCK_WAIT_S,
    ) -> SharedTimestampOracle:
        """Connect, take ownership, load the mark into ``shared`` and keep it renewed."""
        oracle = cls(
            dsn,
            shared,
            table=table,
            window_ms=window_ms,
            clock_ms=clock_ms,
            lock_wait_s=lock_wait_s,
        )
        await oracle._connect()
        oracle._keeper = asyncio.get_running_loop().create_task(oracle._keep_ahead())
        return oracle

    @property
    def last(self) -> int:
        return self.shared.read()[0]

    @property
    def persisted_mark(self) -> int:
        return self.shared.read()[1]

    def try_allocate(self, count: int) -> int | None:
        if self._closed:
            raise OracleError("the timestamp oracle is closed")
        first = self.shared.take(count, self._now_ts())
        if first is not None:
            metrics.ORACLE_TIMESTAMPS.inc(count)
        return first

    def _publish_mark(self, mark: int, *, raise_last: bool) -> None:
        self.shared.publish(mark, raise_last=raise_last)

    async def _keep_ahead(self) -> None:
        # Other processes' allocations never run the base class's renewal trigger: look on a
        # timer instead. A window of seconds leaves many ticks to succeed before one is missed.
        while True:
            await asyncio.sleep(RENEW_INTERVAL_S)
            last, mark = self.shared.read()
            now = self._now_ts()
            if mark - max(last, now) < self._renew_below:
                try:
                    await self._persist(max(last + 1, now))
                except Exception:
                    log.warning("timestamp oracle: renewing the shared mark failed", exc_info=True)

    async def close(self) -> None:
        """Stop renewing, tell the other processes it is closed, release the store."""
        keeper, self._keeper = self._keeper, None
        if keeper is not None:
            keeper.cancel()
            await asyncio.gather(keeper, return_exceptions=True)
        if not self._closed:
            self.shared.publish(self.persisted_mark, raise_last=False, closed=True)
        await super().close()


class SharedTimestampSource:
    """A :class:`~percolator.server.txn.timestamps.TimestampSource` over a
    :class:`SharedRange` owned by another process's :class:`SharedTimestampOracle`."""

    def __init__(self, shared: SharedRange, *, wait_s: float = DEFAULT_WAIT_S) -> None:
        self._shared = shared
        self._wait_s = wait_s

    async def get_timestamp(self) -> int:
        """The next timestamp; waits (up to ``wait_s``) while the owner renews the mark."""
        first = self._take()
        if first is not None:
            return first
        return await self._wait_for_renewal()

    def _take(self) -> int | None:
        try:
            return self._shared.take(1, _now_ts())
        except OracleError as exc:  # the coordinator's process is shutting down
            raise CoordinatorUnavailable(str(self._shared.path), str(exc)) from exc

    async def _wait_for_renewal(self) -> int:
        deadline = time.monotonic() + self._wait_s
        metrics.ORACLE_PERSIST_WAITS.inc()
        while time.monotonic() < deadline:
            await asyncio.sleep(WAIT_STEP_S)
            first = self._take()
            if first is not None:
                return first
        raise CoordinatorUnavailable(
            str(self._shared.path),
            f"its oracle did not renew the timestamp high-water mark within {self._wait_s:g}s",
        )

    async def close(self) -> None:
        """Unmap the range (the owner removes it)."""
        self._shared.close()
