"""The sessions of this server as SQL sees them: pg_stat_activity lists them (what each runs,
whether it waits for a lock), pg_blocking_pids tells which sessions it waits for,
pg_cancel_backend cancels one's statement and
pg_terminate_backend ends its connection, as an administrator does with a session that holds
locks others wait for.

Only the sessions of the server process the statement runs in are seen: another server of the
deployment keeps its own (the workers of ``percolator serve --processes N`` share theirs,
:mod:`percolator.server.pool_backends`).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Protocol

from percolator.server.sql import types as T
from percolator.server.sql.errors import QUERY_CANCELED, SqlError
from percolator.server.sql.functions import define

INSUFFICIENT_PRIVILEGE = "42501"


@dataclass(frozen=True, slots=True)
class LockWait:
    """The lock a session waits for, told apart enough for another process to say whether
    one of its own sessions holds it (``serve --processes``'s pg_blocking_pids)."""

    rows: tuple[tuple[str, bytes, str], ...] = ()
    """The row locks' cells (table, row key, column) it waits to take."""
    holds: int = 0
    """The row-lock holds it asks for (bits, as storage/row_locks.HOLDS)."""
    advisory: tuple[tuple[int, int], bool] | None = None
    """An advisory lock (its two-integer key, shared) it waits for."""


@dataclass(frozen=True, slots=True)
class BackendActivity:
    """One session, as a row of pg_stat_activity shows it."""

    pid: int
    user: str
    application_name: str
    backend_start: dt.datetime
    xact_start: dt.datetime | None
    query_start: dt.datetime | None
    state: str
    """active, idle, idle in transaction, idle in transaction (aborted)."""
    lock_wait: str | None
    """What lock it waits for, as pg_stat_activity's wait_event names it: ``tuple`` (a row
    lock), ``advisory``; None when it waits for none."""
    query: str
    wait: LockWait | None = None
    """The lock it waits for, in full (None when it waits for none)."""


class Backends(Protocol):
    """The server's sessions (``ExecContext.backends``)."""

    def activity(self) -> list[BackendActivity]:
        """Every session of this server process."""

    def signal(self, pid: int, *, terminate: bool) -> bool:
        """Cancel the statement of the session with ``pid`` or, with ``terminate``, end its
        connection (its transaction rolls back); False if there is no such session."""

    def blocking_pids(self, pid: int) -> list[int] | None:
        """The sessions that hold a lock the session with ``pid`` waits for (its row or
        advisory lock); None if there is no such session."""

    def holders_of(self, wait: LockWait) -> list[int]:
        """The sessions of this process that hold the lock ``wait`` describes in a mode that
        conflicts with it."""


def _signal(ctx: Any, pid: int, terminate: bool) -> bool:
    backends: Backends | None = getattr(ctx, "backends", None)
    if backends is None:
        return False
    target = next((b for b in backends.activity() if b.pid == pid), None)
    if target is None:
        return False
    if pid == ctx.backend_pid and not terminate:
        raise SqlError(QUERY_CANCELED, "canceling statement due to user request")
    if target.user != ctx.user and not is_superuser(ctx):
        what, whose = (
            ("terminate process", "process is being terminated")
            if terminate
            else ("cancel query", "query is being canceled")
        )
        raise SqlError(
            INSUFFICIENT_PRIVILEGE,
            f"permission denied to {what}",
            detail=f"Only roles with privileges of the role whose {whose} may do this.",
        )
    return backends.signal(pid, terminate=terminate)


def is_superuser(ctx: Any) -> bool:
    """Whether the statement's user is a superuser (the bootstrap user is)."""
    if ctx.user == ctx.bootstrap_user:
        return True
    role = ctx.catalog.roles.get(ctx.user)
    return role is not None and role.superuser


def _blocking_pids(ctx: Any, pid: int) -> list[int]:
    backends: Backends | None = getattr(ctx, "backends", None)
    blocking = None if backends is None else backends.blocking_pids(pid)
    return blocking or []


def _session_is_blocked(ctx: Any, pid: int, interesting: list[int | None]) -> bool:
    """Postgres's helper for its isolation tester: whether ``pid`` waits for a lock that one
    of ``interesting`` holds."""
    return not set(_blocking_pids(ctx, pid)).isdisjoint(interesting)


_INT4_ARRAY = T.INT4.array_of()
# Typed parameters: the isolation tester sends ``$1`` and ``'{...}'`` untyped.
define(
    "pg_blocking_pids",
    _blocking_pids,
    _INT4_ARRAY,
    1,
    context=True,
    volatile=True,
    params=(T.INT4,),
)
define(
    "pg_isolation_test_session_is_blocked",
    _session_is_blocked,
    T.BOOL,
    2,
    context=True,
    volatile=True,
    params=(T.INT4, _INT4_ARRAY),
)
define(
    "pg_safe_snapshot_blocking_pids",
    lambda _pid: [],
    _INT4_ARRAY,
    1,
    volatile=True,
    params=(T.INT4,),
)
define(
    "pg_cancel_backend",
    lambda ctx, pid: _signal(ctx, pid, False),
    T.BOOL,
    1,
    context=True,
    strict=True,
    volatile=True,
)
define(
    "pg_terminate_backend",
    lambda ctx, pid, _timeout=0: _signal(ctx, pid, True),
    T.BOOL,
    (1, 2),
    context=True,
    strict=True,
    volatile=True,
)
