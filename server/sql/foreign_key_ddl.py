"""FOREIGN KEY constraints in DDL: what REFERENCES means in the catalog, and what other DDL
must respect because of it (DROP TABLE, TRUNCATE, DROP COLUMN).

Enforcement on writes is the planner's (``planner/foreign_keys.py``); nothing here touches
the store.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sqlglot import exp

from percolator.server.sql import schemas
from percolator.server.sql.catalog import Catalog, ColumnDef, FkAction, ForeignKeyDef, TableDef
from percolator.server.sql.errors import (
    DATATYPE_MISMATCH,
    DEPENDENT_OBJECTS_STILL_EXIST,
    FEATURE_NOT_SUPPORTED,
    INVALID_FOREIGN_KEY,
    SYNTAX_ERROR,
    UNDEFINED_COLUMN,
    UNDEFINED_TABLE,
    SqlError,
    unsupported,
)
from percolator.server.sql.types import SqlType, TypeId, key_type

MAX_IDENTIFIER = 63

_ACTIONS = {action.sql: action for action in FkAction}

_FAMILIES = (
    frozenset({TypeId.INT2, TypeId.INT4, TypeId.INT8}),
    frozenset({TypeId.FLOAT4, TypeId.FLOAT8}),
    frozenset({TypeId.TEXT, TypeId.VARCHAR, TypeId.BPCHAR, TypeId.NAME}),
)
"""Types whose values compare (and encode in keys) alike, so one may reference the other."""


def foreign_key(
    catalog: Catalog,
    table: TableDef,
    name: str | None,
    column_names: Sequence[str],
    reference: exp.Reference,
) -> ForeignKeyDef:
    """The constraint ``[CONSTRAINT name] FOREIGN KEY (columns) REFERENCES ...`` of ``table``
    (which may not be in ``catalog`` yet, and may reference itself)."""
    target = reference.this
    ref_names: list[str] = []
    if isinstance(target, exp.Schema):
        ref_names = [e.name for e in target.expressions]
        target = target.this
    ref_name = target.name
    parent = table if ref_name == table.name else catalog.tables.get(ref_name)
    if parent is None:
        raise SqlError(UNDEFINED_TABLE, f'relation "{ref_name}" does not exist')
    columns = [_key_column(table, n) for n in column_names]
    if ref_names:
        ref_columns = [_key_column(parent, n) for n in ref_names]
    elif parent.primary_key:
        ref_columns = [parent.column_by_id(c) for c in parent.primary_key]
    else:
        raise SqlError(
            INVALID_FOREIGN_KEY, f'there is no primary key for referenced table "{parent.name}"'
        )
    if len(columns) != len(ref_columns):
        raise SqlError(
            INVALID_FOREIGN_KEY,
            "number of referencing and referenced columns for foreign key disagree",
        )
    ref_ids = tuple(c.id for c in ref_columns)
    if not _is_unique_key(parent, ref_ids):
        raise SqlError(
            INVALID_FOREIGN_KEY,
            "there is no unique constraint matching given keys for referenced table "
            f'"{parent.name}"',
        )
    constraint = name or default_name(table, [c.name for c in columns])
    for col, ref in zip(columns, ref_columns, strict=True):
        if not compatible(col.type, ref.type):
            raise SqlError(
                DATATYPE_MISMATCH,
                f'foreign key constraint "{constraint}" cannot be implemented',
                detail=f'Key columns "{col.name}" and "{ref.name}" are of incompatible types: '
                f"{col.type} and {ref.type}.",
            )
    options = _options(reference)
    return ForeignKeyDef(
        constraint,
        tuple(c.id for c in columns),
        parent.id,
        ref_ids,
        options.on_delete,
        options.on_update,
        options.deferrable,
        options.initially_deferred,
    )


def _is_unique_key(table: TableDef, column_ids: tuple[int, ...]) -> bool:
    """Whether the columns are, in any order, the primary key or a unique index's columns."""
    wanted = sorted(column_ids)
    if table.primary_key and sorted(table.primary_key) == wanted:
        return True
    return table.unique_index_on(column_ids) is not None


def compatible(a: SqlType, b: SqlType) -> bool:
    """Whether a column of type ``a`` may reference one of type ``b``."""
    if a.array or b.array or key_type(a) is None or key_type(b) is None:
        return False
    return a.id is b.id or any(a.id in f and b.id in f for f in _FAMILIES)


@dataclass(frozen=True)
class _Options:
    on_delete: FkAction = FkAction.NO_ACTION
    on_update: FkAction = FkAction.NO_ACTION
    deferrable: bool = False
    initially_deferred: bool = False


def _options(reference: exp.Reference) -> _Options:
    on_delete = on_update = FkAction.NO_ACTION
    deferrable = initially_deferred = not_deferrable = False
    for option in reference.args.get("options") or []:
        text = " ".join(str(option).upper().split())
        if text in ("MATCH SIMPLE", "INITIALLY IMMEDIATE"):
            continue
        if text == "NOT DEFERRABLE":
            not_deferrable = True
            continue
        if text == "DEFERRABLE":
            deferrable = True
            continue
        if text == "INITIALLY DEFERRED":
            initially_deferred = True
            continue
        if text.startswith("ON DELETE ") or text.startswith("ON UPDATE "):
            action = _ACTIONS.get(text[len("ON DELETE ") :])
            if action is None:
                raise unsupported(f"foreign key option {text}")
            if action is FkAction.SET_DEFAULT:
                raise unsupported("foreign key action SET DEFAULT")
            if text.startswith("ON DELETE "):
                on_delete = action
            else:
                on_update = action
            continue
        raise unsupported(f"foreign key option {text}")
    if initially_deferred and not_deferrable:
        raise SqlError(SYNTAX_ERROR, "constraint declared INITIALLY DEFERRED must be DEFERRABLE")
    # INITIALLY DEFERRED alone implies DEFERRABLE, as in Postgres.
    return _Options(on_delete, on_update, deferrable or initially_deferred, initially_deferred)


def _key_column(table: TableDef, name: str) -> ColumnDef:
    """A column a foreign key names, or 42703 as Postgres words it."""
    col = table.find_column(name)
    if col is None:
        raise SqlError(
            UNDEFINED_COLUMN, f'column "{name}" referenced in foreign key constraint does not exist'
        )
    return col


def default_name(table: TableDef, column_names: Sequence[str]) -> str:
    """Postgres's name for an unnamed constraint: ``<table>_<col>[_<col>...]_fkey``,
    numbered if the table already has a constraint of that name."""
    base = _truncate(f"{schemas.bare(table.name)}_{'_'.join(column_names)}", "_fkey")
    taken = constraint_names(table)
    name, n = base, 1
    while name in taken:
        name = _truncate(f"{table.name}_{'_'.join(column_names)}", f"_fkey{n}")
        n += 1
    return name


def _truncate(stem: str, suffix: str) -> str:
    room = MAX_IDENTIFIER - len(suffix.encode())
    return stem.encode()[:room].decode(errors="ignore") + suffix


def constraint_names(table: TableDef) -> set[str]:
    """The names of the table's constraints (and its indexes, which share the namespace of
    constraints that own one)."""
    names = {fk.name for fk in table.foreign_keys} | {ck.name for ck in table.checks}
    names |= {ix.name for ix in table.indexes}
    if table.primary_key:
        names.add(table.pk_constraint_name)
    return names


def add(catalog: Catalog, table: TableDef, fk: ForeignKeyDef) -> TableDef:
    """``table`` with ``fk``; 42710 if a constraint of that name exists."""
    if fk.name in constraint_names(table):
        raise SqlError(
            "42710", f'constraint "{fk.name}" for relation "{table.name}" already exists'
        )
    return table.replace(foreign_keys=(*table.foreign_keys, fk))


# -- what other DDL must respect ------------------------------------------------------------


def _dependents(
    catalog: Catalog, table: TableDef, leaving: Iterable[str]
) -> list[tuple[TableDef, ForeignKeyDef]]:
    """Foreign keys of other tables (not among ``leaving``) that reference ``table``."""
    gone = set(leaving)
    return [
        (child, fk)
        for child, fk in catalog.references_to(table.id)
        if child.id != table.id and child.name not in gone
    ]


def drop_references(
    catalog: Catalog, table: TableDef, leaving: Iterable[str], cascade: bool, notices: list[str]
) -> Catalog:
    """Before ``table`` is dropped (with the tables ``leaving``): 2BP01 if other tables'
    foreign keys reference it, or, with CASCADE, those constraints dropped."""
    dependents = _dependents(catalog, table, leaving)
    if not dependents:
        return catalog
    lines = [
        f"constraint {fk.name} on table {child.name} depends on table {table.name}"
        for child, fk in dependents
    ]
    if not cascade:
        raise SqlError(
            DEPENDENT_OBJECTS_STILL_EXIST,
            f"cannot drop table {table.name} because other objects depend on it",
            detail="\n".join(lines),
            hint="Use DROP ... CASCADE to drop the dependent objects too.",
        )
    if len(lines) == 1:
        notices.append(f"drop cascades to {lines[0].split(' depends on ')[0]}")
    else:
        notices.append(f"drop cascades to {len(lines)} other objects")
    for child, fk in dependents:
        current = catalog.tables[child.name]
        catalog = catalog.with_table(
            current.replace(foreign_keys=tuple(f for f in current.foreign_keys if f != fk))
        )
    return catalog


def truncate_closure(catalog: Catalog, names: list[str], cascade: bool) -> list[str]:
    """The tables a TRUNCATE of ``names`` empties: with CASCADE, every table referencing one of
    them too; without, 0A000 if a table outside the list references one."""
    out = list(names)
    i = 0
    while i < len(out):
        table = catalog.tables[out[i]]
        for child, _fk in catalog.references_to(table.id):
            if child.name in out:
                continue
            if not cascade:
                raise SqlError(
                    FEATURE_NOT_SUPPORTED,
                    "cannot truncate a table referenced in a foreign key constraint",
                    detail=f'Table "{child.name}" references "{table.name}".',
                    hint=f'Truncate table "{child.name}" at the same time, or use TRUNCATE '
                    "... CASCADE.",
                )
            out.append(child.name)
        i += 1
    return out


def check_column_drop(catalog: Catalog, table: TableDef, column_id: int) -> TableDef:
    """Before a column is dropped: 2BP01 if another table's foreign key references it; the
    table's own foreign keys over it are dropped with it (as Postgres does)."""
    for child, fk in catalog.references_to(table.id):
        if column_id in fk.ref_column_ids and child.id != table.id:
            col = table.column_by_id(column_id)
            raise SqlError(
                DEPENDENT_OBJECTS_STILL_EXIST,
                f"cannot drop column {col.name} of table {table.name} because other objects "
                "depend on it",
                detail=f"constraint {fk.name} on table {child.name} depends on column "
                f"{col.name} of table {table.name}",
                hint="Use DROP ... CASCADE to drop the dependent objects too.",
            )
    kept = tuple(
        fk
        for fk in table.foreign_keys
        if column_id not in fk.column_ids and column_id not in fk.ref_column_ids
    )
    return table.replace(foreign_keys=kept)
