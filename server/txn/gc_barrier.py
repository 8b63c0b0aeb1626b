"""Hold GC back at a timestamp for a job that no single process runs (a Spark job).

GC's safe point stays below the oldest start_ts that any live client reports to the
coordinator (:mod:`~percolator.server.txn.liveness`). A Spark job reads at one timestamp from
many short-lived worker processes, so no long-running process could report it; instead the job
reports itself under its own id, with a lease: :func:`hold_gc` (any process may renew it, e.g.
each task as it starts) and :func:`release_gc` when the job ends. If the job dies, the lease runs
out and GC moves on. The registry caps a lease at one hour
(:data:`~percolator.server.txn.liveness.MAX_LEASE_MS`): a longer job renews it.

Without a hold, a snapshot stays readable for the GC lifetime (10 minutes by default); past the
safe point, reads raise TransactionTooOld (the store refuses them) rather than reading versions
that may be gone, and a distributed transaction's prewrites fail the same way.
"""

from __future__ import annotations

from percolator.server.txn.liveness import KeepAliveTarget
from percolator.server.txn.timestamp_client import CoordinatorClient

DEFAULT_HOLD_MS = 30 * 60 * 1000
"""How long a hold lasts unless renewed."""
_PREFIX = "gc-hold:"


def hold_id(job_id: str) -> str:
    """The liveness client id under which a job's hold is registered."""
    if not job_id:
        raise ValueError("job_id must not be empty")
    return _PREFIX + job_id


async def hold_gc(
    coordinator: str | KeepAliveTarget, job_id: str, ts: int, ttl_ms: int = DEFAULT_HOLD_MS
) -> None:
    """Keep GC's safe point below ``ts`` for ``ttl_ms`` (capped at one hour), so that reads at
    ``ts`` and prewrites at start_ts ``ts`` stay possible. Calling it again renews the hold
    (and may move it to another ts). ``coordinator`` is its address or a CoordinatorClient.
    One RPC."""
    if ts <= 0 or ttl_ms <= 0:
        raise ValueError("ts and ttl_ms must be positive (release_gc releases a hold)")
    await _keep_alive(coordinator, hold_id(job_id), ts, ttl_ms)


async def release_gc(coordinator: str | KeepAliveTarget, job_id: str) -> None:
    """Release the job's hold (a lease of 0 leaves the registry). One RPC."""
    await _keep_alive(coordinator, hold_id(job_id), 0, 0)


async def _keep_alive(
    coordinator: str | KeepAliveTarget, client_id: str, ts: int, lease_ms: int
) -> None:
    if not isinstance(coordinator, str):
        await coordinator.keep_alive(client_id, ts, lease_ms)
        return
    async with CoordinatorClient(coordinator) as client:
        await client.keep_alive(client_id, ts, lease_ms)
