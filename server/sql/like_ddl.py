"""``CREATE TABLE t (LIKE source [INCLUDING | EXCLUDING option] ...)``.

As Postgres does: the source's column names, types and NOT NULL constraints always; its
defaults (DEFAULTS), identity (IDENTITY), generation expressions (GENERATED: without it a
generated column becomes an ordinary one), CHECK constraints (CONSTRAINTS), primary key,
unique constraints and indexes (INDEXES, under names of the new table) and comments (COMMENTS)
when asked; ALL is every option. Foreign keys are never copied. The source may be a view
(columns only). STORAGE, COMPRESSION and STATISTICS have nothing to copy here.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from sqlglot import exp

from percolator.server.sql.catalog import Catalog, CheckDef, ColumnDef, IndexDef, TableDef
from percolator.server.sql.errors import SYNTAX_ERROR, UNDEFINED_TABLE, SqlError

_OPTIONS = frozenset(
    {
        "COMMENTS",
        "COMPRESSION",
        "CONSTRAINTS",
        "DEFAULTS",
        "GENERATED",
        "IDENTITY",
        "INDEXES",
        "STATISTICS",
        "STORAGE",
    }
)


@dataclass
class LikeSpec:
    """What one LIKE clause gives the new table, its columns named (ids are the caller's)."""

    columns: list[ColumnDef]
    """Ids 0: the caller numbers them."""
    primary_key: list[str] = field(default_factory=list)
    uniques: list[list[str]] = field(default_factory=list)
    """Unique constraints, by column names."""
    indexes: list[IndexDef] = field(default_factory=list)
    """Other indexes (their columns named in ``index_columns``)."""
    index_columns: list[list[str]] = field(default_factory=list)
    """Per index of ``indexes``: its key columns' names ("" for an expression)."""
    checks: list[CheckDef] = field(default_factory=list)


def options(node: exp.LikeProperty) -> set[str]:
    """The INCLUDING options in force, in order (a later EXCLUDING undoes an INCLUDING)."""
    chosen: set[str] = set()
    for p in node.expressions:
        word = str(p.this).upper()
        value = p.args.get("value")
        option = str(value.this if isinstance(value, exp.Var) else value).upper()
        if option != "ALL" and option not in _OPTIONS:
            raise SqlError(SYNTAX_ERROR, f'syntax error at or near "{option.lower()}"')
        which = set(_OPTIONS) if option == "ALL" else {option}
        chosen = chosen | which if word == "INCLUDING" else chosen - which
    return chosen


def like(catalog: Catalog, node: exp.LikeProperty) -> LikeSpec:
    """The columns and constraints ``LIKE source ...`` copies."""
    table = node.this
    name = table.name if isinstance(table, exp.Table) else str(table)
    if isinstance(table, exp.Table) and table.db and table.db != "public":
        raise SqlError("3F000", f'schema "{table.db}" does not exist')
    chosen = options(node)
    source = catalog.tables.get(name)
    if source is None:
        view = catalog.views.get(name)
        if view is None:
            raise SqlError(UNDEFINED_TABLE, f'relation "{name}" does not exist')
        return LikeSpec([ColumnDef(0, c.name, c.type) for c in view.columns])
    spec = LikeSpec([_column(c, chosen) for c in source.columns])
    if "CONSTRAINTS" in chosen:
        spec.checks = [dataclasses.replace(ck, comment=None) for ck in source.checks]
    if "INDEXES" in chosen:
        _copy_indexes(source, spec)
    return spec


def _column(col: ColumnDef, chosen: set[str]) -> ColumnDef:
    """A copy of the source's column (its id is set by the caller)."""
    identity = col.identity if "IDENTITY" in chosen else None
    default = col.default if "DEFAULTS" in chosen and col.identity is None else None
    comment = col.comment if "COMMENTS" in chosen else None
    generated = col.generated if "GENERATED" in chosen else None
    # A serial column's default goes on naming the source's sequence, which the new table
    # does not own (serial_sequence None), as in Postgres.
    return ColumnDef(
        0, col.name, col.type, col.not_null, default, None, identity, comment, generated
    )


def _copy_indexes(source: TableDef, spec: LikeSpec) -> None:
    def names(ids: tuple[int, ...]) -> list[str]:
        return [source.column_by_id(i).name if i else "" for i in ids]

    if source.primary_key:
        spec.primary_key = names(source.primary_key)
    for ix in source.indexes:
        if ix.constraint:
            spec.uniques.append(names(ix.column_ids))
        else:
            spec.indexes.append(ix)
            spec.index_columns.append(names(ix.column_ids))
