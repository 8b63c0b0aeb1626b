"""Snapshots for Spark jobs: reading at a chosen timestamp, sampling split points, and the GC
barrier that keeps a job's snapshot readable while it runs.

GC removes versions below a safe point that the coordinator keeps below every live client's
oldest running start_ts. A Spark job is many short-lived processes reading at one old timestamp,
so it registers a barrier of its own at that timestamp: a lease under a job id, taken when the
job plans its snapshot, renewed by every task while it works, and released when the job ends (a
write's commit or abort) or, for a read, which has no end Spark tells a data source about, when
its lease lapses ``gcBarrierTtl`` after the last task renewed it.
"""

from __future__ import annotations

import asyncio
import uuid

from percolator.clients.database import Database
from percolator.connectors.spark.errors import PercolatorSparkError
from percolator.server.storage.errors import SnapshotTooOld
from percolator.server.txn import changes, gc_barrier
from percolator.server.txn.transaction import Transaction

SNAPSHOT_TOO_OLD = "40001"


async def begin_at(db: Database, ts: int) -> Transaction:
    """A read-only transaction whose snapshot is ``ts`` (no round trip)."""
    return db.client.begin_at(ts)


async def sample_row_keys(db: Database, storage: str, n: int) -> list[bytes]:
    """Up to ``n - 1`` sorted row keys that split a store table into about ``n`` ranges of
    similar size (one round trip per shard)."""
    return sorted(await db.store.sample_row_keys(storage, n))


async def closed_timestamp(db: Database, storage: str) -> int:
    """The highest timestamp at which the table's change history is complete: no transaction
    can still commit a change of it at or below this timestamp."""
    return await changes.closed_timestamp(db.client, storage)


async def gc_safe_point(db: Database, storage: str) -> int:
    """The GC safe point: changes above it are all kept (the oldest complete history)."""
    try:
        await db.store.scan_changes(storage, 0, 0, limit=1)
    except SnapshotTooOld as exc:
        return exc.safe_point
    return 0


def too_old(ts: int, exc: BaseException) -> PercolatorSparkError:
    """The error for a snapshot that GC has collected."""
    return PercolatorSparkError(
        SNAPSHOT_TOO_OLD,
        f"the snapshot at ts {ts} is no longer readable: {exc}",
        hint="load the DataFrame again (its GC barrier lapses gcBarrierTtl after the last task "
        "that read it), or pick an asOf within the GC lifetime",
    )


def barrier_id(kind: str, ts: int) -> str:
    """A fresh id for the GC barrier of a job (``kind``: read, write, stream) at ``ts``."""
    return f"spark-{kind}-{ts}-{uuid.uuid4().hex[:12]}"


class GcBarrier:
    """A job's GC barrier at ``ts``, as a task renews it while it works."""

    def __init__(self, coordinator: str, job: str, ts: int, ttl_s: float) -> None:
        self._coordinator = coordinator
        self._job = job
        self._ts = ts
        self._ttl_s = ttl_s

    async def renew(self) -> None:
        """Hold GC below the snapshot for another TTL."""
        await hold_gc(self._coordinator, self._job, self._ts, self._ttl_s)

    async def keep(self) -> None:
        """Renew every third of the TTL until cancelled."""
        while True:
            await asyncio.sleep(self._ttl_s / 3)
            await self.renew()


async def hold_gc(coordinator: str, job: str, ts: int, ttl_s: float) -> None:
    """Keep versions at ``ts`` readable for ``ttl_s`` more seconds under the barrier ``job``
    (one RPC to the coordinator; renewing moves the barrier to ``ts``)."""
    await gc_barrier.hold_gc(coordinator, job, ts, max(1, int(ttl_s * 1000)))


async def release_gc(coordinator: str, job: str) -> None:
    """Drop the barrier ``job`` now (one RPC)."""
    await gc_barrier.release_gc(coordinator, job)
