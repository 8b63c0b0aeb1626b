"""to_char: the formatting of timestamps, dates, intervals and numbers as text.

formatting.c's DCH (date/time) and NUM (number) templates. Patterns this module does not
implement raise 0A000 naming them: a wrong rendering would be worse than an error.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

from percolator.server.sql import time_zones
from percolator.server.sql import types as T
from percolator.server.sql.errors import SYNTAX_ERROR, SqlError
from percolator.server.sql.functions import (
    FunctionImpl,
    register,
    string_or_unknown,
    wall_clock,
)
from percolator.server.sql.types import Interval, SqlType, TypeId

_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December"]  # fmt: skip
_DAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]
_ROMAN = ["I", "II", "III", "IV", "V", "VI", "VII", "VIII", "IX", "X", "XI", "XII"]
_DCH_KEYWORDS = frozenset(
    """A.D. A.M. AD AM B.C. BC CC DAY DDD DD DY Day Dy D FF1 FF2 FF3 FF4 FF5 FF6 FX HH24 HH12 HH
    IDDD ID IW IYYY IYY IY I J MI MM MONTH MON MS Month Mon OF P.M. PM Q RM SSSSS SSSS SS TZH TZM
    TZ US WW W Y,YYY YYYY YYY YY Y a.d. a.m. ad am b.c. bc cc day ddd dd dy d ff1 ff2 ff3 ff4 ff5
    ff6 fx hh24 hh12 hh iddd id iw iyyy iyy iy i j mi mm month mon ms of p.m. pm q rm sssss ssss
    ss tz us ww w y,yyy yyyy yyy yy y""".split()
)
# Fields an interval has (the others name calendar positions an interval does not have).
_INTERVAL_FIELDS = frozenset(
    "YYYY YYY YY Y MM DD DDD HH HH12 HH24 MI SS MS US SSSS SSSSS FF1 FF2 FF3 FF4 FF5 FF6 FX AM "
    "PM A.M. P.M.".split()
)


def _ordinal(s: str, upper: bool) -> str:
    """``s`` (digits) with its English ordinal suffix (str_numth)."""
    last = s[-1:]
    if (len(s) > 1 and s[-2] == "1") or last not in "123":
        suffix = "th"
    else:
        suffix = {"1": "st", "2": "nd", "3": "rd"}[last]
    return s + (suffix.upper() if upper else suffix)


@dataclass(frozen=True)
class _Fields:
    """The broken-down value to_char renders (struct pg_tm)."""

    year: int
    month: int
    day: int
    hour: int
    minute: int
    second: int
    usec: int
    date: dt.date | None  # None for intervals
    zone: str | None  # the zone abbreviation of a timestamptz
    yday: int
    gmtoff: int = 0  # seconds east of UTC of a timestamptz's zone at that instant


def _fields_of(v: object, tz: dt.tzinfo | None = None) -> _Fields:
    if isinstance(v, Interval):
        sign = -1 if v.microseconds < 0 else 1
        t = abs(v.microseconds)
        years = abs(v.months) // 12 * (1 if v.months >= 0 else -1)
        months = v.months - years * 12
        return _Fields(
            years,
            months,
            v.days,
            sign * (t // 3_600_000_000),
            sign * (t // 60_000_000 % 60),
            sign * (t // 1_000_000 % 60),
            sign * (t % 1_000_000),
            None,
            None,
            (years * 12 + months) * 30 + v.days,
        )
    zone = None
    gmtoff = 0
    if isinstance(v, dt.datetime):
        if v.tzinfo is not None:
            # A timestamptz shows in the session's zone, with its abbreviation and offset.
            zone = time_zones.abbreviation(v, tz)
            gmtoff = time_zones.utc_offset(v, tz)
        ts = wall_clock(v, tz)
    else:
        ts = dt.datetime(v.year, v.month, v.day)  # type: ignore[attr-defined]
    return _Fields(
        ts.year, ts.month, ts.day, ts.hour, ts.minute, ts.second, ts.microsecond, ts.date(),
        zone, ts.timetuple().tm_yday, gmtoff,
    )  # fmt: skip


def _dch_field(key: str, f: _Fields, fm: bool, tm: bool) -> str | int:
    """The text of one template pattern (an int when the TH suffix may follow it)."""
    up = key.upper()

    def num(value: int, width: int) -> str:
        # A negative field (of an interval) gets one more position, for its sign.
        return str(value) if fm else f"{value:0{width + (value < 0)}d}"

    def name(full: str, abbrev: bool) -> str:
        text = full[:3] if abbrev else full
        if key.isupper() and len(key) > 1:
            text = text.upper()
        elif key.islower():
            text = text.lower()
        return text if (fm or tm or abbrev) else text.ljust(9)

    if up in ("HH", "HH12"):
        return num(f.hour % 12 or 12, 2)
    if up == "HH24":
        return num(f.hour, 2)
    if up == "MI":
        return num(f.minute, 2)
    if up == "SS":
        return num(f.second, 2)
    if up == "MS":
        return f"{f.usec // 1000:03d}"
    if up == "US":
        return f"{f.usec:06d}"
    if up.startswith("FF"):
        digits = int(up[2])
        return f"{f.usec // 10 ** (6 - digits):0{digits}d}"
    if up in ("SSSS", "SSSSS"):
        return str(f.hour * 3600 + f.minute * 60 + f.second)
    if up in ("AM", "PM", "A.M.", "P.M."):
        text = ("P" if f.hour % 24 >= 12 else "A") + ("." if "." in key else "") + "M"
        text += "." if "." in key else ""
        return text if key[0].isupper() else text.lower()
    if up in ("AD", "BC", "A.D.", "B.C."):
        text = "A.D." if "." in key else "AD"
        return text if key[0].isupper() else text.lower()
    if up == "YYYY":
        return num(f.year, 4)
    if up == "Y,YYY":
        return f"{f.year // 1000},{f.year % 1000:03d}"
    if up in ("YYY", "YY", "Y"):
        width = len(up)
        return num(f.year % 10**width, width)
    if up == "CC":
        return num((f.year - 1) // 100 + 1 if f.year > 0 else f.year // 100 - 1, 2)
    if up == "MM":
        return num(f.month, 2)
    if up == "DD":
        return num(f.day, 2)
    if up == "DDD":
        return num(f.yday, 3)
    if up == "FX":
        return ""
    if up in ("OF", "TZH", "TZM"):
        sign = "+" if f.gmtoff >= 0 else "-"
        hours, rest = divmod(abs(f.gmtoff), 3600)
        if up == "TZM":
            return f"{rest // 60:02d}"
        if up == "TZH":
            return f"{sign}{hours:02d}"
        text = f"{sign}{hours}" if fm else f"{sign}{hours:02d}"
        return text + (f":{rest // 60:02d}" if rest else "")
    if up == "TZ":
        zone = f.zone or ""
        return zone if key == "TZ" else zone.lower()
    assert f.date is not None
    d = f.date
    iso_year, iso_week, iso_day = d.isocalendar()
    if up in ("MONTH", "MON"):
        return name(_MONTHS[f.month - 1], up == "MON")
    if up in ("DAY", "DY"):
        return name(_DAYS[(d.weekday() + 1) % 7], up == "DY")
    if up == "RM":
        text = _ROMAN[f.month - 1]
        text = text if key == "RM" else text.lower()
        return text if fm else text.ljust(4)
    if up == "D":
        return str((d.weekday() + 1) % 7 + 1)
    if up == "ID":
        return str(iso_day)
    if up == "IDDD":
        return num((iso_week - 1) * 7 + iso_day, 3)
    if up == "WW":
        return num((f.yday - 1) // 7 + 1, 2)
    if up == "W":
        return str((f.day - 1) // 7 + 1)
    if up == "IW":
        return num(iso_week, 2)
    if up == "Q":
        return str((f.month - 1) // 3 + 1)
    if up == "J":
        return str(d.toordinal() + 1721425)
    if up in ("IYYY", "IYY", "IY", "I"):
        width = len(up)
        return num(iso_year % 10**width if width < 4 else iso_year, width)
    raise SqlError("0A000", f'to_char pattern "{key}" is not supported')


_NUMERIC_TH = frozenset(
    "HH HH12 HH24 MI SS MS US SSSS SSSSS YYYY YYY YY Y CC MM DD DDD D ID IDDD WW W IW Q J IYYY "
    "IYY IY I".split()
)


def _to_char_datetime(v: object, fmt: str, tz: dt.tzinfo | None = None) -> str:
    f = _fields_of(v, tz)
    interval = isinstance(v, Interval)
    out: list[str] = []
    i = 0
    n = len(fmt)
    while i < n:
        fm = tm = False
        if fmt.startswith(("FM", "fm"), i):
            fm, i = True, i + 2
        elif fmt.startswith(("TM", "tm"), i):
            tm, i = True, i + 2
        key = next(
            (fmt[i : i + k] for k in (5, 4, 3, 2, 1) if fmt[i : i + k] in _DCH_KEYWORDS), None
        )
        if key is not None:
            i += len(key)
            if interval and key.upper() not in _INTERVAL_FIELDS:
                raise SqlError("0A000", f'to_char pattern "{key}" is not supported for intervals')
            text = str(_dch_field(key, f, fm, tm))
            if fmt.startswith(("TH", "th"), i):
                if key.upper() not in _NUMERIC_TH:
                    raise SqlError(
                        "0A000", f'to_char suffix "{fmt[i : i + 2]}" on "{key}" is not supported'
                    )
                text = _ordinal(text, fmt[i] == "T")
                i += 2
            elif fmt.startswith("SP", i):
                i += 2  # spell mode: Postgres does not implement it either, and ignores it
            out.append(text)
            continue
        ch = fmt[i]
        if ch == '"':
            # Quoted text is copied; a backslash escapes the next character.
            i += 1
            while i < n and fmt[i] != '"':
                if fmt[i] == "\\" and i + 1 < n:
                    i += 1
                out.append(fmt[i])
                i += 1
            i += 1
            continue
        if ch == "\\" and i + 1 < n and fmt[i + 1] == '"':
            out.append('"')
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _to_char_number(v: object, fmt: str, float_digits: int | None) -> str:
    """to_char of a number with the 9, 0, ., D, ",", G, S and FM patterns (NUM_processor);
    ``float_digits`` is the significant digits a float argument has (DBL_DIG or FLT_DIG)."""
    fm = fmt.startswith(("FM", "fm"))
    body = fmt[2:] if fm else fmt
    sign_at: str | None = None
    if body[:1] in ("S", "s"):
        sign_at, body = "start", body[1:]
    elif body[-1:] in ("S", "s"):
        sign_at, body = "end", body[:-1]
    for ch in body:
        if ch not in "90.,DG":
            raise SqlError("0A000", f'to_char number pattern "{ch}" is not supported')
    body = body.replace("D", ".").replace("G", ",")
    if body.count(".") > 1:
        raise SqlError(SYNTAX_ERROR, "multiple decimal points")
    int_pat, point, frac_pat = body.partition(".")
    pre = sum(c in "90" for c in int_pat)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise SqlError("0A000", "to_char of an infinite or NaN float is not supported")
        assert float_digits is not None
        # Postgres prints at most DBL_DIG (FLT_DIG) significant digits of a float.
        whole = f"{abs(v):.0f}"
        post = 0 if len(whole) >= float_digits else min(len(frac_pat), float_digits - len(whole))
        frac_pat = frac_pat[:post]
        ip, _, fp = f"{abs(v):.{post}f}".partition(".")
        negative = v < 0
    else:
        d = Decimal(v) if isinstance(v, int) else v
        assert isinstance(d, Decimal)
        if not d.is_finite():
            raise SqlError("0A000", "to_char of an infinite or NaN numeric is not supported")
        d = d.quantize(Decimal(1).scaleb(-len(frac_pat)), rounding=ROUND_HALF_UP)
        negative = d < 0
        ip, _, fp = f"{abs(d):f}".partition(".")
    fp = fp.ljust(len(frac_pat), "0")
    sign = "-" if negative else "+" if sign_at else "" if fm else " "
    if len(ip) > pre:
        # Too many digits (a zero integer part counts as one): every digit shows '#'.
        text = "".join("#" if c in "90" else c for c in int_pat)
        if frac_pat:
            text += "." + "#" * len(frac_pat)
        return text + sign if sign_at == "end" else sign + text
    ip = ip.lstrip("0")
    # Digit positions from the first '0' of the pattern on are zero-filled.
    zero_from = int_pat.find("0")
    first = pre - len(ip)
    if zero_from >= 0:
        first = min(first, sum(1 for c in int_pat[:zero_from] if c in "90"))
    if first >= pre and not frac_pat:
        first = pre - 1  # a zero integer with no fraction digits shows one 0
    digits = ip.rjust(pre - first, "0")
    parts: list[str] = []
    seen = 0
    for c in int_pat:
        if c in "90":
            if seen >= first:
                if seen == first and sign_at != "end":
                    parts.append(sign)
                parts.append(digits[seen - first])
            elif not fm:
                parts.append(" ")
            seen += 1
        else:  # a group separator: a space before the first digit
            parts.append("," if seen > first else "" if fm else " ")
    if first >= pre and sign_at != "end":
        parts.append(sign)
    frac = fp
    if fm:
        # FM drops trailing zeros that fall on 9 positions.
        keep = len(frac)
        while keep > 0 and frac_pat[keep - 1] == "9" and frac[keep - 1] == "0":
            keep -= 1
        frac = frac[:keep]
    text = "".join(parts)
    if point and frac_pat:
        if fm and not frac and not ip and first >= pre:
            text += "0"  # FM never shows a bare point
        text += "." + frac
    return text + sign if sign_at == "end" else text


def _to_char_in_zone(ctx: object, v: object, fmt: object) -> str | None:
    """to_char of a date/time value in the running statement's zone (NULL in, NULL out)."""
    if v is None or fmt is None:
        return None
    return _to_char_datetime(v, fmt, time_zones.session_zone(ctx))  # type: ignore[arg-type]


def _to_char_resolver(args: Sequence[SqlType]) -> FunctionImpl | None:
    if len(args) != 2 or not string_or_unknown(args[1]):
        return None
    tid = args[0].id
    if tid in (TypeId.TIMESTAMP, TypeId.TIMESTAMPTZ, TypeId.DATE, TypeId.INTERVAL):
        first = T.TIMESTAMPTZ if tid is TypeId.DATE else SqlType(tid)
        return FunctionImpl(_to_char_in_zone, T.TEXT, needs_context=True, args=(first, T.TEXT))
    if tid in (TypeId.INT2, TypeId.INT4, TypeId.INT8, TypeId.NUMERIC):
        return FunctionImpl(lambda v, f: _to_char_number(v, f, None), T.TEXT)
    if tid in (TypeId.FLOAT4, TypeId.FLOAT8):
        digits = 6 if tid is TypeId.FLOAT4 else 15
        return FunctionImpl(lambda v, f: _to_char_number(v, f, digits), T.TEXT)
    return None


register("to_char")(_to_char_resolver)


def to_char_format_node(node: object) -> object:
    """The format argument of to_char as written. sqlglot rewrites a literal format into
    strftime codes (``'YYYY'`` becomes ``'%Y'``); this maps it back. Codes that several
    spellings share differ only in letter case, which matters only inside quoted text: there
    the original is unknown, and the format is refused rather than guessed."""
    from sqlglot import exp
    from sqlglot.dialects.postgres import Postgres

    if not isinstance(node, exp.Literal) or not node.is_string:
        return node
    text = node.this
    inverse = Postgres.INVERSE_TIME_MAPPING
    ambiguous = {
        code
        for code, key in inverse.items()
        if key.lower() in Postgres.TIME_MAPPING and key.lower() != key
    }
    out: list[str] = []
    quoted = False
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "%":
            code = next(
                (c for c in sorted(inverse, key=len, reverse=True) if text.startswith(c, i)), None
            )
            if code is not None:
                if quoted and code in ambiguous:
                    raise SqlError(
                        "0A000",
                        "to_char: template patterns inside quoted text of a literal format are"
                        " not supported (pass the format as a parameter)",
                    )
                out.append(inverse[code])
                i += len(code)
                continue
        if ch == '"':
            quoted = not quoted
        out.append(ch)
        i += 1
    return exp.Literal.string("".join(out))
