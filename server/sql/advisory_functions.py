"""pg_advisory_lock and friends: the SQL functions over the session's advisory locks
(server/advisory_locks.py). Taking a lock may wait, so they bind to :class:`BAsyncCall` like
nextval (see sequence_functions.py): allowed in a select list and VALUES."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from percolator.server.sql import types as T
from percolator.server.sql.bound import BExpr
from percolator.server.sql.errors import UNDEFINED_FUNCTION, SqlError

if TYPE_CHECKING:
    from percolator.server.sql.expr_binder import ExprBinder

_LOCKS = {
    # name: (shared, wait, transaction-level)
    "pg_advisory_lock": (False, True, False),
    "pg_advisory_lock_shared": (True, True, False),
    "pg_try_advisory_lock": (False, False, False),
    "pg_try_advisory_lock_shared": (True, False, False),
    "pg_advisory_xact_lock": (False, True, True),
    "pg_advisory_xact_lock_shared": (True, True, True),
    "pg_try_advisory_xact_lock": (False, False, True),
    "pg_try_advisory_xact_lock_shared": (True, False, True),
}
_UNLOCKS = {"pg_advisory_unlock": False, "pg_advisory_unlock_shared": True}

NAMES = frozenset({*_LOCKS, *_UNLOCKS, "pg_advisory_unlock_all"})


def bind(exprs: ExprBinder, name: str, args: list[BExpr]) -> BExpr:
    """The call ``name(args)`` of one of :data:`NAMES`."""
    if name == "pg_advisory_unlock_all":
        if args:
            _no_such(name, args)
        return exprs.async_call(name, T.VOID, _unlock_all, [])
    if len(args) == 1:
        args = [exprs.coerce(args[0], T.INT8)]
    elif len(args) == 2:
        args = [exprs.coerce(a, T.INT4) for a in args]
    else:
        _no_such(name, args)
    if name in _UNLOCKS:
        shared = _UNLOCKS[name]

        async def unlock(ctx: Any, *key: int) -> bool | None:
            if None in key:
                return None
            return await ctx.advisory.unlock(tuple(key), shared=shared)

        return exprs.async_call(name, T.BOOL, unlock, args)
    shared, wait, xact = _LOCKS[name]

    async def lock(ctx: Any, *key: int) -> object:
        if None in key:
            return None
        taken = await ctx.advisory.lock(tuple(key), shared=shared, wait=wait, xact=xact)
        return "" if wait else taken  # void prints as an empty string

    return exprs.async_call(name, T.VOID if wait else T.BOOL, lock, args)


async def _unlock_all(ctx: Any) -> str:
    await ctx.advisory.unlock_all()
    return ""


def _no_such(name: str, args: list[BExpr]) -> None:
    shown = ", ".join(str(a.type) for a in args)
    raise SqlError(UNDEFINED_FUNCTION, f"function {name}({shown}) does not exist")
