"""sqrt, exp, ln, log, cbrt and factorial.

Postgres has float and numeric versions of sqrt, exp, ln and log: an integer argument takes the
float one (double precision is the preferred numeric type), a numeric argument the numeric one,
whose result scale follows numeric.c (at least 16 significant digits, never less than the
argument's scale).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from decimal import MAX_EMAX, MIN_EMIN, ROUND_HALF_UP, Decimal, localcontext

from percolator.server.sql import types as T
from percolator.server.sql.errors import NUMERIC_VALUE_OUT_OF_RANGE, SqlError
from percolator.server.sql.functions import FunctionImpl, Resolver, define, register
from percolator.server.sql.operators import (
    EXACT,
    divide_rounded,
    is_numeric,
    numeric_result_check,
    round_numeric_to,
)
from percolator.server.sql.types import SqlType, TypeId

_MIN_SIG_DIGITS = 16
_MAX_DISPLAY_SCALE = 1000
_LOG_ZERO = "cannot take logarithm of zero"
_LOG_NEGATIVE = "cannot take logarithm of a negative number"
_INVALID_ARGUMENT_FOR_LOG = "2201E"
_INVALID_ARGUMENT_FOR_POWER = "2201F"


def _dscale(d: Decimal) -> int:
    exponent = d.as_tuple().exponent
    return -exponent if isinstance(exponent, int) and exponent < 0 else 0


def _nbase(d: Decimal) -> tuple[int, list[int]]:
    """Postgres's base-10000 form of ``|d|``: the weight of the first digit and the digits,
    without leading or trailing zero digits (as a stored numeric is)."""
    _, digits, exponent = abs(d).normalize().as_tuple()
    if not any(digits) or not isinstance(exponent, int):
        return 0, []
    shift = exponent % 4
    n = int("".join(map(str, digits))) * 10**shift
    groups: list[int] = []
    while n:
        groups.append(n % 10000)
        n //= 10000
    groups.reverse()
    return len(groups) - 1 + (exponent - shift) // 4, groups


def _ln_dweight(d: Decimal) -> int:
    """numeric.c's estimate_ln_dweight: the decimal weight of ln(d)."""
    if Decimal("0.9") <= d <= Decimal("1.1"):
        weight, digits = _nbase(d - 1)
        return weight * 4 + int(math.log10(digits[0])) if digits else 0
    weight, digits = _nbase(d)
    if not digits:
        return 0
    lead, dweight = digits[0], weight * 4
    if len(digits) > 1:
        lead, dweight = lead * 10000 + digits[1], dweight - 4
    # C's (int) cast truncates toward zero.
    return int(math.log10(abs(math.log(lead) + dweight * 2.302585092994046)))


def _clamp_scale(rscale: int, *args: Decimal) -> int:
    return min(max(rscale, *(_dscale(a) for a in args), 0), _MAX_DISPLAY_SCALE)


def _rounded(compute: Callable[[], Decimal], rscale: int, digits_before: int) -> Decimal:
    """``compute()`` evaluated with enough precision, rounded half up to ``rscale`` places."""
    with localcontext() as ctx:
        ctx.prec = rscale + max(digits_before, 1) + 25
        return compute().quantize(Decimal(1).scaleb(-rscale), rounding=ROUND_HALF_UP)


def _as_decimal(v: object) -> Decimal:
    return v if isinstance(v, Decimal) else Decimal(str(v))


def _numeric_sqrt(v: object) -> Decimal:
    d = _as_decimal(v)
    if d.is_nan():
        return d
    if d < 0:
        raise SqlError(_INVALID_ARGUMENT_FOR_POWER, "cannot take square root of a negative number")
    if d.is_infinite():
        return d
    weight, _ = _nbase(d)
    sweight = (weight + 1) * 4 // 2 - 1
    rscale = _clamp_scale(_MIN_SIG_DIGITS - sweight, d)
    return _rounded(d.sqrt, rscale, sweight + 1)


def _numeric_exp(v: object) -> Decimal:
    d = _as_decimal(v)
    if d.is_nan():
        return d
    if d.is_infinite():
        return d if d > 0 else Decimal(0)
    val = float(d)
    if abs(val) >= 6000:  # numeric.c's limit (NUMERIC_MAX_RESULT_SCALE * 3)
        if val > 0:
            raise SqlError(NUMERIC_VALUE_OUT_OF_RANGE, "value overflows numeric format")
        return Decimal(0).scaleb(-_clamp_scale(_MIN_SIG_DIGITS - int(val * 0.434294481903252), d))
    dweight = int(max(min(val * 0.434294481903252, 2000), -2000))
    rscale = _clamp_scale(_MIN_SIG_DIGITS - dweight, d)
    return _rounded(d.exp, rscale, dweight + 1)


def _check_log_arg(d: Decimal) -> None:
    if d == 0:
        raise SqlError(_INVALID_ARGUMENT_FOR_LOG, _LOG_ZERO)
    if d < 0:
        raise SqlError(_INVALID_ARGUMENT_FOR_LOG, _LOG_NEGATIVE)


def _numeric_ln(v: object) -> Decimal:
    d = _as_decimal(v)
    if d.is_nan():
        return d
    _check_log_arg(d)
    if d.is_infinite():
        return d
    dweight = _ln_dweight(d)
    rscale = _clamp_scale(_MIN_SIG_DIGITS - dweight, d)
    return _rounded(d.ln, rscale, dweight + 1)


def _numeric_log(base: object, num: object) -> Decimal:
    """log(base, num) for numerics (log_var in numeric.c)."""
    b, x = _as_decimal(base), _as_decimal(num)
    if b.is_nan() or x.is_nan():
        return Decimal("NaN")
    _check_log_arg(b)
    _check_log_arg(x)
    if b.is_infinite() or x.is_infinite():
        raise SqlError("0A000", "log() of an infinite numeric is not supported")
    if b == 1:
        raise SqlError("22012", "division by zero")
    dweight = _ln_dweight(x) - _ln_dweight(b)
    rscale = _clamp_scale(_MIN_SIG_DIGITS - dweight, b, x)
    return _rounded(lambda: x.ln() / b.ln(), rscale, dweight + 1)


def _float_log(fn: Callable[[float], float]) -> Callable[[object], float]:
    def call(x: object) -> float:
        f = float(x)  # type: ignore[arg-type]
        if f == 0:
            raise SqlError(_INVALID_ARGUMENT_FOR_LOG, _LOG_ZERO)
        if f < 0:
            raise SqlError(_INVALID_ARGUMENT_FOR_LOG, _LOG_NEGATIVE)
        return fn(f)

    return call


def _float_sqrt(x: object) -> float:
    f = float(x)  # type: ignore[arg-type]
    if f < 0:
        raise SqlError(_INVALID_ARGUMENT_FOR_POWER, "cannot take square root of a negative number")
    return math.sqrt(f)


def _float_exp(x: object) -> float:
    f = float(x)  # type: ignore[arg-type]
    try:
        result = math.exp(f)
    except OverflowError:
        raise SqlError(NUMERIC_VALUE_OUT_OF_RANGE, "value out of range: overflow") from None
    if result == 0 and math.isfinite(f):
        raise SqlError(NUMERIC_VALUE_OUT_OF_RANGE, "value out of range: underflow")
    return result


def _float_or_numeric(
    float_fn: Callable[[object], float], numeric_fn: Callable[[object], Decimal]
) -> Resolver:
    def resolver(args: Sequence[SqlType]) -> FunctionImpl | None:
        if len(args) != 1 or not (is_numeric(args[0]) or args[0].id is TypeId.UNKNOWN):
            return None
        if args[0].id is TypeId.NUMERIC:
            return FunctionImpl(numeric_fn, T.NUMERIC)
        return FunctionImpl(float_fn, T.FLOAT8, args=(T.FLOAT8,))

    return resolver


register("sqrt")(_float_or_numeric(_float_sqrt, _numeric_sqrt))
register("exp")(_float_or_numeric(_float_exp, _numeric_exp))
register("ln")(_float_or_numeric(_float_log(math.log), _numeric_ln))
register("log", "log10")(
    _float_or_numeric(_float_log(math.log10), lambda x: _numeric_log(Decimal(10), x))
)


@register("log")
def _log2(args: Sequence[SqlType]) -> FunctionImpl | None:
    """log(b, x): numeric only (a float argument does not cast to numeric implicitly)."""
    if len(args) != 2 or not all(_numeric_or_unknown(a) for a in args):
        return None
    return FunctionImpl(_numeric_log, T.NUMERIC, args=(T.NUMERIC, T.NUMERIC))


def _numeric_or_unknown(t: SqlType) -> bool:
    return t.id in (TypeId.INT2, TypeId.INT4, TypeId.INT8, TypeId.NUMERIC, TypeId.UNKNOWN)


define(("cbrt",), lambda x: math.cbrt(float(x)), T.FLOAT8, 1)


def _factorial(n: int) -> Decimal:
    if n < 0:
        raise SqlError(NUMERIC_VALUE_OUT_OF_RANGE, "factorial of a negative number is undefined")
    if n > 32177:  # the first factorial with more than numeric's 131072 digits
        raise SqlError(NUMERIC_VALUE_OUT_OF_RANGE, "value overflows numeric format")
    return Decimal(math.factorial(n))


@register("factorial")
def _factorial_resolver(args: Sequence[SqlType]) -> FunctionImpl | None:
    if len(args) != 1 or args[0].id not in (
        TypeId.INT2,
        TypeId.INT4,
        TypeId.INT8,
        TypeId.UNKNOWN,
    ):
        return None
    return FunctionImpl(_factorial, T.NUMERIC, args=(T.INT8,))


# -- power(numeric, numeric) ------------------------------------------------------------------

_INT32_MAX = (1 << 31) - 1
_NUMERIC_MAX_RESULT_SCALE = 2000
_LOG10_E = 0.434294481903252
_COMPLEX_POWER = "a negative number raised to a non-integer power yields a complex result"


def _zero(scale: int) -> Decimal:
    return Decimal((0, (0,), -scale))


def _one(scale: int) -> Decimal:
    return Decimal((0, (1,) + (0,) * scale, -scale))


def _is_integral(d: Decimal) -> bool:
    return d == d.to_integral_value()


def numeric_power(base: object, exponent: object) -> Decimal:
    """base ^ exponent for numerics (numeric_power and power_var in numeric.c): exact-ish
    integer powers, exp(y * ln x) otherwise, at Postgres's result scale."""
    x, y = _as_decimal(base), _as_decimal(exponent)
    if not x.is_finite() or not y.is_finite():
        return _special_power(x, y)
    if not x and y < 0:
        raise SqlError(_INVALID_ARGUMENT_FOR_POWER, "zero raised to a negative power is undefined")
    if _is_integral(y) and abs(y) <= _INT32_MAX:
        return _power_int(x, int(y), _dscale(y))
    return _power_general(x, y)


def _special_power(x: Decimal, y: Decimal) -> Decimal:
    """POSIX pow()'s answers for NaN and infinite operands, as numeric_power gives them."""
    if x.is_nan():
        return Decimal(1) if y.is_finite() and not y else x
    if y.is_nan():
        return Decimal(1) if x == 1 else y
    if not x and y < 0:
        raise SqlError(_INVALID_ARGUMENT_FOR_POWER, "zero raised to a negative power is undefined")
    if y.is_infinite():
        if x == -1:
            return Decimal(1)
        ax = x.copy_abs()
        if ax == 1:
            return Decimal(1)
        grows = (ax > 1) == (y > 0)
        return Decimal("Infinity") if grows else Decimal(0)
    # x is infinite, y finite.
    if not y:
        return Decimal(1)
    if x > 0:
        return x if y > 0 else Decimal(0)
    if not _is_integral(y):
        raise SqlError(_INVALID_ARGUMENT_FOR_POWER, _COMPLEX_POWER)
    if y < 0:
        return Decimal(0)
    return x if EXACT.remainder(y, 2) else -x


def _power_weight(x: Decimal, n: int) -> float:
    """power_var_int's estimate of the decimal weight of x ^ n, from x's leading 16 digits."""
    weight, digits = _nbase(x)
    if not digits:
        return 0.0
    f, p = float(digits[0]), weight * 4
    for d in digits[1:4]:
        f = f * 10000 + d
        p -= 4
    return n * (math.log10(f) + p)


def _power_int(x: Decimal, n: int, exp_dscale: int) -> Decimal:
    """power_var_int: x ^ n for an integer n, to at least 16 significant digits."""
    f = _power_weight(x, n)
    if f > 32768 * 4:
        raise SqlError(NUMERIC_VALUE_OUT_OF_RANGE, "value overflows numeric format")
    if f + 1 < -_MAX_DISPLAY_SCALE:
        return _zero(_MAX_DISPLAY_SCALE)
    rscale = min(max(_MIN_SIG_DIGITS - int(f), _dscale(x), exp_dscale, 0), _MAX_DISPLAY_SCALE)
    if n == 0:
        return _one(rscale)
    if n == -1:
        return divide_rounded(Decimal(1), x, rscale)
    if not x:
        return _zero(rscale)
    if n in (1, 2):
        exact = x if n == 1 else EXACT.multiply(x, x)
        return numeric_result_check(round_numeric_to(exact, rscale))
    # The repeated multiplications lose up to log10(|n|) digits: work with that many more.
    sig_digits = 1 + rscale + int(f) + int(math.log(abs(n))) + 8
    with localcontext() as ctx:
        ctx.prec = max(sig_digits, 1) + 8
        ctx.Emax, ctx.Emin = MAX_EMAX, MIN_EMIN
        r = x**n
    return numeric_result_check(round_numeric_to(r, rscale))


def _power_general(x: Decimal, y: Decimal) -> Decimal:
    """power_var for a non-integer (or huge) exponent: exp(y * ln(x))."""
    if not x:
        return _zero(_MIN_SIG_DIGITS)
    negative = False
    if x < 0:
        if not _is_integral(y):
            raise SqlError(_INVALID_ARGUMENT_FOR_POWER, _COMPLEX_POWER)
        negative = bool(EXACT.remainder(y, 2))
        x = x.copy_abs()
    # A low-precision exp * ln(base), to size the result (and catch overflow early).
    ln_dweight = _ln_dweight(x)
    local_rscale = max(8 - ln_dweight, 0)
    ln_base = _rounded(x.ln, local_rscale, 1)
    val = float(round_numeric_to(EXACT.multiply(ln_base, y), local_rscale))
    if abs(val) > _NUMERIC_MAX_RESULT_SCALE * 3.01:
        if val > 0:
            raise SqlError(NUMERIC_VALUE_OUT_OF_RANGE, "value overflows numeric format")
        return _zero(_MAX_DISPLAY_SCALE)
    val *= _LOG10_E
    rscale = min(max(_MIN_SIG_DIGITS - int(val), _dscale(x), _dscale(y), 0), _MAX_DISPLAY_SCALE)
    sig_digits = max(rscale + int(val), 0)
    with localcontext() as ctx:
        ctx.prec = sig_digits + 12
        ctx.Emax, ctx.Emin = MAX_EMAX, MIN_EMIN
        r = x**y
    r = numeric_result_check(round_numeric_to(r, rscale))
    return -r if negative and r else r
