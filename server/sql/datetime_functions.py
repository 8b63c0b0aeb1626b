"""Date and time functions: EXTRACT and date_part, date_trunc, timezone (AT TIME ZONE),
make_date / make_time / make_timestamp / make_timestamptz, isfinite, age, the justify_*
functions and LOCALTIME/LOCALTIMESTAMP (with round_time, which rounds a timestamp to a
fractional-second precision). Those reading a timestamptz's wall clock take the zone of the
running statement (see time_zones). to_date and to_timestamp live in to_char (formatting.c's
other half)."""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Sequence
from decimal import Decimal

from percolator.server.sql import time_zones
from percolator.server.sql import types as T
from percolator.server.sql.errors import (
    AMBIGUOUS_FUNCTION,
    DATETIME_FIELD_OVERFLOW,
    FEATURE_NOT_SUPPORTED,
    INVALID_PARAMETER_VALUE,
    SqlError,
)
from percolator.server.sql.functions import (
    FunctionImpl,
    define,
    register,
    string_or_unknown,
    wall_clock,
)
from percolator.server.sql.operators import is_numeric, numeric_div
from percolator.server.sql.types import Interval, SqlType, TypeId

# -- date and time --------------------------------------------------------------------------

_UNIX_EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_UNIX_EPOCH = dt.datetime(1970, 1, 1)
_JULIAN_OFFSET = 1_721_425  # date2j(d) - d.toordinal()
_USECS_PER_DAY = 86_400_000_000

_TS, _TSTZ = "timestamp without time zone", "timestamp with time zone"
_TIME = "time without time zone"

# The unit words of Postgres's datetime.c: deltatktbl, which DecodeUnits reads (date_trunc reads
# only these), then datetktbl's unit and reserved words, which DecodeSpecial reads. Both compare
# the first 10 characters (TOKMAXLEN): 'microseconds' is 'microsecon'.
_DELTA_UNITS: dict[str, str] = {
    **dict.fromkeys(("c", "cent", "centuries", "century"), "century"),
    **dict.fromkeys(("d", "day", "days"), "day"),
    **dict.fromkeys(("dec", "decade", "decades", "decs"), "decade"),
    **dict.fromkeys(("h", "hour", "hours", "hr", "hrs"), "hour"),
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), "minute"),
    **dict.fromkeys(("microsecon", "us", "usec", "usecond", "useconds", "usecs"), "microseconds"),
    **dict.fromkeys(("mil", "millennia", "millennium", "mils"), "millennium"),
    **dict.fromkeys(("millisecon", "ms", "msec", "msecond", "mseconds", "msecs"), "milliseconds"),
    **dict.fromkeys(("mon", "mons", "month", "months"), "month"),
    **dict.fromkeys(("qtr", "quarter"), "quarter"),
    **dict.fromkeys(("s", "sec", "second", "seconds", "secs"), "second"),
    "timezone": "timezone", "timezone_h": "timezone_hour", "timezone_m": "timezone_minute",
    **dict.fromkeys(("w", "week", "weeks"), "week"),
    **dict.fromkeys(("y", "year", "years", "yr", "yrs"), "year"),
}  # fmt: skip
_SPECIAL_UNITS = {"dow": "dow", "doy": "doy", "isodow": "isodow", "isoyear": "isoyear",
                  "j": "julian", "jd": "julian", "julian": "julian", "mm": "minute"}  # fmt: skip
_RESERVED = frozenset(
    ("allballs", "epoch", "infinity", "-infinity", "now", "today", "tomorrow", "yesterday")
)
_ZONE_FIELDS = ("timezone", "timezone_hour", "timezone_minute")


def decode_unit(field: str, special: bool = True) -> tuple[str, str]:
    """Postgres's reading of a unit name: ("units", unit), ("reserved", word) or
    ("unknown", ""). ``special``: also datetktbl's words (EXTRACT and date_part read them,
    date_trunc does not)."""
    key = field.lower()[:10]
    if key in _DELTA_UNITS:
        return "units", _DELTA_UNITS[key]
    if special and key in _SPECIAL_UNITS:
        return "units", _SPECIAL_UNITS[key]
    if special and key in _RESERVED:
        return "reserved", key
    return "unknown", ""


def _not_supported(field: str, type_name: str) -> SqlError:
    return SqlError(
        FEATURE_NOT_SUPPORTED, f'unit "{field.lower()}" not supported for type {type_name}'
    )


def _not_recognized(field: str, type_name: str) -> SqlError:
    return SqlError(
        INVALID_PARAMETER_VALUE, f'unit "{field.lower()}" not recognized for type {type_name}'
    )


def _ctrunc(a: int, b: int) -> int:
    """C's integer division (toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _micros(delta: dt.timedelta) -> int:
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _seconds_field(unit: str, sec: int, usec: int, numeric: bool) -> Decimal | float | None:
    """microseconds / milliseconds / second of a time whose seconds are ``sec`` + ``usec``
    (None for another unit), computed as Postgres does for either result type."""
    total = sec * 1_000_000 + usec
    if unit == "microseconds":
        return Decimal(total) if numeric else sec * 1000000.0 + usec
    if unit == "milliseconds":
        return Decimal(total).scaleb(-3) if numeric else sec * 1000.0 + usec / 1000.0
    if unit == "second":
        return Decimal(total).scaleb(-6) if numeric else sec + usec / 1000000.0
    return None


def _year_fields(unit: str, d: dt.date) -> int | None:
    """The calendar units of a date (None for another unit); years are AD here."""
    y = d.year
    return {
        "day": d.day,
        "month": d.month,
        "quarter": (d.month - 1) // 3 + 1,
        "year": y,
        "decade": y // 10,
        "century": (y + 99) // 100,
        "millennium": (y + 999) // 1000,
        "week": d.isocalendar()[1],
        "isoyear": d.isocalendar()[0],
        "dow": d.isoweekday() % 7,
        "isodow": d.isoweekday(),
        "doy": d.timetuple().tm_yday,
    }.get(unit)


def _timestamp_part(
    field: str, v: dt.datetime, numeric: bool, type_name: str, zone: dt.tzinfo | None
) -> Decimal | float:
    """EXTRACT (``numeric``) or date_part of a timestamp or timestamptz (timestamp_part_common):
    the fields of a timestamptz are its wall clock's in ``zone``, its epoch the instant's."""
    kind, unit = decode_unit(field)
    aware = v.tzinfo is not None
    local = wall_clock(v, zone) if aware else v
    if kind == "units":
        if unit in _ZONE_FIELDS:
            if not aware:
                raise _not_supported(field, type_name)
            return _number(_zone_field(unit, v, zone), numeric)
        r = _seconds_field(unit, local.second, local.microsecond, numeric)
        if r is not None:
            return r
        if unit in ("minute", "hour"):
            return _number(local.minute if unit == "minute" else local.hour, numeric)
        if unit == "julian":
            return _julian(local, numeric)
        n = _year_fields(unit, local)
        if n is None:
            raise _not_supported(field, type_name)
        return _number(n, numeric)
    if kind == "reserved":
        if unit != "epoch":
            raise _not_supported(field, type_name)
        us = _micros(v - _UNIX_EPOCH_UTC) if aware else _micros(v - _UNIX_EPOCH)
        return Decimal(us).scaleb(-6) if numeric else us / 1000000.0
    raise _not_recognized(field, type_name)


def _number(n: int, numeric: bool) -> Decimal | float:
    return Decimal(n) if numeric else float(n)


def _zone_field(unit: str, v: dt.datetime, zone: dt.tzinfo | None) -> int:
    east = time_zones.utc_offset(v, zone)
    if unit == "timezone":
        return east
    if unit == "timezone_hour":
        return _ctrunc(east, 3600)
    return _ctrunc(east, 60) - _ctrunc(east, 3600) * 60


def _julian(local: dt.datetime, numeric: bool) -> Decimal | float:
    day = local.toordinal() + _JULIAN_OFFSET
    usecs = _micros(local - local.replace(hour=0, minute=0, second=0, microsecond=0))
    if numeric:
        return Decimal(day) + numeric_div(Decimal(usecs), Decimal(_USECS_PER_DAY))
    secs = (local.hour * 60 + local.minute) * 60 + local.second + local.microsecond / 1000000.0
    return day + secs / 86400.0


def _date_part_of_date(field: str, d: dt.date) -> Decimal:
    """EXTRACT from a date (extract_date): whole numbers; time-of-day units are 0A000."""
    kind, unit = decode_unit(field)
    if kind == "units":
        if unit == "julian":
            return Decimal(d.toordinal() + _JULIAN_OFFSET)
        n = _year_fields(unit, d)
        if n is None:
            raise _not_supported(field, "date")
        return Decimal(n)
    if kind == "reserved":
        if unit != "epoch":
            raise _not_supported(field, "date")
        return Decimal((d - _UNIX_EPOCH.date()).days * 86_400)
    raise _not_recognized(field, "date")


def _time_part(field: str, t: dt.time, numeric: bool) -> Decimal | float:
    """EXTRACT / date_part of a time of day (time_part_common)."""
    kind, unit = decode_unit(field)
    if kind == "units":
        r = _seconds_field(unit, t.second, t.microsecond, numeric)
        if r is not None:
            return r
        if unit in ("minute", "hour"):
            return _number(t.minute if unit == "minute" else t.hour, numeric)
        raise _not_supported(field, _TIME)
    if kind == "reserved" and unit == "epoch":
        us = ((t.hour * 60 + t.minute) * 60 + t.second) * 1_000_000 + t.microsecond
        return Decimal(us).scaleb(-6) if numeric else us / 1000000.0
    raise _not_recognized(field, _TIME)


def _interval_fields(iv: Interval) -> dict[str, int]:
    """An interval's fields as interval2itm splits them (C division: all take its sign)."""
    hours = _ctrunc(iv.microseconds, 3_600_000_000)
    rest = iv.microseconds - hours * 3_600_000_000
    minutes = _ctrunc(rest, 60_000_000)
    years = _ctrunc(iv.months, 12)
    return {
        "us": rest - minutes * 60_000_000,
        "minute": minutes,
        "hour": hours,
        "day": iv.days,
        "month": iv.months - years * 12,
        "year": years,
    }


def _interval_part(field: str, iv: Interval, numeric: bool) -> Decimal | float:
    """EXTRACT / date_part of an interval (interval_part_common)."""
    kind, unit = decode_unit(field)
    f = _interval_fields(iv)
    if kind == "units":
        us = f["us"]
        whole = _ctrunc(us, 1_000_000)
        r = _seconds_field(unit, whole, us - whole * 1_000_000, numeric)
        if r is not None:
            return r
        y = f["year"]
        n = {
            "minute": f["minute"], "hour": f["hour"], "day": f["day"], "month": f["month"],
            "quarter": _ctrunc(f["month"], 3) + 1, "year": y, "decade": _ctrunc(y, 10),
            "century": _ctrunc(y, 100), "millennium": _ctrunc(y, 1000),
        }.get(unit)  # fmt: skip
        if n is None:
            raise _not_supported(field, "interval")
        return _number(n, numeric)
    if kind == "reserved" and unit == "epoch":
        # A year is 365.25 days, a month 30 (DAYS_PER_YEAR, DAYS_PER_MONTH).
        years, months = f["year"], f["month"]
        if numeric:
            secs = (years * 31_557_600 + months * 2_592_000 + iv.days * 86_400) * 1_000_000
            return Decimal(secs + iv.microseconds).scaleb(-6)
        return (
            iv.microseconds / 1000000.0 + 365.25 * 86400 * years + 30.0 * 86400 * months
            + 86400.0 * iv.days
        )  # fmt: skip
    raise _not_recognized(field, "interval")


def extract(
    field: str, value: object, zone: dt.tzinfo | None = None, numeric: bool = True
) -> Decimal | float:
    """EXTRACT(field FROM value) (``numeric``: its numeric result, as Postgres 14+) or
    date_part(field, value) (double precision). The fields of a timestamptz are those of its
    wall clock in ``zone`` (default: the running statement's zone); its epoch is the
    instant's. date_part reads a date as a timestamp (the binder casts it)."""
    if isinstance(value, Interval):
        return _interval_part(field, value, numeric)
    if isinstance(value, dt.datetime):
        type_name = _TSTZ if value.tzinfo is not None else _TS
        return _timestamp_part(field, value, numeric, type_name, zone)
    if isinstance(value, dt.date):
        return _date_part_of_date(field, value)
    assert isinstance(value, dt.time)
    return _time_part(field, value, numeric)


# date_trunc's units, coarsest first: truncating to one clears the fields of those after it.
_TRUNC_UNITS = ("millennium", "century", "decade", "year", "quarter", "month", "day", "hour",
                "minute", "second", "milliseconds", "microseconds")  # fmt: skip


def _trunc_level(field: str, type_name: str, week: bool) -> int:
    """The position of date_trunc's unit in _TRUNC_UNITS (-1: week, when ``week``)."""
    kind, unit = decode_unit(field, special=False)
    if kind != "units":
        raise _not_recognized(field, type_name)
    if week and unit == "week":
        return -1
    if unit == "week":  # of an interval
        err = _not_supported(field, type_name)
        raise SqlError(err.sqlstate, err.message, detail="Months usually have fractional weeks.")
    if unit not in _TRUNC_UNITS:
        raise _not_supported(field, type_name)
    return _TRUNC_UNITS.index(unit)


def date_trunc(field: str, value: dt.datetime, type_name: str = _TS) -> dt.datetime:
    """date_trunc of a wall-clock timestamp (timestamp_trunc): week is the ISO week's
    Monday, and a century or millennium starts in its year 1 (2001, not 2000)."""
    at = _trunc_level(field, type_name, week=True)
    v = value
    if at == -1:
        v -= dt.timedelta(days=v.weekday())
        at = _TRUNC_UNITS.index("day")
    y = v.year
    if at <= 4:  # millennium ... quarter
        year = ((y + 999) // 1000 * 1000 - 999, (y + 99) // 100 * 100 - 99, y // 10 * 10)
        month = 1 if at <= 3 else (v.month - 1) // 3 * 3 + 1
        v = v.replace(year=year[at] if at <= 2 else y, month=month, day=1)
    elif at == 5:
        v = v.replace(day=1)
    usec = v.microsecond // 1000 * 1000 if at == 10 else v.microsecond if at == 11 else 0
    return v.replace(
        hour=v.hour if at > 6 else 0,
        minute=v.minute if at > 7 else 0,
        second=v.second if at > 8 else 0,
        microsecond=usec,
    )


def interval_trunc(field: str, iv: Interval) -> Interval:
    """date_trunc of an interval (interval_trunc): its fields finer than ``field`` cleared
    (each field has the interval's sign, so this truncates toward zero)."""
    at = _trunc_level(field, "interval", week=False)
    f = _interval_fields(iv)
    years, months = f["year"], f["month"]
    if at <= 2:
        years = _ctrunc(years, (1000, 100, 10)[at]) * (1000, 100, 10)[at]
    months = 0 if at <= 3 else 3 * _ctrunc(months, 3) if at == 4 else months
    days = 0 if at <= 5 else f["day"]
    hours = 0 if at <= 6 else f["hour"]
    minutes = 0 if at <= 7 else f["minute"]
    us = f["us"]
    us = 0 if at <= 8 else _ctrunc(us, 10 ** (6 - 3 * (at - 9))) * 10 ** (6 - 3 * (at - 9))
    return Interval(years * 12 + months, days, (hours * 60 + minutes) * 60_000_000 + us)


def extract_in_zone(ctx: object, field: object, value: object) -> Decimal | None:
    """EXTRACT in the running statement's zone (NULL in, NULL out)."""
    if field is None or value is None:
        return None
    zone = time_zones.session_zone(ctx)
    return extract(field, value, zone)  # type: ignore[arg-type,return-value]


def date_part_in_zone(ctx: object, field: object, value: object) -> float | None:
    """date_part in the running statement's zone (NULL in, NULL out)."""
    if field is None or value is None:
        return None
    zone = time_zones.session_zone(ctx)
    return extract(field, value, zone, numeric=False)  # type: ignore[arg-type,return-value]


_EXTRACT_SOURCES = (TypeId.TIMESTAMP, TypeId.TIMESTAMPTZ, TypeId.DATE, TypeId.TIME,
                    TypeId.INTERVAL)  # fmt: skip


def extract_source_type(field: SqlType, t: SqlType) -> SqlType | None:
    """The type EXTRACT / date_part reads its argument as, None if it has no version for
    ``t``; 42725 for an untyped argument, which Postgres cannot choose a version for."""
    if t.id is TypeId.UNKNOWN:
        raise ambiguous("pg_catalog.extract", [field, t])
    if t.id not in _EXTRACT_SOURCES or t.array:
        return None
    return SqlType(t.id)


@register("date_part")
def _date_part(args: Sequence[SqlType]) -> FunctionImpl | None:
    if len(args) != 2 or not string_or_unknown(args[0]):
        return None
    if args[1].id is TypeId.UNKNOWN:
        raise ambiguous("date_part", args)
    if args[1].id not in _EXTRACT_SOURCES or args[1].array:
        return None
    # date_part(text, date) is Postgres's SQL function over the date as a timestamp.
    source = T.TIMESTAMP if args[1].id is TypeId.DATE else SqlType(args[1].id)
    return FunctionImpl(date_part_in_zone, T.FLOAT8, needs_context=True, args=(T.TEXT, source))


def trunc_in_zone(field: str, v: dt.datetime, zone: dt.tzinfo) -> dt.datetime:
    """date_trunc of an instant: its wall clock in ``zone`` truncated, and that wall-clock
    time's instant again (Postgres's timestamptz_trunc)."""
    local = date_trunc(field, time_zones.to_local(v, zone), _TSTZ)
    if decode_unit(field, special=False)[1] in _BELOW_DAY:
        # Up to the hour Postgres keeps the instant's own offset (an ambiguous wall-clock
        # time must not jump to the other side of a DST change); from the day on it looks
        # the offset up again.
        return v - (time_zones.to_local(v, zone) - local)
    return time_zones.from_local(local, zone)


_BELOW_DAY = frozenset(("microseconds", "milliseconds", "second", "minute", "hour"))


def ambiguous(name: str, args: Sequence[SqlType]) -> SqlError:
    """42725, as Postgres says of a call it cannot choose among versions for (an untyped
    literal where a date, a timestamp or an interval could go)."""
    shown = ", ".join(str(a) for a in args)
    return SqlError(
        AMBIGUOUS_FUNCTION,
        f"function {name}({shown}) is not unique",
        hint="Could not choose a best candidate function. You might need to add explicit type"
        " casts.",
    )


@register("date_trunc")
def _date_trunc(args: Sequence[SqlType]) -> FunctionImpl | None:
    if len(args) not in (2, 3):
        return None
    if not string_or_unknown(args[0]):
        return None
    if len(args) == 2 and args[1].id is TypeId.UNKNOWN:
        raise ambiguous("date_trunc", args)
    if len(args) == 2 and args[1].id in (TypeId.INTERVAL, TypeId.TIME):
        # date_trunc(text, time) is the interval version (time casts to interval).
        return FunctionImpl(interval_trunc, T.INTERVAL, args=(T.TEXT, T.INTERVAL))
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
        return FunctionImpl(date_trunc, T.TIMESTAMP, args=(T.TEXT, T.TIMESTAMP))

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


def _field_overflow(what: str, text: str) -> SqlError:
    return SqlError(DATETIME_FIELD_OVERFLOW, f"{what} field value out of range: {text}")


def make_date(year: int, month: int, day: int) -> dt.date:
    """make_date(year, month, day); a negative year is BC in Postgres, which our dates do not
    hold (22008 date out of range)."""
    shown = f"{year}-{month:02d}-{day:02d}"
    if year == 0 or not 1 <= month <= 12 or not 1 <= day <= 31:
        raise _field_overflow("date", shown)
    if year < 0 or year > 9999:
        raise SqlError(DATETIME_FIELD_OVERFLOW, f"date out of range: {shown}")
    try:
        return dt.date(year, month, day)
    except ValueError:
        raise _field_overflow("date", shown) from None


def _pg_g(x: float) -> str:
    """C's %g, as Postgres's snprintf prints it (NaN as NaN)."""
    return "NaN" if math.isnan(x) else f"{x:g}"


def make_time_usecs(hour: int, minute: int, sec: float) -> int:
    """The time of day make_time / make_timestamp build, in microseconds (60 seconds and
    24:00:00 allowed, as float_time_overflows allows them)."""
    usecs = None if math.isnan(sec) else round(sec * 1_000_000)
    total = None if usecs is None else ((hour * 60 + minute) * 60) * 1_000_000 + usecs
    if (
        not 0 <= hour <= 24
        or not 0 <= minute < 60
        or usecs is None
        or not 0 <= usecs <= 60_000_000
        or total > _USECS_PER_DAY  # type: ignore[operator]
    ):
        s = _pg_g(sec)
        raise _field_overflow("time", f"{hour}:{minute:02d}:{s if len(s) > 1 else '0' + s}")
    return total  # type: ignore[return-value]


def make_time(hour: int, minute: int, sec: float) -> dt.time:
    """make_time(hour, min, sec)."""
    usecs = make_time_usecs(hour, minute, sec)
    if usecs == _USECS_PER_DAY:
        raise SqlError(FEATURE_NOT_SUPPORTED, "time 24:00:00 is not supported")
    return (dt.datetime(2000, 1, 1) + dt.timedelta(microseconds=usecs)).time()


def make_timestamp(
    year: int, month: int, day: int, hour: int, minute: int, sec: float
) -> dt.datetime:
    """make_timestamp(year, month, mday, hour, min, sec)."""
    d = make_date(year, month, day)
    usecs = make_time_usecs(hour, minute, sec)
    result = dt.datetime(d.year, d.month, d.day) + dt.timedelta(microseconds=usecs)
    if result.year > 9999:
        raise SqlError(DATETIME_FIELD_OVERFLOW, "timestamp out of range")
    return result


def make_timestamptz(ctx: object, *args: object) -> dt.datetime | None:
    """make_timestamptz(year, month, mday, hour, min, sec [, zone]): the wall-clock time in
    the session's zone or in ``zone`` (a name, or a numeric offset east of UTC: '+2')."""
    if any(a is None for a in args):
        return None
    local = make_timestamp(*args[:6])  # type: ignore[arg-type]
    if len(args) == 6:
        return time_zones.from_local(local, time_zones.session_zone(ctx))
    zone = str(args[6])
    m = re.fullmatch(r"\s*([+-]?)(\d{1,2})(?::?(\d{2}))?(?::?(\d{2}))?\s*", zone)
    if m is not None:
        east = int(m[2]) * 3600 + int(m[3] or 0) * 60 + int(m[4] or 0)
        offset = -east if m[1] == "-" else east
        return (local - dt.timedelta(seconds=offset)).replace(tzinfo=dt.UTC)
    return time_zones.from_local(local, time_zones.lookup_zone(zone))


_INT_ARGS = (TypeId.INT2, TypeId.INT4, TypeId.UNKNOWN)


def _ints_then_float(args: Sequence[SqlType], ints: int) -> bool:
    """Whether ``args`` fit (integer, ..., double precision): ``ints`` integers, then a
    number (make_time, make_timestamp's seconds)."""
    if len(args) != ints + 1 or not all(a.id in _INT_ARGS for a in args[:ints]):
        return False
    return args[ints].id in _INT_ARGS or is_numeric(args[ints])


@register("make_date")
def _make_date(args: Sequence[SqlType]) -> FunctionImpl | None:
    if len(args) != 3 or not all(a.id in _INT_ARGS for a in args):
        return None
    return FunctionImpl(make_date, T.DATE, args=(T.INT4,) * 3)


@register("make_time")
def _make_time(args: Sequence[SqlType]) -> FunctionImpl | None:
    if not _ints_then_float(args, 2):
        return None
    return FunctionImpl(make_time, T.TIME, args=(T.INT4, T.INT4, T.FLOAT8))


@register("make_timestamp")
def _make_timestamp(args: Sequence[SqlType]) -> FunctionImpl | None:
    if not _ints_then_float(args, 5):
        return None
    return FunctionImpl(make_timestamp, T.TIMESTAMP, args=(T.INT4,) * 5 + (T.FLOAT8,))


@register("make_timestamptz")
def _make_timestamptz(args: Sequence[SqlType]) -> FunctionImpl | None:
    if len(args) == 7 and not string_or_unknown(args[6]):
        return None
    if not _ints_then_float(args[:6], 5) or len(args) not in (6, 7):
        return None
    params = (T.INT4,) * 5 + (T.FLOAT8,) + (T.TEXT,) * (len(args) - 6)
    return FunctionImpl(
        make_timestamptz, T.TIMESTAMPTZ, strict=False, needs_context=True, args=params
    )


def make_interval(
    years: int = 0,
    months: int = 0,
    weeks: int = 0,
    days: int = 0,
    hours: int = 0,
    mins: int = 0,
    secs: float = 0.0,
) -> Interval:
    """make_interval(years, months, weeks, days, hours, mins, secs), every one defaulting
    to 0 (``make_interval(days => 3)``)."""
    if not math.isfinite(secs):
        raise SqlError(DATETIME_FIELD_OVERFLOW, "interval out of range")
    micros = (hours * 3600 + mins * 60) * 1_000_000 + round(secs * 1_000_000)
    return Interval(years * 12 + months, weeks * 7 + days, micros)


@register("make_interval")
def _make_interval(args: Sequence[SqlType]) -> FunctionImpl | None:
    if len(args) > 7 or not all(a.id in _INT_ARGS for a in args[:6]):
        return None
    if len(args) == 7 and not (args[6].id in _INT_ARGS or is_numeric(args[6])):
        return None
    params = ((T.INT4,) * 6 + (T.FLOAT8,))[: len(args)]
    return FunctionImpl(make_interval, T.INTERVAL, args=params)


define(("isfinite",), lambda v: True, T.BOOL, 1)


# -- date and time: age, justify, local time ----------------------------------------------------


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
