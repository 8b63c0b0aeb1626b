"""MVCC garbage collection below a safe point.

The safe point comes from the coordinator's liveness registry: below the start_ts of every
running transaction (clients report theirs under a lease, so a crashed client stops holding GC
back when its lease ends) and below ``now - gc_lifetime`` (which covers transactions that began
since the last report).

One pass, in an order that never loses a committed write:

1. Raise every shard's safe point. From then on a prewrite at or below it fails (TOO_OLD), so
   no new lock can appear below it, not even from a zombie committer.
2. Resolve every lock below it. A transaction whose primary committed below the safe point has
   its secondaries rolled forward now, before step 3 may remove the primary's commit record.
   Locks of live transactions stay: they have no commit record to lose.
3. Remove versions that no snapshot at or after the safe point can read, and old rollback
   records (no prewrite below the safe point can arrive any more).

The periodic loop sweeps the cells a bounded part at a time (``RECORDS_PER_PASS`` per shard
and pass), so that a pass costs about the same on a store of any size; ``percolator gc``
sweeps everything at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from percolator.server.metrics import definitions as metrics
from percolator.server.storage.cells import GcResult, ts_physical_ms
from percolator.server.storage.store import CellStore
from percolator.server.txn.lock_resolver import LockResolver

log = logging.getLogger(__name__)

LOCKS_PER_PASS = 10_000
RECORDS_PER_PASS = 1_000_000
"""Write records a periodic pass looks at per shard (about a second of Postgres time): a large
store is swept over several passes instead of all at once every interval."""


@dataclass(frozen=True)
class GcReport:
    """What one GC pass did."""

    safe_point: int
    locks_resolved: int
    locks_left: int
    removed: GcResult


async def collect_garbage(
    store: CellStore, resolver: LockResolver, safe_point: int, *, max_records: int | None = None
) -> GcReport:
    """Run one GC pass at ``safe_point`` (raised to the highest one ever set): over every
    cell, or with ``max_records`` over the next part of the store's sweep
    (:meth:`CellStore.gc`)."""
    safe_point = await store.set_gc_safe_point(safe_point)
    locks = await store.scan_locks(safe_point, limit=LOCKS_PER_PASS)
    held = await resolver.resolve(locks)
    removed = await store.gc(safe_point, max_records=max_records)
    report = GcReport(safe_point, len(locks) - len(held), len(held), removed)
    metrics.GC_PASSES_OK.inc()
    metrics.GC_SAFE_POINT_SECONDS.set(ts_physical_ms(safe_point) / 1000)
    metrics.GC_VERSIONS_REMOVED.inc(removed.versions_removed)
    metrics.GC_ROLLBACK_RECORDS_REMOVED.inc(removed.rollback_records_removed)
    metrics.GC_LOCKS_RESOLVED.inc(report.locks_resolved)
    log.info("gc at %d: %s", safe_point, report)
    return report


async def run_gc_loop(
    store: CellStore,
    resolver: LockResolver,
    safe_point: Callable[[], Awaitable[int]],
    interval_s: float,
) -> None:
    """Run a GC pass every ``interval_s`` until cancelled; a failed pass is logged and retried."""
    while True:
        await asyncio.sleep(interval_s)
        try:
            await collect_garbage(store, resolver, await safe_point(), max_records=RECORDS_PER_PASS)
        except asyncio.CancelledError:
            raise
        except Exception:
            metrics.GC_PASSES_FAILED.inc()
            log.warning("GC pass failed; retrying in %.0fs", interval_s, exc_info=True)
