"""Time zones: the session's ``TimeZone`` setting and the zones ``AT TIME ZONE`` names.

A timestamptz value is an instant, held as an aware ``datetime`` in UTC (and stored as UTC
microseconds); a zone matters only where a wall-clock time is read or written: text output and
input, casts to and from timestamp and date, ``AT TIME ZONE``, ``date_trunc``, ``extract``,
``to_char`` and calendar arithmetic. Zones come from the IANA database through
:mod:`zoneinfo` (the system's copy, or the ``tzdata`` package where the system has none).

Which zone applies is decided when a statement runs, never when it is planned: plans are cached
and shared by sessions in different zones. Code that has the statement's ``ExecContext`` takes
it from ``ctx.settings["timezone"]`` (:func:`session_zone`); value-level code without one (text
I/O of wire values, casts nested in other casts, operators) reads :func:`current_zone`, which
the session sets from the same setting before it runs each statement and whenever the setting
changes, the way Postgres's ``session_timezone`` global works. The variable is a
:class:`~contextvars.ContextVar`, so each connection's task has its own.

Postgres's spellings are kept: ``SET TIME ZONE -7`` is the zone ``<-07>+07``; a POSIX string
such as ``UTC+3`` means three hours *west* of Greenwich; ``INTERVAL '+05:30'`` and plain
numbers are ISO (east-positive).
"""

from __future__ import annotations

import contextvars
import datetime as dt
import functools
import io
import re
import struct
import zoneinfo
from typing import Any

from percolator.server.sql.errors import INVALID_PARAMETER_VALUE, SqlError

UTC = dt.UTC

_current: contextvars.ContextVar[dt.tzinfo] = contextvars.ContextVar(
    "percolator_session_time_zone", default=UTC
)

# Files in the zone directory that are not zones Postgres offers.
_NOT_ZONES = frozenset({"localtime", "posixrules", "factory"})

# Postgres's default timezone_abbreviations ("Default" set), the fixed-offset entries most
# used: AT TIME ZONE 'EST' and '... 12:00 CEST' input look these up before zone names.
_H = 3600
_ABBREVIATIONS: dict[str, int] = {
    "acdt": 10 * _H + 1800, "acst": 9 * _H + 1800, "adt": -3 * _H, "aedt": 11 * _H,
    "aest": 10 * _H, "akdt": -8 * _H, "akst": -9 * _H, "ast": -4 * _H, "awst": 8 * _H,
    "bst": 1 * _H, "cat": 2 * _H, "cdt": -5 * _H, "cest": 2 * _H, "cet": 1 * _H,
    "cst": -6 * _H, "eat": 3 * _H, "edt": -4 * _H, "eest": 3 * _H, "eet": 2 * _H,
    "est": -5 * _H, "gmt": 0, "hkt": 8 * _H, "hst": -10 * _H, "idt": 3 * _H, "ist": 2 * _H,
    "jst": 9 * _H, "kst": 9 * _H, "mdt": -6 * _H, "msk": 3 * _H, "mst": -7 * _H,
    "ndt": -2 * _H - 1800, "nst": -3 * _H - 1800, "nzdt": 13 * _H, "nzst": 12 * _H,
    "pdt": -7 * _H, "pst": -8 * _H, "sast": 2 * _H, "sgt": 8 * _H, "uct": 0, "ut": 0,
    "utc": 0, "wat": 1 * _H, "west": 1 * _H, "wet": 0, "z": 0, "zulu": 0,
}  # fmt: skip

_NUMBER = re.compile(r"\s*[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?\s*")
# A POSIX TZ string: std name (letters, or <...>), an offset west of Greenwich, and an
# optional DST part. Postgres also takes an empty std name ('-03:30').
_POSIX = re.compile(
    r"(?P<name><[A-Za-z0-9:+-]+>|[A-Za-z]{3,}|)"
    r"(?P<offset>[+-]?\d{1,3}(?::\d{1,2}(?::\d{1,2})?)?)"
    r"(?P<dst>(?:<[A-Za-z0-9:+-]+>|[A-Za-z]{3,}).*)?"
)
_INTERVAL = re.compile(
    r"interval\s+'?(?P<text>[^']*?)'?"
    r"(?:\s+(?P<first>year|month|day|hour|minute|second)(?:\s+to\s+(?P<last>hour|minute|second))?)?",
    re.IGNORECASE,
)


def invalid_setting(value: str, detail: str | None = None) -> SqlError:
    """22023 ``invalid value for parameter "TimeZone"``, as Postgres words it."""
    return SqlError(
        INVALID_PARAMETER_VALUE,
        f'invalid value for parameter "TimeZone": "{value}"',
        detail=detail,
    )


@functools.cache
def _zone_names() -> dict[str, str]:
    """Every IANA zone name, by its lower-case spelling (Postgres matches names without
    regard to case and shows the database's spelling)."""
    return {
        name.lower(): name
        for name in zoneinfo.available_timezones()
        if name.lower() not in _NOT_ZONES
    }


def _offset_zone_name(east: int) -> str:
    """pg_tzset_offset's name for a fixed offset: ``<-07>+07`` is seven hours west."""
    a = abs(east)
    text = f"{a // 3600:02d}"
    if a % 3600:
        text += f":{a % 3600 // 60:02d}"
        if a % 60:
            text += f":{a % 60:02d}"
    return f"<+{text}>-{text}" if east >= 0 else f"<-{text}>+{text}"


def _posix_seconds(text: str) -> int:
    """``[+-]hh[:mm[:ss]]`` in seconds, sign as written."""
    sign = -1 if text.startswith("-") else 1
    parts = [int(p) for p in text.lstrip("+-").split(":")]
    parts += [0] * (3 - len(parts))
    return sign * (parts[0] * 3600 + parts[1] * 60 + parts[2])


def _tzif_with_rule(rule: str) -> dt.tzinfo:
    """A zone for a POSIX TZ string with daylight time: a TZif file with no transitions whose
    footer is the rule, which zoneinfo then applies to every year (as Postgres does)."""
    header = b"TZif2" + b"\0" * 15 + struct.pack(">6l", 0, 0, 0, 0, 1, 4)
    block = header + struct.pack(">lbb", 0, 0, 0) + b"UTC\0"
    data = block + block + b"\n" + rule.encode() + b"\n"
    return zoneinfo.ZoneInfo.from_file(io.BytesIO(data), key=rule)


def _posix_zone(text: str) -> tuple[str, dt.tzinfo] | None:
    """A POSIX TZ string's canonical spelling (upper case, as Postgres shows it) and zone."""
    text = re.sub(r",\s+", ",", text.strip())  # SET's list syntax spaced the rule's commas
    m = _POSIX.fullmatch(text)
    if m is None:
        return None
    upper = text.upper()
    west = _posix_seconds(m["offset"])
    if abs(west) >= 24 * 3600:
        return None
    name = m["name"].strip("<>").upper()
    if m["dst"] is None:
        return upper, dt.timezone(dt.timedelta(seconds=-west), name)
    rule = upper
    if "," not in rule:
        rule += ",M3.2.0,M11.1.0"  # posixrules: the US rules, Postgres's default
    if not m["name"]:
        return None
    try:
        return upper, _tzif_with_rule(rule)
    except (ValueError, zoneinfo.ZoneInfoNotFoundError):
        return None


def _interval_offset(value: str, m: re.Match[str]) -> int:
    """Seconds east of ``SET TIME ZONE INTERVAL '...' [qualifier]``."""
    from percolator.server.sql.textio import interval_in, interval_out

    text = m["text"].strip()
    last = (m["last"] or m["first"] or "").lower()
    if last and _NUMBER.fullmatch(text):
        text = f"{text} {last}"  # a bare number counts in the qualifier's last field
    iv = interval_in(text)
    unit = {"hour": 3_600_000_000, "minute": 60_000_000, "second": 1}.get(last, 1)
    if m["last"] or m["first"]:
        # The qualifier truncates the fields below its last one, as interval's typmod does.
        us = abs(iv.microseconds) // unit * unit
        iv = type(iv)(iv.months, iv.days, us if iv.microseconds >= 0 else -us)
    shown = f"INTERVAL '{interval_out(iv)}'"
    if iv.months:
        raise invalid_setting(shown, "Cannot specify months in time zone interval.")
    if iv.days:
        raise invalid_setting(shown, "Cannot specify days in time zone interval.")
    return iv.microseconds // 1_000_000


def canonical_setting(value: str) -> str:
    """Validate a ``TimeZone`` value (SET, the startup parameter) and return it as SHOW
    spells it: an IANA name in the database's case, ``<-07>+07`` for a number of hours or an
    interval, a POSIX string in upper case; 22023 otherwise."""
    text = value.strip()
    m = _INTERVAL.fullmatch(text)
    if m is not None:
        east = _interval_offset(value, m)
        if abs(east) >= 24 * 3600:
            raise invalid_setting(value)
        return _offset_zone_name(east)
    compact = re.sub(r"^([+-])\s+", r"\1", text)  # SET TIME ZONE -7 arrives as "- 7"
    if _NUMBER.fullmatch(compact):
        east = int(float(compact) * 3600)
        if abs(east) >= 24 * 3600:
            raise invalid_setting(value)
        return _offset_zone_name(east)
    name = _zone_names().get(text.lower())
    if name is not None:
        return name
    posix = _posix_zone(text)
    if posix is None:
        raise invalid_setting(value)
    return posix[0]


@functools.lru_cache(maxsize=256)
def zone_for_setting(setting: str) -> dt.tzinfo:
    """The zone of a canonical ``TimeZone`` value (as :func:`canonical_setting` returns)."""
    if setting in ("UTC", "Etc/UTC"):
        return UTC
    name = _zone_names().get(setting.lower())
    if name is not None:
        return zoneinfo.ZoneInfo(name)
    m = re.fullmatch(r"<([+-])([\d:]+)>[+-][\d:]+", setting)
    if m is not None:  # a fixed offset's <+hh[:mm]>-hh[:mm]
        east = _posix_seconds(m[1] + m[2])
        return dt.timezone(dt.timedelta(seconds=east), f"{m[1]}{m[2]}")
    posix = _posix_zone(setting)
    if posix is None:
        raise invalid_setting(setting)
    return posix[1]


def lookup_zone(name: str) -> dt.tzinfo:
    """The zone a text argument names (``AT TIME ZONE``, ``timezone()``, ``date_trunc``'s
    third argument, a zone word in timestamptz input): an abbreviation of Postgres's default
    set first, then an IANA name, then a POSIX string; 22023 ``time zone "x" not
    recognized``."""
    zone = _lookup_zone(name)
    if zone is None:
        raise SqlError(INVALID_PARAMETER_VALUE, f'time zone "{name}" not recognized')
    return zone


@functools.lru_cache(maxsize=512)
def _lookup_zone(name: str) -> dt.tzinfo | None:
    low = name.strip().lower()
    east = _ABBREVIATIONS.get(low)
    if east is not None:
        return (
            UTC
            if east == 0 and low == "utc"
            else dt.timezone(dt.timedelta(seconds=east), name.strip().upper())
        )
    canonical = _zone_names().get(low)
    if canonical is not None:
        return zoneinfo.ZoneInfo(canonical)
    posix = _posix_zone(name)
    return posix[1] if posix is not None else None


def interval_zone(iv: Any) -> dt.tzinfo:
    """The fixed zone of ``AT TIME ZONE INTERVAL '...'`` (east-positive, whole seconds)."""
    if iv.months or iv.days:
        from percolator.server.sql.textio import interval_out

        raise SqlError(
            INVALID_PARAMETER_VALUE,
            f'interval time zone "{interval_out(iv)}" must not include months or days',
        )
    seconds = int(iv.microseconds / 1_000_000)
    if abs(seconds) >= 24 * 3600:
        from percolator.server.sql.textio import interval_out

        raise SqlError(
            INVALID_PARAMETER_VALUE, f'interval time zone "{interval_out(iv)}" is out of range'
        )
    return dt.timezone(dt.timedelta(seconds=seconds))


# -- the session's zone ---------------------------------------------------------------------


def current_zone() -> dt.tzinfo:
    """The zone of the statement running in this task (UTC until a session sets one)."""
    return _current.get()


def use_setting(setting: str) -> None:
    """Make ``setting`` (a canonical ``TimeZone`` value) this task's current zone."""
    _current.set(zone_for_setting(setting))


def session_zone(ctx: Any) -> dt.tzinfo:
    """The zone of a running statement, from its ExecContext's settings."""
    return zone_for_setting(ctx.settings.get("timezone", "UTC"))


# -- instants and wall clocks ---------------------------------------------------------------


def to_local(instant: dt.datetime, zone: dt.tzinfo | None = None) -> dt.datetime:
    """The wall-clock time (naive) of an instant in ``zone`` (default: the current zone)."""
    zone = zone or _current.get()
    if zone is UTC:
        return (
            instant.replace(tzinfo=None)
            if instant.utcoffset() == dt.timedelta(0)
            else (instant.astimezone(UTC).replace(tzinfo=None))
        )
    try:
        return instant.astimezone(zone).replace(tzinfo=None)
    except OverflowError:
        # Near year 1 or 9999 the local time does not fit a datetime: keep UTC's.
        return instant.astimezone(UTC).replace(tzinfo=None)


def utc_offset(instant: dt.datetime, zone: dt.tzinfo | None = None) -> int:
    """Seconds east of UTC that ``zone`` is at ``instant``."""
    zone = zone or _current.get()
    try:
        off = instant.astimezone(zone).utcoffset()
    except OverflowError:
        off = None
    return int(off.total_seconds()) if off is not None else 0


def abbreviation(instant: dt.datetime, zone: dt.tzinfo | None = None) -> str:
    """The zone's abbreviation at ``instant`` (to_char's TZ)."""
    zone = zone or _current.get()
    try:
        name = instant.astimezone(zone).tzname()
    except OverflowError:
        name = None
    if zone is UTC:
        return "UTC"
    return name or ""


def from_local(local: dt.datetime, zone: dt.tzinfo | None = None) -> dt.datetime:
    """The instant (aware, UTC) a wall-clock time names in ``zone``. A time in a gap of a
    forward jump takes the offset from before it, an ambiguous one after a backward jump the
    offset from after it: in both cases the smaller offset, as Postgres resolves them."""
    zone = zone or _current.get()
    if zone is UTC:
        return local.replace(tzinfo=UTC)
    off0 = local.replace(tzinfo=zone, fold=0).utcoffset()
    off1 = local.replace(tzinfo=zone, fold=1).utcoffset()
    assert off0 is not None and off1 is not None
    off = min(off0, off1)
    try:
        return (local - off).replace(tzinfo=UTC)
    except OverflowError:
        return local.replace(tzinfo=UTC)


def offset_text(seconds: int) -> str:
    """Postgres's offset in timestamptz output: ``+01``, ``+05:30``, ``-03:30``,
    ``+00:53:28``."""
    sign = "-" if seconds < 0 else "+"
    a = abs(seconds)
    text = f"{sign}{a // 3600:02d}"
    if a % 3600:
        text += f":{a % 3600 // 60:02d}"
        if a % 60:
            text += f":{a % 60:02d}"
    return text


__all__ = [
    "abbreviation",
    "canonical_setting",
    "current_zone",
    "from_local",
    "interval_zone",
    "invalid_setting",
    "lookup_zone",
    "offset_text",
    "session_zone",
    "to_local",
    "use_setting",
    "utc_offset",
    "zone_for_setting",
]
