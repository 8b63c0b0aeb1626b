"""Date and time functions: EXTRACT and date_part, date_trunc, timezone (AT TIME ZONE),
make_date, to_timestamp, isfinite, age, the justify_* functions and LOCALTIME/LOCALTIMESTAMP
(with round_time, which rounds a timestamp to a fractional-second precision). Those reading a
timestamptz's wall clock take the zone of the running statement (see time_zones)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from decimal import Decimal

from percolator.server.sql import time_zones
from percolator.server.sql import types as T
from percolator.server.sql.errors import FEATURE_NOT_SUPPORTED, INVALID_PARAMETER_VALUE, SqlError
from percolator.server.sql.functions import (
    FunctionImpl,
    define,
    register,
    string_or_unknown,
    wall_clock,
)
from percolator.server.sql.types import Interval, SqlType, TypeId

# -- date and time --------------------------------------------------------------------------

_UNIX_EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)

_FIELDS = {
    "microseconds": lambda t: t.second * 1_000_000 + getattr(t, "microsecond", 0),
    "milliseconds": lambda t: Decimal(t.second * 1_000_000 + getattr(t, "microsecond", 0)) / 1000,
    "second": lambda t: Decimal(t.second) + Decimal(getattr(t, "microsecond", 0)) / 1_000_000,
    "minute": lambda t: t.minute,
    "hour": lambda t: t.hour,
    "day": lambda t: t.day,
    "month": lambda t: t.month,
    "year": lambda t: t.year,
    "quarter": lambda t: (t.month - 1) // 3 + 1,
    "dow": lambda t: (t.weekday() + 1) % 7,
    "isodow": lambda t: t.isoweekday(),
    "doy": lambda t: t.timetuple().tm_yday,
    "week": lambda t: t.isocalendar()[1],
    "decade": lambda t: t.year // 10,
    "century": lambda t: (t.year - 1) // 100 + 1,
    "epoch": lambda t: Decimal(
        str((t if isinstance(t, dt.datetime) else dt.datetime(t.year, t.month, t.day))
            .replace(tzinfo=dt.UTC).timestamp())
    ),
}  # fmt: skip


_ZONE_FIELDS = ("timezone", "timezone_hour", "timezone_minute")


def extract(field: str, value: object, zone: dt.tzinfo | None = None) -> Decimal:
    """EXTRACT(field FROM value) / date_part (numeric result, as Postgres 14+). The fields
    of a timestamptz are those of its wall clock in ``zone`` (default: the running
    statement's zone); its epoch is the instant's."""
    low = field.lower()
    f = low.rstrip("s") if low not in ("microseconds", "milliseconds") else low
    if low in _ZONE_FIELDS:
        if not (isinstance(value, dt.datetime) and value.tzinfo is not None):
            kind = (
                "interval" if isinstance(value, Interval)
                else "timestamp without time zone" if isinstance(value, dt.datetime)
                else "date"
            )  # fmt: skip
            raise SqlError(FEATURE_NOT_SUPPORTED, f'unit "{field}" not supported for type {kind}')
        east = time_zones.utc_offset(value, zone)
        hours, minutes = int(east / 3600), int(east / 60) % 60 if east >= 0 else -(-east // 60 % 60)
        return Decimal({"timezone": east, "timezone_hour": hours, "timezone_minute": minutes}[low])
    getter = _FIELDS.get(f) or _FIELDS.get(low)
    if getter is None:
        raise SqlError(INVALID_PARAMETER_VALUE, f'unit "{field}" not recognized for type timestamp')
    if isinstance(value, Interval):
        return _fraction_scale(f, _extract_interval(f, value))
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        if f == "epoch":
            delta = value - _UNIX_EPOCH_UTC
            return _fraction_scale(f, Decimal(delta.days * 86400 + delta.seconds)
                                   + Decimal(delta.microseconds) / 1_000_000)  # fmt: skip
        value = wall_clock(value, zone)
    result = getter(value)
    result = result if isinstance(result, Decimal) else Decimal(result)
    if isinstance(value, dt.datetime):
        # Postgres shows seconds and epochs of timestamps with microsecond scale.
        return _fraction_scale(f, result)
    return result


_EXTRACT_SCALE = {"second": Decimal("0.000001"), "epoch": Decimal("0.000001"),
                  "milliseconds": Decimal("0.001")}  # fmt: skip


def _fraction_scale(field: str, value: Decimal) -> Decimal:
    q = _EXTRACT_SCALE.get(field)
    return value.quantize(q) if q is not None else value


def _extract_interval(field: str, iv: Interval) -> Decimal:
    if field == "epoch":
        return (
            Decimal(iv.months * 30 * 86400 + iv.days * 86400) + Decimal(iv.microseconds) / 1_000_000
        )
    if field == "day":
        return Decimal(iv.days)
    if field == "hour":
        return Decimal(iv.microseconds // 3_600_000_000)
    if field == "minute":
        return Decimal(iv.microseconds // 60_000_000 % 60)
    if field == "second":
        return Decimal(iv.microseconds % 60_000_000) / 1_000_000
    if field == "month":
        return Decimal(iv.months % 12)
    if field == "year":
        return Decimal(iv.months // 12)
    raise SqlError(INVALID_PARAMETER_VALUE, f'unit "{field}" not supported for type interval')


def date_trunc(field: str, value: dt.datetime) -> dt.datetime:
    f = field.lower()
    if f == "microseconds":
        return value
    if f == "milliseconds":
        return value.replace(microsecond=value.microsecond // 1000 * 1000)
    if f == "second":
        return value.replace(microsecond=0)
    if f == "minute":
        return value.replace(second=0, microsecond=0)
    if f == "hour":
        return value.replace(minute=0, second=0, microsecond=0)
    if f == "day":
        return value.replace(hour=0, minute=0, second=0, microsecond=0)
    if f == "week":
        d = value - dt.timedelta(days=value.weekday())
        return d.replace(hour=0, minute=0, second=0, microsecond=0)
    if f == "month":
        return value.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    if f == "quarter":
        m = (value.month - 1) // 3 * 3 + 1
        return value.replace(month=m, day=1, hour=0, minute=0, second=0, microsecond=0)
    if f == "year":
        return value.replace(month=1, day=1, hour=0, minute=0, second=0, microsecond=0)
    raise SqlError(INVALID_PARAMETER_VALUE, f'unit "{field}" not recognized for type timestamp')


def extract_in_zone(ctx: object, field: object, value: object) -> Decimal | None:
    """EXTRACT / date_part in the running statement's zone (NULL in, NULL out)."""
    if field is None or value is None:
        return None
    return extract(field, value, time_zones.session_zone(ctx))  # type: ignore[arg-type]


@register("date_part")
def _date_part(args: Sequence[SqlType]) -> FunctionImpl | None:
    if len(args) != 2:
        return None
    return FunctionImpl(extract_in_zone, T.NUMERIC, needs_context=True)


def trunc_in_zone(field: str, v: dt.datetime, zone: dt.tzinfo) -> dt.datetime:
    """date_trunc of an instant: its wall clock in ``zone`` truncated, and that wall-clock
    time's instant again (Postgres's timestamptz_trunc)."""
    local = date_trunc(field, time_zones.to_local(v, zone))
    if field.lower() in ("microseconds", "milliseconds", "second", "minute", "hour"):
        # Up to the hour Postgres keeps the instant's own offset (an ambiguous wall-clock
        # time must not jump to the other side of a DST change); from the day on it looks
        # the offset up again.
        return v - (time_zones.to_local(v, zone) - local)
    return time_zones.from_local(local, zone)


@register("date_trunc")
def _date_trunc(args: Sequence[SqlType]) -> FunctionImpl | None:
    if len(args) not in (2, 3):
        return None
    if not string_or_unknown(args[0]):
        return None
    if args[1].id not in (TypeId.TIMESTAMPTZ, TypeId.TIMESTAMP, TypeId.DATE, TypeId.UNKNOWN):
        return None
    if len(args) == 3:
        # date_trunc(field, timestamptz, zone): truncated in the named zone.
        if not string_or_unknown(args[2]):
            return None

        def trunc_named(field: str, v: dt.datetime, zone: str) -> dt.datetime:
            return trunc_in_zone(field, v, time_zones.lookup_zone(zone))

        return FunctionImpl(trunc_named, T.TIMESTAMPTZ, args=(T.TEXT, T.TIMESTAMPTZ, T.TEXT))
    if args[1].id is TypeId.TIMESTAMP:
        return FunctionImpl(date_trunc, T.TIMESTAMP)

    # date_trunc(text, date) resolves to the timestamptz version: the date is midnight of the
    # session's zone, cast by the binder when the statement runs.
    def trunc(ctx: object, field: str | None, v: dt.datetime | None) -> dt.datetime | None:
        if field is None or v is None:
            return None
        return trunc_in_zone(field, v, time_zones.session_zone(ctx))

    return FunctionImpl(trunc, T.TIMESTAMPTZ, needs_context=True, args=(T.TEXT, T.TIMESTAMPTZ))


def _at_time_zone(zone: object, v: object) -> dt.datetime:
    """timezone(zone, value) / value AT TIME ZONE zone: a timestamptz becomes the wall-clock
    timestamp of ``zone``; a timestamp is read as a wall-clock time of ``zone``."""
    tz = time_zones.lookup_zone(zone) if isinstance(zone, str) else time_zones.interval_zone(zone)
    assert isinstance(v, dt.datetime)
    if v.tzinfo is not None:
        return time_zones.to_local(v, tz)
    return time_zones.from_local(v, tz)


@register("timezone")
def _timezone(args: Sequence[SqlType]) -> FunctionImpl | None:
    if len(args) != 2:
        return None
    zone, value = args
    if zone.id is TypeId.INTERVAL:
        zt = T.INTERVAL
    elif string_or_unknown(zone):
        zt = T.TEXT
    else:
        return None
    if value.id is TypeId.TIMESTAMP:
        return FunctionImpl(_at_time_zone, T.TIMESTAMPTZ, args=(zt, T.TIMESTAMP))
    if value.id in (TypeId.TIMESTAMPTZ, TypeId.DATE, TypeId.UNKNOWN):
        return FunctionImpl(_at_time_zone, T.TIMESTAMP, args=(zt, T.TIMESTAMPTZ))
    return None


define(("make_date",), lambda y, m, d: dt.date(y, m, d), T.DATE, 3)
define(("to_timestamp",), lambda s: dt.datetime.fromtimestamp(float(s), dt.UTC), T.TIMESTAMPTZ, 1)
define(("isfinite",), lambda v: True, T.BOOL, 1)


# -- date and time: age, justify, local time ----------------------------------------------------

_USECS_PER_DAY = 86_400_000_000


def _days_in_month(year: int, month: int) -> int:
    import calendar

    return calendar.monthrange(year, month)[1]


def age(a: dt.datetime, b: dt.datetime) -> Interval:
    """age(a, b): the symbolic difference in years, months and days (timestamp_age)."""
    t1, t2 = wall_clock(a), wall_clock(b)
    f = [
        t1.microsecond - t2.microsecond,
        t1.second - t2.second,
        t1.minute - t2.minute,
        t1.hour - t2.hour,
        t1.day - t2.day,
        t1.month - t2.month,
        t1.year - t2.year,
    ]
    flip = t1 < t2
    if flip:
        f = [-x for x in f]
    usec, sec, minute, hour, day, month, year = f
    while usec < 0:
        usec += 1_000_000
        sec -= 1
    while sec < 0:
        sec += 60
        minute -= 1
    while minute < 0:
        minute += 60
        hour -= 1
    while hour < 0:
        hour += 24
        day -= 1
    # Borrowed days are the length of the earlier timestamp's month.
    early = t1 if flip else t2
    while day < 0:
        day += _days_in_month(early.year, early.month)
        month -= 1
    while month < 0:
        month += 12
        year -= 1
    sign = -1 if flip else 1
    micros = ((hour * 60 + minute) * 60 + sec) * 1_000_000 + usec
    return Interval(sign * (year * 12 + month), sign * day, sign * micros)


def _datetime_kind(t: SqlType) -> bool:
    return t.id in (TypeId.DATE, TypeId.TIMESTAMP, TypeId.TIMESTAMPTZ, TypeId.UNKNOWN)


@register("age")
def _age(args: Sequence[SqlType]) -> FunctionImpl | None:
    if len(args) not in (1, 2) or not all(_datetime_kind(a) for a in args):
        return None
    # age(timestamp, timestamp) when the typed arguments are timestamps, else the timestamptz
    # version (date and unknown arguments take the preferred type, as in Postgres).
    ids = {a.id for a in args} - {TypeId.UNKNOWN}
    t = T.TIMESTAMP if ids == {TypeId.TIMESTAMP} else T.TIMESTAMPTZ
    if len(args) == 2:
        return FunctionImpl(age, T.INTERVAL, args=(t, t))

    def since_midnight(ctx: object, v: dt.datetime | None) -> Interval | None:
        # age(x) is age(current_date, x): midnight of today in the session's zone.
        if v is None:
            return None
        zone = time_zones.session_zone(ctx)
        today = time_zones.to_local(ctx.transaction_time, zone).date()  # type: ignore[attr-defined]
        midnight = dt.datetime(today.year, today.month, today.day)
        if v.tzinfo is not None:
            midnight = time_zones.from_local(midnight, zone)
        return age(midnight, v)

    return FunctionImpl(since_midnight, T.INTERVAL, needs_context=True, args=(t,))


def _tmodulo(t: int, unit: int) -> tuple[int, int]:
    """C's TMODULO: the quotient truncated toward zero, and the remainder."""
    q = abs(t) // unit * (1 if t >= 0 else -1)
    return q, t - q * unit


def justify_hours(iv: Interval) -> Interval:
    """24-hour periods of the time part become days."""
    whole, time = _tmodulo(iv.microseconds, _USECS_PER_DAY)
    days = iv.days + whole
    if days > 0 and time < 0:
        time, days = time + _USECS_PER_DAY, days - 1
    elif days < 0 and time > 0:
        time, days = time - _USECS_PER_DAY, days + 1
    return Interval(iv.months, days, time)


def justify_days(iv: Interval) -> Interval:
    """30-day periods become months."""
    whole, days = _tmodulo(iv.days, 30)
    months = iv.months + whole
    if months > 0 and days < 0:
        days, months = days + 30, months - 1
    elif months < 0 and days > 0:
        days, months = days - 30, months + 1
    return Interval(months, days, iv.microseconds)


def justify_interval(iv: Interval) -> Interval:
    """justify_days and justify_hours together, with the signs of all parts made to agree."""
    months, days, time = iv.months, iv.days, iv.microseconds
    if (days > 0 and time > 0) or (days < 0 and time < 0):
        whole, days = _tmodulo(days, 30)
        months += whole
    whole, time = _tmodulo(time, _USECS_PER_DAY)
    days += whole
    whole, days = _tmodulo(days, 30)
    months += whole
    if months > 0 and (days < 0 or (days == 0 and time < 0)):
        days, months = days + 30, months - 1
    elif months < 0 and (days > 0 or (days == 0 and time > 0)):
        days, months = days - 30, months + 1
    if days > 0 and time < 0:
        time, days = time + _USECS_PER_DAY, days - 1
    elif days < 0 and time > 0:
        time, days = time - _USECS_PER_DAY, days + 1
    return Interval(months, days, time)


for _name, _fn in (
    ("justify_hours", justify_hours),
    ("justify_days", justify_days),
    ("justify_interval", justify_interval),
):
    register(_name)(
        lambda args, _f=_fn: (
            FunctionImpl(_f, T.INTERVAL, args=(T.INTERVAL,))
            if len(args) == 1 and args[0].id in (TypeId.INTERVAL, TypeId.UNKNOWN)
            else None
        )
    )


def round_time(v: dt.datetime, precision: int) -> dt.datetime:
    """``v`` rounded (half up) to ``precision`` fractional-second digits."""
    if precision < 0:
        raise SqlError(
            INVALID_PARAMETER_VALUE, f"TIMESTAMP({precision}) precision must not be negative"
        )
    if precision >= 6:
        return v
    unit = 10 ** (6 - precision)
    micros = (v.microsecond + unit // 2) // unit * unit
    return v.replace(microsecond=0) + dt.timedelta(microseconds=micros)


def local_timestamp(ctx: object, precision: int | None = 6) -> dt.datetime:
    """LOCALTIMESTAMP [(p)]: the transaction's start in the session's zone."""
    now = ctx.transaction_time  # type: ignore[attr-defined]
    local = wall_clock(now, time_zones.session_zone(ctx))
    return round_time(local, 6 if precision is None else precision)


def current_date(ctx: object) -> dt.date:
    """CURRENT_DATE: the date of the transaction's start in the session's zone."""
    return time_zones.to_local(ctx.transaction_time, time_zones.session_zone(ctx)).date()  # type: ignore[attr-defined]


def local_time(ctx: object, precision: int | None = 6) -> dt.time:
    """LOCALTIME [(p)]: the time of day of LOCALTIMESTAMP."""
    return local_timestamp(ctx, precision).time()
