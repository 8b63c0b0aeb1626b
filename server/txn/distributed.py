"""Distributed transactions: one Percolator transaction whose writes come from many processes.

A Spark job writes a whole DataFrame as one transaction (DESIGN.md §7). No process lives for
the whole job (Spark runs every connector method in short-lived Python workers, and retries
tasks), so the transaction is a picklable token, :class:`DistributedTxn`, and each step is a
function any process can run:

1. :func:`begin_distributed` takes start_ts and prewrites the primary itself: a cell of the
   store table ``__txn`` (row = start_ts), which no task owns. Its lock TTL is long (10 min
   by default) and every task prewriting extends it (a heartbeat), so a live job is never
   rolled back by a reader, and a dead one's locks clear a TTL after its last task.
2. Each task writes through ``client.begin_part(token)``: a transaction at start_ts whose
   commit only prewrites its writes, as secondaries of the token's primary (:class:`PartPrewriter`).
   Prewriting is idempotent, so a retried task (same cells, same values) succeeds; two parts
   writing one cell differently fail with :class:`DuplicateWrite` (23505).
3. :func:`commit_distributed` takes commit_ts, commits the primary (the commit point), then
   turns every lock of start_ts into a write record server-side (``CellStore.commit_locks``),
   with no pass over the data. A secondary it misses (the process dies) is rolled forward by
   the first reader that meets it, as for any transaction.
4. :func:`abort_distributed` rolls the primary back with its rollback record, then removes
   every lock of start_ts server-side (``CellStore.rollback_locks``).

Late writes. A task still running after the job ended (a speculative duplicate, a killed task
whose worker lingers) checks the primary before prewriting and fails if it is gone. In the
instant between that check and its prewrite the job may end: a lock it then leaves after an
abort is an orphan whose primary says "rolled back", so the first reader that meets it removes
it (as GC does below its safe point). After a commit such a late lock would be rolled forward:
harmless when the late task writes what its successful attempt wrote (the cell is then already
committed and its prewrite fails), which holds when each partition's data is deterministic,
as Spark requires of retried tasks for any sink.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from percolator.server.storage.cells import (
    CellKey,
    Mutation,
    PrewriteFailure,
    PrewriteStatus,
    TxnState,
    TxnStatus,
    WriteKind,
    ttl_from_now,
)
from percolator.server.storage.errors import StoreError
from percolator.server.txn.config import retry_delay_s
from percolator.server.txn.errors import (
    CommitOutcomeUnknown,
    TransactionAborted,
    TransactionTooOld,
    TxnError,
    WriteConflict,
    describe_key,
)

if TYPE_CHECKING:
    from percolator.server.txn.client import TransactionClient

log = logging.getLogger(__name__)

TXN_TABLE = "__txn"
"""The store table holding the primaries of distributed transactions (row = start_ts)."""
PRIMARY_COLUMN = "p"
DEFAULT_JOB_TTL_MS = 10 * 60 * 1000
"""Lock TTL of a distributed transaction: how long after its last heartbeat (a task
prewriting, or :func:`heartbeat_distributed`) a reader may roll it back."""
MAX_JOB_TTL_MS = 24 * 60 * 60 * 1000
"""Longer would let a dead job's locks block readers for more than a day."""
_MAX_TTL_MS = 2**31 - 1
"""A lock's TTL is a 32-bit integer (about 24 days, counted from start_ts)."""
_SECONDARY_COMMIT_ATTEMPTS = 3


class DuplicateWrite(TxnError):
    """Two parts of one distributed transaction wrote the same cell differently: for a SQL
    table, the same primary key (or unique index value) in two partitions."""

    sqlstate = "23505"


class AlreadyCommitted(TxnError):
    """An abort of a distributed transaction that had already committed: it cannot be undone
    (the abort finished committing it instead)."""

    sqlstate = "25000"


@dataclass(frozen=True)
class DistributedTxn:
    """A distributed transaction, as passed to every task (picklable)."""

    start_ts: int
    primary: CellKey
    ttl_ms: int


def primary_of(start_ts: int) -> CellKey:
    """The primary cell of the distributed transaction that began at ``start_ts``."""
    return CellKey(TXN_TABLE, start_ts.to_bytes(8, "big"), PRIMARY_COLUMN)


def _ttl_from_now(token: DistributedTxn) -> int:
    """A TTL (counted, like every lock's, from start_ts) that ends ``ttl_ms`` from now."""
    return min(ttl_from_now(token.start_ts, token.ttl_ms), _MAX_TTL_MS)


async def begin_distributed(
    client: TransactionClient, *, ttl_ms: int = DEFAULT_JOB_TTL_MS
) -> DistributedTxn:
    """Start a distributed transaction: start_ts from the oracle, and the primary prewritten
    (2 round trips: oracle, one prewrite). The caller should also hold GC back at start_ts
    for the job's duration (``gc_barrier.hold_gc``) if it may run longer than the GC
    lifetime."""
    if not 0 < ttl_ms <= MAX_JOB_TTL_MS:
        raise ValueError(f"ttl_ms must be between 1 and {MAX_JOB_TTL_MS}, got {ttl_ms}")
    start_ts = await client.clock.get_timestamp()
    token = DistributedTxn(start_ts, primary_of(start_ts), ttl_ms)
    # An empty PUT: the primary's commit record is then never collected by GC (the newest
    # PUT of a cell is kept), so lazily rolled-forward secondaries always find it.
    failures = await client.store.prewrite(
        start_ts, token.primary, ttl_ms, [Mutation(token.primary, WriteKind.PUT, b"")]
    )
    if failures:
        # The row is new (start_ts is unique): only a GC safe point above a fresh timestamp,
        # or another client writing into __txn, can refuse it.
        if failures[0].status == PrewriteStatus.TOO_OLD:
            raise TransactionTooOld(f"start_ts {start_ts} is below the GC safe point; retry")
        raise TransactionAborted(
            f"could not begin distributed transaction {start_ts}: {failures[0].status.value}"
        )
    return token


async def heartbeat_distributed(client: TransactionClient, token: DistributedTxn) -> bool:
    """Extend the job's TTL to ``ttl_ms`` from now (1 round trip); False when the job is over
    (committed or rolled back). Parts do this themselves while they prewrite; a task that
    spends long before writing may call it to keep the job alive meanwhile."""
    return await client.store.heartbeat(token.primary, token.start_ts, _ttl_from_now(token))


async def commit_distributed(client: TransactionClient, token: DistributedTxn) -> int:
    """Commit the job: commit_ts from the oracle, the primary (the commit point), then every
    secondary server-side. Returns the commit_ts.

    Raises TransactionAborted when the primary was rolled back (the job's TTL ran out, or it
    was aborted), after removing its locks; CommitOutcomeUnknown when the primary's commit got
    no answer (calling again is safe: a committed job answers with its commit_ts). Once the
    commit point has passed it does not fail: secondaries it could not commit are rolled forward
    by readers. Round trips: 1 oracle, 1 primary commit, 1 status, then per shard one per 1,024
    locks (and one more).
    """
    commit_ts = await client.clock.get_timestamp()
    try:
        failures = await client.store.commit(token.start_ts, commit_ts, [token.primary])
    except (TimeoutError, StoreError, OSError) as exc:
        raise CommitOutcomeUnknown(
            f"the commit of distributed transaction {token.start_ts} was sent but not "
            f"confirmed ({exc}); it may or may not have committed"
        ) from exc
    if failures:
        await _roll_back(client, token)
        raise TransactionAborted(
            f"distributed transaction {token.start_ts} was rolled back before its commit "
            "point (aborted, or its TTL ran out with no task alive); run the job again"
        )
    # The primary's own record says at which commit_ts: a repeated call (after an unknown
    # outcome) finds it committed earlier, and every secondary must take that same one.
    committed_at = await _committed_at(client, token)
    await _commit_secondaries(client, token, committed_at)
    return committed_at


async def abort_distributed(client: TransactionClient, token: DistributedTxn) -> None:
    """Roll the job back: the primary first, leaving its rollback record (which makes every
    remaining or late lock of the job roll back when met), then every lock server-side.
    Idempotent. Raises AlreadyCommitted, after finishing the commit, if the job had committed."""
    committed = await client.store.rollback(token.start_ts, [token.primary], leave_marker=True)
    if committed:
        status = await _status(client, token)
        assert status.commit_ts is not None
        await _commit_secondaries(client, token, status.commit_ts)
        raise AlreadyCommitted(
            f"distributed transaction {token.start_ts} had already committed at "
            f"{status.commit_ts}; it cannot be aborted"
        )
    await _remove_locks(client, token)


async def _status(client: TransactionClient, token: DistributedTxn) -> TxnStatus:
    """The job's state from its primary. now_ts = start_ts: the primary never looks expired,
    so this only inspects it, never rolls it back."""
    return await client.store.check_txn_status(
        token.primary, token.start_ts, token.start_ts, rollback_if_missing=False
    )


async def _committed_at(client: TransactionClient, token: DistributedTxn) -> int:
    """The commit_ts in the committed primary's record, asked a few times: past the commit
    point, a store error here must not look like a failed commit."""
    for attempt in range(_SECONDARY_COMMIT_ATTEMPTS):
        try:
            status = await _status(client, token)
        except (TimeoutError, StoreError, OSError) as exc:
            if attempt == _SECONDARY_COMMIT_ATTEMPTS - 1:
                raise CommitOutcomeUnknown(
                    f"distributed transaction {token.start_ts} committed, but its commit_ts "
                    f"could not be read ({exc}); call commit_distributed again to finish it"
                ) from exc
            await asyncio.sleep(retry_delay_s(attempt, 0.1))
            continue
        assert status.state == TxnState.COMMITTED and status.commit_ts is not None
        return status.commit_ts
    raise AssertionError("unreachable")


async def _commit_secondaries(client: TransactionClient, token: DistributedTxn, ts: int) -> None:
    """commit_locks, retried a few times; past the commit point a failure is only logged."""
    for attempt in range(_SECONDARY_COMMIT_ATTEMPTS):
        try:
            await client.store.commit_locks(token.start_ts, ts)
            return
        except (TimeoutError, StoreError, OSError):
            log.warning(
                "committing the secondaries of distributed transaction %d failed",
                token.start_ts,
                exc_info=True,
            )
            await asyncio.sleep(retry_delay_s(attempt, 0.1))
    log.warning(
        "distributed transaction %d is committed; readers will roll its remaining locks forward",
        token.start_ts,
    )


async def _roll_back(client: TransactionClient, token: DistributedTxn) -> None:
    """After a failed commit of the primary: make sure it carries its rollback record (it may
    have been found missing rather than rolled back), then remove the locks."""
    try:
        await client.store.rollback(token.start_ts, [token.primary], leave_marker=True)
    except (TimeoutError, StoreError, OSError):
        log.warning("rolling back distributed transaction %d failed", token.start_ts)
        return
    await _remove_locks(client, token)


async def _remove_locks(client: TransactionClient, token: DistributedTxn) -> None:
    """rollback_locks, best effort: a lock left behind is rolled back by the reader meeting it."""
    try:
        await client.store.rollback_locks(token.start_ts)
    except (TimeoutError, StoreError, OSError):
        log.warning(
            "removing the locks of rolled-back distributed transaction %d failed; readers "
            "will roll them back",
            token.start_ts,
            exc_info=True,
        )


class PartPrewriter:
    """The commit of a part (``client.begin_part``): prewrite its writes as secondaries of the
    job's primary, nothing more.

    Checks first that the job is still open (a heartbeat of the primary, which also extends its
    TTL), then prewrites like the two-phase committer: locks of dead transactions are resolved
    and the cells retried; a write committed at or after start_ts, or a live transaction's lock,
    is a WriteConflict. Unlike it, a failed part rolls nothing back: its cells may be shared
    with a successful attempt of the same task, and the job's abort removes them all. While it
    prewrites, a heartbeat every third of the TTL keeps the job alive.
    """

    def __init__(self, client: TransactionClient, token: DistributedTxn) -> None:
        self._client = client
        self._token = token
        self._job_over = False

    async def __call__(self, mutations: Sequence[Mutation], txn_bytes: int) -> None:
        if not await heartbeat_distributed(self._client, self._token):
            await self._raise_job_over()
        beating = asyncio.create_task(self._heartbeats())
        try:
            await self._prewrite(mutations)
        finally:
            beating.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beating
        if self._job_over:
            # The job ended while we prewrote: what we wrote is an orphan for readers to
            # resolve; the task must not report success.
            await self._raise_job_over()

    async def _raise_job_over(self) -> None:
        status = await _status(self._client, self._token)
        if status.state == TxnState.COMMITTED:
            raise AlreadyCommitted(
                f"distributed transaction {self._token.start_ts} has already committed; a "
                "late task cannot add to it"
            )
        raise TransactionAborted(
            f"distributed transaction {self._token.start_ts} was rolled back (aborted, or its "
            "TTL ran out with no task alive); run the job again"
        )

    async def _heartbeats(self) -> None:
        while True:
            await asyncio.sleep(self._token.ttl_ms / 3000)
            if not await heartbeat_distributed(self._client, self._token):
                self._job_over = True
                return

    async def _prewrite(self, mutations: Sequence[Mutation]) -> None:
        store, token = self._client.store, self._token
        pending: Sequence[Mutation] = mutations
        deadline = time.monotonic() + self._client.config.lock_wait_timeout_s
        while True:
            failures = await store.prewrite(token.start_ts, token.primary, token.ttl_ms, pending)
            if not failures:
                return
            _raise_for(token, failures)
            locks = [f.lock for f in failures if f.lock is not None]
            held = await self._client.resolver.resolve(locks)
            if held:
                lock = held[0]
                raise WriteConflict(
                    lock.key, token.start_ts, lock.start_ts, "lock of a live transaction"
                )
            if time.monotonic() > deadline:
                raise WriteConflict(
                    locks[0].key, token.start_ts, locks[0].start_ts, "lock that kept coming back"
                )
            retry = {lock.key for lock in locks}
            pending = [m for m in pending if m.key in retry]


_FAILURE_ORDER = (
    PrewriteStatus.ROLLED_BACK,
    PrewriteStatus.TOO_OLD,
    PrewriteStatus.DUPLICATE,
    PrewriteStatus.WRITE_CONFLICT,
)
"""Which failure a part reports when its cells failed in several ways: the job's end first,
then what no retry can fix."""


def _raise_for(token: DistributedTxn, failures: Sequence[PrewriteFailure]) -> None:
    """Raise for the first failure that is not another transaction's lock."""
    for status in _FAILURE_ORDER:
        failure = next((f for f in failures if f.status == status), None)
        if failure is None:
            continue
        if status == PrewriteStatus.ROLLED_BACK:
            raise TransactionAborted(
                f"distributed transaction {token.start_ts} was rolled back; run the job again"
            )
        if status == PrewriteStatus.TOO_OLD:
            raise TransactionTooOld(
                f"distributed transaction {token.start_ts} fell below the GC safe point; hold "
                "GC back for the job (gc_barrier.hold_gc) and run it again"
            )
        if status == PrewriteStatus.DUPLICATE:
            raise DuplicateWrite(
                f"duplicate write in distributed transaction {token.start_ts}: "
                f"{describe_key(failure.key)} is written twice with different values (the same "
                "key in two partitions?)"
            )
        raise WriteConflict(
            failure.key, token.start_ts, failure.conflict_ts or 0, "write committed"
        )
