"""Utility statements, recognised by keyword before sqlglot sees anything.

sqlglot mis-parses several of these (``DEALLOCATE ALL`` becomes an alias, ``SAVEPOINT x``
too, ``BEGIN READ ONLY`` fails), and all of them are simple enough to read with a tokenizer.
:func:`parse_utility` returns a statement dataclass, or None when the text is for sqlglot.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

from percolator.server.sql import (
    comments,
    database_ddl,
    enums,
    function_ddl,
    schemas,
    sequence_ddl,
    trigger_ddl,
)
from percolator.server.sql.errors import (
    FEATURE_NOT_SUPPORTED,
    INVALID_PARAMETER_VALUE,
    SYNTAX_ERROR,
    SqlError,
    unsupported,
)

_TOKEN = re.compile(
    r"""(?:\s|--[^\n]*|/\*[\s\S]*?\*/)*(?:
        (?P<str>[eE]'(?:[^'\\]|\\[\s\S]|'')*'|'(?:[^']|'')*')
      | (?P<dollar>\$(?P<tag>(?:[A-Za-z_][A-Za-z_0-9]*)?)\$[\s\S]*?\$(?P=tag)\$)
      | (?P<ident>"(?:[^"]|"")*")
      | (?P<num>-?\d+(?:\.\d+)?)
      | (?P<word>[A-Za-z_][A-Za-z_0-9$.]*)
      | (?P<punct>[(),=*;:\-+/.\[\]]|\S)
    )""",
    re.VERBOSE,
)


@dataclass(frozen=True)
class Token:
    kind: str
    text: str
    pos: int

    @property
    def upper(self) -> str:
        return self.text.upper() if self.kind == "word" else self.text

    @property
    def value(self) -> str:
        """The token as a name or string value (quotes removed, case folded for words)."""
        if self.kind == "str":
            if self.text[0] in "eE":
                return _e_string(self.text[2:-1].replace("''", "'"))
            return self.text[1:-1].replace("''", "'")
        if self.kind == "ident":
            return self.text[1:-1].replace('""', '"')
        if self.kind == "dollar":
            tag_end = self.text.index("$", 1) + 1
            return self.text[tag_end : len(self.text) - tag_end]
        if self.kind == "word":
            return self.text.lower()
        return self.text


_E_ESCAPE = re.compile(
    r"\\(?:([0-7]{1,3})|x([0-9A-Fa-f]{1,2})|u([0-9A-Fa-f]{4})|U([0-9A-Fa-f]{8})|([\s\S]))"
)
_SIMPLE_ESCAPES = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def _e_string(body: str) -> str:
    r"""The value of an ``E'...'`` string's body, its backslash escapes decoded as Postgres
    reads them (``E'\t'`` is the tab of ``DELIMITER E'\t'``; octal, ``\x``, ``\u``, ``\U``)."""

    def one(m: re.Match[str]) -> str:
        octal, hex2, u4, u8, other = m.groups()
        if other is not None:
            return _SIMPLE_ESCAPES.get(other, other)
        digits = octal or hex2 or u4 or u8
        return chr(int(digits, 8 if octal else 16))

    return _E_ESCAPE.sub(one, body)


def tokenize(sql: str) -> list[Token]:
    tokens = []
    pos = 0
    while pos < len(sql):
        m = _TOKEN.match(sql, pos)
        if m is None or m.end() == pos:
            break
        kind = m.lastgroup or "punct"  # the outermost group: "dollar", not its "tag"
        tokens.append(Token(kind, m.group(kind), m.start(kind)))
        pos = m.end()
    return tokens


class IsolationLevel(Enum):
    READ_UNCOMMITTED = "read uncommitted"
    READ_COMMITTED = "read committed"
    REPEATABLE_READ = "repeatable read"
    SERIALIZABLE = "serializable"


@dataclass(frozen=True)
class TransactionModes:
    isolation: IsolationLevel | None = None
    read_only: bool | None = None
    deferrable: bool | None = None


@dataclass(frozen=True)
class Begin:
    modes: TransactionModes = TransactionModes()


@dataclass(frozen=True)
class Commit:
    pass


@dataclass(frozen=True)
class Rollback:
    pass


@dataclass(frozen=True)
class PrepareTransaction:
    """PREPARE TRANSACTION: refused (no two-phase commit from the client), after ending the
    transaction block as Postgres does when a prepare fails, so the session is idle again."""

    gid: str


@dataclass(frozen=True)
class Savepoint:
    name: str


@dataclass(frozen=True)
class ReleaseSavepoint:
    name: str


@dataclass(frozen=True)
class RollbackToSavepoint:
    name: str


@dataclass(frozen=True)
class SetVariable:
    name: str
    value: str | None
    """None for DEFAULT."""
    local: bool = False


@dataclass(frozen=True)
class SetTransaction:
    modes: TransactionModes
    session: bool
    """SET SESSION CHARACTERISTICS AS TRANSACTION (True) or SET TRANSACTION (False)."""


@dataclass(frozen=True)
class Show:
    name: str


@dataclass(frozen=True)
class Reset:
    name: str
    """``all`` for RESET ALL."""


@dataclass(frozen=True)
class Deallocate:
    name: str | None
    """None for ALL."""


@dataclass(frozen=True)
class NoOp:
    """Accepted and ignored (VACUUM, ANALYZE, CHECKPOINT, DISCARD, UNLISTEN, GRANT, ...)."""

    tag: str
    notice: str | None = None


@dataclass(frozen=True)
class RoleOptions:
    password: str | None = None
    password_null: bool = False
    superuser: bool | None = None
    login: bool | None = None


@dataclass(frozen=True)
class CreateRole:
    name: str
    options: RoleOptions
    is_user: bool


@dataclass(frozen=True)
class AlterRole:
    name: str
    options: RoleOptions
    rename_to: str | None = None


@dataclass(frozen=True)
class DropRole:
    names: tuple[str, ...]
    if_exists: bool


@dataclass(frozen=True)
class CopyStatement:
    table: str | None
    columns: tuple[str, ...] | None
    query: str | None
    """For ``COPY (query) TO STDOUT``: the query text."""
    direction_in: bool
    format: str = "text"
    delimiter: str | None = None
    null: str | None = None
    header: bool = False
    quote: str = '"'
    escape: str | None = None
    options: dict[str, str] = field(default_factory=dict)
    header_match: bool = False
    """``HEADER MATCH`` (COPY FROM): the header line must name the columns in order."""
    force_quote: tuple[str, ...] | None = None
    """CSV COPY TO: columns whose non-null values are always quoted; ``("*",)`` for all."""
    force_not_null: tuple[str, ...] = ()
    force_null: tuple[str, ...] = ()
    encoding: str | None = None
    """The data's encoding as a Python codec name (None: the client's, UTF-8)."""


@dataclass(frozen=True)
class CreateObserver:
    """``CREATE OBSERVER name ON table (column, ...) [WEAK] AS $$body$$ | EXECUTE 'target'``."""

    name: str
    table: str
    columns: tuple[str, ...]
    weak: bool
    body: str | None
    body_offset: int
    """0-based position of the body in the statement text (for error positions)."""
    target: str | None


@dataclass(frozen=True)
class DropObserver:
    name: str
    if_exists: bool


class ObserverAction(Enum):
    PAUSE = "pause"
    RESUME = "resume"
    RETRY_PARKED = "retry parked"


@dataclass(frozen=True)
class AlterObserver:
    name: str
    action: ObserverAction


@dataclass(frozen=True)
class Explain:
    statement: str
    offset: int
    analyze: bool = False


@dataclass(frozen=True)
class DeclareCursor:
    """``DECLARE name [BINARY] [[NO] SCROLL] CURSOR [WITH[OUT] HOLD] FOR query``."""

    name: str
    text: str
    """The whole statement (``pg_cursors.statement``)."""
    query: str
    offset: int
    """0-based position of the query in the statement text (for error positions)."""
    scroll: bool
    hold: bool
    binary: bool


class Motion(Enum):
    """Where a FETCH or MOVE goes; every direction keyword reduces to one of these."""

    FORWARD = "forward"
    BACKWARD = "backward"
    ABSOLUTE = "absolute"
    RELATIVE = "relative"


@dataclass(frozen=True)
class FetchCursor:
    """``FETCH``/``MOVE [direction] [FROM | IN] name``."""

    name: str
    motion: Motion
    count: int | None
    """Rows for FORWARD/BACKWARD (None: ALL); the target for ABSOLUTE/RELATIVE."""
    move: bool


@dataclass(frozen=True)
class PrepareStatement:
    """``PREPARE name [(type, ...)] AS statement``."""

    name: str
    types: tuple[str, ...]
    statement: str
    offset: int
    """0-based position of the statement in the text (for error positions)."""


@dataclass(frozen=True)
class ExecuteStatement:
    """``EXECUTE name [(argument, ...)]``."""

    name: str
    arguments: str | None
    """The parenthesized argument list as written, or None."""
    offset: int


@dataclass(frozen=True)
class Listen:
    channel: str


@dataclass(frozen=True)
class Unlisten:
    channel: str | None
    """None for UNLISTEN *."""


@dataclass(frozen=True)
class Notify:
    channel: str
    payload: str


@dataclass(frozen=True)
class SetConstraints:
    """``SET CONSTRAINTS {ALL | name, ...} {DEFERRED | IMMEDIATE}``."""

    names: tuple[str, ...] | None
    """None for ALL."""
    deferred: bool


@dataclass(frozen=True)
class CloseCursor:
    name: str | None
    """None for CLOSE ALL."""


@dataclass(frozen=True)
class DoBlock:
    """``DO [LANGUAGE name] code [LANGUAGE name]``: an anonymous code block (server/plpgsql)."""

    body: str
    body_offset: int
    """0-based position of the body's first character in the statement text."""
    language: str = "plpgsql"


UtilityStatement = (
    Begin
    | Commit
    | Rollback
    | PrepareTransaction
    | Savepoint
    | ReleaseSavepoint
    | RollbackToSavepoint
    | SetVariable
    | SetTransaction
    | Show
    | Reset
    | Deallocate
    | NoOp
    | CreateRole
    | AlterRole
    | DropRole
    | CopyStatement
    | Explain
    | CreateObserver
    | DropObserver
    | AlterObserver
    | DeclareCursor
    | schemas.SchemaStatement
    | FetchCursor
    | CloseCursor
    | SetConstraints
    | Listen
    | Unlisten
    | Notify
    | sequence_ddl.CreateSequence
    | function_ddl.CreateFunction
    | function_ddl.DropFunction
    | function_ddl.Call
    | trigger_ddl.CreateTrigger
    | trigger_ddl.DropTrigger
    | trigger_ddl.EnableTrigger
    | sequence_ddl.AlterSequence
    | sequence_ddl.DropSequence
    | enums.CreateEnum
    | enums.AlterEnum
    | enums.DropType
    | PrepareStatement
    | ExecuteStatement
    | comments.CommentOn
    | database_ddl.CreateDatabase
    | database_ddl.DropDatabase
)


class TokenReader:
    """The tokens of a statement (or of a piece of one), read left to right."""

    def __init__(self, sql: str, tokens: list[Token] | None = None) -> None:
        """``tokens``: a piece of ``sql``'s (default: all of them)."""
        self.sql = sql
        self.tokens = tokenize(sql) if tokens is None else tokens
        self.i = 0

    def peek(self, k: int = 0) -> Token | None:
        j = self.i + k
        return self.tokens[j] if j < len(self.tokens) else None

    def at(self, *words: str) -> bool:
        for k, w in enumerate(words):
            t = self.peek(k)
            if t is None or t.upper != w:
                return False
        return True

    def accept(self, *words: str) -> bool:
        if self.at(*words):
            self.i += len(words)
            return True
        return False

    def expect(self, *words: str) -> None:
        if not self.accept(*words):
            self.error(f"expected {' '.join(words)}")

    def next(self) -> Token:
        t = self.peek()
        if t is None:
            self.error("unexpected end of statement")
        self.i += 1
        return t  # type: ignore[return-value]

    def name(self) -> str:
        t = self.next()
        if t.kind not in ("word", "ident"):
            self.error(f'syntax error at or near "{t.text}"', t)
        return t.value

    def done(self) -> bool:
        return self.peek() is None

    def public_name(self) -> str:
        """A name, possibly qualified: its catalog key if qualified (``public.x`` is ``x``,
        ``s.x`` stays; server/sql/schemas.py), else as written (resolved when run)."""
        name = self.name()
        if "." in name:
            schema, _, name = name.rpartition(".")
            return schemas.key(schema, name)
        return name

    def drop_list(self, read_name: Callable[[], str]) -> tuple[list[str], bool, bool]:
        """The rest of ``DROP <kind> [IF EXISTS] a [, ...] [CASCADE | RESTRICT]`` after the
        kind: (names, if_exists, cascade); the statement must end there."""
        if_exists = self.accept("IF", "EXISTS")
        names = [read_name()]
        while self.accept(","):
            names.append(read_name())
        cascade = self.accept("CASCADE")
        if not cascade:
            self.accept("RESTRICT")
        self.end()
        return names, if_exists, cascade

    def end(self) -> None:
        t = self.peek()
        if t is not None:
            self.error(f'syntax error at or near "{t.text}"', t)

    def rest(self) -> str:
        t = self.peek()
        return "" if t is None else self.sql[t.pos :]

    def error(self, message: str, token: Token | None = None) -> None:
        t = token or self.peek()
        pos = (t.pos + 1) if t is not None else len(self.sql) + 1
        if not message.startswith("syntax error") and t is None:
            message = "syntax error at end of input"
        raise SqlError(SYNTAX_ERROR, message, position=pos)


def parse_utility(sql: str) -> UtilityStatement | None:
    """The utility statement ``sql`` is, or None if it is not one (then sqlglot parses it)."""
    r = TokenReader(sql)
    first = r.peek()
    if first is None or first.kind != "word":
        return None
    handler = _HANDLERS.get(first.upper)
    if handler is None:
        return None
    return handler(r)


def _transaction_modes(r: TokenReader) -> TransactionModes:
    isolation = None
    read_only = None
    deferrable = None
    while not r.done():
        if r.accept("ISOLATION", "LEVEL"):
            if r.accept("SERIALIZABLE"):
                isolation = IsolationLevel.SERIALIZABLE
            elif r.accept("REPEATABLE", "READ"):
                isolation = IsolationLevel.REPEATABLE_READ
            elif r.accept("READ", "COMMITTED"):
                isolation = IsolationLevel.READ_COMMITTED
            elif r.accept("READ", "UNCOMMITTED"):
                isolation = IsolationLevel.READ_UNCOMMITTED
            else:
                r.error("expected an isolation level")
        elif r.accept("READ", "ONLY"):
            read_only = True
        elif r.accept("READ", "WRITE"):
            read_only = False
        elif r.accept("NOT", "DEFERRABLE"):
            deferrable = False
        elif r.accept("DEFERRABLE"):
            deferrable = True
        else:
            t = r.next()
            r.error(f'syntax error at or near "{t.text}"', t)
        r.accept(",")
    return TransactionModes(isolation, read_only, deferrable)


def _begin(r: TokenReader) -> UtilityStatement:
    if r.accept("START"):
        r.expect("TRANSACTION")
    else:
        r.expect("BEGIN")
        r.accept("WORK") or r.accept("TRANSACTION")
    return Begin(_transaction_modes(r))


def _commit(r: TokenReader) -> UtilityStatement:
    r.next()
    if r.accept("PREPARED"):
        raise unsupported("COMMIT PREPARED (two-phase commit from the client)")
    r.accept("WORK") or r.accept("TRANSACTION")
    if r.accept("AND"):
        if r.accept("CHAIN"):
            raise unsupported("COMMIT AND CHAIN")
        r.expect("NO", "CHAIN")
    r.end()
    return Commit()


def _rollback(r: TokenReader) -> UtilityStatement:
    r.next()
    if r.accept("PREPARED"):
        raise unsupported("ROLLBACK PREPARED (two-phase commit from the client)")
    r.accept("WORK") or r.accept("TRANSACTION")
    if r.accept("TO"):
        r.accept("SAVEPOINT")
        name = r.name()
        r.end()
        return RollbackToSavepoint(name)
    if r.accept("AND"):
        if r.accept("CHAIN"):
            raise unsupported("ROLLBACK AND CHAIN")
        r.expect("NO", "CHAIN")
    r.end()
    return Rollback()


def _prepare(r: TokenReader) -> UtilityStatement:
    if r.accept("PREPARE", "TRANSACTION"):
        t = r.next()
        if t.kind != "str":
            r.error(f'syntax error at or near "{t.text}"', t)
        r.end()
        return PrepareTransaction(t.value)
    r.next()
    name = r.name()
    types: list[str] = []
    if r.accept("("):
        types = _type_list(r)
    r.expect("AS")
    t = r.peek()
    if t is None:
        r.error("syntax error at end of input")
    assert t is not None
    return PrepareStatement(name, tuple(types), r.sql[t.pos :], t.pos)


def _type_list(r: TokenReader) -> list[str]:
    """The texts of a parenthesized, comma-separated list of type names (the "(" read)."""
    types: list[str] = []
    depth = 0
    start: Token | None = None
    while True:
        t = r.next()
        if depth == 0 and t.text in (",", ")"):
            if start is None:
                r.error(f'syntax error at or near "{t.text}"', t)
            assert start is not None
            types.append(r.sql[start.pos : t.pos].strip())
            start = None
            if t.text == ")":
                return types
            continue
        start = start or t
        depth += {"(": 1, ")": -1}.get(t.text, 0) if t.kind == "punct" else 0


def _execute(r: TokenReader) -> UtilityStatement:
    r.next()
    name = r.name()
    t = r.peek()
    if t is None:
        return ExecuteStatement(name, None, 0)
    if t.text != "(":
        r.error(f'syntax error at or near "{t.text}"', t)
    return ExecuteStatement(name, r.sql[t.pos :], t.pos)


def _savepoint(r: TokenReader) -> UtilityStatement:
    r.next()
    name = r.name()
    r.end()
    return Savepoint(name)


def _release(r: TokenReader) -> UtilityStatement:
    r.next()
    r.accept("SAVEPOINT")
    name = r.name()
    r.end()
    return ReleaseSavepoint(name)


def _set_value(r: TokenReader) -> str | None:
    parts = []
    while not r.done():
        t = r.next()
        if t.kind == "word" and t.upper == "DEFAULT" and not parts:
            r.end()
            return None
        if t.text == ",":
            parts.append(",")
            continue
        parts.append(t.value)
    if not parts:
        r.error("syntax error at end of input")
    text = ""
    for p in parts:
        text = text + p if p == "," or text.endswith(",") or not text else text + " " + p
    return text.replace(",", ", ") if "," in text else text


def _set(r: TokenReader) -> UtilityStatement:
    r.next()
    if r.accept("CONSTRAINTS"):
        return _set_constraints(r)
    if r.accept("SESSION", "CHARACTERISTICS", "AS", "TRANSACTION"):
        return SetTransaction(_transaction_modes(r), session=True)
    if r.accept("TRANSACTION"):
        if r.at("SNAPSHOT"):
            raise unsupported("SET TRANSACTION SNAPSHOT")
        return SetTransaction(_transaction_modes(r), session=False)
    local = False
    if r.accept("LOCAL"):
        local = True
    else:
        r.accept("SESSION")
    if r.accept("TIME", "ZONE"):
        if r.accept("LOCAL") or r.accept("DEFAULT"):
            return SetVariable("timezone", None, local)
        return SetVariable("timezone", _set_value(r), local)
    if r.at("ROLE") or r.at("AUTHORIZATION") or r.at("SESSION", "AUTHORIZATION"):
        raise unsupported("SET ROLE / SET SESSION AUTHORIZATION")
    name = r.name()
    if r.accept("TO") or r.accept("="):
        return SetVariable(name, _set_value(r), local)
    r.error(f'syntax error at or near "{r.peek().text if r.peek() else ""}"')
    raise AssertionError


def _listen(r: TokenReader) -> UtilityStatement:
    r.next()
    channel = r.name()
    r.end()
    return Listen(channel)


def _unlisten(r: TokenReader) -> UtilityStatement:
    r.next()
    if r.accept("*"):
        r.end()
        return Unlisten(None)
    channel = r.name()
    r.end()
    return Unlisten(channel)


def _notify(r: TokenReader) -> UtilityStatement:
    r.next()
    channel = r.name()
    payload = ""
    if r.accept(","):
        t = r.next()
        if t.kind != "str":
            r.error(f'syntax error at or near "{t.text}"', t)
        payload = t.value
    r.end()
    return Notify(channel, payload)


def _set_constraints(r: TokenReader) -> UtilityStatement:
    names: tuple[str, ...] | None = None
    if not r.accept("ALL"):
        found = [r.name()]
        while r.accept(","):
            found.append(r.name())
        names = tuple(found)
    if r.accept("DEFERRED"):
        deferred = True
    else:
        r.expect("IMMEDIATE")
        deferred = False
    r.end()
    return SetConstraints(names, deferred)


def _show(r: TokenReader) -> UtilityStatement:
    r.next()
    if r.accept("TRANSACTION", "ISOLATION", "LEVEL"):
        return Show("transaction_isolation")
    if r.accept("TIME", "ZONE"):
        return Show("timezone")
    name = r.name()
    r.end()
    return Show(name)


def _reset(r: TokenReader) -> UtilityStatement:
    r.next()
    if r.accept("TIME", "ZONE"):
        return Reset("timezone")
    name = r.name()
    r.end()
    return Reset(name)


def _deallocate(r: TokenReader) -> UtilityStatement:
    r.next()
    r.accept("PREPARE")
    if r.accept("ALL"):
        r.end()
        return Deallocate(None)
    name = r.name()
    r.end()
    return Deallocate(name)


def _noop(tag: str, notice: str | None = None):  # type: ignore[no-untyped-def]
    def handler(r: TokenReader) -> UtilityStatement:
        return NoOp(tag, notice)

    return handler


def _discard(r: TokenReader) -> UtilityStatement:
    r.next()
    what = r.name().upper()
    r.end()
    return NoOp("DISCARD ALL" if what == "ALL" else f"DISCARD {what}")


def _close(r: TokenReader) -> UtilityStatement:
    r.next()
    if r.accept("ALL"):
        r.end()
        return CloseCursor(None)
    name = r.name()
    r.end()
    return CloseCursor(name)


def _declare(r: TokenReader) -> UtilityStatement:
    r.next()
    name = r.name()
    binary = scroll = hold = False
    while not r.accept("CURSOR"):
        if r.accept("BINARY"):
            binary = True
        elif r.accept("SCROLL"):
            scroll = True
        elif r.accept("NO", "SCROLL"):
            scroll = False
        elif not (r.accept("INSENSITIVE") or r.accept("ASENSITIVE")):
            r.error(f'syntax error at or near "{r.next().text}"', r.peek(-1))
    if r.accept("WITH", "HOLD"):
        hold = True
    else:
        r.accept("WITHOUT", "HOLD")
    r.expect("FOR")
    t = r.peek()
    if t is None:
        r.error("syntax error at end of input")
    assert t is not None
    return DeclareCursor(name, r.sql, r.sql[t.pos :], t.pos, scroll, hold, binary)


_ONE_WAY = {
    "NEXT": (Motion.FORWARD, 1),
    "PRIOR": (Motion.BACKWARD, 1),
    "FIRST": (Motion.ABSOLUTE, 1),
    "LAST": (Motion.ABSOLUTE, -1),
}


def _fetch(r: TokenReader) -> UtilityStatement:
    move = r.next().upper == "MOVE"
    motion, count = _motion(r)
    if not (r.accept("FROM") or r.accept("IN")) and r.peek(1) is not None:
        r.error(f'syntax error at or near "{r.peek(1).text}"', r.peek(1))  # type: ignore[union-attr]
    name = r.name()
    r.end()
    return FetchCursor(name, motion, count, move)


def _motion(r: TokenReader) -> tuple[Motion, int | None]:
    """A FETCH/MOVE direction as (motion, count); no direction is NEXT."""
    t = r.peek()
    if t is None:
        r.error("syntax error at end of input")
    assert t is not None
    word = t.upper if t.kind == "word" else ""
    if word in _ONE_WAY:
        r.next()
        return _ONE_WAY[word]
    if word in ("ABSOLUTE", "RELATIVE"):
        r.next()
        return Motion(word.lower()), _signed_count(r)
    if word == "ALL":
        r.next()
        return Motion.FORWARD, None
    if word in ("FORWARD", "BACKWARD"):
        r.next()
        motion = Motion(word.lower())
        if r.accept("ALL"):
            return motion, None
        if _at_count(r):
            return _signed(motion, _signed_count(r))
        return motion, 1
    if _at_count(r):
        return _signed(Motion.FORWARD, _signed_count(r))
    return Motion.FORWARD, 1


def _at_count(r: TokenReader) -> bool:
    t = r.peek()
    return t is not None and (t.kind == "num" or t.text in "+-")


def _signed_count(r: TokenReader) -> int:
    sign = -1 if r.accept("-") else 1
    r.accept("+")
    t = r.next()
    if t.kind != "num" or "." in t.text:
        r.error(f'syntax error at or near "{t.text}"', t)
    return sign * int(t.text)


def _signed(motion: Motion, count: int) -> tuple[Motion, int]:
    """``FORWARD -n`` is ``BACKWARD n``, and the other way round."""
    if count >= 0:
        return motion, count
    other = Motion.BACKWARD if motion is Motion.FORWARD else Motion.FORWARD
    return other, -count


def _role_options(r: TokenReader) -> RoleOptions:
    r.accept("WITH")
    password = None
    password_null = False
    superuser = None
    login = None
    while not r.done():
        if r.accept("ENCRYPTED") or r.accept("UNENCRYPTED"):
            continue
        if r.accept("PASSWORD"):
            t = r.next()
            if t.kind == "word" and t.upper == "NULL":
                password_null = True
            elif t.kind == "str":
                password = t.value
            else:
                r.error(f'syntax error at or near "{t.text}"', t)
        elif r.accept("SUPERUSER"):
            superuser = True
        elif r.accept("NOSUPERUSER"):
            superuser = False
        elif r.accept("LOGIN"):
            login = True
        elif r.accept("NOLOGIN"):
            login = False
        elif r.accept("VALID", "UNTIL"):
            r.next()
        elif r.accept("CONNECTION", "LIMIT"):
            r.next()
        elif r.peek() is not None and r.peek().upper in _IGNORED_ROLE_OPTIONS:  # type: ignore[union-attr]
            r.next()
        else:
            t = r.next()
            r.error(f'syntax error at or near "{t.text}"', t)
    return RoleOptions(password, password_null, superuser, login)


_IGNORED_ROLE_OPTIONS = frozenset(
    {
        "CREATEDB", "NOCREATEDB", "CREATEROLE", "NOCREATEROLE", "INHERIT", "NOINHERIT",
        "REPLICATION", "NOREPLICATION", "BYPASSRLS", "NOBYPASSRLS",
    }
)  # fmt: skip


def _create(r: TokenReader) -> UtilityStatement | None:
    if (
        r.at("CREATE", "TRIGGER")
        or r.at("CREATE", "OR", "REPLACE", "TRIGGER")
        or r.at("CREATE", "CONSTRAINT", "TRIGGER")
        or r.at("CREATE", "OR", "REPLACE", "CONSTRAINT", "TRIGGER")
    ):
        return trigger_ddl.parse_create(r)
    if r.at("CREATE", "FUNCTION") or r.at("CREATE", "OR", "REPLACE", "FUNCTION"):
        return function_ddl.parse_create(r)
    if r.at("CREATE", "PROCEDURE") or r.at("CREATE", "OR", "REPLACE", "PROCEDURE"):
        return function_ddl.parse_create(r)
    if r.at("CREATE", "SEQUENCE"):
        return sequence_ddl.parse_create(r)
    if r.at("CREATE", "OBSERVER"):
        return _create_observer(r)
    if r.at("CREATE", "TYPE"):
        return enums.parse_create(r)
    if r.at("CREATE", "DOMAIN"):
        raise unsupported("CREATE DOMAIN")
    if r.at("CREATE", "USER") or r.at("CREATE", "ROLE"):
        r.next()
        is_user = r.next().upper == "USER"
        name = r.name()
        return CreateRole(name, _role_options(r), is_user)
    if r.at("CREATE", "DATABASE"):
        return database_ddl.parse_create(r)
    if r.at("CREATE", "SCHEMA"):
        return schemas.parse_create(r)
    if r.at("CREATE", "EXTENSION"):
        raise unsupported("CREATE EXTENSION")
    return None


def _alter(r: TokenReader) -> UtilityStatement | None:
    if trigger_ddl.is_enable(r):
        return trigger_ddl.parse_enable(r)
    if r.at("ALTER", "SCHEMA"):
        return schemas.parse_alter(r)
    if r.at("ALTER", "SEQUENCE"):
        return sequence_ddl.parse_alter(r)
    if r.at("ALTER", "TYPE"):
        return enums.parse_alter(r)
    if r.accept("ALTER", "OBSERVER"):
        name = r.name()
        if r.accept("PAUSE"):
            action = ObserverAction.PAUSE
        elif r.accept("RESUME"):
            action = ObserverAction.RESUME
        elif r.accept("RETRY", "PARKED"):
            action = ObserverAction.RETRY_PARKED
        else:
            r.error("expected PAUSE, RESUME or RETRY PARKED")
        r.end()
        return AlterObserver(name, action)
    if r.at("ALTER", "USER") or r.at("ALTER", "ROLE"):
        r.next()
        r.next()
        name = r.name()
        if r.accept("RENAME", "TO"):
            new = r.name()
            r.end()
            return AlterRole(name, RoleOptions(), rename_to=new)
        return AlterRole(name, _role_options(r))
    return None


def _drop(r: TokenReader) -> UtilityStatement | None:
    if r.at("DROP", "TRIGGER"):
        return trigger_ddl.parse_drop(r)
    if r.at("DROP", "FUNCTION") or r.at("DROP", "PROCEDURE"):
        return function_ddl.parse_drop(r)
    if r.at("DROP", "SEQUENCE"):
        return sequence_ddl.parse_drop(r)
    if r.at("DROP", "TYPE"):
        return enums.parse_drop(r)
    if r.accept("DROP", "OBSERVER"):
        if_exists = r.accept("IF", "EXISTS")
        name = r.name()
        r.end()
        return DropObserver(name, if_exists)
    if r.at("DROP", "USER") or r.at("DROP", "ROLE"):
        r.next()
        r.next()
        if_exists = r.accept("IF", "EXISTS")
        names = [r.name()]
        while r.accept(","):
            names.append(r.name())
        r.end()
        return DropRole(tuple(names), if_exists)
    if r.at("DROP", "SCHEMA"):
        return schemas.parse_drop(r)
    if r.at("DROP", "DATABASE"):
        return database_ddl.parse_drop(r)
    return None


def _create_observer(r: TokenReader) -> UtilityStatement:
    r.expect("CREATE", "OBSERVER")
    name = r.name()
    r.expect("ON")
    table = r.name()
    if table.startswith("public."):
        table = table[len("public.") :]
    r.expect("(")
    columns = [r.name()]
    while r.accept(","):
        columns.append(r.name())
    r.expect(")")
    weak = r.accept("WEAK")
    if not weak:
        r.accept("STRONG")
    body = target = None
    offset = 0
    if r.accept("AS"):
        t = r.next()
        if t.kind not in ("str", "dollar"):
            r.error(f'syntax error at or near "{t.text}"', t)
        body = t.value
        offset = t.pos + (t.text.index("$", 1) + 1 if t.kind == "dollar" else 1)
    elif r.accept("EXECUTE"):
        t = r.next()
        if t.kind != "str":
            r.error("EXECUTE takes a string: 'package.module:function'", t)
        target = t.value
    else:
        r.error("expected AS $$statements$$ or EXECUTE 'package.module:function'")
    r.end()
    return CreateObserver(name, table, tuple(columns), weak, body, offset, target)


def _copy(r: TokenReader) -> UtilityStatement:
    r.next()
    table = None
    columns = None
    query = None
    if r.at("("):
        start = r.next()
        depth = 1
        while depth:
            t = r.next()
            if t.text == "(":
                depth += 1
            elif t.text == ")":
                depth -= 1
                end = t
        query = r.sql[start.pos + 1 : end.pos]
    else:
        table = r.public_name()
        if r.accept("("):
            cols = [r.name()]
            while r.accept(","):
                cols.append(r.name())
            r.expect(")")
            columns = tuple(cols)
    if query is not None and (r.at("FROM") or r.at("(")):
        r.error(f'syntax error at or near "{r.peek().text}"')  # type: ignore[union-attr]
    if r.accept("FROM"):
        direction_in = True
        if not r.accept("STDIN"):
            raise unsupported("COPY FROM a file or program (use COPY ... FROM STDIN)")
    elif r.accept("TO"):
        direction_in = False
        if not r.accept("STDOUT"):
            raise unsupported("COPY TO a file or program (use COPY ... TO STDOUT)")
    else:
        r.error("expected FROM STDIN or TO STDOUT")
    positions: dict[str, int] = {}
    options = _copy_option_list(r, positions)
    if r.at("WHERE"):
        raise unsupported("COPY FROM ... WHERE")
    r.end()
    return _copy_statement(table, columns, query, direction_in, options, positions)


_CopyValue = str | tuple[str, ...]


def _copy_option_list(r: TokenReader, positions: dict[str, int]) -> dict[str, _CopyValue]:
    """COPY's options, ``(name [value], ...)`` or the pre-9.0 words; a repeated one is 42601.
    ``positions`` gets where each option is written, for errors about it."""
    options: dict[str, _CopyValue] = {}
    key_at = 0

    def put(key: str, value: _CopyValue) -> None:
        if key in options:
            raise SqlError(SYNTAX_ERROR, "conflicting or redundant options", position=key_at)
        options[key] = value
        positions[key] = key_at

    r.accept("WITH")
    if r.accept("("):
        while True:
            key_at = _position(r)
            key = r.name()
            value: _CopyValue = "true"
            if r.accept("("):
                value = _copy_names(r)
                r.expect(")")
            elif not (r.at(",") or r.at(")")):
                value = r.next().value
            put(key, value)
            if r.accept(")"):
                break
            r.expect(",")
        return options
    # The pre-9.0 option syntax: BINARY, CSV, HEADER, DELIMITER [AS] 'x', NULL [AS] 'x',
    # QUOTE [AS] 'x', ESCAPE [AS] 'x', FORCE QUOTE {* | columns}, FORCE NOT NULL columns.
    while not r.done() and not r.at("WHERE"):
        key_at = _position(r)
        word = r.name()
        if word in ("delimiter", "null", "quote", "escape", "encoding"):
            r.accept("AS")
            put(word, r.next().value)
        elif word in ("binary", "csv"):
            put("format", word)
        elif word in ("header", "freeze"):
            put(word, "true")
        elif word == "force" and r.accept("QUOTE"):
            put("force_quote", "*" if r.accept("*") else _copy_names(r))
        elif word == "force" and r.accept("NOT"):
            r.expect("NULL")
            put("force_not_null", _copy_names(r))
        else:
            r.error(f'syntax error at or near "{word}"')
    return options


def _position(r: TokenReader) -> int:
    """The 1-based position of the next token (an error's P field)."""
    t = r.peek()
    return t.pos + 1 if t is not None else len(r.sql) + 1


def _copy_names(r: TokenReader) -> tuple[str, ...]:
    names = [r.name()]
    while r.at(",") and r.peek(1) is not None and r.peek(1).kind in ("word", "ident"):  # type: ignore[union-attr]
        r.next()
        names.append(r.name())
    return tuple(names)


def _copy_statement(
    table: str | None,
    columns: tuple[str, ...] | None,
    query: str | None,
    direction_in: bool,
    options: dict[str, _CopyValue],
    positions: dict[str, int],
) -> CopyStatement:
    """The statement for COPY's options, checked as Postgres's ProcessCopyOptions does."""
    fmt = _copy_text(options, "format", "text").lower()
    if fmt not in ("text", "csv", "binary"):
        raise SqlError(
            INVALID_PARAMETER_VALUE,
            f'COPY format "{fmt}" not recognized',
            position=positions.get("format"),
        )
    header, match = _copy_header(options.pop("header", "false"), direction_in)
    options.pop("freeze", None)
    delimiter = _copy_opt_text(options, "delimiter")
    null = _copy_opt_text(options, "null")
    quote = _copy_opt_text(options, "quote")
    escape = _copy_opt_text(options, "escape")
    force_quote = _copy_columns(options, "force_quote", positions, star=True)
    force_not_null = _copy_columns(options, "force_not_null", positions) or ()
    force_null = _copy_columns(options, "force_null", positions) or ()
    encoding = _copy_encoding(options.pop("encoding", None), positions.get("encoding"))
    if options:
        key = next(iter(options))
        raise SqlError(SYNTAX_ERROR, f'option "{key}" not recognized', position=positions[key])
    csv_mode = fmt == "csv"
    _check_copy_options(fmt, delimiter, null, header, quote, escape)
    for word, given, wants_in in (
        ("force quote", force_quote, False),
        ("force not null", force_not_null, True),
        ("force null", force_null, True),
    ):
        if given and not csv_mode:
            raise unsupported_copy(f"COPY {word} available only in CSV mode")
        if given and direction_in != wants_in:
            way = "COPY FROM" if wants_in else "COPY TO"
            raise unsupported_copy(f"COPY {word} only available using {way}")
    d = delimiter or ("," if csv_mode else "\t")
    if null is not None and d in null:
        raise unsupported_copy("COPY delimiter must not appear in the NULL specification")
    if csv_mode and null is not None and (quote or '"') in null:
        raise unsupported_copy("CSV quote character must not appear in the NULL specification")
    return CopyStatement(
        table,
        columns,
        query,
        direction_in,
        fmt,
        delimiter,
        null,
        header,
        quote or '"',
        escape,
        header_match=match,
        force_quote=force_quote,
        force_not_null=force_not_null,
        force_null=force_null,
        encoding=encoding,
    )


def unsupported_copy(message: str) -> SqlError:
    """0A000 with Postgres's own words for a COPY option combination it refuses."""
    return SqlError(FEATURE_NOT_SUPPORTED, message)


def _copy_text(options: dict[str, _CopyValue], key: str, default: str) -> str:
    value = options.pop(key, default)
    if isinstance(value, tuple):
        raise SqlError(SYNTAX_ERROR, f"{key} requires a parameter")
    return value


def _copy_opt_text(options: dict[str, _CopyValue], key: str) -> str | None:
    return _copy_text(options, key, "") if key in options else None


def _copy_header(value: _CopyValue, direction_in: bool) -> tuple[bool, bool]:
    """(header, match) for HEADER's value: a Boolean or ``match`` (COPY FROM only)."""
    text = value.lower() if isinstance(value, str) else ""
    if text == "match":
        if not direction_in:
            raise unsupported_copy('cannot use "match" with HEADER in COPY TO')
        return True, True
    if text in ("true", "on", "1", "yes", "t", "y"):
        return True, False
    if text in ("false", "off", "0", "no", "f", "n"):
        return False, False
    raise SqlError(SYNTAX_ERROR, 'header requires a Boolean value or "match"')


def _copy_columns(
    options: dict[str, _CopyValue], key: str, positions: dict[str, int], star: bool = False
) -> tuple[str, ...] | None:
    """A FORCE_* option's column list (``("*",)`` for ``*`` where allowed), None if absent."""
    if key not in options:
        return None
    value = options.pop(key)
    if isinstance(value, tuple):
        return value
    if star and value == "*":
        return ("*",)
    raise SqlError(
        INVALID_PARAMETER_VALUE,
        f'argument to option "{key}" must be a list of column names',
        position=positions.get(key),
    )


# Postgres's encoding names (compared without "_" and "-", case-insensitively) and Python's.
_ENCODINGS = {
    "utf8": "utf-8",
    "unicode": "utf-8",
    "sqlascii": "utf-8",
    "latin1": "latin-1",
    "latin2": "iso8859-2",
    "latin3": "iso8859-3",
    "latin4": "iso8859-4",
    "latin5": "iso8859-9",
    "latin6": "iso8859-10",
    "latin7": "iso8859-13",
    "latin8": "iso8859-14",
    "latin9": "iso8859-15",
    "latin10": "iso8859-16",
    "iso88595": "iso8859-5",
    "iso88596": "iso8859-6",
    "iso88597": "iso8859-7",
    "iso88598": "iso8859-8",
    "koi8r": "koi8-r",
    "koi8u": "koi8-u",
    "eucjp": "euc-jp",
    "euckr": "euc-kr",
    "euccn": "gb2312",
    "sjis": "shift-jis",
    "big5": "big5",
    "gbk": "gbk",
    "gb18030": "gb18030",
    "uhc": "cp949",
}
_ENCODINGS.update({f"win{n}": f"cp{n}" for n in (866, 874, 1250, 1251, 1252, 1253, 1254)})
_ENCODINGS.update({f"win{n}": f"cp{n}" for n in (1255, 1256, 1257, 1258)})


def _copy_encoding(value: _CopyValue | None, position: int | None) -> str | None:
    if value is None:
        return None
    codec = (
        _ENCODINGS.get(value.replace("_", "").replace("-", "").lower())
        if isinstance(value, str)
        else None
    )
    if codec is None:
        raise SqlError(
            INVALID_PARAMETER_VALUE,
            'argument to option "encoding" must be a valid encoding name',
            position=position,
        )
    return codec


def _check_copy_options(
    fmt: str,
    delimiter: str | None,
    null: str | None,
    header: bool,
    quote: str | None,
    escape: str | None,
) -> None:
    """The checks of Postgres's ProcessCopyOptions on the format-specific options."""
    if fmt == "binary":
        for word, given in (("DELIMITER", delimiter), ("NULL", null)):
            if given is not None:
                raise SqlError(SYNTAX_ERROR, f"cannot specify {word} in BINARY mode")
        if header:
            raise unsupported_copy("cannot specify HEADER in BINARY mode")
    if delimiter is not None:
        if len(delimiter.encode()) != 1:
            raise unsupported_copy("COPY delimiter must be a single one-byte character")
        if delimiter in "\r\n":
            raise SqlError(
                INVALID_PARAMETER_VALUE, "COPY delimiter cannot be newline or carriage return"
            )
        if fmt == "text" and delimiter in "\\.abcdefghijklmnopqrstuvwxyz0123456789":
            raise SqlError(INVALID_PARAMETER_VALUE, f'COPY delimiter cannot be "{delimiter}"')
    if null is not None and ("\r" in null or "\n" in null):
        raise SqlError(
            INVALID_PARAMETER_VALUE,
            "COPY null representation cannot use newline or carriage return",
        )
    for word, given in (("quote", quote), ("escape", escape)):
        if given is None:
            continue
        if fmt != "csv":
            raise unsupported_copy(f"COPY {word} available only in CSV mode")
        if len(given.encode()) != 1:
            raise unsupported_copy(f"COPY {word} must be a single one-byte character")
    if fmt == "csv" and (delimiter or ",") == (quote or '"'):
        raise SqlError(INVALID_PARAMETER_VALUE, "COPY delimiter and quote must be different")


def _explain(r: TokenReader) -> UtilityStatement:
    r.next()
    analyze = False
    if r.accept("("):
        while not r.accept(")"):
            word = r.name()
            if word == "analyze":
                analyze = True
            r.accept("true") or r.accept("on")
            r.accept(",")
    else:
        while r.at("ANALYZE") or r.at("VERBOSE"):
            analyze = analyze or r.next().upper == "ANALYZE"
    t = r.peek()
    if t is None:
        r.error("syntax error at end of input")
    return Explain(r.sql[t.pos :], t.pos, analyze)  # type: ignore[union-attr]


def _lock(r: TokenReader) -> UtilityStatement:
    raise unsupported("LOCK TABLE (use SELECT ... FOR UPDATE)")


def _do(r: TokenReader) -> UtilityStatement:
    r.next()
    language = None
    body: Token | None = None
    while not r.done():
        if r.accept("LANGUAGE"):
            if language is not None:
                r.error("conflicting or redundant options")
            t = r.next()
            if t.kind not in ("word", "ident", "str"):
                r.error(f'syntax error at or near "{t.text}"', t)
            language = t.value
            continue
        t = r.next()
        if t.kind not in ("str", "dollar") or body is not None:
            r.error(f'syntax error at or near "{t.text}"', t)
        body = t
    if body is None:
        raise SqlError(SYNTAX_ERROR, "no inline code specified")
    if body.kind == "dollar":
        offset = body.pos + body.text.index("$", 1) + 1
    elif body.text[0] in "eE":
        offset = body.pos + 2
    else:
        offset = body.pos + 1
    return DoBlock(body.value, offset, language or "plpgsql")


def _unsupported_keyword(what: str):  # type: ignore[no-untyped-def]
    def handler(r: TokenReader) -> UtilityStatement:
        raise unsupported(what)

    return handler


_HANDLERS = {
    "BEGIN": _begin,
    "START": _begin,
    "COMMIT": _commit,
    "END": _commit,
    "ROLLBACK": _rollback,
    "ABORT": _rollback,
    "SAVEPOINT": _savepoint,
    "RELEASE": _release,
    "SET": _set,
    "SHOW": _show,
    "RESET": _reset,
    "DEALLOCATE": _deallocate,
    "DISCARD": _discard,
    "CLOSE": _close,
    "UNLISTEN": _unlisten,
    "LISTEN": _listen,
    "NOTIFY": _notify,
    "VACUUM": _noop("VACUUM"),
    "ANALYZE": _noop("ANALYZE"),
    "ANALYSE": _noop("ANALYZE"),
    "CHECKPOINT": _noop("CHECKPOINT"),
    "GRANT": _noop("GRANT", "privileges are not enforced: every role may use every table"),
    "REVOKE": _noop("REVOKE", "privileges are not enforced: every role may use every table"),
    "COMMENT": comments.parse,
    "CREATE": _create,
    "ALTER": _alter,
    "DROP": _drop,
    "COPY": _copy,
    "EXPLAIN": _explain,
    "LOCK": _lock,
    "PREPARE": _prepare,
    "EXECUTE": _execute,
    "DECLARE": _declare,
    "FETCH": _fetch,
    "MOVE": _fetch,
    "CALL": function_ddl.parse_call,
    "DO": _do,
    "REINDEX": _noop("REINDEX"),
    "CLUSTER": _noop("CLUSTER"),
}
