"""Which part of the notification hash space a worker scans.

One worker alone scans all of it (:class:`WholeSpace`). Several workers join the ``workers``
group at the coordinator under a lease and each scans the slice its rank among the live members
gives it (:class:`GroupSlices`, Apache Fluo's hash split): no two workers scan the same
notifications, and when a worker dies its lease ends and the others' slices grow to cover it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from typing import Protocol

from percolator.server.txn.membership import HASH_MAX, HASH_MIN, GroupMember, hash_slice

log = logging.getLogger(__name__)

WORKERS_GROUP = "workers"
DEFAULT_WORKER_LEASE_MS = 10_000


class MembershipService(Protocol):
    """The coordinator's JoinGroup (a CoordinatorClient, or an in-process registry)."""

    async def join_group(
        self, group: str, member_id: str, lease_ms: int, info: str = ""
    ) -> list[GroupMember]: ...


class SliceSource(Protocol):
    """Where a worker learns its slice."""

    def slice(self) -> tuple[int, int] | None:
        """The inclusive [lo, hi] hash range to scan now; None: scan nothing yet."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


class WholeSpace:
    """The only worker: the whole hash space."""

    def slice(self) -> tuple[int, int] | None:
        return HASH_MIN, HASH_MAX

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None


class GroupSlices:
    """Membership of the workers group, renewed every third of the lease.

    If the coordinator cannot be reached, the worker keeps its last slice: a stale split only
    duplicates or delays work (acks keep runs exactly-once), and stopping would stall everything.
    """

    def __init__(
        self,
        coordinator: MembershipService,
        member_id: str,
        *,
        lease_ms: int = DEFAULT_WORKER_LEASE_MS,
        group: str = WORKERS_GROUP,
    ) -> None:
        self._coordinator = coordinator
        self.member_id = member_id
        self._lease_ms = lease_ms
        self._group = group
        self._info = f"{socket.gethostname()} pid {os.getpid()}"
        self._slice: tuple[int, int] | None = None
        self.members: list[GroupMember] = []
        self._task: asyncio.Task[None] | None = None

    def slice(self) -> tuple[int, int] | None:
        return self._slice

    async def start(self) -> None:
        await self.renew()
        self._task = asyncio.create_task(self._loop())

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self._lease_ms / 3000)
            await self.renew()

    async def renew(self) -> None:
        """Renew the membership now and recompute the slice from the live members."""
        try:
            members = await self._coordinator.join_group(
                self._group, self.member_id, self._lease_ms, self._info
            )
        except Exception as exc:
            log.warning("worker %s: membership not renewed: %s", self.member_id, exc)
            return
        ids = [m.member_id for m in members]
        if self.member_id not in ids:
            return
        if [m.member_id for m in self.members] != ids:
            log.info("worker %s: %d live worker(s)", self.member_id, len(ids))
        self.members = members
        self._slice = hash_slice(ids.index(self.member_id), len(ids))

    async def stop(self) -> None:
        """Leave the group, so the others take over this slice at once."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        with contextlib.suppress(Exception):
            await self._coordinator.join_group(self._group, self.member_id, 0)
