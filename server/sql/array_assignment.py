"""Assignment to array elements and slices: ``UPDATE t SET a[2] = x, a[4:5] = '{7,8}'``.

The new value is the column's current array with the element (or slice) replaced, as
Postgres's array_set / array_set_slice make it on a one-dimensional array: a subscript past
the end extends the array, with NULLs in any gap; a NULL array is an empty one; a slice takes
as many elements of the source as it spans (2202E when the source has fewer). Our arrays
always start at subscript 1, so an assignment that would give an array another lower bound
(a subscript below 1, or a first element assigned past 1) is 0A000, as are multi-dimensional
targets.
"""

from __future__ import annotations

from typing import Any

from percolator.server.sql.errors import SqlError, unsupported

ARRAY_SUBSCRIPT_ERROR = "2202E"
NULL_VALUE_NOT_ALLOWED = "22004"


def set_element(a: list[Any] | None, index: int | None, value: object) -> list[Any]:
    """``a[index] = value``."""
    if index is None:
        raise SqlError(NULL_VALUE_NOT_ALLOWED, "array subscript in assignment must not be null")
    out = _one_dimensional(a)
    _check_bounds(out, index)
    if index > len(out):
        out.extend([None] * (index - len(out)))
    out[index - 1] = value
    return out


def set_slice(
    a: list[Any] | None, lower: int | None, upper: int | None, source: list[Any] | None
) -> list[Any] | None:
    """``a[lower:upper] = source`` (an omitted bound is the array's own)."""
    if source is None:
        return a  # Postgres leaves the array unchanged
    out = _one_dimensional(a)
    if any(isinstance(x, list) for x in source):
        raise unsupported("assignment of a multi-dimensional slice")
    lo = 1 if lower is None else lower
    hi = len(out) if upper is None else upper
    if hi < lo:
        raise SqlError(ARRAY_SUBSCRIPT_ERROR, "upper bound cannot be less than lower bound")
    _check_bounds(out, lo)
    span = hi - lo + 1
    if len(source) < span:
        raise SqlError(ARRAY_SUBSCRIPT_ERROR, "source array too small")
    if hi > len(out):
        out.extend([None] * (hi - len(out)))
    out[lo - 1 : hi] = source[:span]
    return out


def _one_dimensional(a: list[Any] | None) -> list[Any]:
    if a is None:
        return []
    if any(isinstance(x, list) for x in a):
        raise unsupported("assignment to an element of a multi-dimensional array")
    return list(a)


def _check_bounds(a: list[Any], first: int) -> None:
    """Our arrays start at 1: refuse what would start one elsewhere."""
    if first < 1 or (not a and first > 1):
        raise unsupported("array assignment that gives the array a lower bound other than 1")
