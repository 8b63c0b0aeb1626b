"""ALTER TABLE ... ALTER [COLUMN] c [SET DATA] TYPE t [USING expr]: the catalog side.

The column keeps its id (so its cells keep their name) and gets the new type; the rows are
rewritten by a :class:`~percolator.server.sql.ddl.ConvertColumns` action that the statement's
other type changes join, since Postgres computes every new value of a row from the old row.
Indexes over the column get new storage and are built again (the old storage is retired as
DROP INDEX's is); a primary-key column's change moves the rows to new storage, as ADD PRIMARY
KEY does, since their keys are encoded from the new values. The checks here are Postgres's,
in its order: the assignment cast (42804), the default (42804), views (0A000), foreign keys
(42804). Nothing here touches the store.
"""

from __future__ import annotations

import dataclasses

import sqlglot
import sqlglot.errors
from sqlglot import exp

from percolator.server.sql import (
    casts,
    foreign_key_ddl,
    generated_columns,
    index_expressions,
    sequence_ddl,
    views,
)
from percolator.server.sql.catalog import Catalog, ColumnDef, ForeignKeyDef, TableDef
from percolator.server.sql.ddl import (
    BindType,
    BuildIndex,
    ConvertColumns,
    DataAction,
    MoveRows,
    ValidateForeignKey,
    WriteMarkers,
)
from percolator.server.sql.errors import (
    DATATYPE_MISMATCH,
    FEATURE_NOT_SUPPORTED,
    INVALID_PARAMETER_VALUE,
    UNDEFINED_OBJECT,
    SqlError,
    unsupported,
)
from percolator.server.sql.types import SqlType, TypeId, key_type

_INTEGERS = (TypeId.INT2, TypeId.INT4, TypeId.INT8)


def alter_column_type(
    catalog: Catalog,
    table: TableDef,
    col: ColumnDef,
    action: exp.AlterColumn,
    bind_type: BindType,
    actions: list[DataAction],
) -> tuple[Catalog, str]:
    """One ``ALTER COLUMN ... TYPE`` action of an ALTER TABLE statement: the new catalog (and
    the table's name), with the data work added to ``actions``."""
    new_type = bind_type(action.args["dtype"])
    using = action.args.get("using") or None
    pending = next(
        (a for a in actions if isinstance(a, ConvertColumns) and a.table == table.name), None
    )
    if pending is not None and any(cid == col.id for cid, _ in pending.conversions):
        raise SqlError(FEATURE_NOT_SUPPORTED, f'cannot alter type of column "{col.name}" twice')
    if pending is None and any(isinstance(a, MoveRows | WriteMarkers) for a in actions):
        # The conversion runs first and reads the rows where they are now; an earlier action
        # of this statement that moves them or gives them markers would then miss it.
        raise unsupported("ALTER COLUMN ... TYPE after ADD PRIMARY KEY or DROP NOT NULL")
    if using is None and not casts.can_assign(col.type, new_type):
        raise SqlError(
            DATATYPE_MISMATCH,
            f'column "{col.name}" cannot be cast automatically to type {new_type}',
            hint=f'You might need to specify "USING {col.name}::{new_type}".',
        )
    _check_default(catalog, table, col, new_type)
    generated_columns.check_type_change(table, col)
    users = views.column_users(catalog, table, col.name)
    if users:
        raise SqlError(
            FEATURE_NOT_SUPPORTED,
            "cannot alter type of a column used by a view or rule",
            detail=f'rule _RETURN on view {users[0].name} depends on column "{col.name}"',
        )
    changed = dataclasses.replace(col, type=new_type, default=_typed_default(col))
    columns = tuple(changed if c.id == col.id else c for c in table.columns)
    new = table.replace(columns=columns)
    _check_foreign_keys(catalog, new, col.id)

    old = pending.old if pending is not None else table
    moving = new.storage != old.storage  # an earlier change of this statement moves the rows
    building = {a.index.storage for a in actions if isinstance(a, BuildIndex)}
    rebuilt = []
    keyed = col.id in new.primary_key or any(col.id in ix.column_ids for ix in new.indexes)
    if keyed and key_type(new_type) is None:
        # Postgres fails to build the index again.
        raise SqlError(
            UNDEFINED_OBJECT,
            f'data type {new_type} has no default operator class for access method "btree"',
        )
    if col.id in new.primary_key and not moving:
        storage_id, catalog = catalog.allocate_id()
        new = new.replace(storage=f"t{storage_id}")
    indexes = []
    for ix in new.indexes:
        renew = (
            (col.id in new.primary_key and not moving)
            or col.id in ix.column_ids
            or index_expressions.reads(ix, {col.name})
        )
        if renew and ix.storage not in building and not moving:
            # New storage, built from the converted rows (by the move, or by BuildIndex); the
            # old one is retired with the catalog change, as DROP INDEX's is.
            ix_storage, catalog = catalog.allocate_id()
            ix = dataclasses.replace(ix, storage=f"i{ix_storage}")
            if col.id not in new.primary_key:
                rebuilt.append(ix)
        indexes.append(ix)
    new = new.replace(indexes=tuple(indexes))

    conversion = (col.id, using.sql(dialect="postgres") if using is not None else None)
    if pending is None:
        # First among the statement's data actions: the others read the rows as the new
        # catalog says, so they must already be converted.
        actions.insert(0, ConvertColumns(new.name, old, (conversion,)))
    else:
        at = actions.index(pending)
        actions[at] = dataclasses.replace(pending, conversions=(*pending.conversions, conversion))
    actions.extend(BuildIndex(new.name, ix) for ix in rebuilt)
    catalog = catalog.with_table(new)
    # The references are checked again: a changed value (rounded, say) may no longer match.
    for child, fk in _foreign_keys(catalog, new, col.id):
        actions.append(ValidateForeignKey(child.name, fk))
    return catalog, new.name


def _foreign_keys(
    catalog: Catalog, table: TableDef, column_id: int
) -> list[tuple[TableDef, ForeignKeyDef]]:
    """The foreign keys over the column, referencing or referenced, with their tables."""
    own = [
        (table, fk)
        for fk in table.foreign_keys
        if column_id in fk.column_ids
        or (fk.ref_table_id == table.id and column_id in fk.ref_column_ids)
    ]
    return own + [
        (child, fk)
        for child, fk in catalog.references_to(table.id)
        if column_id in fk.ref_column_ids and child.id != table.id
    ]


def _check_default(catalog: Catalog, table: TableDef, col: ColumnDef, new_type: SqlType) -> None:
    """The column's default must convert to the new type as Postgres re-casts it (an
    assignment cast of the old type's value); identity and serial columns keep drawing
    integers from their sequence."""
    integer = new_type.id in _INTEGERS and not new_type.array
    if col.identity is not None and not integer:
        raise SqlError(
            INVALID_PARAMETER_VALUE, "identity column type must be smallint, integer, or bigint"
        )
    if col.default is None:
        return
    if sequence_ddl.default_sequence(table, col, catalog) is not None:
        if not integer:
            # Postgres would cast nextval()'s value; the executor puts the drawn integer in
            # the row as it is, so only integer types keep it right.
            raise unsupported("ALTER COLUMN ... TYPE of a serial column to a non-integer type")
        return
    if not casts.can_assign(col.type, new_type):
        raise SqlError(
            DATATYPE_MISMATCH,
            f'default for column "{col.name}" cannot be cast automatically to type {new_type}',
        )


def _typed_default(col: ColumnDef) -> str | None:
    """The default as the new column keeps it: a quoted literal typed by the old column, as
    Postgres's stored default is (``'abc'::text``), so that it is cast from that type and
    shows so in pg_attrdef."""
    if col.default is None or col.type.array:
        return col.default
    try:
        tree = sqlglot.parse_one(col.default, read="postgres")
    except sqlglot.errors.ParseError:
        return col.default
    while isinstance(tree, exp.Paren):
        tree = tree.this
    if not (isinstance(tree, exp.Literal) and tree.is_string):
        return col.default
    base = dataclasses.replace(col.type, typmod=-1)
    return f"{tree.sql(dialect='postgres')}::{base}"


def _check_foreign_keys(catalog: Catalog, table: TableDef, column_id: int) -> None:
    """42804 when a foreign key over the column (either side) no longer pairs compatible
    types, as Postgres says when it re-creates the constraint."""
    for child, fk in _foreign_keys(catalog, table, column_id):
        parent = table if fk.ref_table_id == table.id else catalog.table_by_id(fk.ref_table_id)
        assert parent is not None
        for cid, rid in zip(fk.column_ids, fk.ref_column_ids, strict=True):
            a, b = child.column_by_id(cid), parent.column_by_id(rid)
            if not foreign_key_ddl.compatible(a.type, b.type):
                raise SqlError(
                    DATATYPE_MISMATCH,
                    f'foreign key constraint "{fk.name}" cannot be implemented',
                    detail=f'Key columns "{a.name}" and "{b.name}" are of incompatible types: '
                    f"{a.type} and {b.type}.",
                )
