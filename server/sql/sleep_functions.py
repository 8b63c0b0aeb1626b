"""pg_sleep, pg_sleep_for and pg_sleep_until: a statement that waits. They bind to
:class:`BAsyncCall` like nextval (see sequence_functions.py), so the wait is an await on the
event loop: other sessions run meanwhile, and a cancel request or statement_timeout ends it
(57014) as it ends any statement."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import TYPE_CHECKING, Any

from percolator.server.sql import types as T
from percolator.server.sql.bound import BExpr
from percolator.server.sql.errors import UNDEFINED_FUNCTION, SqlError

if TYPE_CHECKING:
    from percolator.server.sql.expr_binder import ExprBinder

NAMES = frozenset({"pg_sleep", "pg_sleep_for", "pg_sleep_until"})

_ARG_TYPES = {
    "pg_sleep": T.FLOAT8,
    "pg_sleep_for": T.INTERVAL,
    "pg_sleep_until": T.TIMESTAMPTZ,
}


def bind(exprs: ExprBinder, name: str, args: list[BExpr]) -> BExpr:
    """The call ``name(args)`` of one of :data:`NAMES`."""
    if len(args) != 1:
        shown = ", ".join(str(a.type) for a in args)
        raise SqlError(UNDEFINED_FUNCTION, f"function {name}({shown}) does not exist")
    arg = exprs.coerce(args[0], _ARG_TYPES[name])
    return exprs.async_call(name, T.VOID, _SLEEPS[name], [arg])


async def _sleep(_ctx: Any, seconds: float | None) -> str | None:
    if seconds is None:
        return None  # strict, as in Postgres
    if seconds > 0:
        await asyncio.sleep(seconds)
    return ""  # void prints as an empty string


async def _sleep_for(ctx: Any, interval: T.Interval | None) -> str | None:
    if interval is None:
        return None
    return await _sleep(ctx, interval.sort_key() / 1_000_000)


async def _sleep_until(ctx: Any, until: dt.datetime | None) -> str | None:
    if until is None:
        return None
    if until.tzinfo is None:  # timestamptz values are kept in UTC
        until = until.replace(tzinfo=dt.UTC)
    return await _sleep(ctx, (until - dt.datetime.now(dt.UTC)).total_seconds())


_SLEEPS = {"pg_sleep": _sleep, "pg_sleep_for": _sleep_for, "pg_sleep_until": _sleep_until}
