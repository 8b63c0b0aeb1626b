"""An observer worker: finds notifications and runs their observers (the paper's §2.4).

For each notification (observer, row) in its slice of the hash space the worker runs, in a
transaction of its own:

1. STRONG observers first read their ack cell (the start_ts of their last committed run for the
   row), in one round trip with the changed row (``ObserverProgram.row_cells``). If that run
   started after the notification's newest write committed, it already saw the change:
   nothing runs and the notification is cleared.
2. The observer's program runs for the row inside the transaction.
3. STRONG observers write the ack cell with this run's start_ts, and the transaction commits.
   Two runs for the same change both write the ack cell, so at most one of them commits; the
   other gets a write conflict, runs again, finds the ack and stops.
4. The notification is cleared if no write newer than this run's snapshot has set it since
   (several writes before a run collapse into it; a write during it leaves it set). Runs that
   end while a clear is in flight share the next one.

A run that raises rolls back; its notification is held back with exponential backoff and, after
``max_failures`` attempts, parked until ``ALTER OBSERVER ... RETRY PARKED`` (or a new write).
Nothing is lost when a worker dies: a notification is only cleared after its run committed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from dataclasses import dataclass

from percolator.server.storage.cells import (
    CellKey,
    ClearNotification,
    DeferNotification,
    Notification,
    NotifyCursor,
)
from percolator.server.storage.statement_batcher import StatementBatcher
from percolator.server.txn.client import TransactionClient
from percolator.server.txn.config import retry_delay_s
from percolator.server.txn.errors import Retryable
from percolator.server.txn.observers.counters import MAX_ERROR_CHARS, RunCounters
from percolator.server.txn.observers.program import (
    ACK_COLUMN,
    ObserverProgram,
    ObserverSource,
    ack_table,
)
from percolator.server.txn.observers.slices import SliceSource, WholeSpace
from percolator.server.txn.transaction import Transaction

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WorkerConfig:
    """Tunables of an observer worker."""

    concurrency: int = 64
    """Observer runs in flight at once (each holds one transaction). Many, because runs in
    flight share the store's statements: 64 instead of 16 took the web index from 260-274 to
    330-371 pages/s and from 3.7 to 1.3 statements per page."""
    page_size: int = 256
    """Notifications read per round trip; with ``concurrency`` it bounds the worker's memory."""
    poll_interval_s: float = 0.5
    """Longest sleep between scans when no commit wakes the worker (a missed wake-up, or a
    notification held back by a retry delay)."""
    max_failures: int = 5
    """Failed runs of one change before it is parked."""
    retry_base_s: float = 0.5
    retry_max_s: float = 60.0
    conflict_retries: int = 8
    """Immediate re-runs after a write conflict before the notification is left for later."""
    counters_flush_s: float = 1.0
    reap_interval_s: float = 60.0
    """How often notifications of unknown observers are checked for orphans."""


class RunOutcome:
    """What processing one notification ended in (for tests and logs)."""

    COMMITTED = "committed"
    ALREADY_ACKED = "already_acked"
    FAILED = "failed"
    CONFLICTED = "conflicted"


class ObserverWorker:
    """Scans its slice of the notifications and runs observers, ``concurrency`` at a time."""

    def __init__(
        self,
        client: TransactionClient,
        source: ObserverSource,
        *,
        slices: SliceSource | None = None,
        config: WorkerConfig | None = None,
        name: str = "worker",
    ) -> None:
        self._client = client
        self._store = client.store
        self._source = source
        self._slices = slices or WholeSpace()
        self.config = config or WorkerConfig()
        self.name = name
        self.counters = RunCounters(label=self._observer_name)
        self._slots = asyncio.Semaphore(self.config.concurrency)
        self._in_flight: set[tuple[str, str, bytes]] = set()
        # Completions counted, and when each notification last completed: a page read before a
        # run finished holds a stale copy of its notification (attempts, retry time), which
        # must not start another run.
        self._completions = 0
        self._completed: dict[tuple[str, str, bytes], int] = {}
        self._unknown: set[str] = set()
        self._runs: set[asyncio.Task[str]] = set()
        self._stopping = asyncio.Event()
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._flusher: asyncio.Task[None] | None = None
        # Clears of committed runs go one statement at a time: those that finish meanwhile
        # share the next statement (a round trip per batch instead of per run).
        self._clears: StatementBatcher[ClearNotification, None] = StatementBatcher(
            self._clear_batch, max_in_flight=1
        )

    # -- life ------------------------------------------------------------------------------

    async def start(self) -> None:
        """Join the workers (when several share the work) and start scanning."""
        await self._slices.start()
        self._tasks = [
            asyncio.create_task(self._scan_loop(), name=f"{self.name}-scan"),
            asyncio.create_task(self._reap_loop(), name=f"{self.name}-reaper"),
        ]
        self._flusher = asyncio.create_task(self._flush_loop(), name=f"{self.name}-counters")

    async def stop(self) -> None:
        """Stop scanning, let the runs in flight finish, save the counters, leave the group."""
        self._stopping.set()
        self._wake.set()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._runs:
            await asyncio.gather(*self._runs, return_exceptions=True)
        if self._flusher is not None:
            # Not cancelled: a flush cut off mid-statement would lose the counts it carried.
            await self._flusher
        await self.counters.flush(self._store)
        await self._slices.stop()

    def _observer_name(self, key: str) -> str:
        """An observer's name for the metrics (its key while the catalog does not know it)."""
        program = self._source.program(key)
        return key if program is None else program.name

    def wake(self) -> None:
        """Scan now (a local commit set a notification, or a test wants it)."""
        self._wake.set()

    # -- finding work ----------------------------------------------------------------------

    async def _scan_loop(self) -> None:
        while not self._stopping.is_set():
            try:
                dispatched = await self.sweep()
            except Exception as exc:
                log.warning("%s: scanning notifications failed: %s", self.name, exc)
                dispatched = 0
            if dispatched == 0:
                await self._idle()

    async def _idle(self) -> None:
        """Sleep until a commit sets a notification (the store's wake-up), a local wake-up,
        or the poll interval passes."""
        self._wake.clear()
        waiters = [
            asyncio.ensure_future(self._store.wait_for_notifications(self.config.poll_interval_s)),
            asyncio.ensure_future(self._wake.wait()),
        ]
        try:
            await asyncio.wait(
                waiters, timeout=self.config.poll_interval_s, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            for w in waiters:
                w.cancel()
            for w in waiters:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await w

    async def sweep(self) -> int:
        """Scan the slice once and start a run for every runnable notification found (waiting
        for a free slot when ``concurrency`` runs are in flight). Returns how many started."""
        bounds = self._slices.slice()
        if bounds is None:
            return 0
        lo, hi = bounds
        cursor: NotifyCursor | None = None
        started = 0
        self._completed.clear()
        while not self._stopping.is_set():
            read_at = self._completions
            page = await self._store.find_notifications(
                lo, hi, now_ms=_now_ms(), limit=self.config.page_size, after=cursor
            )
            for n in page:
                program = self._runnable(n, read_at)
                if program is None:
                    continue
                await self._slots.acquire()  # back-pressure: at most `concurrency` runs
                self._start(program, n)
                started += 1
            if len(page) < self.config.page_size:
                break
            last = page[-1]
            cursor = NotifyCursor(last.hash, last.observer, last.table, last.row)
        return started

    def _runnable(self, n: Notification, read_at: int) -> ObserverProgram | None:
        program = self._source.program(n.observer)
        if program is None:
            self._unknown.add(n.observer)
            return None
        if program.paused:
            return None
        key = (n.observer, n.table, n.row)
        if key in self._in_flight or self._completed.get(key, -1) >= read_at:
            return None
        return program

    def _start(self, program: ObserverProgram, n: Notification) -> None:
        key = (n.observer, n.table, n.row)
        self._in_flight.add(key)
        task = asyncio.create_task(self._guarded(program, n, key))
        self._runs.add(task)
        task.add_done_callback(self._runs.discard)

    async def _guarded(
        self, program: ObserverProgram, n: Notification, key: tuple[str, str, bytes]
    ) -> str:
        """Process one notification in the slot the scan took for it."""
        try:
            return await self.process(program, n)
        except Exception as exc:
            # The store failed while clearing or deferring: the notification stays as it was.
            log.warning("%s: observer %s: %s", self.name, program.name, exc)
            return RunOutcome.FAILED
        finally:
            self._in_flight.discard(key)
            self._completed[key] = self._completions
            self._completions += 1
            self._slots.release()

    # -- running ---------------------------------------------------------------------------

    async def process(self, program: ObserverProgram, n: Notification) -> str:
        """Run ``program`` for notification ``n`` until it commits, is found already done,
        fails, or keeps conflicting."""
        for attempt in range(self.config.conflict_retries + 1):
            txn = await self._client.begin()
            try:
                return await self._attempt(program, n, txn)
            except Exception as exc:
                await txn.rollback()
                if _is_conflict(exc):
                    self.counters.conflict(program.key)
                    await asyncio.sleep(retry_delay_s(attempt, 0.005, 0.5))
                    continue
                await self._failed(program, n, exc)
                return RunOutcome.FAILED
        return RunOutcome.CONFLICTED

    async def _attempt(self, program: ObserverProgram, n: Notification, txn: Transaction) -> str:
        acks = ack_table(program.key)
        if not program.weak:
            ack = CellKey(acks, n.row, ACK_COLUMN)
            raw, *_ = await txn.get_many([ack, *program.row_cells(n.table, n.row)])
            if raw is not None and int(raw) > n.ts:
                # The last committed run started after the newest write committed: it saw it.
                await txn.rollback()
                await self._clear(n, int(raw))
                return RunOutcome.ALREADY_ACKED
        self.counters.run(program.key)
        await program.run(txn, n.table, n.row)
        if not program.weak:
            txn.set(acks, n.row, ACK_COLUMN, str(txn.start_ts).encode())
        await txn.commit()
        self.counters.commit(program.key)
        await self._clear(n, txn.start_ts)
        return RunOutcome.COMMITTED

    async def _clear(self, n: Notification, below_ts: int) -> None:
        await self._clears.submit(ClearNotification(n.observer, n.table, n.row, below_ts))

    async def _clear_batch(self, items: list[ClearNotification]) -> list[None]:
        await self._store.clear_notifications(items)
        return [None] * len(items)

    async def _failed(self, program: ObserverProgram, n: Notification, exc: Exception) -> None:
        error = f"{type(exc).__name__}: {exc}"[:MAX_ERROR_CHARS]
        self.counters.failure(program.key, error)
        attempts = n.attempts + 1
        park = attempts >= self.config.max_failures
        delay = min(self.config.retry_max_s, self.config.retry_base_s * 2 ** (attempts - 1))
        delay *= random.uniform(0.8, 1.2)
        if park:
            self.counters.parked(program.key)
            log.warning(
                "%s: observer %s parked a change after %d failures: %s",
                self.name,
                program.name,
                attempts,
                error,
            )
        await self._store.defer_notifications(
            [
                DeferNotification(
                    n.observer,
                    n.table,
                    n.row,
                    n.ts,
                    retry_at_ms=_now_ms() + int(delay * 1000),
                    error=error,
                    park=park,
                )
            ]
        )

    # -- counters --------------------------------------------------------------------------

    async def _flush_loop(self) -> None:
        """Flush every interval until the worker stops (stop() flushes the rest)."""
        while not self._stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self.config.counters_flush_s)
            if not self._stopping.is_set():
                await self.counters.flush(self._store)

    async def _reap_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.reap_interval_s)
            try:
                await self.reap_orphans()
            except Exception as exc:
                log.warning("%s: removing orphaned notifications failed: %s", self.name, exc)

    async def reap_orphans(self) -> set[str]:
        """Remove the watches and notifications of observers seen in scans that will never
        exist (a CREATE that rolled back, a DROP whose clean-up was interrupted)."""
        unknown, self._unknown = self._unknown, set()
        if not unknown:
            return set()
        orphans = await self._source.orphans(unknown)
        for key in sorted(orphans):
            log.info("%s: removing the notifications of orphaned observer %s", self.name, key)
            await self._store.unwatch(key)
        return orphans


def _is_conflict(exc: BaseException) -> bool:
    """A write conflict, from the transaction layer or wrapped by the SQL layer (40001)."""
    return isinstance(exc, Retryable) or getattr(exc, "sqlstate", None) == "40001"


def _now_ms() -> int:
    return int(time.time() * 1000)
