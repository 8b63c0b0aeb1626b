"""Coalesces concurrent single-cell reads of one shard into shared statements.

Every statement costs a round trip plus fixed client and server work that dwarfs reading one
row. When many transactions read single cells of the same shard at once (many SQL sessions, or
the benchmark's 32 clients), at most ``max_in_flight`` statements run; reads that arrive
meanwhile wait and go together in the next statement, one per shard, each with its own read
timestamp. A lone reader sends at once, so latency at low load is unchanged.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from percolator.server.storage.cells import CellKey, CellRead

RunBatch = Callable[[list[CellKey], list[int]], Awaitable[list[CellRead]]]
"""Reads cells, each at its own timestamp, in one statement; results in the same order."""

_Waiter = tuple[CellKey, int, "asyncio.Future[CellRead]"]


class PointReadBatcher:
    """One per shard."""

    def __init__(self, run: RunBatch, *, max_in_flight: int, max_batch: int = 512) -> None:
        self._run = run
        self._max_in_flight = max_in_flight
        self._max_batch = max_batch
        self._waiting: list[_Waiter] = []
        self._in_flight = 0

    async def read(self, key: CellKey, ts: int) -> CellRead:
        """Read one cell at ``ts``, alone or with the reads waiting at that moment."""
        if self._in_flight >= self._max_in_flight:
            future: asyncio.Future[CellRead] = asyncio.get_running_loop().create_future()
            self._waiting.append((key, ts, future))
            return await future
        # The caller sends the statement itself: no task to schedule on the common path.
        self._in_flight += 1
        try:
            others = self._take()
            try:
                results = await self._run(
                    [key, *(w[0] for w in others)], [ts, *(w[1] for w in others)]
                )
            except BaseException as exc:
                self._fail(others, exc)
                raise
            for (_, _, future), result in zip(others, results[1:], strict=True):
                if not future.done():
                    future.set_result(result)
            return results[0]
        finally:
            self._in_flight -= 1
            if self._waiting and self._in_flight < self._max_in_flight:
                self._in_flight += 1
                asyncio.get_running_loop().create_task(self._drain())

    def _take(self) -> list[_Waiter]:
        batch = self._waiting[: self._max_batch]
        del self._waiting[: self._max_batch]
        return batch

    def _fail(self, waiters: list[_Waiter], exc: BaseException) -> None:
        if isinstance(exc, asyncio.CancelledError):
            # Only the sender was cancelled: the others' reads go in a later statement.
            self._waiting[:0] = [w for w in waiters if not w[2].done()]
            return
        for _, _, future in waiters:
            if not future.done():
                future.set_exception(exc)

    async def _drain(self) -> None:
        """Send the waiting reads, batch after batch, until none are left."""
        try:
            while self._waiting:
                batch = self._take()
                try:
                    results = await self._run([w[0] for w in batch], [w[1] for w in batch])
                except BaseException as exc:
                    self._fail(batch, exc)
                    if isinstance(exc, asyncio.CancelledError):
                        raise
                    continue
                for (_, _, future), result in zip(batch, results, strict=True):
                    if not future.done():
                        future.set_result(result)
        finally:
            self._in_flight -= 1
