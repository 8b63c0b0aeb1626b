"""One SQL session's advisory locks (pg_advisory_lock and friends), over an advisory session
of the transaction layer (kept by the store: ``storage/advisory.py``): session-level locks are
held until unlocked or the session ends; transaction-level ones (``pg_advisory_xact_lock``)
until its transaction ends."""

from __future__ import annotations

from collections import Counter

from percolator.server.storage.advisory import AdvisoryKey, AdvisorySession, store_key
from percolator.server.txn.client import TransactionClient


class SessionAdvisoryLocks:
    """The advisory locks the SQL functions of one session take and release."""

    def __init__(self, client: TransactionClient) -> None:
        self._client = client
        self._holder: AdvisorySession | None = None
        self._xact: list[tuple[AdvisoryKey, bool]] = []
        self._held: Counter[tuple[tuple[int, int], bool]] = Counter()
        """(lock, shared) -> holds: what pg_blocking_pids asks of the other sessions."""
        self.waiting_for: tuple[tuple[int, int], bool] | None = None
        """The lock (and whether shared) a call waits for (pg_stat_activity's wait_event)."""

    def _session(self) -> AdvisorySession:
        if self._holder is None:
            self._holder = self._client.advisory_session()
        return self._holder

    async def lock(self, key: AdvisoryKey, *, shared: bool, wait: bool, xact: bool) -> bool:
        hold = (store_key(key), shared)
        if wait:
            self.waiting_for = hold
        try:
            taken = await self._session().lock(key, shared=shared, wait=wait)
        finally:
            self.waiting_for = None
        if taken:
            self._held[hold] += 1
            if xact:
                self._xact.append((key, shared))
        return taken

    async def unlock(self, key: AdvisoryKey, *, shared: bool) -> bool:
        if self._holder is None:
            return False
        released = await self._holder.unlock(key, shared=shared)
        if released:
            self._held -= Counter({(store_key(key), shared): 1})
        return released

    def blocks(self, waiting: tuple[tuple[int, int], bool]) -> bool:
        """Whether this session holds the lock ``waiting`` asks for (and whether shared) in a
        mode that conflicts with it (pg_blocking_pids)."""
        lock, shared = waiting
        return self._held[(lock, False)] > 0 or (not shared and self._held[(lock, True)] > 0)

    async def unlock_all(self) -> None:
        """pg_advisory_unlock_all: every lock of the session."""
        await self.close()

    @property
    def holds_transaction_locks(self) -> bool:
        return bool(self._xact)

    async def end_transaction(self) -> None:
        """Release the transaction-level locks."""
        xact, self._xact = self._xact, []
        for key, shared in xact:
            await self.unlock(key, shared=shared)

    async def close(self) -> None:
        holder, self._holder = self._holder, None
        self._xact = []
        self._held.clear()
        if holder is not None:
            await holder.close()
