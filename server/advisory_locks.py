"""One SQL session's advisory locks (pg_advisory_lock and friends), over an advisory session
of the transaction layer (kept by the store: ``storage/advisory.py``): session-level locks are
held until unlocked or the session ends; transaction-level ones (``pg_advisory_xact_lock``)
until its transaction ends."""

from __future__ import annotations

from percolator.server.storage.advisory import AdvisoryKey, AdvisorySession
from percolator.server.txn.client import TransactionClient


class SessionAdvisoryLocks:
    """The advisory locks the SQL functions of one session take and release."""

    def __init__(self, client: TransactionClient) -> None:
        self._client = client
        self._holder: AdvisorySession | None = None
        self._xact: list[tuple[AdvisoryKey, bool]] = []

    def _session(self) -> AdvisorySession:
        if self._holder is None:
            self._holder = self._client.advisory_session()
        return self._holder

    async def lock(self, key: AdvisoryKey, *, shared: bool, wait: bool, xact: bool) -> bool:
        taken = await self._session().lock(key, shared=shared, wait=wait)
        if taken and xact:
            self._xact.append((key, shared))
        return taken

    async def unlock(self, key: AdvisoryKey, *, shared: bool) -> bool:
        if self._holder is None:
            return False
        return await self._holder.unlock(key, shared=shared)

    async def unlock_all(self) -> None:
        """pg_advisory_unlock_all: every lock of the session."""
        await self.close()

    @property
    def holds_transaction_locks(self) -> bool:
        return bool(self._xact)

    async def end_transaction(self) -> None:
        """Release the transaction-level locks."""
        xact, self._xact = self._xact, []
        if self._holder is not None:
            for key, shared in xact:
                await self._holder.unlock(key, shared=shared)

    async def close(self) -> None:
        holder, self._holder = self._holder, None
        self._xact = []
        if holder is not None:
            await holder.close()
