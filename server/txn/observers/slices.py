"""Which part of the notification hash space a worker scans.

One worker alone scans all of it (:class:`WholeSpace`). Several workers join the ``workers``
group at the coordinator under a lease and each scans the slice its rank among the live members
gives it (:class:`GroupSlices`, Apache Fluo's hash split): no two workers scan the same
notifications, and when a worker dies its lease ends and the others' slices grow to cover it.
"""

from __future__ import annotations

import logging
import os
import socket
from typing import Protocol

from percolator.server.txn.membership import (
    HASH_MAX,
    HASH_MIN,
    GroupLease,
    GroupMember,
    MembershipService,
    hash_slice,
)

log = logging.getLogger(__name__)

WORKERS_GROUP = "workers"
DEFAULT_WORKER_LEASE_MS = 10_000


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
    """Membership of the workers group (a :class:`GroupLease`, renewed every third of the
    lease), and the slice this worker's rank among the live members gives it.

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
        self.member_id = member_id
        self._lease = GroupLease(
            coordinator,
            group,
            member_id,
            f"{socket.gethostname()} pid {os.getpid()}",
            lease_ms=lease_ms,
            on_members=self._split,
        )
        self._slice: tuple[int, int] | None = None
        self.members: list[GroupMember] = []

    def slice(self) -> tuple[int, int] | None:
        return self._slice

    async def start(self) -> None:
        await self._lease.start()

    async def renew(self) -> None:
        """Renew the membership now and recompute the slice from the live members."""
        await self._lease.renew()

    def _split(self, members: list[GroupMember]) -> None:
        ids = [m.member_id for m in members]
        if self.member_id not in ids:
            return
        if [m.member_id for m in self.members] != ids:
            log.info("worker %s: %d live worker(s)", self.member_id, len(ids))
        self.members = members
        self._slice = hash_slice(ids.index(self.member_id), len(ids))

    async def stop(self) -> None:
        """Leave the group, so the others take over this slice at once."""
        await self._lease.stop()
