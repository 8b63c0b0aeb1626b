"""Postgres's text format of every SQL type: what ``typoutput`` prints and ``typinput`` parses.

Output is exactly Postgres's with DateStyle ``ISO, MDY`` and IntervalStyle ``postgres``; floats
follow the session's ``extra_float_digits`` (shortest exact digits above zero, the default;
:func:`use_extra_float_digits`); timestamptz is
shown, and read without an explicit offset, in the session's zone
(:func:`time_zones.current_zone`). Input follows
Postgres 16's syntax, raising :class:`SqlError` with Postgres's SQLSTATE and wording.

The per-value paths are chosen once per type: :func:`text_encoder` and :func:`text_decoder`
return a function for one type, and :func:`text_out` / :func:`text_in` are conveniences over
them. Python's ``datetime`` cannot hold years outside 1..9999, so BC dates and years beyond 9999
(which Postgres accepts) are refused with 22008.
"""

from __future__ import annotations

import contextvars
import datetime as dt
import json
import math
import re
import struct
import uuid
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from functools import cache

from percolator.server.sql import time_zones
from percolator.server.sql.errors import (
    DATETIME_FIELD_OVERFLOW,
    FEATURE_NOT_SUPPORTED,
    INVALID_DATETIME_FORMAT,
    INVALID_PARAMETER_VALUE,
    INVALID_TEXT_REPRESENTATION,
    NUMERIC_VALUE_OUT_OF_RANGE,
    UNTRANSLATABLE_CHARACTER,
    SqlError,
)
from percolator.server.sql.types import EnumType, Interval, SqlType, TypeId

UTC = dt.UTC
_WS = " \t\n\r\v\f"  # C isspace(), which Postgres's input functions skip
_F32 = struct.Struct("<f")


def syntax_error(type_name: str, s: str) -> SqlError:
    """22P02 ``invalid input syntax for type X: "s"``, as Postgres words it."""
    msg = f'invalid input syntax for type {type_name}: "{s}"'
    return SqlError(INVALID_TEXT_REPRESENTATION, msg)


def _out_of_range(type_name: str, s: str) -> SqlError:
    return SqlError(NUMERIC_VALUE_OUT_OF_RANGE, f'value "{s}" is out of range for type {type_name}')


# -- output -----------------------------------------------------------------------------------


def _bool_out(v: object) -> str:
    return "t" if v else "f"


def _shortest_format(s: str, max_fixed_exp: int) -> str:
    """Postgres's layout of a shortest round-trip digit string (ryu's): fixed notation when the
    decimal exponent is in [-4, max_fixed_exp), else ``d.ddde+XX``."""
    sign, digits, exponent = Decimal(s).as_tuple()
    assert isinstance(exponent, int)
    ds = "".join(map(str, digits)).rstrip("0")
    exponent += len(digits) - len(ds)
    neg = "-" if sign else ""
    if not ds:
        return neg + "0"
    exp10 = len(ds) - 1 + exponent
    if -4 <= exp10 < max_fixed_exp:
        if exponent >= 0:
            return neg + ds + "0" * exponent
        point = len(ds) + exponent
        if point > 0:
            return f"{neg}{ds[:point]}.{ds[point:]}"
        return f"{neg}0.{'0' * -point}{ds}"
    mant = ds[0] + ("." + ds[1:] if len(ds) > 1 else "")
    return f"{neg}{mant}e{'+' if exp10 >= 0 else '-'}{abs(exp10):02d}"


def float8_out(v: object) -> str:
    """A double as Postgres prints it (shortest exact digits; exponent form from 1e15)."""
    f = float(v)  # type: ignore[arg-type]
    r = repr(f)
    if "e" not in r:
        if r[-1] in "nf":  # nan, inf, -inf
            return "NaN" if f != f else ("Infinity" if f > 0 else "-Infinity")
        if -1e15 < f < 1e15:
            return r[:-2] if r.endswith(".0") else r
        return _shortest_format(r, 15)
    return r  # Python's exponent form (1e+16, 1.5e-05) is Postgres's


def _to_f32(f: float) -> float:
    return _F32.unpack(_F32.pack(f))[0]


def float4_out(v: object) -> str:
    """A real as Postgres prints it: the shortest digits that read back as the same float32."""
    f = float(v)  # type: ignore[arg-type]
    if f != f:
        return "NaN"
    if math.isinf(f):
        return "Infinity" if f > 0 else "-Infinity"
    f = _to_f32(f)
    s = f"{f:.8e}"
    for p in range(1, 9):
        cand = f"{f:.{p - 1}e}"
        try:
            if _to_f32(float(cand)) == f:
                s = cand
                break
        except OverflowError:  # rounded past FLT_MAX
            continue
    return _shortest_format(s, 6)


# The session's extra_float_digits, set by the session whenever it changes (as time_zones does
# for TimeZone; a ContextVar, so each connection's task has its own). Above zero Postgres
# prints the shortest exact digits (float8_out, float4_out); at zero or below it prints
# 15 (float4: 6) + extra_float_digits significant digits with %g.
_extra_float_digits: contextvars.ContextVar[int] = contextvars.ContextVar(
    "percolator_extra_float_digits", default=1
)


def use_extra_float_digits(setting: str) -> None:
    """Make ``setting`` (a validated extra_float_digits) this task's, for float output."""
    _extra_float_digits.set(int(setting))


def float_digits_reduced() -> bool:
    """True while this task's extra_float_digits asks for rounded (not shortest) floats."""
    return _extra_float_digits.get() <= 0


@cache
def _rounded_float_out(single: bool, extra: int) -> Callable[[object], str]:
    """float8out / float4out with extra_float_digits <= 0: ``%.*g`` to DBL_DIG (FLT_DIG)
    plus extra_float_digits significant digits."""
    spec = f".{max((6 if single else 15) + extra, 1)}g"  # C's %.*g (precision 0 acts as 1)

    def out(v: object) -> str:
        f = float(v)  # type: ignore[arg-type]
        if not math.isfinite(f):
            return "NaN" if f != f else ("Infinity" if f > 0 else "-Infinity")
        return format(_to_f32(f) if single else f, spec)

    return out


def numeric_out(v: object) -> str:
    """A Decimal keeping its scale, never in exponent form; Postgres has no negative zero."""
    d = v if isinstance(v, Decimal) else Decimal(v)  # type: ignore[arg-type]
    if not d.is_finite():
        if d.is_nan():
            return "NaN"
        return "Infinity" if d > 0 else "-Infinity"
    if d.is_zero():
        d = d.copy_abs()
    return format(d, "f")


def _str_out(v: object) -> str:
    return v  # type: ignore[return-value]


def _char_out(v: object) -> str:
    s: str = v  # type: ignore[assignment]
    if s and ord(s[0]) >= 0x80:
        return f"\\{ord(s[0]):03o}"  # a byte with the high bit set, as charout prints it
    return s


def _bytea_out(v: object) -> str:
    return "\\x" + bytes(v).hex()  # type: ignore[call-overload]


def _date_out(v: object) -> str:
    return v.isoformat()  # type: ignore[attr-defined]


def _time_out(v: object) -> str:
    s: str = v.isoformat()  # type: ignore[attr-defined]
    return s.rstrip("0") if len(s) > 8 else s


def _timestamp_out(v: object) -> str:
    s: str = v.isoformat(" ")  # type: ignore[attr-defined]
    return s.rstrip("0") if len(s) > 19 else s


def _timestamptz_out(v: object) -> str:
    ts: dt.datetime = v  # type: ignore[assignment]
    if ts.tzinfo is None:
        raise TypeError("timestamptz value without a time zone")
    zone = time_zones.current_zone()
    if zone is UTC:
        s = ts.astimezone(UTC).replace(tzinfo=None).isoformat(" ")
        return (s.rstrip("0") if len(s) > 19 else s) + "+00"
    local = time_zones.to_local(ts, zone)
    s = local.isoformat(" ")
    offset = time_zones.utc_offset(ts, zone)
    return (s.rstrip("0") if len(s) > 19 else s) + time_zones.offset_text(offset)


def _ctrunc_divmod(a: int, b: int) -> tuple[int, int]:
    """C's truncating division, which Postgres's interval fields rely on."""
    q = abs(a) // b
    q = -q if a < 0 else q
    return q, a - q * b


def interval_out(v: object) -> str:
    """An interval in IntervalStyle ``postgres`` (EncodeInterval, INTSTYLE_POSTGRES)."""
    iv: Interval = v  # type: ignore[assignment]
    year, mon = _ctrunc_divmod(iv.months, 12)
    hour, rest = _ctrunc_divmod(iv.microseconds, 3_600_000_000)
    minute, rest = _ctrunc_divmod(rest, 60_000_000)
    sec, fsec = _ctrunc_divmod(rest, 1_000_000)
    parts: list[str] = []
    is_before = False
    for value, unit in ((year, "year"), (mon, "mon"), (iv.days, "day")):
        if value == 0:
            continue
        plus = "+" if is_before and value > 0 else ""
        parts.append(f"{plus}{value} {unit}{'' if value == 1 else 's'}")
        # Each nonzero field decides whether the next positive one gets a "+".
        is_before = value < 0
    if not parts or iv.microseconds != 0:
        minus = iv.microseconds < 0
        sign = "-" if minus else ("+" if is_before else "")
        t = f"{sign}{abs(hour):02d}:{abs(minute):02d}:{abs(sec):02d}"
        if fsec:
            t += f".{abs(fsec):06d}".rstrip("0")
        parts.append(t)
    return " ".join(parts)


def _uuid_out(v: object) -> str:
    return str(v)


_ARRAY_QUOTE = re.compile(r'[{}",\\ \t\n\r\v\f]')


def _array_elem_quote(s: str) -> str:
    if s == "" or _ARRAY_QUOTE.search(s) is not None or s.lower() == "null":
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return s


def _array_encoder(elem_out: Callable[[object], str]) -> Callable[[object], str]:
    def out(v: object) -> str:
        items = []
        for e in v:  # type: ignore[attr-defined]
            if e is None:
                items.append("NULL")
            elif isinstance(e, list):
                items.append(out(e))
            else:
                items.append(_array_elem_quote(elem_out(e)))
        return "{" + ",".join(items) + "}"

    return out


def _vector_out(v: object) -> str:
    return " ".join(map(str, v))  # type: ignore[call-overload]


def _record_out(v: object) -> str:
    """A row whose fields are already text (or None): ``(1,"a b",)``. A record of no known
    field types (the rows of one column disagreed on them) has its fields printed by their
    values' kinds."""
    items = []
    for f in v:  # type: ignore[attr-defined]
        if f is None:
            items.append("")
            continue
        if not isinstance(f, str):
            f = _untyped_out(f)
        if f == "" or re.search(r'[",\\() \t\n\r\v\f]', f):
            items.append('"' + f.replace("\\", "\\\\").replace('"', '""') + '"')
        else:
            items.append(f)
    return "(" + ",".join(items) + ")"


def _untyped_out(v: object) -> str:
    """The text of a value whose SQL type is not at hand, chosen by its Python type."""
    if isinstance(v, bool):
        return _bool_out(v)
    if isinstance(v, float):
        return float8_out(v)
    if isinstance(v, Decimal):
        return numeric_out(v)
    if isinstance(v, tuple):
        return _record_out(v)
    if isinstance(v, list):
        return _array_encoder(_untyped_out)(v)
    if isinstance(v, bytes):
        return _bytea_out(v)
    if isinstance(v, dt.datetime):
        return _timestamptz_out(v) if v.tzinfo is not None else _timestamp_out(v)
    if isinstance(v, dt.date):
        return _date_out(v)
    return str(v)


def _void_out(v: object) -> str:
    return ""


_OUT: dict[TypeId, Callable[[object], str]] = {
    TypeId.BOOL: _bool_out,
    TypeId.BYTEA: _bytea_out,
    TypeId.CHAR: _char_out,
    TypeId.NAME: _str_out,
    TypeId.INT2: str,
    TypeId.INT4: str,
    TypeId.INT8: str,
    TypeId.OID: str,
    TypeId.REGPROC: str,
    TypeId.REGCLASS: str,
    TypeId.REGTYPE: str,
    TypeId.REGNAMESPACE: str,
    TypeId.INT2VECTOR: _vector_out,
    TypeId.OIDVECTOR: _vector_out,
    TypeId.TEXT: _str_out,
    TypeId.VARCHAR: _str_out,
    TypeId.JSON: _str_out,
    TypeId.JSONB: _str_out,
    TypeId.UNKNOWN: _str_out,
    TypeId.FLOAT4: float4_out,
    TypeId.FLOAT8: float8_out,
    TypeId.NUMERIC: numeric_out,
    TypeId.DATE: _date_out,
    TypeId.TIME: _time_out,
    TypeId.TIMESTAMP: _timestamp_out,
    TypeId.TIMESTAMPTZ: _timestamptz_out,
    TypeId.INTERVAL: interval_out,
    TypeId.UUID: _uuid_out,
    TypeId.VOID: _void_out,
    TypeId.RECORD: _record_out,
}


def _bpchar_encoder(n: int | None) -> Callable[[object], str]:
    if n is None:
        return _str_out

    def out(v: object) -> str:
        s: str = v  # type: ignore[assignment]
        return s if len(s) >= n else s.ljust(n)

    return out


def text_encoder(t: SqlType) -> Callable[[object], str]:
    """The function printing non-NULL values of ``t`` in Postgres's text format."""
    if t.id in _FLOAT_TYPES:
        extra = _extra_float_digits.get()
        if extra <= 0:  # not the shared (cached) encoder: this session's digits
            out = _rounded_float_out(t.id is TypeId.FLOAT4, extra)
            return _array_encoder(out) if t.array else out
    return _text_encoder(t)


@cache
def _text_encoder(t: SqlType) -> Callable[[object], str]:
    if t.array:
        return _array_encoder(_text_encoder(t.element))
    if t.id is TypeId.BPCHAR:
        return _bpchar_encoder(t.length)
    if isinstance(t.id, EnumType):
        return _str_out  # enum_out: the label
    if t.id is TypeId.RECORD and t.typmod >= 0:
        return _composite_encoder(t)
    return _OUT[t.id]


def _composite_encoder(t: SqlType) -> Callable[[object], str]:
    """record_out of a record whose field types are known: each field's text, then the row."""
    from percolator.server.sql.set_functions import record_fields

    encoders = [_text_encoder(ft) for _, ft in record_fields(t) or ()]

    def out(v: object) -> str:
        fields = zip(encoders, v, strict=True)  # type: ignore[call-overload]
        return _record_out([None if f is None else enc(f) for enc, f in fields])

    return out


_FLOAT_TYPES = frozenset({TypeId.FLOAT4, TypeId.FLOAT8})


def text_out(t: SqlType, v: object) -> str:
    """A non-NULL value of ``t`` in Postgres's text format."""
    return text_encoder(t)(v)


# -- input: numbers ---------------------------------------------------------------------------

_INT_RE = re.compile(
    r"[ \t\n\r\v\f]*([+-]?)(?:(0[xX](?:_?[0-9a-fA-F])+)|(0[oO](?:_?[0-7])+)|(0[bB](?:_?[01])+)"
    r"|([0-9](?:_?[0-9])*))[ \t\n\r\v\f]*"
)


def _int_parser(type_name: str, lo: int, hi: int) -> Callable[[str], object]:
    def parse(s: str) -> object:
        m = _INT_RE.fullmatch(s)
        if m is None:
            raise syntax_error(type_name, s)
        sign, hx, octal, binary, dec = m.groups()
        if dec is not None:
            v = int(dec)
        else:
            v = int(hx or octal or binary, 0)
        if sign == "-":
            v = -v
        if not lo <= v <= hi:
            raise _out_of_range(type_name, s)
        return v

    return parse


_int2_in = _int_parser("smallint", -(1 << 15), (1 << 15) - 1)
_int4_in = _int_parser("integer", -(1 << 31), (1 << 31) - 1)
_int8_in = _int_parser("bigint", -(1 << 63), (1 << 63) - 1)
_oid_signed = _int_parser("oid", -(1 << 31), (1 << 32) - 1)


def _oid_in(s: str) -> object:
    v: int = _oid_signed(s)  # type: ignore[assignment]
    return v + (1 << 32) if v < 0 else v  # oidin takes negatives as their unsigned twin


_FLOAT_RE = re.compile(
    r"[ \t\n\r\v\f]*([+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
    r"|(?i:nan|inf|infinity)))[ \t\n\r\v\f]*"
)


def _float_parser(type_name: str, single: bool) -> Callable[[str], object]:
    def parse(s: str) -> object:
        m = _FLOAT_RE.fullmatch(s)
        if m is None:
            raise syntax_error(type_name, s)
        body = m.group(1)
        f = float(body)
        if body[-1] in "0123456789.":
            if math.isinf(f):
                raise SqlError(
                    NUMERIC_VALUE_OUT_OF_RANGE, f'"{s}" is out of range for type {type_name}'
                )
            if f == 0.0 and any(c in "123456789" for c in body.split("e")[0].split("E")[0]):
                raise SqlError(
                    NUMERIC_VALUE_OUT_OF_RANGE, f'"{s}" is out of range for type {type_name}'
                )
            if single:
                try:
                    f = _to_f32(f)
                except OverflowError:
                    raise SqlError(
                        NUMERIC_VALUE_OUT_OF_RANGE, f'"{s}" is out of range for type {type_name}'
                    ) from None
                if f == 0.0 and any(c in "123456789" for c in re.split("[eE]", body)[0]):
                    raise SqlError(
                        NUMERIC_VALUE_OUT_OF_RANGE, f'"{s}" is out of range for type {type_name}'
                    )
        elif body[0] == "+" and body[1:].lower() == "nan":
            raise syntax_error(type_name, s)
        return f

    return parse


_float4_in = _float_parser("real", True)
_float8_in = _float_parser("double precision", False)

_NUMERIC_RE = re.compile(
    r"[ \t\n\r\v\f]*([+-]?)(?:([0-9](?:_?[0-9])*(?:\.(?:[0-9](?:_?[0-9])*)?)?|\.[0-9](?:_?[0-9])*)"
    r"([eE][+-]?[0-9]+)?|(0[xX](?:_?[0-9a-fA-F])+|0[oO](?:_?[0-7])+|0[bB](?:_?[01])+)"
    r"|((?i:nan|inf|infinity)))[ \t\n\r\v\f]*"
)
# numeric's limits: 131072 digits before the decimal point, 16383 after.
_NUMERIC_MAX_WEIGHT = 131072


def numeric_in(s: str) -> Decimal:
    """Postgres's numeric input (also NaN, Infinity, exponents, PG16 underscores and 0x/0o/0b)."""
    m = _NUMERIC_RE.fullmatch(s)
    if m is None:
        raise syntax_error("numeric", s)
    sign, body, exp, based, special = m.groups()
    if special is not None:
        low = special.lower()
        if low == "nan":
            if sign:
                raise syntax_error("numeric", s)
            return Decimal("NaN")
        return Decimal("-Infinity" if sign == "-" else "Infinity")
    if based is not None:
        return Decimal(int(sign + based, 0))
    d = Decimal(sign + body.replace("_", "") + (exp or ""))
    if d and d.adjusted() >= _NUMERIC_MAX_WEIGHT:
        raise SqlError(NUMERIC_VALUE_OUT_OF_RANGE, "value overflows numeric format")
    return d


_TRUE = ("true", "yes", "on", "1")
_FALSE = ("false", "no", "off", "0")


def _bool_in(s: str) -> object:
    v = s.strip(_WS).lower()
    if v:
        # Any unique prefix of a spelling is accepted ("of" and "on" need two letters).
        if v in ("t", "tr", "tru", "true", "y", "ye", "yes", "on", "1"):
            return True
        if v in ("f", "fa", "fal", "fals", "false", "n", "no", "of", "off", "0"):
            return False
    raise syntax_error("boolean", s)


# -- input: strings and bytes -----------------------------------------------------------------


def _name_in(s: str) -> object:
    b = s.encode()
    if len(b) <= 63:
        return s
    return b[:63].decode(errors="ignore")  # NAMEDATALEN - 1 bytes, on a character boundary


def _char_in(s: str) -> object:
    if len(s) == 4 and s[0] == "\\" and all(c in "01234567" for c in s[1:]):
        return chr(int(s[1:], 8) & 0xFF)
    if not s:
        return ""
    c = s[0]
    return c if ord(c) < 0x80 else chr(c.encode()[0])


_HEX_WS = re.compile(r"[ \t\n\r\v\f]+")


def bytea_in(s: str) -> bytes:
    """The hex (``\\x0102``) or escape (``a\\000b``) format of bytea."""
    if s.startswith("\\x"):
        h = s[2:]
        if any(c in _WS for c in h):
            h = _HEX_WS.sub("", h)
        try:
            return bytes.fromhex(h)
        except ValueError:
            for c in h:
                if c not in "0123456789abcdefABCDEF":
                    raise SqlError(
                        INVALID_PARAMETER_VALUE, f'invalid hexadecimal digit: "{c}"'
                    ) from None
            raise SqlError(
                INVALID_PARAMETER_VALUE, "invalid hexadecimal data: odd number of digits"
            ) from None
    if "\\" not in s:
        return s.encode()
    out = bytearray()
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if c != "\\":
            out += c.encode()
            i += 1
        elif s[i + 1 : i + 2] == "\\":
            out.append(0x5C)
            i += 2
        elif i + 3 < n and s[i + 1] in "0123" and s[i + 2] in "01234567" and s[i + 3] in "01234567":
            out.append(int(s[i + 1 : i + 4], 8))
            i += 4
        else:
            raise SqlError(INVALID_TEXT_REPRESENTATION, "invalid input syntax for type bytea")
    return bytes(out)


_UUID_RE = re.compile(r"[0-9a-fA-F]{4}(?:-?[0-9a-fA-F]{4}){7}")


def _uuid_in(s: str) -> object:
    body = s[1:-1] if s[:1] == "{" and s[-1:] == "}" else s
    if _UUID_RE.fullmatch(body) is None:
        raise syntax_error("uuid", s)
    return uuid.UUID(hex=body.replace("-", ""))


# -- input: json ------------------------------------------------------------------------------


def _reject_constant(name: str) -> object:
    raise ValueError(name)


_json_validate = json.JSONDecoder(parse_constant=_reject_constant)


def _json_in(s: str) -> object:
    try:
        _json_validate.decode(s)
    except (ValueError, RecursionError):
        raise syntax_error("json", s) from None
    return s


def _dedupe_pairs(pairs: list[tuple[str, object]]) -> dict[str, object]:
    return dict(pairs)  # a later duplicate key wins, as in jsonb


_jsonb_decoder = json.JSONDecoder(
    object_pairs_hook=_dedupe_pairs,
    parse_float=Decimal,
    parse_int=Decimal,
    parse_constant=_reject_constant,
)


def check_json_strings(obj: object) -> None:
    """Every string of a parsed json value can be stored: 22P05 for ``\u0000``, ValueError
    for a lone surrogate (the caller's 22P02)."""
    if isinstance(obj, str):
        if "\x00" in obj:
            raise SqlError(UNTRANSLATABLE_CHARACTER, "unsupported Unicode escape sequence")
        try:
            obj.encode()
        except UnicodeEncodeError:
            raise ValueError("lone surrogate") from None
    elif isinstance(obj, dict):
        for k, v in obj.items():
            check_json_strings(k)
            check_json_strings(v)
    elif isinstance(obj, list):
        for v in obj:
            check_json_strings(v)


def parse_json(text: str) -> object:
    """JSON text as Python values the way jsonb holds it: numbers as Decimal, objects as dicts
    keeping the last of duplicate keys. Raises 22P02 for text that is not JSON."""
    try:
        obj = _jsonb_decoder.decode(text)
        if "\\u" in text:  # escapes are the only way to a NUL or a lone surrogate
            check_json_strings(obj)
    except (ValueError, RecursionError):
        raise syntax_error("json", text) from None
    return obj


def _jsonb_key_order(k: str) -> tuple[int, bytes]:
    b = k.encode()
    return len(b), b  # jsonb orders object keys by length first, then bytewise


_json_str = json.JSONEncoder(ensure_ascii=False).encode


def format_json_value(obj: object) -> str:
    """Python JSON values in jsonb's output form: ``{"a": 1, "b": [1, 2]}``, keys in jsonb's
    order, numbers as numeric prints them."""
    if isinstance(obj, str):
        return _json_str(obj)
    if obj is None:
        return "null"
    if obj is True:
        return "true"
    if obj is False:
        return "false"
    if isinstance(obj, Decimal):
        return numeric_out(obj)
    if isinstance(obj, int):
        return str(obj)
    if isinstance(obj, float):
        return float8_out(obj)
    if isinstance(obj, dict):
        keys = sorted(obj, key=_jsonb_key_order)
        return "{" + ", ".join(f"{_json_str(k)}: {format_json_value(obj[k])}" for k in keys) + "}"
    if isinstance(obj, list | tuple):
        return "[" + ", ".join(format_json_value(v) for v in obj) + "]"
    raise TypeError(f"not a JSON value: {type(obj).__name__}")


def normalize_jsonb(text: str) -> str:
    """JSON text in jsonb's normalised output form; 22P02 if it is not JSON."""
    return format_json_value(parse_json(text))


# -- input: dates and times -------------------------------------------------------------------

_MONTHS = {
    "jan": 1, "january": 1, "feb": 2, "february": 2, "mar": 3, "march": 3, "apr": 4,
    "april": 4, "may": 5, "jun": 6, "june": 6, "jul": 7, "july": 7, "aug": 8, "august": 8,
    "sep": 9, "sept": 9, "september": 9, "oct": 10, "october": 10, "nov": 11, "november": 11,
    "dec": 12, "december": 12,
}  # fmt: skip
_WEEKDAYS = frozenset(
    "sun sunday mon monday tue tues tuesday wed wednesday thu thur thurs thursday fri friday "
    "sat saturday".split()
)
_TIME_RE = re.compile(
    r"(\d{1,2}):(\d{1,2})(?::(\d{1,2})(?:[.,](\d*))?)?"
    r"(z|[+-]\d{1,2}(?::?\d{2}(?::?\d{2})?)?)?"
)
_DATE_SEP_RE = re.compile(r"([0-9a-z]+)([-/.])([0-9a-z]+)\2([0-9a-z]+)")
_ZONE_RE = re.compile(r"([+-])(\d{1,2})(?::?(\d{2}))?(?::?(\d{2}))?")
_UNIX_EPOCH = dt.datetime(1970, 1, 1)


class _DateTimeParse:
    """The fields found in a date/time string. ``fields`` holds which of year ("y"), month
    ("m") and day ("d") are set, as Postgres's fmask does."""

    __slots__ = ("bc", "day", "doy", "fields", "month", "offset", "pm", "text_month",
                 "time_us", "two_digit_year", "year", "zone_name")  # fmt: skip

    def __init__(self) -> None:
        self.year: int | None = None
        self.month: int | None = None
        self.day: int | None = None
        self.doy: int | None = None
        self.time_us: int | None = None
        self.offset: int | None = None  # seconds east of UTC
        self.zone_name: str | None = None
        self.bc = False
        self.pm: bool | None = None
        self.fields: set[str] = set()
        self.text_month = False
        self.two_digit_year = False

    def set_date(self, year: int, month: int, day: int, bad: SqlError) -> None:
        """All three date fields at once (a separated or run-together date)."""
        if self.fields:
            raise bad
        self.year, self.month, self.day = year, month, day
        self.fields = {"y", "m", "d"}


def _zone_offset(tok: str) -> int | None:
    if tok == "z":
        return 0
    m = _ZONE_RE.fullmatch(tok)
    if m is None:
        return None
    sign, hh, mm, ss = m.groups()
    secs = int(hh) * 3600 + int(mm or 0) * 60 + int(ss or 0)
    return -secs if sign == "-" else secs


def _year_of(tok: str) -> int:
    y = int(tok)
    if len(tok) <= 2:  # two-digit years: 70..99 -> 19xx, 00..69 -> 20xx
        y += 1900 if y >= 70 else 2000
    return y


def _decode_number(p: _DateTimeParse, tok: str, bad: SqlError) -> None:
    """A run of digits alone: which date field it is, from those seen so far (DecodeNumber,
    DateStyle MDY), or a run-together date or time (DecodeNumberField)."""
    val, flen, have = int(tok), len(tok), p.fields
    if flen >= 6 and (have != {"y", "m", "d"} or p.time_us is None):
        _decode_number_field(p, tok, bad)
        return
    if flen == 3 and have == {"y"} and 1 <= val <= 366:
        p.doy, p.fields = val, {"y", "m", "d"}  # yyyy.ddd: a day of the year
        return
    if not have:
        field = "y" if flen >= 3 else "m"
    elif have == {"y"} or have == {"d"}:
        field = "m"
    elif have == {"m"}:
        field = "y" if p.text_month and flen >= 3 else "d"
    elif have == {"y", "m"}:
        if p.text_month and flen >= 3 and p.two_digit_year:
            # DD-MON-YYYY: the first number, taken for a two-digit year, was the day.
            p.day, p.year, p.two_digit_year = p.year, val, False
            have.add("d")
            return
        field = "d"
    elif have == {"m", "d"}:
        field = "y"
    elif have == {"y", "m", "d"}:
        _decode_number_field(p, tok, bad)
        return
    else:
        raise bad
    have.add(field)
    if field == "y":
        p.year, p.two_digit_year = val, flen <= 2
    elif field == "m":
        p.month = val
    else:
        p.day = val


def _decode_number_field(p: _DateTimeParse, tok: str, bad: SqlError) -> None:
    """Run-together digits: yyyymmdd / yymmdd while the date is incomplete, else hhmmss or
    hhmm (DecodeNumberField)."""
    if p.fields != {"y", "m", "d"} and len(tok) >= 6:
        p.set_date(int(tok[:-4]), int(tok[-4:-2]), int(tok[-2:]), bad)
        p.two_digit_year = len(tok) == 6
        return
    if p.time_us is None and len(tok) in (4, 6):
        h, mi, sec = int(tok[:2]), int(tok[2:4]), int(tok[4:] or 0)
        p.time_us = ((h * 60 + mi) * 60 + sec) * 1_000_000
        return
    raise bad


def _decode_text_month(p: _DateTimeParse, month: int, bad: SqlError) -> None:
    """A month name; a number read as the month before it was the day (08 Jan 1999)."""
    if "m" in p.fields:
        if p.text_month or "d" in p.fields or not 1 <= (p.month or 0) <= 31:
            raise bad
        p.day = p.month
        p.fields.add("d")
    p.fields.add("m")
    p.text_month = True
    p.month = month


def _decode_separated_date(p: _DateTimeParse, tok: str, bad: SqlError) -> bool:
    """A date with separators (2024-01-31, 1/31/2024, 31-jan-2024, jan-31-2024, 1999.008);
    False if ``tok`` is not one."""
    if (m := re.fullmatch(r"(\d{4,})\.(\d{3})", tok)) is not None and not p.fields:
        p.year, p.doy, p.fields = int(m[1]), int(m[2]), {"y", "m", "d"}
        return True
    m = _DATE_SEP_RE.fullmatch(tok)
    if m is None:
        return False
    a, _, b, c = m.groups()
    if (a.isalpha() and a not in _MONTHS) or (b.isalpha() and b not in _MONTHS):
        return False  # a zone name (america/indiana/knox)
    try:
        if a.isalpha():  # jan-08-1999
            p.set_date(_year_of(c), _MONTHS[a], int(b), bad)
        elif b.isalpha():  # 2024-jan-02 or 02-jan-2024
            if len(a) >= 3:
                p.set_date(int(a), _MONTHS[b], int(c), bad)
            else:
                p.set_date(_year_of(c), _MONTHS[b], int(a), bad)
        elif len(a) >= 3:  # ISO year first
            p.set_date(int(a), int(b), int(c), bad)
        else:  # DateStyle MDY
            p.set_date(_year_of(c), int(a), int(b), bad)
    except (KeyError, ValueError):
        raise bad from None
    return True


def _relative_day(p: _DateTimeParse, word: str, bad: SqlError) -> None:
    """today / tomorrow / yesterday among other fields: that date of the session's zone."""
    today = time_zones.to_local(dt.datetime.now(UTC)).date()
    d = today + dt.timedelta(days={"today": 0, "tomorrow": 1, "yesterday": -1}[word])
    p.set_date(d.year, d.month, d.day, bad)


def _decode_time(p: _DateTimeParse, m: re.Match[str], s: str, bad: SqlError) -> None:
    if p.time_us is not None:
        raise bad
    hh, mi, ss, frac, zone = m.groups()
    h, mnt, sec = int(hh), int(mi), int(ss or 0)
    us = round(Fraction(int(frac), 10 ** len(frac)) * 1_000_000) if frac else 0
    if h > 24 or mnt > 59 or sec > 60 or (h == 24 and (mnt or sec or us)):
        raise SqlError(DATETIME_FIELD_OVERFLOW, f'date/time field value out of range: "{s}"')
    p.time_us = ((h * 60 + mnt) * 60 + sec) * 1_000_000 + us
    if zone:
        p.offset = _zone_offset(zone)


_ZONE_WORD = re.compile(r"[a-z][a-z0-9/_+\-:]*")


def _parse_datetime(s: str, type_name: str) -> _DateTimeParse:
    bad = SqlError(INVALID_DATETIME_FORMAT, f'invalid input syntax for type {type_name}: "{s}"')
    p = _DateTimeParse()
    low = s.strip(_WS).lower().replace(",", " ")
    low = re.sub(r"(\d)t(\d)", r"\1 \2", low)
    low = re.sub(r"(\d)(am|pm)\b", r"\1 \2", low)  # 5:32pm
    low = re.sub(r"^(\d{4}-\d{1,2}-\d{1,2})([+-]\d)", r"\1 \2", low)  # 1997-01-02+00
    low = re.sub(r"(\d)\s+([+-]\d)", r"\1\2", low) if ":" in low else low
    tokens = low.split()
    orig_tokens = s.strip(_WS).replace(",", " ").split()
    if not tokens:
        raise bad
    for i, tok in enumerate(tokens):
        if ":" in tok and (m := _TIME_RE.fullmatch(tok)) is not None:
            _decode_time(p, m, s, bad)
        elif _decode_separated_date(p, tok, bad):
            pass
        elif tok.isdigit():
            _decode_number(p, tok, bad)
        elif tok in _MONTHS:
            _decode_text_month(p, _MONTHS[tok], bad)
        elif tok in ("bc", "ad"):
            p.bc = tok == "bc"
        elif tok in ("am", "pm"):
            p.pm = tok == "pm"
        elif tok in _WEEKDAYS:
            pass
        elif tok in ("today", "tomorrow", "yesterday"):
            _relative_day(p, tok, bad)
        elif re.fullmatch(r"j\d+", tok) and int(tok[1:]) > 1721425:  # a Julian day
            d = dt.date.fromordinal(int(tok[1:]) - 1721425)
            p.set_date(d.year, d.month, d.day, bad)
        elif tok in ("utc", "gmt", "z", "zulu", "ut"):
            p.offset = 0
        elif (off := _zone_offset(tok)) is not None:
            p.offset = off
        elif _ZONE_WORD.fullmatch(tok):
            # A zone: an abbreviation (CEST), an IANA name or a POSIX string (GMT+8, PST8PDT).
            p.zone_name = orig_tokens[i] if len(orig_tokens) == len(tokens) else tok
        else:
            raise bad
    if p.two_digit_year and p.year is not None:
        p.year += 2000 if p.year < 70 else 1900 if p.year < 100 else 0
    if p.doy is not None and p.year is not None:
        if not 1 <= p.doy <= 366:
            raise bad
        d = dt.date(p.year, 1, 1) + dt.timedelta(days=p.doy - 1)
        p.month, p.day = d.month, d.day
    if p.pm is not None and p.time_us is not None:
        h = p.time_us // 3_600_000_000
        if not 1 <= h <= 12:
            raise SqlError(DATETIME_FIELD_OVERFLOW, f'date/time field value out of range: "{s}"')
        if p.pm and h != 12:
            p.time_us += 12 * 3_600_000_000
        elif not p.pm and h == 12:
            p.time_us -= 12 * 3_600_000_000
    return p


def _make_date(p: _DateTimeParse, s: str, type_name: str) -> dt.date:
    if p.year is None or p.month is None or p.day is None:
        raise SqlError(INVALID_DATETIME_FORMAT, f'invalid input syntax for type {type_name}: "{s}"')
    year = p.year
    if p.bc or year == 0:
        if year == 0:
            raise SqlError(DATETIME_FIELD_OVERFLOW, f'date/time field value out of range: "{s}"')
        raise SqlError(DATETIME_FIELD_OVERFLOW, f'{_range_word(type_name)} out of range: "{s}"')
    if not 1 <= p.month <= 12 or not 1 <= p.day <= 31:
        raise SqlError(DATETIME_FIELD_OVERFLOW, f'date/time field value out of range: "{s}"')
    if year > 9999:
        raise SqlError(DATETIME_FIELD_OVERFLOW, f'{_range_word(type_name)} out of range: "{s}"')
    try:
        return dt.date(year, p.month, p.day)
    except ValueError:
        raise SqlError(
            DATETIME_FIELD_OVERFLOW, f'date/time field value out of range: "{s}"'
        ) from None


def _range_word(type_name: str) -> str:
    return "date" if type_name == "date" else "timestamp"


def _special_datetime(low: str, type_name: str, s: str) -> dt.datetime | None:
    """'epoch', 'now', 'today', ...: a wall-clock time of the session's zone ('epoch' is
    1970-01-01 00:00 UTC for a timestamptz, which the caller handles)."""
    if low == "epoch":
        return _UNIX_EPOCH
    now = time_zones.to_local(dt.datetime.now(UTC))
    if low == "now":
        return now
    today = dt.datetime(now.year, now.month, now.day)
    if low == "today":
        return today
    if low == "tomorrow":
        return today + dt.timedelta(days=1)
    if low == "yesterday":
        return today - dt.timedelta(days=1)
    if low in ("infinity", "+infinity", "-infinity"):
        raise SqlError(FEATURE_NOT_SUPPORTED, f'{type_name} value "{s}" is not supported')
    return None


def _date_in(s: str) -> object:
    if (m := _ISO_DATE.fullmatch(s)) is not None:
        try:
            return dt.date(int(m[1]), int(m[2]), int(m[3]))
        except ValueError:
            pass  # the general path words the error
    special = _special_datetime(s.strip(_WS).lower(), "date", s)
    if special is not None:
        return special.date()
    p = _parse_datetime(s, "date")
    return _make_date(p, s, "date")


_ISO_DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})")
_ISO_TS = re.compile(r"(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?")


def _timestamp_parts(s: str, type_name: str) -> tuple[dt.datetime, _DateTimeParse | None]:
    special = _special_datetime(s.strip(_WS).lower(), type_name, s)
    if special is not None:
        return special, None
    p = _parse_datetime(s, type_name)
    d = _make_date(p, s, type_name)
    us = p.time_us or 0
    return dt.datetime(d.year, d.month, d.day) + dt.timedelta(microseconds=us), p


def _timestamp_in(s: str) -> object:
    if (m := _ISO_TS.fullmatch(s)) is not None:
        try:
            return dt.datetime(
                int(m[1]), int(m[2]), int(m[3]), int(m[4]), int(m[5]), int(m[6]),
                int(m[7].ljust(6, "0")) if m[7] else 0,
            )  # fmt: skip
        except ValueError:
            pass
    ts, _ = _timestamp_parts(s, "timestamp")  # a time zone in the input is ignored, as in PG
    if ts.year > 9999:
        raise SqlError(DATETIME_FIELD_OVERFLOW, f'timestamp out of range: "{s}"')
    return ts


def _timestamptz_in(s: str) -> object:
    zone = time_zones.current_zone()
    if (m := _ISO_TS.fullmatch(s)) is not None:
        try:
            local = dt.datetime(
                int(m[1]), int(m[2]), int(m[3]), int(m[4]), int(m[5]), int(m[6]),
                int(m[7].ljust(6, "0")) if m[7] else 0,
            )  # fmt: skip
            return time_zones.from_local(local, zone)
        except ValueError:
            pass
    ts, p = _timestamp_parts(s, "timestamp with time zone")
    if p is None and s.strip(_WS).lower() == "epoch":
        zone = UTC  # 'epoch' is an instant, not a wall-clock time
    if p is not None and p.offset is not None:
        ts -= dt.timedelta(seconds=p.offset)
    elif p is not None and p.zone_name is not None:
        # A zone named in the value: an abbreviation (CEST), an IANA name or a POSIX string.
        ts = time_zones.from_local(ts, time_zones.lookup_zone(p.zone_name)).replace(tzinfo=None)
    else:
        # No zone in the value: a wall-clock time of the session's zone.
        ts = time_zones.from_local(ts, zone).replace(tzinfo=None)
    if not dt.datetime(1, 1, 1) <= ts <= dt.datetime(9999, 12, 31, 23, 59, 59, 999999):
        raise SqlError(DATETIME_FIELD_OVERFLOW, f'timestamp out of range: "{s}"')
    return ts.replace(tzinfo=UTC)


def _time_in(s: str) -> object:
    low = s.strip(_WS).lower()
    if low == "allballs":
        return dt.time(0)
    if low == "now":
        return time_zones.to_local(dt.datetime.now(UTC)).time()
    p = _parse_datetime(s, "time without time zone")
    if p.time_us is None:
        raise SqlError(INVALID_DATETIME_FORMAT, f'invalid input syntax for type time: "{s}"')
    if p.time_us >= 86_400_000_000:
        raise SqlError(
            FEATURE_NOT_SUPPORTED, f'time value "{s}" is not supported (24:00:00 is not)'
        )
    secs, us = divmod(p.time_us, 1_000_000)
    mins, sec = divmod(secs, 60)
    hours, mins = divmod(mins, 60)
    return dt.time(hours, mins, min(sec, 59), us)


# -- input: intervals -------------------------------------------------------------------------

_US = 1_000_000
# unit -> (field, scale): months, days or microseconds
_UNITS: dict[str, tuple[str, int]] = {}
for _names, _field, _scale in (
    ("us usec usecs microsecond microseconds microsecon", "us", 1),
    ("ms msec msecs millisecond milliseconds millisecon", "us", 1000),
    ("s sec secs second seconds", "us", _US),
    ("m min mins minute minutes", "us", 60 * _US),
    ("h hr hrs hour hours", "us", 3600 * _US),
    ("d day days", "days", 1),
    ("w week weeks", "days", 7),
    ("mon mons month months", "months", 1),
    ("y yr yrs year years", "months", 12),
    ("dec decs decade decades", "months", 120),
    ("c cent century centuries", "months", 1200),
    ("mil mils millennium millennia millenniums", "months", 12000),
):
    for _n in _names.split():
        _UNITS[_n] = (_field, _scale)

_IV_TOKEN = re.compile(
    r"\s*(?:(?P<ym>[+-]?\d+-\d+)(?![\d:])"
    r"|(?P<time>[+-]?\d+:\d+(?::\d+(?:\.\d*)?)?)"
    r"|(?P<num>[+-]?\s*(?:\d+\.?\d*|\.\d+))\s*(?P<unit>[a-z]+)?"
    r"|(?P<ago>ago)\b)"
)
_ISO_IV = re.compile(
    r"p(?:([+-]?[\d.]+)y)?(?:([+-]?[\d.]+)m)?(?:([+-]?[\d.]+)w)?(?:([+-]?[\d.]+)d)?"
    r"(?:t(?:([+-]?[\d.]+)h)?(?:([+-]?[\d.]+)m)?(?:([+-]?[\d.]+)s)?)?"
)


class _IntervalAcc:
    __slots__ = ("days", "months", "us")

    def __init__(self) -> None:
        self.months = 0
        self.days = 0
        self.us = Fraction(0)

    def add(self, value: Fraction, field: str, scale: int) -> None:
        v = value * scale
        if field == "months":
            whole = int(v)  # truncates toward zero, as C does
            self.months += whole
            self._spill_days((v - whole) * 30)
        elif field == "days":
            self._spill_days(v)
        else:
            self.us += v

    def _spill_days(self, v: Fraction) -> None:
        whole = int(v)
        self.days += whole
        self.us += (v - whole) * 86_400 * _US

    def result(self) -> Interval:
        return Interval(self.months, self.days, round(self.us))


def interval_in(s: str) -> Interval:
    """Postgres-style (``1 year 2 mons 3 days 04:05:06``, ``@ 1 day ago``), SQL-standard
    (``1-2``, ``1 2:03:04``) and ISO 8601 (``P1Y2M3DT4H5M6S``) interval input."""
    low = s.strip(_WS).lower()
    bad = SqlError(INVALID_DATETIME_FORMAT, f'invalid input syntax for type interval: "{s}"')
    acc = _IntervalAcc()
    if low.startswith("p"):
        m = _ISO_IV.fullmatch(low)
        if m is None or low == "p" or low.endswith("t"):
            raise bad
        fields = (("months", 12), ("months", 1), ("days", 7), ("days", 1),
                  ("us", 3600 * _US), ("us", 60 * _US), ("us", _US))  # fmt: skip
        try:
            for g, (field, scale) in zip(m.groups(), fields, strict=True):
                if g is not None:
                    acc.add(Fraction(g), field, scale)
        except ValueError:
            raise bad from None
        return acc.result()
    if low.startswith("@"):
        low = low[1:]
    pos, n = 0, len(low)
    pending_number: Fraction | None = None
    ago = False
    seen = False
    while pos < n:
        m = _IV_TOKEN.match(low, pos)
        if m is None or m.end() == pos:
            if low[pos:].strip(_WS) == "":
                break
            raise bad
        pos = m.end()
        seen = True
        if ago:
            raise bad
        if m["ym"]:
            neg = m["ym"].startswith("-")
            y, mo = m["ym"].lstrip("+-").split("-")
            total = int(y) * 12 + int(mo)
            acc.months += -total if neg else total
        elif m["time"]:
            t = m["time"]
            neg = t.startswith("-")
            parts = t.lstrip("+-").split(":")
            h, mi = int(parts[0]), int(parts[1])
            sec = Fraction(parts[2]) if len(parts) > 2 else Fraction(0)
            if mi > 59 or sec >= 60:
                raise SqlError(DATETIME_FIELD_OVERFLOW, f'interval field value out of range: "{s}"')
            us = ((h * 60 + mi) * 60 + sec) * _US
            if pending_number is not None:  # "1 01:02:03": a bare number before a time is days
                acc.days += int(pending_number)
                pending_number = None
            acc.us += -us if neg else us
        elif m["ago"]:
            ago = True
        else:
            if pending_number is not None:
                raise bad
            value = Fraction("".join(m["num"].split()))  # "- 1 day" as Postgres reads it
            unit = m["unit"]
            if unit is None:
                pending_number = value
                continue
            if unit == "ago":
                pending_number = value
                ago = True
                continue
            spec = _UNITS.get(unit)
            if spec is None:
                raise bad
            acc.add(value, *spec)
    if not seen:
        raise bad
    if pending_number is not None:
        acc.us += pending_number * _US  # a bare trailing number is seconds
    iv = acc.result()
    return -iv if ago else iv


# -- input: arrays ----------------------------------------------------------------------------


def _array_decoder(elem_in: Callable[[str], object]) -> Callable[[str], object]:
    def parse(s: str) -> object:
        def bad(detail: str) -> SqlError:
            return SqlError(
                INVALID_TEXT_REPRESENTATION, f'malformed array literal: "{s}"', detail=detail
            )

        n = len(s)
        pos = 0
        while pos < n and s[pos] in _WS:
            pos += 1
        if pos < n and s[pos] == "[":  # dimension decoration: [1:3]={...}; bounds are dropped
            eq = s.find("=", pos)
            if eq < 0:
                raise bad('Missing "=" after array dimensions.')
            pos = eq + 1
            while pos < n and s[pos] in _WS:
                pos += 1
        if pos >= n or s[pos] != "{":
            raise bad('Array value must start with "{" or dimension information.')

        def level(pos: int) -> tuple[list[object], int]:
            # s[pos] == "{"
            pos += 1
            items: list[object] = []
            while True:
                while pos < n and s[pos] in _WS:
                    pos += 1
                if pos >= n:
                    raise bad("Unexpected end of input.")
                c = s[pos]
                if c == "}" and not items:
                    return items, pos + 1
                if c == "{":
                    sub, pos = level(pos)
                    items.append(sub)
                elif c == '"':
                    pos += 1
                    buf = []
                    while True:
                        if pos >= n:
                            raise bad("Unexpected end of input.")
                        c = s[pos]
                        if c == "\\":
                            if pos + 1 >= n:
                                raise bad("Unexpected end of input.")
                            buf.append(s[pos + 1])
                            pos += 2
                        elif c == '"':
                            pos += 1
                            break
                        else:
                            buf.append(c)
                            pos += 1
                    items.append(elem_in("".join(buf)))
                else:
                    buf = []
                    escaped = False
                    last_kept = 0
                    while pos < n and s[pos] not in ",}":
                        c = s[pos]
                        if c in '{"':
                            raise bad(f'Unexpected "{c}" character.')
                        if c == "\\":
                            if pos + 1 >= n:
                                raise bad("Unexpected end of input.")
                            buf.append(s[pos + 1])
                            escaped = True
                            pos += 2
                            last_kept = len(buf)
                            continue
                        buf.append(c)
                        if c not in _WS:
                            last_kept = len(buf)
                        pos += 1
                    text = "".join(buf[:last_kept])
                    if not text and not escaped:
                        raise bad('Unexpected "," character.' if pos < n else "Unexpected end.")
                    if not escaped and text.lower() == "null":
                        items.append(None)
                    else:
                        items.append(elem_in(text))
                while pos < n and s[pos] in _WS:
                    pos += 1
                if pos >= n:
                    raise bad("Unexpected end of input.")
                if s[pos] == ",":
                    pos += 1
                elif s[pos] == "}":
                    return items, pos + 1
                else:
                    raise bad(f'Unexpected "{s[pos]}" character.')

        result, pos = level(pos)
        if s[pos:].strip(_WS):
            raise bad("Junk after closing right brace.")
        _check_rectangular(result, bad)
        return result

    return parse


def _check_rectangular(items: list[object], bad: Callable[[str], SqlError]) -> None:
    nested = [isinstance(i, list) for i in items]
    if any(nested):
        if not all(nested):
            raise bad("Multidimensional arrays must have sub-arrays with matching dimensions.")
        shape = None
        for sub in items:
            assert isinstance(sub, list)
            _check_rectangular(sub, bad)
            sub_shape = _shape(sub)
            if shape is not None and sub_shape != shape:
                raise bad("Multidimensional arrays must have sub-arrays with matching dimensions.")
            shape = sub_shape


def _shape(items: list[object]) -> tuple[int, ...]:
    if items and isinstance(items[0], list):
        return (len(items), *_shape(items[0]))
    return (len(items),)


def _vector_decoder(elem_in: Callable[[str], object]) -> Callable[[str], object]:
    def parse(s: str) -> object:
        return [elem_in(tok) for tok in s.split()]

    return parse


def _str_in(s: str) -> object:
    return s


def _record_in(s: str) -> object:
    raise SqlError(FEATURE_NOT_SUPPORTED, "input of anonymous composite types is not implemented")


def _void_in(s: str) -> object:
    return None


_IN: dict[TypeId, Callable[[str], object]] = {
    TypeId.BOOL: _bool_in,
    TypeId.BYTEA: bytea_in,
    TypeId.CHAR: _char_in,
    TypeId.NAME: _name_in,
    TypeId.INT2: _int2_in,
    TypeId.INT4: _int4_in,
    TypeId.INT8: _int8_in,
    TypeId.OID: _oid_in,
    TypeId.REGPROC: _oid_in,
    TypeId.REGCLASS: _oid_in,
    TypeId.REGTYPE: _oid_in,
    TypeId.REGNAMESPACE: _oid_in,
    TypeId.INT2VECTOR: _vector_decoder(_int2_in),
    TypeId.OIDVECTOR: _vector_decoder(_oid_in),
    TypeId.TEXT: _str_in,
    TypeId.VARCHAR: _str_in,
    TypeId.UNKNOWN: _str_in,
    TypeId.JSON: _json_in,
    TypeId.JSONB: normalize_jsonb,
    TypeId.FLOAT4: _float4_in,
    TypeId.FLOAT8: _float8_in,
    TypeId.NUMERIC: numeric_in,
    TypeId.DATE: _date_in,
    TypeId.TIME: _time_in,
    TypeId.TIMESTAMP: _timestamp_in,
    TypeId.TIMESTAMPTZ: _timestamptz_in,
    TypeId.INTERVAL: interval_in,
    TypeId.UUID: _uuid_in,
    TypeId.VOID: _void_in,
    TypeId.RECORD: _record_in,
}


def _enum_decoder(enum: EnumType) -> Callable[[str], object]:
    def parse(s: str) -> object:
        # enum_in: the label exactly (no trimming, case-sensitive).
        if not enum.has_label(s):
            raise SqlError(
                INVALID_TEXT_REPRESENTATION,
                f'invalid input value for enum {enum.type_name}: "{s}"',
            )
        return s

    return parse


def _bpchar_decoder(n: int | None) -> Callable[[str], object]:
    if n is None:
        return _str_in

    def parse(s: str) -> object:
        return s if len(s) >= n else s.ljust(n)

    return parse


@cache
def text_decoder(t: SqlType) -> Callable[[str], object]:
    """The function parsing Postgres's text format of ``t`` (no length or precision checks:
    those belong to casts)."""
    if t.array:
        return _array_decoder(text_decoder(t.element))
    if t.id is TypeId.BPCHAR:
        return _bpchar_decoder(t.length)
    if isinstance(t.id, EnumType):
        return _enum_decoder(t.id)
    return _IN[t.id]


def text_in(t: SqlType, s: str) -> object:
    """Parse ``s`` as a value of ``t``; raises SqlError (22P02, 22003, 22007, 22008, ...)."""
    return text_decoder(t)(s)


__all__ = [
    "bytea_in",
    "float4_out",
    "float8_out",
    "float_digits_reduced",
    "format_json_value",
    "interval_in",
    "interval_out",
    "normalize_jsonb",
    "numeric_in",
    "numeric_out",
    "parse_json",
    "syntax_error",
    "text_decoder",
    "text_encoder",
    "text_in",
    "text_out",
    "use_extra_float_digits",
]
