"""Aggregate functions: result types and accumulators (count, sum, avg, min, max, string_agg,
array_agg, bool_and/or, json(b)_agg, stddev and variance), with Postgres's result types (sum of
int4 is bigint, avg of integers is numeric, stddev of floats is double precision, ...)."""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from decimal import ROUND_HALF_UP, Decimal, localcontext
from typing import Any

from percolator.server.sql import types as T
from percolator.server.sql.errors import UNDEFINED_FUNCTION, SqlError
from percolator.server.sql.operators import (
    float_arithmetic,
    interval_mul,
    numeric_add,
    numeric_div,
)
from percolator.server.sql.types import Interval, SqlType, TypeId

_BITWISE: dict[str, Callable[[int, int], int]] = {
    "bit_and": operator.and_,
    "bit_or": operator.or_,
    "bit_xor": operator.xor,
}
"""The integer bitwise aggregates and the operator each folds its values with."""


def aggregate_type(name: str, args: list[SqlType]) -> SqlType:
    """The result type of ``name(args)``; 42883 when the aggregate does not take them."""
    if name == "count":
        return T.INT8
    if not args:
        raise SqlError(UNDEFINED_FUNCTION, f"function {name}() does not exist")
    a = args[0]
    if name == "sum":
        if a.id in (TypeId.INT2, TypeId.INT4):
            return T.INT8
        if a.id in (TypeId.INT8, TypeId.NUMERIC):
            return T.NUMERIC
        if a.id in (TypeId.FLOAT4, TypeId.FLOAT8):
            return SqlType(a.id)
        if a.id is TypeId.INTERVAL:
            return T.INTERVAL
    elif name == "avg":
        if a.id in (TypeId.INT2, TypeId.INT4, TypeId.INT8, TypeId.NUMERIC):
            return T.NUMERIC
        if a.id in (TypeId.FLOAT4, TypeId.FLOAT8):
            return T.FLOAT8
        if a.id is TypeId.INTERVAL and not a.array:
            return T.INTERVAL
    elif name in ("min", "max"):
        if a.id not in (TypeId.JSON, TypeId.JSONB, TypeId.BOOL):
            # Postgres's min and max are declared per type, without a typmod; a varchar
            # goes to max(text).
            if a.id is TypeId.VARCHAR and not a.array:
                return T.TEXT
            return SqlType(a.id, -1, a.array)
    elif name in ("bool_and", "bool_or", "every"):
        if a.id is TypeId.BOOL:
            return T.BOOL
    elif name in _BITWISE:
        if a.id in (TypeId.INT2, TypeId.INT4, TypeId.INT8) and not a.array:
            return SqlType(a.id)
    elif name == "string_agg":
        if len(args) == 2:
            return T.BYTEA if a.id is TypeId.BYTEA else T.TEXT
    elif name == "array_agg":
        return SqlType(a.id, a.typmod, True)
    elif name in ("json_agg", "jsonb_agg"):
        return T.JSON if name == "json_agg" else T.JSONB
    elif name in ("json_object_agg", "jsonb_object_agg"):
        if len(args) == 2:
            return T.JSON if name == "json_object_agg" else T.JSONB
    elif name in _DEVIATIONS:
        if a.id in (TypeId.INT2, TypeId.INT4, TypeId.INT8, TypeId.NUMERIC):
            return T.NUMERIC
        if a.id in (TypeId.FLOAT4, TypeId.FLOAT8):
            return T.FLOAT8
    raise SqlError(
        UNDEFINED_FUNCTION,
        f"function {name}({', '.join(str(t) for t in args)}) does not exist",
        hint="No function matches the given name and argument types.",
    )


class Accumulator:
    """One group's state of one aggregate."""

    __slots__ = ()

    def add(self, *values: Any) -> None:
        raise NotImplementedError

    def result(self) -> object:
        raise NotImplementedError


class _Count(Accumulator):
    __slots__ = ("n",)

    def __init__(self) -> None:
        self.n = 0

    def add(self, *values: Any) -> None:
        if not values or values[0] is not None:
            self.n += 1

    def result(self) -> object:
        return self.n


def _adder(t: SqlType | None) -> Callable[[Any, Any], Any]:
    """The ``+`` a sum of values of ``t`` accumulates with: exact for numerics (not rounded to
    the thread's 28-digit decimal context), overflow-checked for floats (float8pl)."""
    if t is None or t.id in (TypeId.INT2, TypeId.INT4, TypeId.INT8):
        return operator.add  # Python ints are exact
    if t.id is TypeId.NUMERIC:
        return numeric_add
    if t.id in (TypeId.FLOAT4, TypeId.FLOAT8):
        return float_arithmetic("+", t)  # type: ignore[return-value]
    return operator.add


class _Sum(Accumulator):
    __slots__ = ("as_decimal", "plus", "seen", "total")

    def __init__(self, as_decimal: bool, plus: Callable[[Any, Any], Any]) -> None:
        self.total: Any = 0
        self.seen = False
        self.as_decimal = as_decimal
        self.plus = plus

    def add(self, *values: Any) -> None:
        v = values[0]
        if v is None:
            return
        self.total = self.plus(self.total, v) if self.seen else v
        self.seen = True

    def result(self) -> object:
        if not self.seen:
            return None
        return (
            Decimal(self.total) if self.as_decimal and isinstance(self.total, int) else self.total
        )


class _Avg(Accumulator):
    __slots__ = ("floating", "n", "plus", "total")

    def __init__(self, floating: bool, plus: Callable[[Any, Any], Any]) -> None:
        self.total: Any = 0
        self.n = 0
        self.floating = floating
        self.plus = plus

    def add(self, *values: Any) -> None:
        v = values[0]
        if v is None:
            return
        self.total = self.plus(self.total, v)
        self.n += 1

    def result(self) -> object:
        if self.n == 0:
            return None
        if self.floating:
            return float(self.total) / self.n
        return numeric_div(Decimal(self.total), Decimal(self.n))


class _IntervalAvg(_Avg):
    """avg(interval): the sum divided by the count as ``interval / float8`` divides."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(False, operator.add)
        self.total = Interval()

    def result(self) -> object:
        if self.n == 0:
            return None
        return interval_mul(self.total, 1.0 / self.n)


class _Extreme(Accumulator):
    __slots__ = ("best", "better")

    def __init__(self, better: Callable[[Any, Any], bool]) -> None:
        self.best: Any = None
        self.better = better

    def add(self, *values: Any) -> None:
        v = values[0]
        if v is None:
            return
        if self.best is None or self.better(v, self.best):
            self.best = v

    def result(self) -> object:
        return self.best


class _BoolAgg(Accumulator):
    __slots__ = ("is_and", "value")

    def __init__(self, is_and: bool) -> None:
        self.value: bool | None = None
        self.is_and = is_and

    def add(self, *values: Any) -> None:
        v = values[0]
        if v is None:
            return
        if self.value is None:
            self.value = bool(v)
        elif self.is_and:
            self.value = self.value and bool(v)
        else:
            self.value = self.value or bool(v)

    def result(self) -> object:
        return self.value


class _StringAgg(Accumulator):
    __slots__ = ("parts", "seps")

    def __init__(self) -> None:
        self.parts: list[Any] = []
        self.seps: list[Any] = []

    def add(self, *values: Any) -> None:
        v, sep = values[0], values[1] if len(values) > 1 else ""
        if v is None:
            return
        self.parts.append(v)
        self.seps.append("" if sep is None else sep)

    def result(self) -> object:
        if not self.parts:
            return None
        out = self.parts[0]
        for sep, part in zip(self.seps[1:], self.parts[1:], strict=True):
            out = out + sep + part
        return out


class _ArrayAgg(Accumulator):
    __slots__ = ("items",)

    def __init__(self) -> None:
        self.items: list[Any] = []

    def add(self, *values: Any) -> None:
        self.items.append(values[0])

    def result(self) -> object:
        return list(self.items) if self.items else None


class _JsonAgg(Accumulator):
    """json_agg / jsonb_agg: each value as to_json(b) makes it (json_agg keeps json as
    written and joins with ", ", and puts an array or a record after the first item on a new
    line, as Postgres does)."""

    __slots__ = ("items", "jsonb", "structured", "t")

    def __init__(self, t: SqlType, jsonb: bool) -> None:
        self.items: list[Any] = []
        self.t = t
        self.jsonb = jsonb
        self.structured = t.array or t.id is TypeId.RECORD

    def add(self, *values: Any) -> None:
        from percolator.server.sql.json_values import to_json_text, to_jsonb_value

        v = values[0]
        if self.jsonb:
            self.items.append(to_jsonb_value(self.t, v))
            return
        text = to_json_text(self.t, v)
        if self.items:
            text = (", \n " if self.structured and v is not None else ", ") + text
        self.items.append(text)

    def result(self) -> object:
        if not self.items:
            return None
        if self.jsonb:
            from percolator.server.sql.json_values import format_json_value

            return format_json_value(self.items)
        return "[" + "".join(self.items) + "]"


class _JsonObjectAgg(Accumulator):
    """json_object_agg / jsonb_object_agg(key, value); a NULL key is 22023 for jsonb and
    22004 for json, as in Postgres 16."""

    __slots__ = ("jsonb", "kt", "pairs", "vt")

    def __init__(self, kt: SqlType, vt: SqlType, jsonb: bool) -> None:
        self.pairs: list[tuple[str, Any]] = []
        self.kt, self.vt, self.jsonb = kt, vt, jsonb

    def add(self, *values: Any) -> None:
        from percolator.server.sql.json_values import to_json_text, to_jsonb_value
        from percolator.server.sql.textio import text_out

        k, v = values[0], values[1]
        if k is None and self.jsonb:
            raise SqlError("22023", "field name must not be null")
        if k is None:
            raise SqlError("22004", "null value not allowed for object key")
        key = text_out(self.kt, k)
        self.pairs.append(
            (key, to_jsonb_value(self.vt, v) if self.jsonb else to_json_text(self.vt, v))
        )

    def result(self) -> object:
        from percolator.server.sql.json_values import format_json_value

        if not self.pairs:
            return None
        if self.jsonb:
            return format_json_value(dict(self.pairs))
        body = ", ".join(f"{format_json_value(k)} : {v}" for k, v in self.pairs)
        return "{ " + body + " }"


# name -> (sample rather than population, standard deviation rather than variance)
_DEVIATIONS = {
    "stddev": (True, True),
    "stddev_samp": (True, True),
    "stddev_pop": (False, True),
    "variance": (True, False),
    "var_samp": (True, False),
    "var_pop": (False, False),
}


class _FloatDeviation(Accumulator):
    """stddev/variance of floats: the Youngs-Cramer running sums of float8_accum, so results
    agree with Postgres to the last bit."""

    __slots__ = ("n", "sample", "stddev", "sx", "sxx")

    def __init__(self, sample: bool, stddev: bool) -> None:
        self.n = 0.0
        self.sx = 0.0
        self.sxx = 0.0
        self.sample = sample
        self.stddev = stddev

    def add(self, *values: Any) -> None:
        v = values[0]
        if v is None:
            return
        v = float(v)
        old_n = self.n
        self.n += 1.0
        self.sx += v
        if old_n > 0.0:
            tmp = v * self.n - self.sx
            self.sxx += tmp * tmp / (self.n * old_n)
            if math.isinf(self.sx) or math.isinf(self.sxx):
                # Overflow, or an infinite input: Postgres's float8_accum makes Sxx NaN unless
                # the input itself was infinite.
                self.sxx = math.nan
        elif math.isnan(v) or math.isinf(v):
            self.sxx = math.nan

    def result(self) -> object:
        if self.n <= (1.0 if self.sample else 0.0):
            return None
        variance = self.sxx / (self.n - 1.0 if self.sample else self.n)
        return math.sqrt(variance) if self.stddev else variance


class _NumericDeviation(Accumulator):
    """stddev/variance of integers and numerics, computed exactly and rounded to the scale
    numeric_stddev_internal gives: (N * sum(x^2) - sum(x)^2) / (N * (N - 1)), or N * N."""

    __slots__ = ("n", "sample", "stddev", "sx", "sxx")

    def __init__(self, sample: bool, stddev: bool) -> None:
        self.n = 0
        self.sx = Decimal(0)
        self.sxx = Decimal(0)
        self.sample = sample
        self.stddev = stddev

    def add(self, *values: Any) -> None:
        v = values[0]
        if v is None:
            return
        d = v if isinstance(v, Decimal) else Decimal(v)
        with localcontext() as ctx:
            ctx.prec = 2000
            self.n += 1
            self.sx += d
            self.sxx += d * d

    def result(self) -> object:
        if self.n <= (1 if self.sample else 0):
            return None
        if not self.sx.is_finite() or not self.sxx.is_finite():
            return Decimal("NaN")
        with localcontext() as ctx:
            ctx.prec = 2000
            numerator = self.n * self.sxx - self.sx * self.sx
            if numerator <= 0:
                return Decimal(0)
            denominator = Decimal(self.n * (self.n - 1) if self.sample else self.n * self.n)
            variance = numeric_div(numerator, denominator)
            if not self.stddev:
                return variance
            # Postgres takes the root of the rounded variance, at the variance's scale.
            exponent = variance.as_tuple().exponent
            quantum = Decimal(1).scaleb(min(int(exponent), 0))
            return variance.sqrt().quantize(quantum, rounding=ROUND_HALF_UP)


def make_factory(
    name: str, arg_types: list[SqlType], less: Callable[[Any, Any], bool]
) -> Callable[[], Accumulator]:
    """A constructor of fresh accumulators for the aggregate ``name``."""
    if name == "count":
        return _Count
    if name == "ordered_set_values":
        # The input of percentile_cont and friends (ordered_set_aggregates.py).
        from percolator.server.sql.ordered_set_aggregates import SortedValues

        return SortedValues
    if name == "sum":
        dec = bool(arg_types) and arg_types[0].id in (TypeId.INT8, TypeId.NUMERIC)
        plus = _adder(arg_types[0] if arg_types else None)
        return lambda: _Sum(dec, plus)
    if name == "avg":
        if arg_types[0].id is TypeId.INTERVAL:
            return _IntervalAvg
        floating = arg_types[0].id in (TypeId.FLOAT4, TypeId.FLOAT8)
        # avg(float4) accumulates in double precision (float4_accum), like avg(float8).
        plus = _adder(T.FLOAT8 if floating else arg_types[0])
        return lambda: _Avg(floating, plus)
    if name == "min":
        return lambda: _Extreme(less)
    if name == "max":
        return lambda: _Extreme(lambda a, b: less(b, a))
    if name in _BITWISE:
        # The first value starts the fold, as sum's does; NULLs are skipped.
        return lambda: _Sum(False, _BITWISE[name])
    if name in ("bool_and", "every"):
        return lambda: _BoolAgg(True)
    if name == "bool_or":
        return lambda: _BoolAgg(False)
    if name == "string_agg":
        return _StringAgg
    if name == "array_agg":
        return _ArrayAgg
    if name in ("json_agg", "jsonb_agg"):
        t, jsonb = arg_types[0], name == "jsonb_agg"
        return lambda: _JsonAgg(t, jsonb)
    if name in ("json_object_agg", "jsonb_object_agg"):
        kt, vt, jsonb = arg_types[0], arg_types[1], name == "jsonb_object_agg"
        return lambda: _JsonObjectAgg(kt, vt, jsonb)
    if name in _DEVIATIONS:
        sample, stddev = _DEVIATIONS[name]
        if arg_types[0].id in (TypeId.FLOAT4, TypeId.FLOAT8):
            return lambda: _FloatDeviation(sample, stddev)
        return lambda: _NumericDeviation(sample, stddev)
    raise SqlError(UNDEFINED_FUNCTION, f"aggregate {name} is not supported")
