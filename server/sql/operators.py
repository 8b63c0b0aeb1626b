"""Operators: which implementation and result type a ``left op right`` gets, as in Postgres.

Resolution follows Postgres's rules closely enough for the supported types: an untyped literal
or parameter takes the other side's type; numbers are promoted along
int2 < int4 < int8 < numeric < float4 < float8; string types compare as text; otherwise both
sides must already agree (or one implicitly casts to the other), else 42883.
"""

from __future__ import annotations

import datetime as dt
import math
import operator
import re
import struct
from collections.abc import Callable
from decimal import (
    MAX_EMAX,
    MAX_PREC,
    MIN_EMIN,
    ROUND_DOWN,
    ROUND_HALF_UP,
    Context,
    Decimal,
)
from typing import Any

from percolator.server.sql import time_zones
from percolator.server.sql import types as T
from percolator.server.sql.casts import compare_key as casts_compare_key
from percolator.server.sql.errors import (
    DIVISION_BY_ZERO,
    NUMERIC_VALUE_OUT_OF_RANGE,
    UNDEFINED_FUNCTION,
    SqlError,
)
from percolator.server.sql.types import Category, EnumType, Interval, SqlType, TypeId

_INT_RANGES = {
    TypeId.INT2: (-(1 << 15), (1 << 15) - 1, "smallint"),
    TypeId.INT4: (-(1 << 31), (1 << 31) - 1, "integer"),
    TypeId.INT8: (-(1 << 63), (1 << 63) - 1, "bigint"),
}

_NUMERIC_RANK = {
    TypeId.INT2: 0,
    TypeId.INT4: 1,
    TypeId.OID: 1,
    TypeId.INT8: 2,
    TypeId.NUMERIC: 3,
    TypeId.FLOAT4: 4,
    TypeId.FLOAT8: 5,
}


def is_numeric(t: SqlType) -> bool:
    return not t.array and t.id in _NUMERIC_RANK


def is_string(t: SqlType) -> bool:
    return not t.array and t.category is Category.STRING


def numeric_result(a: SqlType, b: SqlType) -> SqlType:
    """The type arithmetic on a and b produces (int2 + int2 is int4 in Postgres's sense of
    int2pl? no: int2 + int2 is int2; we keep the wider of the two)."""
    ra, rb = _NUMERIC_RANK[a.id], _NUMERIC_RANK[b.id]
    wider = a if ra >= rb else b
    if wider.id is TypeId.OID:
        return T.INT8
    if wider.id is TypeId.FLOAT4 and a.id != b.id:
        # real op integer/numeric resolves to the float8 operator (float8 is preferred).
        return T.FLOAT8
    if wider.id is TypeId.NUMERIC:
        return T.NUMERIC
    return SqlType(wider.id)


def check_int(t: SqlType) -> Callable[[int], int]:
    lo, hi, name = _INT_RANGES.get(t.id, _INT_RANGES[TypeId.INT8])

    def check(v: int) -> int:
        if v < lo or v > hi:
            raise SqlError(NUMERIC_VALUE_OUT_OF_RANGE, f"{name} out of range")
        return v

    return check


def _div_zero() -> SqlError:
    return SqlError(DIVISION_BY_ZERO, "division by zero")


def _int_div(a: int, b: int) -> int:
    if b == 0:
        raise _div_zero()
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _int_mod(a: int, b: int) -> int:
    if b == 0:
        raise _div_zero()
    return int(math.fmod(a, b)) if abs(a) < 2**52 else a - b * _int_div(a, b)


def _float_div(a: float, b: float) -> float:
    if b == 0:
        if a != a:  # float8_div: NaN / 0 is NaN
            return a
        raise _div_zero()
    return a / b


def _numeric_scale(d: Decimal) -> int:
    exp = d.as_tuple().exponent
    return -exp if isinstance(exp, int) and exp < 0 else 0


# numeric's limits (numeric.c): 131072 digits before the decimal point, 16383 after.
NUMERIC_MAX_WEIGHT_DIGITS = 131072
NUMERIC_MAX_DSCALE = 16383
_NUMERIC_MAX_RESULT_SCALE = 2000
_NUMERIC_MIN_SIG_DIGITS = 16

# libmpdec computes a sum, difference, product or integer quotient exactly and only then rounds
# it to the context's precision, so a context of maximal precision makes them exact at no cost
# (the work is sized by the operands, never by ``prec``). Nothing that rounds (division,
# square roots, logarithms) may use it: those pick a precision from their operands. It is a
# private Context passed explicitly, so the thread's (or task's) decimal context is untouched.
# InvalidOperation is not trapped: Infinity - Infinity and Infinity * 0 are NaN, as in Postgres.
EXACT = Context(prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN, traps=[])
_NAN = Decimal("NaN")
_ZERO = Decimal(0)


def numeric_overflow() -> SqlError:
    """22003 as numeric.c's make_result reports a value beyond numeric's range."""
    return SqlError(NUMERIC_VALUE_OUT_OF_RANGE, "value overflows numeric format")


def numeric_result_check(d: Decimal) -> Decimal:
    """``d``, or 22003 when it has more digits before the point than numeric holds."""
    if d.is_finite() and d and d.adjusted() >= NUMERIC_MAX_WEIGHT_DIGITS:
        raise numeric_overflow()
    return d


def numeric_add(a: Decimal, b: Decimal) -> Decimal:
    """a + b, exact (Postgres's add_var), at the larger of the two scales."""
    return numeric_result_check(EXACT.add(a, b))


def numeric_sub(a: Decimal, b: Decimal) -> Decimal:
    """a - b, exact."""
    return numeric_result_check(EXACT.subtract(a, b))


def numeric_mul(a: Decimal, b: Decimal) -> Decimal:
    """a * b, exact at the sum of the scales, rounded only past numeric's 16383 places."""
    r = EXACT.multiply(a, b)
    if r.is_finite() and _numeric_scale(r) > NUMERIC_MAX_DSCALE:
        r = round_numeric_to(r, NUMERIC_MAX_DSCALE)
    return numeric_result_check(r)


def round_numeric_to(d: Decimal, scale: int) -> Decimal:
    """A finite ``d`` rounded half away from zero to ``scale`` places (negative: to tens,
    hundreds, ...), exactly; the result keeps ``max(scale, 0)`` places as round_var does."""
    r = d.quantize(_quantum(scale), rounding=ROUND_HALF_UP, context=EXACT)
    return r if scale >= 0 else r.quantize(_ONE, context=EXACT)


def trunc_numeric_to(d: Decimal, scale: int) -> Decimal:
    """A finite ``d`` truncated toward zero to ``scale`` places (trunc_var)."""
    r = d.quantize(_quantum(scale), rounding=ROUND_DOWN, context=EXACT)
    return r if scale >= 0 else r.quantize(_ONE, context=EXACT)


_ONE = Decimal(1)


def _quantum(scale: int) -> Decimal:
    return Decimal((0, (1,), -scale))


def _div_weight(d: Decimal) -> tuple[int, int]:
    """Postgres's base-10000 weight of a finite nonzero |d| and its leading base-10000 digit."""
    weight = d.adjusted() // 4
    lead = int(EXACT.scaleb(d.copy_abs(), -weight * 4))
    return weight, lead


def div_scale(a: Decimal, b: Decimal) -> int:
    """select_div_scale: at least 16 significant digits, never fewer places than either
    operand, at most 1000."""
    w1, l1 = _div_weight(a) if a else (0, 0)  # a zero's weight and first digit are 0
    w2, l2 = _div_weight(b) if b else (0, 0)
    qweight = w1 - w2 - (1 if l1 <= l2 else 0)
    rscale = _NUMERIC_MIN_SIG_DIGITS - qweight * 4
    rscale = max(rscale, _numeric_scale(a), _numeric_scale(b), 0)
    return min(rscale, 1000)


def divide_rounded(a: Decimal, b: Decimal, rscale: int) -> Decimal:
    """Finite a / b (b nonzero) rounded half away from zero to ``rscale`` places, exactly
    as div_var does: an exact integer quotient, then one rounding step."""
    q, r = EXACT.divmod(EXACT.scaleb(a, rscale), b)
    # Operators on Decimals round to the thread's context: use EXACT's (and copy_abs).
    if EXACT.multiply(r.copy_abs(), 2) >= b.copy_abs():
        q = EXACT.add(q, _ONE if (a < 0) == (b < 0) else -_ONE)
    if not q:
        q = _ZERO
    return numeric_result_check(EXACT.scaleb(q, -rscale))


def numeric_div(a: Decimal, b: Decimal) -> Decimal:
    """Numeric division with Postgres's result scale (select_div_scale) and special values."""
    if not a.is_finite() or not b.is_finite():
        return _special_div(a, b)
    if not b:
        raise _div_zero()
    return divide_rounded(a, b, div_scale(a, b))


def _special_div(a: Decimal, b: Decimal) -> Decimal:
    """numeric_div with a NaN or infinite operand."""
    if a.is_nan() or b.is_nan():
        return _NAN
    if a.is_infinite():
        if b.is_infinite():
            return _NAN
        if not b:
            raise _div_zero()
        return a if b > 0 else -a
    return _ZERO  # finite / infinite


def numeric_div_trunc(a: Decimal, b: Decimal) -> Decimal:
    """div(a, b): the quotient truncated toward zero (numeric_div_trunc)."""
    if not a.is_finite() or not b.is_finite():
        return _special_div(a, b)
    if not b:
        raise _div_zero()
    q = EXACT.divide_int(a, b)
    return q if q else _ZERO


def numeric_mod(a: Decimal, b: Decimal) -> Decimal:
    """a % b with the dividend's sign, exact (mod_var), and numeric_mod's special values."""
    if not a.is_finite() or not b.is_finite():
        if a.is_nan() or b.is_nan():
            return _NAN
        if a.is_infinite():
            if not b:
                raise _div_zero()
            return _NAN
        return a  # finite % infinite
    if not b:
        raise _div_zero()
    return EXACT.remainder(a, b)


def numeric_key(d: Decimal) -> tuple[int, Decimal]:
    """A sort key for numerics: NaN equals NaN and sorts above everything, Infinity included."""
    return (1, _ZERO) if d != d else (0, d)  # also takes ints: only NaN differs from itself


_NUMERIC_OPS: dict[str, Callable[[Decimal, Decimal], Decimal]] = {
    "+": numeric_add,
    "-": numeric_sub,
    "*": numeric_mul,
    "/": numeric_div,
    "%": numeric_mod,
}


def _to_decimal(v: object) -> Decimal:
    return v if isinstance(v, Decimal) else Decimal(v)  # type: ignore[arg-type]


def arithmetic(op: str, a: SqlType, b: SqlType) -> tuple[Callable[..., object], SqlType] | None:
    """Implementation and result type of ``a op b`` for + - * / %, or None if none exists."""
    if is_numeric(a) and is_numeric(b):
        rt = numeric_result(a, b)
        if rt.id in _INT_RANGES:
            check = check_int(rt)
            base = {
                "+": operator.add,
                "-": operator.sub,
                "*": operator.mul,
                "/": _int_div,
                "%": _int_mod,
            }[op]
            return (lambda x, y: check(base(x, y))), rt
        if rt.id is TypeId.NUMERIC:
            nbase = _NUMERIC_OPS[op]
            return (lambda x, y: nbase(_to_decimal(x), _to_decimal(y))), rt
        if op not in _FLOAT_OPS:
            return None
        return float_arithmetic(op, rt), rt
    if op in _INTERVAL_SCALE_OPS:
        return _interval_scaling(op, a, b)
    return _datetime_arithmetic(op, a, b)


_FLOAT_OPS: dict[str, Callable[[float, float], float]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": _float_div,
}
_F32 = struct.Struct("<f")


def float_overflow() -> SqlError:
    """22003 as float_overflow_error reports it."""
    return SqlError(NUMERIC_VALUE_OUT_OF_RANGE, "value out of range: overflow")


def float_underflow() -> SqlError:
    """22003 as float_underflow_error reports it."""
    return SqlError(NUMERIC_VALUE_OUT_OF_RANGE, "value out of range: underflow")


def to_float4(f: float) -> float:
    """``f`` rounded to single precision (C's (float) cast: too large becomes infinite)."""
    try:
        return _F32.unpack(_F32.pack(f))[0]  # type: ignore[no-any-return]
    except OverflowError:
        return math.copysign(math.inf, f)


def float_arithmetic(op: str, rt: SqlType) -> Callable[..., object]:
    """A float operator with the checks of float.h's float8_pl/mi/mul/div (and float4's, on
    the result rounded to single precision): an infinite result from finite operands is an
    overflow; a zero product or quotient of nonzero (finite divisor) operands an underflow."""
    base = _FLOAT_OPS[op]
    single = rt.id is TypeId.FLOAT4
    underflows = op in ("*", "/")
    isinf = math.isinf

    def fop(x: object, y: object) -> float:
        fx, fy = float(x), float(y)  # type: ignore[arg-type]
        r = base(fx, fy)
        if single:
            r = to_float4(r)
        if isinf(r) and not (isinf(fx) or isinf(fy)):
            raise float_overflow()
        if r == 0 and underflows and fx != 0 and not (fy == 0 or isinf(fy)):
            raise float_underflow()
        return r

    return fop


_BITWISE = {
    "&": operator.and_,
    "|": operator.or_,
    "#": operator.xor,
    "<<": operator.lshift,
    ">>": operator.rshift,
}
_INT_BITS = {TypeId.INT2: 16, TypeId.INT4: 32, TypeId.INT8: 64}


def bitwise(op: str, a: SqlType, b: SqlType) -> tuple[Callable[..., object], SqlType] | None:
    """``a op b`` for the integer bit operators & | # << >>, or None."""
    if a.array or b.array or a.id not in _INT_BITS or b.id not in _INT_BITS:
        return None
    base = _BITWISE[op]
    if op in ("<<", ">>"):
        if b.id is TypeId.INT8:
            return None
        rt = SqlType(a.id)
        bits = _INT_BITS[a.id]

        def shift(x: int, n: int) -> int:
            # C semantics on the type's width: the count is taken modulo the width and the
            # result wraps.
            r = base(x, n % bits) & ((1 << bits) - 1)
            return r - (1 << bits) if r >> (bits - 1) else r

        return shift, rt
    rt = a if _NUMERIC_RANK[a.id] >= _NUMERIC_RANK[b.id] else b
    return base, SqlType(rt.id)


_INTERVAL_SCALE_OPS = ("*", "/")


def _interval_scaling(
    op: str, a: SqlType, b: SqlType
) -> tuple[Callable[..., object], SqlType] | None:
    if a.id is TypeId.INTERVAL and not a.array and is_numeric(b):
        if op == "*":
            return (lambda iv, f: interval_mul(iv, float(f))), T.INTERVAL
        return (lambda iv, f: interval_mul(iv, 1.0 / _nonzero(float(f)))), T.INTERVAL
    if op == "*" and b.id is TypeId.INTERVAL and not b.array and is_numeric(a):
        return (lambda f, iv: interval_mul(iv, float(f))), T.INTERVAL
    return None


def _nonzero(f: float) -> float:
    if f == 0:
        raise _div_zero()
    return f


def interval_mul(iv: Interval, factor: float) -> Interval:
    """Postgres's interval_mul: fractional months spill into days (30 a month), fractional
    days into time (24 hours a day)."""
    months = iv.months * factor
    days = iv.days * factor
    result_months = int(months)
    result_days = int(days)
    month_rem_days = round((months - result_months) * 30, 6)
    sec_rem = round((days - result_days + month_rem_days - int(month_rem_days)) * 86400, 6)
    if abs(sec_rem) >= 86400:
        result_days += int(sec_rem / 86400)
        sec_rem -= int(sec_rem / 86400) * 86400
    result_days += int(month_rem_days)
    micros = round(iv.microseconds * factor + sec_rem * 1_000_000)
    return Interval(result_months, result_days, micros)


def _datetime_arithmetic(
    op: str, a: SqlType, b: SqlType
) -> tuple[Callable[..., object], SqlType] | None:
    ai, bi = a.id, b.id
    ints = (TypeId.INT2, TypeId.INT4, TypeId.INT8)
    if ai is TypeId.DATE and bi in ints and op in "+-":
        sign = 1 if op == "+" else -1
        return (lambda d, n: d + dt.timedelta(days=sign * n)), T.DATE
    if ai in ints and bi is TypeId.DATE and op == "+":
        return (lambda n, d: d + dt.timedelta(days=n)), T.DATE
    if ai is TypeId.DATE and bi is TypeId.DATE and op == "-":
        return (lambda x, y: (x - y).days), T.INT4
    stamps = (TypeId.TIMESTAMP, TypeId.TIMESTAMPTZ, TypeId.DATE)
    if ai in stamps and bi is TypeId.INTERVAL and op in "+-":
        rt = T.TIMESTAMP if ai is TypeId.DATE else SqlType(ai)
        sign = 1 if op == "+" else -1
        return (lambda s, iv: add_interval(_as_timestamp(s), iv, sign)), rt
    if ai is TypeId.INTERVAL and bi in stamps and op == "+":
        rt = T.TIMESTAMP if bi is TypeId.DATE else SqlType(bi)
        return (lambda iv, s: add_interval(_as_timestamp(s), iv, 1)), rt
    if ai in (TypeId.TIMESTAMP, TypeId.TIMESTAMPTZ) and bi is ai and op == "-":
        return (lambda x, y: timedelta_to_interval(x - y)), T.INTERVAL
    if op == "+" and {ai, bi} == {TypeId.DATE, TypeId.TIME}:
        if ai is TypeId.DATE:
            return (lambda d, t: dt.datetime.combine(d, t)), T.TIMESTAMP
        return (lambda t, d: dt.datetime.combine(d, t)), T.TIMESTAMP
    if ai is TypeId.INTERVAL and bi is TypeId.INTERVAL and op in "+-":
        return ((lambda x, y: x + y) if op == "+" else (lambda x, y: x - y)), T.INTERVAL
    return None


def _as_timestamp(v: object) -> dt.datetime:
    if isinstance(v, dt.datetime):
        return v
    assert isinstance(v, dt.date)
    return dt.datetime(v.year, v.month, v.day)


def add_interval(ts: dt.datetime, iv: Interval, sign: int) -> dt.datetime:
    """ts + sign * interval, months first (clamping the day), then days, then microseconds.
    For a timestamptz the months and days move its wall clock in the running statement's
    zone (``+ interval '1 day'`` keeps the time of day across a DST change), as Postgres's
    timestamptz_pl_interval does; the microseconds are elapsed time."""
    if ts.tzinfo is not None and (iv.months or iv.days):
        local = add_interval(time_zones.to_local(ts), Interval(iv.months, iv.days, 0), sign)
        ts = time_zones.from_local(local)
        return ts + dt.timedelta(microseconds=sign * iv.microseconds)
    months = ts.month - 1 + sign * iv.months
    year = ts.year + months // 12
    month = months % 12 + 1
    day = min(ts.day, _days_in_month(year, month))
    out = ts.replace(year=year, month=month, day=day)
    return out + dt.timedelta(days=sign * iv.days, microseconds=sign * iv.microseconds)


def _days_in_month(year: int, month: int) -> int:
    if month == 12:
        return 31
    return (dt.date(year, month + 1, 1) - dt.date(year, month, 1)).days


def timedelta_to_interval(td: dt.timedelta) -> Interval:
    """The difference of two timestamps as Postgres's timestamp_mi gives it: whole 24-hour
    periods become days, and days and time keep the sign of the whole (interval_justify_hours:
    ``-308 days -06:27:59``, not ``-309 days +17:32:01``)."""
    total = (td.days * 86_400 + td.seconds) * 1_000_000 + td.microseconds
    days = abs(total) // 86_400_000_000 * (1 if total >= 0 else -1)
    return Interval(0, days, total - days * 86_400_000_000)


_COMPARE = {
    "=": operator.eq,
    "<>": operator.ne,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def comparison_type(a: SqlType, b: SqlType) -> SqlType | None:
    """The type both sides of a comparison are brought to, or None if they cannot compare."""
    if a == b:
        return a
    if a.array or b.array:
        return a if a.array and b.array and a.id == b.id else None
    if is_numeric(a) and is_numeric(b):
        ra, rb = _NUMERIC_RANK[a.id], _NUMERIC_RANK[b.id]
        return a if ra >= rb else b
    if is_string(a) and is_string(b):
        return T.TEXT
    if a.id == b.id:
        return SqlType(a.id)
    dates = (TypeId.DATE, TypeId.TIMESTAMP, TypeId.TIMESTAMPTZ)
    if a.id in dates and b.id in dates:
        order = dates.index(a.id), dates.index(b.id)
        return SqlType(dates[max(order)])
    if {a.id, b.id} <= {TypeId.JSON, TypeId.JSONB, TypeId.TEXT}:
        return None
    reg = {TypeId.OID, TypeId.REGCLASS, TypeId.REGTYPE, TypeId.REGPROC, TypeId.REGNAMESPACE}
    if a.id in reg and (b.id in reg or is_numeric(b)):
        return T.OID
    if b.id in reg and is_numeric(a):
        return T.OID
    return None


def comparison(op: str, t: SqlType) -> Callable[[object, object], object]:
    """The comparison ``op`` on two values already of type t."""
    base = _COMPARE[op]
    if t.id is TypeId.JSON and not t.array:
        raise operator_missing(op, t, t)  # json has no comparison operators, only jsonb
    if isinstance(t.id, EnumType) or t.id in (TypeId.JSONB, TypeId.RECORD):
        # Enums: declaration order, for arrays of enums too. jsonb: by kind, then size, then
        # content, with numbers by value ('1.0' = '1'), not as their text. Records: field by
        # field, NULL fields equal to each other and above values (record_eq / record_cmp).
        key = casts_compare_key(t)
        return lambda x, y: base(key(x), key(y))
    if t.id is TypeId.INTERVAL and not t.array:
        return lambda x, y: base(x.sort_key(), y.sort_key())  # type: ignore[union-attr]
    if t.id is TypeId.BPCHAR and not t.array:
        return lambda x, y: base(x.rstrip(" "), y.rstrip(" "))  # type: ignore[union-attr]
    if t.id in (TypeId.FLOAT4, TypeId.FLOAT8) and not t.array:
        return lambda x, y: base(_float_key(x), _float_key(y))  # type: ignore[arg-type]
    if t.id is TypeId.NUMERIC and not t.array:
        return lambda x, y: base(numeric_key(x), numeric_key(y))  # type: ignore[arg-type]
    return base


def order_key(t: SqlType) -> Callable[[Any], Any] | None:
    """The key that orders numerics and floats as Postgres does (NaN equal to NaN and above
    everything), or None where values order as they are (greatest, least)."""
    if t.array:
        return None
    if t.id is TypeId.NUMERIC:
        return numeric_key
    if t.id in (TypeId.FLOAT4, TypeId.FLOAT8):
        return _float_key
    return None


def negation(t: SqlType) -> Callable[[Any], Any]:
    """Unary minus on a number of type ``t``: 22003 when an integer's negation does not fit;
    exact for numerics (Decimal's ``-`` rounds to the thread's context), with no -0."""
    if t.id in _INT_RANGES:
        check = check_int(t)
        return lambda v: check(-v)
    if t.id is TypeId.NUMERIC:
        return lambda v: v.copy_negate() if v and not v.is_nan() else v
    return operator.neg


def _float_key(f: float) -> tuple[int, float]:
    # Postgres: NaN equals NaN and sorts above every other value.
    return (1, 0.0) if f != f else (0, f)


def operator_missing(op: str, a: SqlType, b: SqlType) -> SqlError:
    return SqlError(
        UNDEFINED_FUNCTION,
        f"operator does not exist: {a} {op} {b}",
        hint="No operator matches the given name and argument types. "
        "You might need to add explicit type casts.",
    )


def like_matcher(pattern: str, case_insensitive: bool, escape: str = "\\") -> re.Pattern[str]:
    """A compiled regex for a LIKE pattern (``%`` any run, ``_`` one character)."""
    out = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == escape and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        if ch == "%":
            out.append(".*")
        elif ch == "_":
            out.append(".")
        else:
            out.append(re.escape(ch))
        i += 1
    flags = re.DOTALL | (re.IGNORECASE if case_insensitive else 0)
    return re.compile("".join(out), flags)


def concat_text(a: object, b: object) -> str:
    return f"{a}{b}"
