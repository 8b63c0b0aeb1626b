"""Set-returning functions usable in FROM: generate_series and unnest."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

from percolator.server.sql import types as T
from percolator.server.sql.bound import BExpr
from percolator.server.sql.errors import INVALID_PARAMETER_VALUE, SqlError
from percolator.server.sql.operators import add_interval
from percolator.server.sql.types import Interval, SqlType, TypeId

SetFunction = Callable[..., Iterator[tuple[object, ...]]]


def _series(start: Any, stop: Any, step: Any = 1) -> Iterator[tuple[object, ...]]:
    if step == 0:
        raise SqlError(INVALID_PARAMETER_VALUE, "step size cannot equal zero")
    v = start
    while (step > 0 and v <= stop) or (step < 0 and v >= stop):
        yield (v,)
        v = v + step


def _time_series(
    start: dt.datetime, stop: dt.datetime, step: Interval
) -> Iterator[tuple[object, ...]]:
    if step.sort_key() == 0:
        raise SqlError(INVALID_PARAMETER_VALUE, "step size cannot equal zero")
    forward = step.sort_key() > 0
    n = 0
    v = start
    while (forward and v <= stop) or (not forward and v >= stop):
        yield (v,)
        n += 1
        v = add_interval(start, Interval(step.months * n, step.days * n, step.microseconds * n), 1)


def _unnest(arr: list[object]) -> Iterator[tuple[object, ...]]:
    for v in arr:
        yield (v,)


def resolve_set_function(
    name: str, args: list[BExpr], binder: Any
) -> tuple[SetFunction, list[SqlType], list[BExpr]] | None:
    """(function, output column types, coerced arguments), or None if unknown."""
    if name == "generate_series" and len(args) in (2, 3):
        types = [a.type for a in args[:2]]
        if any(t.id in (TypeId.TIMESTAMP, TypeId.TIMESTAMPTZ, TypeId.DATE) for t in types):
            target = (
                T.TIMESTAMPTZ if any(t.id is TypeId.TIMESTAMPTZ for t in types) else T.TIMESTAMP
            )
            bound = [binder.coerce(a, target) for a in args[:2]]
            if len(args) != 3:
                return None
            bound.append(binder.coerce(args[2], T.INTERVAL))
            return _time_series, [target], bound
        t = binder.common_type(args, "generate_series")
        if t.id is TypeId.INT2:
            t = T.INT4
        if t.id not in (TypeId.INT4, TypeId.INT8, TypeId.NUMERIC):
            t = T.NUMERIC if t.id in (TypeId.FLOAT4, TypeId.FLOAT8) else T.INT4
        bound = [binder.coerce(a, t) for a in args]
        if t.id is TypeId.NUMERIC:
            bound = [binder.coerce(a, T.NUMERIC) for a in args]
            return (lambda a, b, s=Decimal(1): _series(a, b, s)), [t], bound
        return _series, [t], bound
    if name == "unnest" and len(args) == 1:
        a = args[0]
        if a.type.id is TypeId.UNKNOWN:
            a = binder.coerce(a, T.TEXT_ARRAY)
        if not a.type.array:
            return None
        return _unnest, [a.type.element], [a]
    return None
