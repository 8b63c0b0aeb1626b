"""Tokens of a PL/pgSQL body, with their offsets (SQL pieces are cut out of the text by them).

Strings (``'...'``, ``E'...'``, dollar quotes), quoted identifiers and comments are single
tokens or skipped, so that a ``;`` or a keyword inside them never ends a statement.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from percolator.server.sql.errors import SYNTAX_ERROR, SqlError
from percolator.server.sql.splitter import skip_block_comment

_OP_CHARS = "+-*/<>=~!@#%^&|`?"

_PATTERN = re.compile(
    r"""
      (?P<ws>\s+)
    | (?P<comment>--[^\n]*)
    | (?P<estr>[eE]'(?:[^'\\]|\\.|'')*')
    | (?P<str>(?:[bBxXnN])?'(?:[^']|'')*')
    | (?P<dollar>\$(?P<tag>[A-Za-z_\x80-\uffff][A-Za-z_0-9\x80-\uffff]*)?\$)
    | (?P<param>\$\d+)
    | (?P<ident>"(?:[^"]|"")*")
    | (?P<num>(?:\d+\.(?!\.)\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?)
    | (?P<word>[A-Za-z_\x80-\uffff][A-Za-z_0-9$\x80-\uffff]*)
    | (?P<special>:=|::|\.\.|=>|[(),;:\[\].])
    | (?P<op>[+\-*/<>=~!@\#%^&|`?]+)
    """,
    re.VERBOSE | re.DOTALL,
)


@dataclass(frozen=True, slots=True)
class Token:
    kind: str
    """word, ident (quoted), str, num, param ($n), op (punctuation and operators)."""
    text: str
    pos: int
    """0-based offset in the body."""
    end: int

    @property
    def upper(self) -> str:
        """A word's keyword form (upper case); other tokens as written."""
        return self.text.upper() if self.kind == "word" else self.text

    @property
    def name(self) -> str:
        """The token as an identifier: a word folded to lower case, a quoted one as written."""
        if self.kind == "ident":
            return self.text[1:-1].replace('""', '"')
        return self.text.lower()


def _unterminated(what: str, pos: int) -> SqlError:
    return SqlError(SYNTAX_ERROR, f"unterminated {what}", position=pos + 1)


def tokenize(body: str) -> list[Token]:
    """The tokens of ``body`` (42601 for an unterminated string, quote or comment)."""
    out: list[Token] = []
    pos = 0
    n = len(body)
    while pos < n:
        if body.startswith("/*", pos):
            pos = _skip_block_comment(body, pos)
            continue
        m = _PATTERN.match(body, pos)
        if m is None:
            ch = body[pos]
            if ch == "'":
                raise _unterminated("quoted string", pos)
            if ch == '"':
                raise _unterminated("quoted identifier", pos)
            out.append(Token("op", ch, pos, pos + 1))
            pos += 1
            continue
        kind = m.lastgroup
        if kind == "tag":
            kind = "dollar"
        start, end = m.start(), m.end()
        if kind in ("ws", "comment"):
            pos = end
            continue
        if kind == "dollar":
            delim = m.group("dollar")
            close = body.find(delim, end)
            if close < 0:
                raise _unterminated("dollar-quoted string", start)
            end = close + len(delim)
            out.append(Token("str", body[start:end], start, end))
            pos = end
            continue
        text = m.group(kind)
        if kind == "estr":
            kind = "str"
        elif kind == "special":
            kind = "op"
        elif kind == "op":
            text = _operator(text)
            if text.startswith("/*") or text.startswith("--"):
                # A comment right after operator characters ("x:=1--c"): only what precedes.
                text = text[:1]
            end = start + len(text)
        out.append(Token(kind, text, start, end))
        pos = end
    return out


def _operator(text: str) -> str:
    """Postgres's operator lexing: a comment start ends it, and a trailing + or - is not part
    of it unless it holds one of ``~!@#%^&|`?`` (so ``=-1`` is ``=`` then ``-1``)."""
    for mark in ("/*", "--"):
        i = text.find(mark, 1)
        if i > 0:
            text = text[:i]
    if len(text) > 1 and not any(c in "~!@#%^&|`?" for c in text):
        while len(text) > 1 and text[-1] in "+-":
            text = text[:-1]
    return text


def _skip_block_comment(body: str, pos: int) -> int:
    try:
        return skip_block_comment(body, pos)
    except SqlError:
        raise _unterminated("/* comment", pos) from None


def line_of(body: str, pos: int) -> int:
    """The 1-based line of an offset (Postgres numbers a body's lines from its first)."""
    return body.count("\n", 0, pos) + 1
