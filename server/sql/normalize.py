"""Lifting literals out of statement text, so statements that differ only in their constants
share one parse and one plan (``WHERE aid = 77983`` and ``WHERE aid = 12`` both become
``WHERE aid = $1``).

Clients that send every statement as text with its values inlined (psql scripts, pgbench
``-M simple``, ORMs without server-side binding) would otherwise pay a full parse and bind per
statement. The rewrite is conservative: it gives up (returns None) on anything it cannot
tokenize with certainty (comments, dollar quotes, E'' and other prefixed strings, existing
parameters), and leaves literals whose value shapes the plan where they are: ORDER BY / GROUP BY /
DISTINCT ON ordinals, type modifiers (``varchar(10)``), typed literals (``date '2024-01-01'``,
``interval '1 day'``), JSON keys after ``->``, LIKE ESCAPE characters.

A number becomes a parameter of the type its literal would have had (integer, bigint or
numeric by magnitude, as the binder types literals); a string stays untyped and takes its type
from context, as a string literal does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal

from percolator.server.sql import types as T
from percolator.server.sql.types import SqlType

_TOKEN = re.compile(
    r"""
      (?P<ws>\s+)
    | (?P<str>'(?:[^']|'')*')
    | (?P<num>(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?)
    | (?P<ident>"(?:[^"]|"")*")
    | (?P<word>[A-Za-z_][A-Za-z_0-9$]*)
    | (?P<op>::|->>|->|\#>>|\#>|<=|>=|<>|!=|\|\||[(),;.*+\-/%<>=\[\]:~!@\#^&|`?{}])
    """,
    re.VERBOSE,
)

_STATEMENTS = frozenset({"SELECT", "INSERT", "UPDATE", "DELETE", "WITH", "VALUES"})
# Words after which a value (not a typed literal's type name) follows.
_VALUE_WORDS = frozenset(
    {
        "SELECT", "WHERE", "AND", "OR", "NOT", "IS", "IN", "LIKE", "ILIKE", "THEN", "ELSE",
        "WHEN", "BETWEEN", "VALUES", "SET", "RETURNING", "LIMIT", "OFFSET", "DISTINCT", "ON",
        "HAVING", "CASE", "ALL", "ANY", "SOME", "EXISTS", "RETURN", "FROM", "TO", "FOR",
    }
)  # fmt: skip
_TYPE_WORDS = frozenset(
    {
        "VARCHAR", "CHAR", "CHARACTER", "VARYING", "NUMERIC", "DECIMAL", "BIT", "VARBIT",
        "TIME", "TIMESTAMP", "TIMESTAMPTZ", "TIMETZ", "INTERVAL", "FLOAT", "BPCHAR",
    }
)  # fmt: skip
_ORDINAL_CLAUSE_END = frozenset(
    {"LIMIT", "OFFSET", "HAVING", "FOR", "UNION", "INTERSECT", "EXCEPT", "FETCH", "WINDOW"}
)
_ITEM_END_WORDS = frozenset({"ASC", "DESC", "NULLS", "USING", "COLLATE"}) | _ORDINAL_CLAUSE_END
_INT4_MAX = (1 << 31) - 1
_INT8_MAX = (1 << 63) - 1


@dataclass(frozen=True)
class Normalized:
    """A statement with its literals lifted into parameters ``$1..$n``."""

    template: str
    types: tuple[SqlType, ...]
    """Each parameter's type: integer, bigint, numeric, or unknown for strings."""
    values: tuple[object, ...]
    """Each literal's value: int, Decimal, or the string's text."""


def lift_literals(sql: str) -> Normalized | None:
    """The parameterized form of one statement, or None when it should be parsed as is."""
    if "$" in sql or "--" in sql or "/*" in sql:
        return None
    out: list[str] = []
    seen: dict[str, int] = {}
    types: list[SqlType] = []
    values: list[object] = []
    prev = ""  # the previous significant token, upper-cased for words
    typmod_depth = 0
    depth = 0
    ordinal_clause = False
    ordinal_depth = 0
    distinct_on = False
    pos = 0
    first = True
    n = len(sql)
    while pos < n:
        m = _TOKEN.match(sql, pos)
        if m is None:
            return None
        kind = m.lastgroup
        text = m.group()
        pos = m.end()
        if kind == "ws":
            out.append(" ")
            continue
        if first:
            if kind != "word" or text.upper() not in _STATEMENTS:
                return None
            first = False
        if kind == "word":
            upper = text.upper()
            if upper in ("E", "B", "X", "U", "N") and sql.startswith("'", pos):
                return None  # prefixed strings: escapes and bit strings
            if upper == "BY" and prev in ("ORDER", "GROUP"):
                ordinal_clause, ordinal_depth = True, depth
                distinct_on = False
            elif upper == "ON" and prev == "DISTINCT":
                # DISTINCT ON (1): an ordinal, as in ORDER BY, up to its closing parenthesis.
                ordinal_clause, ordinal_depth, distinct_on = True, depth, True
            elif upper in _ORDINAL_CLAUSE_END and depth == ordinal_depth:
                ordinal_clause = False
            out.append(text)
            prev = upper
            continue
        if kind == "op":
            if text == "(":
                if typmod_depth or prev in _TYPE_WORDS:
                    typmod_depth += 1
                depth += 1
            elif text == ")":
                if typmod_depth:
                    typmod_depth -= 1
                depth -= 1
                if ordinal_clause and (
                    depth < ordinal_depth or (distinct_on and depth == ordinal_depth)
                ):
                    ordinal_clause = False
            out.append(text)
            prev = text
            continue
        # ``GROUP BY ROLLUP (1, 2)``: a grouping set's elements are ordinals too.
        ordinal = (
            ordinal_clause
            and kind == "num"
            and (prev in ("BY", ",") or (prev == "(" and depth > ordinal_depth))
            and _ends_item(sql, pos)
        )
        if (
            kind == "ident"
            or ordinal
            or _keep_literal(kind, prev, typmod_depth)
            or (kind == "num" and _typed_by_its_sign(text))
        ):
            out.append(text)
            prev = text
            continue
        # The same literal text is the same parameter, so that repeated expressions stay
        # equal (SELECT n % 2 ... GROUP BY n % 2). A number's type is its own; a string's
        # comes from context, which may differ between its uses, so a repeated string stops
        # the rewrite.
        number = seen.get(text)
        if number is None:
            if kind == "str":
                values.append(text[1:-1].replace("''", "'"))
                types.append(T.UNKNOWN)
            else:
                value, t = _number(text)
                values.append(value)
                types.append(t)
            number = seen[text] = len(values)
        elif kind == "str":
            return None
        out.append(f"${number}")
        prev = "$"
    if not values:
        return None
    return Normalized("".join(out).strip(), tuple(types), tuple(values))


def _ends_item(sql: str, pos: int) -> bool:
    """True if the next token after ``pos`` ends an ORDER BY / GROUP BY item (so the number
    before it is a bare ordinal, not part of an expression)."""
    rest = sql[pos:].lstrip()
    if not rest or rest[0] in ",);":
        return True
    word = re.match(r"[A-Za-z_]+", rest)
    return word is not None and word.group().upper() in _ITEM_END_WORDS


def _keep_literal(kind: str, prev: str, typmod_depth: int) -> bool:
    if typmod_depth:
        return True
    if prev in ("->", "->>", "#>", "#>>", "ESCAPE", "COLLATE", "."):
        return True
    # A string right after a type name is a typed literal (date '2024-01-01'): keep it, unless
    # the word is one after which a value is expected.
    if kind == "str" and prev and (prev[0].isalpha() or prev[0] == "_" or prev[0] == '"'):
        return prev not in _VALUE_WORDS
    if kind == "num" and prev and (prev[0].isalpha() or prev[0] == "_"):
        return prev not in _VALUE_WORDS
    return False


def _typed_by_its_sign(text: str) -> bool:
    """True for 2147483648 and 9223372036854775808: negated they fit a narrower type
    (Postgres folds ``-2147483648`` into one integer constant), so the binder must see them."""
    return text.isdigit() and int(text) in (1 << 31, 1 << 63)


def _number(text: str) -> tuple[object, SqlType]:
    if text.isdigit():
        v = int(text)
        if v <= _INT4_MAX:
            return v, T.INT4
        if v <= _INT8_MAX:
            return v, T.INT8
    return Decimal(text), T.NUMERIC
