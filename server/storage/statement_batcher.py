"""Coalesces concurrent operations on one shard into shared statements.

Every statement costs a round trip plus fixed client and server work that dwarfs reading or
locking a few rows. When many transactions work on the same shard at once (many SQL sessions,
a worker's concurrent observer runs, a benchmark's 32 clients), at most ``max_in_flight``
statements of a kind run; operations that arrive meanwhile wait and go together in the next
statement, each with its own arguments (its own timestamps). A lone caller sends at once, so
latency at low load is unchanged.

An operation is a group of items (a transaction's cells of one shard, or one cell) that goes
whole into one statement, beside other groups; the results come back per item. A group larger
than a shared statement's bound goes alone and at once, without waiting for a turn.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


class _Group(Generic[Item, Result]):
    """Items waiting to go together, and the future of their results."""

    __slots__ = ("future", "items")

    def __init__(self, items: Sequence[Item], future: asyncio.Future[list[Result]]) -> None:
        self.items = items
        self.future = future


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
        """``max_batch`` bounds the items of a statement made of several groups; a larger
        group goes alone, at once."""
        self._run = run
        self._max_in_flight = max_in_flight
        self._max_batch = max_batch
        self._waiting: list[_Group[Item, Result]] = []
        self._in_flight = 0

    async def submit(self, item: Item) -> Result:
        """Run one item, alone or with the groups waiting at that moment."""
        (result,) = await self.submit_group((item,))
        return result

    async def submit_group(self, items: Sequence[Item]) -> list[Result]:
        """Run ``items`` in one statement, alone or with the groups waiting at that moment."""
        if len(items) > self._max_batch:
            # Too large to share a statement anyway: sent at once, beside the shared ones, so
            # that a large read or write never holds up the small ones queued behind it.
            return await self._run(list(items))
        if self._in_flight >= self._max_in_flight:
            future: asyncio.Future[list[Result]] = asyncio.get_running_loop().create_future()
            group = _Group(items, future)
            self._waiting.append(group)
            try:
                return await future
            except asyncio.CancelledError:
                # Not sent yet: it never will be (a cancelled prewrite must not lock later).
                if group in self._waiting:
                    self._waiting.remove(group)
                raise
        # The caller sends the statement itself: no task to schedule on the common path.
        self._in_flight += 1
        try:
            others = self._take(len(items))
            batch = list(items)
            for group in others:
                batch.extend(group.items)
            try:
                results = await self._run(batch)
            except BaseException as exc:
                self._fail(others, exc)
                raise
            self._resolve(others, results, len(items))
            return results[: len(items)]
        finally:
            self._in_flight -= 1
            if self._waiting and self._in_flight < self._max_in_flight:
                self._in_flight += 1
                asyncio.get_running_loop().create_task(self._drain())

    def _take(self, taken: int = 0) -> list[_Group[Item, Result]]:
        """Waiting groups, oldest first, while they fit in ``max_batch`` beside ``taken``
        items (at least one group when ``taken`` is 0)."""
        n = 0
        for group in self._waiting:
            if taken and taken + len(group.items) > self._max_batch:
                break
            taken += len(group.items)
            n += 1
        batch = self._waiting[:n]
        del self._waiting[:n]
        return batch

    @staticmethod
    def _resolve(groups: list[_Group[Item, Result]], results: list[Result], at: int) -> None:
        """Hand each group its slice of ``results``, which start at index ``at``."""
        for group in groups:
            end = at + len(group.items)
            if not group.future.done():
                group.future.set_result(results[at:end])
            at = end

    def _fail(self, groups: list[_Group[Item, Result]], exc: BaseException) -> None:
        if isinstance(exc, asyncio.CancelledError):
            # Only the sender was cancelled: the others go in a later statement.
            self._waiting[:0] = [g for g in groups if not g.future.done()]
            return
        for group in groups:
            if not group.future.done():
                group.future.set_exception(exc)

    async def _drain(self) -> None:
        """Send the waiting groups, batch after batch, until none are left."""
        try:
            while self._waiting:
                batch = self._take()
                try:
                    results = await self._run([it for group in batch for it in group.items])
                except BaseException as exc:
                    self._fail(batch, exc)
                    if isinstance(exc, asyncio.CancelledError):
                        raise
                    continue
                self._resolve(batch, results, 0)
        finally:
            self._in_flight -= 1
