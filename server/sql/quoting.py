"""quote_ident, quote_literal, quote_nullable and format(), whose %I and %L quote as the
quote_ functions do."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from percolator.server.sql import types as T
from percolator.server.sql.errors import INVALID_PARAMETER_VALUE, SqlError
from percolator.server.sql.functions import FunctionImpl, define, register, string_or_unknown
from percolator.server.sql.operators import is_string
from percolator.server.sql.types import SqlType, TypeId

# Keywords quote_ident must quote: every keyword that is not unreserved (pg_get_keywords()).
_QUOTED_KEYWORDS = frozenset(
    """
all analyse analyze and any array as asc asymmetric authorization between bigint binary bit
boolean both case cast char character check coalesce collate collation column concurrently
constraint create cross current_catalog current_date current_role current_schema current_time
current_timestamp current_user dec decimal default deferrable desc distinct do else end except
exists extract false fetch float for foreign freeze from full grant greatest group grouping
having ilike in initially inner inout int integer intersect interval into is isnull join
json_array json_arrayagg json_object json_objectagg lateral leading least left like limit
localtime localtimestamp national natural nchar none normalize not notnull null nullif numeric
offset on only or order out outer overlaps overlay placing position precision primary real
references returning right row select session_user setof similar smallint some substring
symmetric system_user table tablesample then time timestamp to trailing treat trim true union
unique user using values varchar variadic verbose when where window with xmlattributes
xmlconcat xmlelement xmlexists xmlforest xmlnamespaces xmlparse xmlpi xmlroot xmlserialize
xmltable
""".split()
)
_SAFE_IDENT = re.compile(r"[a-z_][a-z0-9_]*\Z")


def quote_ident(s: str) -> str:
    """Postgres's quote_identifier: double quotes unless ``s`` is a plain lower-case name."""
    if _SAFE_IDENT.match(s) and s not in _QUOTED_KEYWORDS:
        return s
    return '"' + s.replace('"', '""') + '"'


def quote_literal(s: str) -> str:
    """Postgres's quote_literal_cstr: quotes doubled; with a backslash, an E'' string."""
    body = s.replace("'", "''")
    if "\\" in s:
        return "E'" + body.replace("\\", "\\\\") + "'"
    return "'" + body + "'"


def _text_of(t: SqlType) -> Callable[[object], str]:
    """The text output function of values of ``t``."""
    from percolator.server.sql.textio import text_out

    if is_string(t) or t.id is TypeId.UNKNOWN:
        return str
    return lambda v: text_out(t, v)


define(("quote_ident",), quote_ident, T.TEXT, 1)


@register("quote_literal")
def _quote_literal(args: Sequence[SqlType]) -> FunctionImpl | None:
    # quote_literal(anyelement) quotes the value's text form.
    if len(args) != 1:
        return None
    out = _text_of(args[0])
    return FunctionImpl(lambda v: quote_literal(out(v)), T.TEXT)


@register("quote_nullable")
def _quote_nullable(args: Sequence[SqlType]) -> FunctionImpl | None:
    if len(args) != 1:
        return None
    out = _text_of(args[0])
    return FunctionImpl(
        lambda v: "NULL" if v is None else quote_literal(out(v)), T.TEXT, strict=False
    )


def _format_error(message: str, hint: str | None = None) -> SqlError:
    return SqlError(INVALID_PARAMETER_VALUE, message, hint=hint)


def _format_digits(fmt: str, i: int) -> tuple[int | None, int]:
    j = i
    while j < len(fmt) and fmt[j].isdigit():
        j += 1
    if j == i:
        return None, i
    if j >= len(fmt):
        raise _format_error("unterminated format() type specifier", 'For a single "%" use "%%".')
    return int(fmt[i:j]), j


def _advance(fmt: str, i: int) -> int:
    i += 1
    if i >= len(fmt):
        raise _format_error("unterminated format() type specifier", 'For a single "%" use "%%".')
    return i


def _format(
    outs: Sequence[Callable[[object], str]], types: Sequence[SqlType]
) -> Callable[..., str | None]:
    """Postgres's format(): %s, %I, %L and %%, with argument positions (``%2$s``), the ``-``
    flag and widths (``%10s``, ``%*s``, ``%*2$s``), as text_format() in varlena.c."""

    def run(fmt: str | None, *args: object) -> str | None:
        if fmt is None:
            return None
        out: list[str] = []
        arg = 0  # index of the next argument (0 is the first after the format string)
        i = 0
        while i < len(fmt):
            ch = fmt[i]
            if ch != "%":
                out.append(ch)
                i += 1
                continue
            i = _advance(fmt, i)
            if fmt[i] == "%":
                out.append("%")
                i += 1
                continue
            argpos: int | None = None
            widthpos: int | None = None  # 0: the next argument
            left = False
            width = 0
            n, i = _format_digits(fmt, i)
            if n is not None and fmt[i] != "$":
                width = n
            else:
                if n is not None:
                    if n == 0:
                        raise _format_error(
                            "format specifies argument 0, but arguments are numbered from 1"
                        )
                    argpos = n
                    i = _advance(fmt, i)
                while fmt[i] == "-":
                    left = True
                    i = _advance(fmt, i)
                if fmt[i] == "*":
                    i = _advance(fmt, i)
                    n, i = _format_digits(fmt, i)
                    if n is not None:
                        if fmt[i] != "$":
                            raise _format_error('width argument position must be ended by "$"')
                        if n == 0:
                            raise _format_error(
                                "format specifies argument 0, but arguments are numbered from 1"
                            )
                        widthpos = n
                        i = _advance(fmt, i)
                    else:
                        widthpos = 0
                else:
                    n, i = _format_digits(fmt, i)
                    if n is not None:
                        width = n
            conv = fmt[i]
            if conv not in "sIL":
                raise _format_error(
                    f'unrecognized format() type specifier "{conv}"', 'For a single "%" use "%%".'
                )
            i += 1
            if widthpos is not None:
                if widthpos > 0:
                    arg = widthpos - 1
                if arg >= len(args):
                    raise _format_error("too few arguments for format()")
                w = args[arg]
                arg += 1
                width = 0 if w is None else int(w if isinstance(w, int) else outs[arg - 1](w))
                if width < 0:
                    left, width = True, -width
            if argpos is not None:
                arg = argpos - 1
            if arg >= len(args):
                raise _format_error("too few arguments for format()")
            value = args[arg]
            arg += 1
            if value is None:
                if conv == "I":
                    raise SqlError("22004", "null values cannot be formatted as an SQL identifier")
                text = "" if conv == "s" else "NULL"
            else:
                text = outs[arg - 1](value)
                if conv == "I":
                    text = quote_ident(text)
                elif conv == "L":
                    text = quote_literal(text)
            out.append(text.ljust(width) if left else text.rjust(width))
        return "".join(out)

    return run


@register("format")
def _format_resolver(args: Sequence[SqlType]) -> FunctionImpl | None:
    if not args or not string_or_unknown(args[0]):
        return None
    rest = list(args[1:])
    return FunctionImpl(_format([_text_of(t) for t in rest], rest), T.TEXT, strict=False)
