"""The SQL engine of one process: the catalog cache, parse and plan caches, sequences, roles.

Sessions (:mod:`percolator.server.session`) share one Engine. The catalog is read from the
store at start, replaced when a local DDL transaction commits, and polled (one cell, one round
trip per ``catalog_poll_s``) so DDL committed by another process is picked up.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from percolator.server.engine_api import UserInfo
from percolator.server.notifications import NotificationHub
from percolator.server.planner.planner import Planner
from percolator.server.sequences import SequenceAllocator
from percolator.server.shared_counter import SharedCounter
from percolator.server.sql import catalog_store
from percolator.server.sql.backends import BackendActivity, LockWait
from percolator.server.sql.catalog import Catalog
from percolator.server.sql.errors import INVALID_CATALOG_NAME, SqlError
from percolator.server.txn.client import TransactionClient

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EngineConfig:
    """Settings of the SQL engine."""

    database: str = "postgres"
    """The one database name clients connect to."""
    bootstrap_user: str = "postgres"
    """A superuser that always exists (its password: ``bootstrap_password``)."""
    bootstrap_password: str | None = None
    catalog_poll_s: float = 1.0
    parse_cache_size: int = 4096
    plan_cache_size: int = 4096
    settings: dict[str, str] = field(default_factory=dict)
    """Session setting defaults that differ from Postgres's (statement_timeout, ...)."""


class LruCache:
    """A small LRU map."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._data: OrderedDict[Any, Any] = OrderedDict()

    def get(self, key: Any) -> Any:
        value = self._data.get(key)
        if value is not None:
            self._data.move_to_end(key)
        return value

    def put(self, key: Any, value: Any) -> None:
        self._data[key] = value
        self._data.move_to_end(key)
        if len(self._data) > self._size:
            self._data.popitem(last=False)

    def clear(self) -> None:
        self._data.clear()


class Engine:
    """Per-process SQL state shared by every session."""

    def __init__(self, client: TransactionClient, config: EngineConfig | None = None) -> None:
        self.client = client
        self.config = config or EngineConfig()
        self.catalog = Catalog()
        self.planner = Planner()
        self.sequences = SequenceAllocator(client)
        self.notifications = NotificationHub(client)
        self.parse_cache = LruCache(self.config.parse_cache_size)
        self.plan_cache = LruCache(self.config.plan_cache_size)
        self._tasks: list[asyncio.Task[None]] = []
        self._bootstrap_verifier: str | None = None
        self._bootstrap_md5: str | None = None
        self.sessions: set[Any] = set()
        self.backends = SessionBackends(self.sessions)
        self.shared_version: SharedCounter | None = None
        """The newest catalog version among the workers of ``serve --processes`` (None: this
        process serves alone)."""
        self._catching_up: asyncio.Future[Catalog] | None = None

    async def start(self) -> None:
        """Load the catalog and start polling for other processes' DDL."""
        from percolator.server.frontend.auth import make_md5_hash, make_scram_verifier

        if self.config.bootstrap_password is not None:
            self._bootstrap_verifier = make_scram_verifier(self.config.bootstrap_password)
            self._bootstrap_md5 = make_md5_hash(
                self.config.bootstrap_user, self.config.bootstrap_password
            )
        await self.refresh_catalog(force=True)
        if self.config.catalog_poll_s > 0:
            self._tasks.append(asyncio.create_task(self._poll()))

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        await self.notifications.close()

    async def refresh_catalog(self, *, force: bool = False) -> Catalog:
        """Reload the catalog if the store holds a newer version (one read; a scan if so).

        Only newer: a poll whose snapshot predates a local DDL commit (published meanwhile)
        reads the older version, and publishing that would hide the new table until the next
        poll."""
        async with self.client.begin() as txn:
            version = await catalog_store.read_version(txn)
            if force or version > self.catalog.version:
                catalog = await catalog_store.load(txn)
                if force or catalog.version > self.catalog.version:
                    self.publish(catalog)
        return self.catalog

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(self.config.catalog_poll_s)
            try:
                await self.refresh_catalog()
            except Exception:  # keep polling through transient store errors
                log.warning("catalog poll failed", exc_info=True)

    def publish(self, catalog: Catalog) -> None:
        """Make a committed catalog the current one (plans bound to the old one are rebound)."""
        if catalog is not self.catalog:
            self.catalog = catalog
            self.plan_cache.clear()
            if self.shared_version is not None:
                self.shared_version.advance(catalog.version)

    async def catch_up(self) -> None:
        """Reload the catalog until it is as new as the pool's shared version: one reload
        at a time, which the sessions that find it behind meanwhile wait for."""
        while self.catalog_behind():
            reload = self._catching_up
            if reload is None:
                reload = self._catching_up = asyncio.ensure_future(self.refresh_catalog())
                reload.add_done_callback(self._caught_up)
            await asyncio.shield(reload)

    def _caught_up(self, _reload: asyncio.Future[Catalog]) -> None:
        self._catching_up = None

    def catalog_behind(self) -> bool:
        """Whether another worker of this machine's pool has published a newer catalog (then
        :meth:`refresh_catalog` before planning)."""
        shared = self.shared_version
        return shared is not None and shared.read() > self.catalog.version

    # -- front-end API -----------------------------------------------------------------------

    async def lookup_user(self, name: str) -> UserInfo | None:
        role = self.catalog.roles.get(name)
        if role is None and name != self.config.bootstrap_user:
            await self.refresh_catalog()
            role = self.catalog.roles.get(name)
        if role is not None:
            if not role.login:
                return None
            return UserInfo(role.name, role.scram_verifier, role.md5_hash, role.superuser)
        if name == self.config.bootstrap_user:
            return UserInfo(name, self._bootstrap_verifier, self._bootstrap_md5, True)
        return None

    def open_session(
        self, user: str, database: str, options: dict[str, str], backend_pid: int
    ) -> Any:
        from percolator.server.session import SqlSession

        if database != self.config.database:
            raise SqlError(INVALID_CATALOG_NAME, f'database "{database}" does not exist')
        session = SqlSession(self, user, database, options, backend_pid)
        self.sessions.add(session)
        return session


class SessionBackends:
    """The engine's sessions for pg_stat_activity and the backend signals
    (server/sql/backends.Backends)."""

    def __init__(self, sessions: set[Any]) -> None:
        self._sessions = sessions

    def activity(self) -> list[BackendActivity]:
        return sorted((s.activity() for s in self._sessions), key=lambda b: b.pid)

    def blocking_pids(self, pid: int) -> list[int] | None:
        session = next((s for s in self._sessions if s.backend_pid == pid), None)
        if session is None:
            return None
        wait = session.lock_wait()
        return [] if wait is None else self.holders_of(wait, exclude=session)

    def holders_of(self, wait: LockWait, exclude: Any = None) -> list[int]:
        return sorted(
            s.backend_pid for s in self._sessions if s is not exclude and s.holds_lock_of(wait)
        )

    def signal(self, pid: int, *, terminate: bool) -> bool:
        session = next((s for s in self._sessions if s.backend_pid == pid), None)
        if session is None:
            return False
        if terminate:
            session.terminate()
        else:
            session.cancel()
        return True
