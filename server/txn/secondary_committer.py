"""Commits secondaries after the commit point, off the committer's path.

Once the primary is committed the transaction is committed; its secondary locks only need to be
turned into write records. A bounded queue carries that work to a few background tasks so that
``commit()`` returns at the commit point, while a flood of commits slows down (the queue is full)
instead of growing memory. A secondary that is never committed here (the process dies) is rolled
forward by the first reader that meets it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from percolator.server.storage.cells import CellKey
from percolator.server.storage.store import CellStore

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class _Job:
    start_ts: int
    commit_ts: int
    keys: Sequence[CellKey]


class SecondaryCommitter:
    """A bounded queue of secondary commits with ``workers`` background tasks."""

    def __init__(self, store: CellStore, *, max_pending: int = 256, workers: int = 4) -> None:
        self._store = store
        self._max_pending = max_pending
        self._workers = workers
        self._queue: asyncio.Queue[_Job] | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self.failures = 0

    def _ensure_started(self) -> asyncio.Queue[_Job]:
        if self._queue is None:
            self._queue = asyncio.Queue(self._max_pending)
            self._tasks = [asyncio.create_task(self._run()) for _ in range(self._workers)]
        return self._queue

    async def submit(self, start_ts: int, commit_ts: int, keys: Sequence[CellKey]) -> None:
        """Queue the secondaries of a committed transaction; waits while the queue is full."""
        if keys:
            await self._ensure_started().put(_Job(start_ts, commit_ts, keys))

    async def _run(self) -> None:
        assert self._queue is not None
        while True:
            job = await self._queue.get()
            try:
                await self._store.commit(job.start_ts, job.commit_ts, job.keys)
            except Exception:
                # Not fatal: the locks stay and readers roll them forward from the primary.
                self.failures += 1
                log.warning("secondary commit of start_ts %d failed", job.start_ts, exc_info=True)
            finally:
                self._queue.task_done()

    async def drain(self) -> None:
        """Wait until every queued secondary commit has been attempted."""
        if self._queue is not None:
            await self._queue.join()

    async def close(self) -> None:
        """Drain the queue, then stop the workers."""
        await self.drain()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        self._queue = None
