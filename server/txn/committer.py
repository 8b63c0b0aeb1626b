"""Two-phase commit of one transaction's writes (DESIGN.md §5).

1. Prewrite every cell, primary included, in one store call: the store sends one batch per
   shard, in parallel. A lock of a dead transaction is resolved and the prewrite retried; a write
   record at or after our start_ts, or the lock of a live transaction, aborts us (first
   committer wins).
2. Take commit_ts from the oracle.
3. Run the commit checks, if any (reads registered by the transaction, read again at
   commit_ts: see commit_checks.py).
4. Commit the primary: the commit point. It succeeds only if our lock is still there. The
   secondaries on the primary's shard are committed in the same statement, atomically with
   it (so a one-shard transaction commits in one round trip after its prewrite).
5. Hand the other secondaries to the background committer and return (a transaction whose
   row locks met contention commits them itself first: SYNC_SECONDARIES).

While this runs, a heartbeat keeps the primary lock's TTL ahead of the time spent, so a slow
but live committer is never rolled back by a reader.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence

from percolator.server.metrics import definitions as metrics
from percolator.server.storage.cells import (
    CellKey,
    LockInfo,
    Mutation,
    PrewriteFailure,
    PrewriteStatus,
    ttl_from_now,
)
from percolator.server.storage.errors import StoreError
from percolator.server.storage.store import CellStore
from percolator.server.txn.commit_checks import CommitCheck, run_checks
from percolator.server.txn.config import TxnConfig
from percolator.server.txn.errors import (
    CommitOutcomeUnknown,
    TransactionAborted,
    TransactionTooOld,
    WriteConflict,
)
from percolator.server.txn.lock_resolver import LockResolver
from percolator.server.txn.secondary_committer import SecondaryCommitter
from percolator.server.txn.timestamps import TimestampSource

SYNC_SECONDARIES = 1024
"""A transaction whose row locks met contention (a row it locked had changed, or was being
committed) commits up to this many secondaries itself before it returns and releases its row
locks: the next holder of the hot row then finds the row's write record, not a lock it must
resolve (a status check, a roll-forward and a read again). One round trip per shard more on
the commit's path; others, and larger transactions, leave them to the background committer."""


class TwoPhaseCommitter:
    """Commits the mutations of one transaction; used once."""

    def __init__(
        self,
        store: CellStore,
        clock: TimestampSource,
        resolver: LockResolver,
        secondaries: SecondaryCommitter,
        config: TxnConfig,
        start_ts: int,
        mutations: Sequence[Mutation],
        txn_bytes: int,
        checks: Sequence[CommitCheck] = (),
        *,
        secondaries_now: bool = False,
    ) -> None:
        """``secondaries_now``: commit the secondaries before returning (see SYNC_SECONDARIES)."""
        self._store = store
        self._clock = clock
        self._resolver = resolver
        self._secondaries = secondaries
        self._config = config
        self.start_ts = start_ts
        self._mutations = mutations
        self._checks = checks
        self._secondaries_now = secondaries_now and len(mutations) - 1 <= SYNC_SECONDARIES
        self.primary = mutations[0].key
        self.ttl_ms = config.lock_ttl_ms(txn_bytes)
        self._heartbeat_task: asyncio.Task[None] | None = None
        self._prewritten = False

    async def commit(self) -> int:
        """Run both phases; returns commit_ts or raises (and leaves no lock behind)."""
        started = time.monotonic()
        heartbeat = asyncio.get_running_loop().call_later(self.ttl_ms / 3000, self._start_heartbeat)
        try:
            await self._prewrite_all()
            self._prewritten = True
            commit_ts = await self._clock.get_timestamp()
            if self._checks:
                await self._run_checks(commit_ts)
            secondaries = await self._commit_primary(commit_ts)
        finally:
            heartbeat.cancel()
            if self._heartbeat_task is not None:
                self._heartbeat_task.cancel()
        metrics.TXN_COMMIT_SECONDS.observe(time.monotonic() - started)
        if self._secondaries_now and secondaries:
            with contextlib.suppress(StoreError, OSError):
                # A failure is no failure of the transaction (committed): readers roll them
                # forward.
                await self._store.commit(self.start_ts, commit_ts, secondaries)
                return commit_ts
        await self._secondaries.submit(self.start_ts, commit_ts, secondaries)
        return commit_ts

    async def _prewrite_all(self) -> None:
        pending: Sequence[Mutation] = self._mutations
        deadline = time.monotonic() + self._config.lock_wait_timeout_s
        while True:
            try:
                failures = await self._store.prewrite(
                    self.start_ts, self.primary, ttl_from_now(self.start_ts, self.ttl_ms), pending
                )
            except BaseException:
                await self._abort()
                raise
            if not failures:
                return
            locks = await self._locks_to_resolve(failures)
            still_held = await self._resolver.resolve(locks)
            if still_held:
                await self._abort()
                lock = still_held[0]
                raise WriteConflict(
                    lock.key, self.start_ts, lock.start_ts, "lock of a live transaction"
                )
            if time.monotonic() > deadline:
                await self._abort()
                raise WriteConflict(
                    locks[0].key, self.start_ts, locks[0].start_ts, "lock that kept coming back"
                )
            retry = {lock.key for lock in locks}
            pending = [m for m in pending if m.key in retry]

    async def _locks_to_resolve(self, failures: Sequence[PrewriteFailure]) -> list[LockInfo]:
        """The locks of other transactions that blocked us; aborts on any real conflict."""
        for failure in failures:
            if failure.status == PrewriteStatus.LOCKED:
                continue
            await self._abort()
            if failure.status == PrewriteStatus.TOO_OLD:
                raise TransactionTooOld(
                    f"start_ts {self.start_ts} is below the GC safe point; retry the transaction"
                )
            if failure.status == PrewriteStatus.ROLLED_BACK:
                raise TransactionAborted(
                    f"transaction {self.start_ts} was rolled back by another client "
                    "(its locks expired); retry the transaction"
                )
            raise WriteConflict(
                failure.key, self.start_ts, failure.conflict_ts or 0, "write committed"
            )
        return [f.lock for f in failures if f.lock is not None]

    async def _run_checks(self, commit_ts: int) -> None:
        """The reads this transaction's decisions rest on, again at commit_ts (see
        commit_checks.py); a failure aborts it."""
        try:
            await run_checks(self._store, self.start_ts, commit_ts, self._checks, self._mutations)
        except BaseException:
            await self._abort()
            raise

    async def _commit_primary(self, commit_ts: int) -> Sequence[CellKey]:
        """The commit point; the secondaries the store took along are committed with it, the
        others are returned."""
        secondaries = [m.key for m in self._mutations[1:]]
        try:
            outcome = await self._store.commit_primary(
                self.start_ts, commit_ts, self.primary, secondaries
            )
        except (TimeoutError, StoreError, OSError) as exc:
            raise CommitOutcomeUnknown(
                f"the commit of transaction {self.start_ts} was sent but not confirmed "
                f"({exc}); it may or may not have committed"
            ) from exc
        if not outcome.committed:
            await self._abort()
            raise TransactionAborted(
                f"transaction {self.start_ts} was rolled back by another client before its "
                "commit point (its lock TTL expired); retry the transaction"
            )
        return outcome.rest

    async def _abort(self) -> None:
        """Roll back what we may have prewritten: the primary first, leaving a marker."""
        with contextlib.suppress(StoreError, OSError):
            await self._store.rollback(self.start_ts, [self.primary], leave_marker=True)
            rest: list[CellKey] = [m.key for m in self._mutations[1:]]
            if rest:
                await self._store.rollback(self.start_ts, rest, leave_marker=False)

    def _start_heartbeat(self) -> None:
        self._heartbeat_task = asyncio.create_task(self._heartbeat())

    async def _heartbeat(self) -> None:
        """Keep the primary lock's TTL ahead of the time this commit has taken."""
        while True:
            alive = await self._store.heartbeat(
                self.primary, self.start_ts, ttl_from_now(self.start_ts, self.ttl_ms)
            )
            if not alive and self._prewritten:
                return  # committed or rolled back: nothing left to keep alive
            await asyncio.sleep(self.ttl_ms / 3000)
