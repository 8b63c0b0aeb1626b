"""The connector's side of a distributed transaction (one Spark write = one transaction).

A thin layer over :mod:`percolator.server.txn.distributed`: the token (start_ts, primary, TTL) is
a small picklable value that travels to every task; tasks open part transactions at its start_ts
whose commit only prewrites (and extends the job's TTL), and the driver side commits or aborts.
The job also holds GC back at its start_ts (a barrier renewed by each task) so that a write
running longer than the GC lifetime can still prewrite.
"""

from __future__ import annotations

from percolator.clients.database import Database
from percolator.connectors.spark import snapshot
from percolator.server.txn import distributed as dist
from percolator.server.txn.transaction import Transaction

Token = dist.DistributedTxn

GC_TTL_S = 3600.0
"""The write's GC barrier lease (renewed by each task; released by commit or abort)."""


def barrier_of(token: Token) -> str:
    """The id of the job's GC barrier (one per distributed transaction)."""
    return f"spark-write-{token.start_ts}"


async def begin(db: Database, coordinator: str, lock_ttl_s: float) -> Token:
    """Begin the job's transaction (start_ts, its primary lock) and hold GC back at it."""
    token = await dist.begin_distributed(db.client, ttl_ms=int(lock_ttl_s * 1000))
    await snapshot.hold_gc(coordinator, barrier_of(token), token.start_ts, GC_TTL_S)
    return token


async def join(db: Database, coordinator: str, token: Token) -> None:
    """A task starting: renew the GC barrier and the job's TTL (fails if the job is over)."""
    await snapshot.hold_gc(coordinator, barrier_of(token), token.start_ts, GC_TTL_S)
    await dist.heartbeat_distributed(db.client, token)


def begin_part(db: Database, token: Token) -> Transaction:
    """A transaction at the token's start_ts whose commit prewrites its writes as secondaries
    of the token's primary (what one task writes, a batch at a time)."""
    return db.client.begin_part(token)


async def commit(db: Database, coordinator: str, token: Token) -> int:
    """The commit point: commit_ts, the primary, then every secondary (server-side)."""
    try:
        return await dist.commit_distributed(db.client, token)
    finally:
        await snapshot.release_gc(coordinator, barrier_of(token))


async def abort(db: Database, coordinator: str, token: Token) -> None:
    """Roll the job back: nothing it prewrote becomes visible, and no lock stays."""
    try:
        await dist.abort_distributed(db.client, token)
    finally:
        await snapshot.release_gc(coordinator, barrier_of(token))
