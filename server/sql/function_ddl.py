"""CREATE FUNCTION / PROCEDURE, DROP FUNCTION / PROCEDURE and CALL's statement, for
routines in LANGUAGE sql and plpgsql.

A SQL function whose body is one query (SELECT, VALUES, a set operation, WITH) is expanded
into the statements that call it (:mod:`percolator.server.sql.user_functions`); other SQL
bodies (data changes, several statements) run at each call, as PL/pgSQL bodies do
(server/session_functions.py). CREATE binds a SQL body's statements against the catalog, as
Postgres does with ``check_function_bodies`` on, so a missing table or a result that does
not fit the declared return type fails at once (42P01, 42P13); the session parses a PL/pgSQL
body. Other statements in SQL bodies (DDL) and other languages are 0A000 (42704 for a
language that does not exist).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

from percolator.server.sql import casts, schemas
from percolator.server.sql import types as T
from percolator.server.sql.catalog import Catalog, FunctionArg, FunctionDef, ViewColumn
from percolator.server.sql.errors import (
    DEPENDENT_OBJECTS_STILL_EXIST,
    DUPLICATE_FUNCTION,
    SYNTAX_ERROR,
    UNDEFINED_FUNCTION,
    UNDEFINED_OBJECT,
    WRONG_OBJECT_TYPE,
    SqlError,
    unsupported,
)
from percolator.server.sql.types import SqlType, TypeId

if TYPE_CHECKING:
    from percolator.server.sql.utility import Token, TokenReader

INVALID_FUNCTION_DEFINITION = "42P13"

BindType = Callable[[exp.DataType], SqlType]
"""The expression binder's type binding (42704 for a type that does not exist)."""


@dataclass(frozen=True)
class ArgSpec:
    """A parameter as written: name ("" if none), type text, DEFAULT text (or None)."""

    name: str
    type_text: str
    default: str | None


@dataclass(frozen=True)
class CreateFunction:
    """``CREATE [OR REPLACE] FUNCTION name(args) RETURNS ... LANGUAGE ... AS ...``."""

    name: str
    args: tuple[ArgSpec, ...]
    returns: str | None
    """The return type's text; None with RETURNS TABLE."""
    returns_set: bool
    table_columns: tuple[tuple[str, str], ...]
    """RETURNS TABLE's (name, type text) pairs."""
    language: str | None
    body: str
    body_position: int
    """Where the body starts in the statement (0-based), for error positions."""
    or_replace: bool = False
    volatility: str = "v"
    strict: bool = False
    procedure: bool = False
    """CREATE PROCEDURE: no result, run by CALL."""


@dataclass(frozen=True)
class DropFunction:
    """``DROP {FUNCTION | PROCEDURE} [IF EXISTS] name[(types)] [, ...] [CASCADE |
    RESTRICT]``."""

    functions: tuple[tuple[str, tuple[str, ...] | None], ...]
    """(name, argument type texts or None when no list was given)."""
    if_exists: bool
    cascade: bool
    procedure: bool = False


@dataclass(frozen=True)
class Call:
    """``CALL name(args)``: ``call`` is the call's text (``name(args)``)."""

    call: str
    offset: int
    """Where the call starts in the statement (0-based)."""


def parse_call(r: TokenReader) -> Call:
    r.expect("CALL")
    start = r.peek()
    if start is None:
        r.error("syntax error at end of input")
    assert start is not None
    return Call(r.rest(), start.pos)


FunctionStatement = CreateFunction | DropFunction

_OPTION_WORDS = frozenset(
    {
        "LANGUAGE", "AS", "IMMUTABLE", "STABLE", "VOLATILE", "STRICT", "CALLED", "RETURNS",
        "SECURITY", "EXTERNAL", "PARALLEL", "COST", "ROWS", "SET", "LEAKPROOF", "NOT", "WINDOW",
        "RETURN", "BEGIN", "SUPPORT", "TRANSFORM",
    }
)  # fmt: skip
_IGNORED_OPTIONS = {"PARALLEL": 1, "COST": 1, "ROWS": 1}
"""Options that change only how Postgres plans or runs a function, with their argument
counts."""


# -- parsing (the reader is utility.TokenReader) ------------------------------------------------


def parse_create(r: TokenReader) -> CreateFunction:
    """CREATE [OR REPLACE] {FUNCTION | PROCEDURE} ...; ``r`` is at CREATE."""
    r.expect("CREATE")
    or_replace = r.accept("OR", "REPLACE")
    procedure = r.accept("PROCEDURE")
    if not procedure:
        r.expect("FUNCTION")
    return _CreateParser(r).parse(or_replace, procedure)


class _CreateParser:
    def __init__(self, r: TokenReader) -> None:
        self.rd = r

    def parse(self, or_replace: bool, procedure: bool) -> CreateFunction:
        r = self.rd
        name = r.public_name()
        args = tuple(_arg_spec(r, group) for group in _groups(r))
        returns: str | None = None
        returns_set = False
        table: tuple[tuple[str, str], ...] = ()
        language: str | None = None
        body: str | None = None
        body_position = 0
        volatility = "v"
        strict = False
        while not r.done():
            t = r.peek()
            assert t is not None
            if r.accept("RETURNS", "NULL", "ON", "NULL", "INPUT") or r.accept("STRICT"):
                strict = True
            elif r.accept("CALLED", "ON", "NULL", "INPUT"):
                strict = False
            elif not procedure and r.accept("RETURNS"):
                if r.accept("TABLE"):
                    table = tuple(_table_column(r, g) for g in _groups(r))
                    returns_set = True
                else:
                    returns_set = r.accept("SETOF")
                    returns = _type_text(r)
            elif r.accept("LANGUAGE"):
                language = r.next().value.lower()
            elif r.accept("AS"):
                body_token = r.next()
                if body_token.kind not in ("str", "dollar"):
                    r.error(f'syntax error at or near "{body_token.text}"', body_token)
                if r.accept(","):
                    raise unsupported("functions in object files (AS 'file', 'symbol')")
                body = body_token.value
                body_position = body_token.pos + (len(body_token.text) - len(body)) // 2
            elif r.accept("RETURN"):
                start = r.peek()
                body_position = (start.pos if start is not None else len(r.sql)) - len("SELECT ")
                body = "SELECT " + r.rest()
                r.i = len(r.tokens)
            elif r.accept("BEGIN", "ATOMIC"):
                body_position, body = _atomic_body(r)
            elif t.upper in ("IMMUTABLE", "STABLE", "VOLATILE"):
                volatility = r.next().upper[0].lower()
            elif r.accept("EXTERNAL", "SECURITY") or r.accept("SECURITY"):
                r.next()  # INVOKER / DEFINER: privileges are not enforced
            elif r.accept("NOT", "LEAKPROOF") or r.accept("LEAKPROOF"):
                pass
            elif t.upper in _IGNORED_OPTIONS:
                r.next()
                for _ in range(_IGNORED_OPTIONS[t.upper]):
                    r.next()
            elif t.upper in ("SET", "WINDOW", "SUPPORT", "TRANSFORM"):
                raise unsupported(f"CREATE FUNCTION ... {t.upper}")
            else:
                r.error(f'syntax error at or near "{t.text}"', t)
        if body is None:
            raise SqlError(INVALID_FUNCTION_DEFINITION, "no function body specified")
        if procedure:
            returns = "void"
        elif returns is None and not table:
            raise SqlError(INVALID_FUNCTION_DEFINITION, "function result type must be specified")
        return CreateFunction(
            name, args, returns, returns_set, table, language, body, body_position,
            or_replace, volatility, strict, procedure,
        )  # fmt: skip


def _groups(r: TokenReader) -> list[list[Token]]:
    """The comma-separated token groups of a parenthesized list (empty for ``()``)."""
    r.expect("(")
    groups: list[list[Token]] = [[]]
    depth = 0
    while True:
        t = r.next()
        if t.text in ("(", "[") and t.kind == "punct":
            depth += 1
        elif t.text in (")", "]") and t.kind == "punct":
            if depth == 0 and t.text == ")":
                break
            depth -= 1
        elif t.text == "," and t.kind == "punct" and depth == 0:
            groups.append([])
            continue
        groups[-1].append(t)
    return [] if groups == [[]] else groups


def _span(r: TokenReader, tokens: list[Token]) -> str:
    first, last = tokens[0], tokens[-1]
    return r.sql[first.pos : last.pos + len(last.text)]


def _arg_spec(r: TokenReader, tokens: list[Token]) -> ArgSpec:
    if not tokens:
        r.error('syntax error at or near ")"')
    mode = tokens[0].upper
    if mode in ("OUT", "INOUT", "VARIADIC"):
        raise unsupported(f"{mode} parameters")
    if mode == "IN":
        tokens = tokens[1:]
    default = None
    for i, t in enumerate(tokens):
        if t.upper == "DEFAULT" or (t.kind == "punct" and t.text == "="):
            default = _span(r, tokens[i + 1 :])
            tokens = tokens[:i]
            break
    if not tokens:
        r.error("syntax error in a parameter")
    if _named(tokens, _span(r, tokens)):
        return ArgSpec(tokens[0].value, _span(r, tokens[1:]), default)
    return ArgSpec("", _span(r, tokens), default)


_MULTIWORD_TYPES = frozenset({"double", "character", "char", "bit", "national", "timestamp",
                              "time", "interval"})  # fmt: skip
"""The first words of the types written in several words (``double precision``)."""


def _named(tokens: list[Token], text: str) -> bool:
    """Whether a parameter's first word is its name (``name text``, ``ts timestamp``), not
    the start of its type (``int[]``, ``numeric(10, 2)``, ``double precision``)."""
    if len(tokens) < 2 or tokens[1].kind not in ("word", "ident"):
        return False
    return not (tokens[0].value in _MULTIWORD_TYPES and _is_type(text))


def _table_column(r: TokenReader, tokens: list[Token]) -> tuple[str, str]:
    if len(tokens) < 2:
        r.error("syntax error in RETURNS TABLE")
    return tokens[0].value, _span(r, tokens[1:])


def _type_text(r: TokenReader) -> str:
    """The tokens of a type, up to the next option keyword."""
    tokens: list[Token] = []
    depth = 0
    while not r.done():
        t = r.peek()
        assert t is not None
        if depth == 0 and t.kind == "word" and t.upper in _OPTION_WORDS:
            break
        if t.text in ("(", "["):
            depth += 1
        elif t.text in (")", "]"):
            depth -= 1
        tokens.append(r.next())
    if not tokens:
        r.error("syntax error: expected a type")
    return _span(r, tokens)


def _atomic_body(r: TokenReader) -> tuple[int, str]:
    """``BEGIN ATOMIC stmt; ... END``: the statements' text (the reader left past END)."""
    tokens = r.tokens[r.i :]
    ends = [i for i, t in enumerate(tokens) if t.upper == "END"]
    if not ends:
        r.error("syntax error at end of input")
    inner = tokens[: ends[-1]]
    r.i += ends[-1] + 1
    if not inner:
        return 0, ""
    return inner[0].pos, _span(r, inner)


def _is_type(text: str) -> bool:
    """Whether ``text`` reads as a built-in type by itself (``double precision``)."""
    try:
        dtype = exp.DataType.build(text, dialect="postgres")
    except (ParseError, ValueError):
        return False
    return dtype.this is not exp.DataType.Type.USERDEFINED


def parse_drop(r: TokenReader) -> DropFunction:
    """DROP FUNCTION [IF EXISTS] name[(types)] [, ...] [CASCADE | RESTRICT]."""
    r.expect("DROP")
    procedure = r.accept("PROCEDURE")
    if not procedure:
        r.expect("FUNCTION")
    if_exists = r.accept("IF", "EXISTS")
    items: list[tuple[str, tuple[str, ...] | None]] = []
    while True:
        name = r.public_name()
        types: tuple[str, ...] | None = None
        if r.at("("):
            types = tuple(_arg_spec(r, g).type_text for g in _groups(r))
        items.append((name, types))
        if not r.accept(","):
            break
    cascade = r.accept("CASCADE")
    if not cascade:
        r.accept("RESTRICT")
    r.end()
    return DropFunction(tuple(items), if_exists, cascade, procedure)


# -- catalog changes -----------------------------------------------------------------------------


def create(
    catalog: Catalog,
    stmt: CreateFunction,
    bind_type: BindType,
    session_view: Callable[[Catalog], Catalog] = lambda c: c,
) -> tuple[Catalog, FunctionDef]:
    """The catalog with the function (replaced, with OR REPLACE, when it exists), and the
    function. ``session_view`` adds what only the session sees (its temporary tables) to
    the catalog a SQL body is checked against. A PL/pgSQL body is the session's to check
    (it parses it before it commits)."""
    language = _check_language(stmt.language)
    plpgsql = language == "plpgsql"
    name = _creation_key(catalog, stmt.name)
    args = _args(stmt.args, bind_type)
    row_of = None
    is_trigger = (stmt.returns or "").strip().lower() in ("trigger", "pg_catalog.trigger")
    if plpgsql and stmt.returns_set:
        raise unsupported("set-returning functions in LANGUAGE plpgsql (RETURN NEXT)")
    if stmt.table_columns:
        columns = tuple(ViewColumn(n, _type(t, bind_type)) for n, t in stmt.table_columns)
        returns = T.RECORD
    elif (row := _row_type(catalog, stmt.returns)) is not None:
        # RETURNS [SETOF] table: the table's row type, its columns as RETURNS TABLE's.
        columns, returns, row_of = row, T.RECORD, stmt.returns
        if not stmt.returns_set:
            raise unsupported("functions returning one row of a table type (use SETOF)")
    elif is_trigger:
        _check_trigger_function(stmt, language)
        columns, returns = (), T.VOID
    else:
        assert stmt.returns is not None
        columns = ()
        returns = _type(stmt.returns, bind_type)
        if returns.id is TypeId.RECORD:
            raise unsupported(f"{language.upper()} functions returning {returns}")
    body = stmt.body if plpgsql else _sql_body(stmt.body)
    fn = FunctionDef(
        0, name, args, returns, body, stmt.returns_set, columns,
        language, stmt.volatility, stmt.strict, row_of=row_of, procedure=stmt.procedure,
        trigger=is_trigger,
    )  # fmt: skip
    existing = catalog.functions.get(fn.signature)
    if existing is not None:
        _check_replacement(existing, fn, stmt.or_replace)
        fn = fn.replace(id=existing.id, comment=existing.comment)
    else:
        fn_id, catalog = catalog.allocate_id()
        fn = fn.replace(id=fn_id)
    if not plpgsql:
        _check_body(session_view(catalog), fn)
    return catalog.with_function(fn), fn


def _check_trigger_function(stmt: CreateFunction, language: str) -> None:
    if language != "plpgsql":
        raise SqlError(
            INVALID_FUNCTION_DEFINITION, f"{language.upper()} functions cannot return type trigger"
        )
    if stmt.args:
        raise SqlError(
            INVALID_FUNCTION_DEFINITION,
            "trigger functions cannot have declared arguments",
            hint="The arguments of the trigger can be accessed through TG_NARGS and TG_ARGV "
            "instead.",
        )


def _row_type(catalog: Catalog, text: str | None) -> tuple[ViewColumn, ...] | None:
    """The columns of the table or view a return type names, if it names one."""
    if text is None or not re.fullmatch(
        r"[A-Za-z_][A-Za-z_0-9$]*(\.[A-Za-z_][A-Za-z_0-9$]*)?", text
    ):
        return None
    name = text.lower()
    key = name if "." in name else schemas.resolve(catalog, name)
    if "." in key:
        key = schemas.key(*schemas.split(key))
    table = catalog.tables.get(key)
    if table is not None:
        return tuple(ViewColumn(c.name, c.type) for c in table.columns)
    view = catalog.views.get(key)
    return view.columns if view is not None else None


def _check_language(language: str | None) -> str:
    if language is None:
        raise SqlError(INVALID_FUNCTION_DEFINITION, "no language specified")
    if language in ("sql", "plpgsql"):
        return language
    if language in ("c", "internal"):
        raise unsupported(f"functions in LANGUAGE {language} (only sql and plpgsql)")
    raise SqlError(UNDEFINED_OBJECT, f'language "{language}" does not exist')


def _creation_key(catalog: Catalog, name: str) -> str:
    if "." in name:
        schema, _ = schemas.split(name)
        if not schemas.exists(catalog, schema):
            raise SqlError("3F000", f'schema "{schema}" does not exist')
        return name
    return schemas.key(schemas.creation_schema(catalog), name)


def _type(text: str, bind_type: BindType) -> SqlType:
    try:
        dtype = exp.DataType.build(text, dialect="postgres", udt=True)
    except (ParseError, ValueError):
        raise SqlError(SYNTAX_ERROR, f'syntax error at or near "{text}"') from None
    if dtype.this is exp.DataType.Type.USERDEFINED and text.strip().lower() == "trigger":
        raise unsupported("a parameter of type trigger")
    return bind_type(dtype)


def _args(specs: tuple[ArgSpec, ...], bind_type: BindType) -> tuple[FunctionArg, ...]:
    out: list[FunctionArg] = []
    for spec in specs:
        # Postgres keeps no type modifier on a parameter: f(varchar(10)) is f(varchar).
        t = _type(spec.type_text, bind_type)
        t = SqlType(t.id, -1, t.array)
        if spec.default is None and out and out[-1].default is not None:
            raise SqlError(
                INVALID_FUNCTION_DEFINITION,
                "input parameters after one with a default value must also have defaults",
            )
        if spec.name and any(a.name == spec.name for a in out):
            raise SqlError(
                INVALID_FUNCTION_DEFINITION, f'parameter name "{spec.name}" used more than once'
            )
        out.append(FunctionArg(spec.name, t, spec.default))
    return tuple(out)


_WRITES = (exp.Insert, exp.Update, exp.Delete, exp.Merge)


def _sql_body(body: str) -> str:
    """The body, as written, when it is queries and data changes (42601 for a syntax
    error; 0A000 for other statements)."""
    try:
        statements = [s for s in sqlglot.parse(body, read="postgres") if s is not None]
    except ParseError as e:
        raise SqlError(SYNTAX_ERROR, f"syntax error in the function body: {e}") from None
    for statement in statements:
        if not isinstance(statement, (exp.Query, exp.Values, *_WRITES)):
            word = statement.sql(dialect="postgres").split(" ", 1)[0]
            raise unsupported(f"{word} in the body of a SQL function")
    return body


def _check_replacement(existing: FunctionDef, new: FunctionDef, or_replace: bool) -> None:
    bare = new.name.rpartition(".")[2]
    if existing.procedure != new.procedure:
        raise SqlError(
            WRONG_OBJECT_TYPE,
            "cannot change routine kind",
            detail=f'"{bare}" is a {kind_word(existing)}.',
        )
    if not or_replace:
        raise SqlError(
            DUPLICATE_FUNCTION, f'function "{bare}" already exists with same argument types'
        )
    for old_arg, new_arg in zip(existing.args, new.args, strict=True):
        if old_arg.name and old_arg.name != new_arg.name:
            raise SqlError(
                INVALID_FUNCTION_DEFINITION,
                f'cannot change name of input parameter "{old_arg.name}"',
                hint=f"Use DROP {kind_word(existing).upper()} {_signature_shown(existing)} first.",
            )
        if old_arg.default is not None and new_arg.default is None:
            raise SqlError(
                INVALID_FUNCTION_DEFINITION,
                "cannot remove parameter defaults from existing function",
                hint=f"Use DROP {kind_word(existing).upper()} {_signature_shown(existing)} "
                "first.",
            )
    if (existing.returns, existing.returns_set, existing.columns) != (
        new.returns,
        new.returns_set,
        new.columns,
    ):
        shown = ",".join(a.type.format() for a in existing.args)
        raise SqlError(
            INVALID_FUNCTION_DEFINITION,
            "cannot change return type of existing function",
            hint=f"Use DROP FUNCTION {bare}({shown}) first.",
        )


def _check_body(catalog: Catalog, fn: FunctionDef) -> None:
    """Bind the body's statements with each parameter a typed NULL, as Postgres validates a
    body at CREATE: a missing table, column or function fails here, and so does a result
    that does not fit the declared return type (42P13)."""
    from percolator.server.sql import user_functions
    from percolator.server.sql.binder import Binder  # the binder expands calls: no cycle
    from percolator.server.sql.expr_binder import Params

    nulls = [exp.Cast(this=exp.Null(), to=user_functions.data_type(a.type)) for a in fn.args]
    # Bound with the function in the catalog, as Postgres validates a body after storing
    # it: a body that reaches the function again is found here (0A000), not at a call.
    catalog = catalog.with_function(fn)
    statements = user_functions.parsed_statements(fn.body)
    if fn.returns_set and not user_functions.is_inlined(fn):
        raise unsupported("set-returning SQL functions whose body is not a single query")
    last: object = None
    for statement in statements:
        binder = Binder(catalog, Params())
        with binder.expanding(fn):
            last = binder.bind_statement(user_functions.substituted(statement, fn, nulls, catalog))
    if fn.returns.id is TypeId.VOID:
        return
    rel = getattr(last, "rel", None)
    columns = rel.columns if rel is not None else getattr(last, "returning_cols", None)
    if columns is None:
        raise SqlError(
            INVALID_FUNCTION_DEFINITION,
            f"return type mismatch in function declared to return {fn.returns}",
            detail="Function's final statement must be SELECT or INSERT/UPDATE/DELETE RETURNING.",
        )
    _check_result(fn, [c.type for c in columns])


def _check_result(fn: FunctionDef, got: list[SqlType]) -> None:
    wanted = [c.type for c in fn.columns] if fn.columns else [fn.returns]
    returns = "record" if fn.columns else fn.returns.format()
    if len(got) != len(wanted):
        detail = (
            "Final statement must return exactly one column."
            if not fn.columns
            else f"Final statement returns too {'many' if len(got) > len(wanted) else 'few'} "
            "columns."
        )
        raise _mismatch(returns, detail)
    for i, (src, dst) in enumerate(zip(got, wanted, strict=True)):
        if src == dst or src.id is TypeId.UNKNOWN or casts.can_assign(src, dst):
            continue
        if fn.columns:
            raise _mismatch(
                returns, f"Final statement returns {src} instead of {dst} at column {i + 1}."
            )
        raise _mismatch(returns, f"Actual return type is {src}.")


def _mismatch(returns: str, detail: str) -> SqlError:
    return SqlError(
        INVALID_FUNCTION_DEFINITION,
        f"return type mismatch in function declared to return {returns}",
        detail=detail,
    )


def _signature_shown(fn: FunctionDef) -> str:
    return f"{schemas.split(fn.name)[1]}({','.join(a.type.format() for a in fn.args)})"


def kind_word(fn: FunctionDef) -> str:
    return "procedure" if fn.procedure else "function"


def drop(catalog: Catalog, stmt: DropFunction, bind_type: BindType) -> tuple[Catalog, list[str]]:
    """The catalog without the functions (or procedures), and the notices of IF EXISTS."""
    notices: list[str] = []
    kind = "procedure" if stmt.procedure else "function"
    for name, types in stmt.functions:
        found = _find(catalog, name, types, bind_type, stmt.procedure)
        if found is None:
            shown = name
            if types is not None:
                shown += f"({','.join(_type(t, bind_type).format() for t in types)})"
            if stmt.if_exists:
                notices.append(f"{kind} {shown} does not exist, skipping")
                continue
            if types is None:
                raise SqlError(UNDEFINED_FUNCTION, f'could not find a {kind} named "{name}"')
            raise SqlError(UNDEFINED_FUNCTION, f"{kind} {shown} does not exist")
        catalog = _without_triggers_of(catalog, found, stmt.cascade, notices)
        catalog = catalog.without_function(found.signature)
    return catalog, notices


def _without_triggers_of(
    catalog: Catalog, fn: FunctionDef, cascade: bool, notices: list[str]
) -> Catalog:
    """The triggers that run ``fn`` dropped with CASCADE; 2BP01 without it."""
    from percolator.server.sql import trigger_ddl

    users = trigger_ddl.using(catalog, fn.signature)
    if not users:
        return catalog
    shown = f"{fn.name}({', '.join(a.type.format() for a in fn.args)})"
    lines = [f"trigger {t.name} on table {table.name} depends on function {shown}"
             for table, t in users]  # fmt: skip
    if not cascade:
        raise SqlError(
            DEPENDENT_OBJECTS_STILL_EXIST,
            f"cannot drop function {shown} because other objects depend on it",
            detail="\n".join(lines),
            hint="Use DROP ... CASCADE to drop the dependent objects too.",
        )
    for table, trigger in users:
        notices.append(f"drop cascades to trigger {trigger.name} on table {table.name}")
        current = catalog.tables[table.name]
        kept = tuple(t for t in current.triggers if t.name != trigger.name)
        catalog = catalog.with_table(current.replace(triggers=kept))
    return catalog


def _find(
    catalog: Catalog,
    name: str,
    types: tuple[str, ...] | None,
    bind_type: BindType,
    procedure: bool,
) -> FunctionDef | None:
    from percolator.server.sql import user_functions

    schema, bare = schemas.split(name) if "." in name else (None, name)
    overloads = [
        f for f in user_functions.candidates(catalog, bare, schema) if f.procedure == procedure
    ]
    if types is None:
        if len(overloads) > 1:
            raise SqlError(
                "42725",
                f'function name "{name}" is not unique',
                hint="Specify the argument list to select the function unambiguously.",
            )
        return overloads[0] if overloads else None
    wanted = [_type(t, bind_type) for t in types]
    for fn in overloads:
        if [(a.type.id, a.type.array) for a in fn.args] == [(t.id, t.array) for t in wanted]:
            return fn
    return None


# -- how a function is shown (pg_get_function_arguments, pg_get_functiondef, psql's \df) -------


def by_oid(catalog: Catalog, oid: object) -> FunctionDef | None:
    """The function with this OID, if one was made by CREATE FUNCTION."""
    for fn in catalog.functions.values():
        if fn.oid == oid:
            return fn
    return None


def arguments_text(fn: FunctionDef, defaults: bool = True) -> str:
    """``a integer, b integer DEFAULT 10`` (without the defaults: the identity arguments)."""
    parts = []
    mode = "IN " if fn.procedure else ""  # Postgres shows a procedure's modes
    for a in fn.args:
        text = mode + (f"{_ident(a.name)} {a.type.format()}" if a.name else a.type.format())
        if defaults and a.default is not None:
            text += f" DEFAULT {_default_text(a.default, a.type)}"
        parts.append(text)
    return ", ".join(parts)


def _default_text(default: str, t: SqlType) -> str:
    """A DEFAULT as Postgres shows it: a string literal with its cast to the type."""
    if re.fullmatch(r"'(?:[^']|'')*'", default.strip()):
        return f"{default.strip()}::{t.format()}"
    return default


def visible(catalog: Catalog, fn: FunctionDef) -> bool:
    """pg_function_is_visible: whether the function's bare name finds it on the path."""
    from percolator.server.sql import user_functions

    bare = schemas.split(fn.name)[1]
    return fn in user_functions.candidates(catalog, bare)


def result_text(fn: FunctionDef) -> str | None:
    """``integer``, ``SETOF integer`` or ``TABLE(x integer, y text)`` (None: a procedure)."""
    if fn.procedure:
        return None
    if fn.trigger:
        return "trigger"
    if fn.row_of is not None:
        return f"SETOF {fn.row_of}"
    if fn.columns:
        return "TABLE(" + ", ".join(f"{_ident(c.name)} {c.type.format()}" for c in fn.columns) + ")"
    return ("SETOF " if fn.returns_set else "") + fn.returns.format()


def definition_text(fn: FunctionDef) -> str:
    """pg_get_functiondef's text, laid out as Postgres lays it out."""
    schema, bare = schemas.split(fn.name)
    options = {"i": "IMMUTABLE", "s": "STABLE", "v": ""}[fn.volatility]
    if fn.strict:
        options = f"{options} STRICT".strip()
    head = f"CREATE OR REPLACE {kind_word(fn).upper()} {_ident(schema)}.{_ident(bare)}"
    lines = [f"{head}({arguments_text(fn)})"]
    if not fn.procedure:
        lines.append(f" RETURNS {result_text(fn)}")
    lines.append(f" LANGUAGE {fn.language}")
    if options:
        lines.append(f" {options}")
    tag = f"${kind_word(fn)}$"
    lines.append(f"AS {tag}{fn.body}{tag}")
    return "\n".join(lines) + "\n"


def _ident(name: str) -> str:
    from percolator.server.sql.quoting import quote_ident

    return quote_ident(name)
