"""A blocking facade over the async transaction layer, for scripts.

An event loop runs in a background thread; every call is submitted to it and waited for. The
async objects stay on their loop, so the facade may be used from any one thread at a time.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Sequence
from types import TracebackType
from typing import Any, TypeVar

from percolator.server.storage.cells import CellKey
from percolator.server.txn.client import TransactionClient
from percolator.server.txn.config import retry_delay_s
from percolator.server.txn.errors import Retryable
from percolator.server.txn.transaction import Row, Transaction

T = TypeVar("T")


class LoopThread:
    """An asyncio event loop running in a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="percolator-loop", daemon=True
        )
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine on the loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()


class SyncTransaction:
    """Blocking twin of :class:`~percolator.server.txn.transaction.Transaction`."""

    def __init__(self, loop: LoopThread, txn: Transaction) -> None:
        self._loop = loop
        self._txn = txn

    @property
    def start_ts(self) -> int:
        return self._txn.start_ts

    @property
    def commit_ts(self) -> int | None:
        return self._txn.commit_ts

    def get(self, table: str, row: bytes, column: str) -> bytes | None:
        return self._loop.run(self._txn.get(table, row, column))

    def get_many(self, keys: Sequence[CellKey]) -> list[bytes | None]:
        return self._loop.run(self._txn.get_many(keys))

    def set(self, table: str, row: bytes, column: str, value: bytes) -> None:
        self._txn.set(table, row, column, value)

    def delete(self, table: str, row: bytes, column: str) -> None:
        self._txn.delete(table, row, column)

    def lock(self, table: str, row: bytes, column: str) -> None:
        self._txn.lock(table, row, column)

    def scan(
        self,
        table: str,
        start: bytes | None = None,
        end: bytes | None = None,
        columns: Sequence[str] | None = None,
        *,
        reverse: bool = False,
    ) -> Iterator[Row]:
        """Rows in [start, end) in key order (descending with ``reverse``), fetched from the
        store as the iterator advances."""
        rows = self._txn.scan(table, start, end, columns, reverse=reverse)
        try:
            while True:
                try:
                    yield self._loop.run(rows.__anext__())
                except StopAsyncIteration:
                    return
        finally:
            self._loop.run(rows.aclose())

    def commit(self) -> int | None:
        return self._loop.run(self._txn.commit())

    def rollback(self) -> None:
        self._loop.run(self._txn.rollback())

    def __enter__(self) -> SyncTransaction:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._loop.run(self._txn.__aexit__(exc_type, exc, tb))


class SyncTransactionClient:
    """Blocking twin of :class:`~percolator.server.txn.client.TransactionClient`.

    ``open_client`` is a coroutine function building the async client on the background loop;
    ``close_client`` releases what it opened.
    """

    def __init__(
        self,
        open_client: Callable[[], Awaitable[TransactionClient]],
        close_client: Callable[[TransactionClient], Awaitable[None]] | None = None,
    ) -> None:
        self._loop = LoopThread()

        async def opening() -> TransactionClient:
            return await open_client()

        self.client = self._loop.run(opening())
        self._close_client = close_client

    def begin(self) -> SyncTransaction:
        async def begin() -> Transaction:
            return await self.client.begin()

        return SyncTransaction(self._loop, self._loop.run(begin()))

    def run_in_transaction(
        self, fn: Callable[[SyncTransaction], T], *, retries: int = 10, backoff_s: float = 0.005
    ) -> T:
        """Run ``fn`` in a transaction and commit, retrying retryable errors with backoff."""
        for attempt in range(retries + 1):
            txn = self.begin()
            try:
                result = fn(txn)
                txn.commit()
                return result
            except Retryable:
                txn.rollback()
                if attempt == retries:
                    raise
                time.sleep(retry_delay_s(attempt, backoff_s))
            except BaseException:
                txn.rollback()
                raise
        raise AssertionError("unreachable")

    def close(self) -> None:
        """Drain pending secondary commits, release the store, stop the loop."""

        async def closing() -> None:
            await self.client.close()
            if self._close_client is not None:
                await self._close_client(self.client)

        self._loop.run(closing())
        self._loop.stop()

    def __enter__(self) -> SyncTransactionClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
