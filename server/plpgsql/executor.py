"""Running a parsed PL/pgSQL body (:func:`run_block`) against a :class:`SqlRunner`.

The executor holds the variables and the control flow; everything SQL (statements, and
expressions, which run as ``SELECT <expression>`` with the variables they name as parameters)
goes through the runner, which the session implements over its own transaction. A block with
an EXCEPTION clause runs in a subtransaction of the runner's, rolled back when a handler
catches an error (variables keep their values, as in Postgres).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from percolator.server.engine_api import Notice
from percolator.server.plpgsql import conditions
from percolator.server.plpgsql import nodes as N
from percolator.server.sql import casts
from percolator.server.sql import types as T
from percolator.server.sql.errors import (
    AMBIGUOUS_COLUMN,
    CARDINALITY_VIOLATION,
    DATATYPE_MISMATCH,
    FEATURE_NOT_SUPPORTED,
    INVALID_PARAMETER_VALUE,
    OBJECT_NOT_IN_PREREQUISITE_STATE,
    SYNTAX_ERROR,
    UNDEFINED_COLUMN,
    UNDEFINED_OBJECT,
    UNDEFINED_TABLE,
    ErrorObject,
    SqlError,
    from_exception,
)
from percolator.server.sql.textio import text_decoder, text_encoder
from percolator.server.sql.types import SqlType, TypeId

NULL_VALUE_NOT_ALLOWED = "22004"
CASE_NOT_FOUND = "20000"
NO_DATA_FOUND = "P0002"
TOO_MANY_ROWS = "P0003"
RAISE_EXCEPTION = "P0001"
NO_ACTIVE_HANDLER = "0Z002"


@dataclass
class SqlResult:
    """What a statement gave back."""

    columns: list[tuple[str, SqlType]] | None
    """None for a command that returns no rows."""
    rows: list[tuple[object, ...]]
    rowcount: int
    """Rows returned, or processed by a command (its tag's count)."""
    command: str = ""
    """The first word of its tag (SELECT, INSERT, UPDATE, CREATE, ...)."""


class SqlRunner(Protocol):
    """What the executor needs from the session it runs in."""

    async def run_sql(
        self, sql: str, types: Sequence[SqlType], values: Sequence[object]
    ) -> SqlResult:
        """Run one statement whose parameters ``$1``... have these types and values."""
        ...

    async def run_dynamic(
        self, sql: str, types: Sequence[SqlType | None], values: Sequence[object]
    ) -> SqlResult:
        """EXECUTE's string: one statement (or several, without parameters); the last's
        result."""
        ...

    def resolve_type(self, text: str) -> SqlType:
        """A type name as written in DECLARE (42704 if there is none)."""
        ...

    def row_type(self, table: str) -> list[tuple[str, SqlType]]:
        """The columns of a table (``table%ROWTYPE``; 42P01 if there is none)."""
        ...

    def column_names(self, table: str) -> frozenset[str] | None:
        """The column names of a table, None if there is no such table (a CTE's name)."""
        ...

    async def begin_subtransaction(self) -> object: ...

    async def rollback_subtransaction(self, token: object) -> None: ...

    async def release_subtransaction(self, token: object) -> None: ...

    def notice(self, notice: Notice) -> None:
        """A RAISE below EXCEPTION, for the client."""
        ...

    async def end_transaction(self, commit: bool, chain: bool) -> None:
        """COMMIT (or ROLLBACK) the transaction the block runs in and begin another; 2D000
        where the block cannot end its transaction (inside a transaction block, a function
        called by a statement, an EXCEPTION block)."""
        ...

    def can_catch(self, error: SqlError) -> bool:
        """Whether an EXCEPTION handler may catch ``error`` (the session keeps some errors
        to itself, such as a statement planned with a stale catalog, which it retries)."""
        ...


@dataclass
class Record:
    """A record variable's value: its fields' names, types and values."""

    names: tuple[str, ...]
    types: tuple[SqlType, ...]
    values: list[object]

    def index(self, name: str) -> int | None:
        try:
            return self.names.index(name)
        except ValueError:
            return None


class _Signal:
    pass


@dataclass
class _Exit(_Signal):
    label: str | None


@dataclass
class _Continue(_Signal):
    label: str | None


@dataclass
class _Return(_Signal):
    value: object
    type: SqlType | None


@dataclass
class _Frame:
    fn: N.Function
    values: list[object]
    types: list[SqlType | None]
    rowcount: int = 0
    errors: list[SqlError] = field(default_factory=list)


_KIND = {
    N.Assign: "assignment",
    N.If: "IF",
    N.Case: "CASE",
    N.Loop: "LOOP",
    N.While: "WHILE",
    N.ForInt: "FOR with integer loop variable",
    N.ForEach: "FOREACH over array",
    N.Return: "RETURN",
    N.Raise: "RAISE",
    N.Assert: "ASSERT",
    N.Execute: "EXECUTE",
    N.GetDiagnostics: "GET DIAGNOSTICS",
    N.Null: "NULL",
    N.EndTransaction: "COMMIT",
    N.Block: "statement block",
}

_LEVEL_CODES = {"WARNING": "01000"}
_TICKS = 200
"""Loop iterations between two yields to the event loop."""


async def run_block(
    fn: N.Function,
    runner: SqlRunner,
    params: Sequence[tuple[object, SqlType]] = (),
    *,
    name: str = "inline_code_block",
) -> tuple[object, SqlType | None]:
    """Run a parsed body (:func:`~percolator.server.plpgsql.parser.parse`, or
    ``parse_function`` for a function's) against ``runner``. ``params``: the (value, type) of
    each parameter of a function's body, converted to the declared types. Returns the value
    of ``RETURN expression`` and its type; the type is None when the body ended without one
    (a DO block, a bare RETURN), which a function returning a value reports as 2F005."""
    ex = Executor(fn, runner, name)
    return await ex.run(params)


class Executor:
    def __init__(self, fn: N.Function, runner: SqlRunner, name: str) -> None:
        self.fn = fn
        self.runner = runner
        self.name = name
        self.frame = _Frame(fn, [None] * fn.slots, [None] * fn.slots)
        self._types: dict[str, SqlType] = {}
        self._ticks = 0
        self._checked: set[int] = set()
        self._row_slots: set[int] = set()
        """Variables declared with a table's name as their type (rows, found at run time)."""

    async def run(self, params: Sequence[tuple[object, SqlType]]) -> tuple[object, SqlType | None]:
        frame = self.frame
        frame.types[self.fn.found_slot] = T.BOOL
        frame.values[self.fn.found_slot] = False
        for slot, (value, t) in zip(self.fn.param_slots, params, strict=False):
            decl = self.fn.decls[slot]
            dst = self._type(decl) if decl.type_text is not None else t
            frame.types[slot] = dst
            frame.values[slot] = coerce(value, t, dst)
        sig = await self.statement(self.fn.block)
        if isinstance(sig, _Return):
            return sig.value, sig.type
        return None, None

    # -- statements ----------------------------------------------------------------------

    async def statements(self, stmts: Sequence[N.Stmt]) -> _Signal | None:
        for s in stmts:
            sig = await self.statement(s)
            if sig is not None:
                return sig
        return None

    async def statement(self, s: N.Stmt) -> _Signal | None:
        try:
            return await self._dispatch(s)
        except SqlError as error:
            self._context(error, s)
            raise

    def _context(self, error: SqlError, s: N.Stmt, what: str | None = None) -> None:
        """Add this body's CONTEXT line to an error (once: the innermost statement's)."""
        marked = getattr(error, "_plpgsql_frames", None)
        if marked is None:
            marked = set()
            error._plpgsql_frames = marked  # type: ignore[attr-defined]
        if id(self) in marked:
            return
        marked.add(id(self))
        if what is None:
            what = "at " + _kind(s)
        line = f"PL/pgSQL function {self.name} line {s.line} {what}"
        error.context = f"{error.context}\n{line}" if error.context else line

    async def _dispatch(self, s: N.Stmt) -> _Signal | None:
        if isinstance(s, N.ExecSql):
            return await self.exec_sql(s)
        if isinstance(s, N.Assign):
            value, t = await self.eval(s.expr, assignment=s.target.name)
            try:
                await self.assign(s.target, value, t)
            except SqlError as error:
                if error.sqlstate != NULL_VALUE_NOT_ALLOWED:
                    self._sql_context(
                        error, s.expr, f'PL/pgSQL assignment "{s.target.name} := {s.expr.source}"'
                    )
                raise
            return None
        if isinstance(s, N.If):
            for cond, body in s.branches:
                if await self.eval_bool(cond):
                    return await self.statements(body)
            if s.otherwise is not None:
                return await self.statements(s.otherwise)
            return None
        if isinstance(s, N.Block):
            return await self.block(s)
        if isinstance(s, N.Raise):
            await self.raise_(s)
            return None
        if isinstance(s, N.Loop):
            while True:
                stop, sig = await self._after_body(await self.statements(s.body), s.label)
                if stop:
                    return sig
        if isinstance(s, N.While):
            while await self.eval_bool(s.condition):
                stop, sig = await self._after_body(await self.statements(s.body), s.label)
                if stop:
                    return sig
            return None
        if isinstance(s, N.ForInt):
            return await self.for_int(s)
        if isinstance(s, N.ForQuery):
            return await self.for_query(s)
        if isinstance(s, N.ForEach):
            return await self.foreach(s)
        if isinstance(s, N.Exit):
            if s.condition is not None and not await self.eval_bool(s.condition):
                return None
            return _Continue(s.label) if s.is_continue else _Exit(s.label)
        if isinstance(s, N.Return):
            if s.expr is None:
                return _Return(None, None)
            record = self._bare_record(s.expr)
            if record is not None:  # RETURN NEW: a trigger function's row
                return _Return(record, T.RECORD)
            value, t = await self.eval(s.expr)
            return _Return(value, t)
        if isinstance(s, N.Case):
            return await self.case(s)
        if isinstance(s, N.Assert):
            ok = await self.eval_bool(s.condition)
            if not ok:
                message = "assertion failed"
                if s.message is not None:
                    text = await self.eval_text(s.message)
                    if text is not None:
                        message = text
                raise SqlError(conditions.ASSERT_FAILURE, message)
            return None
        if isinstance(s, N.Execute):
            return await self.execute(s)
        if isinstance(s, N.GetDiagnostics):
            await self.diagnostics(s)
            return None
        if isinstance(s, N.Null):
            return None
        if isinstance(s, N.EndTransaction):
            await self.runner.end_transaction(s.commit, s.chain)
            return None
        raise SqlError(FEATURE_NOT_SUPPORTED, f"{type(s).__name__} is not supported")

    async def _after_body(
        self, sig: _Signal | None, label: str | None
    ) -> tuple[bool, _Signal | None]:
        """After a loop's body: (whether the loop stops, the signal it passes on). Every so
        many iterations the event loop runs others (and a cancel or timeout gets in)."""
        self._ticks += 1
        if self._ticks >= _TICKS:
            self._ticks = 0
            await asyncio.sleep(0)
        if sig is None:
            return False, None
        if isinstance(sig, _Exit):
            return True, None if sig.label is None or sig.label == label else sig
        if isinstance(sig, _Continue):
            if sig.label is None or sig.label == label:
                return False, None
            return True, sig
        return True, sig

    async def block(self, b: N.Block) -> _Signal | None:
        try:
            for decl in b.decls:
                await self._initialize(decl)
        except SqlError as error:
            self._context(error, b, "during statement block local variable initialization")
            raise
        if not b.handlers:
            sig = await self.statements(b.body)
        else:
            sig = await self._protected(b)
        if isinstance(sig, _Exit) and sig.label is not None and sig.label == b.label:
            return None
        return sig

    async def _protected(self, b: N.Block) -> _Signal | None:
        runner = self.runner
        token = await runner.begin_subtransaction()
        try:
            sig = await self.statements(b.body)
        except Exception as exc:
            error = from_exception(exc)
            await runner.rollback_subtransaction(token)
            handler = None
            if runner.can_catch(error):
                handler = next(
                    (h for h in b.handlers if conditions.matches(h.conditions, error.sqlstate)),
                    None,
                )
            if handler is None:
                if error is exc:
                    raise
                raise error from exc
            assert b.error_slots is not None
            state_slot, message_slot = b.error_slots
            frame = self.frame
            frame.values[state_slot], frame.types[state_slot] = error.sqlstate, T.TEXT
            frame.values[message_slot], frame.types[message_slot] = error.message, T.TEXT
            frame.errors.append(error)
            try:
                return await self.statements(handler.body)
            finally:
                frame.errors.pop()
        await runner.release_subtransaction(token)
        return sig

    async def _initialize(self, decl: N.VarDecl) -> None:
        frame = self.frame
        if decl.kind == "record":
            frame.values[decl.slot] = None
            frame.types[decl.slot] = None
            if decl.default is not None:
                raise SqlError(
                    FEATURE_NOT_SUPPORTED, "a default for a record variable is not supported"
                )
            return
        if decl.kind == "named":
            try:
                self._type(decl)
            except SqlError as error:
                if error.sqlstate != UNDEFINED_OBJECT:
                    raise
                assert decl.type_text is not None
                try:
                    columns = self.runner.row_type(decl.type_text)
                except SqlError:
                    raise error from None
                self._row_slots.add(decl.slot)
                frame.values[decl.slot] = Record(
                    tuple(n for n, _ in columns),
                    tuple(t for _, t in columns),
                    [None] * len(columns),
                )
                frame.types[decl.slot] = None
                if decl.default is not None:
                    raise SqlError(
                        FEATURE_NOT_SUPPORTED, "a default for a row variable is not supported"
                    ) from None
                return
        if decl.kind == "rowtype":
            assert decl.type_text is not None
            columns = self.runner.row_type(decl.type_text)
            frame.values[decl.slot] = Record(
                tuple(n for n, _ in columns), tuple(t for _, t in columns), [None] * len(columns)
            )
            frame.types[decl.slot] = None
            return
        t = self._type(decl)
        frame.types[decl.slot] = t
        value: object = None
        if decl.default is not None:
            value, src = await self.eval(decl.default)
            value = coerce(value, src, t)
        if value is None and decl.not_null:
            raise _null_to_not_null(decl.name)
        frame.values[decl.slot] = value

    def _type(self, decl: N.VarDecl) -> SqlType:
        text = decl.type_text
        assert text is not None
        t = self._types.get(text)
        if t is None:
            if decl.kind == "column":
                table, _, column = text.rpartition(".")
                columns = dict(self.runner.row_type(table))
                found = columns.get(column.strip('"') if column.startswith('"') else column.lower())
                if found is None:
                    raise SqlError(
                        UNDEFINED_COLUMN, f'column "{column}" of relation "{table}" does not exist'
                    )
                t = found
            else:
                t = self.runner.resolve_type(text)
            self._types[text] = t
        return t

    async def case(self, s: N.Case) -> _Signal | None:
        if s.selector is not None:
            assert s.selector_slot is not None
            value, t = await self.eval(s.selector)
            self.frame.values[s.selector_slot] = value
            self.frame.types[s.selector_slot] = t if t.id is not TypeId.UNKNOWN else T.TEXT
        for cond, body in s.whens:
            if await self.eval_bool(cond):
                return await self.statements(body)
        if s.otherwise is not None:
            return await self.statements(s.otherwise)
        raise SqlError(
            CASE_NOT_FOUND, "case not found", hint="CASE statement is missing ELSE part."
        )

    async def for_int(self, s: N.ForInt) -> _Signal | None:
        async def bound(sql: N.Sql, what: str) -> int:
            value, t = await self.eval(sql)
            if value is None:
                raise SqlError(NULL_VALUE_NOT_ALLOWED, f"{what} of FOR loop cannot be null")
            return coerce(value, t, T.INT4)  # type: ignore[return-value]

        lower = await bound(s.lower, "lower bound")
        upper = await bound(s.upper, "upper bound")
        step = 1
        if s.step is not None:
            step = await bound(s.step, "BY value")
            if step <= 0:
                raise SqlError(
                    INVALID_PARAMETER_VALUE, "BY value of FOR loop must be greater than zero"
                )
        frame = self.frame
        slot = s.var.slot
        frame.types[slot] = T.INT4
        i = lower
        found = False
        sig: _Signal | None = None
        while (i >= upper) if s.reverse else (i <= upper):
            found = True
            frame.values[slot] = i
            stop, sig = await self._after_body(await self.statements(s.body), s.label)
            if stop:
                break
            i = i - step if s.reverse else i + step
        frame.values[self.fn.found_slot] = found
        return sig

    async def for_query(self, s: N.ForQuery) -> _Signal | None:
        if s.query is not None:
            result = await self.run_sql(s.query)
        else:
            assert s.dynamic is not None
            result = await self.run_dynamic(s.dynamic, s.using)
        if result.columns is None:
            raise SqlError("42P11", f"cannot open {result.command or 'this'} query as cursor")
        sig: _Signal | None = None
        for row in result.rows:
            self.assign_row(s.targets, result.columns, row)
            stop, sig = await self._after_body(await self.statements(s.body), s.label)
            if stop:
                break
        self.frame.values[self.fn.found_slot] = bool(result.rows)
        return sig

    async def foreach(self, s: N.ForEach) -> _Signal | None:
        value, t = await self.eval(s.array)
        if value is None:
            raise SqlError(NULL_VALUE_NOT_ALLOWED, "FOREACH expression must not be null")
        if not t.array:
            raise SqlError(
                DATATYPE_MISMATCH, f"FOREACH expression must yield an array, not type {t}"
            )
        if s.slice:
            raise SqlError(FEATURE_NOT_SUPPORTED, "FOREACH ... SLICE is not supported")
        if len(s.targets) != 1:
            raise SqlError(FEATURE_NOT_SUPPORTED, "FOREACH over several variables is not supported")
        element = t.element
        sig: _Signal | None = None
        found = False
        for item in _flatten(value):
            found = True
            await self.assign(s.targets[0], item, element)
            stop, sig = await self._after_body(await self.statements(s.body), s.label)
            if stop:
                break
        self.frame.values[self.fn.found_slot] = found
        return sig

    async def exec_sql(self, s: N.ExecSql) -> None:
        result = await self.run_sql(s.sql)
        frame = self.frame
        modifies = result.command in ("INSERT", "UPDATE", "DELETE", "MERGE")
        if s.into is not None:
            if result.columns is None:
                raise SqlError(SYNTAX_ERROR, "INTO used with a command that cannot return data")
            n = len(result.rows)
            if (s.strict or modifies) and n > 1:
                raise SqlError(
                    TOO_MANY_ROWS,
                    "query returned more than one row",
                    hint="Make sure the query returns a single row, or use LIMIT 1.",
                )
            if s.strict and n == 0:
                raise SqlError(NO_DATA_FOUND, "query returned no rows")
            self.assign_row(s.into, result.columns, result.rows[0] if n else None)
            frame.values[self.fn.found_slot] = n > 0
            frame.rowcount = result.rowcount if modifies else min(n, 1)
            return
        if result.columns is not None and not s.perform:
            raise SqlError(
                SYNTAX_ERROR,
                "query has no destination for result data",
                hint="If you want to discard the results of a SELECT, use PERFORM instead."
                if not modifies
                else None,
            )
        frame.rowcount = result.rowcount
        if s.perform or modifies:
            frame.values[self.fn.found_slot] = result.rowcount > 0

    async def execute(self, s: N.Execute) -> None:
        result = await self.run_dynamic(s.command, s.using)
        self.frame.rowcount = result.rowcount
        if s.into is None:
            return
        if result.columns is None:
            raise SqlError(SYNTAX_ERROR, "INTO used with a command that cannot return data")
        n = len(result.rows)
        if s.strict and n == 0:
            raise SqlError(NO_DATA_FOUND, "query returned no rows")
        if s.strict and n > 1:
            raise SqlError(
                TOO_MANY_ROWS,
                "query returned more than one row",
                hint="Make sure the query returns a single row, or use LIMIT 1.",
            )
        self.assign_row(s.into, result.columns, result.rows[0] if n else None)

    async def diagnostics(self, s: N.GetDiagnostics) -> None:
        frame = self.frame
        if s.stacked and not frame.errors:
            raise SqlError(
                NO_ACTIVE_HANDLER,
                "GET STACKED DIAGNOSTICS cannot be used outside an exception handler",
            )
        for target, item in s.items:
            if item == "row_count":
                await self.assign(target, frame.rowcount, T.INT8)
                continue
            if item == "pg_context":
                await self.assign(
                    target,
                    f"PL/pgSQL function {self.name} line {s.line} at GET DIAGNOSTICS",
                    T.TEXT,
                )
                continue
            if item == "pg_routine_oid":
                await self.assign(target, 0, T.OID)
                continue
            error = frame.errors[-1]
            about = error.about
            value = {
                "returned_sqlstate": error.sqlstate,
                "message_text": error.message,
                "pg_exception_detail": error.detail or "",
                "pg_exception_hint": error.hint or "",
                "pg_exception_context": error.context or "",
                "column_name": (about.column if about else None) or "",
                "constraint_name": (about.constraint if about else None) or "",
                "table_name": about.table if about else "",
                "schema_name": about.schema if about else "",
                "pg_datatype_name": "",
            }[item]
            await self.assign(target, value, T.TEXT)

    async def raise_(self, s: N.Raise) -> None:
        frame = self.frame
        if s.reraise:
            if not frame.errors:
                raise SqlError(
                    NO_ACTIVE_HANDLER,
                    "RAISE without parameters cannot be used outside an exception handler",
                )
            raise frame.errors[-1]
        message = None
        code = None
        if s.condition is not None:
            if s.condition.startswith("sqlstate:"):
                code = s.condition.removeprefix("sqlstate:")
                message = code
            else:
                code = conditions.by_name(s.condition)
                message = s.condition
        if s.message is not None:
            message = _format(s.message, [await self.eval_text(a) for a in s.args])
        detail = hint = None
        objects: dict[str, str] = {}
        given = {"message"} if s.message is not None else set()
        if s.condition is not None:
            given.add("errcode")
        for option in s.options:
            if option.name in given:
                raise SqlError(
                    SYNTAX_ERROR, f"RAISE option already specified: {option.name.upper()}"
                )
            given.add(option.name)
            text = await self.eval_text(option.expr)
            if text is None:
                raise SqlError(NULL_VALUE_NOT_ALLOWED, "RAISE statement option cannot be null")
            if option.name == "message":
                message = text
            elif option.name == "detail":
                detail = text
            elif option.name == "hint":
                hint = text
            elif option.name in ("column", "constraint", "table", "schema", "datatype"):
                objects[option.name] = text
            elif option.name == "errcode":
                if conditions.valid_sqlstate(text):
                    code = text
                else:
                    code = conditions.by_name(text)
                    if code is None:
                        raise SqlError(
                            UNDEFINED_OBJECT, f'unrecognized exception condition "{text}"'
                        )
        if s.level == "EXCEPTION":
            code = code or RAISE_EXCEPTION
            about = None
            if "table" in objects:
                about = ErrorObject(
                    objects["table"],
                    objects.get("column"),
                    objects.get("constraint"),
                    objects.get("schema", "public"),
                )
            raise SqlError(
                code,
                message if message is not None else code,
                detail=detail,
                hint=hint,
                about=about,
            )
        code = code or _LEVEL_CODES.get(s.level, "00000")
        context = f"PL/pgSQL function {self.name} line {s.line} at RAISE"
        self.runner.notice(
            Notice(
                code,
                message if message is not None else code,
                s.level,
                detail=detail,
                hint=hint,
                context=context,
            )
        )

    # -- SQL -----------------------------------------------------------------------------

    def _is_record(self, decl: N.VarDecl) -> bool:
        """Whether a variable holds a row (``record``, ``t%ROWTYPE``, or a table's name as
        its type)."""
        return decl.kind in ("record", "rowtype") or decl.slot in self._row_slots

    def _bare_record(self, sql: N.Sql) -> Record | None:
        """The value of a record variable that ``sql`` is alone (``RETURN NEW``), if it is."""
        if len(sql.params) != 1 or sql.text.strip() != "SELECT $1":
            return None
        ref = sql.params[0]
        decl = self.fn.decls[ref.slot]
        if ref.field is not None or not self._is_record(decl):
            return None
        value = self.frame.values[ref.slot]
        if not isinstance(value, Record):
            raise _unassigned(decl.name)
        return value

    def _param(self, ref: N.VarRef, sql: N.Sql) -> tuple[object, SqlType]:
        frame = self.frame
        decl = self.fn.decls[ref.slot]
        value = frame.values[ref.slot]
        if ref.field is not None and not self._is_record(decl):
            raise SqlError(UNDEFINED_TABLE, f'missing FROM-clause entry for table "{decl.name}"')
        if self._is_record(decl):
            if not isinstance(value, Record):
                raise _unassigned(decl.name)
            if ref.field is None:
                raise SqlError(
                    FEATURE_NOT_SUPPORTED,
                    f'record variable "{decl.name}" as a whole in SQL is not supported',
                )
            i = value.index(ref.field)
            if i is None:
                raise SqlError(UNDEFINED_COLUMN, f'record "{decl.name}" has no field "{ref.field}"')
            return value.values[i], value.types[i]
        t = frame.types[ref.slot]
        if t is None:
            t = T.TEXT
        return value, t

    def _check_conflicts(self, sql: N.Sql) -> None:
        for name, tables in sql.checks:
            for table in tables:
                columns = self.runner.column_names(table)
                if columns is not None and name in columns:
                    raise SqlError(
                        AMBIGUOUS_COLUMN,
                        f'column reference "{name}" is ambiguous',
                        detail="It could refer to either a PL/pgSQL variable or a table column.",
                    )

    def _params(self, sql: N.Sql) -> tuple[list[SqlType], list[object]]:
        types: list[SqlType] = []
        values: list[object] = []
        for ref in sql.params:
            v, t = self._param(ref, sql)
            types.append(t)
            values.append(v)
        return types, values

    async def run_sql(self, sql: N.Sql, *, expression: str | None = None) -> SqlResult:
        try:
            if sql.checks and id(sql) not in self._checked:
                self._check_conflicts(sql)
                self._checked.add(id(sql))
            types, values = self._params(sql)
            return await self.runner.run_sql(sql.text, types, values)
        except SqlError as error:
            self._sql_context(error, sql, expression)
            raise

    def _sql_marked(self, error: SqlError) -> bool:
        """Whether this run already gave ``error`` its SQL's CONTEXT line (marks it if not)."""
        marked = getattr(error, "_plpgsql_sql", None)
        if marked is None:
            marked = set()
            error._plpgsql_sql = marked  # type: ignore[attr-defined]
        if id(self) in marked:
            return True
        marked.add(id(self))
        return False

    def _sql_context(self, error: SqlError, sql: N.Sql, expression: str | None) -> None:
        if self._sql_marked(error):
            return
        if expression is not None:
            line = expression
        else:
            line = f'SQL statement "{sql.source}"'
        error.context = f"{error.context}\n{line}" if error.context else line
        # A position counts in the statement as run: kept (as the body's) for a syntax error
        # before any variable was replaced, as Postgres reports it at compile time.
        pos = error.position
        error.position = None
        if pos is not None and error.sqlstate == SYNTAX_ERROR and not sql.substituted:
            at = pos - 1 - sql.prefix
            if 0 <= at <= len(sql.source):
                error.position = sql.pos + at + 1

    async def run_dynamic(self, command: N.Sql, using: Sequence[N.Sql]) -> SqlResult:
        text = await self.eval_text(command)
        if text is None:
            raise SqlError(NULL_VALUE_NOT_ALLOWED, "query string argument of EXECUTE is null")
        types: list[SqlType | None] = []
        values: list[object] = []
        for u in using:
            v, t = await self.eval(u)
            types.append(None if t.id is TypeId.UNKNOWN else t)
            values.append(v)
        try:
            return await self.runner.run_dynamic(text, types, values)
        except SqlError as error:
            if not self._sql_marked(error):
                line = f'SQL statement "{text}"'
                error.context = f"{error.context}\n{line}" if error.context else line
                error.position = None
            raise

    async def eval(self, sql: N.Sql, *, assignment: str | None = None) -> tuple[object, SqlType]:
        """An expression's value and type."""
        what = (
            f'PL/pgSQL assignment "{assignment} := {sql.source}"'
            if assignment is not None
            else f'PL/pgSQL expression "{sql.source}"'
        )
        result = await self.run_sql(sql, expression=what)
        if result.columns is None or len(result.columns) != 1:
            n = 0 if result.columns is None else len(result.columns)
            source = "assignment source" if assignment is not None else f'query "{sql.text}"'
            error = SqlError(SYNTAX_ERROR, f"{source} returned {n} column{'' if n == 1 else 's'}")
            self._sql_context(error, sql, what)
            raise error
        if len(result.rows) > 1:
            raise SqlError(CARDINALITY_VIOLATION, "query returned more than one row")
        value = result.rows[0][0] if result.rows else None
        return value, result.columns[0][1]

    async def eval_bool(self, sql: N.Sql) -> bool:
        value, t = await self.eval(sql)
        if value is None:
            return False
        return bool(coerce(value, t, T.BOOL))

    async def eval_text(self, sql: N.Sql) -> str | None:
        value, t = await self.eval(sql)
        return None if value is None else to_text(value, t)

    # -- assignment ------------------------------------------------------------------------

    async def assign(self, target: N.Target, value: object, src: SqlType) -> None:
        frame = self.frame
        ref = target.ref
        decl = self.fn.decls[ref.slot]
        if target.subscripts:
            await self._assign_element(target, decl, value, src)
            return
        if ref.field is not None:
            _set_field(frame.values[ref.slot], decl.name, ref.field, value, src)
            return
        if self._is_record(decl):
            raise SqlError(
                FEATURE_NOT_SUPPORTED,
                f'assigning an expression to record variable "{decl.name}" is not supported '
                "(use SELECT ... INTO)",
            )
        dst = frame.types[ref.slot]
        if dst is None:
            dst = src if src.id is not TypeId.UNKNOWN else T.TEXT
            frame.types[ref.slot] = dst
        value = coerce(value, src, dst)
        if value is None and decl.not_null:
            raise _null_to_not_null(decl.name)
        frame.values[ref.slot] = value

    async def _assign_element(
        self, target: N.Target, decl: N.VarDecl, value: object, src: SqlType
    ) -> None:
        frame = self.frame
        if len(target.subscripts) != 1 or target.ref.field is not None:
            raise SqlError(
                FEATURE_NOT_SUPPORTED,
                "assigning to a multidimensional array element is not supported",
            )
        t = frame.types[target.ref.slot]
        if t is None or not t.array:
            raise SqlError(DATATYPE_MISMATCH, f'variable "{decl.name}" is not an array')
        index, it = await self.eval(target.subscripts[0])
        if index is None:
            raise SqlError(NULL_VALUE_NOT_ALLOWED, "array subscript in assignment must not be null")
        i = coerce(index, it, T.INT4)
        assert isinstance(i, int)
        current = frame.values[target.ref.slot]
        items = list(current) if isinstance(current, list) else []
        if items and any(isinstance(x, list) for x in items):
            raise SqlError(
                FEATURE_NOT_SUPPORTED,
                "assigning to a multidimensional array element is not supported",
            )
        if i < 1:
            if items or i != 1:
                raise SqlError(
                    FEATURE_NOT_SUPPORTED, "array lower bounds other than 1 are not supported"
                )
        while len(items) < i:
            items.append(None)
        items[i - 1] = coerce(value, src, t.element)
        frame.values[target.ref.slot] = items

    def assign_row(
        self,
        targets: Sequence[N.Target],
        columns: list[tuple[str, SqlType]],
        row: tuple[object, ...] | None,
    ) -> None:
        """A row (None: no row, all NULL) into INTO's or a FOR loop's targets."""
        frame = self.frame
        values = list(row) if row is not None else [None] * len(columns)
        if len(targets) == 1 and targets[0].ref.field is None and not targets[0].subscripts:
            decl = self.fn.decls[targets[0].ref.slot]
            if decl.kind == "record":
                frame.values[decl.slot] = Record(
                    tuple(n for n, _ in columns), tuple(t for _, t in columns), values
                )
                return
            if decl.kind == "rowtype" or decl.slot in self._row_slots:
                record = frame.values[decl.slot]
                assert isinstance(record, Record)
                new = [
                    coerce(values[i], columns[i][1], t) if i < len(values) else None
                    for i, t in enumerate(record.types)
                ]
                frame.values[decl.slot] = Record(record.names, record.types, new)
                return
        for i, target in enumerate(targets):
            v, t = (values[i], columns[i][1]) if i < len(values) else (None, T.TEXT)
            self._assign_now(target, v, t)

    def _assign_now(self, target: N.Target, value: object, src: SqlType) -> None:
        """:meth:`assign` for a target without subscripts (no SQL to run)."""
        frame = self.frame
        ref = target.ref
        decl = self.fn.decls[ref.slot]
        if target.subscripts:
            raise SqlError(
                FEATURE_NOT_SUPPORTED, "an array element as an INTO target is not supported"
            )
        if ref.field is not None:
            _set_field(frame.values[ref.slot], decl.name, ref.field, value, src)
            return
        if self._is_record(decl):
            raise SqlError(
                FEATURE_NOT_SUPPORTED,
                "a record variable in a list of INTO targets is not supported",
            )
        dst = frame.types[ref.slot] or src
        value = coerce(value, src, dst)
        if value is None and decl.not_null:
            raise _null_to_not_null(decl.name)
        frame.values[ref.slot] = value


def _kind(s: N.Stmt) -> str:
    if isinstance(s, N.ExecSql):
        return "PERFORM" if s.perform else "SQL statement"
    if isinstance(s, N.ForQuery):
        return "FOR over SELECT rows" if s.query is not None else "FOR over EXECUTE statement"
    if isinstance(s, N.Exit):
        return "CONTINUE" if s.is_continue else "EXIT"
    if isinstance(s, N.EndTransaction):
        return "COMMIT" if s.commit else "ROLLBACK"
    return _KIND.get(type(s), type(s).__name__)


def _set_field(record: object, name: str, field: str, value: object, src: SqlType) -> None:
    """``record.field := value`` (the record variable ``name`` must hold a row with it)."""
    if not isinstance(record, Record):
        raise _unassigned(name)
    i = record.index(field)
    if i is None:
        raise SqlError(UNDEFINED_COLUMN, f'record "{name}" has no field "{field}"')
    record.values[i] = coerce(value, src, record.types[i])


def _unassigned(name: str) -> SqlError:
    return SqlError(
        OBJECT_NOT_IN_PREREQUISITE_STATE,
        f'record "{name}" is not assigned yet',
        detail="The tuple structure of a not-yet-assigned record is indeterminate.",
    )


def _null_to_not_null(name: str) -> SqlError:
    return SqlError(
        NULL_VALUE_NOT_ALLOWED,
        f'null value cannot be assigned to variable "{name}" declared NOT NULL',
    )


def coerce(value: object, src: SqlType, dst: SqlType | None) -> object:
    """A value converted for a variable of type ``dst`` as PL/pgSQL assigns: by the
    assignment cast where Postgres has one, else through text (its I/O conversion)."""
    if value is None or dst is None or src == dst:
        return value
    if (src.id is TypeId.UNKNOWN and not src.array) or casts.can_assign(src, dst):
        return casts.cast(value, src, dst, explicit=False)
    text = to_text(value, src)
    plain = SqlType(dst.id, -1, dst.array)
    return casts.cast(text_decoder(plain)(text), plain, dst, explicit=False)


def to_text(value: object, t: SqlType) -> str:
    """A value's text output (its type's output function, as RAISE prints arguments)."""
    if isinstance(value, str) and not t.array:
        return value.rstrip(" ") if t.id is TypeId.BPCHAR else value
    if isinstance(value, bool) and not t.array:
        return "t" if value else "f"
    return text_encoder(t)(value)


def _format(fmt: str, args: list[str | None]) -> str:
    out = []
    it = iter(args)
    i = 0
    while i < len(fmt):
        ch = fmt[i]
        if ch == "%":
            if fmt.startswith("%%", i):
                out.append("%")
                i += 2
                continue
            arg = next(it, None)
            out.append("<NULL>" if arg is None else arg)
        else:
            out.append(ch)
        i += 1
    return "".join(out)


def _flatten(value: object) -> list[object]:
    if not isinstance(value, list):
        return [value]
    out: list[object] = []
    for item in value:
        if isinstance(item, list):
            out.extend(_flatten(item))
        else:
            out.append(item)
    return out
