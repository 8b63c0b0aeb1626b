"""json and jsonb functions: constructors (json(b)_build_object/array, to_json(b)), accessors
(json(b)_typeof, json(b)_array_length, json(b)_extract_path[_text]), jsonb editing
(jsonb_set, jsonb_insert, jsonb_strip_nulls, jsonb_pretty), the operator functions
jsonb_exists / jsonb_contains, and the set-returning json(b)_array_elements[_text],
json(b)_each[_text] and json(b)_object_keys (resolved through ``set_functions``). Registered
through ``functions.register``. jsonpath is refused with 0A000 naming it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from percolator.server.sql import types as T
from percolator.server.sql.bound import BExpr
from percolator.server.sql.errors import INVALID_PARAMETER_VALUE, SqlError, unsupported
from percolator.server.sql.functions import FunctionImpl, register
from percolator.server.sql.json_operators import (
    _MISSING,
    json_step,
    jsonb_contains,
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
            f"{_json_str(key_text(types[i], args[i], i + 1))} : "
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
    return FunctionImpl(
        lambda a, b: jsonb_contains(parse_json(a), parse_json(b)), T.BOOL, args=(T.JSONB, T.JSONB)
    )


# -- editing --------------------------------------------------------------------------------


def _set_in(v: Any, path: list[Any], new: Any, create: bool, insert: int | None, pos: int) -> Any:
    """jsonb_set (``insert`` None) / jsonb_insert (``insert`` 0 before, 1 after) below ``v``."""
    key = path[0]
    if key is None:
        raise SqlError(INVALID_PARAMETER_VALUE, f"path element at position {pos} is null")
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
