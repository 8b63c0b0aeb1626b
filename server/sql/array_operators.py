"""Array operators and subscripts, bound as Postgres resolves them.

``||`` (array_cat / array_append / array_prepend over ``anycompatible`` types), ``@>``, ``<@``
and ``&&`` (``anyarray`` on both sides), subscripts and slices (``a[i]``, ``a[i][j]``,
``a[lo:hi]``, ``a[:hi]``, ``a[lo:]``, ``a[:]``) and the multi-dimensional ARRAY constructor
(``ARRAY[ARRAY[1,2], ARRAY[3,4]]``). The value helpers live in ``array_functions``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from percolator.server.sql import array_functions as A
from percolator.server.sql import casts
from percolator.server.sql import types as T
from percolator.server.sql.bound import BCall, BExpr
from percolator.server.sql.errors import AMBIGUOUS_FUNCTION, DATATYPE_MISMATCH, SqlError
from percolator.server.sql.operators import operator_missing
from percolator.server.sql.types import TypeId

if TYPE_CHECKING:
    from percolator.server.sql.expr_binder import ExprBinder


def bind_concat(b: ExprBinder, left: BExpr, right: BExpr) -> BExpr:
    """``array || array``, ``array || element``, ``element || array`` (one side an array).

    An untyped literal beside an array is an array, as Postgres resolves ``array ||
    unknown``; the sides are brought to the common element type (``int[] || numeric`` is
    numeric[]), and 42883 when there is none."""
    lt, rt = left.type, right.type
    if (lt.array and (rt.array or A.is_unknown(rt))) or (A.is_unknown(lt) and rt.array):
        common = A.compatible([lt, rt], ())
        fn: Any = A.array_cat
        shape = (True, True)
    elif lt.array:
        common = A.compatible([lt], [rt])
        fn, shape = A.array_append, (True, False)
    else:
        common = A.compatible([rt], [lt])
        fn, shape = A.array_prepend, (False, True)
    if common is None:
        raise operator_missing("||", lt, rt)
    args = [
        b.coerce(e, A.cast_target(e.type, common, array=is_array))
        for e, is_array in zip((left, right), shape, strict=True)
    ]
    return BCall(common.array_of(), "||", fn, args, strict=False)


def bind_set_operator(b: ExprBinder, op: str, left: BExpr, right: BExpr) -> BExpr:
    """``@>``, ``<@`` and ``&&`` on arrays of the same element type (an untyped side takes
    the other's type); NULL elements equal nothing."""
    lt, rt = left.type, right.type
    if A.is_unknown(lt) and A.is_unknown(rt):
        raise SqlError(
            AMBIGUOUS_FUNCTION,
            f"operator is not unique: unknown {op} unknown",
            hint="Could not choose a best candidate operator. "
            "You might need to add explicit type casts.",
        )
    pair = A.same_arrays([lt, rt])
    if pair is None:
        raise operator_missing(op, lt, rt)
    key = A.equality_key(pair[0].element)
    # Only an untyped side is converted: a modifier of the other is no reason to cast.
    left, right = b.coerce(left, pair[0]), b.coerce(right, pair[1])
    if op == "@>":
        return BCall(T.BOOL, op, lambda x, y: A.contains(x, y, key), [left, right])
    if op == "<@":
        return BCall(T.BOOL, op, lambda x, y: A.contains(y, x, key), [left, right])
    return BCall(T.BOOL, op, lambda x, y: A.overlaps(x, y, key), [left, right])


Subscript = tuple[BExpr | None, BExpr | None, bool]
"""One subscript: (lower bound, upper bound, whether it is a slice). A plain ``[i]`` is
(None, i, False); an omitted slice bound is None."""


def _subscript_value(b: ExprBinder, e: BExpr) -> BExpr:
    """A subscript as an integer: Postgres casts it to integer as an assignment would
    (``a[1.6]`` is ``a[2]``), else 42804."""
    t = e.type
    if not A.is_unknown(t) and (t.array or not casts.can_assign(t, T.INT4)):
        raise SqlError(DATATYPE_MISMATCH, "array subscript must have type integer")
    return b.coerce(e, T.INT4, assignment=True)


def bind_subscript(b: ExprBinder, arr: BExpr, subscripts: list[Subscript]) -> BExpr:
    """``arr[...][...]``: an element when no subscript is a slice, else a slice (where a plain
    ``[i]`` means ``[1:i]``), as Postgres's array_get_element / array_get_slice: NULL for a
    NULL subscript, an element out of range or the wrong number of subscripts; a slice is
    clipped to the array and empty when nothing is left."""
    t = arr.type
    if t.id is TypeId.JSONB and not t.array:
        from percolator.server.sql import json_operators

        return json_operators.bind_subscript(b, arr, subscripts)
    vector = t.id in (TypeId.INT2VECTOR, TypeId.OIDVECTOR) and not t.array
    if not (t.array or vector):
        raise SqlError(
            DATATYPE_MISMATCH,
            f"cannot subscript type {t} because it does not support subscripting",
        )
    A.check_ndims(len(subscripts))
    if vector:
        return _vector_subscript(b, arr, subscripts)
    args = [arr]
    # Where each bound is among the call's arguments (None: omitted).
    layout: list[tuple[int | None, int | None]] = []
    for lower, upper, _ in subscripts:
        positions: list[int | None] = []
        for bound in (lower, upper):
            if bound is None:
                positions.append(None)
            else:
                args.append(_subscript_value(b, bound))
                positions.append(len(args) - 1)
        layout.append((positions[0], positions[1]))
    if not any(is_slice for _, _, is_slice in subscripts):
        return BCall(t.element, "subscript", _element, args)

    def slice_(a: list[Any], *values: int) -> list[Any]:
        got = (a, *values)
        d = A.dims(a)
        if len(d) < len(layout):
            return []
        ranges = []
        for n, (lo, hi) in zip(d, layout, strict=False):
            first = 1 if lo is None else max(got[lo], 1)
            last = n if hi is None else min(got[hi], n)
            if first > last:
                return []
            ranges.append((first - 1, last))
        return _cut(a, ranges)

    return BCall(t, "slice", slice_, args)


def _element(a: list[Any], *indexes: int) -> object:
    v: Any = a
    for i in indexes:
        if not isinstance(v, list) or not 1 <= i <= len(v):
            return None
        v = v[i - 1]
    return None if isinstance(v, list) else v  # fewer subscripts than dimensions


def _cut(a: list[Any], ranges: list[tuple[int, int]]) -> list[Any]:
    start, stop = ranges[0]
    part = a[start:stop]
    return [_cut(sub, ranges[1:]) for sub in part] if len(ranges) > 1 else part


def _vector_subscript(b: ExprBinder, arr: BExpr, subscripts: list[Subscript]) -> BExpr:
    """int2vector[i] / oidvector[i], counted from 0 (one plain subscript only)."""
    if len(subscripts) != 1 or subscripts[0][2]:
        from percolator.server.sql.errors import unsupported

        raise unsupported(f"slices and multiple subscripts of {arr.type}")
    index = _subscript_value(b, subscripts[0][1])  # type: ignore[arg-type]
    elem = T.INT2 if arr.type.id is TypeId.INT2VECTOR else T.OID

    def subscript(values: list[object], i: int) -> object:
        return values[i] if 0 <= i < len(values) else None

    return BCall(elem, "subscript", subscript, [arr, index])


def nest(*subs: list[Any] | None) -> list[Any]:
    """ARRAY[sub-array, ...]: one more dimension over sub-arrays of equal dimensions; NULL
    sub-arrays count as empty, and only all of them may be empty (giving ``{}``)."""
    present = [s for s in subs if s]
    if not present:
        return []
    shape = A.dims(present[0])
    if len(present) != len(subs) or any(A.dims(s) != shape for s in present[1:]):
        raise SqlError(
            A.ARRAY_SUBSCRIPT_ERROR,
            "multidimensional arrays must have array expressions with matching dimensions",
        )
    A.check_ndims(len(shape) + 1)
    return list(subs)
