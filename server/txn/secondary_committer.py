"""Commits secondaries after the commit point, off the committer's path.

Once the primary is committed the transaction is committed; its secondary locks only need to be
turned into write records. A bounded queue carries that work to a few background tasks so that
``commit()`` returns at the commit point, while a flood of commits slows down (the queue is full)
instead of growing memory. A task takes every job waiting in the queue (up to
``MAX_BATCH_CELLS`` cells) and commits them together: under load, the secondaries of many small
transactions share one statement per shard. A secondary that is never committed here (the
process dies) is rolled forward by the first reader that meets it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from percolator.server.storage.cells import CellKey, CommitRequest
from percolator.server.storage.store import CellStore

log = logging.getLogger(__name__)


MAX_BATCH_CELLS = 1024
"""Cells one background commit gathers from the queue (a job larger than that goes alone)."""


class SecondaryCommitter:
    """A bounded queue of secondary commits with ``workers`` background tasks."""

    def __init__(self, store: CellStore, *, max_pending: int = 256, workers: int = 4) -> None:
        self._store = store
        self._max_pending = max_pending
        self._workers = workers
        self._queue: asyncio.Queue[CommitRequest] | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self.failures = 0

    def _ensure_started(self) -> asyncio.Queue[CommitRequest]:
        if self._queue is None:
            self._queue = asyncio.Queue(self._max_pending)
            self._tasks = [asyncio.create_task(self._run()) for _ in range(self._workers)]
        return self._queue

    async def submit(self, start_ts: int, commit_ts: int, keys: Sequence[CellKey]) -> None:
        """Queue the secondaries of a committed transaction; waits while the queue is full."""
        if keys:
            await self._ensure_started().put(CommitRequest(start_ts, commit_ts, keys))

    async def _run(self) -> None:
        assert self._queue is not None
        queue = self._queue
        carried: CommitRequest | None = None  # taken from the queue, too big for the last batch
        while True:
            jobs = [carried if carried is not None else await queue.get()]
            carried = None
            cells = len(jobs[0].keys)
            while not queue.empty():
                job = queue.get_nowait()
                if cells + len(job.keys) > MAX_BATCH_CELLS:
                    carried = job
                    break
                jobs.append(job)
                cells += len(job.keys)
            try:
                await self._store.commit_batch(jobs)
            except Exception:
                # Not fatal: the locks stay and readers roll them forward from the primary.
                self.failures += len(jobs)
                starts = ", ".join(str(j.start_ts) for j in jobs)
                log.warning("secondary commit of start_ts %s failed", starts, exc_info=True)
            finally:
                for _ in jobs:
                    queue.task_done()

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
