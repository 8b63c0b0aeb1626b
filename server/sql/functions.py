"""Scalar functions: a registry of name -> resolver(argument types) -> implementation.

A resolver returns a :class:`FunctionImpl` (the callable, its result type, whether it is
strict, whether it needs the execution context as first argument) or None when the argument
types do not fit. Modules add functions with :func:`register`. This module holds the registry,
the argument checks and the basic string and math functions; the larger families have their
own modules (imported at the end of this one): ``array_functions``, ``datetime_functions``,
``json_functions``, ``numeric_math``, ``quoting``, ``regex_functions`` and ``to_char``. The
catalog functions psql and drivers call (format_type, pg_get_expr, ...) live in
``catalog_functions``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import math
import random
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from typing import Any

from percolator.server.sql import time_zones
from percolator.server.sql import types as T
from percolator.server.sql.errors import (
    INVALID_PARAMETER_VALUE,
    NUMERIC_VALUE_OUT_OF_RANGE,
    SqlError,
)
from percolator.server.sql.operators import (
    EXACT,
    check_int,
    float_overflow,
    float_underflow,
    is_numeric,
    is_string,
    numeric_div_trunc,
    round_numeric_to,
    trunc_numeric_to,
)
from percolator.server.sql.types import Interval, SqlType, TypeId


@dataclass(frozen=True)
class FunctionImpl:
    """A resolved function: the callable, its result type and how to call it. ``args``, when
    given, are the parameter types the binder casts the arguments to before the call."""

    fn: Callable[..., object]
    type: SqlType
    strict: bool = True
    needs_context: bool = False
    volatile: bool = False
    args: tuple[SqlType, ...] | None = None


Resolver = Callable[[Sequence[SqlType]], FunctionImpl | None]
_REGISTRY: dict[str, list[Resolver]] = {}


def register(*names: str) -> Callable[[Resolver], Resolver]:
    """Decorator: add a resolver under one or more function names."""

    def add(resolver: Resolver) -> Resolver:
        for name in names:
            _REGISTRY.setdefault(name, []).append(resolver)
        return resolver

    return add


def resolve(name: str, arg_types: Sequence[SqlType]) -> FunctionImpl | None:
    """The implementation of ``name(arg_types...)``, or None."""
    for resolver in _REGISTRY.get(name, ()):
        impl = resolver(arg_types)
        if impl is not None:
            return impl
    return None


def known(name: str) -> bool:
    return name in _REGISTRY


def fixed(
    fn: Callable[..., object],
    result: SqlType,
    arity: int | tuple[int, ...],
    *,
    strict: bool = True,
    context: bool = False,
    volatile: bool = False,
    params: tuple[SqlType, ...] | None = None,
) -> Resolver:
    """A resolver for a function taking any arguments of the given count (``params``: the
    types the binder casts them to, for a client that sends them untyped)."""
    counts = (arity,) if isinstance(arity, int) else arity

    def resolver(args: Sequence[SqlType]) -> FunctionImpl | None:
        if len(args) not in counts:
            return None
        return FunctionImpl(fn, result, strict, context, volatile, params)

    return resolver


def define(
    names: str | tuple[str, ...],
    fn: Callable[..., object],
    result: SqlType,
    arity: int | tuple[int, ...],
    **kw: Any,
) -> None:
    """Register a function with a fixed result type (keywords: :func:`fixed`'s)."""
    for name in (names,) if isinstance(names, str) else names:
        _REGISTRY.setdefault(name, []).append(fixed(fn, result, arity, **kw))


def _pg_notify(ctx: Any, channel: str | None, payload: str | None) -> str:
    """NOTIFY as a function: sent when the transaction commits (server/notifications.py)."""
    ctx.notifications.notify(channel or "", payload or "")
    return ""


define("pg_notify", _pg_notify, T.VOID, 2, context=True, volatile=True)


# -- strings --------------------------------------------------------------------------------


def _substr(s: str, start: int, length: int | None = None) -> str:
    begin = start - 1
    if length is not None:
        if length < 0:
            raise SqlError("22011", "negative substring length not allowed")
        end = begin + length
        return s[max(begin, 0) : max(end, 0)]
    return s[max(begin, 0) :]


def _pad(left: bool) -> Callable[..., str]:
    def pad(s: str, n: int, fill: str = " ") -> str:
        if n <= len(s):
            return s[:n]
        if not fill:
            return s
        padding = (fill * n)[: n - len(s)]
        return padding + s if left else s + padding

    return pad


def _split_part(s: str, delim: str, n: int) -> str:
    if n == 0:
        raise SqlError(INVALID_PARAMETER_VALUE, "field position must not be zero")
    parts = s.split(delim) if delim else [s]
    idx = n - 1 if n > 0 else len(parts) + n
    return parts[idx] if 0 <= idx < len(parts) else ""


def _initcap(s: str) -> str:
    out = []
    prev_alnum = False
    for ch in s:
        out.append(ch.lower() if prev_alnum else ch.upper())
        prev_alnum = ch.isalnum()
    return "".join(out)


def _trim(chars_default: str = " ", left: bool = True, right: bool = True) -> Callable[..., str]:
    def trim(s: str, chars: str = chars_default) -> str:
        if left and right:
            return s.strip(chars)
        return s.lstrip(chars) if left else s.rstrip(chars)

    return trim


def _concat(*args: object) -> str:
    from percolator.server.sql.textio import text_out

    return "".join(
        "" if a is None else a if isinstance(a, str) else _plain(a, text_out) for a in args
    )


def _plain(v: object, text_out: Callable[[SqlType, object], str]) -> str:
    return text_out(_infer_type(v), v)


def _infer_type(v: object) -> SqlType:
    """The SQL type of a Python value (for variadic functions over mixed arguments)."""
    if isinstance(v, bool):
        return T.BOOL
    if isinstance(v, int):
        return T.INT8
    if isinstance(v, float):
        return T.FLOAT8
    if isinstance(v, Decimal):
        return T.NUMERIC
    if isinstance(v, dt.datetime):
        return T.TIMESTAMPTZ if v.tzinfo is not None else T.TIMESTAMP
    if isinstance(v, dt.date):
        return T.DATE
    if isinstance(v, bytes):
        return T.BYTEA
    if isinstance(v, uuid.UUID):
        return T.UUID
    if isinstance(v, Interval):
        return T.INTERVAL
    if isinstance(v, list):
        return T.TEXT_ARRAY
    return T.TEXT


define(("lower",), lambda s: s.lower(), T.TEXT, 1)
define(("upper",), lambda s: s.upper(), T.TEXT, 1)
define(("length", "char_length", "character_length"), len, T.INT4, 1)
define(("octet_length",), lambda s: len(s.encode()) if isinstance(s, str) else len(s), T.INT4, 1)
define(("substr", "substring"), _substr, T.TEXT, (2, 3))
define(("lpad",), _pad(True), T.TEXT, (2, 3))
define(("rpad",), _pad(False), T.TEXT, (2, 3))
define(("btrim", "trim"), _trim(), T.TEXT, (1, 2))
define(("ltrim",), _trim(left=True, right=False), T.TEXT, (1, 2))
define(("rtrim",), _trim(left=False, right=True), T.TEXT, (1, 2))
define(("replace",), lambda s, a, b: s.replace(a, b) if a else s, T.TEXT, 3)
define(("repeat",), lambda s, n: s * max(n, 0), T.TEXT, 2)
define(("reverse",), lambda s: s[::-1], T.TEXT, 1)
define(("left",), lambda s, n: s[:n], T.TEXT, 2)
define(("right",), lambda s, n: s[-n:] if n > 0 else (s[-n:] if n < 0 else ""), T.TEXT, 2)
define(("strpos",), lambda s, sub: s.find(sub) + 1, T.INT4, 2)
define(("position",), lambda sub, s: s.find(sub) + 1, T.INT4, 2)
define(("split_part",), _split_part, T.TEXT, 3)
define(("initcap",), _initcap, T.TEXT, 1)
define(
    ("md5",), lambda s: hashlib.md5(s.encode() if isinstance(s, str) else s).hexdigest(), T.TEXT, 1
)
define(("concat",), _concat, T.TEXT, tuple(range(1, 100)), strict=False)
define(
    ("concat_ws",),
    lambda sep, *a: None if sep is None else sep.join(_concat(x) for x in a if x is not None),
    T.TEXT,
    tuple(range(2, 100)),
    strict=False,
)
define(("ascii",), lambda s: ord(s[0]) if s else 0, T.INT4, 1)
define(("starts_with",), lambda s, p: s.startswith(p), T.BOOL, 2)


def _translate(s: str, src: str, dst: str) -> str:
    table: dict[str, str | None] = {}
    for i, ch in enumerate(src):
        # The first occurrence of a character in ``src`` wins; extra ones map to nothing.
        table.setdefault(ch, dst[i] if i < len(dst) else None)
    return "".join(c for ch in s if (c := table.get(ch, ch)) is not None)


define(("translate",), _translate, T.TEXT, 3)


@register("bit_length")
def _bit_length(args: Sequence[SqlType]) -> FunctionImpl | None:
    if len(args) != 1 or not (string_or_unknown(args[0]) or args[0].id is TypeId.BYTEA):
        return None
    return FunctionImpl(lambda v: 8 * len(v.encode() if isinstance(v, str) else v), T.INT4)


@register("to_hex")
def _to_hex(args: Sequence[SqlType]) -> FunctionImpl | None:
    if len(args) != 1 or args[0].id not in (TypeId.INT2, TypeId.INT4, TypeId.INT8):
        return None
    mask = (1 << 64) - 1 if args[0].id is TypeId.INT8 else (1 << 32) - 1
    return FunctionImpl(lambda n: format(n & mask, "x"), T.TEXT)


def _chr(n: int) -> str:
    if n == 0:
        raise SqlError("54000", "null character not permitted")
    if n < 0:
        raise SqlError(INVALID_PARAMETER_VALUE, "character number must be positive")
    if n > 0x10FFFF:
        raise SqlError("54000", f"requested character too large for encoding: {n}")
    if 0xD800 <= n <= 0xDFFF:
        raise SqlError("54000", f"requested character not valid for encoding: {n}")
    return chr(n)


@register("chr")
def _chr_resolver(args: Sequence[SqlType]) -> FunctionImpl | None:
    if len(args) != 1 or args[0].id not in (TypeId.INT2, TypeId.INT4, TypeId.UNKNOWN):
        return None
    return FunctionImpl(_chr, T.TEXT, args=(T.INT4,))


# -- math -----------------------------------------------------------------------------------


def _same_numeric(
    fn_int: Callable[..., object], fn_dec: Callable[..., object], fn_float: Callable[..., object]
) -> Resolver:
    def resolver(args: Sequence[SqlType]) -> FunctionImpl | None:
        if len(args) != 1 or not (is_numeric(args[0]) or args[0].id is TypeId.UNKNOWN):
            return None
        t = args[0]
        if t.id in (TypeId.INT2, TypeId.INT4, TypeId.INT8):
            return FunctionImpl(fn_int, SqlType(t.id))
        if t.id is TypeId.NUMERIC:
            return FunctionImpl(fn_dec, T.NUMERIC)
        if t.id is TypeId.UNKNOWN:
            # An untyped literal resolves to double precision, as in Postgres ('x' -> 22P02).
            from percolator.server.sql.textio import text_in

            return FunctionImpl(lambda v: fn_float(text_in(T.FLOAT8, str(v))), T.FLOAT8)
        return FunctionImpl(fn_float, T.FLOAT8)

    return resolver


_abs_any = _same_numeric(abs, lambda d: d.copy_abs(), lambda x: abs(float(x)))


@register("abs")
def _abs(args: Sequence[SqlType]) -> FunctionImpl | None:
    """abs(); for integers 22003 where the result does not fit (abs of the minimum value)."""
    impl = _abs_any(args)
    if impl is not None and args[0].id is TypeId.FLOAT4:
        return FunctionImpl(impl.fn, T.FLOAT4)  # float4abs: real stays real
    if impl is None or args[0].id not in (TypeId.INT2, TypeId.INT4, TypeId.INT8):
        return impl
    check = check_int(args[0])
    return FunctionImpl(lambda v: check(abs(v)), impl.type)


def _float_integral(fn: Callable[[float], int]) -> Callable[[object], float]:
    """A float rounding function as C's rint/ceil/floor/trunc: infinities and NaN map to
    themselves and the result keeps the argument's sign (round(-0.4) is -0)."""

    def call(x: object) -> float:
        f = float(x)  # type: ignore[arg-type]
        if not math.isfinite(f):
            return f
        return math.copysign(float(fn(f)), f)

    return call


def _numeric_integral(rounding: str) -> Callable[[Decimal], Decimal]:
    def call(d: Decimal) -> Decimal:
        if not d.is_finite():
            return d
        r = d.to_integral_value(rounding=rounding, context=EXACT)
        return r if r else r.copy_abs()

    return call


register("ceil", "ceiling")(
    _same_numeric(lambda x: x, _numeric_integral(ROUND_CEILING), _float_integral(math.ceil))
)
register("floor")(
    _same_numeric(lambda x: x, _numeric_integral(ROUND_FLOOR), _float_integral(math.floor))
)


@register("sign")
def _sign(args: Sequence[SqlType]) -> FunctionImpl | None:
    # Postgres has sign(numeric) and sign(double precision) only: integers take the latter.
    if len(args) != 1 or not (is_numeric(args[0]) or args[0].id is TypeId.UNKNOWN):
        return None
    if args[0].id is TypeId.NUMERIC:
        return FunctionImpl(lambda d: d if d.is_nan() else Decimal((d > 0) - (d < 0)), T.NUMERIC)
    return FunctionImpl(lambda x: float((x > 0) - (x < 0)), T.FLOAT8, args=(T.FLOAT8,))


# round(numeric, s) and trunc(numeric, s) clamp s to numeric.c's NUMERIC_MAX_RESULT_SCALE.
_MAX_RESULT_SCALE = 2000


def _places(n: int) -> int:
    return max(-_MAX_RESULT_SCALE, min(n, _MAX_RESULT_SCALE))


def _round_numeric(x: object, places: int = 0) -> Decimal:
    d = x if isinstance(x, Decimal) else Decimal(str(x))
    if not d.is_finite():
        return d
    return round_numeric_to(d, _places(places))


def _trunc_numeric(x: object, places: int = 0) -> Decimal:
    d = x if isinstance(x, Decimal) else Decimal(str(x))
    if not d.is_finite():
        return d
    return trunc_numeric_to(d, _places(places))


@register("round")
def _round(args: Sequence[SqlType]) -> FunctionImpl | None:
    if not args or len(args) > 2 or (not is_numeric(args[0]) and args[0].id is not TypeId.UNKNOWN):
        return None
    if args[0].id in (TypeId.FLOAT4, TypeId.FLOAT8) and len(args) == 1:
        # float round() is round-half-even in Postgres (it uses rint()).
        return FunctionImpl(_float_integral(round), T.FLOAT8)
    return FunctionImpl(_round_numeric, T.NUMERIC)


@register("trunc")
def _trunc(args: Sequence[SqlType]) -> FunctionImpl | None:
    if not args or len(args) > 2:
        return None
    if args[0].id in (TypeId.FLOAT4, TypeId.FLOAT8) and len(args) == 1:
        return FunctionImpl(_float_integral(math.trunc), T.FLOAT8)
    return FunctionImpl(_trunc_numeric, T.NUMERIC)


def _float_fn(
    fn: Callable[[float], float], domain: Callable[[float], bool] | None = None, msg: str = ""
) -> Callable[[object], float]:
    def call(x: object) -> float:
        f = float(x)  # type: ignore[arg-type]
        if domain is not None and not domain(f):
            raise SqlError("2201F", msg)
        return fn(f)

    return call


def _power(a: object, b: object) -> float:
    """power(float8, float8) as dpow: POSIX's answers for NaN and infinities, 2201F for the
    complex and undefined cases, 22003 for overflow and underflow."""
    x, y = float(a), float(b)  # type: ignore[arg-type]
    if x != x:
        return 1.0 if y == 0 else x
    if y != y:
        return 1.0 if x == 1 else y
    if x == 0 and y < 0:
        raise SqlError("2201F", "zero raised to a negative power is undefined")
    if x < 0 and not (y.is_integer() or math.isinf(y)):  # floor(inf) == inf in C
        raise SqlError(
            "2201F", "a negative number raised to a non-integer power yields a complex result"
        )
    if math.isinf(y):
        ax = abs(x)
        if ax == 1:
            return 1.0
        return (y if ax > 1 else 0.0) if y > 0 else (0.0 if ax > 1 else -y)
    if math.isinf(x):
        return _infinite_base_power(x, y)
    try:
        r = math.pow(x, y)
    except OverflowError:
        raise float_overflow() from None
    if r == 0 and x != 0:
        raise float_underflow()
    return r


def _infinite_base_power(x: float, y: float) -> float:
    """dpow for x = +-Infinity and a finite y (already known to be an integer if x < 0)."""
    if y == 0:
        return 1.0
    if x > 0:
        return x if y > 0 else 0.0
    odd = not (y / 2).is_integer()
    if y > 0:
        return x if odd else -x
    return -0.0 if odd else 0.0


@register("power", "pow")
def _power_resolver(args: Sequence[SqlType]) -> FunctionImpl | None:
    """power(float8, float8), or power(numeric, numeric) when an argument is numeric and
    none is a float (Postgres prefers the float8 version otherwise: 2 ^ 10 is float8)."""
    if len(args) != 2:
        return None
    ids = {a.id for a in args}
    if TypeId.NUMERIC in ids and not ids & {TypeId.FLOAT4, TypeId.FLOAT8}:
        if all(is_numeric(a) or a.id is TypeId.UNKNOWN for a in args):
            from percolator.server.sql.numeric_math import numeric_power

            return FunctionImpl(numeric_power, T.NUMERIC, args=(T.NUMERIC, T.NUMERIC))
    return FunctionImpl(_power, T.FLOAT8, args=(T.FLOAT8, T.FLOAT8))


define(("pi",), lambda: math.pi, T.FLOAT8, 0)
define(("random",), random.random, T.FLOAT8, 0, volatile=True)
define(("mod",), lambda a, b: int(math.fmod(a, b)) if b else _raise_div(), T.INT8, 2)
define(("gen_random_uuid", "uuid_generate_v4"), uuid.uuid4, T.UUID, 0, volatile=True)


def _raise_div() -> int:
    raise SqlError("22012", "division by zero")


@register("greatest", "least")
def _greatest_least(args: Sequence[SqlType]) -> FunctionImpl | None:
    return None  # bound specially by the binder (needs a common type and its name)


# -- misc -----------------------------------------------------------------------------------


def _num_nonnulls(*args: object) -> int:
    return sum(a is not None for a in args)


define(("num_nonnulls",), _num_nonnulls, T.INT4, tuple(range(0, 100)), strict=False)
define(
    ("num_nulls",), lambda *a: sum(x is None for x in a), T.INT4, tuple(range(0, 100)), strict=False
)


def check_int_range(v: int, name: str = "integer") -> int:
    limits = {"smallint": 1 << 15, "integer": 1 << 31, "bigint": 1 << 63}
    lim = limits[name]
    if not -lim <= v < lim:
        raise SqlError(NUMERIC_VALUE_OUT_OF_RANGE, f"{name} out of range")
    return v


def string_or_unknown(t: SqlType) -> bool:
    return is_string(t) or t.id is TypeId.UNKNOWN


def wall_clock(v: dt.datetime, zone: dt.tzinfo | None = None) -> dt.datetime:
    """``v`` as a naive timestamp of ``zone`` (default: the running statement's zone); a
    timestamp without time zone is already one."""
    return time_zones.to_local(v, zone) if v.tzinfo is not None else v


# -- argument checks ---------------------------------------------------------------------------


def _text_first(resolver: Resolver, allow_bytea: bool, *, strip_bpchar: bool = True) -> Resolver:
    """``resolver`` restricted to a string (or untyped) first argument: lower(1) is 42883 as
    in Postgres, not a failure inside the implementation."""

    def checked(args: Sequence[SqlType]) -> FunctionImpl | None:
        if args and not (
            string_or_unknown(args[0]) or (allow_bytea and args[0].id is TypeId.BYTEA)
        ):
            return None
        impl = resolver(args)
        if strip_bpchar and impl is not None and impl.args is None and args and _is_bpchar(args[0]):
            # A character(n) argument reaches a text function through the bpchar -> text
            # cast, which drops its padding: length('ab'::char(4)) is 2, as in Postgres.
            rest = [T.TEXT if a.id is TypeId.UNKNOWN else a for a in args[1:]]
            impl = dataclasses.replace(impl, args=(T.TEXT, *rest))
        return impl

    return checked


def _is_bpchar(t: SqlType) -> bool:
    return t.id is TypeId.BPCHAR and not t.array


for _name in ("lower", "upper", "btrim", "trim", "ltrim", "rtrim", "replace", "repeat",
              "reverse", "left", "right", "strpos", "split_part", "initcap", "lpad", "rpad",
              "starts_with", "ascii", "translate"):  # fmt: skip
    _REGISTRY[_name] = [_text_first(r, False) for r in _REGISTRY.get(_name, [])]
_BYTEA_TOO = ("length", "octet_length", "substr", "substring", "md5")
for _name in ("char_length", "character_length", *_BYTEA_TOO):
    # octet_length counts a character(n)'s padding, as Postgres's bpcharoctetlen does.
    _REGISTRY[_name] = [
        _text_first(r, _name in _BYTEA_TOO, strip_bpchar=_name != "octet_length")
        for r in _REGISTRY.get(_name, [])
    ]


def _bytea_substr(args: Sequence[SqlType]) -> FunctionImpl | None:
    """substr / substring of a bytea: bytes, not text."""
    if len(args) not in (2, 3) or args[0].array or args[0].id is not TypeId.BYTEA:
        return None
    if not all(is_numeric(a) or a.id is TypeId.UNKNOWN for a in args[1:]):
        return None
    return FunctionImpl(_substr, T.BYTEA)


for _name in ("substr", "substring"):
    _REGISTRY[_name].insert(0, _bytea_substr)


def _div(a: object, b: object) -> Decimal:
    return numeric_div_trunc(Decimal(a), Decimal(b))  # type: ignore[arg-type]


@register("div")
def _div_resolver(args: Sequence[SqlType]) -> FunctionImpl | None:
    if len(args) != 2 or not all(is_numeric(a) or a.id is TypeId.UNKNOWN for a in args):
        return None
    return FunctionImpl(_div, T.NUMERIC)


# The modules below register more functions when imported. They are imported here, after the
# registry and the helpers they use are defined, so that whoever can call resolve() sees their
# functions. They import only this module (never one another), so the import cycle is harmless
# whichever module is imported first.
from percolator.server.sql import (  # noqa: E402, F401
    array_functions,
    datetime_functions,
    json_functions,
    numeric_math,
    quoting,
    regex_functions,
    to_char,
)
