"""The catalog: tables, columns, indexes, constraints and roles, as immutable snapshots.

A :class:`Catalog` is a value: DDL builds a new one (:meth:`Catalog.with_table`, ...) and the
transaction that ran the DDL writes the changed definitions to the store
(:mod:`percolator.server.sql.catalog_store`). Columns and indexes have ids that never change,
so renaming is a catalog-only change and a dropped column's cells are never read again; the
row data of a table lives in the store table named by :attr:`TableDef.storage`, which TRUNCATE
replaces by a fresh one.

Object ids: every table and index gets an id from one counter; its Postgres OID is
``FIRST_USER_OID + id`` (what pg_class reports and RowDescription carries).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, TypeVar

from percolator.server.sql.errors import (
    UNDEFINED_COLUMN,
    UNDEFINED_TABLE,
    WRONG_OBJECT_TYPE,
    SqlError,
)
from percolator.server.sql.types import EnumType, SqlType, TypeId

FIRST_USER_OID = 16384
ROW_MARKER = "_"
"""The store column of the row marker: an empty cell that a table without an existence column
(:attr:`TableDef.existence`) writes in every row."""
PUBLIC_NAMESPACE_OID = 2200
PG_CATALOG_NAMESPACE_OID = 11
INFORMATION_SCHEMA_NAMESPACE_OID = 13000
PERCOLATOR_NAMESPACE_OID = 13100
"""Schema ``percolator``: the observers' views."""


@dataclass(frozen=True)
class ColumnDef:
    """A column of a table. ``default`` is SQL text (bound when used)."""

    id: int
    name: str
    type: SqlType
    not_null: bool = False
    default: str | None = None
    serial_sequence: str | None = None
    identity: str | None = None
    """An identity column: 'a' (GENERATED ALWAYS) or 'd' (BY DEFAULT), as attidentity says;
    its values come from ``serial_sequence`` like a serial column's."""
    """For serial columns: the sequence that supplies the default."""
    comment: str | None = None
    """COMMENT ON COLUMN (server/sql/comments.py); kept here so it goes with the column."""
    generated: str | None = None
    """A stored generated column's expression (``GENERATED ALWAYS AS (expr) STORED``), SQL
    text over the table's other columns; computed whenever a row is written
    (server/sql/generated_columns.py). Such a column has no ``default``."""


@dataclass(frozen=True)
class IndexDef:
    """A secondary index (or the unique index behind a UNIQUE constraint)."""

    id: int
    name: str
    column_ids: tuple[int, ...]
    unique: bool
    storage: str
    constraint: bool = False
    """True when it implements a UNIQUE constraint (shown as such by \\d)."""
    descending: tuple[bool, ...] = ()
    comment: str | None = None
    constraint_comment: str | None = None
    """COMMENT ON CONSTRAINT of the UNIQUE constraint it implements (the index's own comment
    is ``comment``: two objects in Postgres)."""
    expressions: tuple[str | None, ...] = ()
    """Per key column: the SQL text of an expression over the row (``lower(email)``), whose
    ``column_ids`` entry is then 0 as in pg_index.indkey; None (or no entry) for a column."""
    predicate: str | None = None
    """A partial index's WHERE, as SQL text over the row: only the rows it holds for have
    entries (so a unique partial index constrains only those)."""
    opclasses: tuple[str | None, ...] = ()
    """Per key column: the operator class named in CREATE INDEX (``varchar_pattern_ops``),
    None (or no entry) for the type's default."""

    @property
    def oid(self) -> int:
        return FIRST_USER_OID + self.id

    def expression(self, i: int) -> str | None:
        """The expression of key column ``i``, None for a plain column."""
        return self.expressions[i] if i < len(self.expressions) else None

    def opclass(self, i: int) -> str | None:
        """The operator class named for key column ``i``, None for the default."""
        return self.opclasses[i] if i < len(self.opclasses) else None

    @property
    def plain_column_ids(self) -> tuple[int, ...]:
        """The ids of the plain columns among the keys (what a column's DDL can touch)."""
        return tuple(c for c in self.column_ids if c)

    @property
    def signature(self) -> tuple[object, ...]:
        """What the index is keyed on, order aside: the column ids, then the expressions,
        then a partial index's predicate (ON CONFLICT's arbiter is named by it: a partial
        index never stands for another over the same key)."""
        base = key_signature(self.column_ids, self.expressions)
        return base if self.predicate is None else (*base, ("where", self.predicate))


def key_signature(
    column_ids: Sequence[int], expressions: Sequence[str | None]
) -> tuple[object, ...]:
    """A unique key's identity order aside: its column ids sorted, then its expressions'
    texts sorted (a column id of 0 stands for an expression)."""
    exprs = sorted(e for e in expressions if e is not None)
    return (*sorted(c for c in column_ids if c), *exprs)


@dataclass(frozen=True)
class CheckDef:
    """A CHECK constraint: its name and SQL text."""

    name: str
    expression: str
    comment: str | None = None


class FkAction(Enum):
    """What deleting or updating a referenced key does to the rows that reference it (the
    value is Postgres's code, as pg_constraint.confdeltype/confupdtype shows it)."""

    NO_ACTION = "a"
    RESTRICT = "r"
    CASCADE = "c"
    SET_NULL = "n"
    SET_DEFAULT = "d"

    @property
    def sql(self) -> str:
        return self.name.replace("_", " ")


@dataclass(frozen=True)
class ForeignKeyDef:
    """A FOREIGN KEY constraint of the referencing table (MATCH SIMPLE: a row with a NULL in
    any of its columns references nothing). Tables and columns are named by id, so renaming a
    column keeps the constraint."""

    name: str
    column_ids: tuple[int, ...]
    ref_table_id: int
    ref_column_ids: tuple[int, ...]
    """The referenced table's primary key or the columns of one of its unique indexes."""
    on_delete: FkAction = FkAction.NO_ACTION
    on_update: FkAction = FkAction.NO_ACTION
    deferrable: bool = False
    initially_deferred: bool = False
    """DEFERRABLE INITIALLY DEFERRED: checked at COMMIT instead of at the end of each
    statement (SET CONSTRAINTS changes it for one transaction)."""
    comment: str | None = None


@dataclass(frozen=True)
class TriggerDef:
    """A trigger (CREATE TRIGGER; server/sql/trigger_ddl.py): when it fires, for which
    changes, and the function it runs (by :attr:`FunctionDef.signature`) with its
    arguments."""

    name: str
    before: bool
    """BEFORE (it may change or skip the row) or AFTER (at the statement's end)."""
    events: tuple[str, ...]
    """Of "insert", "update", "delete", in Postgres's order."""
    function: str
    args: tuple[str, ...] = ()
    update_column_ids: tuple[int, ...] = ()
    """UPDATE OF these columns only (empty: any UPDATE), by column id (renames keep it)."""
    enabled: bool = True
    oid: int = 0
    when: str | None = None
    """WHEN's condition, as SQL text over ``old.`` and ``new.`` columns."""
    row_level: bool = True
    """FOR EACH ROW, or FOR EACH STATEMENT (once per statement, with no row)."""


@dataclass(frozen=True)
class TableDef:
    """A table: columns in order, primary key, indexes, checks, where its rows are stored."""

    id: int
    name: str
    columns: tuple[ColumnDef, ...]
    primary_key: tuple[int, ...]
    """Column ids of the primary key; empty: rows are keyed by a hidden row id."""
    storage: str
    indexes: tuple[IndexDef, ...] = ()
    checks: tuple[CheckDef, ...] = ()
    foreign_keys: tuple[ForeignKeyDef, ...] = ()
    next_column_id: int = 1
    pk_name: str | None = None
    existence: int | None = None
    """The column whose cell tells that a row exists (a NOT NULL non-key column, or one since
    dropped, whose cell rows then keep empty), or None: the row marker does
    (planner/row_codec.py)."""
    comment: str | None = None
    pk_comment: str | None = None
    """The comments on the primary key's constraint and on its index, which the catalog keeps
    implicit (see server/sql/comments.py)."""
    pk_index_comment: str | None = None
    triggers: tuple[TriggerDef, ...] = ()

    @property
    def existence_cell(self) -> str:
        """The store column whose cell every row of the table has."""
        return ROW_MARKER if self.existence is None else str(self.existence)

    @property
    def pk_constraint_name(self) -> str:
        """The primary key's constraint (and index) name, as keyed in the table's schema:
        the one given, else Postgres's ``<table>_pkey``."""
        return self.pk_name or f"{self.name}_pkey"

    @property
    def oid(self) -> int:
        return FIRST_USER_OID + self.id

    @property
    def has_primary_key(self) -> bool:
        return bool(self.primary_key)

    def column(self, name: str) -> ColumnDef:
        """The column ``name``, or 42703."""
        for c in self.columns:
            if c.name == name:
                return c
        raise SqlError(
            UNDEFINED_COLUMN, f'column "{name}" of relation "{self.name}" does not exist'
        )

    def find_column(self, name: str) -> ColumnDef | None:
        for c in self.columns:
            if c.name == name:
                return c
        return None

    def column_by_id(self, column_id: int) -> ColumnDef:
        for c in self.columns:
            if c.id == column_id:
                return c
        raise KeyError(column_id)

    def unique_index_on(self, column_ids: Sequence[int]) -> IndexDef | None:
        """A unique index keyed on exactly these columns, in any order (not a partial one:
        it leaves the rows its WHERE excludes free to repeat a key)."""
        wanted = sorted(column_ids)
        return next(
            (
                ix
                for ix in self.indexes
                if ix.unique and ix.predicate is None and sorted(ix.column_ids) == wanted
            ),
            None,
        )

    def position(self, column_id: int) -> int:
        """0-based position of a column in the table's rows."""
        for i, c in enumerate(self.columns):
            if c.id == column_id:
                return i
        raise KeyError(column_id)

    def replace(self, **changes: object) -> TableDef:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]


@dataclass(frozen=True)
class ViewColumn:
    """A column of a view: its name and the type its query gives it."""

    name: str
    type: SqlType
    comment: str | None = None


@dataclass(frozen=True)
class ViewDef:
    """A view: a stored query, expanded as a subquery wherever the view is named (see
    :mod:`percolator.server.sql.views`).

    ``query`` is the SQL text with its stars expanded and its column references qualified
    (so a column added to a table later does not appear in the view, and renaming a column or
    a table can rewrite it); ``table_ids`` and ``view_ids`` are the relations it reads directly
    (DROP TABLE / DROP VIEW refuse while it depends on them)."""

    id: int
    name: str
    query: str
    columns: tuple[ViewColumn, ...]
    table_ids: tuple[int, ...] = ()
    view_ids: tuple[int, ...] = ()
    comment: str | None = None

    @property
    def oid(self) -> int:
        return FIRST_USER_OID + self.id

    def replace(self, **changes: object) -> ViewDef:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]


@dataclass(frozen=True)
class FunctionArg:
    """A parameter of a user-defined function: its name ("" when unnamed), its type and the
    SQL text of its DEFAULT (None when it has none)."""

    name: str
    type: SqlType
    default: str | None = None


@dataclass(frozen=True)
class FunctionDef:
    """A function made by CREATE FUNCTION (see :mod:`percolator.server.sql.user_functions`).

    ``name`` is the catalog key of the name (``f``, or ``s.f`` in schema s); functions are
    keyed by :attr:`signature`, so overloads live side by side. ``body`` is the query text a
    call expands to; ``columns`` are RETURNS TABLE's columns (``returns`` is then a record)."""

    id: int
    name: str
    args: tuple[FunctionArg, ...]
    returns: SqlType
    body: str
    returns_set: bool = False
    columns: tuple[ViewColumn, ...] = ()
    language: str = "sql"
    volatility: str = "v"
    """pg_proc.provolatile: i(mmutable), s(table) or v(olatile)."""
    strict: bool = False
    comment: str | None = None
    row_of: str | None = None
    """RETURNS SETOF table: that table's (or view's) name; ``columns`` are its columns."""
    procedure: bool = False
    """Made by CREATE PROCEDURE: returns nothing, run by CALL."""
    trigger: bool = False
    """RETURNS trigger: run by triggers only (``returns`` is then void)."""

    @property
    def oid(self) -> int:
        return FIRST_USER_OID + self.id

    @property
    def signature(self) -> str:
        """The catalog key: the name and the argument types, as DROP FUNCTION names them."""
        return f"{self.name}({','.join(a.type.format() for a in self.args)})"

    def replace(self, **changes: object) -> FunctionDef:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]


@dataclass(frozen=True)
class RoleDef:
    """A role (user). Passwords are kept only as verifiers."""

    name: str
    oid: int
    superuser: bool = False
    login: bool = True
    scram_verifier: str | None = None
    md5_hash: str | None = None


@dataclass(frozen=True)
class SequenceDef:
    """A sequence: CREATE SEQUENCE, or behind a serial or identity column (values are handed
    out outside transactions, see server/sequences.py)."""

    name: str
    oid: int
    table: str
    """The table of the column it feeds or is OWNED BY ("" for none)."""
    counter: str = ""
    """The key of its counter cell: unique per creation, so a sequence whose creation rolled
    back never passes its values on to a later one with the same OID."""
    start: int = 1
    increment: int = 1
    minimum: int = 1
    maximum: int = (1 << 63) - 1
    comment: str | None = None

    @property
    def counter_key(self) -> str:
        return self.counter or str(self.oid)


@dataclass(frozen=True)
class ObserverDef:
    """An observer: code run, in a transaction of its own, for each changed row of a table
    whose watched columns were written (see docs/observers.md).

    Exactly one of ``body`` (SQL statements) and ``target`` (``package.module:function``) is
    set. ``key`` names the observer in the store (its watches, notifications, ack cells and
    counters); it is unique per creation, so an observer created again under the same name
    never inherits the old one's pending work.
    """

    name: str
    key: str
    table_id: int
    column_ids: tuple[int, ...]
    weak: bool = False
    body: str | None = None
    target: str | None = None
    paused: bool = False

    @property
    def kind(self) -> str:
        return "sql" if self.body is not None else "python"


@dataclass(frozen=True)
class SchemaDef:
    """A schema made by CREATE SCHEMA (public is implicit: it is in no catalog).

    Objects of a schema other than public are keyed (and named, in :class:`TableDef` and the
    other definitions) ``schema.name`` (see :mod:`percolator.server.sql.schemas`)."""

    name: str
    oid: int
    owner: str
    comment: str | None = None


@dataclass(frozen=True)
class Catalog:
    """An immutable snapshot of every definition, and the version it was read at.

    Tables, views, sequences and enum types are keyed by name: the bare name in schema
    public, ``schema.name`` in another (server/sql/schemas.py resolves names to keys)."""

    version: int = 0
    next_id: int = 1
    tables: dict[str, TableDef] = field(default_factory=dict)
    roles: dict[str, RoleDef] = field(default_factory=dict)
    sequences: dict[str, SequenceDef] = field(default_factory=dict)
    observers: dict[str, ObserverDef] = field(default_factory=dict)
    views: dict[str, ViewDef] = field(default_factory=dict)
    enums: dict[str, EnumType] = field(default_factory=dict)
    """User-defined enum types by name (server/sql/enums.py)."""
    schemas: dict[str, SchemaDef] = field(default_factory=dict)
    """Schemas made by CREATE SCHEMA, by name (server/sql/schemas.py)."""
    functions: dict[str, FunctionDef] = field(default_factory=dict)
    """Functions made by CREATE FUNCTION, by :attr:`FunctionDef.signature`."""

    # -- lookups ---------------------------------------------------------------------------

    def table(self, name: str) -> TableDef:
        """The table ``name``, or 42P01 (42809 when it is a view, as Postgres says)."""
        found = self.tables.get(name)
        if found is None:
            if name in self.views:
                raise SqlError(WRONG_OBJECT_TYPE, f'"{name}" is not a table')
            raise SqlError(UNDEFINED_TABLE, f'relation "{name}" does not exist')
        return found

    def table_by_id(self, table_id: int) -> TableDef | None:
        for t in self.tables.values():
            if t.id == table_id:
                return t
        return None

    def observer_by_key(self, key: str) -> ObserverDef | None:
        for o in self.observers.values():
            if o.key == key:
                return o
        return None

    def table_by_oid(self, oid: int) -> TableDef | None:
        for t in self.tables.values():
            if t.oid == oid:
                return t
        return None

    def index(self, name: str) -> tuple[TableDef, IndexDef] | None:
        for t in self.tables.values():
            for ix in t.indexes:
                if ix.name == name:
                    return t, ix
        return None

    def relation_exists(self, name: str) -> bool:
        """True if a table, view, index or sequence is named ``name`` (one namespace in
        Postgres)."""
        return (
            name in self.tables
            or name in self.views
            or self.index(name) is not None
            or name in self.sequences
            or any(t.primary_key and t.pk_constraint_name == name for t in self.tables.values())
        )

    def view_by_id(self, view_id: int) -> ViewDef | None:
        for v in self.views.values():
            if v.id == view_id:
                return v
        return None

    def owner_of_storage(self, storage: str) -> TableDef | None:
        """The table whose rows or one of whose indexes live in ``storage``."""
        for t in self.tables.values():
            if t.storage == storage or any(ix.storage == storage for ix in t.indexes):
                return t
        return None

    def all_indexes(self) -> Iterator[tuple[TableDef, IndexDef]]:
        for t in self.tables.values():
            for ix in t.indexes:
                yield t, ix

    # -- building new snapshots --------------------------------------------------------------

    def references_to(self, table_id: int) -> Iterator[tuple[TableDef, ForeignKeyDef]]:
        """The foreign keys that reference table ``table_id``, with their tables."""
        for table in self.tables.values():
            for fk in table.foreign_keys:
                if fk.ref_table_id == table_id:
                    yield table, fk

    def allocate_id(self) -> tuple[int, Catalog]:
        """A fresh object id and the catalog that has used it."""
        return self.next_id, dataclasses.replace(self, next_id=self.next_id + 1)

    def with_table(self, table: TableDef) -> Catalog:
        tables = dict(self.tables)
        tables[table.name] = table
        return dataclasses.replace(self, tables=tables)

    def without_table(self, name: str) -> Catalog:
        tables = dict(self.tables)
        del tables[name]
        sequences = {k: v for k, v in self.sequences.items() if v.table != name}
        return dataclasses.replace(self, tables=tables, sequences=sequences)

    def with_view(self, view: ViewDef) -> Catalog:
        views = dict(self.views)
        views[view.name] = view
        return dataclasses.replace(self, views=views)

    def without_view(self, name: str) -> Catalog:
        views = dict(self.views)
        del views[name]
        return dataclasses.replace(self, views=views)

    def with_role(self, role: RoleDef) -> Catalog:
        roles = dict(self.roles)
        roles[role.name] = role
        return dataclasses.replace(self, roles=roles)

    def without_role(self, name: str) -> Catalog:
        roles = dict(self.roles)
        del roles[name]
        return dataclasses.replace(self, roles=roles)

    def with_observer(self, observer: ObserverDef) -> Catalog:
        observers = dict(self.observers)
        observers[observer.name] = observer
        return dataclasses.replace(self, observers=observers)

    def without_observer(self, name: str) -> Catalog:
        observers = dict(self.observers)
        del observers[name]
        return dataclasses.replace(self, observers=observers)

    def with_sequence(self, seq: SequenceDef) -> Catalog:
        sequences = dict(self.sequences)
        sequences[seq.name] = seq
        return dataclasses.replace(self, sequences=sequences)

    def with_enum(self, enum: EnumType) -> Catalog:
        """The catalog with ``enum`` added or changed; columns of that type see the change."""
        enums = {k: v for k, v in self.enums.items() if v.oid != enum.oid}
        enums[enum.type_name] = enum
        return link_enums(dataclasses.replace(self, enums=enums))

    def with_schema(self, schema: SchemaDef) -> Catalog:
        schemas = dict(self.schemas)
        schemas[schema.name] = schema
        return dataclasses.replace(self, schemas=schemas)

    def without_schema(self, name: str) -> Catalog:
        schemas = dict(self.schemas)
        del schemas[name]
        return dataclasses.replace(self, schemas=schemas)

    def with_function(self, fn: FunctionDef) -> Catalog:
        functions = dict(self.functions)
        functions[fn.signature] = fn
        return dataclasses.replace(self, functions=functions)

    def without_function(self, signature: str) -> Catalog:
        functions = dict(self.functions)
        del functions[signature]
        return dataclasses.replace(self, functions=functions)

    def functions_named(self, name: str) -> list[FunctionDef]:
        """The overloads of the function ``name`` (a catalog key), oldest first."""
        return sorted((f for f in self.functions.values() if f.name == name), key=lambda f: f.id)

    def without_enum(self, name: str) -> Catalog:
        enums = dict(self.enums)
        del enums[name]
        return dataclasses.replace(self, enums=enums)


def link_enums(catalog: Catalog) -> Catalog:
    """The catalog whose column types carry its current enum definitions.

    Tables and views store an enum column's type by OID only (``type_to_json``); the labels a
    column compares and validates with are the catalog's, so after loading and after ALTER
    TYPE every such column is pointed at the catalog's :class:`EnumType`."""
    by_oid = {e.oid: e for e in catalog.enums.values()}

    def fix(t: SqlType) -> SqlType:
        if isinstance(t.id, EnumType) and t.id.oid in by_oid and by_oid[t.id.oid] != t.id:
            return SqlType(by_oid[t.id.oid], t.typmod, t.array)
        return t

    def fix_columns(cols: tuple[_C, ...]) -> tuple[_C, ...]:
        return tuple(dataclasses.replace(c, type=fix(c.type)) for c in cols)  # type: ignore[misc]

    if not by_oid:
        return catalog
    tables = {n: t.replace(columns=fix_columns(t.columns)) for n, t in catalog.tables.items()}
    views = {n: v.replace(columns=fix_columns(v.columns)) for n, v in catalog.views.items()}
    return dataclasses.replace(catalog, tables=tables, views=views)


_C = TypeVar("_C", ColumnDef, ViewColumn)


# -- serialisation (the catalog is stored as JSON documents) ---------------------------------


def type_to_json(t: SqlType) -> list[object]:
    if isinstance(t.id, EnumType):
        # By OID: the labels live in the enum's own document (see link_enums).
        return ["ENUM", t.typmod, t.array, t.id.oid]
    return [t.id.name, t.typmod, t.array]


def type_from_json(data: list[object]) -> SqlType:
    name, typmod, array = data[:3]
    if name == "ENUM":
        placeholder = EnumType(int(data[3]), 0, "")  # type: ignore[arg-type]
        return SqlType(placeholder, int(typmod), bool(array))  # type: ignore[arg-type]
    return SqlType(TypeId[str(name)], int(typmod), bool(array))  # type: ignore[arg-type]


def enum_to_json(e: EnumType) -> dict[str, object]:
    return {
        "oid": e.oid,
        "array_oid": e.array_oid,
        "name": e.type_name,
        "labels": list(e.labels),
        "sort_orders": list(e.sort_orders),
    }


def enum_from_json(d: dict[str, object]) -> EnumType:
    return EnumType(
        int(d["oid"]),  # type: ignore[arg-type]
        int(d["array_oid"]),  # type: ignore[arg-type]
        str(d["name"]),
        tuple(d["labels"]),  # type: ignore[arg-type]
        tuple(float(x) for x in d["sort_orders"]),  # type: ignore[union-attr]
    )


def table_to_json(t: TableDef) -> dict[str, object]:
    return {
        "id": t.id,
        "name": t.name,
        "storage": t.storage,
        "primary_key": list(t.primary_key),
        "pk_name": t.pk_name,
        "next_column_id": t.next_column_id,
        "columns": [
            {
                "id": c.id,
                "name": c.name,
                "type": type_to_json(c.type),
                "not_null": c.not_null,
                "default": c.default,
                "serial_sequence": c.serial_sequence,
                "identity": c.identity,
                "comment": c.comment,
                "generated": c.generated,
            }
            for c in t.columns
        ],
        "indexes": [
            {
                "id": ix.id,
                "name": ix.name,
                "columns": list(ix.column_ids),
                "unique": ix.unique,
                "storage": ix.storage,
                "constraint": ix.constraint,
                "descending": list(ix.descending),
                "comment": ix.comment,
                "constraint_comment": ix.constraint_comment,
                "expressions": list(ix.expressions),
                "predicate": ix.predicate,
                "opclasses": list(ix.opclasses),
            }
            for ix in t.indexes
        ],
        "checks": [
            {"name": ck.name, "expression": ck.expression, "comment": ck.comment} for ck in t.checks
        ],
        "triggers": [dataclasses.asdict(tr) for tr in t.triggers],
        "existence": t.existence,
        "foreign_keys": [
            {
                "name": fk.name,
                "columns": list(fk.column_ids),
                "ref_table": fk.ref_table_id,
                "ref_columns": list(fk.ref_column_ids),
                "on_delete": fk.on_delete.value,
                "on_update": fk.on_update.value,
                "deferrable": fk.deferrable,
                "initially_deferred": fk.initially_deferred,
                "comment": fk.comment,
            }
            for fk in t.foreign_keys
        ],
        "comment": t.comment,
        "pk_comment": t.pk_comment,
        "pk_index_comment": t.pk_index_comment,
    }


def table_from_json(d: dict[str, object]) -> TableDef:
    columns = tuple(
        ColumnDef(
            id=int(c["id"]),
            name=str(c["name"]),
            type=type_from_json(c["type"]),
            not_null=bool(c["not_null"]),
            default=c.get("default"),
            serial_sequence=c.get("serial_sequence"),
            identity=c.get("identity"),
            comment=c.get("comment"),
            generated=c.get("generated"),
        )
        for c in d["columns"]  # type: ignore[union-attr]
    )
    indexes = tuple(
        IndexDef(
            id=int(ix["id"]),
            name=str(ix["name"]),
            column_ids=tuple(ix["columns"]),
            unique=bool(ix["unique"]),
            storage=str(ix["storage"]),
            constraint=bool(ix.get("constraint", False)),
            descending=tuple(ix.get("descending", ())),
            comment=ix.get("comment"),
            constraint_comment=ix.get("constraint_comment"),
            expressions=tuple(ix.get("expressions", ())),
            predicate=ix.get("predicate"),
            opclasses=tuple(ix.get("opclasses", ())),
        )
        for ix in d["indexes"]  # type: ignore[union-attr]
    )
    checks = tuple(
        CheckDef(str(ck["name"]), str(ck["expression"]), ck.get("comment"))
        for ck in d["checks"]  # type: ignore[union-attr]
    )
    return TableDef(
        id=int(d["id"]),  # type: ignore[arg-type]
        name=str(d["name"]),
        columns=columns,
        primary_key=tuple(d["primary_key"]),  # type: ignore[arg-type]
        storage=str(d["storage"]),
        indexes=indexes,
        checks=checks,
        next_column_id=int(d["next_column_id"]),  # type: ignore[arg-type]
        pk_name=d.get("pk_name"),  # type: ignore[arg-type]
        existence=d.get("existence"),  # type: ignore[arg-type]
        comment=d.get("comment"),  # type: ignore[arg-type]
        pk_comment=d.get("pk_comment"),  # type: ignore[arg-type]
        pk_index_comment=d.get("pk_index_comment"),  # type: ignore[arg-type]
        foreign_keys=tuple(
            ForeignKeyDef(
                name=str(fk["name"]),
                column_ids=tuple(fk["columns"]),
                ref_table_id=int(fk["ref_table"]),
                ref_column_ids=tuple(fk["ref_columns"]),
                on_delete=FkAction(fk["on_delete"]),
                on_update=FkAction(fk["on_update"]),
                deferrable=bool(fk.get("deferrable", False)),
                initially_deferred=bool(fk.get("initially_deferred", False)),
                comment=fk.get("comment"),
            )
            for fk in d.get("foreign_keys", ())  # type: ignore[union-attr]
        ),
        triggers=tuple(
            TriggerDef(
                **{
                    **tr,
                    "events": tuple(tr["events"]),
                    "args": tuple(tr["args"]),
                    "update_column_ids": tuple(tr["update_column_ids"]),
                }
            )
            for tr in d.get("triggers", ())  # type: ignore[union-attr]
        ),
    )


def view_to_json(v: ViewDef) -> dict[str, object]:
    return {
        "id": v.id,
        "name": v.name,
        "query": v.query,
        "columns": [
            {"name": c.name, "type": type_to_json(c.type), "comment": c.comment} for c in v.columns
        ],
        "table_ids": list(v.table_ids),
        "view_ids": list(v.view_ids),
        "comment": v.comment,
    }


def view_from_json(d: dict[str, object]) -> ViewDef:
    return ViewDef(
        id=int(d["id"]),  # type: ignore[arg-type]
        name=str(d["name"]),
        query=str(d["query"]),
        columns=tuple(
            ViewColumn(str(c["name"]), type_from_json(c["type"]), c.get("comment"))
            for c in d["columns"]  # type: ignore[union-attr]
        ),
        table_ids=tuple(d.get("table_ids", ())),  # type: ignore[arg-type]
        view_ids=tuple(d.get("view_ids", ())),  # type: ignore[arg-type]
        comment=d.get("comment"),  # type: ignore[arg-type]
    )


def function_to_json(f: FunctionDef) -> dict[str, object]:
    return {
        "id": f.id,
        "name": f.name,
        "args": [
            {"name": a.name, "type": type_to_json(a.type), "default": a.default} for a in f.args
        ],
        "returns": type_to_json(f.returns),
        "body": f.body,
        "returns_set": f.returns_set,
        "columns": [{"name": c.name, "type": type_to_json(c.type)} for c in f.columns],
        "language": f.language,
        "volatility": f.volatility,
        "strict": f.strict,
        "comment": f.comment,
        "row_of": f.row_of,
        "procedure": f.procedure,
        "trigger": f.trigger,
    }


def function_from_json(d: dict[str, Any]) -> FunctionDef:
    return FunctionDef(
        id=int(d["id"]),
        name=str(d["name"]),
        args=tuple(
            FunctionArg(a["name"], type_from_json(a["type"]), a["default"]) for a in d["args"]
        ),
        returns=type_from_json(d["returns"]),
        body=str(d["body"]),
        returns_set=bool(d["returns_set"]),
        columns=tuple(ViewColumn(c["name"], type_from_json(c["type"])) for c in d["columns"]),
        language=str(d["language"]),
        volatility=str(d["volatility"]),
        strict=bool(d["strict"]),
        comment=d.get("comment"),
        row_of=d.get("row_of"),
        procedure=bool(d.get("procedure", False)),
        trigger=bool(d.get("trigger", False)),
    )


def role_to_json(r: RoleDef) -> dict[str, object]:
    return dataclasses.asdict(r)


def role_from_json(d: dict[str, object]) -> RoleDef:
    return RoleDef(**d)  # type: ignore[arg-type]


def observer_to_json(o: ObserverDef) -> dict[str, object]:
    return dataclasses.asdict(o)


def observer_from_json(d: dict[str, object]) -> ObserverDef:
    d = dict(d)
    d["column_ids"] = tuple(d["column_ids"])  # type: ignore[arg-type]
    return ObserverDef(**d)  # type: ignore[arg-type]


def schema_to_json(s: SchemaDef) -> dict[str, object]:
    return dataclasses.asdict(s)


def schema_from_json(d: dict[str, object]) -> SchemaDef:
    return SchemaDef(**d)  # type: ignore[arg-type]


def sequence_to_json(s: SequenceDef) -> dict[str, object]:
    return dataclasses.asdict(s)


def sequence_from_json(d: dict[str, object]) -> SequenceDef:
    return SequenceDef(**d)  # type: ignore[arg-type]


__all__ = [
    "FIRST_USER_OID",
    "Catalog",
    "CheckDef",
    "ColumnDef",
    "FunctionArg",
    "FunctionDef",
    "IndexDef",
    "ObserverDef",
    "RoleDef",
    "SchemaDef",
    "SequenceDef",
    "TableDef",
    "TriggerDef",
    "ViewColumn",
    "ViewDef",
]
