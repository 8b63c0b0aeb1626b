"""A client session: its transaction, settings, and the statements it prepares and runs.

Transactions follow Postgres's rules as the wire protocol exposes them:

- outside BEGIN, the statements of one simple Query (or of one extended-protocol batch up to
  Sync) form an implicit transaction, committed by :meth:`SqlSession.sync` or rolled back if
  one failed;
- BEGIN opens an explicit block; an error in it makes it failed (``E``) until ROLLBACK;
- REPEATABLE READ (the default) is snapshot isolation: one start_ts for the whole transaction;
  READ COMMITTED moves the transaction to a new snapshot before each statement; SERIALIZABLE is
  refused (never silently weaker).

Statement text is parsed once (a per-engine cache keyed by the text) and bound and planned once
per (text, parameter types, catalog) (a per-engine plan cache), so a prepared statement is
neither re-parsed nor re-planned; DDL that changes the catalog clears the plan cache.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.optimizer.normalize_identifiers import normalize_identifiers

from percolator.server import session_functions
from percolator.server.advisory_locks import SessionAdvisoryLocks
from percolator.server.cursors import Cursor, Cursors, fetch_rows, move
from percolator.server.engine import Engine
from percolator.server.engine_api import (
    Notice,
    ParsedStatement,
    PreparedStatement,
    ResultColumn,
)
from percolator.server.metrics import definitions as metrics
from percolator.server.notifications import SessionNotifications
from percolator.server.planner import modifying_ctes
from percolator.server.planner.compile import compile_expr
from percolator.server.planner.context import ExecContext
from percolator.server.planner.ddl_data import run_action
from percolator.server.planner.dml import (
    TableWriter,
    delete_rows,
    insert_rows,
    make_writer,
    update_rows,
)
from percolator.server.planner.foreign_keys import Deferred, run_deferred
from percolator.server.planner.merge import explain_merge, plan_merge, run_merge
from percolator.server.planner.physical import Node
from percolator.server.planner.row_codec import RowCodec
from percolator.server.planner.row_locking import RowChanged, RowLocking
from percolator.server.planner.triggers import RowTriggers
from percolator.server.sequences import SEQUENCE_TABLE, SessionSequences
from percolator.server.session_settings import TransactionSettings
from percolator.server.session_temp_tables import SessionTempTables
from percolator.server.settings import (
    DEFAULTS,
    normalize,
    parse_duration_ms,
    reported_name,
)
from percolator.server.sql import (
    alter_commands,
    catalog_store,
    comments,
    database_ddl,
    ddl,
    ddl_validate,
    enums,
    function_ddl,
    generated_columns,
    index_expressions,
    introspection,
    observer_ddl,
    schemas,
    sequence_ddl,
    temp_tables,
    trigger_ddl,
    utility,
)
from percolator.server.sql import modifying_ctes as sql_modifying_ctes
from percolator.server.sql import types as T
from percolator.server.sql.backends import BackendActivity, LockWait
from percolator.server.sql.binder import Binder
from percolator.server.sql.bound import (
    BConst,
    BExpr,
    DeleteStmt,
    InsertStmt,
    NextValue,
    OutCol,
    QueryStmt,
    UpdateStmt,
)
from percolator.server.sql.catalog import Catalog, ObserverDef, RoleDef, SequenceDef, TableDef
from percolator.server.sql.errors import (
    ACTIVE_SQL_TRANSACTION,
    DUPLICATE_OBJECT,
    DUPLICATE_PREPARED_STATEMENT,
    FEATURE_NOT_SUPPORTED,
    IN_FAILED_SQL_TRANSACTION,
    INSUFFICIENT_PRIVILEGE,
    INVALID_SQL_STATEMENT_NAME,
    NO_ACTIVE_SQL_TRANSACTION,
    QUERY_CANCELED,
    READ_ONLY_SQL_TRANSACTION,
    SERIALIZATION_FAILURE,
    SYNTAX_ERROR,
    UNDEFINED_COLUMN,
    UNDEFINED_OBJECT,
    UNDEFINED_TABLE,
    WRONG_OBJECT_TYPE,
    SqlError,
    from_exception,
    unsupported,
)
from percolator.server.sql.expr_binder import Params
from percolator.server.sql.merge import MergeStmt
from percolator.server.sql.normalize import Normalized, lift_literals
from percolator.server.sql.observer_body import parse_body
from percolator.server.sql.splitter import split_statements
from percolator.server.sql.textio import text_in, use_extra_float_digits
from percolator.server.sql.time_zones import use_setting
from percolator.server.sql.types import SqlType, TypeId
from percolator.server.txn.observers import admin as observer_admin
from percolator.server.txn.transaction import ReadGuard, RowLockWait, Transaction

log = logging.getLogger(__name__)


# -- prepared plans -------------------------------------------------------------------------


@dataclass
class Plan:
    """What preparing a statement produced (PreparedStatement.payload)."""

    kind: str
    """query, insert, update, delete, merge, with (data-modifying CTEs: the statement is a
    ModifyingWith), ddl, utility, explain, ..."""
    catalog: Catalog | None
    statement: Any
    node: Node | None = None
    columns: list[ResultColumn] | None = None
    param_types: list[SqlType] = field(default_factory=list)
    writer: TableWriter | None = None
    returning: list[Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    writes: bool = False
    views: frozenset[str] = frozenset()
    """The views the statement expanded (transitively): the catalog guard refuses it when
    one's definition changed (a view has no storage of its own to tell)."""
    returning_runners: list[Any] = field(default_factory=list)
    """The subqueries and waiting calls of RETURNING, run for each returned row."""
    search_path: tuple[str, ...] | None = None
    """The schemas its unqualified names were resolved through (server/sql/schemas.py): a
    prepared statement is planned again when they change, as in Postgres."""


class ConcurrentDdl(SqlError):
    """40001: the catalog guard refused a statement planned before another server's DDL on a
    table it uses (see SqlSession._check_catalog)."""

    def __init__(self) -> None:
        super().__init__(
            SERIALIZATION_FAILURE,
            "could not serialize access due to concurrent DDL: the catalog changed (DDL "
            "committed through another server) after this statement was planned",
            hint="Retry the transaction.",
        )


Rerun = Callable[[ConcurrentDdl], Awaitable[AsyncIterator[tuple[object, ...]]]]
"""A refused query's rows, planned again (or the error again)."""

_DML = frozenset({"insert", "update", "delete", "merge", "with"})
_RERUNS_ON_CHANGE = 10
"""Runs of a READ COMMITTED statement whose locked rows keep changing, before 40001 (after
the first, the statement holds its rows' locks: only writers that take none change them)."""

_UNKNOWN_NAME = frozenset({UNDEFINED_TABLE, UNDEFINED_COLUMN, UNDEFINED_OBJECT})
"""Binding errors that a catalog newer than this server's may resolve."""


def _same_tables(planned: Sequence[Catalog], new: Catalog, storages: frozenset[str]) -> bool:
    """Whether each of ``storages`` belongs to a table defined alike (same storage, columns,
    indexes and constraints) in ``new`` and in each ``planned`` catalog that has it, and in
    one at least: a storage a catalog does not know was not used by what was planned with
    it. The catalog's own storage is not a table's; the sequences' counters count as changed
    when a sequence's definition did."""
    for storage in storages:
        if storage == catalog_store.CATALOG_TABLE:
            continue
        if storage == SEQUENCE_TABLE:
            if any(old.sequences != new.sequences for old in planned):
                return False
            continue
        owners = [t for t in (old.owner_of_storage(storage) for old in planned) if t is not None]
        if not owners or any(new.tables.get(t.name) != t for t in owners):
            return False
    return True


def _same_views(planned: Sequence[Catalog], new: Catalog, names: Iterable[str]) -> bool:
    """Whether each of the views ``names`` is defined alike in ``new`` and in each
    ``planned`` catalog that has it, and in one at least."""
    for name in names:
        defs = [old.views[name] for old in planned if name in old.views]
        if not defs or any(new.views.get(name) != d for d in defs):
            return False
    return True


def _result_columns(cols: list[OutCol]) -> list[ResultColumn]:
    return [
        ResultColumn(c.name, c.type, c.table_oid, c.column_number) for c in cols if not c.hidden
    ]


@dataclass(frozen=True)
class StatementResult:
    """A statement run to completion by :meth:`SqlSession.run_statement`."""

    columns: list[str]
    rows: list[tuple[object, ...]]
    tag: str


@dataclass(frozen=True)
class LiftedStatement:
    """A statement whose literals were lifted into parameters, with the template's parse."""

    normalized: Normalized
    tree: Any


@dataclass(frozen=True)
class BoundLiterals:
    """A lifted statement's shared plan and this statement's literal values."""

    plan: Plan
    normalized: Normalized

    def values(self, plan: Plan) -> list[object]:
        """The literals as values of the types binding gave their parameters."""
        out = []
        for value, given, final in zip(
            self.normalized.values, self.normalized.types, plan.param_types, strict=True
        ):
            if given.id is TypeId.UNKNOWN and (final.id is not TypeId.TEXT or final.array):
                value = text_in(final, value)  # type: ignore[arg-type]
            out.append(value)
        return out


@dataclass(frozen=True)
class SqlPrepared:
    """A statement of SQL-level PREPARE (EXECUTE runs it, DEALLOCATE drops it)."""

    name: str
    statement: str
    prepared: PreparedStatement
    created: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.UTC))


_PREPARABLE = (exp.Query, exp.Insert, exp.Update, exp.Delete, exp.Merge, exp.Values)
"""What PREPARE accepts, as in Postgres (no utility statements, no DDL)."""


def _select_into_as_create(select: exp.Select) -> exp.Create:
    """SELECT ... INTO [TEMP] [TABLE] name ... as the CREATE TABLE name AS SELECT ... it is."""
    into = select.args["into"]
    query = select.copy()
    query.set("into", None)
    properties = None
    if into.args.get("temporary"):
        properties = exp.Properties(expressions=[exp.TemporaryProperty()])
    return exp.Create(this=into.this.copy(), kind="TABLE", expression=query, properties=properties)


def _data_type(text: str) -> exp.DataType:
    try:
        return exp.DataType.build(text, dialect="postgres")
    except (ParseError, TokenError, ValueError):
        raise SqlError(UNDEFINED_OBJECT, f'type "{text}" does not exist') from None


_TYPE_INTROSPECTION = object()
"""The parse of asyncpg's type-introspection query (see ``sql/introspection.py``)."""


# -- executions -----------------------------------------------------------------------------


class RowsExecution:
    """A statement whose rows are produced lazily as the client fetches them."""

    copy = None

    def __init__(
        self,
        session: SqlSession,
        columns: list[ResultColumn] | None,
        rows: AsyncIterator[tuple[object, ...]] | None,
        tag: str,
        notices: list[Notice] | None = None,
        count_rows: bool = True,
    ) -> None:
        self._session = session
        self.columns = columns
        self._rows = rows
        self._tag = tag
        self._count = 0
        self._count_rows = count_rows
        self._done = rows is None
        self.notices = notices or []
        self._rerun: Rerun | None = None

    async def fetch(self, max_rows: int) -> list[tuple[object, ...]]:
        if self._done or self._rows is None:
            return []
        out: list[tuple[object, ...]] = []
        async with self._session.guard():
            try:
                await self._fill(out, max_rows)
            except ConcurrentDdl as error:
                if self._rerun is None or self._count or out:
                    raise
                rerun, self._rerun = self._rerun, None
                self._rows = await rerun(error)
                await self._fill(out, max_rows)
        self._count += len(out)
        if self._done:
            self._session.statement_done()
        return out

    async def _fill(self, out: list[tuple[object, ...]], max_rows: int) -> None:
        assert self._rows is not None
        async for row in self._rows:
            out.append(row)
            if max_rows and len(out) >= max_rows:
                return
        self._done = True

    async def drain(self) -> list[tuple[object, ...]]:
        """Every row not fetched yet, read to the end in the caller's task (no statement
        guard, nor the session's end-of-statement bookkeeping: the caller's statement has
        both)."""
        rows, self._rows = self._rows, None
        self._done = True
        return [r async for r in rows] if rows is not None else []

    def on_concurrent_ddl(self, rerun: Rerun) -> None:
        """Take the rows from ``rerun`` if the catalog guard refuses the statement before its
        first row."""
        self._rerun = rerun

    @property
    def done(self) -> bool:
        return self._done

    @property
    def command_tag(self) -> str:
        if self._count_rows:
            return f"{self._tag} {self._count}"
        return self._tag

    async def close(self) -> None:
        if self._rows is not None and not self._done:
            aclose = getattr(self._rows, "aclose", None)
            if aclose is not None:
                try:
                    await aclose()
                except Exception:
                    log.debug("closing an unfinished result", exc_info=True)
        self._done = True


def _same_shape(a: list[ResultColumn] | None, b: list[ResultColumn] | None) -> bool:
    """Whether two result descriptions give the client the same columns and types."""
    return [(c.name, c.type) for c in a or []] == [(c.name, c.type) for c in b or []]


def _statement_events(plan: Plan) -> list[str]:
    """The events a DML statement fires statement-level triggers for: its own, an INSERT ...
    ON CONFLICT DO UPDATE's UPDATE too, and each kind of action a MERGE has."""
    if plan.kind == "insert":
        on_conflict = plan.statement.on_conflict
        upsert = on_conflict is not None and on_conflict.do_update
        return ["insert", "update"] if upsert else ["insert"]
    if plan.kind == "merge":
        kinds = {a.kind for a in plan.extra["merge"].actions}
        return [e for e in ("insert", "update", "delete") if e in kinds]
    return [plan.kind]


async def _iter_list(rows: list[tuple[object, ...]]) -> AsyncIterator[tuple[object, ...]]:
    for r in rows:
        yield r


def _done(session: SqlSession, tag: str, notices: list[Notice] | None = None) -> RowsExecution:
    return RowsExecution(session, None, None, tag, notices, count_rows=False)


def _result(
    session: SqlSession,
    columns: list[ResultColumn],
    rows: list[tuple[object, ...]],
    tag: str,
    count: bool = True,
) -> RowsExecution:
    return RowsExecution(session, columns, _iter_list(rows), tag, count_rows=count)


# -- the session ----------------------------------------------------------------------------


class SqlSession:
    """One connection's SQL state (implements ``engine_api.Session``)."""

    def __init__(
        self, engine: Engine, user: str, database: str, options: dict[str, str], backend_pid: int
    ) -> None:
        self.engine = engine
        self.user = user
        self.database = database
        self.backend_pid = backend_pid
        self.settings: dict[str, str] = dict(DEFAULTS)
        self.settings.update(engine.config.settings)
        self.settings["session_authorization"] = user
        self._changes: list[tuple[str, str]] = []
        self._deallocations: list[str | None] = []
        # transaction state
        self.txn: Transaction | None = None
        self.block = False
        self._settings_tx = TransactionSettings(self.settings)
        self._apply_startup_options(options)
        use_setting(self.settings["timezone"])  # this connection's task reads it (text I/O)
        use_extra_float_digits(self.settings["extra_float_digits"])  # float text output
        self.failed = False
        self._implicit_failed = False
        self.txn_catalog: Catalog | None = None
        self._planned_with: list[Catalog] = []
        """The catalogs the open transaction's statements were planned with (one, unless the
        catalog was reloaded meanwhile)."""
        self._ddl_read_catalog = False
        """This transaction's DDL read the catalog version itself (the guard is moot)."""
        self._views_used: set[str] = set()
        """The views the open transaction's statements expanded (see _check_catalog)."""
        self.txn_time = dt.datetime.now(dt.UTC)
        self.isolation = self.settings["default_transaction_isolation"]
        self.read_only = False
        self.deferrable = False
        """DEFERRABLE: shown, nothing to wait for (a read-only SERIALIZABLE transaction never
        fails, so it needs no safe snapshot)."""
        self._next_isolation: str | None = None
        self._next_read_only: bool | None = None
        self.savepoints: list[tuple[str, Any, Catalog | None]] = []
        self.cursors = Cursors()
        self.sequences = SessionSequences(engine.sequences, self._find_sequence, lambda: self.txn)
        self.functions = session_functions.FunctionCaller(self)
        self.alone_in_query = True
        """Whether the running statement is the only one of its simple Query (a DO block
        may COMMIT only then, as in Postgres; the frontend says)."""
        self.advisory = SessionAdvisoryLocks(engine.client)
        self.notifications = SessionNotifications(engine.notifications, backend_pid)
        self.deferred_constraints = Deferred()
        self.temp_tables = SessionTempTables()
        """The session's temporary tables, laid over the catalog (session_temp_tables.py)."""
        """The open transaction's deferred foreign-key checks and SET CONSTRAINTS modes."""
        self.sql_prepared: dict[str, SqlPrepared] = {}
        """Statements of SQL-level PREPARE, by name."""
        # cancellation
        self._task: asyncio.Task[Any] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._cancel_reason: str | None = None
        self._committing = False
        self._timer: asyncio.TimerHandle | None = None
        # What pg_stat_activity shows of this session (server/sql/backends.py).
        self.backend_start = dt.datetime.now(dt.UTC)
        self._query = ""
        self._query_started = 0.0
        """time.time() when the last statement began (0: none yet)."""
        self.on_terminate: Callable[[], None] | None = None
        """Set by the connection: end it (pg_terminate_backend)."""

    def _apply_startup_options(self, options: dict[str, str]) -> None:
        for key, value in options.items():
            if key in ("user", "database", "replication"):
                continue
            if key == "options":
                for part in _split_options(value):
                    if part.startswith("-c") or "=" in part:
                        name, _, v = part.removeprefix("-c").removeprefix("--").partition("=")
                        if name:
                            self._set(name.strip().replace("-", "_"), v.strip(), quiet=True)
                continue
            self._set(key, value.strip("'"), quiet=True)

    # -- engine_api.Session ----------------------------------------------------------------

    def idle_in_transaction_timeout_s(self) -> float:
        return parse_duration_ms(self.settings["idle_in_transaction_session_timeout"]) / 1000

    @property
    def transaction_status(self) -> str:
        if self.block:
            return "E" if self.failed else "T"
        return "I"

    def startup_parameters(self) -> list[tuple[str, str]]:
        from percolator.server.settings import REPORTED

        self._changes.clear()
        return [(name, self.settings[name.lower()]) for name in REPORTED]

    def take_parameter_changes(self) -> list[tuple[str, str]]:
        out, self._changes = self._changes, []
        return out

    def take_deallocations(self) -> list[str | None]:
        out, self._deallocations = self._deallocations, []
        return out

    def parse(self, sql: str) -> list[ParsedStatement]:
        cached = self.engine.parse_cache.get(sql)
        if cached is not None:
            return cached
        out = []
        for piece in split_statements(sql):
            if not piece.text:
                out.append(ParsedStatement("", empty=True))
                continue
            out.append(
                ParsedStatement(piece.text, payload=self._parse_piece(piece.text, piece.offset))
            )
        self.engine.parse_cache.put(sql, out)
        return out

    def _parse_piece(self, text: str, offset: int) -> Any:
        """A statement's parse; statements differing only in literals share one (see
        ``normalize``), so their plans are shared too."""
        if introspection.is_introspection(text):
            return _TYPE_INTROSPECTION
        lifted = lift_literals(text)
        if lifted is None:
            return _parse_one(text, offset)
        key = ("template", lifted.template)
        tree = self.engine.parse_cache.get(key)
        if tree is None:
            try:
                tree = _parse_one(lifted.template, 0)
            except SqlError:
                return _parse_one(text, offset)  # report errors against the client's text
            self.engine.parse_cache.put(key, tree)
        if isinstance(tree, exp.Select) and tree.args.get("into") is not None:
            return _parse_one(text, offset)  # SELECT ... INTO is DDL: its literals stay
        return LiftedStatement(lifted, tree)

    async def prepare(
        self, statement: ParsedStatement, param_oids: Sequence[int]
    ) -> PreparedStatement:
        """Bind and plan a statement (from the plan cache when it holds one). A table, column
        or index this server's catalog does not know may have been created by another server
        since the last poll (within a second): the catalog is then reloaded, and the
        statement bound again if it changed."""
        if self.engine.catalog_behind():  # DDL through another worker of this machine
            await self.engine.catch_up()
        planned = len(self._planned_with)
        try:
            return self._prepare_now(statement, param_oids)
        except SqlError as exc:
            if exc.sqlstate not in _UNKNOWN_NAME or self.txn_catalog is not None:
                raise
            known = self.engine.catalog
            if await self.engine.refresh_catalog() is known:
                raise
        del self._planned_with[planned:]  # nothing was planned with the catalog that failed
        return self._prepare_now(statement, param_oids)

    def _prepare_now(
        self, statement: ParsedStatement, param_oids: Sequence[int]
    ) -> PreparedStatement:
        if statement.empty:
            return PreparedStatement(statement, [], None)
        catalog = self.current_catalog()
        self._use_search_path()
        if isinstance(statement.payload, LiftedStatement):
            return self._prepare_lifted(statement, statement.payload, catalog)
        key = (statement.sql, tuple(param_oids), tuple(schemas.path(catalog)))
        shared = self._shares_plans()
        if shared:
            cached = self.engine.plan_cache.get(key)
            if cached is not None and cached.catalog is catalog:
                return PreparedStatement(statement, cached.param_types, cached.columns, cached)
        plan = self._plan(statement.payload, statement.sql, param_oids, catalog)
        if shared and plan.catalog is not None:
            self.engine.plan_cache.put(key, plan)
        return PreparedStatement(statement, plan.param_types, plan.columns, plan)

    def _prepare_lifted(
        self, statement: ParsedStatement, lifted: LiftedStatement, catalog: Catalog
    ) -> PreparedStatement:
        n = lifted.normalized
        key = ("template", n.template, n.types, tuple(schemas.path(catalog)))
        shared = self._shares_plans()
        plan = self.engine.plan_cache.get(key) if shared else None
        if plan is None or plan.catalog is not catalog:
            plan = self._plan(lifted.tree, n.template, [t.oid for t in n.types], catalog)
            if shared and plan.catalog is not None:
                self.engine.plan_cache.put(key, plan)
        # The client sees a statement without parameters; the literals are bound here.
        return PreparedStatement(statement, [], plan.columns, BoundLiterals(plan, n))

    def _use_search_path(self) -> None:
        """The search path this task resolves names with (server/sql/schemas.py)."""
        schemas.use_search_path(self.settings["search_path"], self.user)

    def _shares_plans(self) -> bool:
        """Whether this session's plans may go to (and come from) the shared plan cache: not
        with a transaction's own catalog or temporary tables. (The cache's keys hold the
        schemas the search path resolves names through.)"""
        return self.txn_catalog is None and not self.temp_tables.active

    async def execute(self, prepared: PreparedStatement, params: Sequence[object]) -> Any:
        # PL/pgSQL functions the statement calls send their notices with its own, those
        # raised while it is planned and started first.
        early = self.functions.sink = []
        result = await self._execute_statement(prepared, params)
        notices = getattr(result, "notices", None)
        if isinstance(notices, list):
            if early:
                notices[0:0] = early
            self.functions.sink = notices
        return result

    async def _execute_statement(
        self, prepared: PreparedStatement, params: Sequence[object]
    ) -> Any:
        if prepared.statement.empty:
            return _done(self, "")
        if self.engine.catalog_behind():  # DDL through another worker of this machine
            await self.engine.catch_up()
        self._use_search_path()
        plan, values = self._current_plan(prepared, params)
        if len(values) < len(plan.param_types):
            raise SqlError("42P02", f"there is no parameter ${len(values) + 1}")
        if self.failed and not _allowed_in_failed(plan):
            raise SqlError(
                IN_FAILED_SQL_TRANSACTION,
                "current transaction is aborted, commands ignored until end of transaction block",
            )
        # A statement with data-modifying CTEs counts as its main statement, as its tag says.
        metrics.count_statement(plan.statement.main.kind if plan.kind == "with" else plan.kind)
        self._query = prepared.statement.sql
        self._query_started = time.time()
        self._start_timer()
        # A statement that begins the transaction (autocommit, or the first of a block to
        # read or write) and is refused by the catalog guard has done nothing yet: it runs
        # again, planned with the reloaded catalog, in a new transaction (Postgres would
        # simply see the DDL).
        alone = self.txn is None
        async with self.guard():
            if not alone:
                return await self._execute_checked(plan, values)
            try:
                result = await self._execute_checked(plan, values)
                if plan.kind in _DML and self.txn is not None:
                    # What the commit would check first (nothing, if the statement read):
                    # checked now, while the statement can still run again.
                    await self.txn.check_read_guard()
            except ConcurrentDdl:
                await self._drop_implicit()
                plan, values = self._current_plan(prepared, params)
                return await self._execute(plan, values)
        if plan.kind == "query" and isinstance(result, RowsExecution):
            told = result.columns
            result.on_concurrent_ddl(lambda error: self._rerun_query(prepared, params, told, error))
        return result

    async def _execute_checked(self, plan: Plan, values: list[object]) -> Any:
        """:meth:`_execute`; a constraint error from a statement whose transaction has not
        yet checked the catalog at its snapshot checks it first: the plan may be another
        server's older catalog's (a table dropped and created again with other constraints),
        and then the statement is refused as planned with a stale catalog (ConcurrentDdl,
        run again when it began the transaction) rather than failing on rules that are gone."""
        try:
            return await self._execute(plan, values)
        except SqlError as error:
            txn = self.txn
            if error.sqlstate.startswith("23") and txn is not None and self.txn_catalog is None:
                written = () if plan.writer is None else (plan.writer.codec.storage,)
                await txn.check_read_guard(*written)
            raise

    async def _drop_implicit(self) -> None:
        """Roll back the transaction a refused statement began (its block, if any, goes on
        and begins another)."""
        txn, _ = self._detach_transaction()
        if txn is not None:
            await txn.rollback()

    async def _rerun_query(
        self,
        prepared: PreparedStatement,
        params: Sequence[object],
        columns: list[ResultColumn] | None,
        error: ConcurrentDdl,
    ) -> AsyncIterator[tuple[object, ...]]:
        """The rows of a query refused before its first row, planned again; ``error`` again
        when the new plan's columns differ from ``columns`` (what the client was told)."""
        await self._drop_implicit()
        plan, values = self._current_plan(prepared, params)
        if plan.kind != "query" or plan.node is None or not _same_shape(plan.columns, columns):
            raise error
        assert plan.catalog is not None
        txn = await self.transaction(writes=plan.writes)
        return plan.node.rows(self._context(txn, plan.catalog, values))

    def _current_plan(
        self, prepared: PreparedStatement, params: Sequence[object]
    ) -> tuple[Plan, list[object]]:
        """The statement's plan, rebound if DDL changed the catalog since it was prepared,
        and its parameter values (a lifted statement's are its literals)."""
        payload = prepared.payload
        catalog = self.current_catalog()
        if isinstance(payload, BoundLiterals):
            plan = payload.plan
            if plan.catalog is not None and _stale(plan, catalog):
                lifted = prepared.statement.payload
                assert isinstance(lifted, LiftedStatement)
                rebound = self._prepare_lifted(prepared.statement, lifted, catalog).payload
                assert isinstance(rebound, BoundLiterals)
                prepared.payload = payload = rebound  # planned again once, not per execution
                plan = rebound.plan
            return plan, payload.values(plan)
        plan = payload  # type: ignore[assignment]
        if plan.catalog is not None and _stale(plan, catalog):
            oids = [t.oid for t in plan.param_types]
            plan = self._plan(prepared.statement.payload, prepared.statement.sql, oids, catalog)
            prepared.payload = plan  # planned again once, not per execution
        return plan, list(params)

    async def run_statement(
        self,
        sql: str,
        params: Sequence[object] = (),
        param_oids: Sequence[int] = (),
        *,
        kinds: frozenset[str] | None = None,
    ) -> StatementResult:
        """Parse, plan and run one statement to completion in this session's transaction
        (observers and the Python API run SQL this way). ``kinds`` limits the statements
        allowed (``query``, ``insert``, ``update``, ``delete``, ...): others raise 0A000."""
        prepared = await self._prepare_one(sql, param_oids, kinds, "here")
        values = [_api_param(v, t) for v, t in zip(params, prepared.param_types, strict=False)]
        execution = await self.execute(prepared, values)
        rows: list[tuple[object, ...]] = []
        try:
            while not execution.done:
                rows.extend(await execution.fetch(0))
        finally:
            await execution.close()
        return StatementResult(
            [c.name for c in execution.columns or prepared.columns or []],
            rows,
            execution.command_tag,
        )

    async def _prepare_one(
        self, sql: str, param_oids: Sequence[int], kinds: frozenset[str] | None, where: str
    ) -> PreparedStatement:
        """Parse and prepare exactly one statement (42601 otherwise); unless its plan kind is
        one of ``kinds``, 0A000 naming its first word and ``where``."""
        statements = [p for p in self.parse(sql) if not p.empty]
        if len(statements) != 1:
            raise SqlError(SYNTAX_ERROR, "expected exactly one statement")
        prepared = await self.prepare(statements[0], param_oids)
        if kinds is not None and _plan_kind(prepared) not in kinds:
            raise unsupported(f"{statements[0].sql.split(None, 1)[0].upper()} {where}")
        return prepared

    async def sync(self) -> None:
        self._stop_timer()
        if self.block:
            return
        if self.txn is None:
            # An implicit transaction that read and wrote nothing may have listened or
            # notified (and a statement after that may have failed).
            failed, self._implicit_failed = self._implicit_failed, False
            if self.notifications.pending:
                if failed:
                    self.notifications.rollback()
                else:
                    await self.notifications.commit()
            return
        if not self._implicit_failed and self.deferred_constraints.pending:
            try:
                await self._run_deferred(self.txn)
            except BaseException:
                self._implicit_failed = True
                await self.sync()
                raise
        failed, self._implicit_failed = self._implicit_failed, False
        txn, catalog = self._detach_transaction()
        await self._close(txn, catalog, commit=not failed)

    async def _end_implicit(self, *, commit: bool) -> None:
        """COMMIT or ROLLBACK outside a block ends the implicit transaction of the statements
        before it in the same Query (or batch up to Sync), as in Postgres: ``INSERT ...;
        COMMIT; SELECT 1/0`` keeps the insert, ``INSERT ...; ROLLBACK`` drops it."""
        if self.txn is None and not self.notifications.pending:
            return
        if not commit:
            self._implicit_failed = True
        await self.sync()

    async def _transaction_ended(self, committed: bool) -> None:
        """What the session keeps per transaction, settled once it has ended: NOTIFYs sent
        or dropped, deferred checks, cursors, transaction-level advisory locks, sequence
        restarts."""
        if self.notifications.pending:
            if committed:
                await self.notifications.commit()
            else:
                self.notifications.rollback()
        if self.deferred_constraints.pending:
            self.deferred_constraints.clear()
        if self.cursors:
            await self.cursors.after_transaction(committed)
        if self.advisory.holds_transaction_locks:
            await self.advisory.end_transaction()
        restored = self._settings_tx.end(committed)
        if restored is not None:
            self._restore_settings(restored)
        self.sequences.transaction_ended(committed)

    async def _find_sequence(self, name: str) -> SequenceDef | None:
        """A sequence missing from this server's catalog: created by another server since the
        last poll, or by this session's own open transaction."""
        if self.txn_catalog is not None and name in self.txn_catalog.sequences:
            return self.txn_catalog.sequences[name]
        return (await self.engine.refresh_catalog()).sequences.get(name)

    def on_notification(self, sink: Callable[[int, str, str], None]) -> None:
        self.notifications.sink = lambda n: sink(n.pid, n.channel, n.payload)

    def cursor_columns(self, name: str) -> list[ResultColumn] | None:
        cursor = self.cursors.find(name)
        return cursor.columns if cursor is not None else None

    def share_portal(
        self,
        name: str,
        statement: str,
        columns: list[ResultColumn],
        rows: AsyncIterator[tuple[object, ...]],
        on_close: Callable[[], Awaitable[None]],
    ) -> None:
        cursor = Cursor(
            name,
            statement,
            columns,
            scroll=False,
            hold=False,
            binary=False,
            depth=len(self.savepoints),
            source=rows,
            on_close=on_close,
        )
        self.cursors.add(cursor)

    def unshare_portal(self, name: str) -> None:
        self.cursors.forget(name)

    def statement_failed(self, error: BaseException) -> None:
        self._stop_timer()
        if self.block:
            self.failed = True
            if self.txn is not None and not self.savepoints:
                self.txn.drop_row_locks()  # ROLLBACK TO SAVEPOINT could not go on without them
        elif self.txn is not None or self.notifications.pending:
            self._implicit_failed = True

    def statement_done(self) -> None:
        self._stop_timer()

    def cancel(self) -> None:
        self._interrupt("canceling statement due to user request")

    def terminate(self) -> None:
        """pg_terminate_backend: end the connection (the running statement is cancelled and
        the transaction rolls back)."""
        if self.on_terminate is not None:
            self.on_terminate()
        else:
            self.cancel()

    def activity(self) -> BackendActivity:
        """This session as a row of pg_stat_activity."""
        if self._task is not None:
            state = "active"
        elif self.block:
            state = "idle in transaction (aborted)" if self.failed else "idle in transaction"
        else:
            state = "idle"
        txn = self.txn
        started = self._query_started
        return BackendActivity(
            pid=self.backend_pid,
            user=self.user,
            application_name=self.settings.get("application_name", ""),
            backend_start=self.backend_start,
            xact_start=self.txn_time if txn is not None else None,
            query_start=dt.datetime.fromtimestamp(started, dt.UTC) if started else None,
            state=state,
            lock_wait=self._lock_wait_event(),
            query=self._query,
            wait=self.lock_wait(),
        )

    def _lock_wait_event(self) -> str | None:
        if self.txn is not None and self.txn.waiting_for_row_lock:
            return "tuple"
        return "advisory" if self.advisory.waiting_for is not None else None

    def lock_wait(self) -> LockWait | None:
        """The lock this session waits for, if any (pg_blocking_pids)."""
        waiting = self.txn.row_lock_wait if self.txn is not None else None
        advisory = self.advisory.waiting_for
        if waiting is None and advisory is None:
            return None
        rows = tuple(waiting.keys) if waiting is not None else ()
        return LockWait(rows, waiting.holds if waiting is not None else 0, advisory)

    def holds_lock_of(self, wait: LockWait) -> bool:
        """Whether this session holds the lock ``wait`` asks for, in a mode that conflicts."""
        txn = self.txn
        if wait.rows and txn is not None:
            # (table, row, column) tuples equal and hash as the CellKeys the locks are kept by.
            if txn.blocks(RowLockWait(frozenset(wait.rows), wait.holds)):  # type: ignore[arg-type]
                return True
        return wait.advisory is not None and self.advisory.blocks(wait.advisory)

    async def close(self) -> None:
        self._stop_timer()
        self.engine.sessions.discard(self)
        await self.cursors.close(None)
        await self.advisory.close()
        await self.notifications.close()
        txn, _ = self._detach_transaction()
        self.block = False
        if txn is not None:
            await txn.rollback()
        await self.temp_tables.close(self.engine.client)

    # -- cancellation and timeouts -------------------------------------------------------

    def _interrupt(self, reason: str) -> None:
        task = self._task
        if task is None or self._committing or task.done():
            return
        if task is asyncio.current_task():
            return  # the session's own statement signals it (pg_terminate_backend of itself)
        self._cancel_reason = reason
        task.cancel()

    @asynccontextmanager
    async def guard(self) -> AsyncIterator[None]:
        """Run statement work so that a cancel request or timeout turns into 57014."""
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        # With the loop given, current_task skips get_running_loop, whose getpid() system call
        # (Python 3.11) was 2 % of a web-index run's CPU here.
        self._task = asyncio.current_task(self._loop)
        self._cancel_reason = None
        try:
            yield
        except asyncio.CancelledError:
            reason = self._cancel_reason
            if reason is None:
                raise
            task = asyncio.current_task(self._loop)
            if task is not None:
                task.uncancel()
            raise SqlError(QUERY_CANCELED, reason) from None
        except SqlError:
            raise
        except Exception as exc:
            raise from_exception(exc) from exc
        finally:
            self._task = None
            self._cancel_reason = None

    def _start_timer(self) -> None:
        self._stop_timer()
        ms = parse_duration_ms(self.settings.get("statement_timeout", "0"))
        if ms > 0:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(
                ms / 1000, self._interrupt, "canceling statement due to statement timeout"
            )

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    # -- transactions ----------------------------------------------------------------------

    def current_catalog(self) -> Catalog:
        """The catalog statements bind against: the transaction's (or the shared one) with
        the session's temporary tables over it."""
        if self.txn_catalog is not None:
            return self.temp_tables.overlay(self.txn_catalog)
        catalog = self.engine.catalog
        planned = self._planned_with
        if not planned or planned[-1] is not catalog:
            planned.append(catalog)
        return self.temp_tables.overlay(catalog)

    def row_codec(self, table: TableDef, read: frozenset[int] | None = None) -> RowCodec:
        """The engine's cached row codec of a table (see :meth:`Planner.codec`)."""
        return self.engine.planner.codec(table, read)

    def _detach_transaction(self) -> tuple[Transaction | None, Catalog | None]:
        """The open transaction and the catalog its DDL staged, taken off the session (which
        then has none), with the state the catalog guard kept for them."""
        txn, self.txn = self.txn, None
        catalog, self.txn_catalog = self.txn_catalog, None
        self._planned_with = []
        self._ddl_read_catalog = False
        self._views_used = set()
        self.temp_tables.detach()
        return txn, catalog

    async def _new_transaction(self) -> Transaction:
        """A new transaction, guarded against a catalog older than its snapshot."""
        txn = await self.engine.client.begin()
        self.guard_catalog(txn)
        return txn

    def _serializable(self, txn: Transaction) -> None:
        """SERIALIZABLE is snapshot isolation whose commit checks what it read
        (txn/read_set.py); a read-only one needs nothing more."""
        if self.isolation == "serializable" and not self.read_only:
            txn.track_reads()

    def guard_catalog(self, txn: Transaction) -> None:
        """Make ``txn`` check, with its first read, that this session's statements were
        planned with the catalog of its snapshot or a newer one (see _check_catalog)."""
        txn.set_read_guard(ReadGuard(catalog_store.VERSION_KEY, self._check_catalog))

    async def _check_catalog(self, raw: bytes | None, used: frozenset[str]) -> None:
        """Refuse a statement planned with a catalog older than the transaction's snapshot
        when DDL committed by another process since this one last polled (within a second)
        changed a table the transaction uses (``used``: its store tables so far): its plan
        may name a dropped or truncated table's old storage, where writes would be lost, or
        miss a new index or constraint. DDL on other tables lets it pass. The catalog is
        reloaded first, so the retry (and the transaction's next statements) see the new one."""
        if self.txn_catalog is not None or self._ddl_read_catalog:
            return  # DDL reads the version itself, reloads if behind, and conflicts on it
        planned = self._planned_with or [self.engine.catalog]
        # No other session's DDL can change this one's temporary tables.
        used = frozenset(s for s in used if not temp_tables.is_temp_storage(s))
        stored = int(raw) if raw is not None else 0
        if stored <= min(c.version for c in planned):
            return
        if self.engine.catalog.version < stored:
            await self.engine.refresh_catalog()
        if _same_tables(planned, self.engine.catalog, used) and _same_views(
            planned, self.engine.catalog, self._views_used
        ):
            return
        raise ConcurrentDdl()

    async def transaction(self, *, writes: bool = False) -> Transaction:
        """The transaction a statement runs in (begun if none is open)."""
        if self.txn is None:
            self.txn = await self._new_transaction()
            self.txn_time = dt.datetime.now(dt.UTC)
            if not self.block:
                self.isolation = self.settings["default_transaction_isolation"]
                self.read_only = self.settings["default_transaction_read_only"] == "on"
                self.deferrable = self.settings["default_transaction_deferrable"] == "on"
            self._serializable(self.txn)
        elif self.isolation in ("read committed", "read uncommitted"):
            if self.cursors:
                await self.cursors.settle()  # they read the snapshot of their DECLARE
            await self.engine.client.renew_snapshot(self.txn)
        if writes:
            if self.read_only:
                raise SqlError(
                    READ_ONLY_SQL_TRANSACTION,
                    "cannot execute this statement in a read-only transaction",
                )
            if self.cursors:
                await self.cursors.settle()  # nor do they see the transaction's later writes
        return self.txn

    async def _commit(self, txn: Transaction, catalog: Catalog | None) -> None:
        self._committing = True
        try:
            self.temp_tables.before_commit(txn)
            await txn.commit()
        except SqlError:
            raise
        except Exception as exc:
            raise from_exception(exc) from exc
        finally:
            self._committing = False
        self.temp_tables.after_commit()
        if catalog is not None:
            previous = self.engine.catalog
            self.engine.publish(replace(catalog, version=catalog.version + 1))
            await self._drop_watches(previous, catalog)

    async def _drop_watches(self, before: Catalog, after: Catalog) -> None:
        """After a DDL commit: remove the watches of dropped observers and stale tables.
        Failing here loses nothing (a worker removes orphaned watches later)."""
        removed = observer_ddl.watches_of(before) - observer_ddl.watches_of(after)
        if not removed:
            return
        live = {o.key for o in after.observers.values()}
        try:
            await observer_admin.remove_watches(self.engine.client, removed, live)
        except Exception:
            log.warning("removing the watches of dropped observers failed", exc_info=True)

    async def _before_commit(self, txn: Transaction) -> None:
        """What a COMMIT does before its commit point: the deferred constraints' checks, and
        reading the WITH HOLD cursors (which outlive the transaction)."""
        await self._run_deferred(txn)
        await self.cursors.before_commit()

    async def _end_block(self, commit: bool) -> str:
        commit = commit and not self.failed
        if commit and self.txn is not None:
            try:
                await self._before_commit(self.txn)
            except BaseException:
                await self._end_block(commit=False)
                raise
        txn, catalog = self._detach_transaction()
        self.block = False
        self.failed = False
        self.savepoints = []
        committed = await self._close(txn, catalog, commit=commit)
        return "COMMIT" if committed else "ROLLBACK"

    async def _close(
        self, txn: Transaction | None, catalog: Catalog | None, *, commit: bool
    ) -> bool:
        """Commit or roll back a detached transaction and settle what the session keeps per
        transaction (:meth:`_transaction_ended`); whether it committed (without one, a COMMIT
        counts as committed)."""
        committed = False
        try:
            if txn is None:
                committed = commit
            elif commit:
                await self._commit(txn, catalog)
                committed = True
            else:
                await txn.rollback()
        finally:
            await self._transaction_ended(committed)
        return committed

    async def end_transaction(self, commit: bool) -> None:
        """COMMIT or ROLLBACK the running transaction from inside a statement (a DO block's
        COMMIT) as a COMMIT statement would, and begin the next one."""
        txn = self.txn
        if txn is not None:
            failure: BaseException | None = None
            if commit:
                try:
                    await self._before_commit(txn)
                except BaseException as error:  # the transaction rolls back, as _end_block's
                    failure, commit = error, False
            txn, catalog = self._detach_transaction()
            await self._close(txn, catalog, commit=commit)
            if failure is not None:
                raise failure
        await self.transaction()

    # -- planning --------------------------------------------------------------------------

    def _plan(self, payload: Any, sql: str, param_oids: Sequence[int], catalog: Catalog) -> Plan:
        if isinstance(payload, utility.Explain):
            inner = _parse_one(payload.statement, payload.offset)
            if not isinstance(inner, exp.Expression) or ddl.is_ddl(inner):
                raise unsupported("EXPLAIN of this statement")
            plan = self._plan(inner, payload.statement, param_oids, catalog)
            cols = [ResultColumn("QUERY PLAN", T.TEXT)]
            return Plan(
                "explain",
                plan.catalog,
                plan,
                columns=cols,
                param_types=plan.param_types,
                views=plan.views,
            )
        if isinstance(payload, utility.CopyStatement):
            return self._plan_copy(payload, catalog, param_oids)
        if isinstance(payload, utility.DeclareCursor):
            return self._plan_declare(payload, param_oids, catalog)
        if payload is _TYPE_INTROSPECTION:
            cols = [ResultColumn(name, t) for name, t in introspection.COLUMNS]
            return Plan(
                "introspection",
                None,
                payload,
                columns=cols,
                param_types=list(introspection.PARAM_TYPES),
            )
        if not isinstance(payload, exp.Expression):
            return Plan("utility", None, payload, columns=_utility_columns(payload, self))
        if isinstance(payload, exp.Select) and payload.args.get("into") is not None:
            return Plan("ddl", None, _select_into_as_create(payload), writes=True)
        if ddl.is_ddl(payload):
            return Plan("ddl", None, payload, writes=True)  # its names resolved when it runs
        payload = schemas.qualify(payload, catalog)
        params = Params.from_oids(param_oids, catalog)
        binder = Binder(catalog, params)
        bound = binder.bind_statement(payload)
        param_types = params.finish()
        plan = self._plan_bound(bound, binder, catalog, param_types)
        if binder.modifying_ctes:
            plan = self._plan_with(plan, binder, catalog, param_types)
        plan.views = frozenset(binder.dependencies.expanded)
        plan.search_path = tuple(schemas.path(catalog))
        return plan

    def _plan_bound(
        self,
        bound: QueryStmt | InsertStmt | UpdateStmt | DeleteStmt | MergeStmt,
        binder: Binder,
        catalog: Catalog,
        param_types: list[SqlType],
    ) -> Plan:
        """The plan of a bound statement (query or DML)."""
        planner = self.engine.planner
        if isinstance(bound, QueryStmt):
            node = planner.plan_query(bound.rel)
            return Plan(
                "query",
                catalog,
                bound,
                node,
                _result_columns(bound.rel.columns),
                param_types,
                writes=bound.lock_rows,
            )
        if isinstance(bound, InsertStmt):
            return self._plan_insert(bound, binder, catalog, param_types)
        if isinstance(bound, UpdateStmt):
            writer = self._writer(bound.table, binder)
            node = planner.plan(bound.source)
            assignments = [
                (bound.table.position(c.id), compile_expr(e)) for c, e in bound.assignments
            ]
            runners = planner.runners([e for _, e in bound.assignments])
            return Plan(
                "update",
                catalog,
                bound,
                node,
                _returning_columns(bound.returning_cols),
                param_types,
                writer,
                _compile_list(bound.returning),
                {"assignments": assignments, "runners": runners},
                writes=True,
                returning_runners=planner.runners(bound.returning or []),
            )
        if isinstance(bound, DeleteStmt):
            writer = self._writer(bound.table, binder)
            node = planner.plan(bound.source)
            return Plan(
                "delete",
                catalog,
                bound,
                node,
                _returning_columns(bound.returning_cols),
                param_types,
                writer,
                _compile_list(bound.returning),
                writes=True,
                returning_runners=planner.runners(bound.returning or []),
            )
        if isinstance(bound, MergeStmt):
            merge_plan = plan_merge(planner, bound, catalog)
            writer = self._writer(bound.table, binder)
            return Plan(
                "merge",
                catalog,
                bound,
                merge_plan.node,
                None,
                param_types,
                writer,
                extra={"merge": merge_plan},
                writes=True,
            )
        raise unsupported(type(bound).__name__)

    def _plan_with(
        self, main: Plan, binder: Binder, catalog: Catalog, param_types: list[SqlType]
    ) -> Plan:
        """A statement with data-modifying CTEs: each planned as it would be alone, run by
        server/planner/modifying_ctes.py; described as its main statement."""
        ctes = [
            modifying_ctes.CtePart(
                c.name, c.slot, self._plan_bound(c.statement, binder, catalog, param_types)
            )
            for c in binder.modifying_ctes
        ]
        statement = modifying_ctes.ModifyingWith(ctes, main)
        return Plan("with", catalog, statement, None, main.columns, param_types, writes=True)

    def _plan_declare(
        self, stmt: utility.DeclareCursor, param_oids: Sequence[int], catalog: Catalog
    ) -> Plan:
        if stmt.binary:
            raise unsupported(
                "DECLARE ... BINARY CURSOR (ask for binary results with the extended "
                "protocol's result formats instead)"
            )
        inner = _parse_one(stmt.query, stmt.offset)
        if not isinstance(inner, exp.Query | exp.Values):
            word = stmt.query.split(None, 1)[0]
            raise SqlError(
                SYNTAX_ERROR, f'syntax error at or near "{word}"', position=stmt.offset + 1
            )
        query = self._plan(inner, stmt.query, param_oids, catalog)
        if query.kind == "with":
            raise sql_modifying_ctes.in_cursor()
        if query.kind == "query" and query.statement.lock_rows:
            # FOR UPDATE: each row locked as FETCH reads it, not a batch ahead of the position.
            query.node = self.engine.planner.plan_query(query.statement.rel, lock_as_fetched=True)
        return Plan(
            "declare",
            query.catalog,
            (stmt, query),
            param_types=query.param_types,
            writes=query.writes,
            views=query.views,
        )

    def _writer(self, table: TableDef, binder: Binder, fire_triggers: bool = True) -> TableWriter:
        """The writer of ``table`` for a statement (its triggers fire unless it is DDL's
        rewrite of the table's rows)."""
        checks = [
            (ck.name, ddl_validate.bind_table_expr(binder, table, ck.expression))
            for ck in table.checks
        ]
        catalog = binder.catalog
        return make_writer(
            table,
            self.engine.planner.codec(table),
            checks,
            catalog,
            lambda child: self._writer(child, Binder(catalog, Params())),
            generated_columns.bind_all(binder, table),
            index_expressions.bind_all(binder, table),
            index_expressions.bind_predicates(binder, table),
            # WHEN conditions bound apart: they take none of the statement's parameters.
            RowTriggers.of(table, catalog, Binder(catalog, Params()))
            if fire_triggers and table.triggers
            else None,
        )

    def _plan_insert(
        self, bound: InsertStmt, binder: Binder, catalog: Catalog, param_types: list[SqlType]
    ) -> Plan:
        table = bound.table
        writer = self._writer(table, binder)
        node = self.engine.planner.plan(bound.source)
        positions = [table.position(cid) for cid in bound.target_ids]
        defaults: list[tuple[int, Any]] = []
        for cid, e in bound.defaults.items():
            col = table.column_by_id(cid)
            pos = table.position(cid)
            if (seq := sequence_ddl.default_sequence(table, col, catalog)) is not None:
                defaults.append((pos, ("serial", seq)))
            elif not (isinstance(e, BConst) and e.value is None):
                defaults.append((pos, ("expr", compile_expr(e))))
        sequenced = [
            p
            for p in positions
            if sequence_ddl.default_sequence(table, table.columns[p], catalog) is not None
        ]  # where VALUES may say DEFAULT for a sequence's next value
        extra: dict[str, Any] = {
            "positions": positions,
            "defaults": defaults,
            "sequenced": sequenced,
        }
        oc = bound.on_conflict
        if oc is not None and oc.do_update:
            extra["conflict_assign"] = [
                (table.position(c.id), compile_expr(e)) for c, e in oc.assignments
            ]
            extra["conflict_where"] = compile_expr(oc.where) if oc.where is not None else None
            conflict_exprs = [e for _, e in oc.assignments]
            if oc.where is not None:
                conflict_exprs.append(oc.where)
            extra["conflict_runners"] = self.engine.planner.runners(conflict_exprs)
        return Plan(
            "insert",
            catalog,
            bound,
            node,
            _returning_columns(bound.returning_cols),
            param_types,
            writer,
            _compile_list(bound.returning),
            extra,
            writes=True,
            returning_runners=self.engine.planner.runners(bound.returning or []),
        )

    def _plan_copy(
        self, stmt: utility.CopyStatement, catalog: Catalog, param_oids: Sequence[int]
    ) -> Plan:
        if stmt.query is not None:
            inner = _parse_one(stmt.query, 0)
            if not isinstance(inner, exp.Query | exp.Values):
                raise unsupported("COPY (statement) other than a query")
            if inner.args.get("into") is not None:
                raise unsupported("COPY (SELECT INTO)")
            plan = self._plan(inner, stmt.query, param_oids, catalog)
            if plan.kind == "with":
                raise unsupported("COPY (query) TO with data-modifying statements in WITH")
            return Plan(
                "copy",
                catalog,
                stmt,
                plan.node,
                None,
                [],
                extra={"columns": plan.columns},
                views=plan.views,
            )
        from percolator.server.copy import copy_target

        table, cols = copy_target(catalog, stmt)
        return Plan(
            "copy",
            catalog,
            stmt,
            None,
            None,
            [],
            extra={"table": table, "target": cols},
            writes=stmt.direction_in,
        )

    # -- execution -------------------------------------------------------------------------

    def _context(self, txn: Transaction, catalog: Catalog, params: list[object]) -> ExecContext:
        # The statement's zone is the session's now (plans are shared by sessions in other
        # zones): value-level code without the context reads it from the task's variable.
        use_setting(self.settings["timezone"])
        return ExecContext(
            txn=txn,
            catalog=catalog,
            params=params,
            user=self.user,
            database=self.database,
            backend_pid=self.backend_pid,
            settings=self.settings,
            transaction_time=self.txn_time,
            statement_time=dt.datetime.now(dt.UTC),
            bootstrap_user=self.engine.config.bootstrap_user,
            set_setting=lambda name, value, local=False: self._set(name, value, local=local),
            client=self.engine.client,
            cursors=self.cursors,
            deferred_constraints=self.deferred_constraints,
            sequences=self.sequences,
            advisory=self.advisory,
            notifications=self.notifications,
            backends=self.engine.backends,
            functions=self.functions,
        )

    async def _execute(self, plan: Plan, params: list[object]) -> Any:
        kind = plan.kind
        self._views_used |= plan.views
        if kind == "utility":
            return await self._utility(plan.statement)
        if kind == "introspection":
            ctx = self._context(await self.transaction(), self.current_catalog(), params)
            rows = introspection.rows(ctx, params[0])  # type: ignore[arg-type]
            return _result(self, plan.columns or [], rows, "SELECT")
        if kind == "ddl":
            return await self._ddl(plan.statement)
        if kind == "declare":
            return await self._declare(plan, params)
        if kind == "explain":
            lines = _explain_lines(plan.statement)
            return _result(
                self, plan.columns or [], [(line,) for line in lines], "EXPLAIN", count=False
            )
        if kind == "copy":
            from percolator.server.copy import start_copy

            txn = await self.transaction(writes=plan.writes)
            return await start_copy(self, plan, txn)
        txn = await self.transaction(writes=plan.writes)
        assert plan.catalog is not None
        ctx = self._context(txn, plan.catalog, params)
        ctx.row_locking = self._row_locking(plan)
        if ctx.row_locking is not None and ctx.row_locking.read_committed and _locks_rows(plan):
            return await self._rerun_on_change(plan, params, ctx.row_locking)
        return await self._run_statement(plan, ctx)

    def _row_locking(self, plan: Plan, *, rerun: bool = True) -> RowLocking | None:
        """How the statement locks rows: None when it locks none (``percolator.locking =
        optimistic``, or a statement that neither writes nor says FOR UPDATE)."""
        if not plan.writes or self.settings.get("percolator.locking") == "optimistic":
            return None
        timeout_ms = parse_duration_ms(self.settings.get("lock_timeout", "0"))
        return RowLocking(
            timeout_s=timeout_ms / 1000 if timeout_ms > 0 else None,
            read_committed=self.isolation in ("read committed", "read uncommitted"),
            can_rerun=rerun,
        )

    async def _rerun_on_change(self, plan: Plan, params: list[object], locking: RowLocking) -> Any:
        """READ COMMITTED: run the statement; if a row it locked changed after its snapshot,
        undo its writes and run it again on a new snapshot, keeping its row locks, so the
        next run sees the rows' newest versions (row_locking.py). A query's rows are
        produced here, before any is sent."""
        assert plan.catalog is not None and self.txn is not None
        txn = self.txn
        txn.start_journal()
        try:
            for _ in range(_RERUNS_ON_CHANGE):
                ctx = self._context(txn, plan.catalog, params)
                ctx.row_locking = locking
                try:
                    if plan.kind == "query":
                        assert plan.node is not None
                        rows = [r async for r in plan.node.rows(ctx)]
                        return RowsExecution(self, plan.columns, _iter_list(rows), "SELECT")
                    return await self._run_statement(plan, ctx)
                except RowChanged:
                    txn.undo_journal()
                    await self.engine.client.renew_snapshot(txn)
        finally:
            txn.stop_journal()
        raise SqlError(
            SERIALIZATION_FAILURE,
            "could not serialize access due to concurrent update",
            detail=f"rows kept changing over {_RERUNS_ON_CHANGE} runs of the statement",
        )

    async def _run_statement(self, plan: Plan, ctx: ExecContext) -> Any:
        """Run a query or DML statement in ``ctx`` (a DML statement between its table's
        statement-level triggers)."""
        triggers = plan.writer.triggers if plan.writer is not None else None
        if triggers is None or plan.kind not in ("insert", "update", "delete", "merge"):
            return await self._run_statement_itself(plan, ctx)
        events = _statement_events(plan)
        await triggers.statement(ctx, True, events)
        result = await self._run_statement_itself(plan, ctx)
        await triggers.statement(ctx, False, events[::-1])  # Postgres's order: reversed
        return result

    async def _run_statement_itself(self, plan: Plan, ctx: ExecContext) -> Any:
        kind = plan.kind
        if kind == "query":
            assert plan.node is not None
            return RowsExecution(self, plan.columns, plan.node.rows(ctx), "SELECT")
        if kind == "insert":
            return await self._insert(plan, ctx)
        if kind == "update":
            assert plan.writer is not None and plan.node is not None
            rows = await update_rows(
                plan.writer, ctx, plan.node, plan.extra["assignments"], plan.extra["runners"]
            )
            return await self._dml_result(plan, ctx, rows, f"UPDATE {len(rows)}")
        if kind == "delete":
            assert plan.writer is not None and plan.node is not None
            rows = await delete_rows(plan.writer, ctx, plan.node)
            return await self._dml_result(plan, ctx, rows, f"DELETE {len(rows)}")
        if kind == "merge":
            assert plan.writer is not None
            count = await run_merge(plan.extra["merge"], plan.writer, ctx)
            return _done(self, f"MERGE {count}")
        if kind == "with":
            return await self._run_with(plan.statement, ctx)
        raise unsupported(kind)

    async def _run_with(self, statement: modifying_ctes.ModifyingWith, ctx: ExecContext) -> Any:
        """A statement with data-modifying CTEs: each part runs as it would alone."""

        async def run_part(part: Plan) -> Any:
            execution = await self._run_statement(part, ctx)
            if part.kind == "query":  # its rows read now, on the statement's snapshot
                return _result(self, part.columns or [], await execution.drain(), "SELECT")
            return execution

        return await modifying_ctes.run(statement, ctx, run_part, RowsExecution.drain)

    async def _declare(self, plan: Plan, params: list[object]) -> Any:
        stmt, query = plan.statement
        if not self.block and not stmt.hold:
            raise SqlError(
                NO_ACTIVE_SQL_TRANSACTION, "DECLARE CURSOR can only be used in transaction blocks"
            )
        self.cursors.check_new(stmt.name)
        txn = await self.transaction(writes=query.writes)
        assert query.node is not None and query.catalog is not None
        ctx = self._context(txn, query.catalog, params)
        ctx.row_locking = self._row_locking(query, rerun=False)
        rows = query.node.rows(ctx)
        cursor = Cursor(
            stmt.name,
            stmt.text,
            query.columns or [],
            scroll=stmt.scroll,
            hold=stmt.hold,
            binary=stmt.binary,
            depth=len(self.savepoints),
            source=rows,
        )
        self.cursors.add(cursor)
        if not self.block:
            await cursor.settle()  # WITH HOLD, and its implicit transaction commits now
        return _done(self, "DECLARE CURSOR")

    async def _dml_result(
        self, plan: Plan, ctx: ExecContext, rows: list[tuple[object, ...]], tag: str
    ) -> Any:
        if plan.returning is None:
            return _done(self, tag)
        out = []
        for r in rows:
            for runner in plan.returning_runners:
                await runner.prepare(r, ctx)
            out.append(tuple(f(r, ctx) for f in plan.returning))
        ex = _result(self, plan.columns or [], out, tag, count=False)
        return ex

    async def _insert(self, plan: Plan, ctx: ExecContext) -> Any:
        assert plan.writer is not None and plan.node is not None
        table: TableDef = plan.statement.table
        width = len(table.columns)
        positions = plan.extra["positions"]
        defaults = plan.extra["defaults"]
        sequenced = plan.extra["sequenced"]
        rows = []
        async for src in plan.node.rows(ctx):
            row: list[object] = [None] * width
            for pos, v in zip(positions, src, strict=False):
                row[pos] = v
            for pos in sequenced:
                if isinstance(v := row[pos], NextValue):  # DEFAULT in VALUES
                    row[pos] = await self.sequences.nextval(v.sequence)
            for pos, (kind, f) in defaults:
                if kind == "serial":
                    row[pos] = await self.sequences.nextval(f)
                else:
                    row[pos] = f((), ctx)
            rows.append(tuple(row))
        conflict_update = None
        oc = plan.statement.on_conflict
        if oc is not None and oc.do_update:
            assigns = plan.extra["conflict_assign"]
            where = plan.extra["conflict_where"]
            runners = plan.extra["conflict_runners"]

            async def conflict_update(
                existing: tuple[object, ...], excluded: tuple[object, ...]
            ) -> Any:
                combined = existing[:width] + excluded
                for runner in runners:  # subqueries and waiting calls of SET and WHERE
                    await runner.prepare(combined, ctx)
                if where is not None and where(combined, ctx) is not True:
                    return None
                new = list(existing)
                for pos, f in assigns:
                    new[pos] = f(combined, ctx)
                # Checked by the writer, after BEFORE UPDATE triggers may have changed it.
                return plan.writer.generate(tuple(new), ctx)  # type: ignore[union-attr]

        result = await insert_rows(plan.writer, ctx, rows, oc, conflict_update)
        return await self._dml_result(plan, ctx, result.rows, f"INSERT 0 {result.count}")

    async def _ddl(self, node: exp.Expression) -> Any:
        """Run DDL, its names resolved through the search path as the catalog is now."""
        return await self._ddl_resolved(schemas.qualify(node, self.current_catalog()))

    async def _ddl_resolved(self, node: exp.Expression) -> Any:
        if isinstance(node, exp.Create) and node.args.get("expression") is not None:
            if (node.args.get("kind") or "").upper() == "TABLE":
                return await self._create_table_as(node)
        if self.temp_tables.handles(node):
            done = await self.temp_tables.run_ddl(self, node)
            return _done(self, done.tag, [Notice(ddl.notice_sqlstate(n), n) for n in done.notices])
        txn = await self.transaction(writes=True)
        base = await self._catalog_for_ddl(txn)
        before = base
        binder = Binder(base, Params())
        result = ddl.apply_ddl(base, node, binder.exprs.bind_type)
        ddl_validate.validate(base, result.catalog)
        after = result.catalog
        known = {s.oid for s in before.sequences.values()}
        for seq in result.catalog.sequences.values():
            if seq.oid not in known:  # created by the statement (not renamed by it)
                after = after.with_sequence(replace(seq, counter=f"{seq.oid}.{txn.start_ts}"))
        await self._run_data_actions(txn, after, result.actions)
        if after is not before:
            if after.observers:
                observer_ddl.check_dependencies(after)
            await self._stage_catalog(txn, before, after)
        notices = [Notice(ddl.notice_sqlstate(n), n) for n in result.notices]
        return _done(self, result.tag, notices)

    async def _create_table_as(self, node: exp.Create) -> Any:
        """CREATE [TEMP] TABLE name [(columns)] AS query [WITH [NO] DATA] (and SELECT ...
        INTO): a table of the query's columns, by their names and types (no keys, as in
        Postgres), then the query's rows inserted in the same transaction (tagged SELECT n,
        as in Postgres)."""
        target, query = node.this, node.args["expression"]
        table = target.this if isinstance(target, exp.Schema) else target
        given = [c.name for c in target.expressions] if isinstance(target, exp.Schema) else []
        if node.args.get("exists") and self.current_catalog().relation_exists(table.name):
            notice = Notice("42P07", f'relation "{table.name}" already exists, skipping')
            return _done(self, "CREATE TABLE AS", [notice])
        bound = Binder(self.current_catalog(), Params()).bind_statement(query)
        if not isinstance(bound, QueryStmt):
            raise SqlError(SYNTAX_ERROR, "CREATE TABLE AS needs a query")
        columns = bound.rel.columns
        if len(given) > len(columns):
            raise SqlError(SYNTAX_ERROR, "too many column names were specified")
        names = given + [c.name for c in columns[len(given) :]]
        defs = [
            exp.ColumnDef(
                this=exp.to_identifier(name, quoted=True), kind=_data_type(c.type.format())
            )
            for name, c in zip(names, columns, strict=True)
        ]
        properties = node.args.get("properties")
        no_data = False
        if properties is not None:
            no_data = any(
                isinstance(p, exp.WithDataProperty) and p.args.get("no")
                for p in properties.expressions
            )
            kept = [p for p in properties.expressions if not isinstance(p, exp.WithDataProperty)]
            properties = exp.Properties(expressions=kept) if kept else None
        create = exp.Create(
            this=exp.Schema(this=table.copy(), expressions=defs),
            kind="TABLE",
            properties=properties,
        )
        await self._ddl_resolved(create)
        if no_data:
            return _done(self, "CREATE TABLE AS")
        source = query.copy()
        with_ = source.args.get("with_")  # the INSERT's, where data-modifying CTEs may be
        source.set("with_", None)
        insert = exp.Insert(
            this=exp.Schema(
                this=table.copy(), expressions=[exp.to_identifier(n, quoted=True) for n in names]
            ),
            expression=source,
            with_=with_,
        )
        plan = self._plan(insert, "", [], self.current_catalog())
        inserted = await self._execute(plan, [])
        count = inserted.command_tag.rsplit(" ", 1)[-1]
        return _done(self, f"SELECT {count}")

    async def _run_data_actions(
        self, txn: Transaction, after: Catalog, actions: Sequence[ddl.DataAction]
    ) -> None:
        """The data work of a DDL statement (ddl_data.py), in its transaction, against the
        catalog the statement leads to."""
        for action in actions:
            ctx = self._context(txn, after, [])
            await run_action(
                action,
                after,
                ctx,
                lambda t: self._writer(t, Binder(after, Params()), fire_triggers=False),
                lambda t, col: self.insert_defaults(t, [col], after, Binder(after, Params()))[0][1],
                lambda t, ck: compile_expr(
                    ddl_validate.bind_table_expr(Binder(after, Params()), t, ck.expression)
                ),
            )

    async def _stage_catalog(self, txn: Transaction, before: Catalog, after: Catalog) -> None:
        """Buffer a DDL statement's catalog changes; later statements of this transaction
        see ``after``, other sessions see it once the transaction commits.

        The watches ``after`` adds (new observers, a TRUNCATEd table's new storage) are
        registered now, before the DDL commits, so that no write committed after it goes
        unnoticed; the ones it removes go after the commit (:meth:`_drop_watches`)."""
        added = observer_ddl.watches_of(after) - observer_ddl.watches_of(before)
        if added:
            await observer_admin.add_watches(self.engine.client, added)
        catalog_store.write_changes(txn, before, after)
        self.txn_catalog = after

    async def _catalog_for_ddl(self, txn: Transaction) -> Catalog:
        """The catalog a DDL statement starts from: this transaction's own if it already ran
        DDL, else the store's as of our snapshot (reloaded if our cache is behind), so that
        the version cell read here makes concurrent DDL conflict."""
        if self.txn_catalog is not None:
            return self.txn_catalog
        self._ddl_read_catalog = True
        base = self.engine.catalog
        version = await catalog_store.read_version(txn)
        if version != base.version:
            base = await catalog_store.load(txn)
            if version > self.engine.catalog.version:
                self.engine.publish(base)
        return base

    def insert_defaults(
        self, table: TableDef, columns: list[Any], catalog: Catalog, binder: Binder
    ) -> list[tuple[int, Callable[[ExecContext], Awaitable[object]]]]:
        """(position, async value function) for the columns an insert leaves out."""
        out: list[tuple[int, Callable[[ExecContext], Awaitable[object]]]] = []
        for col in columns:
            pos = table.position(col.id)
            if (seq := sequence_ddl.default_sequence(table, col, catalog)) is not None:

                async def serial(_ctx: ExecContext, _seq: SequenceDef = seq) -> object:
                    return await self.sequences.nextval(_seq)

                out.append((pos, serial))
            elif col.default is not None:
                f = compile_expr(binder.default_expr(table, col))

                async def value(ctx: ExecContext, _f: Any = f) -> object:
                    return _f((), ctx)

                out.append((pos, value))
        return out

    # -- utility statements ----------------------------------------------------------------

    async def _utility(self, stmt: Any) -> Any:
        if isinstance(stmt, utility.Begin):
            return await self._begin(stmt.modes)
        if isinstance(stmt, utility.Commit | utility.Rollback):
            commit = isinstance(stmt, utility.Commit)
            if not self.block:
                warning = _warning(NO_ACTIVE_SQL_TRANSACTION, "there is no transaction in progress")
                await self._end_implicit(commit=commit)
                return _done(self, "COMMIT" if commit else "ROLLBACK", [warning])
            return _done(self, await self._end_block(commit=commit))
        if isinstance(stmt, utility.PrepareTransaction):
            # Postgres ends the transaction block when a prepare fails (it rolls back), so
            # the session is idle again rather than in a failed block.
            if self.block:
                await self._end_block(commit=False)
            raise unsupported("PREPARE TRANSACTION (two-phase commit from the client)")
        if isinstance(stmt, utility.Savepoint):
            self.take_savepoint(stmt.name, await self._block_txn("SAVEPOINT"))
            return _done(self, "SAVEPOINT")
        if isinstance(stmt, utility.ReleaseSavepoint):
            await self._block_txn("RELEASE SAVEPOINT")
            self.release_savepoints(self._savepoint_index(stmt.name))
            return _done(self, "RELEASE")
        if isinstance(stmt, utility.RollbackToSavepoint):
            txn = await self._block_txn("ROLLBACK TO SAVEPOINT")
            await self.rollback_to_savepoint(txn, self._savepoint_index(stmt.name))
            self.failed = False
            return _done(self, "ROLLBACK")
        if isinstance(stmt, utility.SetVariable):
            if stmt.local and not self.block:
                warning = _warning(
                    NO_ACTIVE_SQL_TRANSACTION, "SET LOCAL can only be used in transaction blocks"
                )
                return _done(self, "SET", [warning])
            value = DEFAULTS.get(stmt.name.lower(), "") if stmt.value is None else stmt.value
            self._set(stmt.name, value, local=stmt.local)
            return _done(self, "SET")
        if isinstance(stmt, utility.SetTransaction):
            self._set_transaction(stmt)
            return _done(self, "SET")
        if isinstance(stmt, utility.Show):
            return self._show(stmt.name)
        if isinstance(stmt, utility.Reset):
            if stmt.name == "all":
                in_transaction = self.block or self.txn is not None
                for name in list(self.settings):
                    value = DEFAULTS.get(name)
                    if value is None or name == "session_authorization":
                        continue
                    if self.settings[name] != value:
                        self._settings_tx.set(
                            name, value, in_transaction=in_transaction, local=False
                        )
                        self._setting_changed(name, value)
            else:
                self._set(stmt.name, DEFAULTS.get(stmt.name.lower(), ""))
            return _done(self, "RESET")
        if isinstance(stmt, utility.SetConstraints):
            return await self._set_constraints(stmt)
        if isinstance(stmt, utility.Listen | utility.Unlisten | utility.Notify):
            return await self._listen_notify(stmt)
        if isinstance(stmt, comments.CommentOn):
            return await self._comment(stmt)
        if isinstance(
            stmt,
            sequence_ddl.CreateSequence | sequence_ddl.AlterSequence | sequence_ddl.DropSequence,
        ):
            return await self._sequence_ddl(stmt)
        if isinstance(stmt, enums.CreateEnum | enums.AlterEnum | enums.DropType):
            return await self._enum_ddl(stmt)
        if isinstance(stmt, function_ddl.CreateFunction | function_ddl.DropFunction):
            return await self._function_ddl(stmt)
        if isinstance(
            stmt, trigger_ddl.CreateTrigger | trigger_ddl.DropTrigger | trigger_ddl.EnableTrigger
        ):
            return await self._trigger_ddl(stmt)
        if isinstance(stmt, function_ddl.Call):
            return _done(self, "CALL", await session_functions.call_procedure(self, stmt))
        if isinstance(stmt, schemas.CreateSchema | schemas.DropSchema | schemas.RenameSchema):
            return await self._schema_ddl(stmt)
        if isinstance(stmt, utility.PrepareStatement):
            return self._sql_prepare(stmt)
        if isinstance(stmt, utility.ExecuteStatement):
            return await self._sql_execute(stmt)
        if isinstance(stmt, utility.Deallocate):
            if stmt.name is None:
                self.sql_prepared.clear()
            else:
                self.sql_prepared.pop(stmt.name, None)
            self._deallocations.append(stmt.name)
            return _done(self, "DEALLOCATE ALL" if stmt.name is None else "DEALLOCATE")
        if isinstance(stmt, utility.FetchCursor):
            cursor = self.cursors.get(stmt.name)
            if stmt.move:
                return _done(self, f"MOVE {await move(cursor, stmt)}")
            return RowsExecution(self, cursor.columns, fetch_rows(cursor, stmt), "FETCH")
        if isinstance(stmt, utility.CloseCursor):
            await self.cursors.close(stmt.name)
            return _done(self, "CLOSE CURSOR" if stmt.name is not None else "CLOSE CURSOR ALL")
        if isinstance(stmt, utility.NoOp):
            if stmt.tag.startswith("DISCARD"):
                await self._discard(stmt.tag)
            notices = [Notice("01000", stmt.notice, "WARNING")] if stmt.notice else []
            return _done(self, stmt.tag, notices)
        if isinstance(stmt, utility.CreateRole | utility.AlterRole | utility.DropRole):
            return await self._role(stmt)
        if isinstance(stmt, database_ddl.CreateDatabase | database_ddl.DropDatabase):
            in_block = self.block or self.txn is not None
            skipped = database_ddl.run(stmt, self.database, in_block)
            return _done(self, "DROP DATABASE", [Notice("00000", m) for m in skipped])
        if isinstance(stmt, utility.CreateObserver | utility.DropObserver | utility.AlterObserver):
            return await self._observer_ddl(stmt)
        if isinstance(stmt, utility.DoBlock):
            from percolator.server.session_plpgsql import run_do

            return _done(self, "DO", await run_do(self, stmt))
        raise unsupported(type(stmt).__name__)

    # -- savepoints (SAVEPOINT, and PL/pgSQL's EXCEPTION blocks) ----------------------------

    def take_savepoint(self, name: str, txn: Transaction) -> int:
        """A savepoint of everything a transaction keeps (its writes, catalog, settings,
        temporary tables, LISTEN / NOTIFY); its index on the session's stack."""
        savepoint = txn.savepoint()
        self.savepoints.append((name, savepoint, self.txn_catalog))
        self._settings_tx.savepoint(self.read_only)
        self.temp_tables.mark(savepoint)
        self.notifications.mark(savepoint)
        return len(self.savepoints) - 1

    async def rollback_to_savepoint(self, txn: Transaction, index: int) -> None:
        """Undo what the transaction did since savepoint ``index`` (which stays)."""
        _, savepoint, catalog = self.savepoints[index]
        del self.savepoints[index + 1 :]
        values, self.read_only = self._settings_tx.rollback_to(index)
        self._restore_settings(values)
        await self.cursors.after_rollback_to(index)
        await txn.rollback_to(savepoint)
        self.temp_tables.rollback_to(savepoint)
        self.notifications.rollback_to(savepoint)
        self.txn_catalog = catalog

    def release_savepoints(self, index: int) -> None:
        """Forget savepoint ``index`` and those after it (their work stays)."""
        if len(self.savepoints) > index:
            del self.savepoints[index:]
            self.read_only = self._settings_tx.release(index)
            self.cursors.after_release(index)

    def _sql_prepare(self, stmt: utility.PrepareStatement) -> Any:
        if stmt.name in self.sql_prepared:
            raise SqlError(
                DUPLICATE_PREPARED_STATEMENT, f'prepared statement "{stmt.name}" already exists'
            )
        payload = _parse_one(stmt.statement, stmt.offset)
        if not isinstance(payload, _PREPARABLE):
            word = stmt.statement.split(None, 1)[0]
            raise SqlError(
                SYNTAX_ERROR, f'syntax error at or near "{word}"', position=stmt.offset + 1
            )
        catalog = self.current_catalog()
        binder = Binder(catalog, Params())
        oids = [binder.exprs.bind_type(_data_type(t)).oid for t in stmt.types]
        parsed = ParsedStatement(stmt.statement, payload=payload)
        prepared = self._prepare_now(parsed, oids)
        self.sql_prepared[stmt.name] = SqlPrepared(stmt.name, stmt.statement, prepared)
        return _done(self, "PREPARE")

    async def _sql_execute(self, stmt: utility.ExecuteStatement) -> Any:
        entry = self.sql_prepared.get(stmt.name)
        if entry is None:
            raise SqlError(
                INVALID_SQL_STATEMENT_NAME, f'prepared statement "{stmt.name}" does not exist'
            )
        prepared = entry.prepared
        values = await self._execute_arguments(stmt, prepared.param_types)
        plan, values = self._current_plan(prepared, values)
        return await self._execute(plan, values)

    async def _execute_arguments(
        self, stmt: utility.ExecuteStatement, types: list[SqlType]
    ) -> list[object]:
        """EXECUTE's arguments, evaluated and cast to the statement's parameter types."""
        if not types:
            return []  # Postgres ignores arguments given to a statement that takes none
        args: list[exp.Expression] = []
        if stmt.arguments is not None:
            select = _parse_one(f"SELECT {stmt.arguments[1:-1]}", stmt.offset - 6)
            args = list(select.expressions)
        if len(args) != len(types):
            raise SqlError(
                SYNTAX_ERROR,
                f'wrong number of parameters for prepared statement "{stmt.name}"',
                detail=f"Expected {len(types)} parameters but got {len(args)}.",
            )
        casts = [exp.cast(a, _data_type(t.format())) for a, t in zip(args, types, strict=True)]
        query = self._plan(exp.select(*casts), "", [], self.current_catalog())
        assert query.node is not None and query.catalog is not None
        ctx = self._context(await self.transaction(), query.catalog, [])
        rows = [row async for row in query.node.rows(ctx)]
        return list(rows[0])

    async def _enum_ddl(self, stmt: enums.EnumStatement) -> Any:
        """CREATE TYPE ... AS ENUM, ALTER TYPE, DROP TYPE, in the transaction like other DDL
        (DROP TYPE ... CASCADE drops the type's columns through ALTER TABLE)."""
        txn = await self.transaction(writes=True)
        base = await self._catalog_for_ddl(txn)
        bind_type = Binder(base, Params()).exprs.bind_type

        def alter_table(catalog: Catalog, sql: str) -> ddl.DdlResult:
            return ddl.apply_ddl(catalog, sqlglot.parse_one(sql, read="postgres"), bind_type)

        result = enums.apply(base, stmt, alter_table)
        await self._run_data_actions(txn, result.catalog, result.actions)
        if result.catalog is not base:
            await self._stage_catalog(txn, base, result.catalog)
        return _done(self, result.tag, [Notice("00000", n) for n in result.notices])

    async def _trigger_ddl(self, stmt: trigger_ddl.TriggerStatement) -> Any:
        """CREATE / DROP TRIGGER, in the transaction like other DDL."""
        txn = await self.transaction(writes=True)
        base = await self._catalog_for_ddl(txn)
        if isinstance(stmt, trigger_ddl.CreateTrigger):
            after, notices, tag = trigger_ddl.create(base, stmt), [], "CREATE TRIGGER"
        elif isinstance(stmt, trigger_ddl.DropTrigger):
            (after, notices), tag = trigger_ddl.drop(base, stmt), "DROP TRIGGER"
        else:
            (after, notices), tag = trigger_ddl.enable(base, stmt), "ALTER TABLE"
        if after is not base:
            await self._stage_catalog(txn, base, after)
        return _done(self, tag, [Notice("00000", n) for n in notices])

    async def _function_ddl(self, stmt: function_ddl.FunctionStatement) -> Any:
        """CREATE / DROP FUNCTION, in the transaction like other DDL."""
        txn = await self.transaction(writes=True)
        base = await self._catalog_for_ddl(txn)
        bind_type = Binder(base, Params()).exprs.bind_type
        notices: list[str] = []
        if isinstance(stmt, function_ddl.CreateFunction):
            after, fn = function_ddl.create(base, stmt, bind_type, self.temp_tables.overlay)
            tag = "CREATE PROCEDURE" if fn.procedure else "CREATE FUNCTION"
            if fn.language == "plpgsql":
                session_functions.check_body(fn, stmt.body_position)
        else:
            after, notices = function_ddl.drop(base, stmt, bind_type)
            tag = "DROP PROCEDURE" if stmt.procedure else "DROP FUNCTION"
        if after is not base:
            await self._stage_catalog(txn, base, after)
        return _done(self, tag, [Notice("00000", n) for n in notices])

    async def _sequence_ddl(self, stmt: Any) -> Any:
        """CREATE / ALTER / DROP SEQUENCE, in the transaction like other DDL."""
        txn = await self.transaction(writes=True)
        base = await self._catalog_for_ddl(txn)
        notices: list[str] = []
        if isinstance(stmt, sequence_ddl.CreateSequence):
            after, notice = sequence_ddl.create(base, stmt, str(txn.start_ts))
            notices.append(notice)
            tag = "CREATE SEQUENCE"
        elif isinstance(stmt, sequence_ddl.AlterSequence):
            after, seq, notice = sequence_ddl.alter(base, stmt)
            notices.append(notice)
            restart = stmt.options.restart
            if seq is not None and (restart is not None or stmt.options.restart_default):
                self.sequences.restart(txn, seq, seq.start if restart is None else restart)
            tag = "ALTER SEQUENCE"
        else:
            after, notices = sequence_ddl.drop(base, stmt)
            tag = "DROP SEQUENCE"
        if after is not base:
            await self._stage_catalog(txn, base, after)
        return _done(self, tag, [Notice("00000", n) for n in notices if n])

    async def _schema_ddl(self, stmt: schemas.SchemaStatement) -> Any:
        """CREATE / DROP / ALTER SCHEMA, in the transaction like other DDL."""
        txn = await self.transaction(writes=True)
        base = await self._catalog_for_ddl(txn)
        after, notices, tag = schemas.apply(base, stmt, self.user)
        if after is not base:
            await self._stage_catalog(txn, base, after)
        return _done(self, tag, [Notice("00000", n) for n in notices])

    async def _comment(self, stmt: comments.CommentOn) -> Any:
        """COMMENT ON: a catalog change in the transaction, like other DDL."""
        txn = await self.transaction(writes=True)
        base = await self._catalog_for_ddl(txn)
        after = comments.apply(base, stmt)
        if after != base:
            await self._stage_catalog(txn, base, after)
        return _done(self, "COMMENT")

    async def _observer_ddl(self, stmt: Any) -> Any:
        txn = await self.transaction(writes=True)
        base = await self._catalog_for_ddl(txn)
        if isinstance(stmt, utility.CreateObserver):
            after, actions = observer_ddl.create_observer(base, stmt, txn.start_ts)
            await self._check_observer_code(after.observers[stmt.name], after, stmt)
            await self._run_data_actions(txn, after, actions)
            tag = "CREATE OBSERVER"
        elif isinstance(stmt, utility.DropObserver):
            if stmt.name not in base.observers and stmt.if_exists:
                notice = Notice("00000", f'observer "{stmt.name}" does not exist, skipping')
                return _done(self, "DROP OBSERVER", [notice])
            observer_ddl.observer(base, stmt.name)
            after = base.without_observer(stmt.name)
            tag = "DROP OBSERVER"
        else:
            after = observer_ddl.alter_observer(base, stmt)
            if stmt.action is utility.ObserverAction.RETRY_PARKED:
                key = base.observers[stmt.name].key
                count = await observer_admin.retry_parked(self.engine.client, key)
                notice = Notice("00000", f"{count} parked change(s) will run again")
                return _done(self, "ALTER OBSERVER", [notice])
            tag = "ALTER OBSERVER"
        if after is not base:
            await self._stage_catalog(txn, base, after)
        return _done(self, tag)

    async def _check_observer_code(
        self, observer: ObserverDef, catalog: Catalog, stmt: utility.CreateObserver
    ) -> None:
        """Refuse a body that does not parse or bind (42601, 42P01, 42703, ...) and a target
        that cannot be imported, before anything is registered."""
        from percolator.server.observer_programs import (
            BODY_STATEMENT_KINDS,
            body_param_oids,
            load_target,
        )

        if observer.target is not None:
            load_target(observer.target)
            return
        table = catalog.table(stmt.table)
        assert observer.body is not None
        try:
            statements = parse_body(observer.body, {c.name for c in table.columns})
        except SqlError as exc:
            raise _shifted(exc, stmt.body_offset) from None
        for st in statements:
            try:
                await self._prepare_one(
                    st.sql,
                    body_param_oids(st, table),
                    BODY_STATEMENT_KINDS,
                    "in an observer body (SELECT, INSERT, UPDATE and DELETE are allowed)",
                )
            except SqlError as exc:
                raise _shifted(exc, stmt.body_offset + st.offset) from None

    async def _discard(self, tag: str) -> None:
        """DISCARD ALL | TEMP | SEQUENCES | PLANS, as Postgres: ALL brings the session back
        to a new connection's state (what a pooler runs between clients) and is refused in a
        transaction block; plans are re-made on their own when the catalog changes."""
        if tag == "DISCARD ALL":
            if self.block or self.txn is not None:
                raise SqlError(
                    ACTIVE_SQL_TRANSACTION, "DISCARD ALL cannot run inside a transaction block"
                )
            await self._utility(utility.CloseCursor(None))
            await self._utility(utility.Reset("all"))
            await self._utility(utility.Deallocate(None))
            self.notifications.unlisten(None)
            await self.notifications.commit()  # no transaction to wait for
            await self.advisory.unlock_all()
        if tag in ("DISCARD ALL", "DISCARD TEMP", "DISCARD TEMPORARY"):
            if self.temp_tables.active:
                await self.temp_tables.close(self.engine.client)
        if tag in ("DISCARD ALL", "DISCARD SEQUENCES"):
            self.sequences.discard()

    async def _listen_notify(self, stmt: Any) -> Any:
        if isinstance(stmt, utility.Listen):
            self.notifications.listen(stmt.channel)
            tag = "LISTEN"
        elif isinstance(stmt, utility.Unlisten):
            self.notifications.unlisten(stmt.channel)
            tag = "UNLISTEN"
        else:
            self.notifications.notify(stmt.channel, stmt.payload)
            tag = "NOTIFY"
        # Outside a block they take effect when the implicit transaction ends (sync): one
        # Query is one transaction, so its duplicate NOTIFYs fold into one and a later
        # failing statement drops them, as in Postgres.
        return _done(self, tag)

    async def _run_deferred(self, txn: Transaction, names: set[str] | None = None) -> None:
        """The checks of deferred foreign keys (all, or those named), in ``txn``."""
        deferred = self.deferred_constraints
        if deferred.references or deferred.referrers:
            ctx = self._context(txn, self.current_catalog(), [])
            await run_deferred(deferred, ctx, names)

    async def _set_constraints(self, stmt: utility.SetConstraints) -> Any:
        if not self.block:
            warning = _warning(
                NO_ACTIVE_SQL_TRANSACTION, "SET CONSTRAINTS can only be used in transaction blocks"
            )
            return _done(self, "SET CONSTRAINTS", [warning])
        deferred = self.deferred_constraints
        if stmt.names is None:
            deferred.all_deferred = stmt.deferred
            deferred.by_name.clear()
            names = None
        else:
            fks = {
                fk.name: fk for t in self.current_catalog().tables.values() for fk in t.foreign_keys
            }
            for name in stmt.names:
                fk = fks.get(name)
                if fk is None:
                    raise SqlError(UNDEFINED_OBJECT, f'constraint "{name}" does not exist')
                if not fk.deferrable:
                    raise SqlError(WRONG_OBJECT_TYPE, f'constraint "{name}" is not deferrable')
                deferred.by_name[name] = stmt.deferred
            names = set(stmt.names)
        if not stmt.deferred and self.txn is not None:
            await self._run_deferred(self.txn, names)
        return _done(self, "SET CONSTRAINTS")

    async def _begin(self, modes: utility.TransactionModes) -> Any:
        if self.block:
            return _done(
                self,
                "BEGIN",
                [_warning(ACTIVE_SQL_TRANSACTION, "there is already a transaction in progress")],
            )
        self.block = True
        self.failed = False
        self.savepoints = []
        if self.txn is None:
            self.isolation = self.settings["default_transaction_isolation"]
            self.read_only = self.settings["default_transaction_read_only"] == "on"
            self.deferrable = self.settings["default_transaction_deferrable"] == "on"
        if modes.isolation is not None:
            self.isolation = modes.isolation.value
        if modes.read_only is not None:
            self.read_only = modes.read_only
        if modes.deferrable is not None:
            self.deferrable = modes.deferrable
        return _done(self, "BEGIN")

    async def _block_txn(self, what: str) -> Transaction:
        if not self.block:
            raise SqlError(
                NO_ACTIVE_SQL_TRANSACTION, f"{what} can only be used in transaction blocks"
            )
        if self.txn is None:
            self.txn = await self._new_transaction()
            self.txn_time = dt.datetime.now(dt.UTC)
            self._serializable(self.txn)
        return self.txn

    def _savepoint_index(self, name: str) -> int:
        for i in range(len(self.savepoints) - 1, -1, -1):
            if self.savepoints[i][0] == name:
                return i
        raise SqlError("3B001", f'savepoint "{name}" does not exist')

    def _set_transaction(self, stmt: utility.SetTransaction) -> None:
        modes = stmt.modes
        if stmt.session:
            if modes.isolation is not None:
                self._set("default_transaction_isolation", modes.isolation.value)
            if modes.read_only is not None:
                self._set("default_transaction_read_only", "on" if modes.read_only else "off")
            if modes.deferrable is not None:
                self._set("default_transaction_deferrable", "on" if modes.deferrable else "off")
            return
        started = self.txn is not None  # a query of the transaction has run
        if modes.isolation is not None and modes.isolation.value != self.isolation:
            if started:
                raise SqlError(
                    ACTIVE_SQL_TRANSACTION,
                    "SET TRANSACTION ISOLATION LEVEL must be called before any query",
                )
            if self.savepoints:
                raise SqlError(
                    ACTIVE_SQL_TRANSACTION,
                    "SET TRANSACTION ISOLATION LEVEL must not be called in a subtransaction",
                )
            self.isolation = modes.isolation.value
        if modes.read_only is False and self.read_only and self.block:
            if self.savepoints:
                raise SqlError(
                    ACTIVE_SQL_TRANSACTION,
                    "cannot set transaction read-write mode inside a read-only transaction",
                )
            if started:
                raise SqlError(
                    ACTIVE_SQL_TRANSACTION,
                    "transaction read-write mode must be set before any query",
                )
        if modes.read_only is not None:
            self.read_only = modes.read_only
        if modes.deferrable is not None:
            self.deferrable = modes.deferrable

    def _set(self, name: str, value: str, quiet: bool = False, *, local: bool = False) -> None:
        key = name.lower()
        if key == "transaction_isolation":
            level = value.lower()
            self.isolation = level
            return
        if key == "transaction_read_only":
            self.read_only = value.lower() in ("on", "true", "1")
            return
        value = normalize(name, value)
        if key in ("default_transaction_read_only", "default_transaction_deferrable"):
            value = "on" if value.lower() in ("on", "true", "1", "yes") else "off"
        in_transaction = self.block or self.txn is not None
        self._settings_tx.set(key, value, in_transaction=in_transaction, local=local)
        self._setting_changed(key, value, quiet)

    def _setting_changed(self, key: str, value: str, quiet: bool = False) -> None:
        """What a new value of ``key`` sets going: the statement's time zone, a
        ParameterStatus for the settings the client is told of."""
        if key == "timezone":
            use_setting(value)
        elif key == "extra_float_digits":
            use_extra_float_digits(value)
        reported = reported_name(key)
        if reported is not None and not quiet:
            self._changes.append((reported, value))

    def _restore_settings(self, values: dict[str, str]) -> None:
        """Settings back to ``values`` (a rollback, a ROLLBACK TO, the end of SET LOCAL)."""
        for key in [k for k in self.settings if k not in values]:
            # A custom setting first set in what was undone stays defined, empty, as
            # Postgres keeps its placeholder.
            self.settings[key] = ""
        for key, value in values.items():
            if self.settings.get(key) != value:
                self.settings[key] = value
                self._setting_changed(key, value)

    def _show(self, name: str) -> Any:
        key = name.lower()
        if key == "all":
            rows = [(k, v, "") for k, v in sorted(self.settings.items())]
            cols = [
                ResultColumn("name", T.TEXT),
                ResultColumn("setting", T.TEXT),
                ResultColumn("description", T.TEXT),
            ]
            return _result(self, cols, rows, "SHOW", count=False)
        if key == "transaction_isolation":
            value = (
                self.isolation
                if (self.block or self.txn is not None)
                else self.settings["default_transaction_isolation"]
            )
        elif key == "transaction_read_only":
            value = "on" if self.read_only else "off"
        elif key == "transaction_deferrable":
            value = (
                ("on" if self.deferrable else "off")
                if (self.block or self.txn is not None)
                else self.settings["default_transaction_deferrable"]
            )
        elif key in self.settings:
            value = self.settings[key]
        else:
            raise SqlError(UNDEFINED_OBJECT, f'unrecognized configuration parameter "{name}"')
        col_name = reported_name(key) or key
        return _result(self, [ResultColumn(col_name, T.TEXT)], [(value,)], "SHOW", count=False)

    async def _role(self, stmt: Any) -> Any:
        from percolator.server.frontend.auth import make_md5_hash, make_scram_verifier

        info = await self.engine.lookup_user(self.user)
        if info is None or not info.superuser:
            raise SqlError(INSUFFICIENT_PRIVILEGE, "permission denied to manage roles")
        txn = await self.transaction(writes=True)
        base = await self._catalog_for_ddl(txn)
        catalog = base
        bootstrap = self.engine.config.bootstrap_user
        if isinstance(stmt, utility.CreateRole):
            if stmt.name in catalog.roles or stmt.name == bootstrap:
                raise SqlError(DUPLICATE_OBJECT, f'role "{stmt.name}" already exists')
            oid, catalog = catalog.allocate_id()
            opts = stmt.options
            role = RoleDef(
                stmt.name,
                oid + 16384,
                superuser=bool(opts.superuser),
                login=opts.login if opts.login is not None else stmt.is_user,
            )
            if opts.password is not None:
                role = replace(
                    role,
                    scram_verifier=make_scram_verifier(opts.password),
                    md5_hash=make_md5_hash(stmt.name, opts.password),
                )
            catalog = catalog.with_role(role)
            tag = "CREATE ROLE"
        elif isinstance(stmt, utility.AlterRole):
            role = catalog.roles.get(stmt.name)
            if role is None:
                if stmt.name == bootstrap:
                    raise unsupported(
                        f'changing the bootstrap user "{bootstrap}" '
                        "(set its password in the server configuration)"
                    )
                raise SqlError(UNDEFINED_OBJECT, f'role "{stmt.name}" does not exist')
            if stmt.rename_to is not None:
                catalog = catalog.without_role(stmt.name).with_role(
                    replace(role, name=stmt.rename_to, scram_verifier=None, md5_hash=None)
                )
                notices = [Notice("00000", "MD5 password cleared because of role rename")]
                await self._stage_catalog(txn, base, catalog)
                return _done(self, "ALTER ROLE", notices)
            opts = stmt.options
            if opts.password is not None:
                role = replace(
                    role,
                    scram_verifier=make_scram_verifier(opts.password),
                    md5_hash=make_md5_hash(role.name, opts.password),
                )
            if opts.password_null:
                role = replace(role, scram_verifier=None, md5_hash=None)
            if opts.superuser is not None:
                role = replace(role, superuser=opts.superuser)
            if opts.login is not None:
                role = replace(role, login=opts.login)
            catalog = catalog.with_role(role)
            tag = "ALTER ROLE"
        else:
            notices = []
            for name in stmt.names:
                if name == self.user or name == bootstrap:
                    raise SqlError(
                        "55006",
                        "current user cannot be dropped"
                        if name == self.user
                        else f'cannot drop role "{name}"',
                    )
                if name not in catalog.roles:
                    if stmt.if_exists:
                        notices.append(Notice("00000", f'role "{name}" does not exist, skipping'))
                        continue
                    raise SqlError(UNDEFINED_OBJECT, f'role "{name}" does not exist')
                catalog = catalog.without_role(name)
            if catalog is not base:
                await self._stage_catalog(txn, base, catalog)
            return _done(self, "DROP ROLE", notices)
        await self._stage_catalog(txn, base, catalog)
        return _done(self, tag)


# -- helpers --------------------------------------------------------------------------------


def internal_session(engine: Engine, txn: Transaction | None = None) -> SqlSession:
    """A session with no client connection, as the bootstrap user (observers, the Python API).
    With ``txn`` it runs statements inside that transaction, which its owner commits."""
    config = engine.config
    session = SqlSession(engine, config.bootstrap_user, config.database, {}, 0)
    if txn is not None:
        session.txn = txn
        session.block = True
        session.guard_catalog(txn)
    return session


async def run_autocommit(engine: Engine, sql: str, args: Sequence[object] = ()) -> Any:
    """Run one statement in a transaction of its own on an internal session (the Python API's
    ``execute``/``fetch``): committed if it succeeds, rolled back if it raises."""
    session = internal_session(engine)
    try:
        result = await session.run_statement(sql, args)
    except BaseException as exc:
        session.statement_failed(exc)
        await session.sync()
        raise
    await session.sync()
    return result


def _plan_kind(prepared: PreparedStatement) -> str:
    """What a prepared statement does: ``query``, ``insert``, ..., or ``utility``."""
    payload = prepared.payload
    plan = payload.plan if isinstance(payload, BoundLiterals) else payload
    return plan.kind if isinstance(plan, Plan) else "utility"


def _api_param(value: object, t: SqlType) -> object:
    """A Python argument of :meth:`SqlSession.run_statement` as the engine holds values of its
    type: json and jsonb take a dict, list, number or bool (serialized) or JSON text, which is
    checked and, for jsonb, normalized as its input function does."""
    if value is None or t.array or t.id not in (TypeId.JSON, TypeId.JSONB):
        return value
    text = value if isinstance(value, str) else json.dumps(value)
    return text_in(t, text)


def _shifted(exc: SqlError, offset: int) -> SqlError:
    """The error with its position moved from a part of a statement to the whole statement."""
    if exc.position is None:
        return exc
    return replace(exc, position=exc.position + offset)


def _warning(sqlstate: str, message: str) -> Notice:
    return Notice(sqlstate, message, "WARNING")


def _allowed_in_failed(plan: Plan) -> bool:
    stmt = plan.statement
    return plan.kind == "utility" and isinstance(
        stmt,
        utility.Rollback
        | utility.Commit
        | utility.RollbackToSavepoint
        | utility.PrepareTransaction,
    )


def _compile_list(exprs: list[BExpr] | None) -> list[Any] | None:
    return [compile_expr(e) for e in exprs] if exprs is not None else None


def _returning_columns(cols: list[OutCol] | None) -> list[ResultColumn] | None:
    return _result_columns(cols) if cols is not None else None


def _utility_columns(stmt: Any, session: SqlSession) -> list[ResultColumn] | None:
    if isinstance(stmt, utility.ExecuteStatement):
        entry = session.sql_prepared.get(stmt.name)
        return entry.prepared.columns if entry is not None else None
    if isinstance(stmt, utility.FetchCursor) and not stmt.move:
        # As in Postgres, described by the cursor it names when it is prepared.
        cursor = session.cursors.find(stmt.name)
        return cursor.columns if cursor is not None else None
    if isinstance(stmt, utility.Show):
        if stmt.name == "all":
            return [
                ResultColumn("name", T.TEXT),
                ResultColumn("setting", T.TEXT),
                ResultColumn("description", T.TEXT),
            ]
        return [ResultColumn(reported_name(stmt.name) or stmt.name.lower(), T.TEXT)]
    return None


def _explain_lines(plan: Plan) -> list[str]:
    """EXPLAIN's lines for a planned statement."""
    if plan.kind == "with":
        return modifying_ctes.explain(plan.statement, _explain_lines)
    lines = plan.node.explain() if plan.node is not None else ["Result"]
    if plan.kind in ("insert", "update", "delete"):
        return _explain_dml(plan, lines)
    if plan.kind == "merge":
        return explain_merge(plan.statement.table.name, lines)
    return lines


def _explain_dml(plan: Plan, lines: list[str]) -> list[str]:
    word = {"insert": "Insert", "update": "Update", "delete": "Delete"}[plan.kind]
    head = f"{word} on {plan.statement.table.name}"
    return [head, "  ->  " + lines[0], *("      " + line for line in lines[1:])]


_OVERRIDING = re.compile(r"\bOVERRIDING\s+(SYSTEM|USER)\s+VALUE\b", re.IGNORECASE)


_CURRENT_OF = re.compile(r"\bWHERE\s+CURRENT\s+OF\b", re.IGNORECASE)
"""UPDATE / DELETE ... WHERE CURRENT OF cursor, which sqlglot does not parse."""


def _stale(plan: Plan, catalog: Catalog) -> bool:
    """Whether a prepared statement's plan must be made again: DDL changed the catalog, or
    the search path now resolves names through other schemas."""
    if plan.catalog is not catalog:
        return True
    return plan.search_path is not None and plan.search_path != tuple(schemas.path(catalog))


def _parse_one(text: str, offset: int) -> Any:
    """A statement's parse: a utility dataclass, or a sqlglot expression."""
    stmt = utility.parse_utility(text)
    if stmt is not None:
        if isinstance(stmt, utility.Explain | utility.DeclareCursor):
            return replace(stmt, offset=offset + stmt.offset)
        return stmt
    overriding = None
    verb = re.match(r"\s*(INSERT|MERGE)\b", text, re.IGNORECASE)
    if (m := _OVERRIDING.search(text)) is not None and verb is not None:
        # sqlglot does not parse INSERT ... OVERRIDING {SYSTEM | USER} VALUE: taken out here
        # (in a MERGE, from its one INSERT clause that says it).
        if verb.group(1).upper() == "MERGE" and _OVERRIDING.search(text, m.end()) is not None:
            raise unsupported("OVERRIDING in several INSERT clauses of one MERGE")
        overriding = m.group(1).lower()
        text = text[: m.start()] + " " * (m.end() - m.start()) + text[m.end() :]
    text, on_commit_drop = temp_tables.take_on_commit_drop(text)  # sqlglot lacks it too
    try:
        node = sqlglot.parse_one(text, read="postgres")
    except (ParseError, TokenError) as err:
        if _CURRENT_OF.search(text):
            raise unsupported(
                "WHERE CURRENT OF (update or delete the fetched row by its key)"
            ) from None
        raise _syntax_error(text, offset, err) from None
    if overriding is not None:
        node.meta["overriding"] = overriding
    if on_commit_drop:
        node.meta["on_commit_drop"] = True
    # Unquoted identifiers fold to lower case, quoted ones keep theirs (as in Postgres).
    node = normalize_identifiers(node, dialect="postgres")
    if isinstance(node, exp.Command) and (alter := alter_commands.parse(text)) is not None:
        node = alter  # ALTER TABLE ... RENAME CONSTRAINT and others sqlglot cannot read
    if isinstance(node, exp.Command):
        word = str(node.this).upper()
        raise SqlError(FEATURE_NOT_SUPPORTED, f"{word} is not supported")
    if not isinstance(
        node, exp.Query | exp.Insert | exp.Update | exp.Delete | exp.Merge | exp.Values
    ) and not ddl.is_ddl(node):
        raise unsupported(f"statement {type(node).__name__.upper()}")
    return node


_STATEMENT_WORDS = frozenset(
    {"SELECT", "INSERT", "UPDATE", "DELETE", "WITH", "VALUES", "CREATE", "DROP", "ALTER",
     "TRUNCATE", "TABLE", "MERGE", "("}
)  # fmt: skip


def _syntax_error(text: str, offset: int, err: Exception) -> SqlError:
    """42601 with Postgres's wording and position: at the offending token, at the first word
    when it starts no statement, or "at end of input"."""
    first = re.match(r"\s*([A-Za-z_]+|\S)", text)
    if first is not None and first.group(1).upper() not in _STATEMENT_WORDS:
        word = first.group(1)
        return SqlError(
            SYNTAX_ERROR, f'syntax error at or near "{word}"', position=offset + first.start(1) + 1
        )
    position = None
    near = ""
    errors = getattr(err, "errors", None)
    if errors:
        info = errors[0]
        line, col = info.get("line"), info.get("col")
        near = info.get("highlight") or ""
        if line is not None and col is not None:
            lines = text.split("\n")
            pos = sum(len(s) + 1 for s in lines[: line - 1]) + max(col - len(near), 0)
            if not text[pos + len(near) :].strip(" \t\n;"):
                # The parser stopped at the last token: the statement ended too early.
                return SqlError(
                    SYNTAX_ERROR, "syntax error at end of input", position=offset + len(text) + 1
                )
            position = offset + pos + 1
    message = f'syntax error at or near "{near}"' if near else "syntax error"
    return SqlError(SYNTAX_ERROR, message, position=position)


def _locks_rows(plan: Plan) -> bool:
    """Whether a statement may lock rows it read (and so may need to run again)."""
    if plan.kind == "insert":
        table = plan.statement.table
        return bool(table.primary_key) or any(ix.unique for ix in table.indexes)
    return plan.kind in ("query", "update", "delete", "merge", "with")


def _split_options(value: str) -> list[str]:
    """The words of the startup packet's ``options`` (PGOPTIONS), as Postgres splits them:
    at whitespace, a backslash keeping the next character (``-c x=read\\ committed``). A
    ``-c`` on its own joins the word after it."""
    words: list[str] = []
    word: list[str] = []
    escaped = started = False
    for ch in value:
        if escaped:
            word.append(ch)
            escaped = False
        elif ch == "\\":
            escaped = started = True
        elif ch.isspace():
            if started:
                words.append("".join(word))
            word, started = [], False
        else:
            word.append(ch)
            started = True
    if started:
        words.append("".join(word))
    out: list[str] = []
    for w in words:
        if out and out[-1] == "-c":
            out[-1] += w
        else:
            out.append(w)
    return out


__all__ = ["SqlSession"]
