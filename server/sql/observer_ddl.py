"""CREATE / DROP / ALTER OBSERVER as catalog changes, and the watches a catalog implies.

The statements only build new catalog snapshots (the session stages and commits them like any
DDL). The store's watches, which make commits set notifications, are derived from the catalog by
:func:`watches_of`: the session registers the new ones before the DDL commits (a watch of an
observer whose creation then rolls back only costs notifications nobody runs; the workers remove
such orphans) and removes the ones a committed DDL dropped.
"""

from __future__ import annotations

from dataclasses import replace

from percolator.server.sql.catalog import Catalog, ObserverDef, TableDef
from percolator.server.sql.ddl import WriteMarkers
from percolator.server.sql.errors import (
    DEPENDENT_OBJECTS_STILL_EXIST,
    DUPLICATE_OBJECT,
    UNDEFINED_OBJECT,
    SqlError,
)
from percolator.server.sql.utility import AlterObserver, CreateObserver, ObserverAction
from percolator.server.storage.cells import Watch


def create_observer(
    catalog: Catalog, stmt: CreateObserver, start_ts: int
) -> tuple[Catalog, list[WriteMarkers]]:
    """The catalog with the new observer (42710 if the name is taken, 42P01 / 42703 for a
    missing table or column), and the data work it needs. The body and target are checked by
    the caller.

    An observer of the table's existence column (TableDef.existence) would run after every
    UPDATE of a row, since UPDATE writes that cell again whichever columns change; so the table
    goes back to a row marker, which every existing row gets in the same transaction."""
    if stmt.name in catalog.observers:
        raise SqlError(DUPLICATE_OBJECT, f'observer "{stmt.name}" already exists')
    table = catalog.table(stmt.table)
    column_ids = []
    for name in stmt.columns:
        cid = table.column(name).id
        if cid not in column_ids:
            column_ids.append(cid)
    oid, catalog = catalog.allocate_id()
    observer = ObserverDef(
        name=stmt.name,
        key=f"{oid}.{start_ts}",
        table_id=table.id,
        column_ids=tuple(column_ids),
        weak=stmt.weak,
        body=stmt.body,
        target=stmt.target,
    )
    catalog = catalog.with_observer(observer)
    if table.existence not in column_ids:
        return catalog, []
    return catalog.with_table(table.replace(existence=None)), [WriteMarkers(table)]


def observer(catalog: Catalog, name: str) -> ObserverDef:
    """The observer ``name``, or 42704."""
    found = catalog.observers.get(name)
    if found is None:
        raise SqlError(UNDEFINED_OBJECT, f'observer "{name}" does not exist')
    return found


def alter_observer(catalog: Catalog, stmt: AlterObserver) -> Catalog:
    """PAUSE / RESUME (RETRY PARKED changes no definition: the session runs it on the store)."""
    current = observer(catalog, stmt.name)
    if stmt.action is ObserverAction.RETRY_PARKED:
        return catalog
    paused = stmt.action is ObserverAction.PAUSE
    if current.paused == paused:
        return catalog
    return catalog.with_observer(replace(current, paused=paused))


def check_dependencies(catalog: Catalog) -> None:
    """2BP01 when a DDL statement removed a table or column an observer watches."""
    for o in catalog.observers.values():
        table = catalog.table_by_id(o.table_id)
        if table is None:
            raise SqlError(
                DEPENDENT_OBJECTS_STILL_EXIST,
                f'cannot drop the table of observer "{o.name}" because the observer depends on '
                f"it; drop the observer first (DROP OBSERVER {o.name})",
            )
        ids = {c.id for c in table.columns}
        for cid in o.column_ids:
            if cid not in ids:
                raise SqlError(
                    DEPENDENT_OBJECTS_STILL_EXIST,
                    f'cannot drop a column of table "{table.name}" that observer "{o.name}" '
                    f"watches; drop the observer first (DROP OBSERVER {o.name})",
                )


def watched_cells(table: TableDef, column_ids: tuple[int, ...]) -> list[str]:
    """The store columns whose writes notify an observer of these columns: each non-key
    column's cell, and the table's existence cell for key columns (a key changes only when a
    row is inserted or deleted, and every insert, update and delete writes that cell)."""
    key = set(table.primary_key)
    cells = []
    for cid in column_ids:
        cell = table.existence_cell if cid in key else str(cid)
        if cell not in cells:
            cells.append(cell)
    return cells


def watches_of(catalog: Catalog) -> set[Watch]:
    """Every watch the catalog's observers need."""
    out = set()
    for o in catalog.observers.values():
        table = catalog.table_by_id(o.table_id)
        if table is None:
            continue
        for cell in watched_cells(table, o.column_ids):
            out.add(Watch(table.storage, cell, o.key))
    return out
