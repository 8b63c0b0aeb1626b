"""Batch writes: the whole DataFrame as one Percolator transaction, or one per batch.

**Atomic** (the default). Planning (``DataSource.writer``, before any task runs) checks the
DataFrame against the table and begins a distributed transaction: it takes start_ts and prewrites
the primary. The token (start_ts, primary, TTL) is pickled into every task. Each task runs the
SQL layer's insert logic (constraints, unique checks against the snapshot, index entries) in
transactions at start_ts whose commit only *prewrites* their cells as secondaries of that
primary; a retried task prewrites the same cells again, which the store accepts. ``commit()``
takes commit_ts and commits the primary (the commit point: every row appears at once), then the
secondaries are committed server-side by start_ts, without a second pass over the data.
``abort()`` rolls the primary back, which makes every secondary lock dead (readers roll them
back), and cleans them up: nothing is visible and no lock stays.

``mode("overwrite")`` truncates the table inside the same transaction (the table gets new
storage, as TRUNCATE does), so readers see the old rows until the commit point and only the new
ones after it.

**Per partition** (``writeMode=partition``), for loads too large for one transaction: each task
commits a transaction per ``batchSize`` rows. Not atomic: a failed job leaves the batches that
committed, and readers see the load progress.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from percolator.clients.database import Database
from percolator.connectors.spark import distributed, types
from percolator.connectors.spark.errors import PercolatorSparkError
from percolator.connectors.spark.options import WriteOptions
from percolator.connectors.spark.rows import RowWriter
from percolator.connectors.spark.runtime import find_table, open_database, run
from percolator.server import python_gc
from percolator.server.engine import Engine, EngineConfig
from percolator.server.planner.context import ExecContext
from percolator.server.planner.dml import make_writer
from percolator.server.planner.row_codec import RowCodec
from percolator.server.session import internal_session
from percolator.server.sql import generated_columns, index_expressions
from percolator.server.sql.binder import Binder
from percolator.server.sql.catalog import Catalog, TableDef
from percolator.server.sql.ddl_validate import bind_table_expr
from percolator.server.sql.errors import (
    DUPLICATE_COLUMN,
    FEATURE_NOT_SUPPORTED,
    NOT_NULL_VIOLATION,
    UNDEFINED_COLUMN,
)
from percolator.server.sql.expr_binder import Params
from percolator.server.sql.types import SqlType
from percolator.server.txn.transaction import Transaction

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Binding:
    """A DataFrame column and the table column it is written to."""

    index: int
    """Position in the DataFrame."""
    position: int
    """Position in the table."""
    source: SqlType
    """The SQL type of the DataFrame's values."""
    spark_type: Any


@dataclass(frozen=True)
class WritePlan:
    """Everything a task needs, decided once before any task runs (picklable)."""

    options: WriteOptions
    table: TableDef
    """The table as written: after an overwrite's truncate, its new storage."""
    catalog: Catalog
    bindings: tuple[Binding, ...]
    missing: tuple[int, ...]
    """Table positions the DataFrame does not have: they get their defaults."""
    job_ts: int
    """The distributed transaction's start_ts (atomic), or a timestamp naming the job."""
    token: distributed.Token | None
    overwrite: bool


@dataclass
class WriteMessage(WriterCommitMessage):
    """What one task attempt reports to ``commit()``."""

    partition: int
    attempt: int
    inserted: int
    updated: int
    skipped: int


# -- planning (before any task) -----------------------------------------------------------------


async def plan_write(options: WriteOptions, schema: StructType, overwrite: bool) -> WritePlan:
    """Check the DataFrame against the table (every error here is raised before any data is
    written), then begin the distributed transaction (atomic) or truncate (per partition)."""
    async with open_database(options.connection) as db:
        catalog = await db.catalog()
        table = find_table(catalog, options.table)
        bindings, missing = _bind_columns(table, schema)
        _check_missing(table, missing)
        if options.upsert and not table.primary_key:
            raise PercolatorSparkError(
                FEATURE_NOT_SUPPORTED,
                f'upsert needs a primary key, and table "{table.name}" has none',
            )
        if table.foreign_keys:
            raise PercolatorSparkError(
                FEATURE_NOT_SUPPORTED,
                f'table "{table.name}" has foreign keys, which Spark writes do not check: '
                "load it through SQL (COPY or INSERT), or drop the constraint for the load",
            )
        token = None
        if options.atomic:
            coordinator = options.connection.coordinator
            token = await distributed.begin(db, coordinator, options.lock_ttl_s)
            job_ts = token.start_ts
            if overwrite:
                try:
                    catalog = await _truncate_in(db, token, table.name)
                except BaseException:
                    await distributed.abort(db, coordinator, token)
                    raise
        else:
            job_ts = await db.client.clock.get_timestamp()
            if overwrite:
                await db.execute(f"TRUNCATE {_quote(table.name)}")
                catalog = await _catalog_now(db)
        table = catalog.table(table.name)
        return WritePlan(options, table, catalog, bindings, missing, job_ts, token, overwrite)


def _bind_columns(
    table: TableDef, schema: StructType
) -> tuple[tuple[Binding, ...], tuple[int, ...]]:
    bindings = []
    seen: set[int] = set()
    for i, field in enumerate(schema.fields):
        column = table.find_column(field.name) or table.find_column(field.name.lower())
        if column is None:
            raise PercolatorSparkError(
                UNDEFINED_COLUMN,
                f'column "{field.name}" of relation "{table.name}" does not exist',
                hint="the DataFrame's columns are matched to the table's by name",
            )
        if column.generated is not None:
            # As Postgres refuses a value for it: the writer computes it for every row.
            err = generated_columns.insert_error(column)
            raise PercolatorSparkError(
                err.sqlstate,
                err.message,
                detail=err.detail,
                hint="drop the column from the DataFrame: its value is computed from the row",
            )
        position = table.position(column.id)
        if position in seen:
            raise PercolatorSparkError(
                DUPLICATE_COLUMN, f'column "{column.name}" is given more than once'
            )
        seen.add(position)
        try:
            source = types.check_assignable(field.dataType, column, table.name)
        except Exception as exc:
            raise PercolatorSparkError.of(exc) from exc
        bindings.append(Binding(i, position, source, field.dataType))
    missing = tuple(p for p in range(len(table.columns)) if p not in seen)
    return tuple(bindings), missing


def _check_missing(table: TableDef, missing: Sequence[int]) -> None:
    """A NOT NULL column that the DataFrame lacks needs a default or a generation expression
    (else every row fails)."""
    pk = set(table.primary_key)
    for p in missing:
        c = table.columns[p]
        given = c.default is not None or c.serial_sequence is not None or c.generated is not None
        if (c.not_null or c.id in pk) and not given:
            raise PercolatorSparkError(
                NOT_NULL_VIOLATION,
                f'column "{c.name}" of relation "{table.name}" is NOT NULL and has no default, '
                "but the DataFrame has no such column",
            )


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


async def _truncate_in(db: Database, token: distributed.Token, name: str) -> Catalog:
    """TRUNCATE the table inside the distributed transaction; the catalog it leads to."""
    engine = Engine(db.client, EngineConfig(catalog_poll_s=0))
    txn = distributed.begin_part(db, token)
    session = internal_session(engine, txn)
    try:
        await session.run_statement(f"TRUNCATE {_quote(name)}")
        after = session.txn_catalog
        assert after is not None
        await txn.commit()
    except BaseException:
        await txn.rollback()
        raise
    return after


async def _catalog_now(db: Database) -> Catalog:
    engine = Engine(db.client, EngineConfig(catalog_poll_s=0))
    return await engine.refresh_catalog(force=True)


# -- tasks -----------------------------------------------------------------------------------------


class PercolatorWriter(DataSourceArrowWriter):
    """Writes the DataFrame's partitions (tasks), then commits or aborts (the driver side)."""

    def __init__(self, plan: WritePlan) -> None:
        self.plan = plan

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        context = TaskContext.get()
        partition = context.partitionId() if context is not None else 0
        attempt = context.attemptNumber() if context is not None else 0
        try:
            with python_gc.paused():
                return run(TaskWrite(self.plan, partition, attempt).run(iterator))
        except PercolatorSparkError:
            raise
        except Exception as exc:
            raise PercolatorSparkError.of(exc, f"writing partition {partition}") from exc

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        token = self.plan.token
        if token is None:
            return
        try:
            commit_ts = run(_finish(self.plan, commit=True))
        except Exception as exc:
            raise PercolatorSparkError.of(exc, "committing the Spark write") from exc
        rows = sum(m.inserted + m.updated for m in messages if isinstance(m, WriteMessage))
        log.info(
            "spark write to %s committed at %s (%d rows)", self.plan.table.name, commit_ts, rows
        )

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        if self.plan.token is None:
            return
        run(_finish(self.plan, commit=False))


async def _finish(plan: WritePlan, *, commit: bool) -> int | None:
    assert plan.token is not None
    coordinator = plan.options.connection.coordinator
    async with open_database(plan.options.connection) as db:
        if commit:
            return await distributed.commit(db, coordinator, plan.token)
        await distributed.abort(db, coordinator, plan.token)
        return None


class TaskWrite:
    """One task attempt: converts Arrow batches to rows and writes them."""

    def __init__(self, plan: WritePlan, partition: int, attempt: int) -> None:
        self.plan = plan
        self.partition = partition
        self.attempt = attempt
        table = plan.table
        self.width = len(table.columns)
        self.converters = [
            types.from_spark(b.spark_type, b.source, table.columns[b.position].type)
            for b in plan.bindings
        ]

    async def run(self, batches: Iterator[pa.RecordBatch]) -> WriteMessage:
        plan = self.plan
        table = plan.table
        async with open_database(plan.options.connection) as db:
            engine = Engine(db.client, EngineConfig(catalog_poll_s=0))
            session = internal_session(engine)
            binder = Binder(plan.catalog, Params())
            checks = [
                (ck.name, bind_table_expr(binder, table, ck.expression)) for ck in table.checks
            ]
            missing = [table.columns[p] for p in plan.missing]
            defaults = session.insert_defaults(table, missing, plan.catalog, binder)
            rows_writer = RowWriter(
                make_writer(
                    table,
                    RowCodec(table),
                    checks,
                    generated=generated_columns.bind_all(binder, table),
                    index_expressions=index_expressions.bind_all(binder, table),
                    index_predicates=index_expressions.bind_predicates(binder, table),
                ),
                job_ts=plan.job_ts,
                partition=self.partition,
                upsert=plan.options.upsert,
                upsert_positions=tuple(b.position for b in plan.bindings),
                tolerate_existing=plan.token is None and self.attempt > 0,
            )
            if plan.token is not None:
                await distributed.join(db, plan.options.connection.coordinator, plan.token)
            pending: list[tuple[Any, ...]] = []
            for batch in batches:
                pending.extend(self.rows_of(batch))
                while len(pending) >= plan.options.batch_rows:
                    chunk = pending[: plan.options.batch_rows]
                    pending = pending[plan.options.batch_rows :]
                    await self.write_chunk(db, session, rows_writer, defaults, chunk)
            if pending:
                await self.write_chunk(db, session, rows_writer, defaults, pending)
        s = rows_writer.stats
        return WriteMessage(self.partition, self.attempt, s.inserted, s.updated, s.skipped)

    def rows_of(self, batch: pa.RecordBatch) -> list[tuple[Any, ...]]:
        """The batch's rows as tuples of the table's width (missing columns None for now)."""
        n = batch.num_rows
        columns: list[Sequence[Any]] = [_nulls(n)] * self.width
        for b, convert in zip(self.plan.bindings, self.converters, strict=True):
            values = batch.column(b.index).to_pylist()
            if convert is not None:
                column = self.plan.table.columns[b.position]
                try:
                    values = [None if v is None else convert(v) for v in values]
                except Exception as exc:
                    raise PercolatorSparkError.of(exc, f'column "{column.name}"') from exc
            columns[b.position] = values
        return list(zip(*columns, strict=True))

    async def write_chunk(
        self,
        db: Database,
        session: Any,
        rows_writer: RowWriter,
        defaults: list[tuple[int, Any]],
        rows: list[tuple[Any, ...]],
    ) -> None:
        token = self.plan.token
        if token is not None:
            txn = distributed.begin_part(db, token)
        else:
            txn = await db.client.begin()
        try:
            ctx = _context(txn, self.plan.catalog, session, db)
            if defaults:
                rows = [await _with_defaults(row, defaults, ctx) for row in rows]
            await rows_writer.write(ctx, rows)
            await txn.commit()
        except BaseException:
            await txn.rollback()
            raise


def _nulls(n: int) -> Sequence[None]:
    return [None] * n


async def _with_defaults(
    row: tuple[Any, ...], defaults: list[tuple[int, Any]], ctx: ExecContext
) -> tuple[Any, ...]:
    values = list(row)
    for pos, fn in defaults:
        values[pos] = await fn(ctx)
    return tuple(values)


def _context(txn: Transaction, catalog: Catalog, session: Any, db: Database) -> ExecContext:
    now = dt.datetime.now(dt.UTC)
    return ExecContext(
        txn=txn,
        catalog=catalog,
        params=[],
        user=session.user,
        database=session.database,
        backend_pid=0,
        settings=session.settings,
        transaction_time=now,
        statement_time=now,
        client=db.client,
    )
