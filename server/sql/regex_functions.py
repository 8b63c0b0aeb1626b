"""Postgres regular expressions and the functions over them.

Postgres's regex dialect is Spencer's ARE (regex/re_syntax.n); Python's ``re`` differs in its
escapes (``\\b`` is a backspace in an ARE, ``\\m`` / ``\\M`` / ``\\y`` are word boundaries),
bracket expressions (``[[:alpha:]]``), anchors (``$`` matches only at the very end unless
newline-sensitive) and in which match it takes at a position (the longest, or the shortest
for a non-greedy RE, where Python takes the first its backtracking finds).
:func:`compile_regex` translates an ARE (or a BRE, flag ``b``) with its flags into a Python
pattern and :class:`PgRegex` runs it, looking for the ARE's choice of match. What stays
Python's: which text a capture group holds when several splits of a match are possible
(``((a)|b)+``). Character classes and case folding are ASCII only, as in a database whose
ctype is C (the reference's).

On top: regexp_match / regexp_matches / regexp_split_to_table / regexp_split_to_array /
regexp_replace / regexp_count / regexp_instr / regexp_substr / regexp_like, substring(...
FROM pattern) and substring(... SIMILAR ... ESCAPE ...), SIMILAR TO and similar_to_escape,
and the SQL-standard overlay(). The binder's ``~`` operators compile with
:func:`compile_regex` too.
"""

from __future__ import annotations

import itertools
import math
import re
import string
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from percolator.server.sql import functions
from percolator.server.sql import types as T
from percolator.server.sql.errors import (
    INVALID_ESCAPE_SEQUENCE,
    INVALID_PARAMETER_VALUE,
    INVALID_REGULAR_EXPRESSION,
    UNDEFINED_FUNCTION,
    SqlError,
)
from percolator.server.sql.functions import FunctionImpl, register, string_or_unknown
from percolator.server.sql.types import SqlType, TypeId

# -- translation ---------------------------------------------------------------------------

_CLASSES = {
    "alpha": "a-zA-Z",
    "upper": "A-Z",
    "lower": "a-z",
    "digit": "0-9",
    "xdigit": "0-9A-Fa-f",
    "alnum": "0-9A-Za-z",
    "word": "0-9A-Za-z_",
    "space": " \\t\\n\\r\\f\\v",
    "blank": " \\t",
    "punct": "".join("\\" + c for c in string.punctuation),
    "cntrl": "\\x00-\\x1f\\x7f",
    "print": "\\x20-\\x7e",
    "graph": "\\x21-\\x7e",
}
_CHAR_ESCAPES = {
    "a": "\x07",
    "b": "\x08",  # a backspace in an ARE, not a word boundary
    "B": "\\",  # a synonym for backslash
    "e": "\x1b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
}
_CONSTRAINTS = {
    "A": r"\A",
    "Z": r"\Z",
    "m": r"\b(?=\w)",
    "M": r"\b(?<=\w)",
    "y": r"\b",
    "Y": r"\B",
}
_BOUND = re.compile(r"\{(\d+)(,(\d*))?\}")
_DUPMAX = 255  # regex.h's RE_DUP_MAX
_OPTION_LETTERS = frozenset("bceimnpqstwx")


def _bad(message: str) -> SqlError:
    return SqlError(INVALID_REGULAR_EXPRESSION, f"invalid regular expression: {message}")


@dataclass
class _Options:
    """Compile flags (regexp.c's parse_re_flags, in the order given: later ones win)."""

    icase: bool = False
    nlstop: bool = False  # '.' and [^...] do not match a newline
    nlanch: bool = False  # ^ and $ match at line breaks
    expanded: bool = False
    literal: bool = False
    basic: bool = False  # a POSIX BRE, not an ARE

    def apply(self, letter: str) -> bool:
        """Apply one option letter; False if it is not one."""
        if letter == "c":
            self.icase = False
        elif letter == "i":
            self.icase = True
        elif letter in "mn":
            self.nlstop = self.nlanch = True
        elif letter == "s":
            self.nlstop = self.nlanch = False
        elif letter == "p":
            self.nlstop, self.nlanch = True, False
        elif letter == "w":
            self.nlstop, self.nlanch = False, True
        elif letter == "x":
            self.expanded = True
        elif letter == "t":
            self.expanded = False
        elif letter == "q":
            self.literal = True
        elif letter == "e":
            self.basic = False  # an ERE: read as an ARE, of which it is nearly a subset
        elif letter == "b":
            self.basic = True
        else:
            return False
        return True


def parse_flags(flags: str) -> tuple[str, bool]:
    """The compile flags of a regexp function's ``flags`` argument and whether it holds the
    global flag 'g'; 22023 for a letter that is not an option."""
    for ch in flags:
        if ch != "g" and ch not in _OPTION_LETTERS:
            raise SqlError(INVALID_PARAMETER_VALUE, f'invalid regular expression option: "{ch}"')
    return flags.replace("g", ""), "g" in flags


def _no_global(fname: str, flags: str, hint: str | None = None) -> str:
    """``flags`` checked for a function that has no global mode."""
    cflags, glob = parse_flags(flags)
    if glob:
        raise SqlError(
            INVALID_PARAMETER_VALUE,
            f'{fname}() does not support the "global" option',
            hint=hint,
        )
    return cflags


def _lit(ch: str) -> str:
    """``ch`` as a literal in a Python pattern (also inside brackets)."""
    return re.escape(ch)


@dataclass
class _Translation:
    """A translated ARE and what :func:`compile_regex` needs to know about its shape."""

    pattern: str
    tokens: list[str] = field(default_factory=list)  # the pattern's pieces, as emitted
    end_sensitive: bool = False  # looks past a match's end ($, lookahead, word boundaries)
    alternations: list[list[int]] = field(default_factory=list)
    """Per alternation (|) with its branches: the token index where each branch starts."""
    top_alternation: bool = False  # a | outside parentheses
    first_greedy: bool | None = None  # the first quantifier with a greediness: is it greedy
    any_greedy: bool = False  # some quantifier is greedy

    @property
    def greedy(self) -> bool:
        """Whether the RE as a whole prefers the longest match (re_syntax.n: a top-level
        alternation is greedy, a branch is as greedy as its first quantifier that has a
        greediness, and one without any is taken as greedy)."""
        return self.top_alternation or self.first_greedy is not False


class _Translator:
    """One ARE into a Python pattern."""

    def __init__(self, pattern: str, opts: _Options) -> None:
        self.p = pattern
        self.opts = opts
        self.out: list[str] = []
        self.result = _Translation("")
        self.closed_groups = 0
        self.open: list[bool] = []  # per open parenthesis: whether it captures
        self.branches: list[list[int]] = [[0]]  # per open parenthesis and the top level

    def run(self) -> _Translation:
        p, n, i = self.p, len(self.p), 0
        while i < n:
            c = p[i]
            if self.opts.expanded and c in " \t\n\r\f\v":
                i += 1
            elif self.opts.expanded and c == "#":
                j = p.find("\n", i)
                i = n if j < 0 else j + 1
            elif c == "\\":
                i = self._escape(i + 1, in_bracket=False)
            elif p.startswith(("[[:<:]]", "[[:>:]]"), i):
                # The old spellings of \m and \M.
                self.out.append(_CONSTRAINTS["m" if p[i + 3] == "<" else "M"])
                self.result.end_sensitive = True
                i += 7
            elif c == "[":
                i = self._bracket(i + 1)
            elif c == ".":
                self.out.append("[^\\n]" if self.opts.nlstop else ".")
                i += 1
            elif c == "^":
                self.out.append("^")
                i += 1
            elif c == "$":
                self.out.append("$" if self.opts.nlanch else r"\Z")
                self.result.end_sensitive = True
                i += 1
            elif c == "(":
                i = self._open(i)
            elif c == ")":
                if self.open and self.open.pop():
                    self.closed_groups += 1
                if len(self.branches) > 1:
                    self._close_branches()
                self.out.append(")")
                i += 1
            elif c == "|":
                self.result.top_alternation |= not self.open
                self.out.append("|")
                self.branches[-1].append(len(self.out))
                i += 1
            elif c in "*+?":
                self.out.append(c)
                i = self._after_quantifier(i + 1)
            elif c == "{":
                i = self._brace(i)
            else:
                self.out.append(_lit(c))
                i += 1
        while self.branches:
            self._close_branches()
        self.result.pattern = "".join(self.out)
        self.result.tokens = self.out
        return self.result

    def _close_branches(self) -> None:
        starts = self.branches.pop()
        if len(starts) > 1:
            self.result.alternations.append(starts)

    def _after_quantifier(self, i: int, fixed: bool = False) -> int:
        """A quantifier's optional non-greedy '?' (``fixed``: a {m} bound, which has no
        greediness); a '+' after it is Python's possessive form, an error in an ARE."""
        lazy = i < len(self.p) and self.p[i] == "?"
        if lazy:
            self.out.append("?")
            i += 1
        if not fixed and self.result.first_greedy is None:
            self.result.first_greedy = not lazy
        self.result.any_greedy |= not fixed and not lazy
        if i < len(self.p) and self.p[i] == "+":
            raise _bad("quantifier operand invalid")
        return i

    def _brace(self, i: int) -> int:
        m = _BOUND.match(self.p, i)
        if m is not None:
            low = int(m.group(1))
            high = low if m.group(2) is None else int(m.group(3)) if m.group(3) else None
            if low > _DUPMAX or (high is not None and (high > _DUPMAX or high < low)):
                raise _bad("invalid repetition count(s)")
            self.out.append(m.group(0))
            return self._after_quantifier(m.end(), fixed=m.group(2) is None)
        if i + 1 < len(self.p) and self.p[i + 1].isdigit():
            raise _bad("invalid repetition count(s)")
        # A brace that does not start a bound is an ordinary character (Python would read
        # "{,2}" as a bound).
        self.out.append("\\{")
        return i + 1

    def _open(self, i: int) -> int:
        p = self.p
        if not p.startswith("(?", i):
            self.open.append(True)
            self.out.append("(")
            self.branches.append([len(self.out)])
            return i + 1
        for prefix in ("(?:", "(?=", "(?!", "(?<=", "(?<!"):
            if p.startswith(prefix, i):
                self.open.append(False)
                self.out.append(prefix)
                self.branches.append([len(self.out)])
                if prefix in ("(?=", "(?!"):
                    self.result.end_sensitive = True
                return i + len(prefix)
        if p.startswith("(?#", i):
            end = p.find(")", i)
            if end < 0:
                raise _bad("parentheses () not balanced")
            return end + 1
        # Embedded options are only allowed at the start (handled by compile_regex).
        raise _bad("quantifier operand invalid")

    def _escape(self, i: int, in_bracket: bool) -> int:
        """The escape whose letter is at ``i``; returns the index after it."""
        p, n = self.p, len(self.p)
        if i >= n:
            raise _bad("invalid escape \\ sequence")
        c = p[i]
        if c in _CHAR_ESCAPES:
            self.out.append(_lit(_CHAR_ESCAPES[c]))
            return i + 1
        if c in "dswDSW":
            self.out.append("\\" + c)
            return i + 1
        if c == "c":
            if i + 1 >= n:
                raise _bad("invalid escape \\ sequence")
            self.out.append(_lit(chr(ord(p[i + 1]) & 0x1F)))
            return i + 2
        if c in "xuU":
            j = i + 1
            limit = {"x": n, "u": i + 5, "U": i + 9}[c]
            while j < min(n, limit) and p[j] in string.hexdigits:
                j += 1
            if j == i + 1 or (c != "x" and j != limit):
                raise _bad("invalid escape \\ sequence")
            code = int(p[i + 1 : j], 16)
            if code > 0x10FFFF:
                raise _bad("invalid escape \\ sequence")
            self.out.append(_lit(chr(code)))
            return j
        if c == "0":
            j = i + 1
            while j < min(n, i + 3) and p[j] in "01234567":
                j += 1
            self.out.append(_lit(chr(int(p[i:j], 8))))
            return j
        if c.isdigit():
            if in_bracket:
                raise _bad("invalid escape \\ sequence")
            j = i
            while j < n and p[j].isdigit():
                j += 1
            digits = p[i:j]
            if int(digits) <= self.closed_groups:
                self.out.append(f"(?:\\{int(digits)})")
                return j
            if len(digits) in (2, 3) and all(d in "01234567" for d in digits):
                self.out.append(_lit(chr(int(digits, 8))))
                return j
            raise _bad("invalid backreference number")
        if c in _CONSTRAINTS:
            if in_bracket:
                raise _bad("invalid escape \\ sequence")
            self.out.append(_CONSTRAINTS[c])
            if c not in "A":
                self.result.end_sensitive = True
            return i + 1
        if c.isalnum():
            raise _bad("invalid escape \\ sequence")
        self.out.append(_lit(c))
        return i + 1

    def _bracket(self, i: int) -> int:
        """A bracket expression whose body starts at ``i``; returns the index after it."""
        p, n = self.p, len(self.p)
        self.out.append("[")
        negated = i < n and p[i] == "^"
        if negated:
            self.out.append("^")
            i += 1
        first = True
        while True:
            if i >= n:
                raise _bad("brackets [] not balanced")
            c = p[i]
            if c == "]" and not first:
                i += 1
                break
            first = False
            if c == "[" and i + 1 < n and p[i + 1] in ":.=":
                kind = p[i + 1]
                end = p.find(kind + "]", i + 2)
                if end < 0:
                    raise _bad("brackets [] not balanced")
                name = p[i + 2 : end]
                if kind == ":":
                    if name not in _CLASSES:
                        raise _bad("invalid character class")
                    self.out.append(_CLASSES[name])
                elif len(name) == 1:
                    self.out.append(_lit(name))
                else:
                    raise _bad("invalid collating element")
                i = end + 2
            elif c == "\\":
                i = self._escape(i + 1, in_bracket=True)
            else:
                self.out.append("-" if c == "-" else _lit(c))
                i += 1
        if negated and self.opts.nlstop:
            self.out.append("\\n")
        self.out.append("]")
        return i


def _bre_to_are(p: str) -> str:
    """A POSIX basic RE in ARE syntax: \\( \\) \\{ \\} group and bound, the bare ones and
    + ? | are literal, as are * at the start, ^ not at the start and $ not at the end;
    \\< \\> are word boundaries."""
    out: list[str] = []
    i, n = 0, len(p)
    at_start = True  # at the start of the RE or of a group: * is literal here
    while i < n:
        c = p[i]
        if c == "\\" and i + 1 < n:
            d = p[i + 1]
            out.append(d if d in "(){}" else {"<": "\\m", ">": "\\M"}.get(d, c + d))
            at_start = d == "("
            i += 2
            continue
        if c == "[":
            j = i + 1
            j += p[j : j + 1] == "^"
            j += p[j : j + 1] == "]"
            while j < n and p[j] != "]":
                if p[j] == "[" and p[j + 1 : j + 2] in (":", ".", "="):
                    k = p.find(p[j + 1] + "]", j + 2)
                    j = n if k < 0 else k + 2
                else:
                    j += 1
            out.append(p[i : j + 1])
            i = j + 1
            at_start = False
            continue
        if c in "(){}+?|" or (c == "*" and at_start) or (c == "^" and not at_start):
            out.append("\\" + c)
        elif c == "$" and not (i == n - 1 or p.startswith("\\)", i + 1)):
            out.append("\\$")
        else:
            out.append(c)
        at_start = c == "^" and at_start
        i += 1
    return "".join(out)


_PY_ERRORS = (
    ("missing )", "parentheses () not balanced"),
    ("unbalanced parenthesis", "parentheses () not balanced"),
    ("unterminated character set", "brackets [] not balanced"),
    ("nothing to repeat", "quantifier operand invalid"),
    ("multiple repeat", "quantifier operand invalid"),
    ("bad escape", "invalid escape \\ sequence"),
    ("bad character range", "invalid character range"),
    ("invalid group reference", "invalid backreference number"),
    ("cannot refer to an open group", "invalid backreference number"),
)

# How many end positions before Python's match the search for a shorter one tries: bounds
# the cost on long strings.
_SHORTEST_WINDOW = 1000
# The most branch combinations the search for the longest match tries.
_MAX_VARIANTS = 16


@dataclass(frozen=True)
class PgRegex:
    """A compiled Postgres regex. Among the matches that start leftmost an ARE takes the
    longest (the shortest if the RE is non-greedy), where Python takes the first its
    backtracking finds. :meth:`search` looks for the ARE's choice: ``variants`` are the
    pattern with each combination of alternation branches forced (the longest of their
    matches wins; at equal length the one whose earlier groups are longer, as an ARE's
    greedy subexpressions prefer), and ``shortest`` tries earlier end positions (only set for
    patterns that look nowhere past a match's end, for which that is exact)."""

    regex: re.Pattern[str]
    variants: tuple[re.Pattern[str], ...] = ()
    shortest: bool = False

    @property
    def groups(self) -> int:
        return self.regex.groups

    def search(self, s: str, pos: int = 0) -> re.Match[str] | None:
        """The leftmost match at or after ``pos``."""
        m = self.regex.search(s, pos)
        if m is None:
            return m
        start = m.start()
        if self.variants:
            best, best_key = m, _preference(m)
            for variant in self.variants:
                other = variant.match(s, start)
                if other is not None and (key := _preference(other)) > best_key:
                    best, best_key = other, key
            return best
        if self.shortest:
            for end in range(start, min(m.end(), start + _SHORTEST_WINDOW)):
                other = self.regex.fullmatch(s, start, end)
                if other is not None:
                    return other
        return m

    def matches(self, s: str, start: int = 0, glob: bool = True) -> Iterator[re.Match[str]]:
        """Every match from ``start`` on (the first only unless ``glob``), as regexp.c's
        loops find them: after an empty match the search goes on one character later."""
        pos = start
        while pos <= len(s):
            m = self.search(s, pos)
            if m is None:
                return
            yield m
            if not glob:
                return
            pos = m.end() + (1 if m.start() == m.end() else 0)


def _preference(m: re.Match[str]) -> tuple[int, tuple[int, ...]]:
    """How a greedy ARE ranks matches at one start: longer first, then by the lengths of
    the groups in order (-1: did not take part)."""
    spans = (m.span(k) for k in range(1, (m.re.groups or 0) + 1))
    return m.end(), tuple(e - b if b >= 0 else -1 for b, e in spans)


def _branch_variants(t: _Translation, flags: int) -> tuple[re.Pattern[str], ...]:
    """The pattern once per combination of alternation branches, the others made to fail
    with ``(?!)`` (so the group numbers stay); none if there are too many combinations."""
    if math.prod(len(starts) for starts in t.alternations) > _MAX_VARIANTS:
        return ()
    variants = []
    for choice in itertools.product(*(range(len(starts)) for starts in t.alternations)):
        blocked = Counter(
            start
            for starts, chosen in zip(t.alternations, choice, strict=True)
            for k, start in enumerate(starts)
            if k != chosen
        )
        pieces = ["(?!)" * blocked[k] + token for k, token in enumerate(t.tokens)]
        pieces.append("(?!)" * blocked[len(t.tokens)])
        variants.append(re.compile("".join(pieces), flags))
    return tuple(variants)


_CACHE: dict[tuple[str, str], PgRegex] = {}


def compile_regex(pattern: str, flags: str = "") -> PgRegex:
    """``pattern`` (an ARE) compiled with the compile flags ``flags`` (see
    :func:`parse_flags`); 2201B if it is not a valid regular expression."""
    key = (pattern, flags)
    found = _CACHE.get(key)
    if found is not None:
        return found
    opts = _Options()
    for letter in flags:
        opts.apply(letter)
    body = pattern
    # Directors and embedded options (re_syntax.n "Metasyntax"), only at the start of an ARE.
    if opts.basic or opts.literal:
        pass
    elif body.startswith("***="):
        body, opts.literal = body[4:], True
    elif body.startswith("***:"):
        body = body[4:]
    if not opts.literal and not opts.basic:
        m = re.match(r"\(\?([a-zA-Z]*)\)", body)
        if m is not None and m.group(1):
            for letter in m.group(1):
                if not opts.apply(letter):
                    raise _bad("invalid embedded option")
            body = body[m.end() :]
    if opts.literal:
        translated = _Translation(re.escape(body))
    elif opts.basic:
        translated = _Translator(_bre_to_are(body), opts).run()
    else:
        translated = _Translator(body, opts).run()
    py_flags = re.ASCII | re.DOTALL
    if opts.icase:
        py_flags |= re.IGNORECASE
    if opts.nlanch:
        py_flags |= re.MULTILINE
    try:
        regex = re.compile(translated.pattern, py_flags)
    except re.error as err:
        text = str(err)
        message = next((pg for py, pg in _PY_ERRORS if text.startswith(py)), text)
        raise _bad(message) from None
    if translated.greedy:
        result = PgRegex(regex, variants=_branch_variants(translated, py_flags))
    else:
        # A lazy RE whose greedy parts or alternatives could make Python's match longer.
        shortest = translated.any_greedy or bool(translated.alternations)
        result = PgRegex(regex, shortest=shortest and not translated.end_sensitive)
    if len(_CACHE) > 2000:
        _CACHE.clear()
    _CACHE[key] = result
    return result


# -- the regexp functions ------------------------------------------------------------------


def _groups(m: re.Match[str], groups: int) -> list[str | None]:
    """regexp_match's array: the capture groups (NULL where one did not take part), or the
    whole match when the pattern has none."""
    if groups == 0:
        return [m.group(0)]
    return [m.group(k) for k in range(1, groups + 1)]


def _regexp_match(s: str, pattern: str, flags: str = "") -> list[str | None] | None:
    cflags = _no_global("regexp_match", flags, "Use the regexp_matches function instead.")
    rx = compile_regex(pattern, cflags)
    m = rx.search(s)
    return None if m is None else _groups(m, rx.groups)


def _regexp_matches(s: str, pattern: str, flags: str = "") -> Iterator[tuple[object, ...]]:
    cflags, glob = parse_flags(flags)
    rx = compile_regex(pattern, cflags)
    for m in rx.matches(s, 0, glob):
        yield (_groups(m, rx.groups),)


def _split(s: str, pattern: str, flags: str, fname: str) -> list[str]:
    """regexp_split_to_*: the text between matches, ignoring the degenerate ones (empty
    matches at the start or end of the string or right after another match)."""
    rx = compile_regex(pattern, _no_global(fname, flags))
    pieces: list[str] = []
    prev_end = 0  # the end of the last match, kept or not
    piece_start = 0
    for m in rx.matches(s):
        if m.start() < len(s) and m.end() > prev_end:
            pieces.append(s[piece_start : m.start()])
            piece_start = m.end()
        prev_end = m.end()
    pieces.append(s[piece_start:])
    return pieces


def _split_to_table(s: str, pattern: str, flags: str = "") -> Iterator[tuple[object, ...]]:
    for piece in _split(s, pattern, flags, "regexp_split_to_table"):
        yield (piece,)


def _split_to_array(s: str, pattern: str, flags: str = "") -> list[str]:
    return _split(s, pattern, flags, "regexp_split_to_array")


def _check_positive(name: str, value: int, minimum: int = 1) -> None:
    if value < minimum:
        raise SqlError(INVALID_PARAMETER_VALUE, f'invalid value for parameter "{name}": {value}')


def _nth_match(
    s: str, pattern: str, start: int, n: int, cflags: str
) -> tuple[re.Match[str] | None, int]:
    """The ``n``th match from 1-based ``start`` on, and the pattern's group count."""
    rx = compile_regex(pattern, cflags)
    if start - 1 > len(s):
        return None, rx.groups
    for k, m in enumerate(rx.matches(s, start - 1), 1):
        if k == n:
            return m, rx.groups
    return None, rx.groups


def _subexpr(subexpr: int, groups: int) -> int | None:
    """The match group a ``subexpr`` argument picks (None: none). A pattern without capture
    groups counts as having one, the whole match (regexp.c's npatterns)."""
    if groups == 0:
        return 0 if subexpr <= 1 else None
    return subexpr if subexpr <= groups else None


def _regexp_count(s: str, pattern: str, start: int = 1, flags: str = "") -> int:
    _check_positive("start", start)
    rx = compile_regex(pattern, _no_global("regexp_count", flags))
    if start - 1 > len(s):
        return 0
    return sum(1 for _ in rx.matches(s, start - 1))


def _regexp_instr(
    s: str,
    pattern: str,
    start: int = 1,
    n: int = 1,
    endoption: int = 0,
    flags: str = "",
    subexpr: int = 0,
) -> int:
    _check_positive("start", start)
    _check_positive("n", n)
    if endoption not in (0, 1):
        raise SqlError(
            INVALID_PARAMETER_VALUE, f'invalid value for parameter "endoption": {endoption}'
        )
    _check_positive("subexpr", subexpr, 0)
    m, groups = _nth_match(s, pattern, start, n, _no_global("regexp_instr", flags))
    k = _subexpr(subexpr, groups)
    if m is None or k is None or m.start(k) < 0:
        return 0
    return (m.end(k) if endoption else m.start(k)) + 1


def _regexp_substr(
    s: str, pattern: str, start: int = 1, n: int = 1, flags: str = "", subexpr: int = 0
) -> str | None:
    _check_positive("start", start)
    _check_positive("n", n)
    _check_positive("subexpr", subexpr, 0)
    m, groups = _nth_match(s, pattern, start, n, _no_global("regexp_substr", flags))
    k = _subexpr(subexpr, groups)
    return None if m is None or k is None else m.group(k)


def _regexp_like(s: str, pattern: str, flags: str = "") -> bool:
    rx = compile_regex(pattern, _no_global("regexp_like", flags))
    return rx.search(s) is not None


def _replacement(repl: str) -> list[str | int]:
    """A replacement string as literal pieces and group numbers: \\1 .. \\9 a group, \\& the
    whole match, \\\\ a backslash; any other backslash stays as written."""
    parts: list[str | int] = []
    literal: list[str] = []
    i = 0
    while i < len(repl):
        ch = repl[i]
        nxt = repl[i + 1] if i + 1 < len(repl) else ""
        if ch == "\\" and (nxt in "123456789&") and nxt:
            parts.append("".join(literal))
            literal = []
            parts.append(0 if nxt == "&" else int(nxt))
            i += 2
        elif ch == "\\" and nxt == "\\":
            literal.append("\\")
            i += 2
        else:
            literal.append(ch)
            i += 1
    parts.append("".join(literal))
    return parts


def _expand(m: re.Match[str], parts: list[str | int], groups: int) -> str:
    out = []
    for part in parts:
        if isinstance(part, str):
            out.append(part)
        elif part <= groups:
            out.append(m.group(part) or "")
    return "".join(out)


def _replace(s: str, rx: PgRegex, repl: str, start: int, n: int, glob: bool) -> str:
    """regexp.c's replace_text_regexp: replace the ``n``th match from ``start`` on (every
    one from there if ``n`` is 0), or the first (every one if ``glob``) when ``n`` is 1."""
    parts = _replacement(repl)
    out: list[str] = []
    data_pos = 0
    for k, m in enumerate(rx.matches(s, start), 1):
        if n > 0 and k < n:
            continue
        out.append(s[data_pos : m.start()])
        out.append(_expand(m, parts, rx.groups))
        data_pos = m.end()
        if not glob:
            break
    out.append(s[data_pos:])
    return "".join(out)


def _regexp_replace(s: str, pattern: str, repl: str, flags: str = "") -> str:
    cflags, glob = parse_flags(flags)
    return _replace(s, compile_regex(pattern, cflags), repl, 0, 1, glob)


def _regexp_replace_at(
    s: str, pattern: str, repl: str, start: int, n: int | None = None, flags: str = ""
) -> str:
    """regexp_replace(source, pattern, replacement, start [, N [, flags]]): a given N decides
    between the Nth match and (N = 0) every one, whatever the flags say."""
    _check_positive("start", start)
    if n is not None:
        _check_positive("n", n, 0)
    cflags, glob = parse_flags(flags)
    if n is not None:
        glob = n == 0
    if start - 1 > len(s):
        return s
    return _replace(s, compile_regex(pattern, cflags), repl, start - 1, 1 if n is None else n, glob)


def _substring_regex(s: str, pattern: str) -> str | None:
    """substring(text FROM pattern): the first match, or its first group if it has one."""
    rx = compile_regex(pattern)
    m = rx.search(s)
    if m is None:
        return None
    return m.group(1) if rx.groups else m.group(0)


# -- SIMILAR TO ----------------------------------------------------------------------------


def _escape_char(escape: str | None) -> str | None:
    """The escape character of an ESCAPE clause (None: none; default backslash)."""
    if escape is None:
        return "\\"
    if len(escape) > 1:
        raise SqlError(
            INVALID_ESCAPE_SEQUENCE,
            "invalid escape string",
            hint="Escape string must be empty or one character.",
        )
    return escape or None


def _similar_parts(pattern: str, escape: str | None) -> list[str]:
    """A SIMILAR TO pattern as regexp.c's similar_escape_internal converts it, split at the
    escape-double-quote separators into up to three ARE parts."""
    esc = _escape_char(escape)
    parts: list[list[str]] = [[]]
    r = parts[0]
    after_escape = False
    in_class = False
    for ch in pattern:
        if after_escape:
            if ch == '"' and not in_class:
                if len(parts) == 3:
                    raise SqlError(
                        "2200C",
                        "SQL regular expression may not contain more than two"
                        " escape-double-quote separators",
                    )
                parts.append([])
                r = parts[-1]
            else:
                r.append("\\" + ch)
            after_escape = False
        elif esc is not None and ch == esc:
            after_escape = True
        elif in_class:
            r.append("\\\\" if ch == "\\" else ch)
            if ch == "]":
                in_class = False
        elif ch == "[":
            r.append(ch)
            in_class = True
        elif ch == "%":
            r.append(".*")
        elif ch == "_":
            r.append(".")
        elif ch == "(":
            r.append("(?:")
        elif ch in "\\.^$":
            r.append("\\" + ch)
        else:
            r.append(ch)
    return ["".join(p) for p in parts]


def similar_to_escape(pattern: str, escape: str | None = None) -> str:
    """The ARE a SIMILAR TO pattern means (similar_to_escape())."""
    parts = _similar_parts(pattern, escape)
    seps = [")", "){1,1}?(", "){1,1}(?:"]
    out = ["^(?:", parts[0]]
    for k, part in enumerate(parts[1:], 1):
        out.append(seps[k])
        out.append(part)
    out.append(")$")
    return "".join(out)


def _similar(s: str, pattern: str, escape: str | None = None) -> bool:
    return compile_regex(similar_to_escape(pattern, escape)).regex.search(s) is not None


def _substring_similar(s: str, pattern: str, escape: str) -> str | None:
    """substring(s SIMILAR pattern ESCAPE escape): the part between the escape-double-quotes
    of a whole-string match, with the part before it as short as possible and the part
    itself as long as possible (Postgres makes the first part non-greedy; Python's
    quantifiers cannot be told so from outside, so the split point is searched for)."""
    parts = _similar_parts(pattern, escape)
    if len(parts) == 1:
        rx = compile_regex(f"^(?:{parts[0]})$")
        m = rx.search(s)
        return None if m is None else m.group(0)
    first = compile_regex(f"^(?:{parts[0]})$").regex
    rest = compile_regex(f"({parts[1]})(?:{parts[2] if len(parts) == 3 else ''})$").regex
    for i in range(len(s) + 1):
        if first.fullmatch(s, 0, i) is None:
            continue
        m = rest.match(s, i)
        if m is not None:
            return m.group(1)
    return None


def regex_operand(binder: Any, arg: Any, op: str) -> Any:
    """The left operand of ``~`` / ``~*`` / SIMILAR TO as text; a character(n) keeps its
    padding (Postgres has the operators for bpchar too), other types are 42883."""
    t = arg.type
    if t.id is TypeId.BPCHAR and not t.array:
        return arg
    if not _fits(t, T.TEXT):
        raise SqlError(
            UNDEFINED_FUNCTION,
            f"operator does not exist: {t} {op} text",
            hint="No operator matches the given name and argument types. You might need to"
            " add explicit type casts.",
        )
    return binder.coerce(arg, T.TEXT)


def bind_similar(binder: Any, node: Any, scope: Any, escape: Any = None) -> Any:
    """``x SIMILAR TO pattern [ESCAPE e]`` (sqlglot's SimilarTo node; ``escape``: the
    ESCAPE clause's node), bound by the expression binder."""
    from percolator.server.sql.bound import BCall, BConst

    arg = regex_operand(binder, binder.bind(node.this, scope), "~")
    args = [binder.coerce(binder.bind(node.expression, scope), T.TEXT)]
    if escape is not None:
        args.append(binder.coerce(binder.bind(escape, scope), T.TEXT))
    if all(isinstance(a, BConst) and a.value is not None for a in args):
        regex = compile_regex(similar_to_escape(*(str(a.value) for a in args))).regex
        return BCall(T.BOOL, "similar", lambda s: regex.search(s) is not None, [arg])
    return BCall(T.BOOL, "similar", _similar, [arg, *args])


# -- overlay -------------------------------------------------------------------------------


def _overlay(s: Any, repl: Any, start: int, count: int | None = None) -> Any:
    """overlay(s PLACING repl FROM start [FOR count]): s's first start-1 characters (bytes),
    repl, then s from start+count on (text_overlay / bytea_overlay)."""
    if count is None:
        count = len(repl)
    if start <= 0:
        raise SqlError("22011", "negative substring length not allowed")
    tail = start + count
    if tail < -(1 << 31) or tail >= 1 << 31:
        raise SqlError("22003", "integer out of range")
    return s[: start - 1] + repl + s[max(tail, 1) - 1 :]


@register("overlay")
def _overlay_resolver(args: Sequence[SqlType]) -> FunctionImpl | None:
    if len(args) not in (3, 4) or not all(_fits(a, T.INT4) for a in args[2:]):
        return None
    ints = (T.INT4,) * (len(args) - 2)
    if args[0].id is TypeId.BYTEA and not args[0].array:
        return FunctionImpl(_overlay, T.BYTEA, args=(T.BYTEA, T.BYTEA, *ints))
    if _fits(args[0], T.TEXT) and _fits(args[1], T.TEXT):
        return FunctionImpl(_overlay, T.TEXT, args=(T.TEXT, T.TEXT, *ints))
    return None


# -- registration --------------------------------------------------------------------------


def _fits(t: SqlType, param: SqlType) -> bool:
    """Whether an argument of type ``t`` can be passed for a text or integer parameter."""
    if t.array:
        return False
    if param.id is TypeId.TEXT:
        return string_or_unknown(t)
    return t.id in (TypeId.INT2, TypeId.INT4, TypeId.UNKNOWN)


_TEXT, _INT = T.TEXT, T.INT4


def _overloads(
    name: str, result: SqlType, *signatures: tuple[Callable[..., object], tuple[SqlType, ...]]
) -> None:
    """Register ``name`` with these (implementation, parameter types) overloads: the first
    whose parameters fit the arguments is taken."""

    def resolver(args: Sequence[SqlType]) -> FunctionImpl | None:
        for fn, params in signatures:
            if len(params) == len(args) and all(map(_fits, args, params)):
                return FunctionImpl(fn, result, args=params)
        return None

    register(name)(resolver)


_T2, _T3 = (_TEXT, _TEXT), (_TEXT, _TEXT, _TEXT)
_overloads("regexp_match", T.TEXT_ARRAY, (_regexp_match, _T2), (_regexp_match, _T3))
_overloads("regexp_split_to_array", T.TEXT_ARRAY, (_split_to_array, _T2), (_split_to_array, _T3))
_overloads("regexp_like", T.BOOL, (_regexp_like, _T2), (_regexp_like, _T3))
_overloads(
    "regexp_count",
    T.INT4,
    (_regexp_count, _T2),
    (_regexp_count, (*_T2, _INT)),
    (_regexp_count, (*_T2, _INT, _TEXT)),
)
_overloads(
    "regexp_instr",
    T.INT4,
    *((_regexp_instr, (*_T2, *params)) for params in (
        (), (_INT,), (_INT, _INT), (_INT, _INT, _INT), (_INT, _INT, _INT, _TEXT),
        (_INT, _INT, _INT, _TEXT, _INT),
    )),
)  # fmt: skip
_overloads(
    "regexp_substr",
    T.TEXT,
    *((_regexp_substr, (*_T2, *params)) for params in (
        (), (_INT,), (_INT, _INT), (_INT, _INT, _TEXT), (_INT, _INT, _TEXT, _INT),
    )),
)  # fmt: skip
_overloads(
    "regexp_replace",
    T.TEXT,
    (_regexp_replace, _T3),
    # An untyped fourth argument is the flags (text is the preferred type).
    (_regexp_replace, (*_T3, _TEXT)),
    (_regexp_replace_at, (*_T3, _INT)),
    (_regexp_replace_at, (*_T3, _INT, _INT)),
    (_regexp_replace_at, (*_T3, _INT, _INT, _TEXT)),
)
_overloads("similar_to_escape", T.TEXT, (similar_to_escape, (_TEXT,)), (similar_to_escape, _T2))


@register("similar_escape")
def _similar_escape(args: Sequence[SqlType]) -> FunctionImpl | None:
    """The pre-13 spelling, which is not strict: a NULL escape means the default one."""
    if len(args) != 2 or not all(_fits(a, _TEXT) for a in args):
        return None

    def call(pattern: str | None, escape: str | None) -> str | None:
        return None if pattern is None else similar_to_escape(pattern, escape)

    return FunctionImpl(call, T.TEXT, strict=False, args=_T2)


def _substring(args: Sequence[SqlType]) -> FunctionImpl | None:
    """substring(text, pattern) (a regex) and substring(text, pattern, escape) (SIMILAR); an
    untyped second and third argument make it the SIMILAR form, as in Postgres."""
    if len(args) not in (2, 3) or not all(_fits(a, _TEXT) for a in args):
        return None
    if len(args) == 2:
        return FunctionImpl(_substring_regex, T.TEXT, args=_T2)
    return FunctionImpl(_substring_similar, T.TEXT, args=_T3)


# Ahead of substring(text, int [, int]), which would take untyped arguments as integers.
functions._REGISTRY["substring"].insert(0, _substring)


# -- set-returning functions ---------------------------------------------------------------

_SRFS: dict[str, tuple[Callable[..., Iterator[tuple[object, ...]]], SqlType]] = {
    "regexp_matches": (_regexp_matches, T.TEXT_ARRAY),
    "regexp_split_to_table": (_split_to_table, T.TEXT),
}
SET_FUNCTION_NAMES = frozenset(_SRFS)
"""The regex set-returning functions (the binder routes these names to set_functions)."""


def resolve_set_function(name: str, args: list[Any], binder: Any) -> Any:
    """A ``set_functions.SetFunctionImpl`` for regexp_matches / regexp_split_to_table, or
    None."""
    from percolator.server.sql.set_functions import SetFunctionImpl

    found = _SRFS.get(name)
    if found is None or len(args) not in (2, 3) or not all(_fits(a.type, _TEXT) for a in args):
        return None
    fn, t = found
    return SetFunctionImpl(fn, [t], [binder.coerce(a, _TEXT) for a in args])
