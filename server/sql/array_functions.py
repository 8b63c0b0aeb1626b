"""Array functions, as Postgres's array_userfuncs.c and arrayfuncs.c define them.

array_append, array_prepend, array_cat, array_remove, array_replace, array_position(s),
array_fill, array_dims, array_ndims, array_length / array_lower / array_upper, cardinality,
trim_array, array_to_string, string_to_array, and arraycontains / arraycontained /
arrayoverlap (the functions behind ``@>``, ``<@`` and ``&&``). The operators, subscripts and
slices are bound in ``array_operators``, with the helpers here.

An array value is a list of element values (None for NULL). A multi-dimensional array is
nested lists, rectangular, and every lower bound is 1: text input drops other bounds (textio),
so a function that would produce another lower bound (array_fill with lower bounds) reports
0A000. An empty array is ``[]``, with no dimensions. int2vector and oidvector are arrays of
int2 / oid with lower bound 0 to the functions that read arrays.

Polymorphism follows Postgres: most of these take ``anycompatiblearray`` / ``anycompatible``
(the arguments are brought to the common type of the elements, an untyped literal takes it,
text when everything is untyped), the others ``anyarray`` / ``anyelement``, which an untyped
literal alone cannot determine (42804).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from percolator.server.sql import casts
from percolator.server.sql import types as T
from percolator.server.sql.errors import (
    DATA_EXCEPTION,
    FEATURE_NOT_SUPPORTED,
    NULL_VALUE_NOT_ALLOWED,
    PROGRAM_LIMIT_EXCEEDED,
    UNDEFINED_FUNCTION,
    SqlError,
    undetermined_polymorphic,
    unsupported,
)
from percolator.server.sql.functions import FunctionImpl, register, string_or_unknown
from percolator.server.sql.textio import text_out
from percolator.server.sql.types import SqlType, TypeId

MAXDIM = 6
"""Postgres's limit on an array's dimensions."""
MAX_ARRAY_SIZE = 134_217_727
"""Postgres's MaxArraySize: the most elements an array holds."""
ARRAY_SUBSCRIPT_ERROR = "2202E"

# int2vector and oidvector: arrays of these elements, subscripted from 0.
_VECTORS = {TypeId.INT2VECTOR: T.INT2, TypeId.OIDVECTOR: T.OID}
_INT4_ARRAY = T.INT4.array_of()


# -- values ---------------------------------------------------------------------------------


def dims(a: list[Any]) -> list[int]:
    """The dimensions of an array value (``[]`` for an empty array)."""
    out: list[int] = []
    v: Any = a
    while isinstance(v, list) and v:
        out.append(len(v))
        v = v[0]
    return out


def is_multi(a: list[Any]) -> bool:
    """Whether the array has more than one dimension."""
    return bool(a) and isinstance(a[0], list)


def flatten(a: list[Any]) -> list[Any]:
    """The elements of an array in storage (row-major) order."""
    if not is_multi(a):
        return a
    out: list[Any] = []
    for sub in a:
        out.extend(flatten(sub))
    return out


def check_ndims(n: int) -> None:
    """54000 when ``n`` dimensions exceed Postgres's limit."""
    if n > MAXDIM:
        raise SqlError(
            PROGRAM_LIMIT_EXCEEDED,
            f"number of array dimensions ({n}) exceeds the maximum allowed ({MAXDIM})",
        )


def equality_key(elem: SqlType) -> Callable[[Any], Any]:
    """A key under which two non-NULL elements of type ``elem`` are equal exactly when
    Postgres's ``=`` says so (numerics by value, NaN equal to NaN, character(n) without its
    padding, intervals by their span, enums and jsonb by value)."""
    try:
        return casts.compare_key(SqlType(elem.id, elem.typmod))
    except SqlError:
        raise SqlError(
            UNDEFINED_FUNCTION, f"could not identify an equality operator for type {elem}"
        ) from None


def _member_test(keys: list[Any]) -> Callable[[Any], bool]:
    """``k in keys``, hashed where the keys allow it (jsonb's keys are lists)."""
    try:
        found = set(keys)
    except TypeError:
        return lambda k: k in keys
    return lambda k: k in found


def contains(a: list[Any], b: list[Any], key: Callable[[Any], Any]) -> bool:
    """``a @> b``: every element of b equals some element of a; NULLs equal nothing."""
    members = _member_test([key(x) for x in flatten(a) if x is not None])
    return all(x is not None and members(key(x)) for x in flatten(b))


def overlaps(a: list[Any], b: list[Any], key: Callable[[Any], Any]) -> bool:
    """``a && b``: some element of a equals some element of b; NULLs equal nothing."""
    members = _member_test([key(x) for x in flatten(a) if x is not None])
    return any(x is not None and members(key(x)) for x in flatten(b))


def _incompatible(detail: str) -> SqlError:
    return SqlError(ARRAY_SUBSCRIPT_ERROR, "cannot concatenate incompatible arrays", detail=detail)


def array_cat(a: list[Any] | None, b: list[Any] | None) -> list[Any] | None:
    """array_cat / ``array || array``: NULL or empty yields the other; arrays of the same
    dimensions join along the first one; an array of one dimension less is added as one
    element of the other (``{{1,2}} || {3,4}`` is ``{{1,2},{3,4}}``)."""
    if a is None or b is None:
        return b if a is None else a
    if not a or not b:
        return b if not a else a
    da, db = dims(a), dims(b)
    if len(da) == len(db):
        if da[1:] != db[1:]:
            raise _incompatible(
                "Arrays with differing element dimensions are not compatible for concatenation."
            )
        return [*a, *b]
    if len(da) == len(db) + 1 and da[1:] == db:
        return [*a, b]
    if len(db) == len(da) + 1 and db[1:] == da:
        return [a, *b]
    if abs(len(da) - len(db)) == 1:
        raise _incompatible(
            "Arrays with differing dimensions are not compatible for concatenation."
        )
    raise _incompatible(
        f"Arrays of {len(da)} and {len(db)} dimensions are not compatible for concatenation."
    )


def _one_dimensional(a: list[Any]) -> None:
    if is_multi(a):
        raise SqlError(DATA_EXCEPTION, "argument must be empty or one-dimensional array")


def array_append(a: list[Any] | None, e: object) -> list[Any]:
    """array_append / ``array || element``: a NULL array is an empty one."""
    if a is None:
        return [e]
    _one_dimensional(a)
    return [*a, e]


def array_prepend(e: object, a: list[Any] | None) -> list[Any]:
    """array_prepend / ``element || array``: a NULL array is an empty one."""
    if a is None:
        return [e]
    _one_dimensional(a)
    return [e, *a]


# -- polymorphic argument resolution --------------------------------------------------------


def is_unknown(t: SqlType) -> bool:
    """An untyped literal's (or parameter's) type, not an array of one."""
    return t.id is TypeId.UNKNOWN and not t.array


def element_type(t: SqlType, *, vectors: bool = True) -> SqlType | None:
    """The element type of an array type (with ``vectors``, also of int2vector and oidvector),
    or None for a type that is not an array."""
    if t.array:
        return t.element
    if vectors and t.id in _VECTORS:
        return _VECTORS[t.id]
    return None


def lower_bound(t: SqlType) -> int:
    """The lower bound of every dimension of an array of type ``t``."""
    return 0 if not t.array and t.id in _VECTORS else 1


def compatible(
    arrays: Sequence[SqlType], elements: Sequence[SqlType], *, vectors: bool = False
) -> SqlType | None:
    """The element type ``anycompatiblearray`` / ``anycompatible`` arguments resolve to: the
    common type of the arrays' element types and of the elements (without a modifier), text
    when all are untyped; None when there is none (the function or operator does not match).
    With ``vectors`` an int2vector / oidvector counts as an array, if the common type is its
    own element type (it is never cast)."""
    candidates: list[SqlType] = []
    vector_elems: list[SqlType] = []
    for t in arrays:
        if is_unknown(t):
            continue
        elem = element_type(t, vectors=vectors)
        if elem is None:
            return None
        if not t.array:
            vector_elems.append(elem)
        candidates.append(elem)
    for t in elements:
        if is_unknown(t):
            continue
        if element_type(t) is not None:
            return None  # an array's element type is never an array
        candidates.append(t)
    try:
        common = casts.common_type(candidates)
    except SqlError:
        return None
    common = SqlType(common.id)
    if any(e.id != common.id for e in vector_elems):
        return None
    return common


def cast_target(t: SqlType, common: SqlType, *, array: bool) -> SqlType:
    """What an argument of type ``t`` is cast to for the resolved element type ``common``: kept
    as it is when it already has that element type (a modifier survives), else the common
    (array) type."""
    if not is_unknown(t):
        elem = element_type(t) if array else t
        if elem is not None and elem.id == common.id and (array or not t.array):
            return t
    return common.array_of() if array else common


def anyarray(t: SqlType) -> SqlType | None:
    """An ``anyarray`` argument alone: its type, None for a non-array, 42804 when untyped."""
    if is_unknown(t):
        raise undetermined_polymorphic()
    return t if element_type(t) is not None else None


def _int_arg(t: SqlType) -> bool:
    return is_unknown(t) or (
        not t.array and casts.can_implicitly_cast(SqlType(t.id), T.INT4) and t.id is not TypeId.OID
    )


# -- functions ------------------------------------------------------------------------------


@register("array_append")
def _array_append(args: Sequence[SqlType]) -> FunctionImpl | None:
    if len(args) != 2 or (common := compatible(args[:1], args[1:])) is None:
        return None
    targets = (cast_target(args[0], common, array=True), cast_target(args[1], common, array=False))
    return FunctionImpl(array_append, common.array_of(), strict=False, args=targets)


@register("array_prepend")
def _array_prepend(args: Sequence[SqlType]) -> FunctionImpl | None:
    if len(args) != 2 or (common := compatible(args[1:], args[:1])) is None:
        return None
    targets = (cast_target(args[0], common, array=False), cast_target(args[1], common, array=True))
    return FunctionImpl(array_prepend, common.array_of(), strict=False, args=targets)


@register("array_cat")
def _array_cat(args: Sequence[SqlType]) -> FunctionImpl | None:
    if len(args) != 2 or (common := compatible(args, ())) is None:
        return None
    targets = tuple(cast_target(t, common, array=True) for t in args)
    return FunctionImpl(array_cat, common.array_of(), strict=False, args=targets)


@register("array_remove")
def _array_remove(args: Sequence[SqlType]) -> FunctionImpl | None:
    if len(args) != 2 or (common := compatible(args[:1], args[1:])) is None:
        return None
    key = equality_key(common)

    def remove(a: list[Any] | None, e: object) -> list[Any] | None:
        if a is None:
            return None
        if is_multi(a):
            raise SqlError(
                FEATURE_NOT_SUPPORTED,
                "removing elements from multidimensional arrays is not supported",
            )
        if e is None:
            return [x for x in a if x is not None]
        k = key(e)
        return [x for x in a if x is None or key(x) != k]

    targets = (cast_target(args[0], common, array=True), cast_target(args[1], common, array=False))
    return FunctionImpl(remove, common.array_of(), strict=False, args=targets)


@register("array_replace")
def _array_replace(args: Sequence[SqlType]) -> FunctionImpl | None:
    if len(args) != 3 or (common := compatible(args[:1], args[1:])) is None:
        return None
    key = equality_key(common)

    def replace(a: list[Any] | None, old: object, new: object) -> list[Any] | None:
        if a is None:
            return None
        if old is None:
            matches: Callable[[Any], bool] = lambda x: x is None  # noqa: E731
        else:
            k = key(old)
            matches = lambda x: x is not None and key(x) == k  # noqa: E731

        def walk(items: list[Any]) -> list[Any]:
            return [walk(x) if isinstance(x, list) else new if matches(x) else x for x in items]

        return walk(a)

    targets = (
        cast_target(args[0], common, array=True),
        cast_target(args[1], common, array=False),
        cast_target(args[2], common, array=False),
    )
    return FunctionImpl(replace, common.array_of(), strict=False, args=targets)


def _searchable(a: list[Any]) -> None:
    if is_multi(a):
        raise SqlError(
            FEATURE_NOT_SUPPORTED,
            "searching for elements in multidimensional arrays is not supported",
        )


@register("array_position")
def _array_position(args: Sequence[SqlType]) -> FunctionImpl | None:
    """array_position(array, element [, start]): the first subscript holding the element
    (NULL finds a NULL), searching from ``start``."""
    if len(args) not in (2, 3) or (len(args) == 3 and not _int_arg(args[2])):
        return None
    common = compatible(args[:1], args[1:2], vectors=True)
    if common is None:
        return None
    key = equality_key(common)
    base = lower_bound(args[0])

    def position(a: list[Any] | None, e: object, *start: int | None) -> int | None:
        if a is None:
            return None
        _searchable(a)
        if not a or (e is None and None not in a):
            return None
        first = 0
        if start:
            if start[0] is None:
                raise SqlError(NULL_VALUE_NOT_ALLOWED, "initial position must not be null")
            first = max(start[0] - base, 0)
        k = None if e is None else key(e)
        for i in range(first, len(a)):
            x = a[i]
            if x is None if k is None else (x is not None and key(x) == k):
                return i + base
        return None

    targets = (
        cast_target(args[0], common, array=True),
        cast_target(args[1], common, array=False),
        *([T.INT4] if len(args) == 3 else []),
    )
    return FunctionImpl(position, T.INT4, strict=False, args=targets)


@register("array_positions")
def _array_positions(args: Sequence[SqlType]) -> FunctionImpl | None:
    """array_positions(array, element): every subscript holding the element."""
    if len(args) != 2 or (common := compatible(args[:1], args[1:], vectors=True)) is None:
        return None
    key = equality_key(common)
    base = lower_bound(args[0])

    def positions(a: list[Any] | None, e: object) -> list[int] | None:
        if a is None:
            return None
        _searchable(a)
        if e is None:
            return [i + base for i, x in enumerate(a) if x is None]
        k = key(e)
        return [i + base for i, x in enumerate(a) if x is not None and key(x) == k]

    targets = (cast_target(args[0], common, array=True), cast_target(args[1], common, array=False))
    return FunctionImpl(positions, _INT4_ARRAY, strict=False, args=targets)


def _dims_argument(v: list[Any] | None, what: str) -> list[int]:
    if is_multi(v or []):
        raise SqlError(
            ARRAY_SUBSCRIPT_ERROR,
            "wrong number of array subscripts",
            detail=f"{what} array must be one dimensional.",
        )
    if v is not None and None in v:
        raise SqlError(NULL_VALUE_NOT_ALLOWED, "dimension values cannot be null")
    return list(v or [])


def _array_fill(value: object, dim_array: list[Any] | None, *lbs: list[Any] | None) -> list[Any]:
    if dim_array is None or (lbs and lbs[0] is None):
        raise SqlError(NULL_VALUE_NOT_ALLOWED, "dimension array or low bound array cannot be null")
    sizes = _dims_argument(dim_array, "Dimension")
    check_ndims(len(sizes))
    lows = _dims_argument(lbs[0], "Dimension") if lbs else [1] * len(sizes)
    if len(lows) != len(sizes):
        raise SqlError(
            ARRAY_SUBSCRIPT_ERROR,
            "wrong number of array subscripts",
            detail="Low bound array has different size than dimensions array.",
        )
    total = 1
    for n in sizes:
        total *= n
        if n < 0 or total > MAX_ARRAY_SIZE:
            raise SqlError(
                PROGRAM_LIMIT_EXCEEDED,
                f"array size exceeds the maximum allowed ({MAX_ARRAY_SIZE})",
            )
    if not sizes or total == 0:
        return []
    if any(lo != 1 for lo in lows):
        raise unsupported("array lower bounds other than 1")

    def build(level: int) -> list[Any]:
        if level == len(sizes) - 1:
            return [value] * sizes[level]
        return [build(level + 1) for _ in range(sizes[level])]

    return build(0)


@register("array_fill")
def _array_fill_resolver(args: Sequence[SqlType]) -> FunctionImpl | None:
    """array_fill(anyelement, int[] [, int[]])."""
    if len(args) not in (2, 3):
        return None
    if is_unknown(args[0]):
        raise undetermined_polymorphic()
    if element_type(args[0]) is not None:
        return None
    for t in args[1:]:
        if not (is_unknown(t) or (t.array and casts.can_implicitly_cast(t, _INT4_ARRAY))):
            return None
    params = (args[0], *[_INT4_ARRAY] * (len(args) - 1))
    return FunctionImpl(_array_fill, SqlType(args[0].id).array_of(), strict=False, args=params)


def _reader(
    names: str | tuple[str, ...], result: SqlType, make: Callable[[int], Callable[..., object]]
) -> None:
    """Register a strict function of an ``anyarray`` (and, for two arguments, an integer):
    ``make(lower bound)`` gives the implementation."""

    def resolver(args: Sequence[SqlType]) -> FunctionImpl | None:
        if not args or len(args) > 2 or (len(args) == 2 and not _int_arg(args[1])):
            return None
        if anyarray(args[0]) is None:
            return None
        fn = make(lower_bound(args[0]))
        return FunctionImpl(fn, result, args=(args[0], *[T.INT4] * (len(args) - 1)))

    register(*((names,) if isinstance(names, str) else names))(resolver)


def _length(base: int) -> Callable[..., object]:
    def length(a: list[Any], dim: int) -> int | None:
        d = dims(a)
        return d[dim - 1] if 1 <= dim <= len(d) else None

    return length


def _lower(base: int) -> Callable[..., object]:
    return lambda a, dim: base if 1 <= dim <= len(dims(a)) else None


def _upper(base: int) -> Callable[..., object]:
    def upper(a: list[Any], dim: int) -> int | None:
        d = dims(a)
        return d[dim - 1] + base - 1 if 1 <= dim <= len(d) else None

    return upper


def _array_dims(base: int) -> Callable[..., object]:
    return lambda a: "".join(f"[{base}:{n + base - 1}]" for n in dims(a)) or None


_reader("array_length", T.INT4, _length)
_reader("array_lower", T.INT4, _lower)
_reader("array_upper", T.INT4, _upper)
_reader("array_ndims", T.INT4, lambda base: lambda a: len(dims(a)) or None)
_reader("array_dims", T.TEXT, _array_dims)
_reader("cardinality", T.INT4, lambda base: lambda a: len(flatten(a)))


@register("trim_array")
def _trim_array(args: Sequence[SqlType]) -> FunctionImpl | None:
    """trim_array(array, n): without its last n elements (rows, for a multi-dimensional
    array)."""
    if len(args) != 2 or not _int_arg(args[1]) or anyarray(args[0]) is None:
        return None
    if element_type(args[0], vectors=False) is None:
        return None

    def trim(a: list[Any], n: int) -> list[Any]:
        if not 0 <= n <= len(a):
            raise SqlError(
                ARRAY_SUBSCRIPT_ERROR,
                f"number of elements to trim must be between 0 and {len(a)}",
            )
        return a[: len(a) - n]

    return FunctionImpl(trim, SqlType(args[0].id, -1, True), args=(args[0], T.INT4))


@register("array_to_string")
def _array_to_string(args: Sequence[SqlType]) -> FunctionImpl | None:
    """array_to_string(array, delimiter [, null string]): the elements' text joined; NULLs
    are skipped, or shown as the null string."""
    if len(args) not in (2, 3) or not all(string_or_unknown(t) for t in args[1:]):
        return None
    if anyarray(args[0]) is None:
        return None
    elem = element_type(args[0])
    assert elem is not None

    def join(a: list[Any], sep: str, null: str | None = None) -> str:
        return sep.join(
            null if v is None else text_out(elem, v)  # type: ignore[misc]
            for v in flatten(a)
            if v is not None or null is not None
        )

    return FunctionImpl(join, T.TEXT, args=(args[0], *[T.TEXT] * (len(args) - 1)))


def _string_to_array(s: str | None, sep: str | None, null: str | None = None) -> list[Any] | None:
    if s is None:
        return None
    if not s:
        return []
    if sep is None:
        parts = list(s)  # a NULL delimiter splits into characters
    elif not sep:
        parts = [s]
    else:
        parts = s.split(sep)
    if null is None:
        return parts
    return [None if p == null else p for p in parts]


@register("string_to_array")
def _string_to_array_resolver(args: Sequence[SqlType]) -> FunctionImpl | None:
    """string_to_array(text, delimiter [, null string]) -> text[]."""
    if len(args) not in (2, 3) or not all(string_or_unknown(t) for t in args):
        return None
    return FunctionImpl(_string_to_array, T.TEXT_ARRAY, strict=False, args=(T.TEXT,) * len(args))


def same_arrays(args: Sequence[SqlType]) -> tuple[SqlType, SqlType] | None:
    """Two ``anyarray`` arguments: their types, an untyped one taking the other's, or None when
    they are not arrays of the same element type (modifiers may differ). Both untyped: 42804."""
    a, b = args
    if is_unknown(a) and is_unknown(b):
        raise undetermined_polymorphic()
    a = b if is_unknown(a) else a
    b = a if is_unknown(b) else b
    ea, eb = element_type(a, vectors=False), element_type(b, vectors=False)
    if ea is None or eb is None or ea.id != eb.id:
        return None
    return a, b


def _set_operator(fn: Callable[[list[Any], list[Any], Callable[[Any], Any]], bool]) -> Any:
    def resolver(args: Sequence[SqlType]) -> FunctionImpl | None:
        if len(args) != 2 or (pair := same_arrays(args)) is None:
            return None
        key = equality_key(pair[0].element)
        return FunctionImpl(lambda a, b: fn(a, b, key), T.BOOL, args=pair)

    return resolver


register("arraycontains")(_set_operator(contains))
register("arraycontained")(_set_operator(lambda a, b, key: contains(b, a, key)))
register("arrayoverlap")(_set_operator(overlaps))
