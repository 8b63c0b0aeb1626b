"""Observers of the catalog as the runtime runs them: SQL bodies and Python functions.

:class:`CatalogObservers` is the :class:`~percolator.server.txn.observers.program.ObserverSource`
of a process: it turns the engine's current catalog into programs, built once per catalog
version. A program reads the changed row in the observer's transaction and then runs the SQL
body's statements (``NEW.column`` and ``TG_*`` bound as parameters) or calls the Python function
with an :class:`~percolator.server.observer_api.ObserverTransaction`.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from percolator.server.engine import Engine
from percolator.server.observer_api import ChangedRow, ObserverTransaction
from percolator.server.planner.row_codec import RowCodec
from percolator.server.sql import types as T
from percolator.server.sql.catalog import Catalog, ObserverDef, TableDef
from percolator.server.sql.errors import SqlError
from percolator.server.sql.observer_body import BodyRef, BodyStatement, parse_body
from percolator.server.storage.cells import CellKey
from percolator.server.txn.observers import admin as observer_admin
from percolator.server.txn.transaction import Transaction

BODY_STATEMENT_KINDS = frozenset({"query", "insert", "update", "delete", "with"})
UNDEFINED_FUNCTION = "42883"
INVALID_FUNCTION_DEFINITION = "42P13"

_TG_TYPES = {
    "tg_name": T.TEXT,
    "tg_table_name": T.TEXT,
    "tg_deleted": T.BOOL,
    "tg_key": T.BYTEA,
}

ObserverFunction = Callable[[ObserverTransaction, ChangedRow], Awaitable[None]]


def load_target(target: str) -> ObserverFunction:
    """The coroutine function ``package.module:function`` names; 42883 if it cannot be imported
    or is missing, 42P13 if it is not an ``async def`` taking (txn, row)."""
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise SqlError(
            INVALID_FUNCTION_DEFINITION,
            f"observer target {target!r} must look like 'package.module:function'",
        )
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise SqlError(
            UNDEFINED_FUNCTION,
            f"cannot import module {module_name!r} of observer target {target!r}: "
            f"{type(exc).__name__}: {exc}",
        ) from exc
    fn: Any = module
    for part in attr.split("."):
        fn = getattr(fn, part, None)
        if fn is None:
            raise SqlError(UNDEFINED_FUNCTION, f"module {module_name!r} has no function {attr!r}")
    if not inspect.iscoroutinefunction(fn):
        raise SqlError(
            INVALID_FUNCTION_DEFINITION,
            f"observer target {target!r} must be an async function (async def f(txn, row))",
        )
    return fn  # type: ignore[no-any-return]


def body_param_oids(statement: BodyStatement, table: TableDef) -> list[int]:
    """The parameter types of a body statement: the NEW columns' types and the TG_ names'."""
    oids = []
    for ref in statement.refs:
        if ref.kind == "new":
            oids.append(table.column(ref.name).type.oid)
        else:
            oids.append(_TG_TYPES[ref.name].oid)
    return oids


class ObserverProgram:
    """One observer of the catalog, ready to run (implements the runtime's ObserverProgram)."""

    def __init__(self, engine: Engine, observer: ObserverDef, table: TableDef) -> None:
        self._engine = engine
        self.observer = observer
        self.table = table
        self._codec = RowCodec(table)
        self._names = [c.name for c in table.columns]
        self._key_names = [table.column_by_id(cid).name for cid in table.primary_key]
        self._statements: list[tuple[BodyStatement, list[int]]] = []
        self._function: ObserverFunction | None = None
        # CREATE checked the body and the target, but this process may lack the target's
        # module or see a changed table: each run then fails with the reason (counted, retried,
        # parked, shown in percolator.observers) instead of the worker stopping.
        self._broken: SqlError | None = None
        try:
            if observer.body is not None:
                for st in parse_body(observer.body, set(self._names)):
                    self._statements.append((st, body_param_oids(st, table)))
            else:
                assert observer.target is not None
                self._function = load_target(observer.target)
        except SqlError as exc:
            self._broken = exc

    @property
    def key(self) -> str:
        return self.observer.key

    @property
    def name(self) -> str:
        return self.observer.name

    @property
    def weak(self) -> bool:
        return self.observer.weak

    @property
    def paused(self) -> bool:
        return self.observer.paused

    def row_cells(self, table: str, row: bytes) -> list[CellKey]:
        if self._broken is not None or table != self.table.storage:
            return []
        return self._codec.cell_keys(row)

    async def run(self, txn: Transaction, table: str, row: bytes) -> None:
        if self._broken is not None:
            raise self._broken
        if table != self.table.storage:
            return  # a row of the table's storage before a TRUNCATE: nothing left to observe
        (stored,) = await self._codec.get_rows(txn, [row])
        session = self._session(txn)
        by_name = self._by_name(row, stored)
        if self._function is not None:
            changed = ChangedRow(
                observer=self.observer.name,
                table=self.table.name,
                key={n: by_name[n] for n in self._key_names},
                values=by_name if stored is not None else None,
                raw_key=row,
            )
            await self._function(ObserverTransaction(session, txn), changed)
            return
        for statement, oids in self._statements:
            params = [self._param(ref, by_name, row, stored is None) for ref in statement.refs]
            await session.run_statement(statement.sql, params, oids, kinds=BODY_STATEMENT_KINDS)

    def _param(self, ref: BodyRef, row: dict[str, Any], key: bytes, deleted: bool) -> object:
        if ref.kind == "new":
            return row[ref.name]
        if ref.name == "tg_name":
            return self.observer.name
        if ref.name == "tg_table_name":
            return self.table.name
        if ref.name == "tg_deleted":
            return deleted
        return key

    def _by_name(self, key: bytes, stored: tuple[object, ...] | None) -> dict[str, Any]:
        """The row's columns by name; for a deleted row, its key columns (the rest NULL)."""
        values = stored if stored is not None else self._codec.decode(key, {})
        return dict(zip(self._names, values, strict=False))

    def _session(self, txn: Transaction) -> Any:
        from percolator.server.session import internal_session

        return internal_session(self._engine, txn)


def _created_at(key: str) -> int:
    """The start_ts of the transaction that created an observer (its key is ``id.start_ts``)."""
    _, _, ts = key.rpartition(".")
    return int(ts) if ts.isdigit() else 2**63


class CatalogObservers:
    """The observers of the engine's current catalog (the runtime's ObserverSource)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._catalog: Catalog | None = None
        self._programs: dict[str, ObserverProgram | None] = {}

    def program(self, key: str) -> ObserverProgram | None:
        catalog = self._engine.catalog
        if catalog is not self._catalog:
            self._catalog = catalog
            self._programs = {}
        if key not in self._programs:
            self._programs[key] = self._build(catalog, key)
        return self._programs[key]

    async def orphans(self, keys: set[str]) -> set[str]:
        """Keys absent from the latest catalog whose creating transaction started below the
        GC safe point: every transaction running now started after it, so none of them can
        still commit a catalog holding these keys."""
        catalog = await self._engine.refresh_catalog()
        safe_point = await observer_admin.gc_safe_point(self._engine.client)
        known = {o.key for o in catalog.observers.values()}
        return {k for k in keys if k not in known and _created_at(k) < safe_point}

    def _build(self, catalog: Catalog, key: str) -> ObserverProgram | None:
        observer = catalog.observer_by_key(key)
        if observer is None:
            return None
        table = catalog.table_by_id(observer.table_id)
        if table is None:
            return None
        return ObserverProgram(self._engine, observer, table)
