"""The data work some DDL needs, run in the DDL's transaction: building an index over the
existing rows, filling a new column's default, moving rows to a new primary key, giving rows a
marker, and checking a new constraint (CHECK, NOT NULL, FOREIGN KEY) against every row."""

from __future__ import annotations

from typing import Any

from percolator.server.planner import foreign_keys
from percolator.server.planner.dml import CHUNK, TableWriter, format_row, insert_rows
from percolator.server.planner.row_codec import MARKER, IndexCodec, RowCodec
from percolator.server.sql.catalog import Catalog
from percolator.server.sql.ddl import (
    BuildIndex,
    DataAction,
    FillColumn,
    MoveRows,
    ValidateForeignKey,
    ValidateRows,
    WriteMarkers,
)
from percolator.server.sql.errors import (
    CHECK_VIOLATION,
    NOT_NULL_VIOLATION,
    UNIQUE_VIOLATION,
    SqlError,
)


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
    if isinstance(action, BuildIndex):
        table = catalog.table(action.table)
        codec = RowCodec(table, trust_not_null=False)
        index = IndexCodec(table, action.index)
        seen: dict[bytes, tuple[Any, ...]] = {}
        async for key, row in _rows(codec, ctx):
            if index.unique and None not in index.values_of(row):
                ek = index.entry_key(row, key)
                if ek in seen:
                    names = ", ".join(table.column_by_id(c).name for c in action.index.column_ids)
                    raise SqlError(
                        UNIQUE_VIOLATION,
                        f'could not create unique index "{action.index.name}"',
                        detail=f"Key ({names}) is duplicated.",
                    )
                seen[ek] = row
            index.write(ctx.txn, row, key)
    elif isinstance(action, FillColumn):
        table = catalog.table(action.table)
        codec = RowCodec(table, trust_not_null=False)
        pos = table.position(action.column.id)
        value_fn = bind_default(table, action.column)
        async for key, row in _rows(codec, ctx):
            value = await value_fn(ctx)
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
        fks = foreign_keys.for_table(table, catalog, None)
        fks.references = [r for r in fks.references if r.fk == action.foreign_key]
        fks.referrers = []
        batch: list[tuple[Any, ...]] = []
        async for _, row in _rows(RowCodec(table, trust_not_null=False), ctx):
            batch.append(row)
            if len(batch) >= CHUNK:
                await foreign_keys.check_references(fks, ctx, batch)
                batch = []
        await foreign_keys.check_references(fks, ctx, batch)
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


async def _rows(codec: RowCodec, ctx: Any):  # type: ignore[no-untyped-def]
    async for key, cells in ctx.txn.scan(codec.storage, None, None, codec.read_names):
        if codec.exists(cells):
            yield key, codec.decode(key, cells)
