"""Which clients are alive, and how far back their running transactions read: the GC safe point.

Clients (SQL front ends, observer workers, the Spark driver) report, under a lease, the oldest
start_ts among their running transactions. A client that crashes stops reporting; when its lease
ends it no longer holds GC back. The coordinator keeps the :class:`LivenessRegistry`; each client
runs a :class:`LivenessReporter`.

The safe point is below every reported start_ts and below ``now - gc_lifetime``. The lifetime term
protects transactions that began after their client's last report (a report says nothing about
them yet), so the report interval must stay well below the GC lifetime.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from percolator.server.storage.cells import ts_from_physical_ms

log = logging.getLogger(__name__)

DEFAULT_GC_LIFETIME_MS = 10 * 60 * 1000
DEFAULT_LEASE_MS = 30_000
MAX_LEASE_MS = 60 * 60 * 1000
"""A longer lease would let a dead client hold GC back for too long."""


@dataclass(frozen=True, slots=True)
class ClientLease:
    """What one client last reported."""

    client_id: str
    min_start_ts: int
    """The oldest start_ts among its running transactions; 0 when none is running."""
    expires_at: float
    """In the registry's clock (monotonic seconds)."""


class LivenessRegistry:
    """The coordinator's table of live clients and their oldest running start_ts."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._leases: dict[str, ClientLease] = {}

    def keep_alive(self, client_id: str, min_start_ts: int, lease_ms: int) -> None:
        """Record a report; ``lease_ms == 0`` removes the client (it is shutting down)."""
        if not client_id:
            raise ValueError("client_id must not be empty")
        if min_start_ts < 0 or lease_ms < 0:
            raise ValueError("min_start_ts and lease_ms must not be negative")
        if lease_ms == 0:
            self._leases.pop(client_id, None)
            return
        lease_ms = min(lease_ms, MAX_LEASE_MS)
        expires_at = self._clock() + lease_ms / 1000
        self._leases[client_id] = ClientLease(client_id, min_start_ts, expires_at)

    def live_clients(self) -> list[ClientLease]:
        """The clients whose lease has not ended (expired ones are dropped)."""
        now = self._clock()
        expired = [cid for cid, lease in self._leases.items() if lease.expires_at <= now]
        for cid in expired:
            del self._leases[cid]
        return list(self._leases.values())

    def safe_point(self, now_ts: int, gc_lifetime_ms: int = DEFAULT_GC_LIFETIME_MS) -> int:
        """The highest timestamp GC may collect at: below every live client's oldest running
        start_ts and at most ``now_ts - gc_lifetime``.

        It is strictly below a reported start_ts because a store refuses prewrites *at or below*
        its safe point: a transaction running at exactly the safe point could not commit.
        """
        point = now_ts - ts_from_physical_ms(gc_lifetime_ms)
        for lease in self.live_clients():
            if lease.min_start_ts:
                point = min(point, lease.min_start_ts - 1)
        return max(point, 0)


class KeepAliveTarget(Protocol):
    """Where a reporter sends its reports (the coordinator client)."""

    async def keep_alive(self, client_id: str, min_start_ts: int, lease_ms: int) -> bool: ...


class LivenessReporter:
    """Reports a process's oldest running start_ts to the coordinator every ``interval_s``.

    ``min_start_ts`` is typically ``TransactionClient.min_running_start_ts``. A failed report is
    logged and retried at the next tick; the lease (a few intervals long) rides over short
    outages.
    """

    def __init__(
        self,
        target: KeepAliveTarget,
        min_start_ts: Callable[[], int | None],
        *,
        client_id: str | None = None,
        interval_s: float = 5.0,
        lease_ms: int = DEFAULT_LEASE_MS,
    ) -> None:
        if lease_ms < 2 * interval_s * 1000:
            raise ValueError("lease_ms must cover at least two report intervals")
        self.client_id = client_id or f"client-{uuid.uuid4().hex[:12]}"
        self._target = target
        self._min_start_ts = min_start_ts
        self._interval_s = interval_s
        self._lease_ms = lease_ms
        self._task: asyncio.Task[None] | None = None

    async def report(self) -> None:
        """Send one report now."""
        await self._target.keep_alive(self.client_id, self._min_start_ts() or 0, self._lease_ms)

    def start(self) -> None:
        """Start reporting in the background."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._loop())

    async def _loop(self) -> None:
        while True:
            try:
                await self.report()
            except Exception as exc:
                log.warning("liveness report of %s failed: %s", self.client_id, exc)
            await asyncio.sleep(self._interval_s)

    async def stop(self) -> None:
        """Stop reporting and leave the registry (best effort)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
        try:
            await self._target.keep_alive(self.client_id, 0, 0)
        except Exception as exc:
            log.info("could not deregister %s: %s", self.client_id, exc)
