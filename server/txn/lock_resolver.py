"""Lazy cleanup of locks left by other transactions (Percolator's lock resolution).

Whoever meets a lock asks the lock's primary. Primary committed: roll the cell forward (commit it
at the primary's commit_ts). Primary rolled back, or expired (its TTL, extended by heartbeats of
a live committer, ran out): roll back, the primary first (check_txn_status does that atomically
and leaves a rollback record), then the cell. Primary still alive: the lock stays, and the caller
waits. A primary that is missing altogether is rolled back only once the lock we met has itself
expired, since the owner's prewrite of the primary may still be in flight.
"""

from __future__ import annotations

import asyncio
from collections import Counter, defaultdict
from collections.abc import Sequence

from percolator.server.metrics import definitions as metrics
from percolator.server.storage.cells import CellKey, LockInfo, TxnState
from percolator.server.storage.store import CellStore
from percolator.server.txn.timestamps import TimestampSource


class LockResolver:
    """Resolves locks found by reads, scans and prewrites."""

    def __init__(self, store: CellStore, clock: TimestampSource) -> None:
        self._store = store
        self._clock = clock
        self.counts: Counter[str] = Counter()
        """How many cells were rolled forward ("roll_forward") and back ("roll_back")."""

    async def resolve(self, locks: Sequence[LockInfo]) -> list[LockInfo]:
        """Try to clear each lock; returns the ones still held by live transactions."""
        if not locks:
            return []
        now_ts = await self._clock.get_timestamp()
        by_txn: dict[tuple[int, CellKey], list[LockInfo]] = defaultdict(list)
        for lock in locks:
            by_txn[(lock.start_ts, lock.primary)].append(lock)
        results = await asyncio.gather(
            *(
                self._resolve_txn(start_ts, primary, group, now_ts)
                for (start_ts, primary), group in by_txn.items()
            )
        )
        return [lock for held in results for lock in held]

    async def _resolve_txn(
        self, start_ts: int, primary: CellKey, locks: list[LockInfo], now_ts: int
    ) -> list[LockInfo]:
        expired = any(lock.expired_at(now_ts) for lock in locks)
        status = await self._store.check_txn_status(
            primary, start_ts, now_ts, rollback_if_missing=expired
        )
        secondaries = [lock.key for lock in locks if lock.key != primary]
        if status.state == TxnState.COMMITTED:
            assert status.commit_ts is not None
            if secondaries:
                await self._store.commit(start_ts, status.commit_ts, secondaries)
            self.counts["roll_forward"] += len(locks)
            metrics.LOCKS_ROLLED_FORWARD.inc(len(locks))
            return []
        if status.state == TxnState.ROLLED_BACK:
            if secondaries:
                await self._store.rollback(start_ts, secondaries, leave_marker=False)
            self.counts["roll_back"] += len(locks)
            metrics.LOCKS_ROLLED_BACK.inc(len(locks))
            return []
        metrics.LOCKS_HELD.inc(len(locks))
        return locks
