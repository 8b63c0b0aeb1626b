"""Casts between SQL types with Postgres's semantics, its cast contexts, and common types.

:func:`cast` converts a value (explicit or assignment context). :func:`can_implicitly_cast` and
:func:`can_assign` answer from Postgres's ``pg_cast`` (its rows for these types are copied in
:data:`_PG_CAST`) plus its automatic I/O conversions (to string types in assignment context,
from them explicitly). :func:`common_type` is ``select_common_type``. :func:`compare_key` gives
ORDER BY sort keys that order like Postgres.
"""

from __future__ import annotations

import datetime as dt
import math
import struct
from collections.abc import Callable
from decimal import ROUND_HALF_UP, Context, Decimal
from functools import cache

from percolator.server.sql import time_zones
from percolator.server.sql.errors import (
    CANNOT_COERCE,
    DATATYPE_MISMATCH,
    FEATURE_NOT_SUPPORTED,
    INVALID_PARAMETER_VALUE,
    NUMERIC_VALUE_OUT_OF_RANGE,
    STRING_DATA_RIGHT_TRUNCATION,
    SqlError,
)
from percolator.server.sql.textio import (
    bytea_in,
    normalize_jsonb,
    numeric_out,
    parse_json,
    text_decoder,
    text_encoder,
)
from percolator.server.sql.types import TEXT, EnumType, Interval, SqlType, TypeId

IMPLICIT, ASSIGNMENT, EXPLICIT = (
    "i",
    "a",
    "e",
)  # pg_cast.castcontext: implicit, assignment, explicit
_T = TypeId
_INTS = (_T.INT2, _T.INT4, _T.INT8)
_REGS = (_T.REGPROC, _T.REGCLASS, _T.REGTYPE, _T.REGNAMESPACE)
_STRINGS = (_T.TEXT, _T.VARCHAR, _T.BPCHAR, _T.NAME, _T.CHAR)


def _pg_cast() -> dict[tuple[TypeId, TypeId], str]:
    """pg_cast's rows among our types (Postgres 16), as (source, target) -> context."""
    c: dict[tuple[TypeId, TypeId], str] = {}
    order = (_T.INT2, _T.INT4, _T.INT8)
    for a in order:
        for b in order:
            if a is not b:
                c[a, b] = IMPLICIT if order.index(a) < order.index(b) else ASSIGNMENT
        c[a, _T.FLOAT4] = c[a, _T.FLOAT8] = c[a, _T.NUMERIC] = IMPLICIT
        c[a, _T.OID] = IMPLICIT
        for r in _REGS:
            c[a, r] = IMPLICIT
    for f in (_T.FLOAT4, _T.FLOAT8):
        for a in _INTS:
            c[f, a] = ASSIGNMENT
        c[f, _T.NUMERIC] = ASSIGNMENT
    c[_T.FLOAT4, _T.FLOAT8] = IMPLICIT
    c[_T.FLOAT8, _T.FLOAT4] = ASSIGNMENT
    for a in _INTS:
        c[_T.NUMERIC, a] = ASSIGNMENT
    c[_T.NUMERIC, _T.FLOAT4] = c[_T.NUMERIC, _T.FLOAT8] = IMPLICIT
    c[_T.BOOL, _T.INT4] = c[_T.INT4, _T.BOOL] = EXPLICIT
    c[_T.CHAR, _T.INT4] = c[_T.INT4, _T.CHAR] = EXPLICIT
    c[_T.OID, _T.INT8] = c[_T.OID, _T.INT4] = ASSIGNMENT
    for r in _REGS:
        c[_T.OID, r] = c[r, _T.OID] = IMPLICIT
        c[r, _T.INT8] = c[r, _T.INT4] = ASSIGNMENT
    c[_T.BOOL, _T.TEXT] = c[_T.BOOL, _T.VARCHAR] = c[_T.BOOL, _T.BPCHAR] = ASSIGNMENT
    # string types
    c[_T.TEXT, _T.BPCHAR] = c[_T.TEXT, _T.VARCHAR] = c[_T.TEXT, _T.NAME] = IMPLICIT
    c[_T.VARCHAR, _T.TEXT] = c[_T.VARCHAR, _T.BPCHAR] = c[_T.VARCHAR, _T.NAME] = IMPLICIT
    c[_T.BPCHAR, _T.TEXT] = c[_T.BPCHAR, _T.VARCHAR] = c[_T.BPCHAR, _T.NAME] = IMPLICIT
    c[_T.NAME, _T.TEXT] = IMPLICIT
    c[_T.NAME, _T.BPCHAR] = c[_T.NAME, _T.VARCHAR] = ASSIGNMENT
    c[_T.CHAR, _T.TEXT] = IMPLICIT
    c[_T.CHAR, _T.BPCHAR] = c[_T.CHAR, _T.VARCHAR] = ASSIGNMENT
    c[_T.TEXT, _T.CHAR] = c[_T.BPCHAR, _T.CHAR] = c[_T.VARCHAR, _T.CHAR] = ASSIGNMENT
    c[_T.TEXT, _T.REGCLASS] = c[_T.VARCHAR, _T.REGCLASS] = IMPLICIT
    # date/time
    c[_T.DATE, _T.TIMESTAMP] = c[_T.DATE, _T.TIMESTAMPTZ] = IMPLICIT
    c[_T.TIMESTAMP, _T.TIMESTAMPTZ] = IMPLICIT
    c[_T.TIMESTAMPTZ, _T.TIMESTAMP] = ASSIGNMENT
    c[_T.TIMESTAMP, _T.DATE] = c[_T.TIMESTAMPTZ, _T.DATE] = ASSIGNMENT
    c[_T.TIMESTAMP, _T.TIME] = c[_T.TIMESTAMPTZ, _T.TIME] = ASSIGNMENT
    c[_T.TIME, _T.INTERVAL] = IMPLICIT
    c[_T.INTERVAL, _T.TIME] = ASSIGNMENT
    # json
    c[_T.JSON, _T.JSONB] = c[_T.JSONB, _T.JSON] = ASSIGNMENT
    for n in (*_INTS, _T.NUMERIC, _T.FLOAT4, _T.FLOAT8, _T.BOOL):
        c[_T.JSONB, n] = EXPLICIT
    return c


_PG_CAST = _pg_cast()
_CONTEXT_RANK = {IMPLICIT: 0, ASSIGNMENT: 1, EXPLICIT: 2}


@cache
def cast_context(src: SqlType, dst: SqlType) -> str | None:
    """The weakest context ("i", "a" or "e") in which Postgres casts ``src`` to ``dst``, or None
    when it has no such cast."""
    if src.id is _T.UNKNOWN and not src.array:
        return IMPLICIT
    if src.array or dst.array:
        if src.array and dst.array:
            return cast_context(src.element, dst.element)
        other = dst if src.array else src
        if other.array:
            return None
        if src.array and other.id in (_T.TEXT, _T.VARCHAR, _T.BPCHAR):
            return ASSIGNMENT  # I/O conversion to a string type
        if dst.array and src.id in (_T.TEXT, _T.VARCHAR, _T.BPCHAR):
            return EXPLICIT
        return None
    if src.id is dst.id:
        return IMPLICIT
    ctx = _PG_CAST.get((src.id, dst.id))
    if ctx is not None:
        return ctx
    if src.id is _T.RECORD and src.typmod >= 0 and dst.id in (_T.TEXT, _T.VARCHAR, _T.BPCHAR):
        return ASSIGNMENT  # record_out of a row whose fields are known
    if src.id in (_T.VOID, _T.RECORD) or dst.id in (_T.VOID, _T.RECORD, _T.UNKNOWN):
        return None
    # Postgres's automatic I/O conversion casts.
    if dst.id in (_T.TEXT, _T.VARCHAR, _T.BPCHAR):
        return ASSIGNMENT
    if src.id in (_T.TEXT, _T.VARCHAR, _T.BPCHAR):
        return EXPLICIT
    return None


def can_implicitly_cast(src: SqlType, dst: SqlType) -> bool:
    """Whether Postgres converts ``src`` to ``dst`` implicitly (in expressions)."""
    return cast_context(src, dst) == IMPLICIT


def can_assign(src: SqlType, dst: SqlType) -> bool:
    """Whether Postgres converts ``src`` to ``dst`` on assignment (INSERT, UPDATE)."""
    ctx = cast_context(src, dst)
    return ctx is not None and ctx != EXPLICIT


# -- common type ------------------------------------------------------------------------------

_PREFERRED = frozenset({_T.FLOAT8, _T.TEXT, _T.TIMESTAMPTZ, _T.BOOL, _T.INTERVAL, _T.OID})


def _preferred(t: SqlType) -> bool:
    return not t.array and t.id in _PREFERRED and t.id is not _T.OID


def common_type(types: list[SqlType], context: str | None = None) -> SqlType:
    """Postgres's select_common_type: the type UNION / CASE / COALESCE inputs resolve to.

    Unknowns take the others' type (text if all are unknown); within a category the later type
    wins when the earlier converts to it implicitly but not back, unless the earlier one is the
    category's preferred type. Raises 42804 when categories differ, or an input cannot be
    converted implicitly to the result. ``context`` ("UNION", "CASE", ...) prefixes messages.
    """
    known = [t for t in types if not (t.id is _T.UNKNOWN and not t.array)]
    if not known:
        return TEXT
    prefix = f"{context} types" if context else ""
    ptype = known[0]
    for ntype in known[1:]:
        if ntype == ptype:
            continue
        if ntype.id is ptype.id and ntype.array == ptype.array:
            continue
        if ntype.category is not ptype.category:
            msg = f"{ptype} and {ntype} cannot be matched"
            raise SqlError(DATATYPE_MISMATCH, f"{prefix} {msg}" if prefix else msg)
        if (
            not _preferred(ptype)
            and can_implicitly_cast(ptype, ntype)
            and not can_implicitly_cast(ntype, ptype)
        ):
            ptype = ntype
    # The typmod survives only when every input agrees on it.
    same = [t for t in known if t.id is ptype.id and t.array == ptype.array]
    if len(same) == len(known) and all(t.typmod == ptype.typmod for t in same):
        result = ptype
    else:
        result = SqlType(ptype.id, -1, ptype.array)
    for t in known:
        if not can_implicitly_cast(t, result):
            where = f"{context} could not" if context else "could not"
            raise SqlError(CANNOT_COERCE, f"{where} convert type {t} to {result}")
    return result


# -- value conversions ------------------------------------------------------------------------

_BIG = Context(prec=1_000_000)
_INT_RANGE = {
    _T.INT2: (-(1 << 15), (1 << 15) - 1, "smallint out of range"),
    _T.INT4: (-(1 << 31), (1 << 31) - 1, "integer out of range"),
    _T.INT8: (-(1 << 63), (1 << 63) - 1, "bigint out of range"),
}
_F32 = struct.Struct("<f")


def _check_int(dst: TypeId, v: int) -> int:
    lo, hi, msg = _INT_RANGE[dst]
    if not lo <= v <= hi:
        raise SqlError(NUMERIC_VALUE_OUT_OF_RANGE, msg)
    return v


def _numeric_to_int(d: Decimal, dst: TypeId) -> int:
    if not d.is_finite():
        what = "NaN" if d.is_nan() else "infinity"
        raise SqlError(FEATURE_NOT_SUPPORTED, f"cannot convert {what} to {_int_word(dst)}")
    # Half away from zero, as numeric's rounding does (not Python's round(): banker's).
    return _check_int(dst, int(d.to_integral_value(rounding=ROUND_HALF_UP, context=_BIG)))


def _int_word(dst: TypeId) -> str:
    return {_T.INT2: "smallint", _T.INT4: "integer", _T.INT8: "bigint"}[dst]


def _float_to_int(f: float, dst: TypeId) -> int:
    if math.isnan(f) or math.isinf(f):
        raise SqlError(NUMERIC_VALUE_OUT_OF_RANGE, _INT_RANGE[dst][2])
    # rint(): half to even, which Python's round() on a float is.
    return _check_int(dst, round(f))


def _to_float4(f: float) -> float:
    if math.isnan(f) or math.isinf(f):
        return f
    try:
        r: float = _F32.unpack(_F32.pack(f))[0]
    except OverflowError:
        raise SqlError(NUMERIC_VALUE_OUT_OF_RANGE, "value out of range: overflow") from None
    if r == 0.0 and f != 0.0:
        raise SqlError(NUMERIC_VALUE_OUT_OF_RANGE, "value out of range: underflow")
    return r


def _numeric_to_float(d: Decimal, single: bool) -> float:
    # numeric_float8/4 go through the text form, so the errors are float input's.
    f = float(d)
    if d.is_finite() and (math.isinf(f) or (f == 0.0 and not d.is_zero())):
        raise _float_range(d, single)
    if single:
        try:
            r: float = _F32.unpack(_F32.pack(f))[0]
        except OverflowError:
            raise _float_range(d, single) from None
        if r == 0.0 and f != 0.0:
            raise _float_range(d, single)
        return r
    return f


def _float_range(d: Decimal, single: bool) -> SqlError:
    name = "real" if single else "double precision"
    return SqlError(
        NUMERIC_VALUE_OUT_OF_RANGE, f'"{numeric_out(d)}" is out of range for type {name}'
    )


def _float_to_numeric(f: float, digits: int) -> Decimal:
    if math.isnan(f):
        return Decimal("NaN")
    if math.isinf(f):
        return Decimal("Infinity" if f > 0 else "-Infinity")
    # float8_numeric prints with %.15g (float4: %.6g) and reads that back.
    return Decimal(f"{f:.{digits}g}")


def apply_numeric_typmod(d: Decimal, t: SqlType) -> Decimal:
    """Round to numeric(p,s)'s scale (half away from zero) and check its precision."""
    ps = t.precision_scale
    if ps is None or d.is_nan():
        return d
    p, s = ps
    if d.is_infinite():
        raise SqlError(
            NUMERIC_VALUE_OUT_OF_RANGE,
            "numeric field overflow",
            detail=f"A field with precision {p}, scale {s} cannot hold an infinite value.",
        )
    r = d.quantize(Decimal((0, (1,), -s)), rounding=ROUND_HALF_UP, context=_BIG)
    if not r.is_zero() and r.adjusted() >= p - s:
        maxdigits = p - s
        bound = f"10^{maxdigits}" if maxdigits else "1"
        raise SqlError(
            NUMERIC_VALUE_OUT_OF_RANGE,
            "numeric field overflow",
            detail=f"A field with precision {p}, scale {s} must round to an absolute value"
            f" less than {bound}.",
        )
    return r.copy_abs() if r.is_zero() else r


def apply_length(s: str, t: SqlType, explicit: bool) -> str:
    """varchar(n) / char(n): an explicit cast truncates; assignment refuses a longer value
    unless only spaces are cut. char(n) is padded to n."""
    n = t.length
    if n is None:
        return s
    if len(s) > n:
        if not explicit and s[n:].strip(" "):
            raise SqlError(STRING_DATA_RIGHT_TRUNCATION, f"value too long for type {t.format()}")
        s = s[:n]
    if t.id is _T.BPCHAR and len(s) < n:
        s = s.ljust(n)
    return s


def _no_cast(src: SqlType, dst: SqlType) -> SqlError:
    return SqlError(CANNOT_COERCE, f"cannot cast type {src} to {dst}")


def _to_text(v: object, src: SqlType) -> str:
    if not src.array:
        if src.id is _T.BOOL:
            return "true" if v else "false"
        if src.id is _T.BPCHAR:
            return v.rstrip(" ")  # type: ignore[attr-defined]
    return text_encoder(src)(v)


def _jsonb_scalar(v: object, dst: TypeId) -> object:
    obj = parse_json(v)  # type: ignore[arg-type]
    if dst is _T.BOOL:
        ok = isinstance(obj, bool)
    else:
        ok = isinstance(obj, Decimal)
    if not ok:
        kind = (
            "object" if isinstance(obj, dict) else "array" if isinstance(obj, list)
            else "string" if isinstance(obj, str) else "null" if obj is None
            else "boolean" if isinstance(obj, bool) else "numeric"
        )  # fmt: skip
        target = {_T.BOOL: "boolean", _T.NUMERIC: "numeric", _T.INT2: "smallint",
                  _T.INT4: "integer", _T.INT8: "bigint", _T.FLOAT4: "real",
                  _T.FLOAT8: "double precision"}[dst]  # fmt: skip
        raise SqlError(INVALID_PARAMETER_VALUE, f"cannot cast jsonb {kind} to type {target}")
    return obj


def cast(v: object, src: SqlType, dst: SqlType, *, explicit: bool = True) -> object:
    """Convert a value of ``src`` to ``dst`` as Postgres's cast (``explicit``) or assignment
    does. NULL stays NULL; raises SqlError 42846 for casts Postgres does not have."""
    if v is None:
        return None
    if src == dst:
        return v
    s_id, d_id = src.id, dst.id
    if src.array or dst.array:
        return _cast_array(v, src, dst, explicit)
    if s_id is d_id:
        return _typmod(v, dst, explicit)
    if d_id in (_T.TEXT, _T.VARCHAR, _T.BPCHAR, _T.NAME):
        if s_id is _T.VOID or (s_id is _T.RECORD and src.typmod < 0):
            raise _no_cast(src, dst)
        s = _to_text(v, src)
        if d_id is _T.NAME:
            return text_decoder(dst)(s)
        return apply_length(s, dst, explicit) if dst.length is not None else s
    if s_id in (_T.TEXT, _T.VARCHAR, _T.BPCHAR, _T.NAME, _T.UNKNOWN, _T.CHAR):
        s = v.rstrip(" ") if s_id is _T.BPCHAR else v  # type: ignore[attr-defined]
        if d_id in _REGS:
            raise SqlError(FEATURE_NOT_SUPPORTED, f"cast to {dst} must be resolved by the engine")
        if s_id is _T.CHAR and d_id is _T.INT4:
            c: str = v  # type: ignore[assignment]
            b = ord(c) if c else 0
            return b - 256 if b >= 128 else b
        if d_id is _T.BYTEA:
            return bytea_in(s)  # type: ignore[arg-type]
        return _typmod(text_decoder(dst)(s), dst, explicit)  # type: ignore[arg-type]
    fn = _CONVERT.get((s_id, d_id))
    if fn is None:
        raise _no_cast(src, dst)
    return _typmod(fn(v), dst, explicit)


def _typmod(v: object, dst: SqlType, explicit: bool) -> object:
    if dst.typmod < 0:
        return v
    if dst.id is _T.NUMERIC:
        return apply_numeric_typmod(v, dst)  # type: ignore[arg-type]
    if dst.id in (_T.VARCHAR, _T.BPCHAR):
        return apply_length(v, dst, explicit)  # type: ignore[arg-type]
    if (p := dst.fractional_digits) is not None:
        return apply_time_precision(v, p)  # type: ignore[arg-type]
    return v


_PG_EPOCH = dt.datetime(2000, 1, 1)
_PG_EPOCH_UTC = _PG_EPOCH.replace(tzinfo=dt.UTC)


def apply_time_precision(v: dt.datetime | dt.time, p: int) -> dt.datetime | dt.time:
    """timestamp(p) / timestamptz(p) / time(p): round to ``p`` fractional-second digits, half
    away from zero of Postgres's internal value (AdjustTimestampForTypmod), whose zero is
    2000-01-01 (UTC for timestamptz): a half before 2000 rounds to the earlier time."""
    unit = 10 ** (6 - p)
    if unit == 1 or v.microsecond % unit == 0:
        return v
    if isinstance(v, dt.time):
        micros = v.microsecond + unit // 2
        if micros >= 1_000_000 and (v.hour, v.minute, v.second) == (23, 59, 59):
            # Postgres gives 24:00:00, which datetime.time cannot hold.
            raise SqlError(FEATURE_NOT_SUPPORTED, "time 24:00:00 is not supported")
        base = dt.datetime.combine(dt.date(2000, 1, 1), v.replace(microsecond=0))
        return (base + dt.timedelta(microseconds=micros // unit * unit)).time()
    epoch = _PG_EPOCH_UTC if v.tzinfo is not None else _PG_EPOCH
    delta = v - epoch
    micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    rounded = (abs(micros) + unit // 2) // unit * unit
    return epoch + dt.timedelta(microseconds=rounded if micros >= 0 else -rounded)


def _cast_array(v: object, src: SqlType, dst: SqlType, explicit: bool) -> object:
    if src.array and dst.array:
        es, ed = src.element, dst.element

        def conv(items: list[object]) -> list[object]:
            return [
                conv(e) if isinstance(e, list) else cast(e, es, ed, explicit=explicit)
                for e in items
            ]

        return conv(v)  # type: ignore[arg-type]
    if src.array and dst.id in (_T.TEXT, _T.VARCHAR, _T.BPCHAR):
        return _typmod(text_encoder(src)(v), dst, explicit)
    if dst.array and src.id in (_T.TEXT, _T.VARCHAR, _T.BPCHAR, _T.UNKNOWN):
        return text_decoder(dst)(v)  # type: ignore[arg-type]
    raise _no_cast(src, dst)


def _int_to_char(v: object) -> object:
    i: int = v  # type: ignore[assignment]
    if not -128 <= i <= 127:
        raise SqlError(NUMERIC_VALUE_OUT_OF_RANGE, '"char" out of range')
    return chr(i & 0xFF) if i else ""


def _int_to_oid(v: object) -> object:
    i: int = v  # type: ignore[assignment]
    if not -(1 << 31) <= i < (1 << 32):
        raise SqlError(NUMERIC_VALUE_OUT_OF_RANGE, "OID out of range")
    return i + (1 << 32) if i < 0 else i


def _int8_to_oid(v: object) -> object:
    i: int = v  # type: ignore[assignment]
    if not 0 <= i < (1 << 32):
        raise SqlError(NUMERIC_VALUE_OUT_OF_RANGE, "OID out of range")
    return i


def _oid_to_int4(v: object) -> object:
    i: int = v  # type: ignore[assignment]
    return i - (1 << 32) if i >= (1 << 31) else i


def _interval_to_time(v: object) -> object:
    iv: Interval = v  # type: ignore[assignment]
    us = iv.microseconds % 86_400_000_000
    secs, micro = divmod(us, 1_000_000)
    mins, sec = divmod(secs, 60)
    hours, mins = divmod(mins, 60)
    return dt.time(hours, mins, sec, micro)


def _time_to_interval(v: object) -> object:
    t: dt.time = v  # type: ignore[assignment]
    us = ((t.hour * 60 + t.minute) * 60 + t.second) * 1_000_000 + t.microsecond
    return Interval(0, 0, us)


# Casts between instants and wall-clock times use the session's zone of the running
# statement (time_zones.current_zone); the binder never folds them at plan time.


def _ts_to_tstz(v: object) -> object:
    return time_zones.from_local(v)  # type: ignore[arg-type]


def _tstz_to_ts(v: object) -> object:
    return time_zones.to_local(v)  # type: ignore[arg-type]


def _date_to_ts(v: object) -> object:
    d: dt.date = v  # type: ignore[assignment]
    return dt.datetime(d.year, d.month, d.day)


def _date_to_tstz(v: object) -> object:
    d: dt.date = v  # type: ignore[assignment]
    return time_zones.from_local(dt.datetime(d.year, d.month, d.day))


def _build_convert() -> dict[tuple[TypeId, TypeId], Callable[[object], object]]:
    c: dict[tuple[TypeId, TypeId], Callable[[object], object]] = {}
    for a in _INTS:
        for b in _INTS:
            if a is not b:
                c[a, b] = lambda v, b=b: _check_int(b, v)
        c[a, _T.FLOAT8] = float
        c[a, _T.FLOAT4] = lambda v: _to_float4(float(v))
        c[a, _T.NUMERIC] = Decimal
        c[_T.NUMERIC, a] = lambda v, a=a: _numeric_to_int(v, a)
        c[_T.FLOAT4, a] = c[_T.FLOAT8, a] = lambda v, a=a: _float_to_int(v, a)
        c[_T.JSONB, a] = lambda v, a=a: _numeric_to_int(_jsonb_scalar(v, a), a)
    c[_T.INT8, _T.OID] = _int8_to_oid
    for a in (_T.INT2, _T.INT4):
        c[a, _T.OID] = _int_to_oid
        for r in _REGS:
            c[a, r] = _int_to_oid
    for r in _REGS:
        c[_T.INT8, r] = _int8_to_oid
        c[r, _T.OID] = c[_T.OID, r] = int
        c[r, _T.INT8] = int
        c[r, _T.INT4] = _oid_to_int4
        for r2 in _REGS:
            if r2 is not r:
                c[r, r2] = int
    c[_T.OID, _T.INT8] = int
    c[_T.OID, _T.INT4] = _oid_to_int4
    c[_T.FLOAT4, _T.FLOAT8] = float
    c[_T.FLOAT8, _T.FLOAT4] = _to_float4
    c[_T.FLOAT8, _T.NUMERIC] = lambda v: _float_to_numeric(v, 15)
    c[_T.FLOAT4, _T.NUMERIC] = lambda v: _float_to_numeric(v, 6)
    c[_T.NUMERIC, _T.FLOAT8] = lambda v: _numeric_to_float(v, False)
    c[_T.NUMERIC, _T.FLOAT4] = lambda v: _numeric_to_float(v, True)
    c[_T.BOOL, _T.INT4] = lambda v: 1 if v else 0
    c[_T.INT4, _T.BOOL] = lambda v: v != 0
    c[_T.INT4, _T.CHAR] = _int_to_char
    c[_T.DATE, _T.TIMESTAMP] = _date_to_ts
    c[_T.DATE, _T.TIMESTAMPTZ] = _date_to_tstz
    c[_T.TIMESTAMP, _T.TIMESTAMPTZ] = _ts_to_tstz
    c[_T.TIMESTAMPTZ, _T.TIMESTAMP] = _tstz_to_ts
    c[_T.TIMESTAMP, _T.DATE] = lambda v: v.date()
    c[_T.TIMESTAMPTZ, _T.DATE] = lambda v: _tstz_to_ts(v).date()
    c[_T.TIMESTAMP, _T.TIME] = lambda v: v.time()
    c[_T.TIMESTAMPTZ, _T.TIME] = lambda v: _tstz_to_ts(v).time()
    c[_T.TIME, _T.INTERVAL] = _time_to_interval
    c[_T.INTERVAL, _T.TIME] = _interval_to_time
    c[_T.JSON, _T.JSONB] = normalize_jsonb
    c[_T.JSONB, _T.JSON] = lambda v: v
    c[_T.JSONB, _T.NUMERIC] = lambda v: _jsonb_scalar(v, _T.NUMERIC)
    c[_T.JSONB, _T.FLOAT8] = lambda v: _numeric_to_float(_jsonb_scalar(v, _T.FLOAT8), False)
    c[_T.JSONB, _T.FLOAT4] = lambda v: _numeric_to_float(_jsonb_scalar(v, _T.FLOAT4), True)
    c[_T.JSONB, _T.BOOL] = lambda v: _jsonb_scalar(v, _T.BOOL)
    return c


_CONVERT = _build_convert()

_ZONED = frozenset({_T.TIMESTAMPTZ})
_WALL_CLOCK = frozenset({_T.DATE, _T.TIMESTAMP, _T.TIME, _T.TEXT, _T.VARCHAR, _T.BPCHAR,
                         _T.NAME, _T.UNKNOWN, _T.CHAR})  # fmt: skip


def depends_on_zone(src: SqlType, dst: SqlType) -> bool:
    """Whether casting ``src`` to ``dst`` reads the session's time zone (timestamptz to or
    from a wall-clock time or text): such a cast is evaluated when the statement runs."""
    s, d = src.id, dst.id
    return (s in _ZONED and d in _WALL_CLOCK) or (d in _ZONED and s in _WALL_CLOCK)


# -- ordering ---------------------------------------------------------------------------------


def _identity(v: object) -> object:
    return v


def _float_key(v: object) -> object:
    f: float = v  # type: ignore[assignment]
    return (1, 0.0) if f != f else (0, f)  # NaN sorts above everything, as in Postgres


def _numeric_key(v: object) -> object:
    d: Decimal = v  # type: ignore[assignment]
    return (1, Decimal(0)) if d.is_nan() else (0, d)


def _bpchar_key(v: object) -> object:
    return v.rstrip(" ")  # type: ignore[attr-defined]


def _interval_key(v: object) -> object:
    return v.sort_key()  # type: ignore[attr-defined]


def _jsonb_sort(obj: object, top: bool = False) -> tuple[object, ...]:
    # jsonb's order: Object > Array > Boolean > Number > String > Null, except that an empty
    # top-level array sorts below null. Objects and arrays compare by size first.
    if obj is None:
        return (1, 0)
    if isinstance(obj, str):
        return (2, obj)
    if isinstance(obj, bool):
        return (4, obj)
    if isinstance(obj, Decimal):
        return (3, _numeric_key(obj))
    if isinstance(obj, list):
        if top and not obj:
            return (0, 0)
        return (5, len(obj), [_jsonb_sort(e) for e in obj])
    assert isinstance(obj, dict)
    keys = sorted(obj, key=lambda k: (len(k.encode()), k.encode()))
    return (6, len(obj), [(k, _jsonb_sort(obj[k])) for k in keys])


def _jsonb_key(v: object) -> object:
    return _jsonb_sort(parse_json(v), top=True)  # type: ignore[arg-type]


def _array_key(elem_key: Callable[[object], object]) -> Callable[[object], object]:
    def key(v: object) -> object:
        items: list[object] = v  # type: ignore[assignment]
        return [
            (1,) if e is None else (0, key(e) if isinstance(e, list) else elem_key(e))
            for e in items
        ]  # NULL elements sort after the others

    return key


_KEYS: dict[TypeId, Callable[[object], object]] = {
    _T.FLOAT4: _float_key,
    _T.FLOAT8: _float_key,
    _T.NUMERIC: _numeric_key,
    _T.BPCHAR: _bpchar_key,
    _T.INTERVAL: _interval_key,
    _T.JSONB: _jsonb_key,
}


@cache
def compare_key(t: SqlType) -> Callable[[object], object]:
    """A sort key for non-NULL values of ``t`` that orders them as Postgres does (text in the
    "C" collation: code-point order, which is UTF-8 byte order). Raises 42883 for json, which
    Postgres cannot order."""
    if t.array:
        return _array_key(compare_key(t.element))
    if t.id is _T.JSON:
        raise SqlError("42883", "could not identify an ordering operator for type json")
    if isinstance(t.id, EnumType):
        return t.id.sort_order  # type: ignore[return-value]  # declaration order
    if t.id is _T.RECORD:
        return _record_key(t)
    return _KEYS.get(t.id, _identity)


def _record_key(t: SqlType) -> Callable[[object], object]:
    """record_cmp's order: field by field, a NULL field equal to a NULL one and above any
    value (so two rows with NULLs in the same places are equal, unlike ``ROW(..) = ROW(..)``)."""
    from percolator.server.sql.set_functions import record_fields

    fields = record_fields(t)
    keys = [compare_key(ft) for _, ft in fields] if fields is not None else None

    def key(v: object) -> object:
        values: tuple[object, ...] = v  # type: ignore[assignment]
        if keys is None or len(keys) != len(values):
            return tuple((1,) if f is None else (0, _generic_key(f)) for f in values)
        return tuple((1,) if f is None else (0, k(f)) for k, f in zip(keys, values, strict=True))

    return key


def _generic_key(v: object) -> object:
    """A sort key for a field of a record whose field types are not known."""
    if isinstance(v, tuple):
        return tuple((1,) if f is None else (0, _generic_key(f)) for f in v)
    if isinstance(v, list):
        return [(1,) if e is None else (0, _generic_key(e)) for e in v]
    if isinstance(v, float):
        return _float_key(v)
    if isinstance(v, Decimal):
        return _numeric_key(v)
    return v


__all__ = [
    "apply_length",
    "apply_numeric_typmod",
    "apply_time_precision",
    "can_assign",
    "can_implicitly_cast",
    "cast",
    "cast_context",
    "common_type",
    "compare_key",
]
