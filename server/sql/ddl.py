"""DDL: what a CREATE/DROP/ALTER/TRUNCATE does to the catalog, and what it must do to data.

:func:`apply_ddl` is a function of the current catalog and the statement: it returns the new
catalog and the data actions the executor must run in the same transaction (build an index
over existing rows, fill a new column's default, move rows to a new primary key, check a new
constraint). Nothing here touches the store.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field

from sqlglot import exp

from percolator.server.sql import (
    foreign_key_ddl,
    generated_columns,
    identity_ddl,
    index_expressions,
    like_ddl,
    relation_kinds,
    rename_ddl,
    row_expressions,
    schemas,
    sequence_ddl,
    trigger_ddl,
    views,
)
from percolator.server.sql.catalog import (
    Catalog,
    CheckDef,
    ColumnDef,
    ForeignKeyDef,
    IndexDef,
    SequenceDef,
    TableDef,
)
from percolator.server.sql.errors import (
    DEPENDENT_OBJECTS_STILL_EXIST,
    DUPLICATE_COLUMN,
    DUPLICATE_TABLE,
    INVALID_TABLE_DEFINITION,
    SYNTAX_ERROR,
    UNDEFINED_COLUMN,
    UNDEFINED_OBJECT,
    UNDEFINED_TABLE,
    WRONG_OBJECT_TYPE,
    SqlError,
    unsupported,
)
from percolator.server.sql.types import SERIAL_NAMES, SqlType, TypeId, key_type

MAX_IDENTIFIER = 63
_SERIAL_TYPES = {
    "serial": SqlType(TypeId.INT4),
    "serial4": SqlType(TypeId.INT4),
    "bigserial": SqlType(TypeId.INT8),
    "serial8": SqlType(TypeId.INT8),
    "smallserial": SqlType(TypeId.INT2),
    "serial2": SqlType(TypeId.INT2),
}


@dataclass(frozen=True)
class BuildIndex:
    table: str
    index: IndexDef


@dataclass(frozen=True)
class FillColumn:
    """Existing rows get the new column's default value."""

    table: str
    column: ColumnDef


@dataclass(frozen=True)
class MoveRows:
    """Copy every row of ``old`` into ``new`` (a new storage and/or primary key)."""

    old: TableDef
    new: TableDef


@dataclass(frozen=True)
class WriteMarkers:
    """Every row of ``old`` (as its existence column tells them) gets a row marker: the
    column is becoming nullable, so the marker takes over (TableDef.existence)."""

    old: TableDef


@dataclass(frozen=True)
class ValidateRows:
    """Existing rows must satisfy a new NOT NULL or CHECK constraint."""

    table: str
    not_null_column: int | None = None
    check: CheckDef | None = None


@dataclass(frozen=True)
class ValidateForeignKey:
    """Existing rows of ``table`` must reference existing rows (ALTER TABLE ADD FOREIGN KEY)."""

    table: str
    foreign_key: ForeignKeyDef


@dataclass(frozen=True)
class ConvertColumns:
    """ALTER COLUMN ... TYPE: every row of ``old`` (the table as its rows are stored) is
    rewritten as a row of the statement's table ``table``, each converted column computed from
    the old row by its USING expression (SQL over ``old``'s columns; None: an assignment cast
    of the column). In place, or into the new table's storage when it has a new one (a
    primary-key column's type changed, so the row keys do); then the NOT NULL and CHECK
    constraints hold for every new row. Runs before the statement's other data actions, which
    read the rows as the new catalog says."""

    table: str
    old: TableDef
    conversions: tuple[tuple[int, str | None], ...]
    """(column id, USING expression SQL or None)."""


@dataclass(frozen=True)
class RestartSequences:
    """TRUNCATE ... RESTART IDENTITY: these sequences (owned by the truncated tables' columns)
    start over, in the statement's transaction."""

    names: tuple[str, ...]
    to: int | None = None
    """The value they start over from (ALTER COLUMN ... RESTART WITH n); None: their start."""


DataAction = (
    BuildIndex
    | FillColumn
    | MoveRows
    | ValidateRows
    | WriteMarkers
    | ValidateForeignKey
    | ConvertColumns
    | RestartSequences
)


@dataclass
class DdlResult:
    catalog: Catalog
    tag: str
    actions: list[DataAction] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)


BindType = Callable[[exp.DataType], SqlType]
"""Turns a sqlglot type into a SqlType (the expression binder's)."""


def apply_ddl(catalog: Catalog, node: exp.Expression, bind_type: BindType) -> DdlResult:
    """The effect of one DDL statement. Raises SqlError for invalid DDL."""
    if isinstance(node, exp.Create):
        kind = (node.args.get("kind") or "").upper()
        if kind == "TABLE":
            return _create_table(catalog, node, bind_type)
        if kind == "INDEX":
            return _create_index(catalog, node)
        if kind == "VIEW":
            return DdlResult(views.create_view(catalog, node), "CREATE VIEW")
        raise unsupported(f"CREATE {kind}")
    if isinstance(node, exp.Drop):
        kind = (node.args.get("kind") or "").upper()
        if kind == "TABLE":
            return _drop_tables(catalog, node)
        if kind == "INDEX":
            return _drop_index(catalog, node)
        if kind == "VIEW" and not node.args.get("materialized"):
            notices: list[str] = []
            return DdlResult(views.drop_views(catalog, node, notices), "DROP VIEW", [], notices)
        raise unsupported(f"DROP {kind}")
    if isinstance(node, exp.Alter):
        return _alter_table(catalog, node, bind_type)
    if isinstance(node, exp.TruncateTable):
        return _truncate(catalog, node)
    raise unsupported(f"statement {type(node).__name__}")


def notice_sqlstate(notice: str) -> str:
    """The SQLSTATE Postgres gives an IF [NOT] EXISTS notice: the duplicate-object code of
    what already exists (42P07 a relation, 42701 a column, 42710 another object), 00000 for
    what does not exist."""
    if not notice.endswith("already exists, skipping"):
        return "00000"
    if notice.startswith("relation "):
        return DUPLICATE_TABLE
    if notice.startswith("column "):
        return DUPLICATE_COLUMN
    return "42710"


def is_ddl(node: exp.Expression) -> bool:
    return isinstance(node, exp.Create | exp.Drop | exp.Alter | exp.TruncateTable)


# -- CREATE TABLE ---------------------------------------------------------------------------


def _check_name(name: str, what: str = "relation") -> str:
    if len(name.encode()) > MAX_IDENTIFIER:
        return name.encode()[:MAX_IDENTIFIER].decode(errors="ignore")
    return name


def _table_name(node: exp.Expression) -> str:
    table = node if isinstance(node, exp.Table) else node.find(exp.Table)
    if table is None:
        raise SqlError(SYNTAX_ERROR, "missing table name")
    if table.db and table.db not in ("public",):
        raise SqlError("3F000", f'schema "{table.db}" does not exist')
    return _check_name(table.name)


def _create_table(catalog: Catalog, node: exp.Create, bind_type: BindType) -> DdlResult:
    schema = node.this
    if node.args.get("expression") is not None:
        raise unsupported("CREATE TABLE ... AS")
    if not isinstance(schema, exp.Schema):
        raise SqlError(SYNTAX_ERROR, "CREATE TABLE needs a column list")
    name = _table_name(schema.this)
    if node.args.get("replace"):
        raise unsupported("CREATE OR REPLACE TABLE")
    _reject_properties(node)
    if catalog.relation_exists(name):
        if node.args.get("exists"):
            return DdlResult(
                catalog, "CREATE TABLE", notices=[f'relation "{name}" already exists, skipping']
            )
        raise SqlError(DUPLICATE_TABLE, f'relation "{name}" already exists')
    table_id, catalog = catalog.allocate_id()
    storage_id, catalog = catalog.allocate_id()
    columns: list[ColumnDef] = []
    pk: list[int] = []
    pk_name = None
    uniques: list[tuple[list[int], str | None]] = []
    checks: list[CheckDef] = []
    sequences: list[SequenceDef] = []
    references: list[tuple[str | None, list[str], exp.Reference]] = []
    like_indexes: list[tuple[list[str], IndexDef]] = []
    next_col = 1
    for item in schema.expressions:
        if isinstance(item, exp.ColumnDef):
            spec = _column(catalog, name, item, next_col, bind_type)
            col, col_pk, col_unique, col_checks, seq = (
                spec.column,
                spec.primary_key,
                spec.unique,
                spec.checks,
                spec.sequence,
            )
            references += [(cname, [col.name], ref) for cname, ref in spec.references]
            if any(c.name == col.name for c in columns):
                raise SqlError(DUPLICATE_COLUMN, f'column "{col.name}" specified more than once')
            next_col += 1
            columns.append(col)
            if col_pk:
                if pk:
                    raise SqlError(
                        INVALID_TABLE_DEFINITION,
                        f'multiple primary keys for table "{name}" are not allowed',
                    )
                pk = [col.id]
            if col_unique:
                uniques.append(([col.id], None))
            checks.extend(col_checks)
            if seq is not None:
                seq_oid, catalog = catalog.allocate_id()
                sequences.append(spec.new_sequence(catalog, seq_oid + 16384, name))
        elif isinstance(item, exp.LikeProperty):
            like = like_ddl.like(catalog, item)
            for col in like.columns:
                if any(c.name == col.name for c in columns):
                    raise SqlError(
                        DUPLICATE_COLUMN, f'column "{col.name}" specified more than once'
                    )
                seq = f"{name}_{col.name}_seq" if col.identity is not None else None
                columns.append(dataclasses.replace(col, id=next_col, serial_sequence=seq))
                next_col += 1
                if seq is not None:
                    seq_oid, catalog = catalog.allocate_id()
                    sequences.append(SequenceDef(seq, seq_oid + 16384, name))
            if like.primary_key:
                if pk:
                    raise SqlError(
                        INVALID_TABLE_DEFINITION,
                        f'multiple primary keys for table "{name}" are not allowed',
                    )
                pk = [_col_id(columns, c, name) for c in like.primary_key]
            uniques += [([_col_id(columns, c, name) for c in u], None) for u in like.uniques]
            checks.extend(like.checks)
            like_indexes += zip(like.index_columns, like.indexes, strict=True)
        elif (fk := _foreign_key_clause(item)) is not None:
            references.append(fk)
        else:
            kind, cols, cname, check_sql = _table_constraint(item)
            cname = _index_constraint_key(name, kind, cname)
            if kind == "pk":
                if pk:
                    raise SqlError(
                        INVALID_TABLE_DEFINITION,
                        f'multiple primary keys for table "{name}" are not allowed',
                    )
                pk = [_col_id(columns, c, name) for c in cols]
                pk_name = cname
            elif kind == "unique":
                uniques.append(([_col_id(columns, c, name) for c in cols], cname))
            elif kind == "check":
                check_sql = check_sql or ""
                checks.append(CheckDef(cname or _check_stem(name, check_sql), check_sql))
    if not columns:
        raise unsupported("a table with no columns")
    for cid in pk:
        col = next(c for c in columns if c.id == cid)
        if key_type(col.type) is None:
            raise SqlError(
                "0A000",
                f'column "{col.name}" of type {col.type} cannot be part of a primary key',
            )
    columns = [dataclasses.replace(c, not_null=True) if c.id in pk else c for c in columns]
    checks = _name_checks(name, checks, columns)
    table = TableDef(
        id=table_id,
        name=name,
        columns=tuple(columns),
        primary_key=tuple(pk),
        storage=f"t{storage_id}",
        checks=tuple(checks),
        next_column_id=next_col,
        pk_name=pk_name,
        existence=existence_column(columns, pk),
    )
    actions: list[DataAction] = []
    for cols, cname in uniques:
        index_name = cname or _unique_name(catalog, table, cols)
        if tuple(sorted(cols)) == tuple(sorted(pk)):
            continue
        table, catalog, _ = _add_index(catalog, table, index_name, cols, True, constraint=True)
    for cols_named, source in like_indexes:
        expressions = source.expressions
        ids = [_col_id(columns, c, name) if c else 0 for c in cols_named]
        taken = _relation_names(catalog) | {ix.name for ix in table.indexes}
        items = [
            index_expressions.KeyItem(cid, sql, False)
            for cid, sql in itertools.zip_longest(ids, expressions)
        ]
        parts = index_expressions.column_names(table, items)
        index_name = _free_name(f"{name}_{'_'.join(parts)}_idx", taken)
        table, catalog, _ = _add_index(
            catalog,
            table,
            index_name,
            ids,
            source.unique,
            descending=source.descending,
            expressions=expressions,
            predicate=source.predicate,
            opclasses=source.opclasses,
        )
    for cname, cols_named, ref in references:
        fk = foreign_key_ddl.foreign_key(catalog, table, cname, cols_named, ref)
        table = foreign_key_ddl.add(catalog, table, fk)
    catalog = catalog.with_table(table)
    for s in sequences:
        catalog = catalog.with_sequence(s)
    return DdlResult(catalog, "CREATE TABLE", actions)


def existence_column(
    columns: Sequence[ColumnDef], key: Sequence[int], observed: Collection[int] = ()
) -> int | None:
    """The column whose cell marks a row's existence (TableDef.existence): a NOT NULL non-key
    column, so that no row needs a marker cell of its own; fixed-width types first (the cell
    is written again by every UPDATE of the row). Not an ``observed`` one: its observers would
    run after every UPDATE (observer_ddl.create_observer). None when there is no such
    column."""
    candidates = [c for c in columns if c.not_null and c.id not in key and c.id not in observed]
    if not candidates:
        return None
    return min(candidates, key=lambda c: c.type.typlen <= 0).id


def _observed(catalog: Catalog, table: TableDef) -> set[int]:
    """The columns of ``table`` that an observer watches."""
    return {c for o in catalog.observers.values() if o.table_id == table.id for c in o.column_ids}


def _reject_properties(node: exp.Create) -> None:
    props = node.args.get("properties")
    if props is None:
        return
    for p in props.expressions:
        if isinstance(p, exp.TemporaryProperty):
            raise unsupported("temporary tables")
        if isinstance(p, exp.Property) and str(p.name).lower() in ("fillfactor",):
            continue
        if isinstance(p, exp.UnloggedProperty):
            continue
        if isinstance(p, exp.PartitionedByProperty):
            raise unsupported("partitioned tables")


def _relation_names(catalog: Catalog) -> set[str]:
    """Every name a new relation (index) may not take."""
    names = set(catalog.tables) | set(catalog.views) | set(catalog.sequences)
    names |= {ix.name for _, ix in catalog.all_indexes()}
    names |= {t.pk_constraint_name for t in catalog.tables.values() if t.primary_key}
    return names


def _unique_name(catalog: Catalog, table: TableDef, cols: list[int]) -> str:
    names = "_".join(table.column_by_id(c).name for c in cols) if table.columns else ""
    base = f"{table.name}_{names}_key"
    name = base
    n = 1
    while catalog.relation_exists(name) or any(ix.name == name for ix in table.indexes):
        name = f"{base}{n}"
        n += 1
    return name


def _index_constraint_key(table: str, kind: str, cname: str | None) -> str | None:
    """The name of a PRIMARY KEY or UNIQUE constraint given a name: its index's, which is in
    the table's schema (a catalog key, server/sql/schemas.py); a check's stays as given."""
    if cname is None or kind == "check":
        return cname
    return schemas.key(schemas.schema_of(table), cname)


def _check_stem(table: str, check_sql: str) -> str:
    """Postgres's name for an unnamed CHECK constraint: ``<table>_<column>_check`` when the
    expression reads one column, else ``<table>_check`` (numbered by the caller). Constraint
    names are per table: a table of another schema gives its bare name."""
    table = schemas.bare(table)
    columns = {c.name for c in exp.maybe_parse(check_sql, dialect="postgres").find_all(exp.Column)}
    if len(columns) == 1:
        return f"{table}_{columns.pop()}_check"
    return f"{table}_check"


def _free_name(base: str, taken: Collection[str]) -> str:
    """``base``, or ``base`` numbered from 1 when it is ``taken``."""
    name, n = base, 1
    while name in taken:
        name = f"{base}{n}"
        n += 1
    return name


def _name_checks(table: str, checks: list[CheckDef], columns: list[ColumnDef]) -> list[CheckDef]:
    """The CREATE TABLE's checks, the generated names numbered apart; two given the same name
    by the statement are refused (42710), as in Postgres."""
    table = schemas.bare(table)
    generated = {f"{table}_check"} | {f"{table}_{c.name}_check" for c in columns}
    out = []
    used: set[str] = set()
    for ck in checks:
        name = ck.name or f"{table}_check"
        if name in used and name not in generated:
            raise SqlError("42710", f'check constraint "{name}" already exists')
        name = _free_name(name, used)
        used.add(name)
        out.append(dataclasses.replace(ck, name=name))
    return out


def _col_id(columns: list[ColumnDef], name: str, table: str) -> int:
    for c in columns:
        if c.name == name:
            return c.id
    raise SqlError(UNDEFINED_COLUMN, f'column "{name}" named in key does not exist')


@dataclass
class ColumnSpec:
    """A column definition and the constraints written on it."""

    column: ColumnDef
    primary_key: bool
    unique: bool
    checks: list[CheckDef]
    sequence: str | None
    references: list[tuple[str | None, exp.Reference]]
    """REFERENCES clauses, with their constraint names."""
    sequence_options: sequence_ddl.SequenceOptions | None = None
    """An identity column's sequence options (``GENERATED ... AS IDENTITY (START WITH 7)``)."""

    def new_sequence(self, catalog: Catalog, oid: int, table: str) -> SequenceDef:
        """The sequence behind this serial or identity column, with its options applied."""
        assert self.sequence is not None
        seq = SequenceDef(self.sequence, oid, table)
        if self.sequence_options is None:
            return seq
        return sequence_ddl.apply_options(seq, self.sequence_options, catalog)


_SYSTEM_COLUMNS = frozenset({"tableoid", "xmin", "cmin", "xmax", "cmax", "ctid"})


def _column(
    catalog: Catalog, table: str, node: exp.ColumnDef, col_id: int, bind_type: BindType
) -> ColumnSpec:
    name = _check_name(node.name)
    if name in _SYSTEM_COLUMNS:
        raise SqlError(
            DUPLICATE_COLUMN, f'column name "{name}" conflicts with a system column name'
        )
    kind = node.args.get("kind")
    if kind is None:
        raise SqlError(SYNTAX_ERROR, f'column "{name}" has no type')
    type_text = kind.sql(dialect="postgres").lower()
    serial = type_text in SERIAL_NAMES
    if serial:
        sql_type = _SERIAL_TYPES[type_text]
    else:
        sql_type = bind_type(kind)
    not_null = serial
    default = None
    identity: str | None = None
    identity_options: sequence_ddl.SequenceOptions | None = None
    explicit_null = False
    is_pk = False
    unique = False
    checks: list[CheckDef] = []
    references: list[tuple[str | None, exp.Reference]] = []
    generated: str | None = None
    for c in node.args.get("constraints") or []:
        k = c.args.get("kind") if isinstance(c, exp.ColumnConstraint) else c
        cname = c.name if isinstance(c, exp.ColumnConstraint) and c.this else None
        if (generation := generated_columns.clause_expression(k)) is not None:
            if generated is not None:
                raise generated_columns.conflicting_clause("generation", name, table)
            generated = generation
        elif isinstance(k, exp.NotNullColumnConstraint):
            if k.args.get("allow_null"):
                not_null = False
                explicit_null = True
            else:
                not_null = True
        elif isinstance(k, exp.PrimaryKeyColumnConstraint):
            is_pk = True
        elif isinstance(k, exp.UniqueColumnConstraint):
            unique = True
        elif isinstance(k, exp.DefaultColumnConstraint):
            default = expression_text(k.this)
        elif isinstance(k, exp.CheckColumnConstraint):
            checks.append(
                CheckDef(
                    cname or f"{schemas.bare(table)}_{name}_check", k.this.sql(dialect="postgres")
                )
            )
        elif isinstance(k, exp.GeneratedAsIdentityColumnConstraint):
            if identity is not None:
                raise SqlError(
                    SYNTAX_ERROR,
                    f'multiple identity specifications for column "{name}" of table '
                    f'"{schemas.bare(table)}"',
                )
            identity, identity_options = _identity(name, sql_type, k)
            not_null = True
        elif isinstance(k, exp.Reference):
            references.append((cname, k))
        elif isinstance(k, exp.CollateColumnConstraint):
            continue
        else:
            raise unsupported(f"column constraint {c.sql(dialect='postgres')}")
    if identity is not None and explicit_null:
        raise SqlError(
            SYNTAX_ERROR,
            f'conflicting NULL/NOT NULL declarations for column "{name}" of table '
            f'"{schemas.bare(table)}"',
        )
    if generated is not None and identity is not None:
        raise generated_columns.conflicting_clause("identity", name, table)
    if generated is not None and (default is not None or serial):
        raise generated_columns.conflicting_clause("default", name, table)
    seq = None
    if serial or identity is not None:
        if serial and identity is not None:
            raise SqlError(
                SYNTAX_ERROR,
                f'both default and identity specified for column "{name}" of table "{table}"',
            )
        if default is not None and identity is not None:
            raise SqlError(
                SYNTAX_ERROR,
                f'both default and identity specified for column "{name}" of table "{table}"',
            )
        seq = f"{table}_{name}_seq"
        if serial:
            default = f"nextval('{seq}'::regclass)"
    col = ColumnDef(col_id, name, sql_type, not_null, default, seq, identity, generated=generated)
    return ColumnSpec(col, is_pk, unique, checks, seq, references, identity_options)


_IDENTITY_TYPES = (TypeId.INT2, TypeId.INT4, TypeId.INT8)


def _identity(
    name: str, sql_type: SqlType, k: exp.GeneratedAsIdentityColumnConstraint
) -> tuple[str, sequence_ddl.SequenceOptions]:
    """attidentity of ``GENERATED {ALWAYS | BY DEFAULT} AS IDENTITY [(options)]`` ('a' or
    'd') and its sequence's options (its type is the column's, as in Postgres)."""
    if sql_type.id not in _IDENTITY_TYPES or sql_type.array:
        raise SqlError(
            "22023",
            f'identity column type must be smallint, integer, or bigint (column "{name}")',
        )
    if k.args.get("cycle"):
        raise unsupported("CYCLE sequences")
    values: dict[str, int] = {}
    for option, field_name in (
        ("start", "start"),
        ("increment", "increment"),
        ("minvalue", "minimum"),
        ("maxvalue", "maximum"),
    ):
        value = k.args.get(option)
        if value is None:
            continue
        negative = isinstance(value, exp.Neg)
        literal = value.this if negative else value
        if not isinstance(literal, exp.Literal) or literal.is_string:
            raise SqlError(SYNTAX_ERROR, f'syntax error at or near "{value.sql()}"')
        values[field_name] = -int(literal.this) if negative else int(literal.this)
    options = sequence_ddl.SequenceOptions(type_name=str(sql_type), **values)
    return ("a" if k.this else "d"), options


def _table_constraint(item: exp.Expression) -> tuple[str, list[str], str | None, str | None]:
    cname = None
    node = item
    if isinstance(item, exp.Constraint):
        cname = item.name
        inner = item.expressions
        node = inner[0] if inner else item
    if isinstance(node, exp.PrimaryKey):
        return "pk", [_ident_name(e) for e in node.expressions], cname, None
    if isinstance(node, exp.UniqueColumnConstraint):
        this = node.this
        cols = (
            [_ident_name(e) for e in this.expressions]
            if isinstance(this, exp.Schema)
            else [_ident_name(this)]
        )
        return "unique", cols, cname, None
    if isinstance(node, exp.CheckColumnConstraint):
        return "check", [], cname, node.this.sql(dialect="postgres")
    if isinstance(node, exp.PrimaryKeyColumnConstraint):
        raise SqlError(SYNTAX_ERROR, "PRIMARY KEY needs a column list here")
    raise unsupported(f"table constraint {item.sql(dialect='postgres')}")


def _foreign_key_clause(
    item: exp.Expression,
) -> tuple[str | None, list[str], exp.Reference] | None:
    """A table constraint ``[CONSTRAINT name] FOREIGN KEY (cols) REFERENCES ...``, or None."""
    cname = None
    node = item
    if isinstance(item, exp.Constraint):
        cname = item.name
        node = item.expressions[0] if item.expressions else item
    if not isinstance(node, exp.ForeignKey):
        return None
    reference = node.args.get("reference")
    if reference is None:
        raise SqlError(SYNTAX_ERROR, "FOREIGN KEY needs REFERENCES")
    return cname, [_ident_name(e) for e in node.expressions], reference


def _ident_name(e: exp.Expression) -> str:
    if isinstance(e, exp.Ordered):
        e = e.this
    return e.name


# -- indexes --------------------------------------------------------------------------------


def _add_index(
    catalog: Catalog,
    table: TableDef,
    name: str,
    column_ids: list[int],
    unique: bool,
    *,
    constraint: bool = False,
    descending: tuple[bool, ...] = (),
    expressions: tuple[str | None, ...] = (),
    predicate: str | None = None,
    opclasses: tuple[str | None, ...] = (),
) -> tuple[TableDef, Catalog, IndexDef]:
    if catalog.relation_exists(name) or any(ix.name == name for ix in table.indexes):
        raise SqlError(DUPLICATE_TABLE, f'relation "{name}" already exists')
    for cid in column_ids:
        if not cid:
            continue  # an expression: its type is checked when it is bound
        col = table.column_by_id(cid)
        if key_type(col.type) is None:
            raise SqlError(
                "42704",
                f'data type {col.type} has no default operator class for access method "btree"',
            )
    index_id, catalog = catalog.allocate_id()
    storage_id, catalog = catalog.allocate_id()
    index = IndexDef(
        index_id,
        name,
        tuple(column_ids),
        unique,
        f"i{storage_id}",
        constraint,
        descending,
        expressions=expressions if any(e is not None for e in expressions) else (),
        predicate=predicate,
        opclasses=opclasses if any(o is not None for o in opclasses) else (),
    )
    table = table.replace(indexes=(*table.indexes, index))
    return table, catalog, index


def _create_index(catalog: Catalog, node: exp.Create) -> DdlResult:
    index_node = node.this
    if not isinstance(index_node, exp.Index):
        raise SqlError(SYNTAX_ERROR, "bad CREATE INDEX")
    table_node = index_node.args.get("table")
    table = catalog.table(_table_name(table_node))
    params = index_node.args.get("params")
    items = [index_expressions.key_item(table, o) for o in params.args.get("columns") or []]
    cols = [item.column_id for item in items]
    where = params.args.get("where")
    # A partial index: its predicate is checked (a boolean, immutable function of the row)
    # when the DDL is validated, like its expressions.
    predicate = None if where is None else where.this.sql(dialect="postgres")
    using = params.args.get("using")
    if using is not None and str(using.name if hasattr(using, "name") else using).lower() not in (
        "btree",
        "hash",
    ):
        raise unsupported(f"index method {using}")
    unique = bool(node.args.get("unique"))
    name = index_node.name or _default_index_name(
        catalog, table, index_expressions.column_names(table, items)
    )
    name = _check_name(name)
    if catalog.relation_exists(name) or any(ix.name == name for ix in table.indexes):
        if node.args.get("exists"):
            return DdlResult(
                catalog, "CREATE INDEX", notices=[f'relation "{name}" already exists, skipping']
            )
        raise SqlError(DUPLICATE_TABLE, f'relation "{name}" already exists')
    table, catalog, index = _add_index(
        catalog,
        table,
        name,
        cols,
        unique,
        descending=tuple(item.descending for item in items),
        expressions=tuple(item.expression for item in items),
        predicate=predicate,
        opclasses=tuple(item.opclass for item in items),
    )
    catalog = catalog.with_table(table)
    return DdlResult(catalog, "CREATE INDEX", [BuildIndex(table.name, index)])


def _default_index_name(catalog: Catalog, table: TableDef, parts: list[str]) -> str:
    # "_idx" for a unique index too: Postgres keeps "_key" for UNIQUE constraints.
    base = f"{table.name}_{'_'.join(parts)}_idx"
    name = base
    n = 1
    while catalog.relation_exists(name):
        name = f"{base}{n}"
        n += 1
    return name


def _drop_index(catalog: Catalog, node: exp.Drop) -> DdlResult:
    notices = []
    for t in node.expressions or node.args.get("tables") or []:
        name = t.name
        found = catalog.index(name)
        if found is None:
            _refuse_primary_key_index(catalog, name)
            relation_kinds.check_kind(catalog, name, "index")
            if node.args.get("exists"):
                notices.append(f'index "{schemas.bare(name)}" does not exist, skipping')
                continue
            raise SqlError(UNDEFINED_OBJECT, f'index "{name}" does not exist')
        table, index = found
        if index.constraint and not node.args.get("cascade"):
            raise SqlError(
                DEPENDENT_OBJECTS_STILL_EXIST,
                f"cannot drop index {name} because constraint {name} on table {table.name} "
                "requires it",
                hint=f"You can drop constraint {name} on table {table.name} instead.",
            )
        table = table.replace(indexes=tuple(ix for ix in table.indexes if ix.name != name))
        catalog = catalog.with_table(table)
    return DdlResult(catalog, "DROP INDEX", notices=notices)


def _refuse_primary_key_index(catalog: Catalog, name: str) -> None:
    """2BP01 for DROP INDEX of a primary key's index, as Postgres says it."""
    for table in catalog.tables.values():
        if table.primary_key and table.pk_constraint_name == name:
            raise SqlError(
                DEPENDENT_OBJECTS_STILL_EXIST,
                f"cannot drop index {name} because constraint {name} on table {table.name} "
                "requires it",
                hint=f"You can drop constraint {name} on table {table.name} instead.",
            )


# -- DROP / TRUNCATE ------------------------------------------------------------------------


def _drop_tables(catalog: Catalog, node: exp.Drop) -> DdlResult:
    notices: list[str] = []
    targets = [_table_name(t) for t in node.expressions or node.args.get("tables") or []]
    for name in targets:
        if name not in catalog.tables:
            relation_kinds.check_kind(catalog, name, "table")
            if node.args.get("exists"):
                notices.append(f'table "{schemas.bare(name)}" does not exist, skipping')
                continue
            raise SqlError(UNDEFINED_TABLE, f'table "{name}" does not exist')
        catalog = views.drop_dependents(
            catalog,
            f"table {name}",
            {catalog.tables[name].id},
            set(),
            targets,
            bool(node.args.get("cascade")),
            notices,
        )
        catalog = foreign_key_ddl.drop_references(
            catalog, catalog.tables[name], targets, bool(node.args.get("cascade")), notices
        )
        catalog = catalog.without_table(name)
    return DdlResult(catalog, "DROP TABLE", notices=notices)


def _truncate(catalog: Catalog, node: exp.TruncateTable) -> DdlResult:
    names = [_table_name(t) for t in node.expressions]
    for name in names:
        catalog.table(name)  # 42P01 for a missing one
    cascade = str(node.args.get("option") or "").upper() == "CASCADE"
    everything = foreign_key_ddl.truncate_closure(catalog, names, cascade)
    notices = [f'truncate cascades to table "{name}"' for name in everything[len(names) :]]
    for name in everything:
        table = catalog.table(name)
        catalog, storage, indexes = _new_storages(catalog, table)
        catalog = catalog.with_table(table.replace(storage=storage, indexes=indexes))
    actions: list[DataAction] = []
    if str(node.args.get("identity") or "").upper() == "RESTART":
        # The sequences of serial and identity columns and those OWNED BY a column, as
        # Postgres restarts; not those a column's DEFAULT merely draws from.
        owned = tuple(s.name for s in catalog.sequences.values() if s.table in everything)
        actions.append(RestartSequences(owned))
    return DdlResult(catalog, "TRUNCATE TABLE", actions, notices)


# -- ALTER TABLE ----------------------------------------------------------------------------


def _new_storages(catalog: Catalog, table: TableDef) -> tuple[Catalog, str, tuple[IndexDef, ...]]:
    """New storages for a table whose rows move or go (TRUNCATE, a new or no primary key):
    the table's, and its indexes with theirs."""
    storage_id, catalog = catalog.allocate_id()
    indexes = []
    for ix in table.indexes:
        ix_storage, catalog = catalog.allocate_id()
        indexes.append(dataclasses.replace(ix, storage=f"i{ix_storage}"))
    return catalog, f"t{storage_id}", tuple(indexes)


def _drop_primary_key(
    catalog: Catalog, table: TableDef, actions: list[DataAction]
) -> tuple[Catalog, TableDef]:
    """The table without its primary key: its rows move to new storage keyed by a hidden row
    id, as a table created without one (indexes rebuilt there: their entries hold the row's
    key); the key's columns stay NOT NULL, as in Postgres. 2BP01 while a foreign key refers
    to the key."""
    name = schemas.bare(table.pk_constraint_name)
    for child, fk in catalog.references_to(table.id):
        if sorted(fk.ref_column_ids) == sorted(table.primary_key):
            raise SqlError(
                DEPENDENT_OBJECTS_STILL_EXIST,
                f"cannot drop constraint {name} on table {schemas.bare(table.name)} because "
                "other objects depend on it",
                detail=f"constraint {fk.name} on table {schemas.bare(child.name)} depends on "
                f"index {name}",
                hint="Use DROP ... CASCADE to drop the dependent objects too.",
            )
    catalog, storage, indexes = _new_storages(catalog, table)
    new = table.replace(
        primary_key=(),
        storage=storage,
        pk_name=None,
        pk_comment=None,
        pk_index_comment=None,
        indexes=indexes,
        existence=existence_column(table.columns, (), _observed(catalog, table)),
    )
    actions.append(MoveRows(table, new))
    return catalog.with_table(new), new


def _without_columns(table: TableDef, gone: list[ColumnDef]) -> TableDef:
    """``table`` without the columns ``gone`` and, as in Postgres, its constraints on them:
    the indexes over them (by column or by expression), the CHECKs that read them and the
    triggers that fire on an UPDATE OF them."""
    ids = {c.id for c in gone}
    names = {c.name for c in gone}
    return table.replace(
        columns=tuple(c for c in table.columns if c.id not in ids),
        triggers=tuple(t for t in table.triggers if not trigger_ddl.reads(t, ids, names)),
        indexes=tuple(
            ix
            for ix in table.indexes
            if not ids & set(ix.column_ids) and not index_expressions.reads(ix, names)
        ),
        checks=tuple(
            ck for ck in table.checks if not row_expressions.expression_reads(ck.expression, names)
        ),
    )


def _drop_constraint(
    catalog: Catalog,
    table: TableDef,
    action: exp.Drop,
    actions: list[DataAction],
    notices: list[str],
) -> Catalog:
    """ALTER TABLE ... DROP CONSTRAINT [IF EXISTS] name: a foreign key, a check, a unique
    constraint (with its index) or the primary key (the rows move to a hidden row id)."""
    targets = action.expressions or action.args.get("tables") or []
    for target in targets:
        name = target.name
        # A unique constraint is named by its index, whose key is in the table's schema.
        keyed = schemas.key(schemas.schema_of(table.name), name)
        if any(ix.name == keyed and ix.constraint for ix in table.indexes):
            name = keyed
        if any(fk.name == name for fk in table.foreign_keys):
            table = table.replace(
                foreign_keys=tuple(f for f in table.foreign_keys if f.name != name)
            )
        elif any(ck.name == name for ck in table.checks):
            table = table.replace(checks=tuple(c for c in table.checks if c.name != name))
        elif any(ix.name == name and ix.constraint for ix in table.indexes):
            index = next(ix for ix in table.indexes if ix.name == name)
            for child, fk in catalog.references_to(table.id):
                if child.id != table.id and sorted(fk.ref_column_ids) == sorted(index.column_ids):
                    raise SqlError(
                        DEPENDENT_OBJECTS_STILL_EXIST,
                        f"cannot drop constraint {name} on table {table.name} because other "
                        "objects depend on it",
                        detail=f"constraint {fk.name} on table {child.name} depends on index "
                        f"{name}",
                        hint="Use DROP ... CASCADE to drop the dependent objects too.",
                    )
            table = table.replace(indexes=tuple(ix for ix in table.indexes if ix.name != name))
        elif table.primary_key and keyed == table.pk_constraint_name:
            catalog, table = _drop_primary_key(catalog, table, actions)
        elif action.args.get("exists"):
            notices.append(
                f'constraint "{name}" of relation "{table.name}" does not exist, skipping'
            )
        else:
            raise SqlError(
                UNDEFINED_OBJECT,
                f'constraint "{name}" of relation "{table.name}" does not exist',
            )
    return catalog.with_table(table)


def _column_renames(node: exp.Alter) -> None:
    """``RENAME b TO c`` (COLUMN left out) as the RenameColumn it is: sqlglot reads it as a
    table rename to ``b`` with a stray ``TO c`` option."""
    options = node.args.get("options") or []
    actions = node.args.get("actions") or []
    if len(actions) != 1 or not isinstance(actions[0], exp.AlterRename) or len(options) != 1:
        return
    target = options[0]
    if not isinstance(target, exp.ToTableProperty):
        return
    old, new = actions[0].this.this, target.this.this
    node.set("options", None)
    node.set("actions", [exp.RenameColumn(this=exp.column(old.copy()), to=exp.column(new.copy()))])


def _alter_table(catalog: Catalog, node: exp.Alter, bind_type: BindType) -> DdlResult:
    _column_renames(node)
    kind = (node.args.get("kind") or "TABLE").upper()
    name = _table_name(node.this)
    renames = [isinstance(a, exp.AlterRename) for a in node.args.get("actions") or []]
    if kind == "INDEX" and not (name in catalog.tables or name in catalog.views):
        return _alter_index(catalog, node, name, renames)
    if kind == "VIEW" or (name in catalog.views and renames == [True]):
        # ALTER TABLE ... RENAME TO renames a view too, as in Postgres.
        notices: list[str] = []
        return DdlResult(views.alter_view(catalog, node, notices), f"ALTER {kind}", [], notices)
    if kind not in ("TABLE", "INDEX"):
        raise unsupported(f"ALTER {kind}")
    if kind == "INDEX" and renames != [True]:
        raise unsupported("ALTER INDEX other than RENAME TO")
    if name in catalog.sequences and name not in catalog.tables:
        # ALTER TABLE ... RENAME TO renames a sequence too, as in Postgres; nothing else does.
        if renames != [True]:
            raise SqlError(WRONG_OBJECT_TYPE, f'"{name}" is not a table')
        new = _table_name(node.args["actions"][0].this)
        return DdlResult(sequence_ddl.rename(catalog, catalog.sequences[name], new), "ALTER TABLE")
    if name in catalog.views:
        raise SqlError(WRONG_OBJECT_TYPE, f'"{name}" is not a table')
    if name not in catalog.tables:
        if node.args.get("exists"):
            return DdlResult(
                catalog, "ALTER TABLE", notices=[f'relation "{name}" does not exist, skipping']
            )
        raise SqlError(UNDEFINED_TABLE, f'relation "{name}" does not exist')
    actions: list[DataAction] = []
    notices: list[str] = []
    for action in node.args.get("actions") or []:
        table = catalog.table(name)
        first = len(actions)
        catalog, name = _alter_action(catalog, table, action, bind_type, actions, notices)
        if node.args.get("not_valid") and isinstance(action, exp.AddConstraint):
            # NOT VALID: the existing rows are checked by VALIDATE CONSTRAINT, not now.
            actions[first:] = [a for a in actions[first:] if not _validates_constraint(a)]
    return DdlResult(catalog, f"ALTER {kind}", actions, notices)


def _validates_constraint(action: DataAction) -> bool:
    """Whether the action checks existing rows against a CHECK or FOREIGN KEY."""
    return isinstance(action, ValidateForeignKey) or (
        isinstance(action, ValidateRows) and action.check is not None
    )


def _alter_index(catalog: Catalog, node: exp.Alter, name: str, renames: list[bool]) -> DdlResult:
    """ALTER INDEX [IF EXISTS] name RENAME TO new (an index or a primary key's). ALTER
    INDEX on a table or view renames it, as in Postgres; the caller does that."""
    if renames != [True]:
        raise unsupported("ALTER INDEX other than RENAME TO")
    new = _table_name(node.args["actions"][0].this)
    renamed = rename_ddl.rename_index(catalog, name, new)
    if renamed is not None:
        return DdlResult(renamed, "ALTER INDEX")
    if name in catalog.sequences:
        return DdlResult(sequence_ddl.rename(catalog, catalog.sequences[name], new), "ALTER INDEX")
    if node.args.get("exists"):
        return DdlResult(
            catalog, "ALTER INDEX", notices=[f'relation "{name}" does not exist, skipping']
        )
    raise SqlError(UNDEFINED_TABLE, f'relation "{name}" does not exist')


def _new_column_checks(table: TableDef, col: ColumnDef, checks: list[CheckDef]) -> list[CheckDef]:
    """The CHECK constraints of ADD COLUMN: an unnamed one numbered past the table's
    constraint names, a named one refused (42710) if the table has that name."""
    taken = foreign_key_ddl.constraint_names(table)
    out = []
    for ck in checks:
        if ck.name == f"{table.name}_{col.name}_check":
            ck = dataclasses.replace(ck, name=_free_name(ck.name, taken))
        else:
            rename_ddl.check_new_constraint_name(table, ck.name)
        taken.add(ck.name)
        out.append(ck)
    return out


def _alter_action(
    catalog: Catalog,
    table: TableDef,
    action: exp.Expression,
    bind_type: BindType,
    actions: list[DataAction],
    notices: list[str],
) -> tuple[Catalog, str]:
    if isinstance(action, exp.ColumnDef):
        if table.find_column(action.name) is not None:
            if action.args.get("exists"):
                notices.append(
                    f'column "{action.name}" of relation "{table.name}" already exists, skipping'
                )
                return catalog, table.name
            raise SqlError(
                DUPLICATE_COLUMN,
                f'column "{action.name}" of relation "{table.name}" already exists',
            )
        spec = _column(catalog, table.name, action, table.next_column_id, bind_type)
        col, is_pk, unique, checks, seq = (
            spec.column,
            spec.primary_key,
            spec.unique,
            spec.checks,
            spec.sequence,
        )
        if is_pk:
            raise unsupported("ADD COLUMN ... PRIMARY KEY")
        checks = _new_column_checks(table, col, checks)
        table = table.replace(
            columns=(*table.columns, col),
            next_column_id=table.next_column_id + 1,
            checks=(*table.checks, *checks),
        )
        if seq is not None:
            seq_oid, catalog = catalog.allocate_id()
            catalog = catalog.with_sequence(spec.new_sequence(catalog, seq_oid + 16384, table.name))
        if col.default is not None or col.identity is not None or col.generated is not None:
            actions.append(FillColumn(table.name, col))
        elif col.not_null:
            actions.append(ValidateRows(table.name, not_null_column=col.id))
        for ck in checks:
            actions.append(ValidateRows(table.name, check=ck))
        if unique:
            table, catalog, index = _add_index(
                catalog,
                table,
                _unique_name(catalog, table, [col.id]),
                [col.id],
                True,
                constraint=True,
            )
            actions.append(BuildIndex(table.name, index))
        for cname, ref in spec.references:
            fk = foreign_key_ddl.foreign_key(catalog, table, cname, [col.name], ref)
            table = foreign_key_ddl.add(catalog, table, fk)
            actions.append(ValidateForeignKey(table.name, fk))
        return catalog.with_table(table), table.name
    if isinstance(action, exp.Drop):
        kind = (action.args.get("kind") or "").upper()
        if kind == "COLUMN":
            for target in action.expressions or action.args.get("tables") or []:
                col = table.find_column(target.name)
                if col is None:
                    if action.args.get("exists"):
                        notices.append(
                            f'column "{target.name}" of relation "{table.name}" does not '
                            "exist, skipping"
                        )
                        continue
                    raise SqlError(
                        UNDEFINED_COLUMN,
                        f'column "{target.name}" of relation "{table.name}" does not exist',
                    )
                cascade = bool(action.args.get("cascade"))
                gone = [col, *generated_columns.cascaded(table, col, cascade, notices)]
                if col.id in table.primary_key:
                    raise SqlError(
                        DEPENDENT_OBJECTS_STILL_EXIST,
                        f"cannot drop column {col.name} of table {table.name} because other "
                        "objects depend on it",
                        detail=f"constraint {table.pk_constraint_name} on table "
                        f"{table.name} depends on column {col.name}",
                    )
                if len(table.columns) == len(gone):
                    raise unsupported("dropping the last column of a table")
                for c in gone:
                    table = foreign_key_ddl.check_column_drop(catalog, table, c.id)
                trigger_ddl.check_column_drop(table, gone, cascade, notices)
                table = _without_columns(table, gone)
                for c in gone:
                    catalog = views.check_column_drop(
                        catalog, catalog.with_table(table), table, c.name, cascade, notices
                    )
            return catalog, table.name
        if kind == "CONSTRAINT":
            return _drop_constraint(catalog, table, action, actions, notices), table.name
        raise unsupported(f"ALTER TABLE ... DROP {kind}")
    if isinstance(action, exp.RenameColumn):
        old = action.this.name
        new = action.args["to"].name
        col = table.find_column(old)
        if col is None:
            raise SqlError(UNDEFINED_COLUMN, f'column "{old}" does not exist')
        if table.find_column(new) is not None:
            raise SqlError(
                DUPLICATE_COLUMN, f'column "{new}" of relation "{table.name}" already exists'
            )
        cols = tuple(
            dataclasses.replace(c, name=new) if c.id == col.id else c for c in table.columns
        )
        renamed = generated_columns.rename_column(table.replace(columns=cols), old, new)
        renamed = index_expressions.rename_column(renamed, old, new)
        renamed = trigger_ddl.rename_column(renamed, old, new)
        catalog = catalog.with_table(renamed)
        return views.rename_column(catalog, table, old, new), table.name
    if isinstance(action, exp.AlterRename):
        new = _table_name(action.this)
        if catalog.relation_exists(new):
            raise SqlError(DUPLICATE_TABLE, f'relation "{new}" already exists')
        # without_table drops the sequences the table owns: they come back owned by ``new``.
        owned = [s for s in catalog.sequences.values() if s.table == table.name]
        # The primary key's index keeps its name, as in Postgres (it is not "<new>_pkey").
        pk_name = table.pk_constraint_name if table.primary_key else None
        renamed = table.replace(name=new, pk_name=pk_name)
        catalog = catalog.without_table(table.name).with_table(renamed)
        for s in owned:
            catalog = catalog.with_sequence(dataclasses.replace(s, table=new))
        return views.rename_relation(catalog, table.name, new, {table.id}, set()), new
    if isinstance(action, rename_ddl.RenameConstraint):
        old, new = action.this.name, action.args["to"].name
        return rename_ddl.rename_constraint(catalog, table, old, new), table.name
    if isinstance(action, rename_ddl.ValidateConstraint):
        name = action.this.name
        rename_ddl.validate_constraint(table, name)
        for ck in table.checks:
            if ck.name == name:
                actions.append(ValidateRows(table.name, check=ck))
        for fk in table.foreign_keys:
            if fk.name == name:
                actions.append(ValidateForeignKey(table.name, fk))
        return catalog, table.name
    if isinstance(action, generated_columns.DropExpression):
        table = generated_columns.drop_expression(table, action, notices)
        return catalog.with_table(table), table.name
    if isinstance(action, identity_ddl.AlterIdentity):
        catalog, restart = identity_ddl.apply(catalog, table, action, notices)
        if restart is not None:
            actions.append(RestartSequences((restart[0],), restart[1]))
        return catalog, table.name
    if isinstance(action, rename_ddl.IgnoredAction):
        if (column := action.args.get("column")) is not None:
            table.column(column.name)  # 42703 for a missing one
        return catalog, table.name
    if isinstance(action, exp.AddConstraint):
        for c in action.expressions:
            if (clause := _foreign_key_clause(c)) is not None:
                cname, cols, ref = clause
                fk = foreign_key_ddl.foreign_key(catalog, table, cname, cols, ref)
                table = foreign_key_ddl.add(catalog, table, fk)
                actions.append(ValidateForeignKey(table.name, fk))
                catalog = catalog.with_table(table)
                continue
            kind, cols, cname, check_sql = _table_constraint(c)
            cname = _index_constraint_key(table.name, kind, cname)
            if cname is not None:
                rename_ddl.check_new_constraint(catalog, table, cname, kind != "check")
            if kind == "pk":
                if table.primary_key:
                    raise SqlError(
                        INVALID_TABLE_DEFINITION,
                        f'multiple primary keys for table "{table.name}" are not allowed',
                    )
                if cname is None:
                    cname = _free_name(f"{table.name}_pkey", _relation_names(catalog))
                ids = [table.column(n).id for n in cols]
                for cid in ids:
                    if key_type(table.column_by_id(cid).type) is None:
                        raise unsupported(
                            f"a primary key on a column of type {table.column_by_id(cid).type}"
                        )
                catalog, storage, indexes = _new_storages(catalog, table)
                new_cols = tuple(
                    dataclasses.replace(c, not_null=True) if c.id in ids else c
                    for c in table.columns
                )
                new = table.replace(
                    primary_key=tuple(ids),
                    storage=storage,
                    columns=new_cols,
                    pk_name=cname,
                    existence=existence_column(new_cols, ids, _observed(catalog, table)),
                    indexes=indexes,
                )
                actions.append(MoveRows(table, new))
                catalog = catalog.with_table(new)
                table = new
            elif kind == "unique":
                ids = [table.column(n).id for n in cols]
                table, catalog, index = _add_index(
                    catalog,
                    table,
                    cname or _unique_name(catalog, table, ids),
                    ids,
                    True,
                    constraint=True,
                )
                actions.append(BuildIndex(table.name, index))
                catalog = catalog.with_table(table)
            elif kind == "check":
                taken = foreign_key_ddl.constraint_names(table)
                ck = CheckDef(
                    cname or _free_name(_check_stem(table.name, check_sql or ""), taken),
                    check_sql or "",
                )
                table = table.replace(checks=(*table.checks, ck))
                actions.append(ValidateRows(table.name, check=ck))
                catalog = catalog.with_table(table)
        return catalog, table.name
    if isinstance(action, exp.AlterColumn):
        col = table.column(action.this.name)
        changed = col
        if action.args.get("drop"):
            if (
                action.args.get("allow_null") is not None
                or "NOT NULL" in action.sql(dialect="postgres").upper()
            ):
                if col.identity is not None:
                    raise _identity_column(table, col)
                if col.id in table.primary_key:
                    raise SqlError(
                        INVALID_TABLE_DEFINITION, f'column "{col.name}" is in a primary key'
                    )
                changed = dataclasses.replace(col, not_null=False)
                if col.not_null and table.existence == col.id:
                    # Its cell can no longer tell that a row exists: every row gets a marker.
                    actions.append(WriteMarkers(table))
                    table = table.replace(existence=None)
            else:
                if col.identity is not None:
                    raise _identity_column(table, col, "DROP IDENTITY")
                if col.generated is not None:
                    raise generated_columns.set_default_error(table, col)
                changed = dataclasses.replace(col, default=None)
        elif action.args.get("default") is not None:
            if col.identity is not None:
                raise _identity_column(table, col)
            if col.generated is not None:
                raise generated_columns.set_default_error(table, col)
            changed = dataclasses.replace(col, default=expression_text(action.args["default"]))
        elif (
            action.args.get("allow_null") is False
            or "SET NOT NULL" in action.sql(dialect="postgres").upper()
        ):
            changed = dataclasses.replace(col, not_null=True)
            actions.append(ValidateRows(table.name, not_null_column=col.id))
        elif action.args.get("dtype") is not None:
            # Imported here: that module builds on this one's data actions.
            from percolator.server.sql.column_type_ddl import alter_column_type

            return alter_column_type(catalog, table, col, action, bind_type, actions)
        else:
            raise unsupported(f"ALTER TABLE {action.sql(dialect='postgres')}")
        cols = tuple(changed if c.id == col.id else c for c in table.columns)
        return catalog.with_table(table.replace(columns=cols)), table.name
    raise unsupported(f"ALTER TABLE action {action.sql(dialect='postgres')[:60]}")


def _identity_column(table: TableDef, col: ColumnDef, instead: str | None = None) -> SqlError:
    """42601 for a change an identity column cannot take (its default, its NOT NULL)."""
    return SqlError(
        SYNTAX_ERROR,
        f'column "{col.name}" of relation "{schemas.bare(table.name)}" is an identity column',
        hint=f"Use ALTER TABLE ... ALTER COLUMN ... {instead} instead." if instead else None,
    )


__all__ = ["DdlResult", "apply_ddl", "is_ddl"]


def expression_text(node: exp.Expression) -> str:
    """An expression as stored in the catalog (a default): SQL that reads back the same, with
    ``now()`` kept as written (sqlglot writes it CURRENT_TIMESTAMP, which Postgres shows
    apart from it, and tools that compare defaults, such as Alembic's autogenerate, see)."""

    def keep_now(n: exp.Expression) -> exp.Expression:
        if isinstance(n, exp.CurrentTimestamp) and "start" in n.meta:
            return exp.Anonymous(this="now", expressions=[])
        return n

    return node.copy().transform(keep_now).sql(dialect="postgres")
