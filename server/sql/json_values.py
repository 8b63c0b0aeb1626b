"""JSON values as the SQL engine holds them, and SQL values turned into JSON.

A ``json`` value is its input text, kept as written (Postgres's json preserves spacing, key
order and duplicate keys); a ``jsonb`` value is its normalised text (``textio.normalize_jsonb``).
Operators and functions on jsonb parse that text into Python values (``parse_json``: numbers as
Decimal, objects as dicts) and print the result with ``format_json_value``. Those on json read
the raw text of the parts they return (:func:`raw_object`, :func:`raw_array`), since Postgres
returns a json part exactly as it was written.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal
from typing import Any

from percolator.server.sql.errors import (
    INVALID_PARAMETER_VALUE,
    INVALID_TEXT_REPRESENTATION,
    NULL_VALUE_NOT_ALLOWED,
    UNTRANSLATABLE_CHARACTER,
    SqlError,
)
from percolator.server.sql.textio import (
    check_json_strings,
    format_json_value,
    parse_json,
    text_out,
)
from percolator.server.sql.types import SqlType, TypeId

__all__ = [
    "check_escapes",
    "format_json_value",
    "json_kind",
    "jsonb_kind",
    "parse_json",
    "raw_array",
    "raw_object",
    "raw_scalar_text",
    "to_json_text",
    "to_jsonb_value",
]

_WS = re.compile(r"[ \t\n\r]*")
# Decimal numbers so that a number's span is found without float overflow on 1e400.
_decoder = json.JSONDecoder(parse_float=Decimal, parse_int=Decimal)
_json_str = json.JSONEncoder(ensure_ascii=False).encode


def _skip(s: str, i: int) -> int:
    return _WS.match(s, i).end()  # type: ignore[union-attr]


def _value_end(s: str, i: int) -> int:
    """The end of the JSON value starting at ``i`` (no leading whitespace)."""
    return _decoder.raw_decode(s, i)[1]


def raw_object(s: str) -> list[tuple[str, str]] | None:
    """The (key, raw value text) pairs of a json object, duplicates kept in order; None if the
    text is not an object."""
    i = _skip(s, 0)
    if not s.startswith("{", i):
        return None
    pairs: list[tuple[str, str]] = []
    i = _skip(s, i + 1)
    if s.startswith("}", i):
        return pairs
    while True:
        key, i = _decoder.raw_decode(s, i)
        i = _skip(s, i)
        i = _skip(s, i + 1)  # the colon
        end = _value_end(s, i)
        pairs.append((key, s[i:end]))
        i = _skip(s, end)
        if s.startswith("}", i):
            return pairs
        i = _skip(s, i + 1)  # the comma


def raw_array(s: str) -> list[str] | None:
    """The raw element texts of a json array; None if the text is not an array."""
    i = _skip(s, 0)
    if not s.startswith("[", i):
        return None
    items: list[str] = []
    i = _skip(s, i + 1)
    if s.startswith("]", i):
        return items
    while True:
        end = _value_end(s, i)
        items.append(s[i:end])
        i = _skip(s, end)
        if s.startswith("]", i):
            return items
        i = _skip(s, i + 1)


def json_kind(s: str) -> str:
    """json_typeof of json text: object, array, string, number, boolean or null."""
    c = s[_skip(s, 0)]
    return {"{": "object", "[": "array", '"': "string", "t": "boolean", "f": "boolean"}.get(
        c, "null" if c == "n" else "number"
    )


def jsonb_kind(v: object) -> str:
    """jsonb_typeof of a parsed jsonb value."""
    if isinstance(v, dict):
        return "object"
    if isinstance(v, list):
        return "array"
    if isinstance(v, str):
        return "string"
    if isinstance(v, bool):
        return "boolean"
    return "null" if v is None else "number"


def check_escapes(doc: str) -> None:
    """What Postgres's json operators check while they de-escape a document's strings (json
    input does not): 22P02 for a broken surrogate pair, 22P05 for ``\\u0000``."""
    if "\\u" not in doc:
        return
    try:
        check_json_strings(json.loads(doc))
    except ValueError:
        raise SqlError(INVALID_TEXT_REPRESENTATION, "invalid input syntax for type json") from None


def raw_scalar_text(raw: str) -> str | None:
    """``->>`` of a json part: a string's contents, NULL for null, else the text as written."""
    raw = raw.strip(" \t\n\r")
    if raw.startswith('"'):
        text = str(json.loads(raw))
        if "\x00" in text:
            raise SqlError(UNTRANSLATABLE_CHARACTER, "unsupported Unicode escape sequence")
        return text
    return None if raw == "null" else raw


# -- SQL values as JSON ---------------------------------------------------------------------

_NUMBERS = (TypeId.INT2, TypeId.INT4, TypeId.INT8, TypeId.NUMERIC, TypeId.OID)


def _datetime_text(t: SqlType, v: object) -> str:
    """A date/time value in ISO 8601 as Postgres's json output writes it (``T`` separator,
    ``+hh:mm`` offsets)."""
    s = text_out(t, v)
    if s in ("infinity", "-infinity"):
        return s
    if t.id in (TypeId.TIMESTAMP, TypeId.TIMESTAMPTZ):
        date, _, rest = s.partition(" ")
        if t.id is TypeId.TIMESTAMPTZ:
            m = re.search(r"([+-]\d\d)(:\d\d)?(:\d\d)?$", rest)
            if m and m.group(2) is None:
                rest = rest + ":00"
        s = f"{date}T{rest}"
    return s


def to_json_text(t: SqlType, v: object) -> str:
    """``to_json(v)`` for a value of type ``t`` (NULL as ``null``): arrays as ``[1,2]``,
    records as ``{"a":1}``, json as written, jsonb in its output form, numbers bare (a float's
    NaN and infinities as strings), booleans bare, date/times in ISO 8601, others as the JSON
    string of their text output."""
    if v is None:
        return "null"
    if t.array:
        elem = t.element
        return (
            "["
            + ",".join(
                to_json_text(elem, e) if not isinstance(e, list) else to_json_text(t, e) for e in v
            )
            + "]"
        )  # type: ignore[attr-defined]
    tid = t.id
    if tid in (TypeId.JSON, TypeId.JSONB):
        return str(v)
    if tid is TypeId.BOOL:
        return "true" if v else "false"
    if tid in _NUMBERS:
        s = text_out(t, v)
        # numeric's NaN and infinities are not JSON numbers: Postgres writes them as strings.
        return _json_str(s) if s in ("NaN", "Infinity", "-Infinity") else s
    if tid in (TypeId.FLOAT4, TypeId.FLOAT8):
        s = text_out(t, v)
        return _json_str(s) if s in ("NaN", "Infinity", "-Infinity") else s
    if tid in (TypeId.DATE, TypeId.TIMESTAMP, TypeId.TIMESTAMPTZ):
        return _json_str(_datetime_text(t, v))
    if tid is TypeId.RECORD:
        text = record_json_text(t, v)
        if text is not None:
            return text
    return _json_str(text_out(t, v))


def record_json_text(t: SqlType, v: object, separator: str = ",") -> str | None:
    """A record as a json object of its fields (row_to_json); None if its fields are unknown."""
    from percolator.server.sql.set_functions import record_fields

    fields = record_fields(t)
    if fields is None:
        return None
    parts = (
        f"{_json_str(name)}:{to_json_text(ft, fv)}"
        for (name, ft), fv in zip(fields, v, strict=False)  # type: ignore[call-overload]
    )
    return "{" + separator.join(parts) + "}"


def to_jsonb_value(t: SqlType, v: object) -> Any:
    """``to_jsonb(v)`` as a parsed jsonb value (for building objects and arrays)."""
    if v is None:
        return None
    if t.id in (TypeId.JSON, TypeId.JSONB) and not t.array:
        return parse_json(str(v))
    if t.id in _NUMBERS and not t.array:
        d = Decimal(v)  # type: ignore[arg-type]
        return d if d.is_finite() else to_json_text(t, v)[1:-1]
    if t.id is TypeId.BOOL and not t.array:
        return bool(v)
    if t.id in (TypeId.TEXT, TypeId.VARCHAR, TypeId.UNKNOWN, TypeId.NAME) and not t.array:
        return str(v)
    return parse_json(to_json_text(t, v))


def key_text(t: SqlType, v: object, position: int, jsonb: bool = True) -> str:
    """An object key given as an argument of json(b)_build_object: its text output. A NULL
    key is 22023 for jsonb and 22004 for json (Postgres 16's two code paths), arrays and json
    are 22023."""
    if v is None:
        if jsonb:
            raise SqlError(INVALID_PARAMETER_VALUE, f"argument {position}: key must not be null")
        raise SqlError(NULL_VALUE_NOT_ALLOWED, "null value not allowed for object key")
    if t.array or t.id in (TypeId.JSON, TypeId.JSONB, TypeId.RECORD):
        raise SqlError(
            INVALID_PARAMETER_VALUE, "key value must be scalar, not array, composite, or json"
        )
    return text_out(t, v)
