"""The json and jsonb operators: ``->``, ``->>``, ``#>``, ``#>>`` (both types), and on jsonb
``@>``, ``<@``, ``?``, ``?|``, ``?&``, ``||``, ``-`` (key, index, text[]) and ``#-``, with
Postgres 15's results and errors. sqlglot parses each into its own node; ``expr_binder``
hands those nodes (and ``||`` / ``-`` whose left side is jsonb) to :func:`bind_operator`,
:func:`bind_concat` and :func:`bind_minus`.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from percolator.server.sql import types as T
from percolator.server.sql.bound import BCall, BConst, BExpr
from percolator.server.sql.errors import (
    DATATYPE_MISMATCH,
    INVALID_PARAMETER_VALUE,
    INVALID_TEXT_REPRESENTATION,
    NULL_VALUE_NOT_ALLOWED,
    SqlError,
    unsupported,
)
from percolator.server.sql.json_values import (
    check_escapes,
    format_json_value,
    parse_json,
    raw_array,
    raw_object,
    raw_scalar_text,
)
from percolator.server.sql.operators import operator_missing
from percolator.server.sql.types import SqlType, TypeId

if TYPE_CHECKING:
    from percolator.server.sql.expr_binder import ExprBinder
    from percolator.server.sql.scope import Scope

_JSON_TYPES = (TypeId.JSON, TypeId.JSONB)
_INTS = (TypeId.INT2, TypeId.INT4)


# -- navigation -----------------------------------------------------------------------------


def _int_key(s: str) -> int | None:
    """A path element used on an array: an integer, else None (no match)."""
    try:
        return int(s.strip())
    except ValueError:
        return None


def jsonb_step(v: Any, key: object) -> Any:
    """One step of ``->`` / ``#>`` into a parsed jsonb value; a missing part is ``_MISSING``."""
    if isinstance(v, dict) and isinstance(key, str):
        return v.get(key, _MISSING)
    if isinstance(v, list) and not isinstance(key, str | type(None)):
        i = int(key)  # type: ignore[call-overload]
        return v[i] if -len(v) <= i < len(v) else _MISSING
    if not isinstance(v, dict | list) and key in (0, -1):
        return v  # jsonb holds a scalar as a one-element array, and Postgres indexes into it
    return _MISSING


def json_step(raw: str, key: object) -> str | None:
    """One step of ``->`` / ``#>`` into json text: the raw text of the part (the last of
    duplicate keys, as Postgres finds it), or None."""
    if isinstance(key, str):
        pairs = raw_object(raw)
        found = None
        for k, part in pairs or ():
            if k == key:
                found = part
        return found
    items = raw_array(raw)
    if items is None or key is None:
        return None
    i = int(key)  # type: ignore[call-overload]
    return items[i] if -len(items) <= i < len(items) else None


class _Missing:
    """A part that is not there (as opposed to a JSON null)."""


_MISSING = _Missing()


def _jsonb_out(v: Any, as_text: bool) -> str | None:
    if v is _MISSING:
        return None
    if as_text:
        if v is None:
            return None
        return v if isinstance(v, str) else format_json_value(v)
    return format_json_value(v)


def _getter(json_type: TypeId, as_text: bool) -> Callable[[str, object], object]:
    """``doc -> key`` (key: text or integer)."""
    if json_type is TypeId.JSONB:

        def get_jsonb(doc: str, key: object) -> object:
            return _jsonb_out(jsonb_step(parse_json(doc), key), as_text)

        return get_jsonb

    def get_json(doc: str, key: object) -> object:
        check_escapes(doc)
        part = json_step(doc, key)
        if part is None:
            return None
        return raw_scalar_text(part) if as_text else part.strip(" \t\n\r")

    return get_json


def _path_getter(json_type: TypeId, as_text: bool) -> Callable[[str, list[Any]], object]:
    """``doc #> path`` (path: text[]); a NULL path element gives NULL, as in Postgres."""
    if json_type is TypeId.JSONB:

        def get_jsonb(doc: str, path: list[Any]) -> object:
            v: Any = parse_json(doc)
            for key in path:
                if key is None:
                    return None
                k: object = _int_key(key) if isinstance(v, list) else key
                if k is None:
                    return None
                v = jsonb_step(v, k)
                if v is _MISSING:
                    return None
            return _jsonb_out(v, as_text)

        return get_jsonb

    def get_json(doc: str, path: list[Any]) -> object:
        check_escapes(doc)
        part: str | None = doc
        for key in path:
            if key is None or part is None:
                return None
            is_array = part.lstrip(" \t\n\r").startswith("[")
            part = json_step(part, _int_key(key) if is_array else key)
        if part is None:
            return None
        return raw_scalar_text(part) if as_text else part.strip(" \t\n\r")

    return get_json


# -- containment and existence --------------------------------------------------------------


def _scalar_equal(a: Any, b: Any) -> bool:
    # bool is an int in Python: compare kinds first so that true never equals 1.
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, Decimal | int) and isinstance(b, Decimal | int):
        return Decimal(a) == Decimal(b)
    return type(a) is type(b) and a == b


def jsonb_contains(a: Any, b: Any, top: bool = True) -> bool:
    """``a @> b``: jsonb containment as Postgres defines it (an array contains a scalar at the
    top level too)."""
    if isinstance(a, dict):
        if not isinstance(b, dict):
            return False
        return all(k in a and jsonb_contains(a[k], v, False) for k, v in b.items())
    if isinstance(a, list):
        if isinstance(b, list):
            for eb in b:
                if isinstance(eb, dict | list):
                    if not any(type(ea) is type(eb) and jsonb_contains(ea, eb, False) for ea in a):
                        return False
                elif not any(not isinstance(ea, dict | list) and _scalar_equal(ea, eb) for ea in a):
                    return False
            return True
        if top and not isinstance(b, dict):
            return any(not isinstance(ea, dict | list) and _scalar_equal(ea, b) for ea in a)
        return False
    if isinstance(b, dict | list):
        return False
    return _scalar_equal(a, b)


def jsonb_exists(doc: str, key: str) -> bool:
    """``doc ? key``: a top-level key, array string element, or the string itself."""
    v = parse_json(doc)
    if isinstance(v, dict):
        return key in v
    if isinstance(v, list):
        return any(isinstance(e, str) and e == key for e in v)
    return isinstance(v, str) and v == key


def exists_any(doc: str, keys: list[Any]) -> bool:
    """``doc ?| keys`` (jsonbexists_any): NULL keys match nothing."""
    return any(k is not None and jsonb_exists(doc, k) for k in keys)


def exists_all(doc: str, keys: list[Any]) -> bool:
    """``doc ?& keys`` (jsonbexists_all): NULL keys are left out."""
    return all(k is None or jsonb_exists(doc, k) for k in keys)


def contains_text(container: str, contained: str) -> bool:
    """``container @> contained`` of two jsonb texts (jsonb_contains)."""
    return jsonb_contains(parse_json(container), parse_json(contained))


# -- modification ---------------------------------------------------------------------------


def jsonb_concat(a: str, b: str) -> str:
    """``a || b``: objects merge (the right side's keys win), otherwise arrays concatenate,
    a non-array side counting as a one-element array."""
    va, vb = parse_json(a), parse_json(b)
    if isinstance(va, dict) and isinstance(vb, dict):
        return format_json_value({**va, **vb})
    la = va if isinstance(va, list) else [va]
    lb = vb if isinstance(vb, list) else [vb]
    return format_json_value(la + lb)


def delete_key(doc: str, key: str) -> str:
    """``doc - key``: an object without the key, an array without the string elements equal
    to it."""
    v = parse_json(doc)
    if isinstance(v, dict):
        return format_json_value({k: x for k, x in v.items() if k != key})
    if isinstance(v, list):
        return format_json_value([x for x in v if not (isinstance(x, str) and x == key)])
    raise SqlError(INVALID_PARAMETER_VALUE, "cannot delete from scalar")


def delete_keys(doc: str, keys: list[Any]) -> str:
    """``doc - keys`` (text[]): :func:`delete_key` for each key."""
    v = parse_json(doc)
    drop = {k for k in keys if k is not None}
    if isinstance(v, dict):
        return format_json_value({k: x for k, x in v.items() if k not in drop})
    if isinstance(v, list):
        return format_json_value([x for x in v if not (isinstance(x, str) and x in drop)])
    raise SqlError(INVALID_PARAMETER_VALUE, "cannot delete from scalar")


def delete_index(doc: str, i: int) -> str:
    """``doc - i``: an array without its element ``i`` (negative counts from the end)."""
    v = parse_json(doc)
    if isinstance(v, dict):
        raise SqlError(INVALID_PARAMETER_VALUE, "cannot delete from object using integer index")
    if not isinstance(v, list):
        raise SqlError(INVALID_PARAMETER_VALUE, "cannot delete from scalar")
    if -len(v) <= i < len(v):
        del v[i]
    return format_json_value(v)


def path_index(key: str, position: int) -> int:
    """A path element addressing an array: 22P02 when it is not an integer."""
    i = _int_key(key)
    if i is None:
        raise SqlError(
            INVALID_TEXT_REPRESENTATION,
            f'path element at position {position} is not an integer: "{key}"',
        )
    return i


def jsonb_delete_path(doc: str, path: list[Any]) -> str:
    """``doc #- path``."""
    v = parse_json(doc)
    if not isinstance(v, dict | list):
        raise SqlError(INVALID_PARAMETER_VALUE, "cannot delete path in scalar")
    if not path or not v:
        return doc  # Postgres returns an empty container before looking at the path
    parent: Any = v
    for pos, key in enumerate(path, 1):
        if key is None:
            raise SqlError(NULL_VALUE_NOT_ALLOWED, f"path element at position {pos} is null")
        if pos == len(path):
            break
        if isinstance(parent, dict):
            if key not in parent:
                return doc
            parent = parent[key]
        elif isinstance(parent, list):
            i = path_index(key, pos)
            if not -len(parent) <= i < len(parent):
                return doc
            parent = parent[i]
        else:
            return doc
    last = path[-1]
    if isinstance(parent, dict):
        parent.pop(last, None)
    elif isinstance(parent, list):
        i = path_index(last, len(path))
        if -len(parent) <= i < len(parent):
            del parent[i]
    return format_json_value(v)


# -- binding --------------------------------------------------------------------------------

_SYMBOLS: dict[type, str] = {
    exp.JSONExtract: "->",
    exp.JSONExtractScalar: "->>",
    exp.JSONBExtract: "#>",
    exp.JSONBExtractScalar: "#>>",
    exp.ArrayContainsAll: "@>",
    exp.ArrayContainedBy: "<@",
    exp.JSONBContainsTopKey: "?",
    exp.JSONBContainsAnyTopKeys: "?|",
    exp.JSONBContainsAllTopKeys: "?&",
    exp.JSONBDeleteAtPath: "#-",
}
NODE_TYPES: tuple[type, ...] = (*_SYMBOLS, exp.JSONBPathExists)


def _key_operand(b: ExprBinder, node: exp.Expression, scope: Scope) -> BExpr:
    """The right side of ``->``: sqlglot turns a literal key into a JSONPath."""
    if isinstance(node, exp.JSONPath):
        parts = [p for p in node.expressions if not isinstance(p, exp.JSONPathRoot)]
        if len(parts) == 1 and isinstance(parts[0], exp.JSONPathKey):
            return BConst(T.TEXT, str(parts[0].this))
        if len(parts) == 1 and isinstance(parts[0], exp.JSONPathSubscript):
            return BConst(T.INT4, int(parts[0].this))
        raise unsupported(f"JSON key {node.sql(dialect='postgres')}")
    return b.bind(node, scope)


def _bind_extract_path_call(b: ExprBinder, node: exp.Expression, scope: Scope) -> BExpr:
    """json_extract_path[_text](doc, keys...), which sqlglot parses into a JSON path node."""
    name = "json_extract_path" + ("_text" if isinstance(node, exp.JSONExtractScalar) else "")
    args = [b.bind(node.this, scope)]
    path = node.expression
    if isinstance(path, exp.Variadic):
        from percolator.server.sql.json_functions import bind_variadic

        return bind_variadic(b, name, [*args, b.bind(path.this, scope)])
    if isinstance(path, exp.JSONPath):
        for p in path.expressions:
            if not isinstance(p, exp.JSONPathRoot):
                args.append(BConst(T.TEXT, str(p.this)))
    else:
        args.append(b.bind(path, scope))
    args.extend(b.bind(e, scope) for e in node.expressions)
    return b.call(name, args)


def is_extract_path_call(node: exp.Expression) -> bool:
    """Whether a JSONExtract[Scalar] node is a json_extract_path[_text](...) call: sqlglot marks
    the all-literal form, and keeps the keys after the first in ``expressions`` otherwise."""
    return isinstance(node, exp.JSONExtract | exp.JSONExtractScalar) and (
        node.args.get("only_json_types") is False
        or bool(node.expressions)
        or isinstance(node.expression, exp.Variadic)
    )


def _not_unique(op: str, lt: SqlType, rt: SqlType) -> SqlError:
    return SqlError(
        "42725",
        f"operator is not unique: {lt} {op} {rt}",
        hint="Could not choose a best candidate operator. "
        "You might need to add explicit type casts.",
    )


def bind_operator(b: ExprBinder, node: exp.Expression, scope: Scope) -> BExpr:
    """Bind one of the json operator nodes (:data:`NODE_TYPES`)."""
    if isinstance(node, exp.JSONBPathExists):
        raise unsupported("jsonpath (operator @?)")
    if is_extract_path_call(node):
        return _bind_extract_path_call(b, node, scope)
    op = _SYMBOLS[type(node)]
    left = b.bind(node.this, scope)
    if op in ("->", "->>"):
        right = _key_operand(b, node.expression, scope)
    else:
        right = b.bind(node.expression, scope)
    lt, rt = left.type, right.type
    if op in ("@>", "<@") and (lt.array or rt.array):
        from percolator.server.sql.array_operators import bind_set_operator

        return bind_set_operator(b, op, left, right)
    if lt.id is TypeId.UNKNOWN:
        if op in ("->", "->>", "#>", "#>>") or (rt.id is TypeId.UNKNOWN and op in ("@>", "<@")):
            raise _not_unique(op, lt, rt)
        left = b.coerce(left, T.JSONB)
        lt = left.type
    if lt.array or lt.id not in _JSON_TYPES:
        raise operator_missing(op, lt, rt)
    jt = lt.id
    if op in ("->", "->>"):
        if rt.id is TypeId.UNKNOWN:
            right = b.coerce(right, T.TEXT)
        elif rt.array or (rt.id not in _INTS and rt.id not in (TypeId.TEXT, TypeId.VARCHAR)):
            raise operator_missing(op, lt, rt)
        result = T.TEXT if op == "->>" else SqlType(jt)
        return BCall(result, op, _getter(jt, op == "->>"), [left, right])
    if op in ("#>", "#>>"):
        right = _text_array(b, op, left, right)
        result = T.TEXT if op == "#>>" else SqlType(jt)
        return BCall(result, op, _path_getter(jt, op == "#>>"), [left, right])
    if jt is not TypeId.JSONB:
        raise operator_missing(op, lt, rt)
    if op in ("@>", "<@"):
        if rt.id is TypeId.UNKNOWN:
            right = b.coerce(right, T.JSONB)
        elif rt.array or rt.id is not TypeId.JSONB:
            raise operator_missing(op, lt, rt)
        args = [left, right] if op == "@>" else [right, left]
        return BCall(T.BOOL, op, contains_text, args)
    if op == "?":
        if rt.id is TypeId.UNKNOWN:
            right = b.coerce(right, T.TEXT)
        elif rt.array or rt.id not in (TypeId.TEXT, TypeId.VARCHAR):
            raise operator_missing(op, lt, rt)
        return BCall(T.BOOL, op, jsonb_exists, [left, right])
    right = _text_array(b, op, left, right)
    if op == "#-":
        return BCall(T.JSONB, op, jsonb_delete_path, [left, right])
    return BCall(T.BOOL, op, exists_any if op == "?|" else exists_all, [left, right])


def _subscript_key(b: ExprBinder, key: BExpr) -> BExpr:
    """A jsonb subscript as integer or text, the first its type implicitly casts to (an
    untyped literal is text), as Postgres's jsonb_subscript_transform; else 42804."""
    from percolator.server.sql.casts import can_implicitly_cast

    t = key.type
    if t.id is TypeId.UNKNOWN:
        return b.coerce(key, T.TEXT)
    for target in (T.INT4, T.TEXT):
        if can_implicitly_cast(t, target):
            return b.coerce(key, target)
    raise SqlError(
        DATATYPE_MISMATCH,
        f"subscript type {t} is not supported",
        hint="jsonb subscript must be coercible to only one type, integer or text.",
    )


def bind_subscript(b: ExprBinder, doc: BExpr, subscripts: list[Any]) -> BExpr:
    """``jsonb[key][key]...``: Postgres 14's subscripting, the path ``doc #> keys`` (a NULL
    key gives NULL); slices are 42804. ``subscripts`` are (lower, upper, is_slice) triples."""
    keys: list[BExpr] = []
    for _, key, is_slice in subscripts:
        if is_slice:
            raise SqlError(DATATYPE_MISMATCH, "jsonb subscript does not support slices")
        keys.append(_subscript_key(b, key))
    get = _path_getter(TypeId.JSONB, False)

    def fetch(doc: str, *path: object) -> object:
        return get(doc, [str(k) for k in path])

    return BCall(T.JSONB, "subscript", fetch, [doc, *keys])


def _text_array(b: ExprBinder, op: str, left: BExpr, right: BExpr) -> BExpr:
    if right.type.id is TypeId.UNKNOWN:
        return b.coerce(right, T.TEXT_ARRAY)
    if right.type.array and right.type.id in (TypeId.TEXT, TypeId.VARCHAR):
        return right
    raise operator_missing(op, left.type, right.type)


def bind_concat(b: ExprBinder, left: BExpr, right: BExpr) -> BExpr:
    """``jsonb || jsonb`` (an unknown side read as jsonb)."""
    if left.type.id is TypeId.UNKNOWN:
        left = b.coerce(left, T.JSONB)
    if right.type.id is TypeId.UNKNOWN:
        right = b.coerce(right, T.JSONB)
    if left.type != T.JSONB or right.type != T.JSONB:
        raise operator_missing("||", left.type, right.type)
    return BCall(T.JSONB, "||", jsonb_concat, [left, right])


def bind_minus(b: ExprBinder, left: BExpr, right: BExpr) -> BExpr:
    """``jsonb - text``, ``jsonb - integer``, ``jsonb - text[]``."""
    rt = right.type
    if rt.id is TypeId.UNKNOWN:
        right = b.coerce(right, T.TEXT)
        rt = T.TEXT
    if rt.array and rt.id in (TypeId.TEXT, TypeId.VARCHAR):
        return BCall(T.JSONB, "-", delete_keys, [left, right])
    if not rt.array and rt.id in (TypeId.TEXT, TypeId.VARCHAR):
        return BCall(T.JSONB, "-", delete_key, [left, right])
    if not rt.array and rt.id in _INTS:
        return BCall(T.JSONB, "-", delete_index, [left, right])
    raise operator_missing("-", left.type, rt)
