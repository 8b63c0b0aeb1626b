"""The data work some DDL needs, run in the DDL's transaction: building an index over the
existing rows, filling a new column's default, moving rows to a new primary key, giving rows a
marker, and checking a new constraint (CHECK, NOT NULL, FOREIGN KEY) against every row."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import sqlglot
from sqlglot import exp

from percolator.server.planner import foreign_keys
from percolator.server.planner.compile import Compiled, compile_expr
from percolator.server.planner.dml import CHUNK, TableWriter, format_row, insert_rows, key_text
from percolator.server.planner.physical import batched
from percolator.server.planner.row_codec import MARKER, IndexCodec, RowCodec
from percolator.server.sql import casts, index_expressions
from percolator.server.sql.binder import Binder
from percolator.server.sql.bound import BColumn, BExpr, OutCol
from percolator.server.sql.catalog import Catalog, TableDef
from percolator.server.sql.ddl import (
    BuildIndex,
    ConvertColumns,
    DataAction,
    FillColumn,
    MoveRows,
    RestartSequences,
    ValidateForeignKey,
    ValidateRows,
    WriteMarkers,
)
from percolator.server.sql.errors import (
    CHECK_VIOLATION,
    DATATYPE_MISMATCH,
    FEATURE_NOT_SUPPORTED,
    GROUPING_ERROR,
    NOT_NULL_VIOLATION,
    UNIQUE_VIOLATION,
    SqlError,
)
from percolator.server.sql.expr_binder import Params
from percolator.server.sql.scope import Scope


async def run_action(
    action: DataAction,
    catalog: Catalog,
    ctx: Any,
    writer_for: Any,
    bind_default: Any,
    bind_check: Any,
) -> None:
    """Run one data action. ``writer_for(table)`` builds a TableWriter; ``bind_default(table,
    column)`` gives an async function of the context computing the column's default;
    ``bind_check`` compiles a check constraint for a table."""
    if isinstance(action, ConvertColumns):
        await _convert(action, catalog, ctx, writer_for, bind_check)
    elif isinstance(action, BuildIndex):
        table = catalog.table(action.table)
        codec = RowCodec(table, trust_not_null=False)
        bound = index_expressions.bind_all(Binder(catalog, Params()), table)
        predicates = index_expressions.bind_predicates(Binder(catalog, Params()), table)
        index = IndexCodec(
            table, action.index, bound.get(action.index.id, ()), predicates.get(action.index.id)
        )
        seen: dict[bytes, tuple[Any, ...]] = {}
        async for key, row in _rows(codec, ctx):
            if index.unique and index.has_unique_entry(row):
                ek = index.entry_key(row, key)
                if ek in seen:
                    raise SqlError(
                        UNIQUE_VIOLATION,
                        f'could not create unique index "{action.index.name}"',
                        detail=f"{key_text(table, index, row)} is duplicated.",
                    )
                seen[ek] = row
            index.write(ctx.txn, row, key)
    elif isinstance(action, FillColumn):
        table = catalog.table(action.table)
        codec = RowCodec(table, trust_not_null=False)
        pos = table.position(action.column.id)
        value_of = _fill_value(table, action, ctx, writer_for, bind_default)
        async for key, row in _rows(codec, ctx):
            value = await value_of(row)
            if value is None:
                if action.column.not_null:
                    raise SqlError(
                        NOT_NULL_VIOLATION,
                        f'column "{action.column.name}" of relation "{table.name}" contains '
                        "null values",
                    )
                continue
            new = list(row)
            new[pos] = value
            codec.write_update(ctx.txn, key, row, tuple(new))
    elif isinstance(action, RestartSequences):
        for name in action.names:
            seq = catalog.sequences[name]
            ctx.sequences.restart(ctx.txn, seq, seq.start if action.to is None else action.to)
    elif isinstance(action, MoveRows):
        old_codec = RowCodec(action.old, trust_not_null=False)
        rows = [row[: len(action.old.columns)] async for _, row in _rows(old_codec, ctx)]
        writer: TableWriter = writer_for(action.new)
        await insert_rows(writer, ctx, rows)
    elif isinstance(action, WriteMarkers):
        old_codec = RowCodec(action.old, trust_not_null=False)
        async for key, _ in _rows(old_codec, ctx):
            ctx.txn.set(old_codec.storage, key, MARKER, b"")
            # A lock-only write on the old existence cell: a transaction planned before this
            # one that updates or deletes the row (writing that cell, not the marker) then
            # conflicts with it, instead of leaving a marker on a row it deleted.
            old_codec.lock(ctx.txn, key)
    elif isinstance(action, ValidateForeignKey):
        table = catalog.table(action.table)
        refs = foreign_keys.for_table(table, catalog, None).references
        ref = next(r for r in refs if r.fk == action.foreign_key)
        rows = (row async for _, row in _rows(RowCodec(table, trust_not_null=False), ctx))
        async for batch in batched(rows, CHUNK):
            await foreign_keys.check_reference(ref, ctx, batch)
    elif isinstance(action, ValidateRows):
        table = catalog.table(action.table)
        codec = RowCodec(table, trust_not_null=False)
        check = bind_check(table, action.check) if action.check is not None else None
        pos = table.position(action.not_null_column) if action.not_null_column is not None else None
        async for _, row in _rows(codec, ctx):
            if pos is not None and row[pos] is None:
                col = table.columns[pos]
                raise SqlError(
                    NOT_NULL_VIOLATION,
                    f'column "{col.name}" of relation "{table.name}" contains null values',
                )
            if check is not None and check(row, ctx) is False:
                raise SqlError(
                    CHECK_VIOLATION,
                    f'check constraint "{action.check.name}" of relation "{table.name}" is '  # type: ignore[union-attr]
                    "violated by some row",
                    detail=f"Failing row contains {format_row(table, row)}.",
                )


def _fill_value(
    table: TableDef, action: FillColumn, ctx: Any, writer_for: Any, bind_default: Any
) -> Callable[[tuple[Any, ...]], Awaitable[object]]:
    """The new column's value for an existing row: its generation expression over the row
    (the table's writer computes it, as for a new row), else its default."""
    if action.column.generated is not None:
        writer: TableWriter = writer_for(table)
        pos = table.position(action.column.id)

        async def generated(row: tuple[Any, ...]) -> object:
            return writer.generate(row, ctx)[pos]

        return generated
    value_fn = bind_default(table, action.column)

    async def default(_row: tuple[Any, ...]) -> object:
        return await value_fn(ctx)

    return default


class _Changed:
    """Stands for a converted column's old value, which its new one never equals: the cell
    is written again even when the value reads the same (its encoding is the new type's)."""


_CHANGED = _Changed()


async def _convert(
    action: ConvertColumns, catalog: Catalog, ctx: Any, writer_for: Any, bind_check: Any
) -> None:
    """ALTER COLUMN ... TYPE: every row rewritten with its converted columns, then its NOT
    NULL and CHECK constraints checked, as Postgres's table rewrite does. In place, or into
    the table's new storage (a primary-key column changed) through its writer, which checks
    them, writes the indexes, and finds rows whose new keys collide (23505)."""
    old, new = action.old, catalog.table(action.table)
    old_ids = {c.id for c in old.columns}
    converted = dict(_conversions(action, catalog, new))
    sources: list[tuple[int, Any]] = [
        (i, converted[c.id])
        if c.id in converted
        else (i, old.position(c.id) if c.id in old_ids else None)
        for i, c in enumerate(new.columns)
    ]

    def convert(row: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(
            None if src is None else row[src] if isinstance(src, int) else src(row, ctx)
            for _, src in sources
        )

    old_codec = RowCodec(old, trust_not_null=False)
    if new.storage != old.storage:
        rows = [convert(row) async for _, row in _rows(old_codec, ctx)]
        await insert_rows(writer_for(new), ctx, rows)
        return
    codec = RowCodec(new, trust_not_null=False)
    checks = [(ck, bind_check(new, ck)) for ck in new.checks]
    not_null = [(i, c) for i, c in enumerate(new.columns) if c.not_null and c.id in converted]
    positions = [i for i, c in enumerate(new.columns) if c.id in converted]
    async for key, row in _rows(old_codec, ctx):
        values = convert(row)
        for i, col in not_null:
            if values[i] is None:
                raise SqlError(
                    NOT_NULL_VIOLATION,
                    f'column "{col.name}" of relation "{new.name}" contains null values',
                )
        for ck, check in checks:
            if check(values, ctx) is False:
                raise SqlError(
                    CHECK_VIOLATION,
                    f'check constraint "{ck.name}" of relation "{new.name}" is violated by '
                    "some row",
                    detail=f"Failing row contains {format_row(new, values)}.",
                )
        before = list(values)
        for i in positions:
            before[i] = _CHANGED
        codec.write_update(ctx.txn, key, tuple(before), values)


def _conversions(
    action: ConvertColumns, catalog: Catalog, new: TableDef
) -> list[tuple[int, Compiled]]:
    """(column id, the function of an old row giving the column's new value) per converted
    column: its USING expression bound over the old row, or the column itself, converted to
    the new type by an assignment cast."""
    binder = Binder(catalog, Params())
    old = action.old
    cols = [OutCol(c.name, c.type, old.oid, i + 1, old.name) for i, c in enumerate(old.columns)]
    scope = Scope(cols, None, {old.name})
    out = []
    for cid, using in action.conversions:
        col = new.column_by_id(cid)
        if using is None:
            pos = old.position(cid)
            e: BExpr = BColumn(old.columns[pos].type, pos)
        else:
            node = sqlglot.parse_one(using, read="postgres")
            if any(isinstance(n, exp.Subquery | exp.Select) for n in node.walk()):
                raise SqlError(FEATURE_NOT_SUPPORTED, "cannot use subquery in transform expression")
            if binder.exprs.contains_aggregate(node):
                raise SqlError(
                    GROUPING_ERROR, "aggregate functions are not allowed in transform expressions"
                )
            e = binder.exprs.bind(node, scope)
            if not casts.can_assign(e.type, col.type):
                raise SqlError(
                    DATATYPE_MISMATCH,
                    f'result of USING clause for column "{col.name}" cannot be cast '
                    f"automatically to type {col.type}",
                    hint="You might need to add an explicit cast.",
                )
        out.append((cid, compile_expr(binder.exprs.coerce(e, col.type, assignment=True))))
    return out


async def _rows(codec: RowCodec, ctx: Any):  # type: ignore[no-untyped-def]
    async for key, cells in ctx.txn.scan(codec.storage, None, None, codec.read_names):
        if codec.exists(cells):
            yield key, codec.decode(key, cells)
