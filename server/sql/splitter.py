"""Split a query string into statements at top-level semicolons.

Postgres's lexer rules that matter for finding a semicolon: single-quoted strings (``''``
escapes a quote; ``E'...'`` also takes backslash escapes), double-quoted identifiers,
dollar-quoted strings (``$tag$...$tag$``), ``--`` line comments and nested ``/* */`` comments.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from percolator.server.sql.errors import SYNTAX_ERROR, SqlError

_DOLLAR_TAG = re.compile(r"\$([A-Za-z_][A-Za-z_0-9]*)?\$")


@dataclass(frozen=True)
class Piece:
    """One statement's text and its 0-based offset in the query string."""

    text: str
    offset: int


def split_statements(sql: str) -> list[Piece]:
    """The statements of ``sql``, stripped; empty statements are dropped, except that a string
    with no statement at all gives one empty piece (EmptyQueryResponse)."""
    pieces: list[Piece] = []
    start = 0
    i = 0
    n = len(sql)
    depth = 0  # inside CREATE FUNCTION's BEGIN ATOMIC ... END, whose statements end in ';'
    while i < n:
        ch = sql[i]
        if ch == "'":
            escapes = i > 0 and sql[i - 1] in "eE" and (i < 2 or not _ident_char(sql[i - 2]))
            i = _skip_quoted(sql, i, "'", escapes)
        elif ch == '"':
            i = _skip_quoted(sql, i, '"', False)
        elif ch == "-" and sql.startswith("--", i):
            end = sql.find("\n", i)
            i = n if end < 0 else end + 1
        elif ch == "/" and sql.startswith("/*", i):
            i = skip_block_comment(sql, i)
        elif ch == "$" and (i == 0 or not _ident_char(sql[i - 1])):
            m = _DOLLAR_TAG.match(sql, i)
            if m:
                end = sql.find(m.group(0), m.end())
                if end < 0:
                    raise SqlError(
                        SYNTAX_ERROR, "unterminated dollar-quoted string", position=i + 1
                    )
                i = end + len(m.group(0))
            else:
                i += 1
        elif ch == ";" and depth == 0:
            _add(pieces, sql, start, i)
            start = i + 1
            i += 1
        elif ch.isalpha() and (i == 0 or not _ident_char(sql[i - 1])):
            m = _WORD.match(sql, i)
            assert m is not None
            depth = _atomic_depth(sql, start, m, depth)
            i = m.end()
        else:
            i += 1
    _add(pieces, sql, start, n)
    if not pieces:
        return [Piece("", 0)]
    return pieces


_WORD = re.compile(r"[A-Za-z_][A-Za-z_0-9$]*")
_ATOMIC = re.compile(r"\s+ATOMIC\b", re.IGNORECASE)
_CREATE_ROUTINE = re.compile(
    r"(?:\s+|--[^\n]*\n|/\*[\s\S]*?\*/)*CREATE\s+(?:OR\s+REPLACE\s+)?(?:FUNCTION|PROCEDURE)\b",
    re.IGNORECASE,
)
"""The start of a CREATE FUNCTION / PROCEDURE (after any comments)."""


def _atomic_depth(sql: str, start: int, word: re.Match[str], depth: int) -> int:
    """The BEGIN ATOMIC nesting after ``word``: a routine's SQL-standard body keeps its
    statements' semicolons (as psql does, it counts CASE ... END inside it)."""
    w = word.group(0).upper()
    if depth == 0:
        if w == "BEGIN" and _ATOMIC.match(sql, word.end()) and _CREATE_ROUTINE.match(sql, start):
            return 1
        return 0
    if w == "CASE":
        return depth + 1
    if w == "END":
        return depth - 1
    return depth


def _ident_char(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def _add(pieces: list[Piece], sql: str, start: int, end: int) -> None:
    text = sql[start:end]
    stripped = text.strip()
    if stripped and not _only_comments(stripped):
        pieces.append(Piece(stripped, start + (len(text) - len(text.lstrip()))))


def _only_comments(text: str) -> bool:
    i = 0
    n = len(text)
    while i < n:
        if text[i].isspace():
            i += 1
        elif text.startswith("--", i):
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
        elif text.startswith("/*", i):
            i = skip_block_comment(text, i)
        else:
            return False
    return True


def _skip_quoted(sql: str, i: int, quote: str, backslash: bool) -> int:
    j = i + 1
    n = len(sql)
    while j < n:
        ch = sql[j]
        if backslash and ch == "\\":
            j += 2
            continue
        if ch == quote:
            if j + 1 < n and sql[j + 1] == quote:
                j += 2
                continue
            return j + 1
        j += 1
    what = "quoted identifier" if quote == '"' else "quoted string"
    raise SqlError(
        SYNTAX_ERROR, f"unterminated {what} at or near {sql[i : i + 10]!r}", position=i + 1
    )


def skip_block_comment(sql: str, i: int) -> int:
    """The position after the (nested) ``/* */`` comment starting at ``i``; 42601 if it
    does not end."""
    depth = 0
    n = len(sql)
    while i < n:
        if sql.startswith("/*", i):
            depth += 1
            i += 2
        elif sql.startswith("*/", i):
            depth -= 1
            i += 2
            if depth == 0:
                return i
        else:
            i += 1
    raise SqlError(SYNTAX_ERROR, "unterminated /* comment", position=n)
