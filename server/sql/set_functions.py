"""Set-returning functions (in FROM and in select lists): generate_series, unnest,
generate_subscripts, information_schema._pg_expandarray, pg_partition_ancestors (the json and
regex ones live with their families); and the record types of functions that return
composite rows."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from percolator.server.sql import types as T
from percolator.server.sql.bound import BCall, BExpr
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


def _flatten(arr: list[object]) -> Iterator[object]:
    for v in arr:
        if isinstance(v, list):
            yield from _flatten(v)
        else:
            yield v


def _unnest(arr: list[object]) -> Iterator[tuple[object, ...]]:
    # A multi-dimensional array (nested lists) unnests in storage order, as in Postgres.
    for v in _flatten(arr):
        yield (v,)


def _unnest_zip(*arrays: list[object]) -> Iterator[tuple[object, ...]]:
    """unnest(a, b, ...) in FROM: the arrays side by side, the shorter ones padded with NULLs
    (Postgres's ROWS FROM (unnest(a), unnest(b), ...))."""
    columns = [list(_flatten(arr)) for arr in arrays]
    for i in range(max(map(len, columns), default=0)):
        yield tuple(col[i] if i < len(col) else None for col in columns)


def _empty_if_null(arr: list[object] | None) -> list[object]:
    return [] if arr is None else arr


def _unnest_several(args: list[BExpr], binder: Any) -> SetFunctionImpl | None:
    """unnest of several arrays; a NULL array gives no values (a column of NULLs), so its
    argument is made non-strict: the function scan skips calls with a NULL argument."""
    arrays: list[BExpr] = []
    elements: list[SqlType] = []
    for arg in args:
        found = _array_arg(arg, binder)
        if found is None:
            return None
        a, elem, _ = found
        arrays.append(BCall(a.type, "unnest_argument", _empty_if_null, [a], strict=False))
        elements.append(elem)
    return SetFunctionImpl(_unnest_zip, elements, arrays, ["unnest"] * len(arrays))


def _subscripts(base: int) -> Callable[..., Iterator[tuple[object, ...]]]:
    """generate_subscripts(arr, dim [, reverse]) for arrays whose subscripts start at ``base``
    (1 for arrays, 0 for int2vector and oidvector)."""

    def generate(
        arr: list[object], dim: int, reverse: bool = False
    ) -> Iterator[tuple[object, ...]]:
        level: object = arr
        for _ in range(dim - 1):
            if not isinstance(level, list) or not level:
                return
            level = level[0]
        if dim < 1 or not isinstance(level, list) or (dim > 1 and base == 0):
            return
        subscripts = range(base, base + len(level))
        for i in reversed(subscripts) if reverse else subscripts:
            yield (i,)

    return generate


def _expandarray(arr: list[object]) -> Iterator[tuple[object, ...]]:
    """information_schema._pg_expandarray: (element, 1-based position) rows."""
    for n, v in enumerate(arr, 1):
        yield (v, n)


def _no_rows(*_args: object) -> Iterator[tuple[object, ...]]:
    """pg_partition_ancestors: no table here is part of a partition tree."""
    return iter(())


@dataclass(frozen=True)
class SetFunctionImpl:
    """A resolved set-returning function: what to call, on which (coerced) arguments."""

    fn: SetFunction
    types: list[SqlType]
    args: list[BExpr]
    names: list[str] | None = None
    """Column names of a function returning a composite row (None: one column)."""
    column: str | None = None
    """The name of a one-column function's column in FROM when it is an OUT parameter's
    (None: the table alias or the function name)."""


_VECTOR_ELEMENTS = {TypeId.INT2VECTOR: T.INT2, TypeId.OIDVECTOR: T.OID}


def _array_arg(a: BExpr, binder: Any) -> tuple[BExpr, SqlType, int] | None:
    """(argument, element type, first subscript) of an array-like argument, or None."""
    if a.type.id is TypeId.UNKNOWN:
        a = binder.coerce(a, T.TEXT_ARRAY)
    if a.type.id in _VECTOR_ELEMENTS and not a.type.array:
        return a, _VECTOR_ELEMENTS[a.type.id], 0
    if not a.type.array:
        return None
    return a, a.type.element, 1


def resolve_set_function(name: str, args: list[BExpr], binder: Any) -> SetFunctionImpl | None:
    """The set-returning function ``name`` for these arguments, or None if unknown."""
    if name == "generate_series" and len(args) in (2, 3):
        return _generate_series(args, binder)
    if name == "unnest" and len(args) == 1:
        found = _array_arg(args[0], binder)
        if found is None:
            return None
        a, elem, _ = found
        return SetFunctionImpl(_unnest, [elem], [a])
    if name == "unnest" and len(args) > 1:
        return _unnest_several(args, binder)
    if name == "generate_subscripts" and len(args) in (2, 3):
        found = _array_arg(args[0], binder)
        if found is None:
            return None
        a, _, base = found
        rest = [binder.coerce(args[1], T.INT4)]
        if len(args) == 3:
            rest.append(binder.coerce(args[2], T.BOOL))
        return SetFunctionImpl(_subscripts(base), [T.INT4], [a, *rest])
    if name == "_pg_expandarray" and len(args) == 1:
        found = _array_arg(args[0], binder)
        if found is None:
            return None
        a, elem, _ = found
        return SetFunctionImpl(_expandarray, [elem, T.INT4], [a], ["x", "n"])
    if name == "pg_partition_ancestors" and len(args) == 1:
        arg = binder.coerce(args[0], T.REGCLASS)
        return SetFunctionImpl(_no_rows, [T.REGCLASS], [arg], column="relid")
    from percolator.server.sql import json_functions, regex_functions

    if name in regex_functions.SET_FUNCTION_NAMES:
        return regex_functions.resolve_set_function(name, args, binder)  # type: ignore[no-any-return]
    return json_functions.resolve_set_function(name, args, binder)  # type: ignore[no-any-return]


def _generate_series(args: list[BExpr], binder: Any) -> SetFunctionImpl | None:
    types = [a.type for a in args[:2]]
    if any(t.id in (TypeId.TIMESTAMP, TypeId.TIMESTAMPTZ, TypeId.DATE) for t in types):
        target = T.TIMESTAMPTZ if any(t.id is TypeId.TIMESTAMPTZ for t in types) else T.TIMESTAMP
        bound = [binder.coerce(a, target) for a in args[:2]]
        if len(args) != 3:
            return None
        bound.append(binder.coerce(args[2], T.INTERVAL))
        return SetFunctionImpl(_time_series, [target], bound)
    t = binder.common_type(args, "generate_series")
    if t.id is TypeId.INT2:
        t = T.INT4
    if t.id not in (TypeId.INT4, TypeId.INT8, TypeId.NUMERIC):
        t = T.NUMERIC if t.id in (TypeId.FLOAT4, TypeId.FLOAT8) else T.INT4
    bound = [binder.coerce(a, t) for a in args]
    if t.id is TypeId.NUMERIC:
        bound = [binder.coerce(a, T.NUMERIC) for a in args]
        return SetFunctionImpl(lambda a, b, s=Decimal(1): _series(a, b, s), [t], bound)
    return SetFunctionImpl(_series, [t], bound)


# -- record types ---------------------------------------------------------------------------

_RECORDS: list[tuple[tuple[str, SqlType], ...]] = []
_RECORD_IDS: dict[tuple[tuple[str, SqlType], ...], int] = {}


def record_type(names: list[str], types: list[SqlType]) -> SqlType:
    """The type of a composite value with these fields: ``record`` with a type modifier that
    identifies the fields (as Postgres "blesses" anonymous record types). Values are tuples."""
    fields = tuple(zip(names, types, strict=True))
    typmod = _RECORD_IDS.get(fields)
    if typmod is None:
        typmod = _RECORD_IDS[fields] = len(_RECORDS)
        _RECORDS.append(fields)
    return SqlType(TypeId.RECORD, typmod)


def record_fields(t: SqlType) -> tuple[tuple[str, SqlType], ...] | None:
    """The (name, type) fields of a record type from :func:`record_type`; None if unknown."""
    if t.id is not TypeId.RECORD or t.array or not 0 <= t.typmod < len(_RECORDS):
        return None
    return _RECORDS[t.typmod]
