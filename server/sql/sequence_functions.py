"""nextval, currval, setval and lastval.

nextval and setval need a round trip, which an expression (a Python closure evaluated
synchronously) cannot make: they bind to :class:`BAsyncCall`, which the operator evaluating the
expression awaits for each row before evaluating it, as it does subqueries. So they are
allowed where such an operator evaluates them: a select list, VALUES and UPDATE's SET (a
column DEFAULT ``nextval('s')`` is drawn by INSERT itself); elsewhere 0A000.

The operator awaits a row's calls in order, left to right, before it evaluates the row's
expressions; so where nextval may be, currval and lastval are awaited calls too, in that same
order: ``SELECT currval('s'), nextval('s')`` sees the value before the draw, as in Postgres. An
error they raise is kept until the expression reads their value (a CASE branch not taken
never does). Elsewhere they are plain calls on the session.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from percolator.server.sql import schemas
from percolator.server.sql import types as T
from percolator.server.sql.bound import BContextCall, BExpr
from percolator.server.sql.catalog import Catalog, SequenceDef
from percolator.server.sql.errors import UNDEFINED_FUNCTION, UNDEFINED_TABLE, SqlError

if TYPE_CHECKING:
    from percolator.server.sql.expr_binder import ExprBinder

NAMES = frozenset({"nextval", "currval", "setval", "lastval"})

_ARITY = {"nextval": (1,), "currval": (1,), "lastval": (0,), "setval": (2, 3)}


def bind(exprs: ExprBinder, name: str, args: list[BExpr]) -> BExpr:
    """The call ``name(args)`` of one of :data:`NAMES`."""
    if len(args) not in _ARITY[name]:
        shown = ", ".join(str(a.type) for a in args)
        raise SqlError(UNDEFINED_FUNCTION, f"function {name}({shown}) does not exist")
    if args and args[0].type.id is T.TypeId.UNKNOWN:
        args = [exprs.coerce(args[0], T.TEXT), *args[1:]]
    if name == "setval":
        args[1] = exprs.coerce(args[1], T.INT8)
        if len(args) == 3:
            args[2] = exprs.coerce(args[2], T.BOOL)
    if name in ("currval", "lastval"):
        return _reader(exprs, name, args)
    fn = _nextval if name == "nextval" else _setval
    return exprs.async_call(name, T.INT8, fn, args)


def next_value(exprs: ExprBinder, seq: SequenceDef) -> BExpr:
    """``nextval`` of ``seq`` itself (a serial or identity column's ``DEFAULT`` in UPDATE's
    SET), an awaited call as ``nextval('name')`` is."""

    async def draw(ctx: Any) -> int:
        return await ctx.sequences.nextval(seq)  # type: ignore[no-any-return]

    return exprs.async_call("nextval", T.INT8, draw, [])


def _reader(exprs: ExprBinder, name: str, args: list[BExpr]) -> BExpr:
    """currval or lastval: awaited in order with nextval and setval where those may be."""
    if not exprs.async_calls_ok:
        sync = _currval if name == "currval" else _lastval
        return BContextCall(T.INT8, name, sync, args)
    fn = _currval_awaited if name == "currval" else _lastval_awaited
    awaited = exprs.async_call(name, T.INT8, _keeping_error(fn), args)
    return BContextCall(T.INT8, name, _outcome, [awaited])


@dataclass(frozen=True)
class _Failed:
    """An awaited currval/lastval that failed: raised when the value is read."""

    error: SqlError


def _keeping_error(fn: Callable[..., Awaitable[int | None]]) -> Callable[..., Awaitable[object]]:
    async def call(ctx: Any, *args: object) -> object:
        try:
            return await fn(ctx, *args)
        except SqlError as e:
            return _Failed(e)

    return call


def _outcome(ctx: Any, value: object) -> object:
    if isinstance(value, _Failed):
        raise value.error
    return value


async def _currval_awaited(ctx: Any, ref: object) -> int | None:
    if ref is None:
        return None
    seq = await _sequence(ctx, ref)
    return ctx.sequences.currval(seq, seq.name)


async def _lastval_awaited(ctx: Any) -> int:
    return await ctx.sequences.lastval_anywhere(ctx.catalog)


def _lastval(ctx: Any) -> int:
    return ctx.sequences.lastval(ctx.catalog)


async def _nextval(ctx: Any, ref: object) -> int | None:
    if ref is None:
        return None
    return await ctx.sequences.nextval(await _sequence(ctx, ref))


async def _setval(ctx: Any, ref: object, value: object, is_called: object = True) -> int | None:
    if ref is None or value is None or is_called is None:
        return None
    seq = await _sequence(ctx, ref)
    return await ctx.sequences.setval(seq, int(value), bool(is_called))  # type: ignore[call-overload]


def _currval(ctx: Any, ref: object) -> int | None:
    if ref is None:
        return None
    name = sequence_name(ref, ctx.catalog)
    seq = ctx.catalog.sequences.get(name) if name is not None else None
    # A sequence another server created since our catalog's last poll: this session drew
    # from it already if currval is defined (nextval looked it up).
    return ctx.sequences.currval(seq, name or str(ref))


async def _sequence(ctx: Any, ref: object) -> SequenceDef:
    """The sequence a nextval() argument names, in the statement's catalog, else (created by
    another server since this one last polled) in the store's."""
    name = sequence_name(ref, ctx.catalog)
    seq = ctx.catalog.sequences.get(name) if name is not None else None
    if seq is None and name is not None:
        seq = await ctx.sequences.find(name)
    if seq is None:
        raise SqlError(UNDEFINED_TABLE, f'relation "{str(ref).strip()}" does not exist')
    return seq


def sequence_name(ref: object, catalog: Catalog | None = None) -> str | None:
    """The catalog key a nextval() argument names: 'name', 'public.name', '"Name"',
    's.name' (as regclass reads them); an unqualified name through the search path when the
    catalog is given (else public)."""
    text = str(ref).strip()
    if catalog is not None:
        return schemas.resolve_text(catalog, text)
    parts = schemas.split_text(text)
    if len(parts) == 1:
        return parts[0]
    return schemas.key(parts[-2], parts[-1])
