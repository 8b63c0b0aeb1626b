"""LISTEN / NOTIFY channels between the sessions of every server process of a deployment.

The Postgres store carries them on Postgres's own LISTEN/NOTIFY, on the first shard: a
process listens, on one connection of its own, to the channels its sessions listen to, and
sends a notification with ``pg_notify`` on a pooled connection. Channel names get a prefix so
that they never meet the store's own channels; the payload carries the sending process's token
and the notifying session's backend process id, which the client is told. The memory store
delivers within its process.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

PREFIX = "pq:"
"""Before a user channel's name in the store (the store's own channels have none)."""


@dataclass(frozen=True)
class Notification:
    pid: int
    channel: str
    payload: str
    origin: str = ""
    """The sending process's token (a process delivers its own notifications itself)."""


Deliver = Callable[[Notification], None]


class Channels(Protocol):
    """Where a process's sessions listen and notify."""

    async def listen(self, channel: str) -> None:
        """Start receiving ``channel``'s notifications (into the ``deliver`` callback)."""

    async def unlisten(self, channel: str) -> None: ...

    async def notify(self, notifications: Sequence[Notification]) -> None:
        """Send notifications to every listener of the deployment (one round trip)."""

    async def close(self) -> None: ...


class LocalChannels:
    """Notifications within one process (the memory store's)."""

    def __init__(self, deliver: Deliver) -> None:
        self._deliver = deliver
        self._listening: set[str] = set()

    async def listen(self, channel: str) -> None:
        self._listening.add(channel)

    async def unlisten(self, channel: str) -> None:
        self._listening.discard(channel)

    async def notify(self, notifications: Sequence[Notification]) -> None:
        for n in notifications:
            if n.channel in self._listening:
                self._deliver(n)

    async def close(self) -> None:
        self._listening.clear()


class PostgresChannels:
    """Notifications over Postgres's LISTEN/NOTIFY on the first shard."""

    def __init__(
        self,
        deliver: Deliver,
        connect: Callable[[], Awaitable[Any]],
        execute: Callable[[str, Sequence[Any]], Awaitable[Any]],
    ) -> None:
        self._deliver = deliver
        self._connect = connect
        self._execute = execute
        self._conn: Any = None
        self._guard = asyncio.Lock()

    async def listen(self, channel: str) -> None:
        async with self._guard:
            if self._conn is None or self._conn.is_closed():
                self._conn = await self._connect()
            await self._conn.add_listener(PREFIX + channel, self._received)

    async def unlisten(self, channel: str) -> None:
        async with self._guard:
            if self._conn is not None and not self._conn.is_closed():
                await self._conn.remove_listener(PREFIX + channel, self._received)

    async def notify(self, notifications: Sequence[Notification]) -> None:
        await self._execute(
            "SELECT pg_notify(c, p) FROM unnest($1::text[], $2::text[]) AS n(c, p)",
            [
                [PREFIX + n.channel for n in notifications],
                [f"{n.origin} {n.pid} {n.payload}" for n in notifications],
            ],
        )

    def _received(self, _conn: Any, _pid: int, channel: str, payload: str) -> None:
        origin, _, rest = payload.partition(" ")
        pid, _, text = rest.partition(" ")
        self._deliver(Notification(int(pid), channel.removeprefix(PREFIX), text, origin))

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close()
