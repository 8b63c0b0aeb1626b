"""Begins transactions and keeps what they share: store, oracle, lock resolver, committer queue.

It also knows which transactions of this process are running, so that the GC safe point (reported
to the coordinator by :mod:`percolator.server.txn.liveness`) stays below their start_ts.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable, Generator
from types import TracebackType
from typing import Any, TypeVar

from percolator.server.metrics import definitions as metrics
from percolator.server.storage.advisory import AdvisorySession
from percolator.server.storage.channels import Channels, Deliver
from percolator.server.storage.store import CellStore
from percolator.server.txn.config import TxnConfig, retry_delay_s
from percolator.server.txn.distributed import DistributedTxn, PartPrewriter
from percolator.server.txn.errors import Retryable
from percolator.server.txn.lock_resolver import LockResolver
from percolator.server.txn.secondary_committer import SecondaryCommitter
from percolator.server.txn.timestamps import TimestampSource
from percolator.server.txn.transaction import Transaction, TxnServices

T = TypeVar("T")


class TransactionClient:
    """The entry point of the transaction layer for one process."""

    def __init__(
        self, store: CellStore, clock: TimestampSource, config: TxnConfig | None = None
    ) -> None:
        self.store = store
        self.clock = clock
        self.config = config or TxnConfig()
        self.resolver = LockResolver(store, clock)
        self.secondaries = SecondaryCommitter(
            store,
            max_pending=self.config.secondary_queue_size,
            workers=self.config.secondary_workers,
        )
        # A multiset: transactions of this process may share a start_ts (snapshot reads and
        # parts of one distributed transaction).
        self._running: Counter[int] = Counter()
        self._services = TxnServices(
            store,
            clock,
            self.resolver,
            self.secondaries,
            self.config,
            self._finished,
            store.row_locks,
        )

    def advisory_session(self) -> AdvisorySession:
        """Advisory locks for one SQL session (non-transactional: held until released or the
        holder goes away), kept by the store so that they hold across processes."""
        return self.store.advisory_session()

    def channels(self, deliver: Deliver) -> Channels:
        """LISTEN / NOTIFY between the sessions of every process (through the store)."""
        return self.store.channels(deliver)

    def begin(self) -> _Begin:
        """Start a transaction: ``txn = await client.begin()`` or
        ``async with client.begin() as txn:`` (commits on success, rolls back on error)."""
        return _Begin(self)

    async def _begin(self) -> Transaction:
        start_ts = await self.clock.get_timestamp()
        self._started(start_ts)
        return Transaction(self._services, start_ts)

    def begin_at(self, ts: int) -> Transaction:
        """A read-only transaction whose reads see the snapshot at ``ts`` (no round trip).

        Every Spark partition of one DataFrame reads at the same ts, so the DataFrame is one
        consistent snapshot; ``asOf`` reads an older one. ``ts`` must come from the oracle
        (a timestamp nobody handed out yet could still get commits below it). Writes raise
        :class:`~percolator.server.txn.transaction.ReadOnlyTransactionError` (25006); commit
        sends nothing. Reads below the GC safe point raise TransactionTooOld: hold GC back at
        ts for long jobs (``gc_barrier.hold_gc``).
        """
        if ts <= 0:
            raise ValueError(f"a snapshot timestamp must be positive, got {ts}")
        self._started(ts)
        return Transaction(self._services, ts, read_ts=ts, writable=False)

    def begin_part(self, token: DistributedTxn) -> Transaction:
        """A part of a distributed transaction (no round trip): buffered writes whose commit
        prewrites them as secondaries of ``token.primary``, without committing anything
        (``commit()`` returns None; ``commit_distributed`` commits the whole job).

        Reads see the snapshot just below start_ts: the job's committed past, without the
        locks other parts (or an earlier attempt of this task) already prewrote, so a retried
        task reads what its first attempt read. Writes are conflict-checked from start_ts.
        See :mod:`percolator.server.txn.distributed`.
        """
        self._started(token.start_ts)
        return Transaction(
            self._services,
            token.start_ts,
            # No commit has start_ts as its commit_ts (timestamps are unique), so the snapshot
            # at start_ts - 1 is the one at start_ts minus this job's own locks.
            read_ts=token.start_ts - 1,
            sink=PartPrewriter(self, token),
        )

    def _started(self, start_ts: int) -> None:
        self._running[start_ts] += 1
        metrics.TXN_STARTED.inc()

    def _finished(self, start_ts: int) -> None:
        self._running[start_ts] -= 1
        if self._running[start_ts] <= 0:
            del self._running[start_ts]

    async def renew_snapshot(self, txn: Transaction) -> None:
        """Let a transaction's reads see a new snapshot (READ COMMITTED: one per statement).

        A write buffered after this is conflict-checked from the new snapshot (the
        statement decided it on what it read there); a cell written again keeps the bound of
        its first write, so a write made by an earlier statement never silently overwrites a
        concurrent commit of the same cell: the SQL layer's row locks keep other SQL writers
        out, and any other writer makes a 40001 at commit. A transaction pinned to a snapshot
        (``begin_at``, ``begin_part``) keeps it."""
        if not txn.pinned:
            txn.read_ts = await self.clock.get_timestamp()

    def min_running_start_ts(self) -> int | None:
        """The oldest start_ts (or snapshot ts) among this process's running transactions."""
        return min(self._running, default=None)

    async def run_in_transaction(
        self,
        fn: Callable[[Transaction], Awaitable[T]],
        *,
        retries: int = 10,
        backoff_s: float = 0.005,
        max_backoff_s: float = 1.0,
    ) -> T:
        """Run ``fn`` in a transaction and commit; on a retryable error run it again, up to
        ``retries`` more times, with jittered exponential backoff."""
        for attempt in range(retries + 1):
            txn = await self._begin()
            try:
                result = await fn(txn)
                await txn.commit()
                return result
            except Retryable:
                await txn.rollback()
                if attempt == retries:
                    raise
                await asyncio.sleep(retry_delay_s(attempt, backoff_s, max_backoff_s))
            except BaseException:
                await txn.rollback()
                raise
        raise AssertionError("unreachable")

    async def close(self) -> None:
        """Finish the queued secondary commits. The store is closed by its owner."""
        await self.secondaries.close()


class _Begin:
    """Awaitable and async context manager returned by :meth:`TransactionClient.begin`."""

    def __init__(self, client: TransactionClient) -> None:
        self._client = client
        self._txn: Transaction | None = None

    def __await__(self) -> Generator[Any, None, Transaction]:
        return self._client._begin().__await__()

    async def __aenter__(self) -> Transaction:
        self._txn = await self._client._begin()
        return self._txn

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._txn is not None
        await self._txn.__aexit__(exc_type, exc, tb)
