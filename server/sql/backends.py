"""The sessions of this server as SQL sees them: pg_stat_activity lists them (what each runs,
whether it waits for a row lock), pg_cancel_backend cancels one's statement and
pg_terminate_backend ends its connection, as an administrator does with a session that holds
locks others wait for.

Only the sessions of the server process the statement runs in are seen: another server of the
deployment keeps its own.
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
    waiting_for_row_lock: bool
    query: str


class Backends(Protocol):
    """The server's sessions (``ExecContext.backends``)."""

    def activity(self) -> list[BackendActivity]:
        """Every session of this server process."""

    def signal(self, pid: int, *, terminate: bool) -> bool:
        """Cancel the statement of the session with ``pid`` or, with ``terminate``, end its
        connection (its transaction rolls back); False if there is no such session."""


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
