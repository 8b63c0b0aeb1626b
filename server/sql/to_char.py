"""to_char: the formatting of timestamps, dates, intervals and numbers as text.

formatting.c's DCH (date/time) and NUM (number) templates. Patterns this module does not
implement raise 0A000 naming them: a wrong rendering would be worse than an error.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import string
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

from percolator.server.sql import time_zones
from percolator.server.sql import types as T
from percolator.server.sql.casts import apply_time_precision
from percolator.server.sql.errors import (
    DATETIME_FIELD_OVERFLOW,
    FEATURE_NOT_SUPPORTED,
    INVALID_DATETIME_FORMAT,
    SYNTAX_ERROR,
    SqlError,
)
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
    # Group separators after the point print as ',' between the fraction's digits.
    frac_seps, frac_pat = frac_pat, frac_pat.replace(",", "")
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
            text += "." + _fraction(frac_seps, "#" * len(frac_pat), fm)
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
        text += "." + _fraction(frac_seps, frac, fm)
    return text + sign if sign_at == "end" else text


def _fraction(pattern: str, digits: str, fm: bool) -> str:
    """The fraction's ``digits`` laid out on ``pattern`` (digit positions and ','), up to the
    first digit position FM left empty; a separator before any digit is a space (FM: none)."""
    out: list[str] = []
    shown = 0
    for c in pattern:
        if c == ",":
            out.append("," if shown else "" if fm else " ")
        elif shown == len(digits):
            break
        else:
            out.append(digits[shown])
            shown += 1
    return "".join(out)


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


# -- to_date / to_timestamp: formatting.c's DCH_from_char -------------------------------------

# Patterns whose value is a number (KeyWord.is_digit), and the characters each reads when the
# next node is not a separator (KeyWord.len, or the fixed width from_char_parse_int_len gets).
_DIGIT_WIDTH = {
    "CC": 2, "DDD": 3, "DD": 2, "D": 1, "FF1": 1, "FF2": 2, "FF3": 3, "FF4": 4, "FF5": 5,
    "FF6": 6, "HH24": 2, "HH12": 2, "HH": 2, "IDDD": 3, "ID": 1, "IW": 2, "IYYY": 4, "IYY": 3,
    "IY": 2, "I": 1, "J": 1, "MI": 2, "MM": 2, "MS": 3, "SSSSS": 5, "SSSS": 4, "SS": 2,
    "TZH": 2, "TZM": 2, "US": 6, "WW": 2, "W": 1, "Y,YYY": 5, "YYYY": 4, "YYY": 3, "YY": 2,
    "Y": 1, "Q": 1,
}  # fmt: skip
_ISO_PATTERNS = frozenset(("IDDD", "ID", "IW", "IYYY", "IYY", "IY", "I"))
_ROMAN_LOWER = ["xii", "xi", "x", "ix", "viii", "vii", "vi", "v", "iv", "iii", "ii", "i"]
_WS_CHARS = " \t\n\r\v\f"


@dataclass(frozen=True)
class _Node:
    """One node of a parsed template (FormatNode): a pattern ("action"), a space, a
    separator (printable ASCII that is neither letter nor digit) or another character."""

    kind: str
    text: str
    fm: bool = False
    th: bool = False


def _is_separator(ch: str) -> bool:
    return "\x20" < ch < "\x7f" and not ch.isalnum()


def _parse_template(fmt: str) -> list[_Node]:
    """The nodes of a to_date / to_timestamp template (parse_format)."""
    nodes: list[_Node] = []
    i, n = 0, len(fmt)
    while i < n:
        fm = False
        if fmt.startswith(("FM", "fm", "TM", "tm"), i):
            fm = fmt[i] in "Ff"
            i += 2
        key = next(
            (fmt[i : i + k] for k in (5, 4, 3, 2, 1) if fmt[i : i + k] in _DCH_KEYWORDS), None
        )
        if key is not None:
            i += len(key)
            th = fmt.startswith(("TH", "th"), i)
            i += 2 if th or fmt.startswith("SP", i) else 0
            nodes.append(_Node("action", key, fm, th))
            continue
        if i >= n:
            break
        if fmt[i] == '"':
            i += 1
            while i < n and fmt[i] != '"':
                if fmt[i] == "\\" and i + 1 < n:
                    i += 1
                nodes.append(_Node("char", fmt[i]))
                i += 1
            i += 1
            continue
        if fmt[i] == "\\" and fmt.startswith('"', i + 1):
            i += 1
        ch = fmt[i]
        kind = "separator" if _is_separator(ch) else "space" if ch in _WS_CHARS else "char"
        nodes.append(_Node(kind, ch))
        i += 1
    return nodes


class _FromChar:
    """The fields a template reads from its input (TmFromChar), and the reading of them."""

    def __init__(self, text: str, nodes: list[_Node]) -> None:
        self.text = text
        self.nodes = nodes
        self.pos = 0
        self.f: dict[str, int] = {}
        self.clock12 = False

    def set(self, name: str, value: int, key: str) -> None:
        """from_char_set_int: a field set twice must get the same value."""
        old = self.f.get(name, 0)
        if old != 0 and old != value:
            raise SqlError(
                INVALID_DATETIME_FORMAT,
                f'conflicting values for "{key}" field in formatting string',
                detail="This value contradicts a previous setting for the same field type.",
            )
        self.f[name] = value

    def skip_spaces(self) -> int:
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos] in _WS_CHARS:
            self.pos += 1
        return self.pos - start

    def number(self, at: int, width: int) -> tuple[int, int]:
        """from_char_parse_int_len: a number of exactly ``width`` characters, or as many
        digits as there are when the pattern is FM or a separator follows it; returns the
        value and the characters read."""
        node = self.nodes[at]
        init = self.pos
        self.skip_spaces()
        copy = self.text[self.pos : self.pos + width]
        if node.fm or _next_is_separator(self.nodes, at):
            m = _STRTOL.match(self.text, init)
            used = m.end() - init if m else 0
            value = int(m.group().strip(_WS_CHARS)) if m else 0
            self.pos = init + used  # strtol's end: where it started when there is no number
        else:
            if len(copy) < width:
                raise SqlError(
                    INVALID_DATETIME_FORMAT,
                    f'source string too short for "{node.text}" formatting field',
                    detail=f"Field requires {width} characters, but only {len(copy)} remain.",
                    hint=_FM_HINT,
                )
            m = _STRTOL.match(copy)
            used = m.end() if m else 0
            if 0 < used < width:
                raise SqlError(
                    INVALID_DATETIME_FORMAT,
                    f'invalid value "{copy}" for "{node.text}"',
                    detail=f"Field requires {width} characters, but only {used} could be parsed.",
                    hint=_FM_HINT,
                )
            value = int(m.group().strip(_WS_CHARS)) if m else 0
            self.pos += used
        if self.pos == init:
            raise SqlError(
                INVALID_DATETIME_FORMAT,
                f'invalid value "{copy}" for "{node.text}"',
                detail="Value must be an integer.",
            )
        if not -(2**31) <= value < 2**31:
            raise SqlError(
                DATETIME_FIELD_OVERFLOW,
                f'value for "{node.text}" in source string is out of range',
                detail="Value must be in the range -2147483648 to 2147483647.",
            )
        return value, self.pos - init

    def word(self, key: str, words: Sequence[str]) -> int:
        """from_char_seq_search: the index of the first of ``words`` the input starts with
        (letter case aside)."""
        rest = self.text[self.pos :]
        low = rest.lower()
        for index, w in enumerate(words):
            if w and low.startswith(w.lower()):
                self.pos += len(w)
                return index
        shown = re.split(r"[ \t\n\r\f]", rest, maxsplit=1)[0]
        raise SqlError(
            INVALID_DATETIME_FORMAT,
            f'invalid value "{shown}" for "{key}"',
            detail="The given value did not match any of the allowed values for this field.",
        )


_STRTOL = re.compile(r"[ \t\n\r\v\f]*[+-]?\d+")
_FM_HINT = 'If your source string is not fixed-width, try using the "FM" modifier.'


def _next_is_separator(nodes: list[_Node], at: int) -> bool:
    """is_next_separator: whether the node after ``at`` cannot be part of a number."""
    if nodes[at].th:
        return True
    if at + 1 >= len(nodes):
        return True
    nxt = nodes[at + 1]
    if nxt.kind == "action":
        return nxt.text.upper() not in _DIGIT_WIDTH
    return not nxt.text.isdigit()


def _adjust_partial_year(year: int) -> int:
    """A year of fewer than 4 digits, moved toward 2020 (adjust_partial_year_to_2020)."""
    if year < 70:
        return year + 2000
    if year < 100:
        return year + 1900
    if year < 520:
        return year + 2000
    if year < 1000:
        return year + 1000
    return year


def _read_field(p: _FromChar, at: int) -> None:
    """Read one pattern's value from the input (DCH_from_char's switch)."""
    node = p.nodes[at]
    key, up = node.text, node.text.upper()
    if up in _ISO_PATTERNS:
        raise SqlError(
            FEATURE_NOT_SUPPORTED, f'to_date/to_timestamp pattern "{key}" is not supported'
        )
    if up in ("TZ", "OF"):
        raise SqlError(
            FEATURE_NOT_SUPPORTED, f'formatting field "{key}" is only supported in to_char'
        )
    if up in ("AM", "PM", "A.M.", "P.M."):
        words = ["a.m.", "p.m.", "A.M.", "P.M."] if "." in up else ["am", "pm", "AM", "PM"]
        p.set("pm", p.word(key, words) % 2, key)
        p.clock12 = True
    elif up in ("AD", "BC", "A.D.", "B.C."):
        words = ["a.d.", "b.c.", "A.D.", "B.C."] if "." in up else ["ad", "bc", "AD", "BC"]
        p.set("bc", p.word(key, words) % 2, key)
    elif up in ("MONTH", "MON"):
        p.set("mm", p.word(key, _MONTHS if up == "MONTH" else [m[:3] for m in _MONTHS]) + 1, key)
    elif up in ("DAY", "DY"):
        p.set("d", p.word(key, _DAYS if up == "DAY" else [d[:3] for d in _DAYS]) + 1, key)
    elif up == "RM":
        p.set("mm", 12 - p.word(key, _ROMAN_LOWER), key)
    elif up == "FX":
        p.f["fx"] = 1
    elif up == "Y,YYY":
        m = re.match(r"[ \t\n\r\v\f]*([+-]?\d+),(\d{1,3})", p.text[p.pos :])
        if m is None:
            raise SqlError(INVALID_DATETIME_FORMAT, 'invalid input string for "Y,YYY"')
        p.set("year", int(m[1]) * 1000 + int(m[2]), key)
        p.f["yysz"] = 4
        p.pos += m.end()
        if node.th:
            p.pos = min(p.pos + 2, len(p.text))
    elif up == "TZH":
        _read_tzh(p, at)
    else:
        _read_number(p, at, up)


def _read_tzh(p: _FromChar, at: int) -> None:
    # The sign may have been taken for a separator: a '-' skipped just before counts.
    ch = p.text[p.pos : p.pos + 1]
    if ch in ("+", "-", " "):
        p.f["tzsign"] = -1 if ch == "-" else 1
        p.pos += 1
    else:
        skipped_minus = p.f.get("extra_skip", 0) > 0 and p.text[p.pos - 1 : p.pos] == "-"
        p.f["tzsign"] = -1 if skipped_minus else 1
    p.set("tzh", p.number(at, 2)[0], "TZH")


def _read_number(p: _FromChar, at: int, up: str) -> None:
    """A numeric pattern: its value into its field (scaled for fractions of a second)."""
    value, used = p.number(at, _DIGIT_WIDTH[up])
    if up in ("HH", "HH12", "HH24"):
        p.set("hh", value, up)
        p.clock12 = p.clock12 or up != "HH24"
    elif up in ("MS", "US") or up.startswith("FF"):
        # Digits read are the leading ones of the fraction: MS '25' is 250 milliseconds.
        digits = 3 if up == "MS" else 6
        p.set("ms" if up == "MS" else "us", value * 10 ** max(digits - used, 0), up)
        if up.startswith("FF"):
            p.f["ff"] = int(up[2])
    elif up in ("YYYY", "YYY", "YY", "Y"):
        if len(up) < 4 and used < 4:
            value = _adjust_partial_year(value)
        p.set("year", value, up)
        p.f["yysz"] = len(up)
    elif up == "TZM":
        p.f.setdefault("tzsign", 1)
        p.set("tzm", value, up)
    elif up != "Q":  # Q is read and ignored, as in Postgres
        name = {"MI": "mi", "SS": "ss", "SSSS": "ssss", "SSSSS": "ssss", "MM": "mm",
                "DDD": "ddd", "DD": "dd", "D": "d", "WW": "ww", "CC": "cc", "W": "w",
                "J": "j"}[up]  # fmt: skip
        p.set(name, value, up)
    if p.nodes[at].th:
        p.pos = min(p.pos + 2, len(p.text))  # SKIP_THth: the suffix's two characters


def _from_char(text: str, fmt: str) -> _FromChar:
    """Read ``text`` by the template ``fmt`` (DCH_from_char without FX's standard mode)."""
    nodes = _parse_template(fmt)
    p = _FromChar(text, nodes)
    extra_skip = 0
    for at, node in enumerate(nodes):
        if p.pos >= len(text):
            break
        fx = "fx" in p.f
        if not fx and ((node.kind == "action" and node.text.upper() != "FX") or at == 0):
            extra_skip += p.skip_spaces()
        if node.kind in ("space", "separator"):
            if not fx:
                # One template space or separator matches one in the input, or nothing.
                extra_skip -= 1
                ch = text[p.pos : p.pos + 1]
                if ch and (ch in _WS_CHARS or _is_separator(ch)):
                    p.pos += 1
                    extra_skip += 1
            else:
                p.pos += 1
            continue
        if node.kind == "char":
            # Another character stands for one of the input, whatever it is.
            if not fx and extra_skip > 0:
                extra_skip -= 1
            else:
                p.pos += 1
            continue
        p.f["extra_skip"] = extra_skip
        _read_field(p, at)
        if "fx" not in p.f:
            extra_skip = p.skip_spaces()
    return p


def _days_before_month(year: int) -> list[int]:
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    days = [31, 29 if leap else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
    return [sum(days[:i]) for i in range(13)]


def _out_of_range(text: str) -> SqlError:
    return SqlError(DATETIME_FIELD_OVERFLOW, f'date/time field value out of range: "{text}"')


def _year_of(p: _FromChar) -> int | None:
    """The year the fields give (CC with YY: the year of that century), None if none."""
    f = p.f
    year, cc, bc = f.get("year", 0), f.get("cc", 0), f.get("bc", 0)
    if year:
        if cc and f.get("yysz", 0) <= 2:
            cc = -cc if bc else cc
            yy = year % 100
            if not yy:
                return cc * 100 + (0 if cc >= 0 else 1)
            return yy + (cc - 1) * 100 if cc >= 0 else (cc + 1) * 100 - yy + 1
        return -year + 1 if bc else year  # 1 BC is year 0
    if cc:
        cc = -cc if bc else cc
        return (cc - 1) * 100 + 1 if cc >= 0 else cc * 100 + 1
    return None


def _date_fields(p: _FromChar, text: str) -> tuple[int, int, int]:
    """(year, month, day) of the fields read, checked as ValidateDate does; the year is 0
    (1 BC) when none is given, as in Postgres."""
    f = p.f
    year_given = _year_of(p)
    year, month, day = year_given or 0, 1, 1
    if f.get("j"):
        d = dt.date.fromordinal(f["j"] - 1721425) if f["j"] > 1721425 else None
        if d is None:
            raise SqlError(DATETIME_FIELD_OVERFLOW, f'date out of range: "{text}"')
        year, month, day, year_given = d.year, d.month, d.day, d.year
    ddd = f.get("ddd", 0)
    if f.get("ww"):
        ddd = (f["ww"] - 1) * 7 + 1
    dd = (f["w"] - 1) * 7 + 1 if f.get("w") else f.get("dd", 0)
    day = dd or day
    month = f.get("mm") or month
    if ddd and (month <= 1 or day <= 1):
        if year_given is None and not f.get("bc"):
            raise SqlError(
                INVALID_DATETIME_FORMAT, "cannot calculate day of year without year information"
            )
        before = _days_before_month(year)
        i = next((i for i in range(1, 13) if ddd <= before[i]), 13)
        if month <= 1:
            month = i
        if day <= 1:
            day = ddd - before[i - 1]
    if (f.get("mm") or ddd) and not 1 <= month <= 12:
        raise _out_of_range(text)
    if (dd or ddd) and not 1 <= day <= 31:
        raise _out_of_range(text)
    if year_given is not None and (f.get("mm") or ddd) and (dd or ddd):
        if day > _days_before_month(year)[month] - _days_before_month(year)[month - 1]:
            raise _out_of_range(text)
    return year, month, day


def _time_fields(p: _FromChar, text: str) -> tuple[int, int, int, int]:
    """(hour, minute, second, microsecond) of the fields read, 12-hour clock resolved."""
    f = p.f
    hour = minute = second = 0
    if f.get("ssss"):
        hour, rest = divmod(f["ssss"], 3600)
        minute, second = divmod(rest, 60)
    second = f.get("ss") or second
    minute = f.get("mi") or minute
    hour = f.get("hh") or hour
    if p.clock12:
        if not 1 <= hour <= 12:
            raise SqlError(
                INVALID_DATETIME_FORMAT,
                f'hour "{hour}" is invalid for the 12-hour clock',
                hint="Use the 24-hour clock, or give an hour between 1 and 12.",
            )
        if f.get("pm") and hour < 12:
            hour += 12
        elif not f.get("pm") and hour == 12:
            hour = 0
    usec = f.get("ms", 0) * 1000 + f.get("us", 0)
    if not (0 <= hour < 24 and 0 <= minute < 60 and 0 <= second < 60 and 0 <= usec < 1_000_000):
        raise _out_of_range(text)
    return hour, minute, second, usec


def _zone_offset(p: _FromChar, text: str) -> int | None:
    """Seconds east of UTC that TZH / TZM give, None if neither is there."""
    f = p.f
    if not f.get("tzsign"):
        return None
    tzh, tzm = f.get("tzh", 0), f.get("tzm", 0)
    if not (0 <= tzh <= 15 and 0 <= tzm < 60):
        raise SqlError("22009", f'time zone displacement out of range: "{text}"')
    return f["tzsign"] * (tzh * 3600 + tzm * 60)


def _local_timestamp(text: str, fmt: str) -> tuple[dt.datetime, int | None, int]:
    """to_timestamp's reading of ``text``: the wall-clock time, the zone offset the input
    gave (None: the session's zone applies) and the FFn precision (0: none)."""
    p = _from_char(text, fmt)
    year, month, day = _date_fields(p, text)
    hour, minute, second, usec = _time_fields(p, text)
    offset = _zone_offset(p, text)
    if not 1 <= year <= 9999:
        # Years before 1 AD (also the year 0 of a template without one) are not supported.
        raise SqlError(DATETIME_FIELD_OVERFLOW, "timestamp out of range")
    try:
        local = dt.datetime(year, month, day, hour, minute, second, usec)
    except ValueError:
        raise _out_of_range(text) from None
    return local, offset, p.f.get("ff", 0)


def to_date(text: str, fmt: str) -> dt.date:
    """to_date(text, template)."""
    p = _from_char(text, fmt)
    year, month, day = _date_fields(p, text)
    if not 1 <= year <= 9999:
        raise SqlError(DATETIME_FIELD_OVERFLOW, f'date out of range: "{text}"')
    try:
        return dt.date(year, month, day)
    except ValueError:
        raise _out_of_range(text) from None


def to_timestamp(ctx: object, text: str | None, fmt: str | None) -> dt.datetime | None:
    """to_timestamp(text, template): a timestamptz, read in the session's zone unless TZH /
    TZM give an offset."""
    if text is None or fmt is None:
        return None
    local, offset, ff = _local_timestamp(text, fmt)
    if offset is not None:
        result = (local - dt.timedelta(seconds=offset)).replace(tzinfo=dt.UTC)
    else:
        result = time_zones.from_local(local, time_zones.session_zone(ctx))
    return apply_time_precision(result, ff) if ff else result  # type: ignore[return-value]


_PG_EPOCH_SECS = 946_684_800.0  # 2000-01-01 in Unix time


def epoch_to_timestamptz(seconds: float) -> dt.datetime:
    """to_timestamp(double precision): Unix seconds as a timestamptz (float8_timestamptz)."""
    if math.isnan(seconds):
        raise SqlError(DATETIME_FIELD_OVERFLOW, "timestamp cannot be NaN")
    if math.isinf(seconds):
        raise SqlError(FEATURE_NOT_SUPPORTED, "infinite timestamps are not supported")
    us = round((seconds - _PG_EPOCH_SECS) * 1_000_000.0)
    try:
        return _PG_EPOCH_UTC + dt.timedelta(microseconds=us)
    except OverflowError:
        raise SqlError(DATETIME_FIELD_OVERFLOW, f'timestamp out of range: "{seconds:g}"') from None


_PG_EPOCH_UTC = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)
_EPOCH_ARGS = (TypeId.INT2, TypeId.INT4, TypeId.INT8, TypeId.NUMERIC, TypeId.FLOAT4,
               TypeId.FLOAT8, TypeId.UNKNOWN)  # fmt: skip


@register("to_timestamp")
def _to_timestamp(args: Sequence[SqlType]) -> FunctionImpl | None:
    if len(args) == 1 and args[0].id in _EPOCH_ARGS:
        return FunctionImpl(epoch_to_timestamptz, T.TIMESTAMPTZ, args=(T.FLOAT8,))
    if len(args) == 2 and all(string_or_unknown(a) for a in args):
        return FunctionImpl(to_timestamp, T.TIMESTAMPTZ, needs_context=True, args=(T.TEXT, T.TEXT))
    return None


@register("to_date")
def _to_date(args: Sequence[SqlType]) -> FunctionImpl | None:
    if len(args) == 2 and all(string_or_unknown(a) for a in args):
        return FunctionImpl(to_date, T.DATE, args=(T.TEXT, T.TEXT))
    return None


# -- to_number ------------------------------------------------------------------------------

# formatting.c's NUM_keywords, in its search order (a longer keyword before its prefix).
_NUM_KEYWORDS = (",", ".", "0", "9", "B", "C", "D", "EEEE", "FM", "G", "L", "MI", "PL", "PR",
                 "RN", "SG", "SP", "S", "TH", "V", "b", "c", "d", "eeee", "fm", "g", "l", "mi",
                 "pl", "pr", "rn", "sg", "sp", "s", "th", "v")  # fmt: skip


@dataclass
class _NumFormat:
    """A number format picture (formatting.c's NUMDesc): its nodes (True and a keyword,
    upper-cased, or False and a literal character) and what NUMDesc_prepare learns."""

    nodes: list[tuple[bool, str]]
    pre: int = 0  # digit positions before the decimal point
    post: int = 0  # ... and after it
    multi: int = 0  # the 9s after V
    has_v: bool = False
    decimal: bool = False
    fill: bool = False
    lsign: str | None = None  # "pre" / "post": where S reads its sign
    bracket: bool = False
    minus: bool = False
    plus: bool = False


def _num_format(fmt: str) -> _NumFormat:
    """Parse a number format picture, with NUMDesc_prepare's checks (42601)."""
    nodes: list[tuple[bool, str]] = []
    i = 0
    while i < len(fmt):
        key = next((k for k in _NUM_KEYWORDS if fmt.startswith(k, i)), None)
        nodes.append((False, fmt[i]) if key is None else (True, key.upper()))
        i += 1 if key is None else len(key)
    f = _NumFormat(nodes)
    eeee = roman = False
    for is_key, key in nodes:
        if not is_key:
            continue
        if eeee and key != "EEEE":
            raise SqlError(SYNTAX_ERROR, '"EEEE" must be the last pattern used')
        if key in ("9", "0"):
            if f.bracket:
                raise SqlError(SYNTAX_ERROR, f'"{key}" must be ahead of "PR"')
            if f.has_v and key == "9":
                f.multi += 1
            elif f.decimal:
                f.post += 1
            else:
                f.pre += 1
        elif key in (".", "D"):
            if f.decimal:
                raise SqlError(SYNTAX_ERROR, "multiple decimal points")
            if f.has_v:
                raise SqlError(SYNTAX_ERROR, 'cannot use "V" and decimal point together')
            f.decimal = True
        elif key == "FM":
            f.fill = True
        elif key == "S":
            if f.lsign is not None:
                raise SqlError(SYNTAX_ERROR, 'cannot use "S" twice')
            if f.plus or f.minus or f.bracket:
                raise SqlError(SYNTAX_ERROR, 'cannot use "S" and "PL"/"MI"/"SG"/"PR" together')
            f.lsign = "post" if f.decimal else "pre"
        elif key in ("MI", "PL", "SG"):
            if f.lsign is not None:
                raise SqlError(SYNTAX_ERROR, f'cannot use "S" and "{key}" together')
            f.minus = f.minus or key in ("MI", "SG")
            f.plus = f.plus or key in ("PL", "SG")
        elif key == "PR":
            if f.lsign is not None or f.plus or f.minus:
                raise SqlError(SYNTAX_ERROR, 'cannot use "PR" and "S"/"PL"/"MI"/"SG" together')
            f.bracket = True
        elif key == "RN":
            if roman:
                raise SqlError(SYNTAX_ERROR, 'cannot use "RN" twice')
            roman = True
        elif key == "V":
            if f.decimal:
                raise SqlError(SYNTAX_ERROR, 'cannot use "V" and decimal point together')
            f.has_v = True
        elif key == "EEEE":
            if eeee:
                raise SqlError(SYNTAX_ERROR, 'cannot use "EEEE" twice')
            eeee = True
    if eeee:
        raise SqlError(FEATURE_NOT_SUPPORTED, '"EEEE" not supported for input')
    if roman:
        raise SqlError(FEATURE_NOT_SUPPORTED, '"RN" not supported for input')
    return f


class _NumReader:
    """formatting.c's NUM_processor reading a number (to_number): it walks the picture and
    the input together, collecting a sign, digits and a decimal point."""

    def __init__(self, text: str, f: _NumFormat) -> None:
        self.s = text
        self.f = f
        self.pos = 0
        self.sign = " "
        self.digits: list[str] = []
        self.read_pre = 0
        self.read_post = 0
        self.read_dec = False

    def at(self, k: int = 0) -> str:
        i = self.pos + k
        return self.s[i] if i < len(self.s) else ""

    def done(self) -> bool:
        return self.pos >= len(self.s)

    def number_part(self, key: str) -> None:
        """NUM_numpart_from_char: maybe a leading sign, then a digit or the decimal point,
        then maybe a trailing sign."""
        if self.done():
            return
        if self.at() == " ":
            self.pos += 1
            if self.done():
                return
        f = self.f
        if self.sign == " " and key in ("9", "0") and self.read_pre + self.read_post == 0:
            c = self.at()
            if f.lsign == "pre":
                if c in "-+":
                    self.sign = c
                    self.pos += 1
            elif c == "-" or (f.bracket and c == "<"):
                self.sign = "-"
                self.pos += 1
            elif c == "+":
                self.sign = "+"
                self.pos += 1
            if self.done():
                return
        c = self.at()
        read = False
        if c in string.digits:
            if self.read_dec and self.read_post == f.post:
                return
            self.digits.append(c)
            if self.read_dec:
                self.read_post += 1
            else:
                self.read_pre += 1
            read = True
        elif f.decimal and not self.read_dec and c == ".":
            self.digits.append(".")
            self.read_dec = read = True
        if self.done():
            return
        if self.sign == " " and self.read_pre + self.read_post > 0:
            if f.lsign is not None:
                nxt = self.at(1)
                if read and nxt and nxt not in string.digits and nxt in "-+":
                    self.pos += 1
                    self.sign = nxt
            elif not read and (f.plus or f.minus) and self.at() in "-+":
                self.sign = self.at()

    def eat_non_data(self, n: int) -> None:
        """Skip up to ``n`` input characters that are not part of a number."""
        while n > 0 and not self.done() and self.at() not in "0123456789.,+-":
            self.pos += 1
            n -= 1

    def run(self) -> str:
        f = self.f
        for is_key, key in f.nodes:
            if self.done():
                break
            if not is_key:
                # Each literal character of the picture skips one input character.
                self.pos += 1
                continue
            if key in ("9", "0", ".", "D"):
                self.number_part(key)
            elif key in (",", "G"):
                # A group separator is skipped where the input has one (FM: never).
                if f.fill or self.at() != ",":
                    continue
            elif key == "L":
                self.eat_non_data(1)  # the C locale's currency symbol is one character
                continue
            elif key == "TH":
                if not f.decimal:
                    self.eat_non_data(2)
                continue
            elif key in ("MI", "PL", "SG"):
                wanted = {"MI": "-", "PL": "+", "SG": "-+"}[key]
                if self.at() in wanted:
                    self.sign = self.at()
                else:
                    self.eat_non_data(1)
                    continue
            else:
                continue
            self.pos += 1
        number = "".join(self.digits)
        if number.endswith("."):
            number = number[:-1]
        return self.sign + number


def to_number(text: str, fmt: str) -> Decimal | None:
    """to_number(text, format): the number read by the picture, as numeric with the scale
    of the fraction digits read (numeric_to_number)."""
    if not fmt:
        return None
    from percolator.server.sql.casts import apply_numeric_typmod
    from percolator.server.sql.numeric_math import numeric_power
    from percolator.server.sql.textio import text_in

    f = _num_format(fmt)
    reader = _NumReader(text, f)
    number = reader.run()
    scale = reader.read_post
    value = text_in(T.NUMERIC, number)
    assert isinstance(value, Decimal)
    value = apply_numeric_typmod(value, T.numeric(f.pre + f.multi + scale, scale))
    if f.has_v:
        value = value * numeric_power(Decimal(10), Decimal(-f.multi))
    return value


@register("to_number")
def _to_number(args: Sequence[SqlType]) -> FunctionImpl | None:
    if len(args) == 2 and all(string_or_unknown(a) for a in args):
        return FunctionImpl(to_number, T.NUMERIC, args=(T.TEXT, T.TEXT))
    return None
