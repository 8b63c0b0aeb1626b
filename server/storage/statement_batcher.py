"""Coalesces concurrent single-cell operations on one shard into shared statements.

Every statement costs a round trip plus fixed client and server work that dwarfs reading or
locking one row. When many transactions work on single cells of the same shard at once (many
SQL sessions, or a benchmark's 32 clients), at most ``max_in_flight`` statements of a kind run;
operations that arrive meanwhile wait and go together in the next statement, each with its own
arguments (its own timestamps). A lone caller sends at once, so latency at low load is unchanged.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


class StatementBatcher(Generic[Item, Result]):
    """One per shard and kind of operation. ``run`` executes a batch in one statement and
    returns one result per item, in order."""

    def __init__(
        self,
        run: Callable[[list[Item]], Awaitable[list[Result]]],
        *,
        max_in_flight: int,
        max_batch: int = 256,
    ) -> None:
        self._run = run
        self._max_in_flight = max_in_flight
        self._max_batch = max_batch
        self._waiting: list[tuple[Item, asyncio.Future[Result]]] = []
        self._in_flight = 0

    async def submit(self, item: Item) -> Result:
        """Run one item, alone or with the items waiting at that moment."""
        if self._in_flight >= self._max_in_flight:
            future: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
            self._waiting.append((item, future))
            return await future
        # The caller sends the statement itself: no task to schedule on the common path.
        self._in_flight += 1
        try:
            others = self._take()
            try:
                results = await self._run([item, *(w[0] for w in others)])
            except BaseException as exc:
                self._fail(others, exc)
                raise
            self._resolve(others, results[1:])
            return results[0]
        finally:
            self._in_flight -= 1
            if self._waiting and self._in_flight < self._max_in_flight:
                self._in_flight += 1
                asyncio.get_running_loop().create_task(self._drain())

    def _take(self) -> list[tuple[Item, asyncio.Future[Result]]]:
        batch = self._waiting[: self._max_batch]
        del self._waiting[: self._max_batch]
        return batch

    @staticmethod
    def _resolve(waiters: list[tuple[Item, asyncio.Future[Result]]], results: list[Result]) -> None:
        for (_, future), result in zip(waiters, results, strict=True):
            if not future.done():
                future.set_result(result)

    def _fail(self, waiters: list[tuple[Item, asyncio.Future[Result]]], exc: BaseException) -> None:
        if isinstance(exc, asyncio.CancelledError):
            # Only the sender was cancelled: the others go in a later statement.
            self._waiting[:0] = [w for w in waiters if not w[1].done()]
            return
        for _, future in waiters:
            if not future.done():
                future.set_exception(exc)

    async def _drain(self) -> None:
        """Send the waiting items, batch after batch, until none are left."""
        try:
            while self._waiting:
                batch = self._take()
                try:
                    results = await self._run([w[0] for w in batch])
                except BaseException as exc:
                    self._fail(batch, exc)
                    if isinstance(exc, asyncio.CancelledError):
                        raise
                    continue
                self._resolve(batch, results)
        finally:
            self._in_flight -= 1
