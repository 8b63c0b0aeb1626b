"""Stored generated columns: ``col type GENERATED ALWAYS AS (expr) STORED``, as Postgres 15.

A generated column keeps its expression as SQL text in :attr:`ColumnDef.generated` (no
``default``). The table's writer (:func:`percolator.server.planner.dml.make_writer`) computes
it over the rest of the row whenever a row is inserted or updated, after the defaults and
before NOT NULL, CHECK, unique checks and index entries, so every path that writes rows
(INSERT, COPY, ON CONFLICT, MERGE, UPDATE, foreign-key actions, the Spark writer) stores the
value Postgres would. What lives here: reading the column clause, checking the expression when
the DDL runs, binding it for the writer, the errors for values given to such a column, ``DROP
EXPRESSION``, and keeping the expressions right when the columns they read are renamed,
dropped or retyped.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import sqlglot
from sqlglot import exp

from percolator.server.sql import casts, schemas
from percolator.server.sql.bound import BExpr, walk
from percolator.server.sql.catalog import ColumnDef, TableDef
from percolator.server.sql.errors import (
    DATATYPE_MISMATCH,
    DEPENDENT_OBJECTS_STILL_EXIST,
    FEATURE_NOT_SUPPORTED,
    INVALID_COLUMN_REFERENCE,
    INVALID_OBJECT_DEFINITION,
    OBJECT_NOT_IN_PREREQUISITE_STATE,
    SYNTAX_ERROR,
    SqlError,
)
from percolator.server.sql.row_expressions import (
    expression_reads,
    not_immutable,
    refuse_outside_row,
    rename_reads,
    row_scope,
)

if TYPE_CHECKING:
    from percolator.server.sql.binder import Binder

GENERATED_ALWAYS = "428C9"


# -- the column clause -------------------------------------------------------------------------


def clause_expression(k: exp.Expression | None) -> str | None:
    """The expression SQL of a ``GENERATED ALWAYS AS (expr) STORED`` clause, None when ``k``
    is another constraint. Postgres 15 knows no virtual generated column (``STORED`` left
    out is a syntax error) and no ``BY DEFAULT`` form."""
    if isinstance(k, exp.GeneratedAsIdentityColumnConstraint) and k.args.get("expression"):
        raise SqlError(SYNTAX_ERROR, 'syntax error at or near ")"')
    if not isinstance(k, exp.ComputedColumnConstraint):
        return None
    if k.meta.get("by_default"):
        raise SqlError(SYNTAX_ERROR, "for a generated column, GENERATED ALWAYS must be specified")
    body = k.this
    while isinstance(body, exp.Paren):
        body = body.this
    return body.sql(dialect="postgres")


def conflicting_clause(what: str, column: str, table: str) -> SqlError:
    """42601 for a generation expression beside a DEFAULT (``what`` = "default"), an identity
    ("identity") or another generation clause ("generation")."""
    bare = schemas.bare(table)
    if what == "generation":
        message = f'multiple generation clauses specified for column "{column}" of table "{bare}"'
    else:
        message = (
            f'both {what} and generation expression specified for column "{column}" of '
            f'table "{bare}"'
        )
    return SqlError(SYNTAX_ERROR, message)


# -- checking and binding the expression --------------------------------------------------------


def bind(binder: Binder, table: TableDef, col: ColumnDef) -> BExpr:
    """``col``'s generation expression bound over a row of ``table``, cast to its type."""
    assert col.generated is not None
    node = sqlglot.parse_one(col.generated, read="postgres")
    e = binder.exprs.bind(node, row_scope(table))
    return binder.exprs.coerce(e, col.type, assignment=True)


def bind_all(binder: Binder, table: TableDef) -> list[tuple[int, BExpr]]:
    """(position, bound expression) of every generated column of ``table``, for its writer."""
    return [
        (i, bind(binder, table, c)) for i, c in enumerate(table.columns) if c.generated is not None
    ]


def validate(binder: Binder, table: TableDef, col: ColumnDef) -> None:
    """Refuse, as Postgres does when the DDL runs, an expression that is not a pure function
    of the row's ordinary columns: a subquery (0A000), an aggregate (42803) or window
    function (42P20), another generated column (42P17), anything not immutable (42P17), or a
    result that does not convert to the column's type (42804)."""
    assert col.generated is not None
    node = sqlglot.parse_one(col.generated, read="postgres")
    refuse_outside_row(binder, node, "column generation expression")
    for ref in node.find_all(exp.Column):
        other = table.find_column(ref.name)
        if other is not None and other.generated is not None:
            raise SqlError(
                INVALID_OBJECT_DEFINITION,
                f'cannot use generated column "{other.name}" in column generation expression',
                detail="A generated column cannot reference another generated column.",
            )
    e = binder.exprs.bind(node, row_scope(table))
    if any(not_immutable(n) for n in walk(e)):
        raise SqlError(INVALID_OBJECT_DEFINITION, "generation expression is not immutable")
    if not casts.can_assign(e.type, col.type):
        raise SqlError(
            DATATYPE_MISMATCH,
            f'column "{col.name}" is of type {col.type} but default expression is of type {e.type}',
            hint="You will need to rewrite or cast the expression.",
        )


# -- values given to a generated column ---------------------------------------------------------


def insert_error(col: ColumnDef) -> SqlError:
    """428C9: INSERT (or MERGE's) gave ``col`` a value other than DEFAULT."""
    return SqlError(
        GENERATED_ALWAYS,
        f'cannot insert a non-DEFAULT value into column "{col.name}"',
        detail=f'Column "{col.name}" is a generated column.',
    )


def update_error(col: ColumnDef) -> SqlError:
    """428C9: UPDATE (ON CONFLICT DO UPDATE, MERGE's UPDATE) set ``col`` to a value."""
    return SqlError(
        GENERATED_ALWAYS,
        f'column "{col.name}" can only be updated to DEFAULT',
        detail=f'Column "{col.name}" is a generated column.',
    )


def copy_error(col: ColumnDef) -> SqlError:
    """42P10: COPY's column list names ``col``."""
    return SqlError(
        INVALID_COLUMN_REFERENCE,
        f'column "{col.name}" is a generated column',
        detail="Generated columns cannot be used in COPY.",
    )


def set_default_error(table: TableDef, col: ColumnDef) -> SqlError:
    """42601: ALTER COLUMN ... SET / DROP DEFAULT on a generated column."""
    return SqlError(
        SYNTAX_ERROR,
        f'column "{col.name}" of relation "{schemas.bare(table.name)}" is a generated column',
    )


# -- ALTER TABLE ---------------------------------------------------------------------------------


class DropExpression(exp.Expression):
    """The ALTER TABLE action ``ALTER [COLUMN] this DROP EXPRESSION [IF EXISTS]`` (sqlglot
    has none)."""

    arg_types = {"this": True, "exists": False}


def drop_expression(table: TableDef, action: DropExpression, notices: list[str]) -> TableDef:
    """The column becomes an ordinary one; the values stored so far stay (no data work)."""
    col = table.column(action.this.name)
    if col.generated is None:
        message = (
            f'column "{col.name}" of relation "{schemas.bare(table.name)}" is not a stored '
            "generated column"
        )
        if action.args.get("exists"):
            notices.append(f"{message}, skipping")
            return table
        raise SqlError(OBJECT_NOT_IN_PREREQUISITE_STATE, message)
    return _with_column(table, dataclasses.replace(col, generated=None))


def _with_column(table: TableDef, col: ColumnDef) -> TableDef:
    return table.replace(columns=tuple(col if c.id == col.id else c for c in table.columns))


def _reads(col: ColumnDef, name: str) -> bool:
    """Whether ``col``'s generation expression reads the column named ``name``."""
    return col.generated is not None and expression_reads(col.generated, {name})


def users(table: TableDef, column: ColumnDef) -> list[ColumnDef]:
    """The generated columns of ``table`` whose expressions read ``column``."""
    return [c for c in table.columns if c.id != column.id and _reads(c, column.name)]


def rename_column(table: TableDef, old: str, new: str) -> TableDef:
    """After column ``old`` became ``new``: the generation expressions that read it say so."""

    for col in [c for c in table.columns if _reads(c, old)]:
        sql = rename_reads(col.generated or "", old, new)
        table = _with_column(table, dataclasses.replace(col, generated=sql))
    return table


def cascaded(
    table: TableDef, column: ColumnDef, cascade: bool, notices: list[str]
) -> list[ColumnDef]:
    """Before dropping ``column``: the generated columns that read it, which go too with
    CASCADE (a notice, as Postgres's), else 2BP01."""
    dependents = users(table, column)
    if not dependents:
        return []
    bare = schemas.bare(table.name)
    if not cascade:
        raise SqlError(
            DEPENDENT_OBJECTS_STILL_EXIST,
            f"cannot drop column {column.name} of table {bare} because other objects depend on it",
            detail="\n".join(
                f"column {c.name} of table {bare} depends on column {column.name} of table {bare}"
                for c in dependents
            ),
            hint="Use DROP ... CASCADE to drop the dependent objects too.",
        )
    if len(dependents) == 1:
        notices.append(f"drop cascades to column {dependents[0].name} of table {bare}")
    else:
        notices.append(f"drop cascades to {len(dependents)} other objects")
    return dependents


def check_type_change(table: TableDef, column: ColumnDef) -> None:
    """0A000 for ALTER COLUMN ... TYPE of a column a generated column reads."""
    dependents = users(table, column)
    if dependents:
        raise SqlError(
            FEATURE_NOT_SUPPORTED,
            "cannot alter type of a column used by a generated column",
            detail=f'Column "{column.name}" is used by generated column "{dependents[0].name}".',
        )


__all__ = [
    "GENERATED_ALWAYS",
    "DropExpression",
    "bind",
    "bind_all",
    "cascaded",
    "check_type_change",
    "clause_expression",
    "conflicting_clause",
    "copy_error",
    "drop_expression",
    "insert_error",
    "rename_column",
    "set_default_error",
    "update_error",
    "users",
    "validate",
]
