"""Ordered-set aggregates: ``percentile_cont``, ``percentile_disc`` and ``mode``, written
``f(direct arguments) WITHIN GROUP (ORDER BY x)``, with Postgres's types and errors.

A call is bound in two parts: an aggregate that collects the group's non-NULL ``x`` values in
the requested order (an aggregate of the grouped row, named :data:`COLLECT`), and a final
function over the grouped row that takes the direct arguments and that sorted list. The direct
arguments are evaluated once per group, over the grouped row, so they may use only grouped
columns (42803 otherwise, as in Postgres), and the fraction is checked even for a group with
no rows, as percentile_cont_final does.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from percolator.server.sql import casts, operators
from percolator.server.sql import types as T
from percolator.server.sql.aggregates import Accumulator
from percolator.server.sql.bound import AggCall, BCall, BExpr, SortKey
from percolator.server.sql.errors import (
    FEATURE_NOT_SUPPORTED,
    GROUPING_ERROR,
    NUMERIC_VALUE_OUT_OF_RANGE,
    UNDEFINED_FUNCTION,
    SqlError,
    undetermined_polymorphic,
    unsupported,
)
from percolator.server.sql.types import Interval, SqlType, TypeId

if TYPE_CHECKING:
    from percolator.server.sql.expr_binder import AggregateContext, ExprBinder

COLLECT = "ordered_set_values"
"""The aggregate that gathers an ordered-set aggregate's sorted input (never user-visible)."""

NODES: dict[type[exp.Expression], str] = {
    exp.PercentileCont: "percentile_cont",
    exp.PercentileDisc: "percentile_disc",
    exp.Mode: "mode",
}


class SortedValues(Accumulator):
    """The non-NULL values of a group, in the order they are added (the aggregate's ORDER BY
    sorts them first); NULL for none."""

    __slots__ = ("items",)

    def __init__(self) -> None:
        self.items: list[Any] = []

    def add(self, *values: Any) -> None:
        if values[0] is not None:
            self.items.append(values[0])

    def result(self) -> object:
        return self.items or None


def over_not_supported(node: exp.WithinGroup) -> SqlError:
    """An ordered-set aggregate used as a window function (0A000, as in Postgres)."""
    name = NODES.get(type(node.this), "")
    return SqlError(
        FEATURE_NOT_SUPPORTED, f"OVER is not supported for ordered-set aggregate {name}"
    )


def bind(
    binder: ExprBinder,
    node: exp.WithinGroup,
    filter_node: exp.Expression | None,
    ctx: AggregateContext,
) -> BExpr:
    """``f(direct) WITHIN GROUP (ORDER BY x) [FILTER (WHERE c)]`` in a grouped SELECT: the
    collecting aggregate is added to ``ctx``; the result is the final function over it."""
    fn = node.this
    name = NODES.get(type(fn))
    if name is None:
        # Hypothetical-set aggregates (rank(x) WITHIN GROUP ...) and WITHIN GROUP on an
        # ordinary function.
        raise unsupported(f"WITHIN GROUP for {binder.column_name(fn)}")
    direct_nodes = [fn.this] if fn.this is not None else []
    order = node.expression
    keys: list[exp.Ordered] = list(order.expressions) if isinstance(order, exp.Order) else []
    sort_args = [binder.bind(k.this, ctx.scope) for k in keys]
    for d in direct_nodes:
        if binder.contains_aggregate(d):
            raise SqlError(GROUPING_ERROR, "aggregate function calls cannot be nested")

    def no_such_function(direct: list[BExpr]) -> SqlError:
        types = ", ".join(str(a.type) for a in (*direct, *sort_args))
        return SqlError(
            UNDEFINED_FUNCTION,
            f"function {name}({types}) does not exist",
            hint="No function matches the given name and argument types. "
            "You might need to add explicit type casts.",
        )

    if len(sort_args) != 1 or len(direct_nodes) != (0 if name == "mode" else 1):
        # No signature takes these (the direct arguments bound for their types only).
        raise no_such_function([binder.bind(d, ctx.scope) for d in direct_nodes])
    # Over the grouped row: once per group, from grouped columns only.
    direct = [binder.bind_in_aggregate(d, ctx) for d in direct_nodes]
    arg = sort_args[0]
    fraction: BExpr | None = None
    many = False
    if name != "mode":
        fraction, many = _fraction(binder, direct[0])
        if fraction is None:
            raise no_such_function(direct)
    if name == "percentile_cont":
        if arg.type.id is TypeId.INTERVAL and not arg.type.array:
            value_type = T.INTERVAL
        elif arg.type.id is TypeId.UNKNOWN or casts.can_implicitly_cast(arg.type, T.FLOAT8):
            value_type = T.FLOAT8
            arg = binder.coerce(arg, T.FLOAT8)
        elif arg.type == T.FLOAT8:
            value_type = T.FLOAT8
        else:
            raise no_such_function(direct)
    elif arg.type.id is TypeId.UNKNOWN:
        raise undetermined_polymorphic()
    else:
        # percentile_disc and mode take anyelement: the result is the input's type.
        value_type = SqlType(arg.type.id, -1, arg.type.array)

    key = keys[0]
    explicit_nulls = "NULLS" in key.sql(dialect="postgres").upper()
    sort = SortKey(
        arg,
        bool(key.args.get("desc")),
        bool(key.args.get("nulls_first")) if explicit_nulls else None,
    )
    filt = (
        binder.bind_condition(filter_node, ctx.scope, "FILTER") if filter_node is not None else None
    )
    # The collected list is an array of the input type only as far as the row's width goes:
    # it never leaves the grouped row.
    list_type = SqlType(arg.type.id, -1, True)
    values = ctx.add_aggregate(AggCall(COLLECT, [arg], False, list_type, filt, [sort]))
    if name == "mode":
        return BCall(value_type, name, _mode(operators.comparison("=", value_type)), [values])
    assert fraction is not None
    result_type = SqlType(value_type.id, value_type.typmod, many)
    if name == "percentile_cont":
        lerp = _interval_lerp if value_type.id is TypeId.INTERVAL else _float_lerp
        pick: Callable[[list[Any], float], object] = lambda v, p: _continuous(v, p, lerp)  # noqa: E731
    else:
        pick = _discrete
    final = _many(pick) if many else _one(pick)
    return BCall(result_type, name, final, [fraction, values], strict=False)


def _fraction(binder: ExprBinder, e: BExpr) -> tuple[BExpr | None, bool]:
    """The fraction argument as float8 or float8[] (and whether it is an array), or None when
    it cannot be one."""
    t = e.type
    if t.array:
        target = SqlType(TypeId.FLOAT8, -1, True)
        if t == target or casts.can_implicitly_cast(t, target):
            return binder.coerce(e, target), True
        return None, True
    if t.id is TypeId.UNKNOWN or t == T.FLOAT8 or casts.can_implicitly_cast(t, T.FLOAT8):
        return binder.coerce(e, T.FLOAT8), False
    return None, False


def _check(p: float) -> float:
    if not 0 <= p <= 1:  # NaN fails too
        # Postgres's own snprintf spells NaN and the infinities this way under %g.
        shown = "NaN" if math.isnan(p) else ("-" if p < 0 else "") + "Infinity"
        shown = f"{p:g}" if math.isfinite(p) else shown
        raise SqlError(
            NUMERIC_VALUE_OUT_OF_RANGE, f"percentile value {shown} is not between 0 and 1"
        )
    return p


def _one(pick: Callable[[list[Any], float], object]) -> Callable[[Any, Any], object]:
    """The final function of the single-fraction form: the fraction is checked before the
    group's emptiness (percentile_cont_final_common)."""

    def final(fraction: float | None, values: list[Any] | None) -> object:
        if fraction is None:
            return None
        p = _check(fraction)
        if not values:
            return None
        return pick(values, p)

    return final


def _many(pick: Callable[[list[Any], float], object]) -> Callable[[Any, Any], object]:
    """The final function of the array form: an empty group or a NULL array gives NULL; each
    NULL fraction gives a NULL element; the result has the fractions' shape."""

    def final(fractions: list[Any] | None, values: list[Any] | None) -> object:
        if not values or fractions is None:
            return None

        def each(f: Any) -> object:
            if isinstance(f, list):
                return [each(x) for x in f]
            return None if f is None else pick(values, _check(f))

        return each(fractions)

    return final


def _continuous(values: list[Any], p: float, lerp: Callable[[Any, Any, float], Any]) -> object:
    """percentile_cont: interpolated between the two values around position p * (n - 1)."""
    at = p * (len(values) - 1)
    first, second = math.floor(at), math.ceil(at)
    if first == second:
        return values[first]
    return lerp(values[first], values[second], at - first)


def _float_lerp(lo: float, hi: float, pct: float) -> float:
    return lo + (pct * (hi - lo))  # percentile_cont_float8_lerp, term for term


def _interval_lerp(lo: Interval, hi: Interval, pct: float) -> Interval:
    return operators.interval_mul(hi - lo, pct) + lo  # percentile_cont_interval_lerp


def _discrete(values: list[Any], p: float) -> object:
    """percentile_disc: the first value whose position (from 1) reaches p * n."""
    row = math.ceil(p * len(values))
    return values[max(row, 1) - 1]


def _mode(equal: Callable[[object, object], object]) -> Callable[[list[Any]], object]:
    """mode: the most frequent value; of equally frequent ones, the first in sort order (the
    first of its run, as mode_final keeps it)."""

    def final(values: list[Any]) -> object:
        best, best_count = values[0], 1
        run, run_count = values[0], 1
        for v in values[1:]:
            if equal(v, run) is True:
                run_count += 1
            else:
                run, run_count = v, 1
            if run_count > best_count:
                best, best_count = run, run_count
        return best

    return final
