"""Group membership under leases, and how members split the notification hash space.

Observer workers join a group (one per deployment, e.g. ``"workers"``) at the coordinator and
renew their membership every few seconds; each renewal returns the live members. Like Apache
Fluo, member ``i`` of ``n`` (members sorted by id) scans the ``i``-th slice of the signed 64-bit
notification hash space (:func:`hash_slice`). A worker that dies stops renewing; when its lease
ends it drops out, and the survivors' next renewal shows ``n - 1`` members whose slices cover the
whole space again.

Membership only decides who scans which notifications: it is not a lock. Two workers may briefly
disagree about the member list (one renewed after a change, the other not yet) and scan
overlapping slices, or leave a slice unscanned until their next renewal. The workers must
therefore tolerate a notification that two of them take at once (observers run in transactions).

The coordinator keeps the :class:`GroupRegistry` in memory: after a coordinator restart it is
empty, and every worker is back in it at its next renewal. A member keeps its place with a
:class:`GroupLease`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from percolator.server.txn.liveness import MAX_LEASE_MS

log = logging.getLogger(__name__)

HASH_MIN = -(2**63)
"""The smallest notification hash (:func:`~percolator.server.storage.sharding.row_hash`)."""
HASH_MAX = 2**63 - 1
"""The largest notification hash."""
MAX_ID_LENGTH = 256
"""Longest group or member id: ids are names, and the registry keeps every live one in memory."""
MAX_INFO_LENGTH = 4096
"""Longest ``info``: it is sent back to every member at every renewal."""


@dataclass(frozen=True, slots=True)
class GroupMember:
    """One live member of a group, as the coordinator saw it when it answered."""

    member_id: str
    info: str
    """Free-form, given by the member when it joined or last renewed (e.g. host and pid)."""
    lease_remaining_ms: int
    """How long the membership still holds without a renewal (always at least 1)."""
    joined_ms: int
    """Wall-clock milliseconds since the epoch when the member first joined; renewals keep it."""


@dataclass(slots=True)
class _Lease:
    info: str
    expires_at: float
    """In the registry's clock (monotonic seconds)."""
    joined_ms: int


class GroupRegistry:
    """The coordinator's groups and their live members.

    ``clock`` (monotonic seconds) times the leases; ``wall_clock`` (seconds since the epoch) only
    stamps ``joined_ms``. Both can be replaced in tests.
    """

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._clock = clock
        self._wall_clock = wall_clock
        self._groups: dict[str, dict[str, _Lease]] = {}

    def join(self, group: str, member_id: str, lease_ms: int, info: str = "") -> list[GroupMember]:
        """Join ``group`` for ``lease_ms`` (capped at :data:`MAX_LEASE_MS`), or renew the lease
        and replace ``info`` if already a member; ``lease_ms == 0`` leaves the group.

        Returns the live members sorted by ``member_id``: the caller is among them unless it
        left. Raises ValueError for an empty or overlong group or member id, a negative lease or
        an overlong ``info``.
        """
        _check_id("group", group)
        _check_id("member_id", member_id)
        if lease_ms < 0:
            raise ValueError(f"lease_ms must not be negative, got {lease_ms}")
        if len(info) > MAX_INFO_LENGTH:
            raise ValueError(f"info must be at most {MAX_INFO_LENGTH} characters, got {len(info)}")
        now = self._clock()
        members = self._live(group, now)
        if lease_ms == 0:
            members.pop(member_id, None)
        else:
            # A longer lease would leave a dead member's slice unscanned for too long.
            expires_at = now + min(lease_ms, MAX_LEASE_MS) / 1000
            lease = members.get(member_id)
            if lease is None:
                joined_ms = int(self._wall_clock() * 1000)
                members[member_id] = _Lease(info, expires_at, joined_ms)
            else:
                lease.info = info
                lease.expires_at = expires_at
        return self._snapshot(group, members, now)

    def members(self, group: str) -> list[GroupMember]:
        """The live members of ``group`` sorted by ``member_id`` (empty for an unknown group)."""
        _check_id("group", group)
        now = self._clock()
        return self._snapshot(group, self._live(group, now), now)

    def _live(self, group: str, now: float) -> dict[str, _Lease]:
        """The group's table with expired members dropped (a new table for an unknown group)."""
        members = self._groups.get(group)
        if members is None:
            return {}
        for member_id in [m for m, lease in members.items() if lease.expires_at <= now]:
            del members[member_id]
        return members

    def _snapshot(self, group: str, members: dict[str, _Lease], now: float) -> list[GroupMember]:
        # Empty groups are forgotten, so that groups nobody uses any more cost no memory.
        if members:
            self._groups[group] = members
        else:
            self._groups.pop(group, None)
        return [
            GroupMember(
                member_id,
                lease.info,
                # Rounded, and at least 1: a member that is listed still holds its lease.
                max(1, round((lease.expires_at - now) * 1000)),
                lease.joined_ms,
            )
            for member_id, lease in sorted(members.items())
        ]


class MembershipService(Protocol):
    """The coordinator's JoinGroup (a CoordinatorClient, or an in-process registry)."""

    async def join_group(
        self, group: str, member_id: str, lease_ms: int, info: str = ""
    ) -> list[GroupMember]: ...


class GroupLease:
    """Keeps ``member_id`` in ``group`` with ``info``: joins, renews every third of the lease
    until :meth:`stop`, then leaves.

    A failed renewal is logged and retried at the next tick: the member stays listed until its
    lease ends, and nothing that relies on the group should stop over one missed renewal.
    ``on_members`` is called with the live members after every successful renewal.
    """

    def __init__(
        self,
        membership: MembershipService,
        group: str,
        member_id: str,
        info: str,
        *,
        lease_ms: int,
        on_members: Callable[[list[GroupMember]], None] | None = None,
    ) -> None:
        self.group = group
        self.member_id = member_id
        self.info = info
        self._membership = membership
        self._lease_ms = lease_ms
        self._on_members = on_members
        self._task: asyncio.Task[None] | None = None

    async def renew(self) -> list[GroupMember] | None:
        """Join or renew now; the live members, or None (and a log line) when the coordinator
        did not answer."""
        try:
            members = await self._membership.join_group(
                self.group, self.member_id, self._lease_ms, self.info
            )
        except Exception as exc:
            log.warning("%s %s: membership not renewed: %s", self.group, self.member_id, exc)
            return None
        if self._on_members is not None:
            self._on_members(members)
        return members

    async def start(self) -> None:
        """Join once now (without raising), then renew in the background."""
        await self.renew()
        self._task = asyncio.create_task(self._loop())

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self._lease_ms / 3000)
            await self.renew()

    async def stop(self) -> None:
        """Stop renewing and leave the group (best effort), so the others see it gone at once."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        with contextlib.suppress(Exception):
            async with asyncio.timeout(2.0):
                await self._membership.join_group(self.group, self.member_id, 0)


def _check_id(name: str, value: str) -> None:
    if not value:
        raise ValueError(f"{name} must not be empty")
    if len(value) > MAX_ID_LENGTH:
        raise ValueError(f"{name} must be at most {MAX_ID_LENGTH} characters, got {len(value)}")


def hash_slice(index: int, count: int) -> tuple[int, int]:
    """The inclusive range ``(lo, hi)`` of signed 64-bit hashes that member ``index`` of
    ``count`` owns.

    The ``count`` slices are contiguous, disjoint and cover ``[HASH_MIN, HASH_MAX]`` exactly, in
    order of ``index``; their sizes differ by at most one. Raises ValueError unless
    ``0 <= index < count``.
    """
    if count < 1:
        raise ValueError(f"count must be at least 1, got {count}")
    if not 0 <= index < count:
        raise ValueError(f"index must be in [0, {count}), got {index}")
    # Exact integer arithmetic over the 2**64 hashes: slice i starts at floor(i * 2**64 / count),
    # so slice i + 1 starts right after slice i ends and the last one ends at HASH_MAX.
    span = HASH_MAX - HASH_MIN + 1
    lo = HASH_MIN + index * span // count
    hi = HASH_MIN + (index + 1) * span // count - 1
    return lo, hi
