"""PL/pgSQL source to the statement tree of :mod:`nodes` (a subset of Postgres's pl_gram.y).

SQL inside the body (statements, and expressions, which run as ``SELECT <expression>``) is
cut out of the text by the same rules as Postgres's: up to a terminating token outside
parentheses. Names that are variables become parameters as Postgres's parser hooks make them:
only where the SQL has a column reference (never a table, alias, function, INSERT column or
SET target), found here with sqlglot, and only in SELECT/INSERT/UPDATE/DELETE/MERGE/VALUES
statements (utility statements and DDL take none, as in Postgres).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from percolator.server.plpgsql import conditions
from percolator.server.plpgsql import nodes as N
from percolator.server.plpgsql.lexer import Token, line_of, tokenize
from percolator.server.sql import types as T
from percolator.server.sql import utility
from percolator.server.sql.errors import (
    DATATYPE_MISMATCH,
    FEATURE_NOT_SUPPORTED,
    SYNTAX_ERROR,
    UNDEFINED_OBJECT,
    UNDEFINED_PARAMETER,
    SqlError,
)

NULL_VALUE_NOT_ALLOWED = "22004"
ERROR_IN_ASSIGNMENT = "22005"

_LEVELS = ("DEBUG", "LOG", "INFO", "NOTICE", "WARNING", "EXCEPTION")
_RAISE_OPTIONS = frozenset(
    {"message", "detail", "hint", "errcode", "column", "constraint", "datatype", "table", "schema"}
)
_SQL_COMMANDS = frozenset(
    {
        "SELECT", "INSERT", "UPDATE", "DELETE", "WITH", "VALUES", "TABLE", "MERGE", "CREATE",
        "ALTER", "DROP", "TRUNCATE", "GRANT", "REVOKE", "COMMENT", "SET", "RESET", "SHOW",
        "LOCK", "ANALYZE", "ANALYSE", "VACUUM", "NOTIFY", "LISTEN", "UNLISTEN", "DO", "CALL",
        "REINDEX", "CLUSTER", "REFRESH", "SECURITY", "IMPORT", "DISCARD", "LOAD", "EXPLAIN",
        "COPY", "PREPARE", "DEALLOCATE", "CHECKPOINT", "SAVEPOINT", "RELEASE", "START",
        "ABORT", "END",
    }
)  # fmt: skip
_SUBSTITUTED = frozenset(
    {"SELECT", "INSERT", "UPDATE", "DELETE", "WITH", "VALUES", "TABLE", "MERGE"}
)
_DIAGNOSTICS = {
    False: frozenset({"row_count", "pg_context", "pg_routine_oid"}),
    True: frozenset(
        {
            "returned_sqlstate", "message_text", "pg_exception_detail", "pg_exception_hint",
            "pg_exception_context", "column_name", "constraint_name", "pg_datatype_name",
            "table_name", "schema_name",
        }
    ),
}  # fmt: skip


def syntax_error(message: str, pos: int | None) -> SqlError:
    return SqlError(SYNTAX_ERROR, message, position=None if pos is None else pos + 1)


@dataclass
class _Scope:
    label: str | None
    names: dict[str, N.VarDecl] = field(default_factory=dict)
    loop: bool = False


@dataclass(frozen=True)
class Param:
    """A parameter of a function body (for CREATE FUNCTION ... LANGUAGE plpgsql)."""

    name: str | None
    type_text: str | None
    """None: a record (a trigger function's NEW and OLD)."""


class Parser:
    """One body's parser (use :func:`parse`)."""

    def __init__(
        self,
        body: str,
        params: Sequence[Param] = (),
        *,
        returns_void: bool = True,
        name: str = "inline_code_block",
    ) -> None:
        self.body = body
        self.tokens = tokenize(body)
        self.i = 0
        self.decls: list[N.VarDecl] = []
        self.scopes: list[_Scope] = [_Scope(name)]
        self.returns_void = returns_void
        self.found = self._declare("found", "boolean")
        self.param_slots = []
        for k, p in enumerate(params, 1):
            decl = self._declare(p.name or f"${k}", p.type_text)
            self.scopes[0].names[f"${k}"] = decl
            self.param_slots.append(decl.slot)

    # -- tokens --------------------------------------------------------------------------

    def peek(self, k: int = 0) -> Token | None:
        j = self.i + k
        return self.tokens[j] if j < len(self.tokens) else None

    def at(self, *words: str) -> bool:
        t = self.peek()
        return t is not None and t.kind in ("word", "op") and t.upper in words

    def accept(self, *words: str) -> Token | None:
        if self.at(*words):
            t = self.tokens[self.i]
            self.i += 1
            return t
        return None

    def next(self) -> Token:
        t = self.peek()
        if t is None:
            raise self.error_at(None)
        self.i += 1
        return t

    def expect(self, *words: str) -> Token:
        t = self.accept(*words)
        if t is None:
            raise self.error_at(self.peek())
        return t

    def error_at(self, t: Token | None) -> SqlError:
        if t is None:
            return syntax_error("syntax error at end of input", len(self.body))
        return syntax_error(f'syntax error at or near "{t.text}"', t.pos)

    def unexpected_end(self) -> SqlError:
        """The body ended inside a piece of SQL (an unclosed parenthesis, a missing ``;``)."""
        return syntax_error("unexpected end of function definition at end of input", len(self.body))

    def pos(self) -> int:
        t = self.peek()
        return t.pos if t is not None else len(self.body)

    def line(self, t: Token | None = None) -> int:
        t = t or self.peek()
        return line_of(self.body, t.pos if t is not None else len(self.body))

    # -- names ---------------------------------------------------------------------------

    def _declare(self, name: str, type_text: str | None, **kw: object) -> N.VarDecl:
        kind = kw.pop("kind", "scalar" if type_text is not None else "record")
        decl = N.VarDecl(name, len(self.decls), type_text, kind, **kw)  # type: ignore[arg-type]
        self.decls.append(decl)
        self.scopes[-1].names[name] = decl
        return decl

    def _hidden(self) -> int:
        decl = N.VarDecl("", len(self.decls), None, "hidden")
        self.decls.append(decl)
        return decl.slot

    def lookup(self, name: str) -> N.VarDecl | None:
        for scope in reversed(self.scopes):
            decl = scope.names.get(name)
            if decl is not None:
                return decl
        return None

    def labelled(self, label: str) -> _Scope | None:
        for scope in reversed(self.scopes):
            if scope.label == label:
                return scope
        return None

    def resolve(self, parts: Sequence[str]) -> tuple[N.VarRef, N.VarDecl] | None:
        """The variable (or record field) a dotted name refers to, if any."""
        if not parts or len(parts) > 3:
            return None
        first = parts[0]
        decl = self.lookup(first)
        if len(parts) == 1:
            return (N.VarRef(decl.slot), decl) if decl is not None else None
        scope = self.labelled(first)
        if decl is not None and decl.kind in _FIELDED and len(parts) == 2:
            if scope is None or parts[1] not in scope.names:
                return N.VarRef(decl.slot, parts[1]), decl
        if scope is not None:
            inner = scope.names.get(parts[1])
            if inner is None:
                return None
            if len(parts) == 2:
                return N.VarRef(inner.slot), inner
            if inner.kind in _FIELDED:
                return N.VarRef(inner.slot, parts[2]), inner
        return None

    # -- the body ------------------------------------------------------------------------

    def parse(self) -> N.Function:
        try:
            return self._parse()
        except SqlError as error:
            if error.position is None and error.context is None:
                error.context = (
                    f'compilation of PL/pgSQL function "{self.scopes[0].label}" near line '
                    f"{self.line(self.tokens[max(self.i - 1, 0)] if self.tokens else None)}"
                )
            raise

    def _parse(self) -> N.Function:
        label = self._label()
        if not self.at("DECLARE", "BEGIN"):
            raise self.error_at(self.peek())
        block = self.block(label, top=True)
        self.accept(";")
        if self.peek() is not None:
            raise self.error_at(self.peek())
        return N.Function(
            block,
            len(self.decls),
            self.found.slot,
            tuple(self.param_slots),
            tuple(self.decls),
            self.body,
        )

    def _label(self) -> str | None:
        if not self.at("<<"):
            return None
        self.next()
        name = self.name_token()
        self.expect(">>")
        return name.name

    def name_token(self) -> Token:
        t = self.next()
        if t.kind not in ("word", "ident"):
            raise self.error_at(t)
        return t

    def block(self, label: str | None, top: bool = False) -> N.Block:
        first = self.peek()
        assert first is not None
        self.scopes.append(_Scope(label))
        try:
            decls: list[N.VarDecl] = []
            if self.accept("DECLARE"):
                while not self.at("BEGIN"):
                    if self.peek() is None:
                        raise self.error_at(None)
                    if self.accept("DECLARE"):
                        continue
                    decls.append(self.declaration())
            self.expect("BEGIN")
            body = self.statements("EXCEPTION", "END")
            handlers: list[N.Handler] = []
            error_slots = None
            if self.accept("EXCEPTION"):
                self.scopes.append(_Scope(None))
                error_slots = (
                    self._declare("sqlstate", "text").slot,
                    self._declare("sqlerrm", "text").slot,
                )
                try:
                    if not self.at("WHEN"):
                        raise self.error_at(self.peek())
                    while self.accept("WHEN"):
                        conds = [self.condition()]
                        while self.accept("OR"):
                            conds.append(self.condition())
                        self.expect("THEN")
                        handlers.append(
                            N.Handler(tuple(conds), tuple(self.statements("WHEN", "END")))
                        )
                finally:
                    self.scopes.pop()
            self.expect("END")
            self.end_label(label)
            if not top:
                self.expect(";")
            return N.Block(
                self.line(first),
                first.pos,
                label,
                tuple(decls),
                tuple(body),
                tuple(handlers),
                error_slots,
            )
        finally:
            self.scopes.pop()

    def end_label(self, label: str | None) -> None:
        t = self.peek()
        if (
            t is None
            or t.kind not in ("word", "ident")
            or (t.kind == "word" and t.upper in ("IF", "LOOP", "CASE"))
        ):
            return
        self.i += 1
        if label is None:
            raise syntax_error(f'end label "{t.name}" specified for unlabeled block', t.pos)
        if t.name != label:
            raise syntax_error(f'end label "{t.name}" differs from block\'s label "{label}"', t.pos)

    def condition(self) -> tuple[str, str]:
        if self.accept("SQLSTATE"):
            t = self.next()
            if t.kind != "str":
                raise self.error_at(t)
            code = string_value(t.text)
            if not conditions.valid_sqlstate(code):
                raise SqlError("42602", "invalid SQLSTATE code", position=t.pos + 1)
            return ("sqlstate", code)
        t = self.name_token()
        name = t.name
        if name != "others" and conditions.by_name(name) is None:
            raise SqlError(UNDEFINED_OBJECT, f'unrecognized exception condition "{name}"')
        return ("name", name)

    # -- declarations ----------------------------------------------------------------------

    def declaration(self) -> N.VarDecl:
        t = self.name_token()
        name = t.name
        if name in self.scopes[-1].names:
            raise syntax_error(f'duplicate declaration at or near "{t.text}"', t.pos)
        if self.accept("ALIAS"):
            self.expect("FOR")
            target = self.next()
            decl = self.lookup(target.text if target.kind == "param" else target.name)
            if decl is None:
                raise syntax_error(f'variable "{target.text}" does not exist', target.pos)
            self.expect(";")
            self.scopes[-1].names[name] = decl
            return decl
        constant = self.accept("CONSTANT") is not None
        if self.at("CURSOR", "SCROLL", "NO"):
            raise SqlError(FEATURE_NOT_SUPPORTED, "cursor variables are not supported")
        start = self.i
        depth = 0
        while True:
            u = self.peek()
            if u is None:
                raise self.error_at(None)
            if depth == 0 and (
                u.upper in (";", ":=", "=", "DEFAULT", "COLLATE")
                or (u.upper == "NOT" and self._next_is(1, "NULL"))
            ):
                break
            if u.text in ("(", "["):
                depth += 1
            elif u.text in (")", "]"):
                depth -= 1
            self.i += 1
        if self.i == start:
            raise self.error_at(self.peek())
        type_text = self.body[self.tokens[start].pos : self.tokens[self.i - 1].end]
        kind = "scalar"
        squashed = re.sub(r"\s+", "", type_text)
        m = re.fullmatch(r"(.+)%(rowtype|type)", squashed, re.IGNORECASE)
        if m is not None:
            base, what = m.group(1), m.group(2).lower()
            if what == "rowtype":
                kind, type_text = "rowtype", base
            else:
                ref = self.lookup(_fold(base))
                if ref is not None:
                    kind, type_text = ref.kind, ref.type_text
                    if kind == "hidden":
                        kind = "scalar"
                else:
                    kind, type_text = "column", base
        elif squashed.lower() == "record":
            kind, type_text = "record", None
        elif squashed.lower() == "refcursor":
            raise SqlError(FEATURE_NOT_SUPPORTED, "cursor variables are not supported")
        elif not _builtin_type(type_text):
            kind = "named"  # an enum, or a table's row type: known when the block runs
        if self.accept("COLLATE"):
            self.name_token()
        not_null = False
        not_token = self.accept("NOT")
        if not_token is not None:
            self.expect("NULL")
            not_null = True
        default = None
        if self.accept(":=", "=", "DEFAULT"):
            default = self.expression((";",))
        self.expect(";")
        if not_token is not None and default is None:
            raise SqlError(
                NULL_VALUE_NOT_ALLOWED,
                f'variable "{name}" must have a default value, since it\'s declared NOT NULL',
                position=not_token.pos + 1,
            )
        return self._declare(
            name,
            type_text,
            kind=kind,
            constant=constant,
            not_null=not_null,
            default=default,
            pos=t.pos,
        )

    def _next_is(self, k: int, word: str) -> bool:
        t = self.peek(k)
        return t is not None and t.upper == word

    # -- statements ------------------------------------------------------------------------

    def statements(self, *terminators: str) -> list[N.Stmt]:
        out: list[N.Stmt] = []
        while True:
            t = self.peek()
            if t is None:
                raise self.error_at(None)
            if t.kind == "word" and t.upper in terminators:
                return out
            out.append(self.statement())

    def statement(self) -> N.Stmt:
        t = self.peek()
        assert t is not None
        line, pos = self.line(t), t.pos
        label = None
        if t.text == "<<":
            label = self._label()
            t = self.peek()
            if t is None or t.upper not in ("BEGIN", "DECLARE", "LOOP", "WHILE", "FOR", "FOREACH"):
                raise self.error_at(t)
        word = t.upper if t.kind == "word" else ""
        if word in ("BEGIN", "DECLARE"):
            return self.block(label)
        if word == "LOOP":
            self.next()
            return N.Loop(line, pos, label, self.loop_body(label))
        if word == "WHILE":
            self.next()
            cond = self.expression(("LOOP",))
            self.expect("LOOP")
            return N.While(line, pos, label, cond, self.loop_body(label))
        if word == "FOR":
            return self.for_loop(label, line, pos)
        if word == "FOREACH":
            return self.foreach(label, line, pos)
        if label is not None:
            raise self.error_at(t)
        if word == "IF":
            return self.if_stmt(line, pos)
        if word == "CASE":
            return self.case_stmt(line, pos)
        if word in ("EXIT", "CONTINUE"):
            return self.exit_stmt(line, pos)
        if word == "RETURN":
            return self.return_stmt(line, pos)
        if word == "RAISE":
            return self.raise_stmt(line, pos)
        if word == "ASSERT":
            self.next()
            cond = self.expression((",", ";"))
            message = self.expression((";",)) if self.accept(",") else None
            self.expect(";")
            return N.Assert(line, pos, cond, message)
        if word == "PERFORM":
            self.next()
            return self.sql_statement(line, pos, perform=True)
        if word == "EXECUTE":
            return self.execute_stmt(line, pos)
        if word == "GET":
            return self.get_diagnostics(line, pos)
        if word == "NULL" and self._next_is(1, ";"):
            self.i += 2
            return N.Null(line, pos)
        if word in ("OPEN", "FETCH", "MOVE", "CLOSE"):
            raise SqlError(FEATURE_NOT_SUPPORTED, f"{word} (cursors in PL/pgSQL) is not supported")
        if word in ("COMMIT", "ROLLBACK"):
            self.next()
            self.accept("WORK", "TRANSACTION")
            chain = False
            if self.accept("AND"):
                chain = self.accept("NO") is None
                self.expect("CHAIN")
            self.expect(";")
            return N.EndTransaction(line, pos, word == "COMMIT", chain)
        if t.kind in ("word", "ident", "param"):
            assign = self.assignment(line, pos)
            if assign is not None:
                return assign
        if word in _SQL_COMMANDS:
            return self.sql_statement(line, pos)
        raise self.error_at(t)

    def loop_body(self, label: str | None, scope: _Scope | None = None) -> tuple[N.Stmt, ...]:
        """A loop's statements up to END LOOP [label]; in ``scope`` (the loop's, holding an
        integer FOR's variable) if given."""
        self.scopes.append(scope or _Scope(label, loop=True))
        try:
            body = self.statements("END")
        finally:
            self.scopes.pop()
        self.expect("END")
        self.expect("LOOP")
        self.end_label(label)
        self.expect(";")
        return tuple(body)

    def if_stmt(self, line: int, pos: int) -> N.If:
        self.expect("IF")
        branches = []
        cond = self.expression(("THEN",))
        self.expect("THEN")
        branches.append((cond, tuple(self.statements("ELSIF", "ELSEIF", "ELSE", "END"))))
        otherwise = None
        while True:
            if self.accept("ELSIF", "ELSEIF"):
                cond = self.expression(("THEN",))
                self.expect("THEN")
                branches.append((cond, tuple(self.statements("ELSIF", "ELSEIF", "ELSE", "END"))))
                continue
            if self.accept("ELSE"):
                otherwise = tuple(self.statements("END"))
            break
        self.expect("END")
        self.expect("IF")
        self.expect(";")
        return N.If(line, pos, tuple(branches), otherwise)

    def case_stmt(self, line: int, pos: int) -> N.Case:
        self.expect("CASE")
        selector = slot = None
        if not self.at("WHEN"):
            selector = self.expression(("WHEN",))
            slot = self._hidden()
        whens = []
        if not self.at("WHEN"):
            raise self.error_at(self.peek())
        while self.accept("WHEN"):
            if slot is not None:
                start = self.i
                end = self.scan_to(("THEN",))
                if end == start:
                    raise self.error_at(self.peek())
                first, last = self.tokens[start], self.tokens[end - 1]
                source = self.body[first.pos : last.end]
                name = f"__case_selector_{slot}__"
                self.scopes.append(_Scope(None, {name: self.decls[slot]}))
                try:
                    head = f"SELECT {name} IN ("
                    cond = self.sql_piece(
                        head + source + ")", source, first.pos, prefix=len(head), substitute=True
                    )
                finally:
                    self.scopes.pop()
            else:
                cond = self.expression(("THEN",))
            self.expect("THEN")
            whens.append((cond, tuple(self.statements("WHEN", "ELSE", "END"))))
        otherwise = tuple(self.statements("END")) if self.accept("ELSE") else None
        self.expect("END")
        self.expect("CASE")
        self.expect(";")
        return N.Case(line, pos, selector, slot, tuple(whens), otherwise)

    def for_loop(self, label: str | None, line: int, pos: int) -> N.Stmt:
        self.expect("FOR")
        names = [self.name_token()]
        while self.accept(","):
            names.append(self.name_token())
        self.expect("IN")
        if len(names) == 1 and self._integer_range():
            reverse = self.accept("REVERSE") is not None
            lower = self.expression(("..",))
            self.expect("..")
            upper = self.expression(("BY", "LOOP"))
            step = self.expression(("LOOP",)) if self.accept("BY") else None
            self.expect("LOOP")
            scope = _Scope(label, loop=True)
            self.scopes.append(scope)
            try:
                var = self._declare(names[0].name, "integer")
            finally:
                self.scopes.pop()
            body = self.loop_body(label, scope)
            return N.ForInt(line, pos, label, var, lower, upper, step, reverse, body)
        targets = self.row_targets(names)
        if self.accept("EXECUTE"):
            command = self.expression(("USING", "LOOP"))
            using = self.using_list(("LOOP",)) if self.accept("USING") else ()
            self.expect("LOOP")
            return N.ForQuery(
                line, pos, label, targets, None, command, using, self.loop_body(label)
            )
        start = self.i
        end = self.scan_to(("LOOP",))
        query = self.sql_text(start, end)
        self.expect("LOOP")
        return N.ForQuery(line, pos, label, targets, query, None, (), self.loop_body(label))

    def _integer_range(self) -> bool:
        depth = 0
        for t in self.tokens[self.i :]:
            if t.text in ("(", "["):
                depth += 1
            elif t.text in (")", "]"):
                depth -= 1
            elif depth == 0 and t.kind == "word" and t.upper == "LOOP":
                return False
            elif depth == 0 and t.text == "..":
                return True
            elif depth == 0 and t.text == ";":
                return False
        return False

    def row_targets(self, names: list[Token]) -> tuple[N.Target, ...]:
        targets = []
        for t in names:
            decl = self.lookup(t.name)
            if decl is None:
                raise SqlError(
                    DATATYPE_MISMATCH,
                    "loop variable of loop over rows must be a record variable or list of "
                    "scalar variables",
                    position=t.pos + 1,
                )
            self._check_assignable(decl, t)
            targets.append(N.Target(t.name, N.VarRef(decl.slot)))
        if len(targets) > 1 and any(
            self.decls[x.ref.slot].kind in ("record", "rowtype") for x in targets
        ):
            raise syntax_error(
                "record variable cannot be part of multiple-item INTO list", names[0].pos
            )
        return tuple(targets)

    def foreach(self, label: str | None, line: int, pos: int) -> N.ForEach:
        self.expect("FOREACH")
        names = [self.name_token()]
        while self.accept(","):
            names.append(self.name_token())
        slice_ = 0
        if self.accept("SLICE"):
            t = self.next()
            if t.kind != "num" or not t.text.isdigit():
                raise self.error_at(t)
            slice_ = int(t.text)
        self.expect("IN")
        self.expect("ARRAY")
        array = self.expression(("LOOP",))
        self.expect("LOOP")
        targets = self.row_targets(names)
        return N.ForEach(line, pos, label, targets, slice_, array, self.loop_body(label))

    def exit_stmt(self, line: int, pos: int) -> N.Exit:
        t = self.next()
        is_continue = t.upper == "CONTINUE"
        label = None
        u = self.peek()
        if u is not None and (u.kind == "ident" or (u.kind == "word" and u.upper != "WHEN")):
            self.i += 1
            label = u.name
            scope = self.labelled(label)
            if scope is None:
                raise syntax_error(
                    f'there is no label "{label}" attached to any block or loop enclosing '
                    "this statement",
                    u.pos,
                )
            if is_continue and not scope.loop:
                raise syntax_error(f'block label "{label}" cannot be used in CONTINUE', u.pos)
        if label is None and not any(s.loop for s in self.scopes):
            message = (
                "CONTINUE cannot be used outside a loop"
                if is_continue
                else "EXIT cannot be used outside a loop, unless it has a label"
            )
            raise syntax_error(message, t.pos)
        cond = self.expression((";",)) if self.accept("WHEN") else None
        self.expect(";")
        return N.Exit(line, pos, label, cond, is_continue)

    def return_stmt(self, line: int, pos: int) -> N.Stmt:
        t = self.expect("RETURN")
        if self.at("NEXT", "QUERY"):
            raise SqlError(FEATURE_NOT_SUPPORTED, f"RETURN {self.peek().upper} is not supported")  # type: ignore[union-attr]
        if self.accept(";"):
            return N.Return(line, pos, None)
        if self.returns_void:
            raise SqlError(
                DATATYPE_MISMATCH,
                "RETURN cannot have a parameter in function returning void",
                position=self.pos() + 1,
            )
        del t
        expr = self.expression((";",))
        self.expect(";")
        return N.Return(line, pos, expr)

    def raise_stmt(self, line: int, pos: int) -> N.Raise:
        self.expect("RAISE")
        if self.accept(";"):
            return N.Raise(line, pos, "EXCEPTION", None, reraise=True)
        level = "EXCEPTION"
        t = self.peek()
        if t is not None and t.kind == "word" and t.upper in _LEVELS:
            level = t.upper
            self.i += 1
        message = condition = None
        args: list[N.Sql] = []
        t = self.peek()
        if t is None:
            raise self.error_at(None)
        if t.kind == "str":
            self.i += 1
            message = string_value(t.text)
            while self.accept(","):
                args.append(self.expression((",", ";", "USING")))
            wanted = _placeholders(message)
            if wanted < len(args):
                raise syntax_error("too many parameters specified for RAISE", None)
            if wanted > len(args):
                raise syntax_error("too few parameters specified for RAISE", None)
        elif t.kind == "word" and t.upper == "SQLSTATE":
            self.i += 1
            code = self.next()
            if code.kind != "str":
                raise self.error_at(code)
            value = string_value(code.text)
            if not conditions.valid_sqlstate(value):
                raise SqlError("42602", "invalid SQLSTATE code", position=code.pos + 1)
            condition = "sqlstate:" + value
        elif t.kind in ("word", "ident") and t.upper != "USING":
            self.i += 1
            if conditions.by_name(t.name) is None:
                raise SqlError(UNDEFINED_OBJECT, f'unrecognized exception condition "{t.name}"')
            condition = t.name
        options: list[N.RaiseOption] = []
        if self.accept("USING"):
            while True:
                o = self.name_token()
                name = o.name
                if name not in _RAISE_OPTIONS:
                    raise SqlError(
                        SYNTAX_ERROR,
                        f'unrecognized RAISE statement option "{o.text}"',
                        position=o.pos + 1,
                    )
                self.expect("=", ":=")
                options.append(N.RaiseOption(name, self.expression((",", ";"))))
                if not self.accept(","):
                    break
        self.expect(";")
        if message is None and condition is None and not options:
            raise self.error_at(self.tokens[self.i - 1])
        return N.Raise(line, pos, level, message, tuple(args), condition, tuple(options))

    def execute_stmt(self, line: int, pos: int) -> N.Execute:
        self.expect("EXECUTE")
        command = self.expression(("INTO", "USING", ";"))
        into = None
        strict = False
        using: tuple[N.Sql, ...] = ()
        while True:
            if self.accept("INTO"):
                if into is not None:
                    raise self.error_at(self.tokens[self.i - 1])
                strict = self.accept("STRICT") is not None
                into = self.into_targets()
            elif self.accept("USING"):
                if using:
                    raise self.error_at(self.tokens[self.i - 1])
                using = self.using_list(("INTO", ";"))
            else:
                break
        self.expect(";")
        return N.Execute(line, pos, command, into, strict, using)

    def using_list(self, terminators: tuple[str, ...]) -> tuple[N.Sql, ...]:
        out = [self.expression((",", *terminators))]
        while self.accept(","):
            out.append(self.expression((",", *terminators)))
        return tuple(out)

    def get_diagnostics(self, line: int, pos: int) -> N.GetDiagnostics:
        self.expect("GET")
        stacked = False
        if self.accept("STACKED"):
            stacked = True
        else:
            self.accept("CURRENT")
        self.expect("DIAGNOSTICS")
        items = []
        while True:
            t = self.peek()
            target = self.assign_target()
            if target is None:
                if t is not None and t.kind in ("word", "ident"):
                    raise syntax_error(f'"{t.name}" is not a known variable', t.pos)
                raise self.error_at(t)
            self.expect("=", ":=")
            item = self.name_token()
            if item.name not in _DIAGNOSTICS[stacked]:
                what = "STACKED" if stacked else "CURRENT"
                raise syntax_error(
                    f"diagnostics item {item.text.upper()} is not allowed in GET {what} DIAGNOSTICS"
                    if item.name in _DIAGNOSTICS[not stacked]
                    else f'unrecognized GET DIAGNOSTICS item at or near "{item.text}"',
                    item.pos,
                )
            items.append((target, item.name))
            if not self.accept(","):
                break
        self.expect(";")
        return N.GetDiagnostics(line, pos, stacked, tuple(items))

    # -- assignment and INTO targets -------------------------------------------------------

    def assign_target(self) -> N.Target | None:
        """A variable, ``record.field`` or ``array[subscript]`` at the current token, if the
        current token names a variable (the position is left after it)."""
        start = self.i
        t = self.peek()
        if t is None or t.kind not in ("word", "ident", "param"):
            return None
        parts = [t.text if t.kind == "param" else t.name]
        self.i += 1
        while self.at(".") and (u := self.peek(1)) is not None and u.kind in ("word", "ident"):
            parts.append(u.name)
            self.i += 2
        found = None
        for n in range(len(parts), 0, -1):
            found = self.resolve(parts[:n])
            if found is not None:
                self.i = start + 1 + 2 * (n - 1)
                break
        if found is None:
            self.i = start
            return None
        ref, decl = found
        self._check_assignable(decl, t)
        subscripts: list[N.Sql] = []
        while self.accept("["):
            subscripts.append(self.expression(("]",)))
            self.expect("]")
        return N.Target(".".join(parts), ref, tuple(subscripts))

    def _check_assignable(self, decl: N.VarDecl, t: Token) -> None:
        if decl.constant:
            raise SqlError(
                ERROR_IN_ASSIGNMENT,
                f'variable "{decl.name}" is declared CONSTANT',
                position=t.pos + 1,
            )

    def assignment(self, line: int, pos: int) -> N.Assign | None:
        start = self.i
        t = self.peek()
        assert t is not None
        nxt = self.peek(1)
        command = t.kind == "word" and t.upper in _SQL_COMMANDS
        target = self.assign_target()
        if target is None:
            if nxt is not None and (nxt.text == ":=" or (nxt.text == "=" and not command)):
                raise syntax_error(f'"{t.name}" is not a known variable', t.pos)
            return None
        if not self.accept(":=", "="):
            self.i = start
            if command:
                return None
            raise self.error_at(self.tokens[start + 1] if start + 1 < len(self.tokens) else None)
        expr = self.expression((";",))
        self.expect(";")
        return N.Assign(line, pos, target, expr)

    def into_targets(self) -> tuple[N.Target, ...]:
        targets = []
        while True:
            t = self.peek()
            target = self.assign_target()
            if target is None:
                if t is None:
                    raise self.error_at(None)
                if t.kind in ("word", "ident"):
                    raise syntax_error(f'"{t.name}" is not a known variable', t.pos)
                raise self.error_at(t)
            targets.append(target)
            if not (self.at(",") and self._target_follows()):
                break
            self.next()
        if len(targets) > 1 and any(
            self.decls[x.ref.slot].kind in ("record", "rowtype") and x.ref.field is None
            for x in targets
        ):
            raise syntax_error("record variable cannot be part of multiple-item INTO list", None)
        return tuple(targets)

    def _target_follows(self) -> bool:
        t = self.peek(1)
        return t is not None and t.kind in ("word", "ident") and self.lookup(t.name) is not None

    # -- SQL pieces ------------------------------------------------------------------------

    def scan_to(self, terminators: tuple[str, ...]) -> int:
        """Advance to the first of ``terminators`` outside parentheses; the index reached."""
        depth = 0
        while True:
            t = self.peek()
            if t is None:
                raise self.error_at(None)
            if depth == 0 and t.kind in ("word", "op") and t.upper in terminators:
                return self.i
            if t.text in ("(", "["):
                depth += 1
            elif t.text in (")", "]"):
                depth -= 1
                if depth < 0:
                    raise self.error_at(t)
            elif t.text == ";" and (depth > 0 or ";" not in terminators):
                if depth > 0:
                    raise syntax_error('mismatched parentheses at or near ";"', t.pos)
                raise self.error_at(t)
            self.i += 1

    def expression(self, terminators: tuple[str, ...]) -> N.Sql:
        start = self.i
        end = self.scan_to(terminators)
        if end == start:
            raise self.error_at(self.peek())
        first, last = self.tokens[start], self.tokens[end - 1]
        source = self.body[first.pos : last.end]
        return self.sql_piece("SELECT " + source, source, first.pos, prefix=7, substitute=True)

    def sql_text(self, start: int, end: int, blank: tuple[int, int] | None = None) -> N.Sql:
        """The SQL statement made of tokens ``start`` to ``end`` (exclusive), with the body
        span ``blank`` (its INTO clause) left out."""
        if end == start:
            raise self.error_at(self.peek())
        first, last = self.tokens[start], self.tokens[end - 1]
        source = self.body[first.pos : last.end]
        text = source
        if blank is not None:
            a, b = blank[0] - first.pos, blank[1] - first.pos
            text = text[:a] + " " * (b - a) + text[b:]
        substitute = first.upper in _SUBSTITUTED or first.text == "("
        return self.sql_piece(text, source, first.pos, prefix=0, substitute=substitute)

    def sql_statement(self, line: int, pos: int, *, perform: bool = False) -> N.ExecSql:
        start = self.i
        into: tuple[N.Target, ...] | None = None
        strict = False
        blank = None
        prev: Token | None = None
        depth = 0
        first = self.peek()
        while True:
            t = self.peek()
            if t is None:
                raise self.unexpected_end()
            if depth == 0 and t.text == ";":
                break
            if t.text in ("(", "["):
                depth += 1
            elif t.text in (")", "]"):
                depth -= 1
            if (
                t.kind == "word"
                and t.upper == "INTO"
                and into is None
                and not perform
                and (prev is None or prev.upper not in ("INSERT", "MERGE"))
                and first is not None
                and first.upper not in ("IMPORT",)
            ):
                into_pos = t.pos
                self.i += 1
                strict = self.accept("STRICT") is not None
                into = self.into_targets()
                blank = (into_pos, self.tokens[self.i - 1].end)
                prev = self.tokens[self.i - 1]
                continue
            prev = t
            self.i += 1
        end = self.i
        self.expect(";")
        if perform:
            if end == start:
                raise self.error_at(self.tokens[end])
            a, b = self.tokens[start], self.tokens[end - 1]
            source = self.body[a.pos : b.end]
            sql = self.sql_piece(
                "SELECT " + source, "SELECT " + source, a.pos, prefix=7, substitute=True
            )
            return N.ExecSql(line, pos, sql, perform=True)
        sql = self.sql_text(start, end, blank)
        return N.ExecSql(line, pos, sql, into, strict)

    def sql_piece(
        self,
        text: str,
        source: str,
        pos: int,
        *,
        prefix: int,
        substitute: bool,
    ) -> N.Sql:
        """A piece of SQL whose source begins at body offset ``pos`` and at ``prefix`` in
        ``text``: its variables replaced by parameters."""
        if not substitute:
            return N.Sql(text, (), source, pos, prefix)  # a utility statement, as written
        checks: list[tuple[str, tuple[str, ...]]] = []
        spans = self._references(text, pos - prefix, checks)
        refs: list[N.VarRef] = []
        out = []
        last = 0
        first_sub = None
        for a, b, ref in sorted(spans, key=lambda s: s[0]):
            if a < last:
                continue
            if ref not in refs:
                refs.append(ref)
            out.append(text[last:a])
            out.append(f"${refs.index(ref) + 1}")
            last = b
            if first_sub is None:
                first_sub = a
        out.append(text[last:])
        return N.Sql(
            "".join(out), tuple(refs), source, pos, prefix, first_sub is not None, tuple(checks)
        )

    def _references(
        self, text: str, offset: int, checks: list[tuple[str, tuple[str, ...]]]
    ) -> list[tuple[int, int, N.VarRef]]:
        """(start, end, variable) of each reference to a variable in ``text`` (whose offset
        0 is body offset ``offset``)."""
        spans: list[tuple[int, int, N.VarRef]] = []
        for t in tokenize(text):
            if t.kind == "param":
                decl = self.scopes[0].names.get(t.text)
                if decl is None:
                    raise SqlError(
                        UNDEFINED_PARAMETER,
                        f"there is no parameter {t.text}",
                        position=offset + t.pos + 1,
                    )
                spans.append((t.pos, t.end, N.VarRef(decl.slot)))
        try:
            tree = _parse_sql(text)
        except (ParseError, TokenError, ValueError, RecursionError):
            tree = None
        if tree is None:
            return spans + self._token_references(text)
        for col in tree.find_all(exp.Column):
            if _is_set_target(col) or _is_output_name(col):
                continue
            idents = [p for p in col.parts if isinstance(p, exp.Identifier)]
            if len(idents) != len(col.parts) or not idents:
                continue
            names = [p.name if p.quoted else p.name.lower() for p in idents]
            found = self.resolve(names)
            if found is None:
                continue
            start = idents[0].meta.get("start")
            end = idents[-1].meta.get("end")
            if start is None or end is None:
                continue
            spans.append((start, end + 1, found[0]))
            if len(names) == 1:
                tables = _visible_tables(col)
                if tables:
                    checks.append((names[0], tables))
        return spans

    def _token_references(self, text: str) -> list[tuple[int, int, N.VarRef]]:
        """The references found token by token, for SQL sqlglot cannot parse."""
        tokens = tokenize(text)
        spans = []
        for k, t in enumerate(tokens):
            if t.kind not in ("word", "ident"):
                continue
            before = tokens[k - 1] if k else None
            after = tokens[k + 1] if k + 1 < len(tokens) else None
            if before is not None and before.text in (".", "::"):
                continue
            if after is not None and after.text in ("(", "."):
                continue
            decl = self.lookup(t.name)
            if decl is not None and t.upper not in ("SELECT",):
                spans.append((t.pos, t.end, N.VarRef(decl.slot)))
        return spans


_FIELDED = frozenset({"record", "rowtype", "named"})
"""Kinds of variables whose fields a dotted name may name."""


def _builtin_type(text: str) -> bool:
    """Whether a type as written is a built-in one (not an enum or a table's row type)."""
    base = re.sub(r"\(.*?\)|\[\s*\d*\s*\]", " ", text).strip().lower()
    base = re.sub(r"\s+", " ", base).removesuffix(" array").replace('"', "")
    return T.lookup_type_name(base) is not None or base in T.SERIAL_NAMES


def _fold(name: str) -> str:
    return name[1:-1].replace('""', '"') if name.startswith('"') else name.lower()


@lru_cache(maxsize=2048)
def _parse_sql(text: str) -> exp.Expression | None:
    return sqlglot.parse_one(text, read="postgres")


def _table_name(node: exp.Expression | None) -> str | None:
    if isinstance(node, exp.Schema):
        node = node.this
    if not isinstance(node, exp.Table) or not isinstance(node.this, exp.Identifier):
        return None
    parts = [p for p in (node.args.get("db"), node.this) if isinstance(p, exp.Identifier)]
    return ".".join(p.name if p.quoted else p.name.lower() for p in parts)


def _visible_tables(col: exp.Column) -> tuple[str, ...]:
    """The tables whose columns a column reference may name: those of the FROM lists (and
    UPDATE / DELETE targets) of the statements around it, an INSERT's target in its ON
    CONFLICT and RETURNING clauses. A derived table in FROM does not see its query's."""
    out: list[str] = []
    node: exp.Expression = col
    while node.parent is not None:
        parent = node.parent
        key = node.arg_key
        found: list[exp.Expression | None] = []
        if isinstance(parent, exp.Select) and key not in ("from_", "joins"):
            found.append(parent.args.get("from_"))
            found.extend(parent.args.get("joins") or [])
        elif isinstance(parent, exp.Update):
            found.append(parent.this)
            found.append(parent.args.get("from_"))
        elif isinstance(parent, exp.Delete):
            found.append(parent.this)
            found.extend(parent.args.get("using") or [])
        elif isinstance(parent, exp.Insert) and key in ("conflict", "returning"):
            found.append(parent.this)
        for item in found:
            if isinstance(item, exp.From | exp.Join):
                item = item.this
            name = _table_name(item)
            if name is not None and name not in out:
                out.append(name)
        node = parent
    return tuple(out)


def _is_output_name(col: exp.Column) -> bool:
    """Whether ``col`` is a bare ORDER BY item naming an output column of its SELECT (which
    Postgres reads before any variable: ``SELECT g AS n ... ORDER BY n``)."""
    ordered = col.parent
    order = ordered.parent if isinstance(ordered, exp.Ordered) else None
    select = order.parent if isinstance(order, exp.Order) else None
    if col.table or not isinstance(select, exp.Select):
        return False
    return col.name.lower() in {n.lower() for n in select.named_selects}


def _is_set_target(col: exp.Column) -> bool:
    """Whether a column is the target of UPDATE's (or ON CONFLICT's) SET, or a conflict key."""
    node: exp.Expression = col
    while isinstance(node.parent, exp.Bracket | exp.Dot) and node.arg_key == "this":
        node = node.parent
    parent = node.parent
    if (
        isinstance(parent, exp.EQ)
        and node.arg_key == "this"
        and isinstance(parent.parent, exp.Update | exp.OnConflict)
        and parent.arg_key == "expressions"
    ):
        return True
    up: exp.Expression | None = col
    while up is not None:
        if up.arg_key == "conflict_keys":
            return True
        up = up.parent
    return False


def _placeholders(fmt: str) -> int:
    n = 0
    i = 0
    while i < len(fmt):
        if fmt[i] == "%":
            if fmt.startswith("%%", i):
                i += 2
                continue
            n += 1
        i += 1
    return n


def string_value(text: str) -> str:
    """The value of a string constant token (quoted, ``E'...'`` or dollar-quoted), as the
    utility statements' tokens read it."""
    return utility.Token("dollar" if text.startswith("$") else "str", text, 0).value


@lru_cache(maxsize=256)
def parse(body: str) -> N.Function:
    """A DO block's body, parsed (cached: the tree is immutable). Errors are SqlErrors whose
    positions count from the body's start."""
    return Parser(body).parse()


def parse_function(
    body: str, params: Sequence[Param], *, returns_void: bool, name: str
) -> N.Function:
    """A function body with its parameters (named, and ``$1``...) for CREATE FUNCTION."""
    return Parser(body, params, returns_void=returns_void, name=name).parse()
