"""Calls of functions run at the call: the session runs a PL/pgSQL body (server/plpgsql), or
the statements of a SQL body that is not one query, when a statement's operator awaits the
call, in the statement's transaction.

A SQL function whose body is one query never gets here: the binder expands its calls into
the statement (server/sql/user_functions.py). These are calls that wait, like nextval: the
binder allows them where an operator awaits such calls before it evaluates a row (a select
list, VALUES, a query's WHERE, an UPDATE's SET) and refuses them elsewhere with 0A000.
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from percolator.server.engine_api import Notice
from percolator.server.plpgsql import executor as plx
from percolator.server.plpgsql import nodes as N
from percolator.server.plpgsql import parser as plp
from percolator.server.session_plpgsql import SessionRunner
from percolator.server.sql import function_ddl, schemas, user_functions
from percolator.server.sql import types as T
from percolator.server.sql.binder import Binder
from percolator.server.sql.catalog import FunctionDef, TableDef, TriggerDef
from percolator.server.sql.errors import (
    SYNTAX_ERROR,
    UNDEFINED_FUNCTION,
    WRONG_OBJECT_TYPE,
    SqlError,
)
from percolator.server.sql.expr_binder import Params
from percolator.server.sql.scope import Scope
from percolator.server.sql.types import SqlType

if TYPE_CHECKING:
    from percolator.server.session import SqlSession

Row = tuple[object, ...]

MAX_DEPTH = 40
"""Nested PL/pgSQL calls allowed, 54001 beyond (Postgres's limit is its stack depth, a few
hundred calls deep; each of ours takes about 20 of Python's 1,000 frames)."""


_TRIGGER_PARAMS: tuple[tuple[str, str | None], ...] = (
    ("new", None), ("old", None), ("tg_name", "name"), ("tg_when", "text"),
    ("tg_level", "text"), ("tg_op", "text"), ("tg_relid", "oid"), ("tg_relname", "name"),
    ("tg_table_name", "name"), ("tg_table_schema", "name"), ("tg_nargs", "integer"),
    ("tg_argv", "text[]"),
)  # fmt: skip
"""What a trigger function's body sees, as Postgres declares it: NEW and OLD (records),
then the TG_ variables (:meth:`FunctionCaller.fire` gives their values in this order)."""


_TG_ARGV = re.compile(r"\btg_argv(\s*)\[", re.IGNORECASE)


def parse_body(fn: FunctionDef) -> N.Function:
    """The function's body, parsed (42601 for a syntax error, as CREATE FUNCTION reports)."""
    if fn.trigger:
        # TG_ARGV counts from 0 in Postgres; arrays here count from 1.
        body = _TG_ARGV.sub(r"tg_argv\1[1+", fn.body)
        return _parsed(fn.name, body, _TRIGGER_PARAMS, False)
    return _parsed(fn.name, fn.body, tuple((a.name, a.type.format()) for a in fn.args),
                   fn.returns.id is T.TypeId.VOID)  # fmt: skip


def check_body(fn: FunctionDef, offset: int) -> None:
    """Parse the body at CREATE FUNCTION: a syntax error fails it, its position in the
    statement (``offset``: where the body starts there)."""
    try:
        parse_body(fn)
    except SqlError as error:
        if error.position is not None:
            error.position += offset
        raise


@functools.lru_cache(maxsize=256)
def _parsed(
    name: str, body: str, params: tuple[tuple[str, str | None], ...], returns_void: bool
) -> N.Function:
    return plp.parse_function(
        body,
        [plp.Param(n or None, t) for n, t in params],
        returns_void=returns_void,
        name=name.rpartition(".")[2],
    )


class FunctionCaller:
    """A session's calls of functions run at the call (:attr:`ExecContext.functions`)."""

    def __init__(self, session: SqlSession) -> None:
        self.session = session
        self.sink: list[Notice] = []
        """Where the calls' notices go: the running statement's (the session points it at
        each statement's execution)."""
        self._depth = 0

    async def call(self, fn: FunctionDef, values: tuple[object, ...]) -> object:
        """Run ``fn`` on argument values already cast to its parameter types."""
        if fn.strict and any(v is None for v in values):
            return None
        shown = context_name(fn)
        typed = [(v, a.type) for v, a in zip(values, fn.args, strict=True)]
        value, src = await self._run(fn, typed, shown)
        if fn.returns.id is T.TypeId.VOID:
            # Postgres's PL/pgSQL gives a void value (printed empty), its SQL functions NULL.
            return "" if fn.language == "plpgsql" else None
        if src is None and fn.language == "sql":
            return None  # no row: NULL, as in Postgres
        if src is None:  # the body ended without RETURN
            raise SqlError(
                "2F005",
                "control reached end of function without RETURN",
                context=f"PL/pgSQL function {shown}",
            )
        return plx.coerce(value, src, fn.returns)

    async def fire(
        self,
        fn: FunctionDef,
        trigger: TriggerDef,
        table: TableDef,
        event: str,
        old: Row | None,
        new: Row | None,
    ) -> Row | None:
        """Run a trigger's function for one row (``old``/``new``: the table's row values,
        a table without a primary key's row id after them); the row it returned (None for
        NULL, and always for an AFTER trigger)."""
        width = len(table.columns)
        names = tuple(c.name for c in table.columns)
        types = tuple(c.type for c in table.columns)

        def record(row: Row | None) -> plx.Record:
            # OLD in an INSERT trigger (NEW in a DELETE one) is a row of NULLs, as in
            # Postgres: ``coalesce(OLD.x, 0)`` reads NULL there.
            values = list(row[:width]) if row is not None else [None] * width
            return plx.Record(names, types, values)

        schema, bare = schemas.split(table.name)
        values: list[tuple[object, SqlType]] = [
            (record(new), T.RECORD), (record(old), T.RECORD), (trigger.name, T.NAME),
            ("BEFORE" if trigger.before else "AFTER", T.TEXT),
            ("ROW" if trigger.row_level else "STATEMENT", T.TEXT),
            (event.upper(), T.TEXT), (table.oid, T.OID), (bare, T.NAME), (bare, T.NAME),
            (schema, T.NAME), (len(trigger.args), T.INT4), (list(trigger.args), T.TEXT_ARRAY),
        ]  # fmt: skip
        shown = f"{fn.name.rpartition('.')[2]}()"
        result, src = await self._run(fn, values, shown)
        if not trigger.before or not trigger.row_level:
            return None
        if src is None:
            raise SqlError(
                "2F005",
                "control reached end of trigger procedure without RETURN",
                context=f"PL/pgSQL function {shown}",
            )
        if result is None:
            return None
        if not isinstance(result, plx.Record) or result.names != names:
            raise SqlError(
                "42804",
                "returned row structure does not match the structure of the triggering table",
                context=f"PL/pgSQL function {shown}",
            )
        base = new if new is not None else old
        assert base is not None
        return tuple(result.values) + tuple(base[width:])

    async def _run(
        self, fn: FunctionDef, values: list[tuple[object, SqlType]], shown: str
    ) -> tuple[object, SqlType | None]:
        """Run a body in the session, one nesting level deeper; its value and type."""
        if self._depth >= MAX_DEPTH:
            raise _too_deep()
        session = self.session
        runner = SessionRunner(session)  # a function may not end the transaction (2D000)
        depth = runner.depth = len(session.savepoints)
        self._depth += 1
        try:
            if fn.language == "sql":
                return await _run_sql_body(fn, runner, tuple(v for v, _ in values))
            return await plx.run_block(parse_body(fn), runner, values, name=shown)
        except RecursionError:
            raise _too_deep() from None
        finally:
            self._depth -= 1
            runner.drop_savepoints(depth)
            self.sink.extend(runner.notices)


async def _run_sql_body(
    fn: FunctionDef, runner: SessionRunner, values: tuple[object, ...]
) -> tuple[object, SqlType | None]:
    """Run a SQL function's statements in order; the first column of the last one's first
    row, and its type (None when it gave no row)."""
    types = [a.type for a in fn.args]
    bare = fn.name.rpartition(".")[2]
    result = None
    for i, text in enumerate(user_functions.body_texts(fn, runner.session.current_catalog())):
        try:
            result = await runner.run_sql(text, types, values)
        except SqlError as error:
            line = f'SQL function "{bare}" statement {i + 1}'
            error.context = f"{error.context}\n{line}" if error.context else line
            raise
    if result is None or not result.columns or not result.rows:
        return None, None
    return result.rows[0][0], result.columns[0][1]


def _too_deep() -> SqlError:
    return SqlError(
        "54001",
        "stack depth limit exceeded",
        hint=f"PL/pgSQL functions nest at most {MAX_DEPTH} deep here.",
    )


def context_name(fn: FunctionDef) -> str:
    """The function as Postgres's CONTEXT lines name it: ``f(integer,text)``."""
    bare = fn.name.rpartition(".")[2]
    return f"{bare}({','.join(a.type.format() for a in fn.args)})"


async def call_procedure(session: SqlSession, stmt: function_ddl.Call) -> list[Notice]:
    """CALL name(args): resolve the procedure, evaluate its arguments, run it in the
    session's transaction; the notices it raised."""
    node = _call_node(stmt)
    schema = None
    if isinstance(node, exp.Dot):
        schema, node = str(node.this.name).lower(), node.expression
    assert isinstance(node, exp.Anonymous)
    name = str(node.this).lower()
    catalog = session.current_catalog()
    arg_nodes = list(node.expressions)
    probe = Binder(catalog, Params()).exprs
    types = [probe.bind(a, Scope()).type for a in user_functions.argument_values(arg_nodes)]
    overloads = user_functions.candidates(catalog, name, schema)
    try:
        call = user_functions.resolve(name, overloads, arg_nodes, types)
    except SqlError as error:
        if error.sqlstate != UNDEFINED_FUNCTION:
            raise
        shown = ", ".join(str(t) for t in types)
        raise SqlError(
            UNDEFINED_FUNCTION,
            f"procedure {name}({shown}) does not exist",
            hint="No procedure matches the given name and argument types. "
            "You might need to add explicit type casts.",
        ) from None
    fn = call.function
    if not fn.procedure:
        raise SqlError(
            WRONG_OBJECT_TYPE,
            f"{name}({', '.join(str(t) for t in types)}) is not a procedure",
            hint="To call a function, use SELECT.",
        )
    call = user_functions.bind_arguments(call, arg_nodes)
    txn = session.txn if session.txn is not None else await session.transaction()
    values: tuple[object, ...] = ()
    typed = user_functions.typed_arguments(call)
    if typed:
        query = session._plan(exp.select(*typed), "", [], catalog)
        assert query.node is not None and query.catalog is not None
        ctx = session._context(txn, query.catalog, [])
        rows = [row async for row in query.node.rows(ctx)]
        values = tuple(rows[0])
    notices: list[Notice] = []
    session.functions.sink = notices
    await session.functions.call(fn, values)
    return notices


def _call_node(stmt: function_ddl.Call) -> exp.Expression:
    try:
        select = sqlglot.parse_one(f"SELECT {stmt.call}", read="postgres")
    except (ParseError, TokenError):
        raise SqlError(SYNTAX_ERROR, "syntax error in CALL", position=stmt.offset + 1) from None
    items = select.expressions if isinstance(select, exp.Select) else []
    clauses = [k for k, v in select.args.items() if v and k != "expressions"]
    node = items[0] if len(items) == 1 and not clauses else None
    inner = node.expression if isinstance(node, exp.Dot) else node
    if not isinstance(inner, exp.Anonymous):
        raise SqlError(
            SYNTAX_ERROR, "CALL takes a procedure call: CALL name(...)", position=stmt.offset + 1
        )
    return node  # type: ignore[return-value]
