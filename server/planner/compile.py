"""Expressions compiled once into Python closures ``f(row, ctx) -> value``.

Each bound node becomes one closure over its children's closures, so evaluating an expression
is a few Python calls with no tree walking or type dispatch per row. Subquery values are read
from ``ctx.subquery_values`` (the operator computes them before evaluating; see
:mod:`percolator.server.planner.subqueries`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from percolator.server.sql.bound import (
    BAsyncCall,
    BBool,
    BCall,
    BCase,
    BCoalesce,
    BColumn,
    BConst,
    BContextCall,
    BExpr,
    BInList,
    BIsBool,
    BIsNull,
    BNot,
    BOuter,
    BParam,
    BSubquery,
    SubqueryKind,
)
from percolator.server.sql.errors import unsupported
from percolator.server.sql.types import TypeId

Compiled = Callable[[Any, Any], object]


def compile_expr(e: BExpr) -> Compiled:
    """The closure that evaluates ``e`` for a row in a context."""
    builder = _BUILDERS.get(type(e))
    if builder is None:
        raise unsupported(f"expression node {type(e).__name__}")
    return builder(e)


def compile_predicate(e: BExpr) -> Callable[[Any, Any], bool]:
    """A closure that is True only when ``e`` is true (NULL counts as false)."""
    f = compile_expr(e)
    return lambda row, ctx: f(row, ctx) is True


def _column(e: BColumn) -> Compiled:
    i = e.index
    return lambda row, ctx: row[i]


def _outer(e: BOuter) -> Compiled:
    level, i = e.level, e.index
    return lambda row, ctx: ctx.outer_rows[-level][i]


def _const(e: BConst) -> Compiled:
    v = e.value
    return lambda row, ctx: v


def _param(e: BParam) -> Compiled:
    i = e.index
    return lambda row, ctx: ctx.params[i]


def _call(e: BCall) -> Compiled:
    fn = e.fn
    args = [compile_expr(a) for a in e.args]
    if not e.strict:
        return lambda row, ctx: fn(*[a(row, ctx) for a in args])
    if len(args) == 1:
        (a0,) = args

        def call1(row: Any, ctx: Any) -> object:
            v = a0(row, ctx)
            return None if v is None else fn(v)

        return call1
    if len(args) == 2:
        a0, a1 = args

        def call2(row: Any, ctx: Any) -> object:
            x = a0(row, ctx)
            if x is None:
                return None
            y = a1(row, ctx)
            return None if y is None else fn(x, y)

        return call2

    def call(row: Any, ctx: Any) -> object:
        values = [a(row, ctx) for a in args]
        if None in values:
            return None
        return fn(*values)

    return call


def _context_call(e: BContextCall) -> Compiled:
    fn = e.fn
    args = [compile_expr(a) for a in e.args]
    return lambda row, ctx: fn(ctx, *[a(row, ctx) for a in args])


def _bool(e: BBool) -> Compiled:
    args = [compile_expr(a) for a in e.args]
    if e.is_and:

        def and_(row: Any, ctx: Any) -> object:
            result: object = True
            for a in args:
                v = a(row, ctx)
                if v is False:
                    return False
                if v is None:
                    result = None
            return result

        return and_

    def or_(row: Any, ctx: Any) -> object:
        result: object = False
        for a in args:
            v = a(row, ctx)
            if v is True:
                return True
            if v is None:
                result = None
        return result

    return or_


def _not(e: BNot) -> Compiled:
    a = compile_expr(e.arg)

    def not_(row: Any, ctx: Any) -> object:
        v = a(row, ctx)
        return None if v is None else not v

    return not_


def _is_null(e: BIsNull) -> Compiled:
    a = compile_expr(e.arg)
    if e.negate:
        return lambda row, ctx: a(row, ctx) is not None
    return lambda row, ctx: a(row, ctx) is None


def _is_bool(e: BIsBool) -> Compiled:
    a = compile_expr(e.arg)
    want, negate = e.value, e.negate
    return lambda row, ctx: (a(row, ctx) is want) != negate


def _case(e: BCase) -> Compiled:
    whens = [(compile_expr(c), compile_expr(r)) for c, r in e.whens]
    default = compile_expr(e.default) if e.default is not None else None

    def case(row: Any, ctx: Any) -> object:
        for cond, result in whens:
            if cond(row, ctx) is True:
                return result(row, ctx)
        return default(row, ctx) if default is not None else None

    return case


def _coalesce(e: BCoalesce) -> Compiled:
    args = [compile_expr(a) for a in e.args]

    def coalesce(row: Any, ctx: Any) -> object:
        for a in args:
            v = a(row, ctx)
            if v is not None:
                return v
        return None

    return coalesce


def _in_list(e: BInList) -> Compiled:
    arg = compile_expr(e.arg)
    items = [compile_expr(i) for i in e.items]
    eq = e.eq
    negate = e.negate
    constant = all(isinstance(i, BConst) for i in e.items)
    if constant and eq.__name__ == "eq":
        values = [i.value for i in e.items]  # type: ignore[attr-defined]
        has_null = any(v is None for v in values)
        try:
            lookup: set[object] | None = {v for v in values if v is not None}
        except TypeError:
            lookup = None
        if lookup is not None:

            def in_set(row: Any, ctx: Any) -> object:
                v = arg(row, ctx)
                if v is None:
                    return None
                if v in lookup:
                    return not negate
                return None if has_null else negate

            return in_set

    def in_list(row: Any, ctx: Any) -> object:
        v = arg(row, ctx)
        if v is None:
            return None
        saw_null = False
        for item in items:
            w = item(row, ctx)
            if w is None:
                saw_null = True
            elif eq(v, w):
                return not negate
        return None if saw_null else negate

    return in_list


def _subquery(e: BSubquery) -> Compiled:
    slot = e.slot
    if e.kind is SubqueryKind.IN and e.arg is not None and e.arg.type.id is TypeId.RECORD:
        return _row_in_subquery(e)
    if e.kind is SubqueryKind.IN:
        arg = compile_expr(e.arg)  # type: ignore[arg-type]
        negate = e.negate

        def in_subquery(row: Any, ctx: Any) -> object:
            values, has_null = ctx.subquery_values[slot]
            v = arg(row, ctx)
            if v is None:
                return None if (values or has_null) else negate
            if v in values:
                return not negate
            return None if has_null else negate

        return in_subquery
    return lambda row, ctx: ctx.subquery_values[slot]


def _row_in_subquery(e: BSubquery) -> Compiled:
    """``(a, b) IN (SELECT ...)`` over records: true when a row is equal field by field;
    else NULL when a row could be equal but for NULL fields (on either side); else false."""
    slot = e.slot
    arg = compile_expr(e.arg)  # type: ignore[arg-type]
    negate = e.negate

    def in_rows(row: Any, ctx: Any) -> object:
        values, has_null = ctx.subquery_values[slot]
        v = arg(row, ctx)
        complete = None not in v
        if complete and v in values:
            return not negate
        if complete and not has_null:
            return negate
        for w in values:
            if (complete and None not in w) or not _may_equal(v, w):
                continue
            return None
        return negate

    return in_rows


def _may_equal(a: tuple[object, ...], b: tuple[object, ...]) -> bool:
    return all(x is None or y is None or x == y for x, y in zip(a, b, strict=True))


def _async_call(e: BAsyncCall) -> Compiled:
    slot = e.slot
    return lambda row, ctx: ctx.subquery_values[slot]


_BUILDERS: dict[type, Callable[[Any], Compiled]] = {
    BAsyncCall: _async_call,
    BColumn: _column,
    BOuter: _outer,
    BConst: _const,
    BParam: _param,
    BCall: _call,
    BContextCall: _context_call,
    BBool: _bool,
    BNot: _not,
    BIsNull: _is_null,
    BIsBool: _is_bool,
    BCase: _case,
    BCoalesce: _coalesce,
    BInList: _in_list,
    BSubquery: _subquery,
}
