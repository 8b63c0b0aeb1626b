"""LISTEN, UNLISTEN, NOTIFY and pg_notify, as Postgres has them.

A session's LISTEN, UNLISTEN and NOTIFY take effect when its transaction commits (at once
outside a transaction block) and are forgotten if it rolls back; identical notifications of
one transaction are sent once. Notifications travel between server processes through the
store (``storage/channels.py``); :class:`NotificationHub` is a process's end of that, and
hands each notification to the sessions listening on its channel, whose front end sends it
to the client while the session is idle, or before the next ReadyForQuery that ends a
transaction (as Postgres delivers them between transactions).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import replace

from percolator.server.sql.errors import INVALID_PARAMETER_VALUE, SqlError
from percolator.server.storage.channels import Channels, Notification
from percolator.server.txn.client import TransactionClient

MAX_PAYLOAD = 7999
"""Postgres's limit on a payload, in bytes (less than 8000)."""


class NotificationHub:
    """One process's listeners: which sessions listen to which channel."""

    def __init__(self, client: TransactionClient) -> None:
        self._client = client
        self._channels: Channels | None = None
        self._listeners: dict[str, set[SessionNotifications]] = {}
        self.origin = secrets.token_hex(8)
        """This process's token on its notifications: it delivers its own at once (before
        the notifying transaction's ReadyForQuery, as Postgres does for its own backend) and
        skips their echo from the store."""

    def _store_channels(self) -> Channels:
        if self._channels is None:
            self._channels = self._client.channels(self._deliver)
        return self._channels

    async def listen(self, channel: str, who: SessionNotifications) -> None:
        listeners = self._listeners.setdefault(channel, set())
        if not listeners:
            await self._store_channels().listen(channel)
        listeners.add(who)

    async def unlisten(self, channel: str, who: SessionNotifications) -> None:
        listeners = self._listeners.get(channel)
        if listeners is None or who not in listeners:
            return
        listeners.discard(who)
        if not listeners:
            del self._listeners[channel]
            await self._store_channels().unlisten(channel)

    async def notify(self, notifications: list[Notification]) -> None:
        notifications = [replace(n, origin=self.origin) for n in notifications]
        for n in notifications:
            self._to_sessions(n)
        await self._store_channels().notify(notifications)

    def _deliver(self, notification: Notification) -> None:
        if notification.origin != self.origin:
            self._to_sessions(notification)

    def _to_sessions(self, notification: Notification) -> None:
        for who in list(self._listeners.get(notification.channel, ())):
            who.receive(notification)

    async def close(self) -> None:
        if self._channels is not None:
            await self._channels.close()


class SessionNotifications:
    """One session's channels, and what its open transaction will change or send."""

    def __init__(self, hub: NotificationHub, pid: int) -> None:
        self._hub = hub
        self._pid = pid
        self.listening: set[str] = set()
        self._changes: list[tuple[bool, str | None]] = []
        """(listen?, channel; None: every channel) in statement order."""
        self._outbox: dict[tuple[str, str], None] = {}
        self._marks: dict[int, tuple[int, dict[tuple[str, str], None]]] = {}
        """Per savepoint (by id): how many changes and which notifications the transaction
        had when it was taken (ROLLBACK TO SAVEPOINT drops those made since, as Postgres
        does)."""
        self.sink: Callable[[Notification], None] | None = None
        """Where notifications for this session go (the front end's)."""

    @property
    def pending(self) -> bool:
        """Whether the open transaction listened, unlistened or notified."""
        return bool(self._changes or self._outbox)

    def listen(self, channel: str) -> None:
        self._changes.append((True, channel))

    def unlisten(self, channel: str | None) -> None:
        self._changes.append((False, channel))

    def notify(self, channel: str, payload: str) -> None:
        """NOTIFY / pg_notify: sent when the transaction commits."""
        if not channel:
            raise SqlError(INVALID_PARAMETER_VALUE, "channel name cannot be empty")
        if len(channel.encode()) > 63:
            raise SqlError(INVALID_PARAMETER_VALUE, "channel name too long")
        if len(payload.encode()) > MAX_PAYLOAD:
            raise SqlError(INVALID_PARAMETER_VALUE, "payload string too long")
        self._outbox.setdefault((channel, payload), None)

    def mark(self, savepoint: object) -> None:
        """SAVEPOINT: remember what the transaction has listened and notified so far."""
        self._marks[id(savepoint)] = (len(self._changes), dict(self._outbox))

    def rollback_to(self, savepoint: object) -> None:
        """ROLLBACK TO SAVEPOINT: forget the LISTEN / UNLISTEN / NOTIFY made since."""
        mark = self._marks.get(id(savepoint))
        if mark is not None:
            del self._changes[mark[0] :]
            self._outbox = dict(mark[1])

    async def commit(self) -> None:
        """The transaction committed: apply its LISTEN / UNLISTEN, send its NOTIFYs."""
        changes, self._changes = self._changes, []
        outbox, self._outbox = self._outbox, {}
        self._marks = {}
        for listen, channel in changes:
            if listen:
                assert channel is not None
                self.listening.add(channel)
                await self._hub.listen(channel, self)
            else:
                for c in [channel] if channel is not None else list(self.listening):
                    self.listening.discard(c)
                    await self._hub.unlisten(c, self)
        if outbox:
            await self._hub.notify([Notification(self._pid, c, p) for c, p in outbox])

    def rollback(self) -> None:
        self._changes = []
        self._outbox = {}
        self._marks = {}

    def receive(self, notification: Notification) -> None:
        if self.sink is not None:
            self.sink(notification)

    async def close(self) -> None:
        self.rollback()
        for channel in list(self.listening):
            await self._hub.unlisten(channel, self)
        self.listening.clear()
