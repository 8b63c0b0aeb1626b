"""json and jsonb functions: constructors (json(b)_build_object/array, to_json(b)), accessors
(json(b)_typeof, json(b)_array_length, json(b)_extract_path[_text]), jsonb editing
(jsonb_set, jsonb_insert, jsonb_strip_nulls, jsonb_pretty), the operator functions
jsonb_exists / jsonb_contains, and the set-returning json(b)_array_elements[_text],
json(b)_each[_text] and json(b)_object_keys (resolved through ``set_functions``). Registered
through ``functions.register``. jsonpath is refused with 0A000 naming it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from percolator.server.sql import types as T
from percolator.server.sql.bound import BCall, BConst, BExpr
from percolator.server.sql.errors import (
    DATATYPE_MISMATCH,
    INVALID_PARAMETER_VALUE,
    NULL_VALUE_NOT_ALLOWED,
    SqlError,
    unsupported,
)
from percolator.server.sql.functions import FunctionImpl, register
from percolator.server.sql.json_operators import (
    _MISSING,
    contains_text,
    delete_index,
    delete_key,
    delete_keys,
    exists_all,
    exists_any,
    json_step,
    jsonb_concat,
    jsonb_delete_path,
    jsonb_exists,
    jsonb_step,
    path_index,
)
from percolator.server.sql.json_values import (
    format_json_value,
    json_kind,
    jsonb_kind,
    key_text,
    parse_json,
    raw_array,
    raw_object,
    raw_scalar_text,
    record_json_text,
    to_json_text,
    to_jsonb_value,
)
from percolator.server.sql.types import SqlType, TypeId

_json_str = format_json_value  # a Python str formats as a JSON string


def _is(t: SqlType, tid: TypeId) -> bool:
    return not t.array and t.id in (tid, TypeId.UNKNOWN)


# -- constructors ---------------------------------------------------------------------------


def _odd_args(name: str) -> SqlError:
    return SqlError(
        INVALID_PARAMETER_VALUE,
        "argument list must have even number of elements",
        hint=f"The arguments of {name}() must consist of alternating keys and values.",
    )


def _build_object(jsonb: bool, types: Sequence[SqlType]) -> Callable[..., str]:
    name = "jsonb_build_object" if jsonb else "json_build_object"

    def build(*args: object) -> str:
        if len(args) % 2:
            raise _odd_args(name)
        if jsonb:
            obj: dict[str, Any] = {}
            for i in range(0, len(args), 2):
                obj[key_text(types[i], args[i], i + 1)] = to_jsonb_value(types[i + 1], args[i + 1])
            return format_json_value(obj)
        parts = [
            f"{_json_str(key_text(types[i], args[i], i + 1, jsonb=False))} : "
            f"{to_json_text(types[i + 1], args[i + 1])}"
            for i in range(0, len(args), 2)
        ]
        return "{" + ", ".join(parts) + "}"

    return build


def _build_array(jsonb: bool, types: Sequence[SqlType]) -> Callable[..., str]:
    def build(*args: object) -> str:
        if jsonb:
            return format_json_value(
                [to_jsonb_value(t, v) for t, v in zip(types, args, strict=True)]
            )
        return "[" + ", ".join(to_json_text(t, v) for t, v in zip(types, args, strict=True)) + "]"

    return build


def _text_types(args: Sequence[SqlType]) -> list[SqlType]:
    # String literals are text here, as Postgres resolves unknown arguments of "any".
    return [T.TEXT if t.id is TypeId.UNKNOWN else t for t in args]


def _constructor(name: str, jsonb: bool, array: bool) -> None:
    def resolver(args: Sequence[SqlType]) -> FunctionImpl | None:
        types = _text_types(args)
        fn = _build_array(jsonb, types) if array else _build_object(jsonb, types)
        return FunctionImpl(fn, T.JSONB if jsonb else T.JSON, strict=False)

    register(name)(resolver)


for _name, _jsonb, _array in (
    ("jsonb_build_object", True, False),
    ("json_build_object", False, False),
    ("jsonb_build_array", True, True),
    ("json_build_array", False, True),
):
    _constructor(_name, _jsonb, _array)


VARIADIC_NAMES = frozenset(
    {
        "json_build_object",
        "jsonb_build_object",
        "json_build_array",
        "jsonb_build_array",
        "json_extract_path",
        "json_extract_path_text",
        "jsonb_extract_path",
        "jsonb_extract_path_text",
        "jsonb_delete",
    }
)
"""The json functions that take ``VARIADIC array`` as their last argument."""


def bind_variadic(binder: Any, name: str, args: list[BExpr]) -> BExpr:
    """``f(..., VARIADIC array)`` for the functions in :data:`VARIADIC_NAMES`: the array's
    elements (flattened) are the trailing arguments; a NULL array makes the call NULL, as the
    builders in Postgres return NULL for it."""
    arr = args[-1]
    if arr.type.id is TypeId.UNKNOWN:
        arr = binder.coerce(arr, T.TEXT_ARRAY)
    if not arr.type.array:
        raise SqlError(DATATYPE_MISMATCH, "VARIADIC argument must be an array")
    fixed = args[:-1]
    if name == "jsonb_delete":
        if fixed[0].type.id is TypeId.UNKNOWN:
            fixed = [binder.coerce(fixed[0], T.JSONB)]
        return BCall(T.JSONB, name, delete_keys, [*fixed, binder.coerce(arr, T.TEXT_ARRAY)])
    if name.startswith(("json_extract", "jsonb_extract")):
        arr = binder.coerce(arr, T.TEXT_ARRAY)
        impl = binder.call(name, [*fixed, BConst(T.TEXT, None)])
        return BCall(impl.type, name, lambda *v: impl.fn(*v[:-1], *v[-1]), [*fixed, arr])
    from percolator.server.sql.array_functions import flatten  # it imports this module

    elem = arr.type.element
    jsonb = name.startswith("jsonb")
    make = _build_array if name.endswith("_array") else _build_object

    def build(v: list[Any]) -> str:
        items = flatten(v)
        return make(jsonb, [elem] * len(items))(*items)

    return BCall(T.JSONB if jsonb else T.JSON, name, build, [arr])


def _to_json_for(name: str) -> None:
    jsonb = name == "to_jsonb"

    def resolver(args: Sequence[SqlType]) -> FunctionImpl | None:
        if len(args) != 1:
            return None
        t = _text_types(args)[0]
        if jsonb:
            return FunctionImpl(lambda v: format_json_value(to_jsonb_value(t, v)), T.JSONB)
        return FunctionImpl(lambda v: to_json_text(t, v), T.JSON)

    register(name)(resolver)


_to_json_for("to_json")
_to_json_for("to_jsonb")


@register("row_to_json")
def _row_to_json(args: Sequence[SqlType]) -> FunctionImpl | None:
    """row_to_json(record [, pretty]): pretty puts each field after the first on a new line."""
    if not 1 <= len(args) <= 2 or args[0].id is not TypeId.RECORD or args[0].array:
        return None
    t = args[0]
    if record_json_text(t, ()) is None:
        return None

    def row_to_json(v: object, pretty: bool = False) -> str:
        return record_json_text(t, v, ",\n " if pretty else ",") or ""

    return FunctionImpl(row_to_json, T.JSON, args=(t, T.BOOL)[: len(args)])


# -- accessors ------------------------------------------------------------------------------


def _unary(tid: TypeId, fn: Callable[..., object], result: SqlType) -> Callable[..., Any]:
    def resolver(args: Sequence[SqlType]) -> FunctionImpl | None:
        if len(args) != 1 or not _is(args[0], tid):
            return None
        return FunctionImpl(fn, result, args=(SqlType(tid),))

    return resolver


def _jsonb_array_length(doc: str) -> int:
    v = parse_json(doc)
    if isinstance(v, list):
        return len(v)
    what = "a non-array" if isinstance(v, dict) else "a scalar"
    raise SqlError(INVALID_PARAMETER_VALUE, f"cannot get array length of {what}")


def _json_array_length(doc: str) -> int:
    items = raw_array(doc)
    if items is not None:
        return len(items)
    what = "a non-array" if json_kind(doc) == "object" else "a scalar"
    raise SqlError(INVALID_PARAMETER_VALUE, f"cannot get array length of {what}")


def _strip_nulls(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _strip_nulls(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [_strip_nulls(x) for x in v]
    return v


def _pretty(v: Any, indent: int = 0) -> str:
    pad = "    " * (indent + 1)
    if isinstance(v, dict) and v:
        keys = parse_json(format_json_value(v))  # jsonb's key order
        items = [f"{pad}{_json_str(k)}: {_pretty(v[k], indent + 1)}" for k in keys]  # type: ignore[union-attr]
        return "{\n" + ",\n".join(items) + "\n" + "    " * indent + "}"
    if isinstance(v, list) and v:
        items = [pad + _pretty(x, indent + 1) for x in v]
        return "[\n" + ",\n".join(items) + "\n" + "    " * indent + "]"
    if isinstance(v, dict | list):
        # Postgres opens and closes an empty container on lines of their own too.
        return (
            ("{" if isinstance(v, dict) else "[")
            + "\n"
            + "    " * indent
            + ("}" if isinstance(v, dict) else "]")
        )
    return format_json_value(v)


class _RawNumber(str):
    """A json number kept as written (json_strip_nulls prints numbers as they were)."""


class _Pairs(list):  # type: ignore[type-arg]
    """A json object's (key, value) pairs in order, duplicates kept."""


_json_decoder = json.JSONDecoder(
    object_pairs_hook=_Pairs, parse_float=_RawNumber, parse_int=_RawNumber
)


def _compact_json(v: Any) -> str:
    """A json value with object members whose value is null left out, printed without
    whitespace and with strings re-escaped, as Postgres's json_strip_nulls prints it."""
    if isinstance(v, _Pairs):
        parts = (f"{_json_str(k)}:{_compact_json(x)}" for k, x in v if x is not None)
        return "{" + ",".join(parts) + "}"
    if isinstance(v, list):
        return "[" + ",".join(_compact_json(x) for x in v) + "]"
    if isinstance(v, _RawNumber):
        return str(v)
    if isinstance(v, str):
        return _json_str(v)
    return "null" if v is None else "true" if v else "false"


def _json_strip_nulls(doc: str) -> str:
    return _compact_json(_json_decoder.decode(doc))


register("json_strip_nulls")(_unary(TypeId.JSON, _json_strip_nulls, T.JSON))
register("jsonb_typeof")(_unary(TypeId.JSONB, lambda d: jsonb_kind(parse_json(d)), T.TEXT))
register("json_typeof")(_unary(TypeId.JSON, json_kind, T.TEXT))
register("jsonb_array_length")(_unary(TypeId.JSONB, _jsonb_array_length, T.INT4))
register("json_array_length")(_unary(TypeId.JSON, _json_array_length, T.INT4))
register("jsonb_strip_nulls")(
    _unary(TypeId.JSONB, lambda d: format_json_value(_strip_nulls(parse_json(d))), T.JSONB)
)
register("jsonb_pretty")(_unary(TypeId.JSONB, lambda d: _pretty(parse_json(d)), T.TEXT))


def _extract_path(tid: TypeId, as_text: bool) -> Callable[[Sequence[SqlType]], FunctionImpl | None]:
    def extract_jsonb(doc: str, *path: str | None) -> object:
        v: Any = parse_json(doc)
        for key in path:
            if key is None:
                return None
            k: object = key
            if isinstance(v, list):
                try:
                    k = int(key)
                except ValueError:
                    return None
            v = jsonb_step(v, k)
            if v is _MISSING:
                return None
        if as_text:
            return None if v is None else v if isinstance(v, str) else format_json_value(v)
        return format_json_value(v)

    def extract_json(doc: str, *path: str | None) -> object:
        part: str | None = doc
        for key in path:
            if key is None or part is None:
                return None
            k: object = key
            if part.lstrip(" \t\n\r").startswith("["):
                try:
                    k = int(key)
                except ValueError:
                    return None
            part = json_step(part, k)
        if part is None:
            return None
        return raw_scalar_text(part) if as_text else part.strip(" \t\n\r")

    def resolver(args: Sequence[SqlType]) -> FunctionImpl | None:
        if not args or not _is(args[0], tid):
            return None
        if not all(_is(a, TypeId.TEXT) or a.id is TypeId.VARCHAR for a in args[1:]):
            return None
        fn = extract_jsonb if tid is TypeId.JSONB else extract_json
        result = T.TEXT if as_text else SqlType(tid)
        types = (SqlType(tid), *([T.TEXT] * (len(args) - 1)))

        def call(doc: str | None, *path: str | None) -> object:
            return None if doc is None else fn(doc, *path)

        return FunctionImpl(call, result, strict=False, args=types)

    return resolver


register("jsonb_extract_path")(_extract_path(TypeId.JSONB, False))
register("jsonb_extract_path_text")(_extract_path(TypeId.JSONB, True))
register("json_extract_path")(_extract_path(TypeId.JSON, False))
register("json_extract_path_text")(_extract_path(TypeId.JSON, True))


@register("jsonb_exists")
def _jsonb_exists(args: Sequence[SqlType]) -> FunctionImpl | None:
    if len(args) != 2 or not _is(args[0], TypeId.JSONB) or not _is(args[1], TypeId.TEXT):
        return None
    return FunctionImpl(jsonb_exists, T.BOOL, args=(T.JSONB, T.TEXT))


@register("jsonb_contains")
def _jsonb_contains(args: Sequence[SqlType]) -> FunctionImpl | None:
    if len(args) != 2 or not all(_is(a, TypeId.JSONB) for a in args):
        return None
    return FunctionImpl(contains_text, T.BOOL, args=(T.JSONB, T.JSONB))


@register("jsonb_contained")
def _jsonb_contained(args: Sequence[SqlType]) -> FunctionImpl | None:
    """jsonb_contained(a, b): ``a <@ b``."""
    if len(args) != 2 or not all(_is(a, TypeId.JSONB) for a in args):
        return None
    return FunctionImpl(lambda a, b: contains_text(b, a), T.BOOL, args=(T.JSONB, T.JSONB))


def _exists_keys(every: bool) -> Callable[[Sequence[SqlType]], FunctionImpl | None]:
    """jsonb_exists_any / jsonb_exists_all(jsonb, text[]): the ``?|`` / ``?&`` operators."""
    exists = exists_all if every else exists_any

    def resolver(args: Sequence[SqlType]) -> FunctionImpl | None:
        if len(args) != 2 or not _is(args[0], TypeId.JSONB):
            return None
        if args[1].id is not TypeId.UNKNOWN and not (args[1].array and args[1].id is TypeId.TEXT):
            return None
        return FunctionImpl(exists, T.BOOL, args=(T.JSONB, T.TEXT_ARRAY))

    return resolver


register("jsonb_exists_any")(_exists_keys(False))
register("jsonb_exists_all")(_exists_keys(True))


@register("array_to_json")
def _array_to_json(args: Sequence[SqlType]) -> FunctionImpl | None:
    """array_to_json(anyarray [, pretty]): pretty puts each top-level element after the first
    on a new line."""
    if not 1 <= len(args) <= 2 or not args[0].array:
        return None
    t = args[0]

    def array_to_json(v: list[Any], pretty: bool = False) -> str:
        if not pretty:
            return to_json_text(t, v)
        elem = t.element
        parts = (to_json_text(t if isinstance(e, list) else elem, e) for e in v)
        return "[" + ",\n ".join(parts) + "]"

    return FunctionImpl(array_to_json, T.JSON, args=(t, T.BOOL)[: len(args)])


def _object_error(message: str) -> SqlError:
    return SqlError("2202E", message)  # array_subscript_error


def _object_pairs(keys: list[Any], values: list[Any] | None) -> list[tuple[str, str | None]]:
    """The (key, value) pairs of json_object(text[]) or json_object(keys, values), with
    Postgres's checks: one flat array of even length or a two-column matrix; equal flat
    arrays; no NULL key."""
    from percolator.server.sql.array_functions import dims  # it imports this module

    if values is None:
        d = dims(keys)
        if len(d) > 2:
            raise _object_error("wrong number of array subscripts")
        if len(d) == 2:
            if d[1] != 2:
                raise _object_error("array must have two columns")
            flat = [x for row in keys for x in row]
        else:
            if len(keys) % 2:
                raise _object_error("array must have even number of elements")
            flat = keys
        pairs = list(zip(flat[::2], flat[1::2], strict=True))
    else:
        if len(dims(keys)) > 1 or len(dims(values)) > 1:
            raise _object_error("wrong number of array subscripts")
        if len(keys) != len(values):
            raise _object_error("mismatched array dimensions")
        pairs = list(zip(keys, values, strict=True))
    for k, _ in pairs:
        if k is None:
            raise SqlError(NULL_VALUE_NOT_ALLOWED, "null value not allowed for object key")
    return pairs


def _json_object_for(jsonb: bool) -> Callable[[Sequence[SqlType]], FunctionImpl | None]:
    def build(keys: list[Any], values: list[Any] | None = None) -> str:
        pairs = _object_pairs(keys, values)
        if jsonb:
            return format_json_value(dict(pairs))
        body = ", ".join(f"{_json_str(k)} : {_json_str(v)}" for k, v in pairs)
        return "{" + body + "}"

    def resolver(args: Sequence[SqlType]) -> FunctionImpl | None:
        if not 1 <= len(args) <= 2:
            return None
        if not all(a.id is TypeId.UNKNOWN or (a.array and a.id is TypeId.TEXT) for a in args):
            return None
        return FunctionImpl(build, T.JSONB if jsonb else T.JSON, args=(T.TEXT_ARRAY,) * len(args))

    return resolver


register("json_object")(_json_object_for(False))
register("jsonb_object")(_json_object_for(True))


# -- editing --------------------------------------------------------------------------------


def _set_in(v: Any, path: list[Any], new: Any, create: bool, insert: int | None, pos: int) -> Any:
    """jsonb_set (``insert`` None) / jsonb_insert (``insert`` 0 before, 1 after) below ``v``."""
    key = path[0]
    if key is None:
        raise SqlError(NULL_VALUE_NOT_ALLOWED, f"path element at position {pos} is null")
    last = len(path) == 1
    if isinstance(v, dict):
        if last:
            if insert is not None and key in v:
                raise SqlError(
                    INVALID_PARAMETER_VALUE,
                    "cannot replace existing key",
                    hint="Try using the function jsonb_set to replace key value.",
                )
            if key in v or create or insert is not None:
                v[key] = new
        elif key in v:
            v[key] = _set_in(v[key], path[1:], new, create, insert, pos + 1)
        return v
    if isinstance(v, list):
        i = path_index(key, pos)
        n = len(v)
        if last:
            if insert is not None or not -n <= i < n:
                if insert is None and not create:
                    return v
                j = i + n if i < 0 else i
                if insert == 1 and -n <= i < n:
                    j += 1
                v.insert(max(0, min(j, n)), new)
            else:
                v[i] = new
        elif -n <= i < n:
            v[i] = _set_in(v[i], path[1:], new, create, insert, pos + 1)
        return v
    return v


def _jsonb_set(doc: str, path: list[Any], new: str, create: bool = True) -> str:
    v = parse_json(doc)
    if not isinstance(v, dict | list):
        raise SqlError(INVALID_PARAMETER_VALUE, "cannot set path in scalar")
    if not path:
        return doc
    return format_json_value(_set_in(v, path, parse_json(new), create, None, 1))


def _jsonb_insert(doc: str, path: list[Any], new: str, after: bool = False) -> str:
    v = parse_json(doc)
    if not isinstance(v, dict | list):
        raise SqlError(INVALID_PARAMETER_VALUE, "cannot set path in scalar")
    if not path:
        return doc
    return format_json_value(_set_in(v, path, parse_json(new), False, int(after), 1))


def _editor(fn: Callable[..., str]) -> Callable[[Sequence[SqlType]], FunctionImpl | None]:
    def resolver(args: Sequence[SqlType]) -> FunctionImpl | None:
        if len(args) not in (3, 4) or not _is(args[0], TypeId.JSONB):
            return None
        types = (T.JSONB, T.TEXT_ARRAY, T.JSONB, T.BOOL)[: len(args)]
        return FunctionImpl(fn, T.JSONB, args=types)

    return resolver


register("jsonb_set")(_editor(_jsonb_set))
register("jsonb_insert")(_editor(_jsonb_insert))


_NULL_TREATMENTS = ("delete_key", "return_target", "use_json_null", "raise_exception")


def _jsonb_set_lax(
    doc: str | None,
    path: list[Any] | None,
    new: str | None,
    create: bool | None = True,
    treatment: str | None = "use_json_null",
) -> str | None:
    """jsonb_set_lax: jsonb_set, except that a NULL new value is handled as ``treatment``
    says (Postgres's checks and SQLSTATEs)."""
    if treatment is None:
        raise SqlError(INVALID_PARAMETER_VALUE, _treatment_message())
    if doc is None or path is None or create is None:
        return None
    if new is not None:
        return _jsonb_set(doc, path, new, create)
    if treatment == "raise_exception":
        raise SqlError(
            NULL_VALUE_NOT_ALLOWED,
            "JSON value must not be null",
            detail='Exception was raised because null_value_treatment is "raise_exception".',
            hint="To avoid, either change the null_value_treatment argument or ensure that an "
            "SQL NULL is not passed.",
        )
    if treatment == "use_json_null":
        return _jsonb_set(doc, path, "null", create)
    if treatment == "delete_key":
        return jsonb_delete_path(doc, path)
    if treatment == "return_target":
        return doc
    raise SqlError(INVALID_PARAMETER_VALUE, _treatment_message())


def _treatment_message() -> str:
    names = ", ".join(f'"{t}"' for t in _NULL_TREATMENTS[:-1])
    return f'null_value_treatment must be {names}, or "{_NULL_TREATMENTS[-1]}"'


@register("jsonb_set_lax")
def _jsonb_set_lax_resolver(args: Sequence[SqlType]) -> FunctionImpl | None:
    if not 3 <= len(args) <= 5 or not _is(args[0], TypeId.JSONB):
        return None
    types = (T.JSONB, T.TEXT_ARRAY, T.JSONB, T.BOOL, T.TEXT)[: len(args)]
    return FunctionImpl(_jsonb_set_lax, T.JSONB, strict=False, args=types)


@register("jsonb_concat")
def _jsonb_concat(args: Sequence[SqlType]) -> FunctionImpl | None:
    """jsonb_concat(a, b): the ``||`` operator."""
    if len(args) != 2 or not all(_is(a, TypeId.JSONB) for a in args):
        return None
    return FunctionImpl(jsonb_concat, T.JSONB, args=(T.JSONB, T.JSONB))


@register("jsonb_delete")
def _jsonb_delete(args: Sequence[SqlType]) -> FunctionImpl | None:
    """jsonb_delete(doc, key | index): the ``-`` operator."""
    if len(args) != 2 or not _is(args[0], TypeId.JSONB):
        return None
    t = args[1]  # the text[] form is declared VARIADIC: reached through bind_variadic
    if not t.array and t.id in (TypeId.INT2, TypeId.INT4):
        return FunctionImpl(delete_index, T.JSONB, args=(T.JSONB, T.INT4))
    if _is(t, TypeId.TEXT) or t.id is TypeId.VARCHAR:
        return FunctionImpl(delete_key, T.JSONB, args=(T.JSONB, T.TEXT))
    return None


@register("jsonb_delete_path")
def _jsonb_delete_path(args: Sequence[SqlType]) -> FunctionImpl | None:
    """jsonb_delete_path(doc, path): the ``#-`` operator."""
    if len(args) != 2 or not _is(args[0], TypeId.JSONB):
        return None
    if args[1].id is not TypeId.UNKNOWN and not (args[1].array and args[1].id is TypeId.TEXT):
        return None
    return FunctionImpl(jsonb_delete_path, T.JSONB, args=(T.JSONB, T.TEXT_ARRAY))


def _jsonpath(args: Sequence[SqlType]) -> FunctionImpl | None:
    raise unsupported("jsonpath")


register("jsonb_path_query", "jsonb_path_exists", "jsonb_path_match", "jsonb_path_query_array",
         "jsonb_path_query_first")(_jsonpath)  # fmt: skip


# -- set-returning functions ----------------------------------------------------------------


def _elements(jsonb: bool, as_text: bool) -> Callable[[str], Iterator[tuple[object, ...]]]:
    def elements(doc: str) -> Iterator[tuple[object, ...]]:
        if jsonb:
            v = parse_json(doc)
            if not isinstance(v, list):
                what = "an object" if isinstance(v, dict) else "a scalar"
                raise SqlError(INVALID_PARAMETER_VALUE, f"cannot extract elements from {what}")
            for e in v:
                if as_text:
                    yield (
                        None if e is None else e if isinstance(e, str) else format_json_value(e),
                    )
                else:
                    yield (format_json_value(e),)
            return
        items = raw_array(doc)
        if items is None:
            what = "an object" if json_kind(doc) == "object" else "a scalar"
            raise SqlError(INVALID_PARAMETER_VALUE, f"cannot extract elements from {what}")
        for raw in items:
            yield (raw_scalar_text(raw) if as_text else raw,)

    return elements


def _each(jsonb: bool, as_text: bool) -> Callable[[str], Iterator[tuple[object, ...]]]:
    name = ("jsonb_each" if jsonb else "json_each") + ("_text" if as_text else "")

    def each(doc: str) -> Iterator[tuple[object, ...]]:
        if jsonb:
            v = parse_json(doc)
            if not isinstance(v, dict):
                raise SqlError(INVALID_PARAMETER_VALUE, f"cannot call {name} on a non-object")
            for k in parse_json(format_json_value(v)):  # type: ignore[union-attr]
                x = v[k]
                if as_text:
                    yield (
                        k,
                        None if x is None else x if isinstance(x, str) else format_json_value(x),
                    )
                else:
                    yield (k, format_json_value(x))
            return
        pairs = raw_object(doc)
        if pairs is None:
            raise SqlError(INVALID_PARAMETER_VALUE, f"cannot call {name} on a non-object")
        for k, raw in pairs:
            yield (k, raw_scalar_text(raw) if as_text else raw)

    return each


def _object_keys(jsonb: bool) -> Callable[[str], Iterator[tuple[object, ...]]]:
    name = "jsonb_object_keys" if jsonb else "json_object_keys"

    def keys(doc: str) -> Iterator[tuple[object, ...]]:
        if jsonb:
            v = parse_json(doc)
            if isinstance(v, dict):
                for k in parse_json(format_json_value(v)):  # type: ignore[union-attr]
                    yield (k,)
                return
            what = "an array" if isinstance(v, list) else "a scalar"
        else:
            pairs = raw_object(doc)
            if pairs is not None:
                for k, _ in pairs:
                    yield (k,)
                return
            what = "an array" if json_kind(doc) == "array" else "a scalar"
        raise SqlError(INVALID_PARAMETER_VALUE, f"cannot call {name} on {what}")

    return keys


# name -> (argument type, row function, column names or None, column types, OUT column name)
_SRFS: dict[str, tuple[TypeId, Callable[..., Any], list[str] | None, list[SqlType], str | None]]
_SRFS = {}
for _jb, _tid in ((True, TypeId.JSONB), (False, TypeId.JSON)):
    _p = "jsonb" if _jb else "json"
    _jt = SqlType(_tid)
    _SRFS[f"{_p}_array_elements"] = (_tid, _elements(_jb, False), None, [_jt], "value")
    _SRFS[f"{_p}_array_elements_text"] = (_tid, _elements(_jb, True), None, [T.TEXT], "value")
    _SRFS[f"{_p}_each"] = (_tid, _each(_jb, False), ["key", "value"], [T.TEXT, _jt], None)
    _SRFS[f"{_p}_each_text"] = (_tid, _each(_jb, True), ["key", "value"], [T.TEXT, T.TEXT], None)
    _SRFS[f"{_p}_object_keys"] = (_tid, _object_keys(_jb), None, [T.TEXT], None)

SET_FUNCTION_NAMES = frozenset(_SRFS)
"""The json set-returning functions (the binder routes these names to set_functions)."""


def resolve_set_function(name: str, args: list[BExpr], binder: Any) -> Any:
    """A ``set_functions.SetFunctionImpl`` for a json set-returning function, or None."""
    from percolator.server.sql.set_functions import SetFunctionImpl

    found = _SRFS.get(name)
    if found is None or len(args) != 1:
        return None
    tid, fn, names, types, column = found
    if not _is(args[0].type, tid):
        return None
    arg = binder.coerce(args[0], SqlType(tid))
    return SetFunctionImpl(fn, list(types), [arg], names, column)
