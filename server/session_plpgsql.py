"""DO blocks: a session runs PL/pgSQL (server/plpgsql) in its own transaction.

:class:`SessionRunner` is the session as the PL/pgSQL executor sees it
(:class:`percolator.server.plpgsql.executor.SqlRunner`): statements are parsed, planned (once
per text and parameter types within a run, and through the engine's plan cache) and run like
a client's, in the session's transaction, without the per-statement bookkeeping of a client
statement (timers, cancellation guard: the DO statement has them). A block with an EXCEPTION
clause is a subtransaction: an internal savepoint on the session's stack, rolled back when a
handler catches an error.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from percolator.server.engine_api import Notice, PreparedStatement
from percolator.server.plpgsql import executor as plx
from percolator.server.plpgsql import parser as plp
from percolator.server.sql import schemas, utility
from percolator.server.sql.binder import Binder
from percolator.server.sql.errors import (
    FEATURE_NOT_SUPPORTED,
    SYNTAX_ERROR,
    UNDEFINED_OBJECT,
    SqlError,
)
from percolator.server.sql.expr_binder import Params
from percolator.server.sql.types import SqlType

if TYPE_CHECKING:
    from percolator.server.session import SqlSession

INVALID_TRANSACTION_TERMINATION = "2D000"

_SAVEPOINT = "\x00plpgsql"
"""The name of a block's internal savepoint (no client can write it)."""

_TRANSACTION_COMMANDS = tuple(
    getattr(utility, name)
    for name in (
        "Begin",
        "Commit",
        "Rollback",
        "Savepoint",
        "ReleaseSavepoint",
        "RollbackToSavepoint",
        "PrepareTransaction",
    )
    if hasattr(utility, name)
)

_CLIENT_LEVELS = {
    "debug5": 10, "debug4": 10, "debug3": 10, "debug2": 10, "debug1": 10, "debug": 10,
    "log": 15, "notice": 20, "warning": 30, "error": 40,
}  # fmt: skip
_SEVERITY_LEVELS = {"DEBUG": 10, "LOG": 15, "NOTICE": 20, "WARNING": 30}


async def run_do(session: SqlSession, stmt: utility.DoBlock) -> list[Notice]:
    """Run a DO statement's block in the session's transaction; the notices it raised (on
    error, they go with the error, as its ``notices``)."""
    language = stmt.language.lower()
    if language != "plpgsql":
        if language in ("sql", "c", "internal"):
            raise SqlError(
                FEATURE_NOT_SUPPORTED,
                f'language "{language}" does not support inline code execution',
            )
        raise SqlError(UNDEFINED_OBJECT, f'language "{language}" does not exist')
    try:
        fn = plp.parse(stmt.body)
    except SqlError as error:
        raise _shifted(error, stmt.body_offset) from None
    runner = SessionRunner(session)
    depth = len(session.savepoints)
    # A block may end its transaction (COMMIT) only when it is the transaction's first
    # statement outside a transaction block, as a DO alone in its implicit transaction.
    runner.may_end_transaction = (
        not session.block and session.txn is None and session.alone_in_query
    )
    runner.depth = depth
    try:
        if session.txn is None:
            await session.transaction()
        await plx.run_block(fn, runner)
    except SqlError as error:
        if error.position is not None:
            error.position += stmt.body_offset
        error.notices = runner.notices  # type: ignore[attr-defined]
        raise
    finally:
        runner.drop_savepoints(depth)
    return runner.notices


def _is_concurrent_ddl(error: SqlError) -> bool:
    """Whether the catalog guard refused a statement (the session retries those)."""
    from percolator.server.session import ConcurrentDdl

    return isinstance(error, ConcurrentDdl)


def _data_type(text: str) -> exp.DataType:
    """A type name as sqlglot's DataType; a name it does not know as a user-defined type."""
    for udt in (False, True):
        try:
            return exp.DataType.build(text, dialect="postgres", udt=udt)
        except (ParseError, TokenError, ValueError):
            continue
    raise SqlError(UNDEFINED_OBJECT, f'type "{text}" does not exist')


def _shifted(error: SqlError, offset: int) -> SqlError:
    if error.position is None:
        return error
    return replace(error, position=error.position + offset)


class SessionRunner:
    """The session as the PL/pgSQL executor runs SQL through it (one per DO run)."""

    def __init__(self, session: SqlSession) -> None:
        self.session = session
        self.notices: list[Notice] = []
        self.may_end_transaction = False
        self.depth = 0
        """How many savepoints the session had when the run began (its own come after)."""
        self.ended_transaction = False
        self._prepared: dict[tuple[str, tuple[int, ...]], PreparedStatement] = {}
        level = session.settings.get("client_min_messages", "notice").lower()
        self._min_level = _CLIENT_LEVELS.get(level, 20)

    # -- SQL -----------------------------------------------------------------------------

    async def run_sql(
        self, sql: str, types: Sequence[SqlType], values: Sequence[object]
    ) -> plx.SqlResult:
        oids = tuple(t.oid for t in types)
        key = (sql, oids)
        prepared = self._prepared.get(key)
        if prepared is None:
            prepared = await self._prepare(sql, oids)
            self._prepared[key] = prepared
        return await self._run(prepared, values)

    async def run_dynamic(
        self, sql: str, types: Sequence[SqlType | None], values: Sequence[object]
    ) -> plx.SqlResult:
        statements = [p for p in self.session.parse(sql) if not p.empty]
        if len(statements) > 1 and types:
            raise SqlError(
                SYNTAX_ERROR, "cannot insert multiple commands into a prepared statement"
            )
        oids = [t.oid if t is not None else 0 for t in types]
        result = plx.SqlResult(None, [], 0)
        for statement in statements:
            prepared = await self.session.prepare(statement, oids)
            result = await self._run(prepared, values)
        return result

    async def _prepare(self, sql: str, oids: Sequence[int]) -> PreparedStatement:
        statements = [p for p in self.session.parse(sql) if not p.empty]
        if len(statements) != 1:
            raise SqlError(
                SYNTAX_ERROR, "cannot insert multiple commands into a prepared statement"
            )
        return await self.session.prepare(statements[0], oids)

    async def _run(self, prepared: PreparedStatement, values: Sequence[object]) -> plx.SqlResult:
        session = self.session
        if prepared.statement.empty:
            return plx.SqlResult(None, [], 0)
        plan, args = session._current_plan(prepared, list(values))
        if plan.kind == "utility" and isinstance(plan.statement, _TRANSACTION_COMMANDS):
            raise SqlError(FEATURE_NOT_SUPPORTED, "unsupported transaction command in PL/pgSQL")
        if plan.kind == "copy":
            raise SqlError(FEATURE_NOT_SUPPORTED, "cannot COPY to/from client in PL/pgSQL")
        if len(args) < len(plan.param_types):
            raise SqlError("42P02", f"there is no parameter ${len(args) + 1}")
        # The notices of functions the statement calls come in order with this block's.
        outer_sink, session.functions.sink = session.functions.sink, self.notices
        try:
            return await self._execute(plan, args)
        finally:
            session.functions.sink = outer_sink

    async def _execute(self, plan: Any, args: list[object]) -> plx.SqlResult:
        session = self.session
        try:
            execution: Any = await session._execute_checked(plan, args)
        except SqlError as error:
            if self.ended_transaction and _is_concurrent_ddl(error):
                # The DO would run again from its start, as a refused statement does; what
                # it committed must not run twice: the client retries, not the server.
                raise SqlError(error.sqlstate, error.message, hint=error.hint) from None
            # A nested DO's notices went out before its error (whether or not a handler here
            # catches it).
            self.notices.extend(getattr(error, "notices", None) or ())
            error.notices = []  # type: ignore[attr-defined]
            raise
        for notice in execution.notices:
            self.notice(notice)
        columns = None
        rows: list[tuple[object, ...]] = []
        if execution.columns is not None:
            columns = [(c.name, c.type) for c in execution.columns]
            rows = await execution.drain()
        tag = execution.command_tag
        command = tag.split(" ", 1)[0] if tag else ""
        last = tag.rsplit(" ", 1)[-1]
        if command in ("SELECT", "FETCH", "SHOW", "EXPLAIN") or not last.isdigit():
            count = len(rows)
        else:
            count = int(last)
        return plx.SqlResult(columns, rows, count, command)

    # -- types -----------------------------------------------------------------------------

    def resolve_type(self, text: str) -> SqlType:
        catalog = self.session.current_catalog()
        return Binder(catalog, Params()).exprs.bind_type(_data_type(text))

    def column_names(self, table: str) -> frozenset[str] | None:
        catalog = self.session.current_catalog()
        found = catalog.tables.get(schemas.resolve_text(catalog, table))
        return None if found is None else frozenset(c.name for c in found.columns)

    def row_type(self, table: str) -> list[tuple[str, SqlType]]:
        catalog = self.session.current_catalog()
        found = catalog.table(schemas.resolve_text(catalog, table))
        return [(c.name, c.type) for c in found.columns]

    # -- subtransactions -------------------------------------------------------------------

    async def begin_subtransaction(self) -> object:
        session = self.session
        txn = session.txn if session.txn is not None else await session.transaction()
        return session.take_savepoint(_SAVEPOINT, txn)

    async def rollback_subtransaction(self, token: object) -> None:
        session = self.session
        assert isinstance(token, int) and session.txn is not None
        await session.rollback_to_savepoint(session.txn, token)
        self.drop_savepoints(token)

    async def release_subtransaction(self, token: object) -> None:
        assert isinstance(token, int)
        self.drop_savepoints(token)

    def drop_savepoints(self, depth: int) -> None:
        """Release the internal savepoints from ``depth`` on (all a run took, when it ends)."""
        self.session.release_savepoints(depth)

    async def end_transaction(self, commit: bool, chain: bool) -> None:
        session = self.session
        if not self.may_end_transaction:
            raise SqlError(INVALID_TRANSACTION_TERMINATION, "invalid transaction termination")
        if len(session.savepoints) > self.depth:
            raise SqlError(
                INVALID_TRANSACTION_TERMINATION,
                "cannot commit while a subtransaction is active"
                if commit
                else "cannot roll back while a subtransaction is active",
            )
        await session.end_transaction(commit)
        self.ended_transaction = True

    def can_catch(self, error: SqlError) -> bool:
        return not _is_concurrent_ddl(error)

    # -- notices ---------------------------------------------------------------------------

    def notice(self, notice: Notice) -> None:
        level = _SEVERITY_LEVELS.get(notice.severity, 20)
        if notice.severity == "INFO" or level >= self._min_level:
            self.notices.append(notice)
